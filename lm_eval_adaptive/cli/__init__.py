"""The command line: one module per command, importing downward only."""

"""The lm-evaluation-harness edge: adaptive runs, sample logs, the document scorer, metrics."""

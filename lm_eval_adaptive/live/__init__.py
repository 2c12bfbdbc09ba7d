"""Live ranking: the dollar ledger, the run journal, the live driver, leaderboards."""

"""The engine, in rooms that use each other in one order (docs/architecture.md): ``irt`` (response models,
item banks, calibration) ← ``cat`` (one model under test) ← ``ranking`` (the ranker, allocation, and
``ranking.pairs``: the pair judgement) ← ``evaluation`` (backtest, simulation, self-check); ``anytime`` is
reserved for the bank-free estimator and anytime-valid intervals. It knows nothing of the harness, HTTP or
the command line."""

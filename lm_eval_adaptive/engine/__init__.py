"""The engine: response models, estimation, selection, item banks, CAT, the ranker, calibration, baselines and the backtest. It knows nothing of the harness, HTTP or the command line."""

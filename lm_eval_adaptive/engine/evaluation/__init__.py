"""How honest the engine is: the backtest, simulation, the self-check and its model error, baselines, the published estimators compared."""

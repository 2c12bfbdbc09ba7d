"""A bank's self-check: how far to trust it, measured before a dollar is spent.

Leave-models-out cross-validation on the very history a bank is calibrated from: hold out a
few models, calibrate on the rest, rank the held-out ones adaptively (the backtest's
protocol, :mod:`lm_eval_adaptive.engine.backtest`), and count how often the stated
uncertainty held. :func:`self_check` reports

* ``full_task_coverage``: the share of held-out models whose 95% full-task interval holds
  their true mean over every item (stated: 0.95);
* ``share_abs_z_over_1_96``: the share of adaptive stops whose θ̂ lies further than 1.96 SE
  from the θ̂ the bank gives on every item (stated: 0.05);
* ``confident_accuracy``: the share of pairs reported as ordered that are in the right order
  (stated: at least γ);

with how many tests each figure rests on. ``calibrate`` stores it in the bank's diagnostics
and prints it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from lm_eval_adaptive.engine.backtest import BacktestConfig, backtest

__all__ = ["SelfCheck", "self_check", "MIN_MODELS"]

#: Fewest models a self-check can run on: a hold-out pair and two to calibrate on.
MIN_MODELS = 4


@dataclass(frozen=True)
class SelfCheck:
    """The measured trust of a bank (see the module docstring)."""

    models: int
    holdout_size: int
    folds: int
    seeds: int
    tests: int  # held-out model runs
    full_task_coverage: float
    share_abs_z_over_1_96: float
    confident_accuracy: float | None
    mean_tau: float

    def to_dict(self) -> dict:
        return asdict(self)


def self_check(table, *, scaling: str, method: str, likelihood: str = "quasi", confidence: float = 0.95,
               holdout_size: int = 4, folds: int = 5, seeds: int = 2, min_items: int = 10,
               target_items: int = 20) -> SelfCheck | None:
    """Leave-models-out cross-validation of the calibration on ``table`` (None: too few models).

    Hold-out sets of ``holdout_size`` models (fewer on a small table, at least 2), as many
    complete sets as fit with two models left to calibrate on (at most ``folds``); each is
    ranked ``seeds`` times at the backtest's budget of ``target_items`` items per model.
    """
    n = int(table.n_models)
    if n < MIN_MODELS:
        return None
    h = min(holdout_size, n - 2)
    config = BacktestConfig(holdout_size=h, folds=folds, seeds=seeds, confidence=confidence,
                            min_items=min_items, target_items=target_items, scaling=scaling, method=method,
                            likelihood=likelihood, bootstrap=200)
    r = backtest(table, config=config)
    acc = r.confident_accuracy
    return SelfCheck(models=n, holdout_size=h, folds=r.folds_run, seeds=seeds, tests=r.folds_run * seeds * h,
                     full_task_coverage=r.full_task_coverage,
                     share_abs_z_over_1_96=r.se_calibration.get("share_abs_z_over_1_96", float("nan")),
                     confident_accuracy=None if acc != acc else acc, mean_tau=r.adaptive.tau)

"""A bank's self-check: how far to trust it, measured before a dollar is spent.

Leave-models-out cross-validation on the very history a bank is calibrated from: hold out a
few models, calibrate on the rest, rank the held-out ones adaptively (the backtest's
protocol, :mod:`lm_eval_adaptive.engine.evaluation.backtest`, with the judgement the product ranks with:
the full-task metric's scale and its default stopping policy), and count how often the stated
uncertainty held. :func:`self_check` reports

* ``full_task_coverage``: the share of held-out models whose 95% full-task interval (the θ-scale one,
  :func:`~lm_eval_adaptive.engine.cat.full_task.full_task_estimate`'s, which the correction widens) holds
  their true mean over every item (stated: 0.95);
* ``share_abs_z_over_1_96``: the share of adaptive stops whose θ̂ lies further than 1.96 SE
  from the θ̂ the bank gives on every item (stated: 0.05);
* ``confident_accuracy``: the share of pairs reported as ordered that are in the right order
  (stated: at least γ);

with how many tests each figure rests on, and the correction the engine then applies
(:mod:`lm_eval_adaptive.engine.evaluation.model_error`: a model-error SD added to every ability SE and
one added to every full-task interval, each for models that fit and for models the person-fit
statistic flags, chosen so that 95% of these held-out runs are covered) with the coverage and
|z| share the corrected intervals reach on the same runs. ``calibrate`` stores the figures in
the bank's diagnostics and the correction in the bank, and prints both.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from lm_eval_adaptive.engine.evaluation.backtest import SELF_CHECK_MIN_MODELS as MIN_MODELS
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig
from lm_eval_adaptive.engine.evaluation.backtest import self_check_backtest, self_check_taus
from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.irt.calibration import (
    DEFAULT_METHOD,
    DEFAULT_SCALING,
    calibrate,
    resolve_response_model,
)
from lm_eval_adaptive.engine.evaluation.model_error import (
    corrected_figures,
    correction_from_records,
    single_model_check,
)

__all__ = ["SelfCheck", "self_check", "calibrate_checked", "MIN_MODELS"]

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
    correction: dict  # ability_sd, full_task_sd (and *_misfit): what the engine applies with this bank
    corrected_coverage: float  # the full-task coverage of the corrected intervals on the same runs
    corrected_share_abs_z_over_1_96: float
    #: 2PL/3PL banks: records of held-out models tested alone (model_error.single_model_check), and the
    #: share of them whose full-task interval held before the correction (None: no such leg)
    single_model_tests: int = 0
    single_model_coverage: float | None = None
    #: the τ of shared random documents (every held-out model answering the same random documents, ranked by its
    #: mean) at the adaptive runs' spend on the same held-out sets, and the (set, seed) runs both τ rest on: what
    #: the bank-use rule compares (engine/anytime/small_bank.py)
    shared_random_tau: float | None = None
    tau_runs: int = 0

    def to_dict(self) -> dict:
        d = asdict(self)
        if not self.single_model_tests:  # a continuous bank's self-check reads as it did before the leg
            del d["single_model_tests"], d["single_model_coverage"]
        return d


def self_check(table, *, scaling: str, method: str, likelihood: str = "quasi", confidence: float = 0.95,
               holdout_size: int = 4, folds: int = 5, seeds: int = 2, min_items: int = 10,
               target_items: int = 20, response_model: str | None = None,
               guessing: float | None = None, guessing_prior=None) -> SelfCheck | None:
    """Leave-models-out cross-validation of the calibration on ``table`` (None: too few models).

    Hold-out sets of ``holdout_size`` models (fewer on a small table, at least 2), as many
    complete sets as fit with two models left to calibrate on (at most ``folds``); each is
    ranked ``seeds`` times at the backtest's budget of ``target_items`` items per model.
    """
    config = BacktestConfig(holdout_size=holdout_size, folds=folds, self_check_seeds=seeds, confidence=confidence,
                            min_items=min_items, target_items=target_items, scaling=scaling, method=method,
                            likelihood=likelihood, response_model=response_model, guessing=guessing)
    r = self_check_backtest(table, config)
    if r is None:
        return None
    h = r.settings["holdout_size"]
    taus = self_check_taus(r)
    acc = r.confident_accuracy
    records = list(r.records)
    single = []
    if resolve_response_model(table, response_model) != "continuous":  # 2PL/3PL: tests of one model too
        single = single_model_check(table, lambda history: calibrate(
            history, scaling=scaling, method=method, likelihood=likelihood, response_model=response_model,
            guessing=guessing, guessing_prior=guessing_prior))
    correction = correction_from_records(records + single)
    cover, zshare = corrected_figures(records + single, correction)
    single_cover = (float(np.mean([abs(x["err"]) <= (x["hi"] if x["err"] > 0 else x["lo"]) for x in single]))
                    if single else None)
    return SelfCheck(models=int(table.n_models), holdout_size=h, folds=r.folds_run, seeds=seeds,
                     tests=r.folds_run * seeds * h, full_task_coverage=r.theta_full_task_coverage,
                     share_abs_z_over_1_96=r.se_calibration.get("share_abs_z_over_1_96", float("nan")),
                     confident_accuracy=None if acc != acc else acc, mean_tau=r.adaptive.tau,
                     correction=correction, corrected_coverage=cover, corrected_share_abs_z_over_1_96=zshare,
                     single_model_tests=len(single), single_model_coverage=single_cover,
                     shared_random_tau=taus["shared_random_tau"], tau_runs=taus["tau_runs"])

def calibrate_checked(table, *, scaling: str = DEFAULT_SCALING, method: str = DEFAULT_METHOD,
                      likelihood: str = "quasi", check: bool = True, **calibrate_kwargs) -> ItemBank:
    """:func:`~lm_eval_adaptive.engine.irt.calibration.calibrate`, then the bank's self-check on the same
    history: its figures go to ``diagnostics["self_check"]`` (None when the table has too few models)
    and its correction into the bank (``model_error``). ``check=False``: calibration alone."""
    bank = calibrate(table, scaling=scaling, method=method, likelihood=likelihood, **calibrate_kwargs)
    if check:
        # the self-check checks the bank as built: a 2PL/3PL bank's kind (chosen once) and guessing prior
        kind = bank.model.kind if bank.model.per_item else calibrate_kwargs.get("response_model")
        result = self_check(table, scaling=scaling, method=method, likelihood=likelihood,
                            response_model=kind, guessing=calibrate_kwargs.get("guessing"),
                            guessing_prior=calibrate_kwargs.get("guessing_prior"))
        bank.diagnostics["self_check"] = result.to_dict() if result is not None else None
        if result is not None:
            bank.set_model_error(result.correction)
    return bank

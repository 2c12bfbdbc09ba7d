"""When a bank from few models is used, and when the runs fall back to the bank-free estimate (issue 31,
item 3; docs/cold-start.md, *A small history: the fallback*).

The rule, stated before the figures it was checked on: a bank calibrated from fewer than
:data:`MIN_BANK_MODELS` models is **not used by** ``rank`` (the bank-free ranker runs), and one from fewer
than :data:`MIN_BANK_MODELS_ESTIMATE` models **not by** ``run --adaptive`` (the bank-free test runs); each
says so and why. Both thresholds were chosen on the **tuning half only**:

* ``rank`` (``benchmarks/bench_cold_start.py --half tuning --history 0,2,5,10,all``): the smallest measured
  N (of 2, 5, 10) such that the banked ranker with a bank from N models, and from every larger measured N
  (all included), keeps pooled τ within 0.01 of the bank-free ranker's or above it, full-task coverage
  ≥ 0.93 and confident-pair accuracy ≥ 0.97. Stop 30, 2 seeds: N = 2 fails (τ 0.722 against 0.780 bank-free);
  N = 5 (0.803, coverage 0.943), 10 (0.775) and all (0.801) pass: 5. **Re-applied in stop 32 with 10 seeds**,
  after stop 31's engine changes (the bank-free ranker's steer-settle allocation, the final order by prediction,
  the self-check rule at m = 0.10), as m was (2 seeds proved too noisy; ``docs/results/stop32_curve10_*``,
  ``stop32_rules.txt``): bank-free 0.804; N = 5 0.789 fails (below 0.794); N = 10 0.794 passes (by 0.0001;
  coverage 0.967, confident accuracy 0.992); all 0.816 passes: **10**. The report half, not used: bank-free
  0.849, N = 5 0.828, N = 10 0.819, all 0.824.
* ``run --adaptive`` (``benchmarks/bench_small_bank_run.py --half tuning``): the smallest measured N (of 2,
  5, 8, 12, 16, 20) such that the banked estimate with a bank from N models, and from every larger measured
  N (all included), holds the held-out models' full-task means in ≥ 93% of them (pooled) with a narrower
  interval than the bank-free test's at the same number of documents. N = 2: 0.20; 5: 0.87; 8: 0.935 but
  wider; 12: 0.887; 16: 0.923; 20: 0.958 and narrower (0.11 against 0.20 of the range); all: 0.961: 20.

A bank that does not record how many models it was calibrated from (``diagnostics.n_models``) is used as
given: the rule cannot be applied to it.

**The bank's own history decides too** (``rank`` only; issue 31 item 3, "fall back to the bank-free estimate
where the bank adds nothing"). ``calibrate``'s self-check (:mod:`~lm_eval_adaptive.engine.evaluation.self_check`,
a leave-models-out backtest on the bank's own history) ranks each held-out set adaptively and, at the same
spend, by ``shared_random`` (every held-out model answering the same random documents, ranked by its mean: the
bank-free ranker's design). It records both pooled τ (``mean_tau``, ``shared_random_tau``) and the runs they
rest on (``tau_runs``). ``rank`` uses a bank only if its self-check's adaptive τ ≥ shared-random τ − m
(:data:`BANK_USE_MARGIN`); else it runs bank-free and says why. A bank whose self-check lacks these figures
(older banks, or none: too few models) is used as today (the model count alone decides).

The rule for choosing m, **stated before any run with it**: m is chosen on the **tuning half only**
(``benchmarks/bench_honesty.py --half tuning --seeds 1 --settle-seeds 0 --jobs 1 --bank-use-margin M``: in each
fold the backtest applies the rule to that fold's bank, whose self-check runs on the fold's calibration models)
from {never fall back, 0.10, 0.05, 0.0}: the candidate with the highest pooled τ whose pooled confident-pair
accuracy ≥ 0.97 and full-task coverage ≥ 0.93; ties → the one that falls back least (never, then 0.10, 0.05,
0.0). The chosen m is then reported on the report half and REALSumm without retuning.

Measured (tuning half, 29 tables, 1 seed, 145 folds; ``docs/results/stop31_bankuse_tuning_m*.{txt,json}``, never:
``docs/results/stop30_after_dev.json``): never τ 0.772 (confident-pair accuracy 0.991, coverage 0.962); m = 0.10:
0.759 (22 folds fell back; 0.990, 0.964); 0.05: 0.770 (52; 0.986, 0.972); 0.0: 0.768 (74; 0.983, 0.983). Every
candidate passes the accuracy and coverage bars; the highest τ is **never**'s, so :data:`BANK_USE_MARGIN` is
None: ``rank`` does not fall back on the self-check by default (the model count alone decides, as before), and
``calibrate`` prints the self-check's τ against shared random so that a user sees it. On the tuning half the
self-check's comparison (10 runs of the bank's own history) does not pick out the folds where the bank loses.

**Re-applied later in stop 31**, after two engine changes the 1-seed runs predate (the bank-free ranker a rejected
fold falls back to now steers its documents, ``steer-settle``; the banked ranker orders the pairs it leaves open
by the bank's prediction), and with 10 seeds, since 1 seed proved too noisy for gaps this small (the tuning
half's shared-random τ alone moved from 0.726 to 0.787 between 1 and 10 seeds). The same rule, the same
candidates, the tuning half alone deciding (``bench_honesty.py --half both --bank-use-margin M --seeds 10
--settle-seeds 0 --jobs 2``; ``docs/results/stop31_bankuse10_*``; the report half was printed by the same runs,
before the choice, which the rule makes on the tuning half alone): never 0.808 (confident accuracy 0.993, coverage
0.963), m = 0.10: **0.816** (21 of 145 folds fell back; 0.992, 0.968), 0.05: 0.813 (47; 0.991, 0.972), 0.0: 0.815
(63; 0.991, 0.977). Every candidate passes the bars; the highest τ is m = 0.10's, which also falls back least of
the three, so :data:`BANK_USE_MARGIN` is **0.10**. Reported, not tuned: report half 0.816 → 0.824 (20 of 100 folds
fell back; 0.995 = 0.995, coverage 0.961 → 0.970); REALSumm 0.531 → 0.551 (5 of 15; confident accuracy 0.963 →
0.945, 73 confident pairs; coverage 0.977 → 0.982). No shipped bank is rejected at 0.10.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MIN_BANK_MODELS", "MIN_BANK_MODELS_ESTIMATE", "BANK_USE_MARGIN", "min_bank_models", "BankUse",
           "calibration_models", "self_check_taus", "bank_use", "bank_use_of", "calibrate_line", "self_check_line"]

#: The fewest calibration models a bank needs before ``rank`` uses it (module docstring).
MIN_BANK_MODELS = 10
#: The fewest calibration models a bank needs before ``run --adaptive`` uses it (module docstring).
MIN_BANK_MODELS_ESTIMATE = 20
#: m of the self-check rule (module docstring): ``rank`` uses a bank only if its self-check's adaptive τ is at least
#: its shared-random τ − m; None: never fall back on the self-check.
BANK_USE_MARGIN: float | None = 0.10

_MODULE_MARGIN = object()  # bank_use's default: the module's BANK_USE_MARGIN at call time


def min_bank_models(what: str = "ranking") -> int:
    """The threshold of the run doing ``what``: "ranking" (``rank``) or "estimating" (``run --adaptive``)."""
    return MIN_BANK_MODELS_ESTIMATE if what == "estimating" else MIN_BANK_MODELS


@dataclass(frozen=True)
class BankUse:
    """Whether a bank is used, from how many models it was calibrated, and the sentence saying why."""

    use_bank: bool
    n_models: int | None
    reason: str


def calibration_models(bank) -> int | None:
    """How many models ``bank`` was calibrated from (its diagnostics' ``n_models``), None when not recorded."""
    n = (getattr(bank, "diagnostics", None) or {}).get("n_models")
    try:
        return None if n is None else int(n)
    except (TypeError, ValueError):
        return None


def self_check_taus(self_check) -> tuple[float, float, int] | None:
    """(adaptive τ, shared-random τ, runs) of a bank's self-check figures (``diagnostics["self_check"]``), None
    when it lacks them (a bank written before they were recorded, or no self-check) or they are not numbers."""
    check = self_check or {}
    try:
        taus = float(check["mean_tau"]), float(check["shared_random_tau"]), int(check.get("tau_runs") or 0)
    except (KeyError, TypeError, ValueError):
        return None
    return taus if taus[0] == taus[0] and taus[1] == taus[1] else None


def bank_use(n_models: int | None, *, what: str = "ranking", self_check: dict | None = None,
             margin=_MODULE_MARGIN) -> BankUse:
    """The rule of the module docstring for a bank from ``n_models`` models in a run doing ``what`` ("ranking":
    ``rank``; "estimating": ``run --adaptive``), which also names the run's work in the reason. For "ranking",
    ``self_check`` (the bank's self-check figures) and ``margin`` (m; default :data:`BANK_USE_MARGIN`, None:
    never fall back) apply the self-check rule after the model count."""
    need = min_bank_models(what)
    if n_models is not None and n_models < need:
        return BankUse(False, n_models, f"bank from {n_models} model{'s' if n_models != 1 else ''}, too few to use "
                                        f"(a bank needs at least {need} calibration models): {what} without it")
    margin = BANK_USE_MARGIN if margin is _MODULE_MARGIN else margin
    taus = self_check_taus(self_check)
    if what != "ranking" or margin is None or taus is None or taus[0] >= taus[1] - margin - 1e-12:
        return BankUse(True, n_models, "")
    return BankUse(False, n_models, f"the bank's self-check ranked its held-out models worse than shared random "
                                    f"documents (τ {taus[0]:.3f} against {taus[1]:.3f} over {taus[2]} runs; a bank is "
                                    f"used from τ ≥ shared random − {margin:g}): {what} without it")


def bank_use_of(bank, *, what: str = "ranking", margin=_MODULE_MARGIN) -> BankUse:
    """:func:`bank_use` of ``bank``: its number of calibration models and its self-check's figures."""
    return bank_use(calibration_models(bank), what=what, margin=margin,
                    self_check=(getattr(bank, "diagnostics", None) or {}).get("self_check"))


def self_check_line(bank, margin=_MODULE_MARGIN) -> str | None:
    """What ``calibrate`` says of ``bank``'s self-check against shared random documents, and whether ``rank``
    will use the bank on it; None when the self-check lacks the figures or the bank's models are too few to
    use anyway (:func:`calibrate_line` says so)."""
    taus = self_check_taus((getattr(bank, "diagnostics", None) or {}).get("self_check"))
    n = calibration_models(bank)
    if taus is None or (n is not None and n < MIN_BANK_MODELS):
        return None
    margin = BANK_USE_MARGIN if margin is _MODULE_MARGIN else margin
    used = bank_use_of(bank, margin=margin).use_bank
    rule = "the rule on it is off" if margin is None else f"it needs τ ≥ shared random − {margin:g}"
    return (f"self-check τ {taus[0]:.3f} against {taus[1]:.3f} for shared random documents at the same spend "
            f"({taus[2]} runs): rank {'will use this bank' if used else 'will not use this bank (bank-free)'} "
            f"({rule}; docs/cold-start.md)")


def calibrate_line(n_models: int | None) -> str | None:
    """What ``calibrate`` says of a bank from ``n_models`` models: one line when a run will not use it."""
    if n_models is None or n_models >= MIN_BANK_MODELS_ESTIMATE:
        return None
    few = f"a bank from {n_models} model{'s' if n_models != 1 else ''}"
    if n_models < MIN_BANK_MODELS:
        return (f"{few} is not used: rank and run --adaptive run without it (bank-free, intervals valid whenever "
                f"the run stops); rank uses a bank from {MIN_BANK_MODELS} models, run --adaptive from "
                f"{MIN_BANK_MODELS_ESTIMATE} (measured on the dev tables: docs/cold-start.md)")
    return (f"{few} is used by rank, not by run --adaptive (bank-free there: its estimate from a bank of fewer than "
            f"{MIN_BANK_MODELS_ESTIMATE} models missed the full-task mean too often on the dev tables; "
            "docs/cold-start.md)")

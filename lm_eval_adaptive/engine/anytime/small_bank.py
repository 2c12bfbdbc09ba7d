"""When a bank from few models is used, and when the runs fall back to the bank-free estimate (issue 31,
item 3; docs/cold-start.md, *A small history: the fallback*).

The rule, stated before the curve it was checked on: a bank calibrated from fewer than
:data:`MIN_BANK_MODELS` models is **not used**; ``rank`` runs the bank-free ranker and ``run --adaptive``
the bank-free test on the task's documents, and each says so and why. ``MIN_BANK_MODELS`` was chosen on
the **tuning half only** (``benchmarks/bench_cold_start.py --half tuning --history 0,2,5,10,all``) as the
smallest measured N (of 2, 5, 10) such that the banked ranker with a bank from N models, and from every
larger measured N (all included), keeps pooled τ within 0.01 of the bank-free ranker's or above it,
full-task coverage ≥ 0.93 and confident-pair accuracy ≥ 0.97. Tuning half: N = 2 fails (τ 0.722
against 0.780 bank-free); N = 5 (0.803, coverage 0.943), 10 (0.775) and all (0.801) pass: 5.

A bank that does not record how many models it was calibrated from (``diagnostics.n_models``) is used as
given: the rule cannot be applied to it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MIN_BANK_MODELS", "BankUse", "calibration_models", "bank_use", "calibrate_line"]

#: The fewest calibration models a bank needs before ``rank`` and ``run --adaptive`` use it (module docstring).
MIN_BANK_MODELS = 5


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


def bank_use(n_models: int | None, *, what: str = "ranking") -> BankUse:
    """The rule of the module docstring for a bank from ``n_models`` models; ``what`` names the run's work in
    the reason ("ranking", "estimating")."""
    if n_models is None or n_models >= MIN_BANK_MODELS:
        return BankUse(True, n_models, "")
    return BankUse(False, n_models, f"bank from {n_models} model{'s' if n_models != 1 else ''}, too few to use (a bank "
                                    f"needs at least {MIN_BANK_MODELS} calibration models): {what} without it")


def calibrate_line(n_models: int | None) -> str | None:
    """What ``calibrate`` says of a bank from ``n_models`` models: one line when it is too small to be used."""
    if n_models is None or n_models >= MIN_BANK_MODELS:
        return None
    return (f"a bank from {n_models} model{'s' if n_models != 1 else ''} is not used: rank and run --adaptive "
            f"run without it (bank-free, intervals valid whenever the run stops) until it is calibrated from at "
            f"least {MIN_BANK_MODELS} models; on the dev tables a bank from 2 models ranked worse than no bank "
            "(docs/cold-start.md)")

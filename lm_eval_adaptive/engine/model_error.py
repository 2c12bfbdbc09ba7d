"""The model error a bank's self-check measures, and the correction the engine then applies.

The response model is an approximation: on models it never saw, θ̂ misses the ability the
same bank gives on every item by more than the posterior SE says, and full-task estimates
miss the true mean by more than their interval allows (item × model interaction, models
whose curve differs). Most of that miss is a bias of the model's curve against the bank's,
which does not shrink as items are added. Leave-models-out cross-validation on the
calibration history (:mod:`lm_eval_adaptive.engine.self_check`, and nested inside every
backtest fold) yields, per held-out model run, the miss ``d = θ̂ − θ̂_all`` against its stated
variance ``s2 = SE² − SE_all²``, the full-task miss ``err = T − T̂`` against the interval's
half-widths (at SE and at 2·SE, so the part that grows with SE is known), and whether the run
was flagged by the person-fit statistic.

:func:`correction_from_records` turns them into two *additive* model-error SDs, each measured
separately for runs that fit and runs the person-fit statistic flagged (a flagged model gets
its own, wider, correction). Both are the smallest values that cover 95% of the held-out runs
(the stated level, no tuned constant):

* ``ability_sd`` (τ): every ability SE becomes √(SE² + τ²); τ² is the 95% quantile of
  d²/1.96² − s2, so 95% of the held-out |z| = |d| / √(s2 + τ²) are within 1.96;
* ``full_task_sd`` (σ, metric units): full-task intervals (at the corrected SE) are widened by
  1.96·σ in quadrature; σ² is the 95% quantile of (err² − h²)/1.96², h the interval's
  half-width on the side of the miss, so 95% of the held-out misses fall inside.

Keys: ``ability_sd``, ``full_task_sd`` (runs that fit), ``ability_sd_misfit``,
``full_task_sd_misfit`` (flagged runs; the pooled value when fewer than
:data:`MIN_CLASS_RUNS` were flagged), ``runs``, ``misfit_runs``.
"""

from __future__ import annotations

import numpy as np

from lm_eval_adaptive.engine.estimation import Z95

__all__ = ["correction_from_records", "corrected_figures", "describe_correction", "MIN_CLASS_RUNS", "Z95"]

#: Fewest runs a person-fit class needs for its own constants (else the pooled ones): a 95%
#: quantile of fewer runs is little more than their maximum.
MIN_CLASS_RUNS = 20


def _arrays(recs) -> dict:
    err = np.array([r["err"] for r in recs], dtype=float)
    up = err > 0
    return {"d": np.array([r["d"] for r in recs], dtype=float),
            "s2": np.array([r["s2"] for r in recs], dtype=float),
            "se": np.array([r.get("se", np.nan) for r in recs], dtype=float),
            "err": err,
            "h1": np.where(up, [r["hi"] for r in recs], [r["lo"] for r in recs]),
            "h2": np.where(up, [r["hi2"] for r in recs], [r["lo2"] for r in recs]),
            "misfit": np.array([bool(r.get("misfit", False)) for r in recs])}


def _widened(a: dict, tau: np.ndarray) -> np.ndarray:
    """The full-task half-widths with √(SE² + τ²) in place of SE: the ability part of the interval
    grows about linearly in the SE (h at SE, h2 at 2·SE)."""
    se = a["se"]
    ok = np.isfinite(se) & (se > 0)
    factor = np.where(ok, np.sqrt(np.where(ok, se, 1.0) ** 2 + tau ** 2) / np.where(ok, se, 1.0), 1.0)
    return a["h1"] + (factor - 1.0) * np.maximum(a["h2"] - a["h1"], 0.0)


def _constants(a: dict, sel: np.ndarray, level: float) -> tuple[float, float]:
    """(τ, σ) from the runs ``sel``: the smallest values with which ``level`` of them are covered."""
    if not sel.any():
        return 0.0, 0.0
    need_tau2 = a["d"][sel] ** 2 / Z95 ** 2 - a["s2"][sel]  # τ² that brings each |z| to 1.96
    tau = float(np.sqrt(max(float(np.quantile(need_tau2, level)), 0.0)))
    h = _widened({k: v[sel] for k, v in a.items()}, np.full(int(sel.sum()), tau))
    need_sig2 = (a["err"][sel] ** 2 - h ** 2) / Z95 ** 2  # σ² that brings each miss inside
    sig = float(np.sqrt(max(float(np.quantile(need_sig2, level)), 0.0)))
    return tau, sig


def correction_from_records(records, *, level: float = 0.95) -> dict:
    """The correction (see the module docstring) from self-check records; {} without records."""
    recs = list(records)
    if not recs:
        return {}
    a = _arrays(recs)
    every = np.ones(len(recs), dtype=bool)
    tau, sig = _constants(a, every, level)
    mis = a["misfit"]
    tau_f, sig_f = _constants(a, ~mis, level) if (~mis).sum() >= MIN_CLASS_RUNS else (tau, sig)
    tau_m, sig_m = _constants(a, mis, level) if mis.sum() >= MIN_CLASS_RUNS else (tau, sig)
    return {"ability_sd": round(tau_f, 6), "full_task_sd": round(sig_f, 8),
            "ability_sd_misfit": round(tau_m, 6), "full_task_sd_misfit": round(sig_m, 8),
            "runs": len(recs), "misfit_runs": int(mis.sum())}


def corrected_figures(records, correction: dict) -> tuple[float, float]:
    """(full-task coverage, share of |z| > 1.96) of the corrected intervals on the same records."""
    recs = list(records)
    if not recs:
        return float("nan"), float("nan")
    a = _arrays(recs)
    mis = a["misfit"]
    tau = np.where(mis, correction.get("ability_sd_misfit", 0.0), correction.get("ability_sd", 0.0))
    sig = np.where(mis, correction.get("full_task_sd_misfit", 0.0), correction.get("full_task_sd", 0.0))
    ok = a["s2"] + tau ** 2 > 0
    z = np.abs(a["d"][ok]) / np.sqrt(a["s2"][ok] + tau[ok] ** 2)
    h = np.hypot(_widened(a, tau), Z95 * sig)
    return float(np.mean(np.abs(a["err"]) <= h)), float(np.mean(z > Z95)) if z.size else float("nan")


def describe_correction(c: dict) -> str:
    """The correction on one line, for reports."""
    if not c:
        return "no model-error correction"
    return (f"model error {c.get('ability_sd', 0.0):.3g} added to every ability SE in quadrature "
            f"({c.get('ability_sd_misfit', 0.0):.3g} for models the person-fit statistic flags); full-task "
            f"intervals widened by ±1.96 × {c.get('full_task_sd', 0.0):.4g} "
            f"({c.get('full_task_sd_misfit', 0.0):.4g} when flagged) in quadrature")

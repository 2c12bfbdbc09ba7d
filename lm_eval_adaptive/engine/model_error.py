"""The model error a bank's self-check measures, and the correction the engine then applies.

The response model is an approximation: on models it never saw, θ̂ misses the ability the
same bank gives on every item by more than the posterior SE says, and full-task estimates
miss the true mean by more than their interval allows (item × model interaction, models
whose curve differs). Leave-models-out cross-validation on the calibration history
(:mod:`lm_eval_adaptive.engine.self_check`, and nested inside every backtest fold) yields,
per held-out model run, the miss ``d = θ̂ − θ̂_all`` against its stated variance
``SE² − SE_all²``, and the full-task miss ``err = T − T̂`` against the interval's half-widths
(at SE and at 2·SE, so the part that grows with SE is known).

:func:`correction_from_records` turns them into

* ``se_factor`` = max(1, q₉₅(|z|) / 1.96), z = d / √(SE² − SE_all²): every ability SE is
  multiplied by it, so 95% of the held-out |z| fall within 1.96 corrected SEs;
* ``full_task_sd``: the smallest σ such that, with the SE factor applied, 95% of the
  held-out full-task misses lie within the interval widened by z·σ in quadrature.

A model that fits gets intervals a little wider than its posterior alone; the price of
honesty on the ones that do not.
"""

from __future__ import annotations

import numpy as np

from lm_eval_adaptive.engine.estimation import Z95

__all__ = ["correction_from_records", "corrected_figures", "Z95"]



def _held_out_z(recs) -> np.ndarray:
    """|z| = |d| / √(SE² − SE_all²) of the runs whose stated variance is positive (before any factor)."""
    d = np.array([r["d"] for r in recs], dtype=float)
    s2 = np.array([r["s2"] for r in recs], dtype=float)
    ok = s2 > 0
    return np.abs(d[ok]) / np.sqrt(s2[ok])


def _misses(recs, se_factor: float, full_task_sd: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(full-task misses T − T̂, the interval's half-width on the side of each miss) with the SE
    multiplied by ``se_factor`` and ``full_task_sd`` added in quadrature."""
    err = np.array([r["err"] for r in recs], dtype=float)
    up = err > 0
    h1 = np.where(up, [r["hi"] for r in recs], [r["lo"] for r in recs])
    h2 = np.where(up, [r["hi2"] for r in recs], [r["lo2"] for r in recs])
    h = h1 + (se_factor - 1.0) * np.maximum(h2 - h1, 0.0)  # the ability part grows about linearly in SE
    return err, np.hypot(h, Z95 * full_task_sd)


def correction_from_records(records, *, level: float = 0.95) -> dict:
    """``{"se_factor", "full_task_sd", "runs"}`` from self-check records (see the module docstring)."""
    recs = list(records)
    if not recs:
        return {}
    z = _held_out_z(recs)
    factor = max(1.0, float(np.quantile(z, level)) / Z95) if z.size else 1.0
    err, h = _misses(recs, factor)
    need = np.sqrt(np.maximum(err * err - h * h, 0.0)) / Z95
    sd = float(np.quantile(need, level))
    return {"se_factor": round(factor, 6), "full_task_sd": round(sd, 8), "runs": len(recs)}


def corrected_figures(records, correction: dict) -> tuple[float, float]:
    """(full-task coverage, share of |z| > 1.96) of the corrected intervals on the same records."""
    recs = list(records)
    if not recs:
        return float("nan"), float("nan")
    f, sd = correction.get("se_factor", 1.0), correction.get("full_task_sd", 0.0)
    err, h = _misses(recs, f, sd)
    z = _held_out_z(recs) / f
    return float(np.mean(np.abs(err) <= h)), float(np.mean(z > Z95)) if z.size else float("nan")

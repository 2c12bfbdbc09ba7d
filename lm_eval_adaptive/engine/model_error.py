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

__all__ = ["correction_from_records", "Z95"]

Z95 = 1.959963984540054


def correction_from_records(records, *, level: float = 0.95) -> dict:
    """``{"se_factor", "full_task_sd", "runs"}`` from self-check records (see the module docstring)."""
    recs = list(records)
    if not recs:
        return {}
    d = np.array([r["d"] for r in recs], dtype=float)
    s2 = np.array([r["s2"] for r in recs], dtype=float)
    ok = s2 > 0
    factor = 1.0
    if ok.any():
        z = np.abs(d[ok]) / np.sqrt(s2[ok])
        factor = max(1.0, float(np.quantile(z, level)) / Z95)
    err = np.array([r["err"] for r in recs], dtype=float)
    up = err > 0
    h1 = np.where(up, [r["hi"] for r in recs], [r["lo"] for r in recs])
    h2 = np.where(up, [r["hi2"] for r in recs], [r["lo2"] for r in recs])
    h = h1 + (factor - 1.0) * np.maximum(h2 - h1, 0.0)  # the half-width at the corrected SE
    need = np.sqrt(np.maximum(err * err - h * h, 0.0)) / Z95
    sd = float(np.quantile(need, level))
    return {"se_factor": round(factor, 6), "full_task_sd": round(sd, 8), "runs": len(recs)}

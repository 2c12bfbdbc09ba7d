"""Remedy 7: person-fit statistic for the continuous response model.

l_z (Drasgow, Levine & Williams 1985) for the normal likelihood N(y; μ, k·μ(1-μ)): each item's
log-density is -½·log(2πσ_i²) - ½·r_i²/σ_i² with r_i²/σ_i² ~ χ²_1 under the model, so
E = Σ(-½ log 2πσ_i² - ½), Var = n/2 and l_z = -(Σ r_i²/σ_i² - n)/√(2n): a standardised Pearson
dispersion. Large negative l_z = the model's residuals are larger than the bank predicts
(misfit). μ(1-μ) is floored at 0.01 so items at the extremes do not dominate.
"""
from __future__ import annotations

import numpy as np


def person_fit_lz(est, floor: float = 0.01) -> float:
    n = est.n
    if n < 2:
        return float("nan")
    a, r, v = est.residuals()
    x = r * r / (est.bv.k * np.maximum(v, floor))
    return float(-(np.sum(x) - n) / np.sqrt(2 * n))


def flag(lz: float, threshold: float = -1.645) -> bool:
    """Flag a misfitting model (one-sided 5% by default)."""
    return bool(np.isfinite(lz) and lz < threshold)

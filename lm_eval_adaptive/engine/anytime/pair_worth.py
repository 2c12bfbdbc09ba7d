"""What one more common document of an open pair is worth to the bank-free ranker's allocation.

The bank-free ranker (:mod:`~lm_eval_adaptive.engine.anytime.bank_free_ranker`) gives the next document to
the model whose open pairs it helps most. How an open pair is weighed is the allocation
(:data:`ALLOCATIONS`):

* ``settle``: every open pair alike (weight 1);
* ``uncertainty``: 2·min(P, 1 − P), P the normal approximation of P(a > b) (:func:`p_order`);
* ``steer``: the chance that the paired mean puts the pair in the wrong order, by Student's t on the
  paired differences so far (df = n − 1, with the finite-population correction), doubled so that a
  pair at t = 0 weighs 1, and 1 until the pair has :data:`STEER_WARMUP` common documents (a t-statistic
  from fewer is noise). Pairs far apart weigh little, close ones fully;
* ``steer-settle``: ``steer``, but 1 for a pair about to be ordered: its confidence sequence, were its
  half-width to shrink as 1/√n, would exclude 0 by the time its common documents double (a clear pair is
  then claimed, not left open because its order is no longer in doubt).

These weights only **steer** who answers next. They are not anytime-valid and decide nothing: every
``ordered``/``equivalent`` decision and every interval stays the confidence sequences'. Steering cannot
void them: each model's and each pair's documents are the prefix of the one shared random order drawn
before any score, and the weights only choose *when* a prefix grows (a confidence sequence holds at
every stopping time).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtr, stdtr

__all__ = ["ALLOCATIONS", "DEFAULT_ALLOCATION", "STEER_WARMUP", "pair_weight", "p_order", "about_to_settle"]

#: How a pair's worth is weighed (module docstring).
ALLOCATIONS = ("settle", "uncertainty", "steer", "steer-settle")
#: The bank-free ranker's allocation, in ``rank`` and in every backtest (docs/cold-start.md: chosen by rules stated
#: before their runs).
DEFAULT_ALLOCATION = "steer-settle"
#: Common documents a pair needs before ``steer`` weighs it by its t-statistic (weight 1 until then).
STEER_WARMUP = 5
#: The least weight of an open pair (it never drops out of the allocation for good).
FLOOR = 1e-6


def _paired_t(d: np.ndarray, pop: int) -> float | None:
    """The paired mean over its standard error (finite-population corrected); None when undefined
    (fewer than 2 differences, the whole population taken, or no spread and a zero mean); ±inf when
    the differences have no spread around a non-zero mean."""
    n = d.size
    mean = float(d.mean()) if n else 0.0
    fpc = max(0.0, 1.0 - n / pop) if pop else 0.0
    if n < 2 or fpc == 0.0:
        return None
    se = float(d.std(ddof=1)) * math.sqrt(fpc / n)
    if se == 0.0:
        return None if mean == 0.0 else math.copysign(math.inf, mean)
    return mean / se


def p_order(d: np.ndarray, pop: int) -> float:
    """P(a > b) by the normal approximation of the paired mean ``d`` (a − b on the common documents so
    far, ``pop`` of them in all) with its finite-population correction (a display figure, as the banked
    ranker's; the decisions are the confidence sequences')."""
    n = d.size
    if n == 0:
        return 0.5
    t = _paired_t(d, pop)
    if t is None:
        mean = float(d.mean())
        return 0.5 if mean == 0 or n < 2 else float(mean > 0)
    return float(ndtr(t))


def about_to_settle(d: np.ndarray, interval: tuple[float, float] | None) -> bool:
    """Would the pair's confidence sequence (``interval`` now, over the differences ``d``) exclude 0 by
    the time its documents double, were its half-width to shrink as 1/√n? (A steering signal only.)"""
    if interval is None or d.size < STEER_WARMUP:
        return False
    mean = abs(float(d.mean()))
    half = (float(interval[1]) - float(interval[0])) / 2.0
    return mean > 0.0 and half * half / (mean * mean) <= 2.0


def pair_weight(allocation: str, d: np.ndarray, pop: int, interval: tuple[float, float] | None = None) -> float:
    """The weight of an open pair with paired differences ``d`` so far (``pop`` common documents in
    all; ``interval``: its confidence sequence now, for ``steer-settle``) under ``allocation`` (module
    docstring); in [:data:`FLOOR`, 1]."""
    if allocation == "settle":
        return 1.0
    if allocation == "uncertainty":
        p = p_order(d, pop)
        return max(2.0 * min(p, 1.0 - p), FLOOR)
    if allocation in ("steer", "steer-settle"):
        if d.size < STEER_WARMUP or (allocation == "steer-settle" and about_to_settle(d, interval)):
            return 1.0
        t = _paired_t(d, pop)
        if t is None:
            return 1.0
        return max(2.0 * float(stdtr(d.size - 1, -abs(t))), FLOOR)
    raise ValueError(f"allocation must be one of {ALLOCATIONS}, got {allocation!r}")

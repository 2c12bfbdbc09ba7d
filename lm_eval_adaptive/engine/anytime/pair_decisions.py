"""Pair decisions from anytime-valid confidence sequences of paired differences.

Two models that answered the same documents (the bank-free ranker's shared random order) give a
difference d_i = y_a,i − y_b,i in [lo − hi, hi − lo] on each. The full-task difference of the two
means over the N documents both have is exactly the population mean of the d_i, so the confidence
sequence of :mod:`~lm_eval_adaptive.engine.anytime.confidence_sequence` on the d_i, in the order drawn,
is an anytime-valid interval of the full-task difference (zero width once both answered every one).

Three outcomes, as on the metric scale (docs/metric-scale.md), from the interval [L, U] at level γ:

* ``ordered``: the interval excludes 0 (L > 0 or U < 0);
* ``equivalent``: it lies inside ±δ, the tie margin (two full runs with equal means, at any δ ≥ 0);
  ``ordered`` is checked first;
* ``unresolved``, with its cost to settle (:func:`settle_projection`): never "impossible", because the
  interval is exact once both models answered every common document.

Multiplicity: by default each pair at level γ, as the banked ranker decides (a claim about one pair
holds at γ; the ranking as a whole does not). ``family_wise`` gives every pair level
1 − (1 − γ)/P for P pairs (Bonferroni): every claim of the run holds at once with probability ≥ γ,
whenever the run stops (a union bound over the pairs' confidence sequences: each is anytime-valid).
"""

from __future__ import annotations

import numpy as np

from lm_eval_adaptive.engine.anytime.confidence_sequence import WorBettingCS
from lm_eval_adaptive.engine.ranking.pairs.outcomes import EQUIVALENT, ORDERED, UNRESOLVED

__all__ = ["decide", "pair_alpha", "settle_projection", "ORDERED", "EQUIVALENT", "UNRESOLVED", "SETTLE_PATHS"]

#: Simulated continuations behind a stated cost to settle.
SETTLE_PATHS = 64
#: Grid points a continuation keeps (its interval's span, evenly spaced): a projection, not a claim.
PROJECTION_GRID = 41


def decide(lower: float, upper: float, margin: float = 0.0, tol: float = 0.0) -> str:
    """The outcome of a pair whose difference lies in [``lower``, ``upper``] (see the module docstring).
    ``tol``: a difference within it of 0 counts as 0 (float rounding of two exact equal means)."""
    if lower > tol or upper < -tol:
        return ORDERED
    if lower >= -margin - tol and upper <= margin + tol:
        return EQUIVALENT
    return UNRESOLVED


def pair_alpha(confidence: float, n_pairs: int, family_wise: bool) -> float:
    """The error level each pair's confidence sequence runs at: 1 − γ, or (1 − γ)/P family-wise."""
    alpha = 1.0 - float(confidence)
    return alpha / max(1, int(n_pairs)) if family_wise else alpha


def settle_projection(cs: WorBettingCS, seen: np.ndarray, margin: float, rng: np.random.Generator,
                      paths: int = SETTLE_PATHS, most: int | None = None, enough: int | None = None) -> np.ndarray:
    """Further common documents at which a pair's confidence sequence ``cs`` (one sequence, over the
    pair's differences; ``seen`` the differences taken so far) settles, in ``paths`` simulated
    continuations: each draws the unseen differences by resampling ``seen`` (a bootstrap of the pair at
    its current estimate) and runs the sequence on until the pair is ordered or equivalent; a path that
    reaches the last document is exact and settled there. Returns the documents of each path, each at
    most the documents left (``cs.n − cs.t``). ``most``: simulate no further than that many documents (a
    path not settled by then reads as the documents left: a question of "within ``most``?" needs no more);
    ``enough``: stop once that many paths settled (the others read as the documents left)."""
    left = int(cs.n - cs.t)
    if left <= 0:
        return np.zeros(paths, dtype=np.int64)
    seen = np.asarray(seen, dtype=float)
    sim = cs.copy_batch((paths,))
    sim.narrow_grid(PROJECTION_GRID)
    done = np.zeros(paths, dtype=bool)
    steps = np.full(paths, left, dtype=np.int64)
    pool = seen if seen.size else np.array([0.0])
    for k in range(1, left + 1):
        if most is not None and k > most:
            break
        x = pool[rng.integers(pool.size, size=paths)]
        sim.update(x, mask=~done)
        if k == left:
            break
        lo, hi = sim.lower, sim.upper
        now = ~done & ((lo > 0) | (hi < 0) | ((lo >= -margin) & (hi <= margin)))
        steps[now] = k
        done |= now
        if done.all() or (enough is not None and int(done.sum()) >= enough):
            break
    return steps

"""Item selection for 2PL/3PL banks by information with shrunk slopes (docs/binary.md).

Maximum information on a 2PL/3PL bank ranks items by a_i²·…: it picks the items whose *estimated*
slope is highest. Slopes estimated from a few hundred models are noisy, so the items picked are
those whose slope is overestimated most, and the information the ability SE is built on is
overstated (capitalisation on chance, van der Linden & Glas 2000): on mmlu_pro_math_7b 15-20% of
held-out models' θ̂ fall more than 1.96 SE from their θ̂ on every item after 20-100 adaptive items.
Choosing by the information the item would have with its log-slope pulled toward the bank's mean
(``shrink`` = 1: one common slope, the geometric mean of the bank's) removes most of that, while
the ability estimate keeps every item's own slope. :class:`ShrunkSlopeSelector` is
:class:`~lm_eval_adaptive.engine.cat.selection.RandomShareSelector` (every second item at random) with
that information; :func:`shrunk_slope_information` is the information alone, for any selector
that takes one.
"""

from __future__ import annotations

import numpy as np

from lm_eval_adaptive.engine.cat.selection import DEFAULT_RANDOM_SHARE, RandomShareSelector

__all__ = ["ShrunkSlopeSelector", "shrunk_slope_information", "COMMON_SLOPE"]

#: ``shrink`` of a common slope: every item's information computed with the bank's geometric-mean slope.
COMMON_SLOPE = 1.0


def shrunk_slope_information(bank, shrink: float = COMMON_SLOPE):
    """``theta, items=slice(None) -> information`` of a 2PL/3PL ``bank``'s items with log a_i replaced by
    (1 − shrink)·log a_i + shrink·mean(log a) (difficulty and guessing as they are)."""
    if not bank.model.per_item:
        raise ValueError("shrunk-slope information needs a 2PL/3PL bank (per-item slopes)")
    if not 0.0 <= float(shrink) <= 1.0:
        raise ValueError(f"shrink must be in [0, 1], got {shrink}")
    log_a = np.log(np.asarray(bank.a, dtype=float))
    a = np.exp((1.0 - shrink) * log_a + shrink * float(np.mean(log_a)))
    b, c, model = bank.b, bank.c, bank.model

    def information(theta, items=slice(None)):
        return model.information(theta, b[items], a=a[items], c=c[items])

    return information


class ShrunkSlopeSelector(RandomShareSelector):
    """:class:`~lm_eval_adaptive.engine.cat.selection.RandomShareSelector` on a 2PL/3PL bank, choosing its
    informative slots by :func:`shrunk_slope_information` (``shrink``: 1, a common slope)."""

    def __init__(self, bank, top_k: int = 1, *, shrink: float = COMMON_SLOPE, share: float = DEFAULT_RANDOM_SHARE,
                 seed=None):
        super().__init__(bank.b, top_k, share=share, seed=seed, information=shrunk_slope_information(bank, shrink))
        self.shrink = float(shrink)

    @property
    def name(self) -> str:
        return f"max-info(slope shrink={self.shrink:g})+random(share={self.share:g},seed={self.seed})"

"""The status of a ranking's pairs under one metric: the seam between the examinees and the rankers.

A ranker keeps one :class:`PairJudgement` per metric (one for a single bank, one per bank of a
several-metric run) and asks it two things:

* :meth:`PairJudgement.open_pairs` (at every ask after the warm-up): the order of the models and the
  pairs more items should settle, as an :class:`OpenPairs` — with, per model, the uncertainty one more
  of its items removes, and whether items for a model alone could settle its pair with a partner the
  caller cannot pay for now. The allocation policy (:mod:`lm_eval_adaptive.engine.ranking.allocation`) buys
  items for the models in those pairs.
* :meth:`PairJudgement.report` (for a result): the ranking, the status of every pair (ordered,
  equivalent or unresolved, with what settling it costs where the judgement knows), rank ranges, the
  adjacent confidences and the pairs still open.

Both take the budget left (USD; None without a budget), for a judgement whose stopping policy weighs it.

The one judgement is :class:`~lm_eval_adaptive.engine.ranking.pairs.metric_judgement.MetricScaleJudgement`, on the
full-task metric's own scale (the self-check ranks with it too); the protocol is what a ranker reads of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Protocol, Sequence, runtime_checkable

import numpy as np


__all__ = ["OpenPairs", "PairReport", "PairJudgement"]


class OpenPairs(NamedTuple):
    """What the allocation reads of one metric's pairs, by position in the models it was asked about.

    ``order``: positions, best first; ``pairs``: the pairs (a, b) of positions, a ranked above b, that
    more items should settle (the allocation buys items for their models); ``worth(j, k)``: the
    uncertainty one more item of model j removes from its pairs in ``pairs``, given k of its items in
    flight (in the judgement's own units; the allocation adds them over metrics and divides by the
    model's relative cost); ``futile(j, p)``: True when items for model j alone cannot settle its pair
    with p (asked only when p cannot be given items now); ``metric``: whose pairs these are (the
    judgement's metric name, None for a single bank); ``stopped``: the pairs not settled that the
    judgement gives no more items (its stopping policy), none of them in ``pairs``."""

    order: list
    pairs: list
    worth: Callable[[int, int], float]
    futile: Callable[[int, int], bool]
    metric: str | None = None
    stopped: int = 0


@dataclass
class PairReport:
    """What a result reads of one metric's pairs: the ranking (best first) and, for it, θ̂ and SE,
    P(ranking[i] > ranking[j]), every pair not ordered (``ties``), those settled as equivalent, the
    adjacent confidences and tie groups, the adjacent pairs no number of items settles
    (``inseparable``: none, no pair is given up; kept for the result's readers) and those more items would settle
    that the run still buys for (``open_pairs``); ``pairs``: one record per pair
    (:meth:`~lm_eval_adaptive.engine.ranking.pairs.outcomes.PairOutcomes.to_records`' keys, a ranked above b
    where ordered); ``rank_range``: model → [best, worst] rank from the ordered pairs; ``estimates``:
    model → its estimate of record (the full-task mean, interval and method); ``judgement``: which
    judgement made it."""

    ranking: list
    theta: np.ndarray
    se: np.ndarray
    pairwise: np.ndarray
    ties: list
    equivalent: list
    adjacent_confidence: list
    tie_groups: list
    inseparable: list
    open_pairs: list = field(default_factory=list)
    pairs: list = field(default_factory=list)
    rank_range: dict = field(default_factory=dict)
    estimates: dict = field(default_factory=dict)
    judgement: str = "metric-scale"


@runtime_checkable
class PairJudgement(Protocol):
    """One metric's judgement of a ranking's pairs (see the module docstring)."""

    def open_pairs(self, models: Sequence[str], remaining: float | None = None) -> OpenPairs:
        ...

    def report(self, models: Sequence[str], remaining: float | None = None) -> PairReport:
        ...

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

The default judgement is :class:`~lm_eval_adaptive.engine.ranking.pairs.metric_judgement.MetricScaleJudgement`, on the
full-task metric's own scale. The judgement on the ability scale,
:class:`~lm_eval_adaptive.engine.ranking.pairs.theta_view.ThetaJudgement`, is kept as an option.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Protocol, Sequence, runtime_checkable

import numpy as np
from scipy.special import ndtr


__all__ = ["OpenPairs", "PairReport", "PairJudgement", "pairwise_matrix", "tie_groups"]


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
    (``inseparable``: the θ-scale judgement's futility stop only) and those more items would settle
    that the run still buys for (``open_pairs``); ``pairs``: one record per pair
    (:meth:`~lm_eval_adaptive.engine.ranking.pairs.outcomes.PairOutcomes.to_records`' keys, a ranked above b
    where ordered); ``rank_range``: model → [best, worst] rank from the ordered pairs; ``estimates``:
    model → its estimate of record (the metric-scale judgement's full-task mean, interval and method;
    empty for the θ-scale judgement); ``judgement``: which judgement made it."""

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
    judgement: str = "theta"


@runtime_checkable
class PairJudgement(Protocol):
    """One metric's judgement of a ranking's pairs (see the module docstring)."""

    def open_pairs(self, models: Sequence[str], remaining: float | None = None) -> OpenPairs:
        ...

    def report(self, models: Sequence[str], remaining: float | None = None) -> PairReport:
        ...


def pairwise_matrix(theta: np.ndarray, se: np.ndarray) -> np.ndarray:
    """P(θ_i > θ_j) for every pair under independent normal posteriors (diagonal 0.5)."""
    d = theta[:, None] - theta[None, :]
    s = np.sqrt(se[:, None] ** 2 + se[None, :] ** 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = ndtr(d / s)
    p[s == 0] = 0.5
    np.fill_diagonal(p, 0.5)
    return p


def tie_groups(ranking: Sequence[str], adjacent_settled: Sequence[bool]) -> list[list[str]]:
    """Maximal runs of the ranking linked by unsettled adjacent pairs (groups of ≥ 2)."""
    groups, cur = [], [ranking[0]] if len(ranking) else []
    for m, settled in zip(ranking[1:], adjacent_settled):
        if settled:
            if len(cur) > 1:
                groups.append(cur)
            cur = [m]
        else:
            cur.append(m)
    if len(cur) > 1:
        groups.append(cur)
    return groups



"""The status of a ranking's pairs under one metric: the seam between the examinees and the rankers.

A ranker keeps one :class:`PairJudgement` per metric (one for a single bank, one per bank of a
several-metric run) and asks it two things:

* :meth:`PairJudgement.open_pairs` (at every ask after the warm-up): the order of the models and the
  adjacent pairs that more items could settle, as an :class:`OpenPairs` — with, per model, the
  uncertainty one more of its items removes, and whether items for a model alone could settle its pair
  with a partner the caller cannot pay for now. The allocation policy
  (:mod:`lm_eval_adaptive.engine.allocation`) buys items for the models in those pairs.
* :meth:`PairJudgement.report` (for a result): the ranking, the status of every pair (ordered,
  equivalent or open), the adjacent confidences, the pairs no number of items settles (inseparable)
  and the pairs still open.

:class:`ThetaJudgement` is the judgement on the ability scale: models ordered by θ̂, a
:class:`~lm_eval_adaptive.engine.pair_rules.PairRule` (METHOD.md §4, §7) deciding each pair, and the
futility stop for pairs the bank's measured model error keeps from settling (docs/honesty.md). Another
judgement (e.g. one on the full-task metric's scale, with a cost to settle per pair) plugs in by
answering the same two questions; the rankers and the allocation do not change.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, NamedTuple, Protocol, Sequence, runtime_checkable

import numpy as np
from scipy.special import ndtr

from lm_eval_adaptive.engine.estimation import Z95
from lm_eval_adaptive.engine.pair_rules import OrderConfidence, PairRule, PairStatus, adjacent_status

__all__ = ["OpenPairs", "PairReport", "PairJudgement", "ThetaJudgement", "pairwise_matrix", "tie_groups"]


class OpenPairs(NamedTuple):
    """What the allocation reads of one metric's pairs, by position in the models it was asked about.

    ``order``: positions, best first; ``open``: positions u of the adjacent pairs (order[u],
    order[u + 1]) more items could settle; ``gain``: per position, the SE one more item of that model
    reduces (the allocation weighs its square); ``futile(j, p)``: True when items for model j alone
    cannot settle its pair with p (asked only when p cannot be given items now); ``metric``: whose
    pairs these are (the judgement's metric name, None for a single bank)."""

    order: list
    open: list
    gain: list
    futile: Callable[[int, int], bool]
    metric: str | None = None


@dataclass
class PairReport:
    """What a result reads of one metric's pairs: the ranking (best first) and, for it, θ̂ and SE,
    P(ranking[i] > ranking[j]), every pair not ordered (``ties``), those settled as equivalent, the
    adjacent confidences and tie groups, the adjacent pairs no number of items settles
    (``inseparable``) and those more items could settle (``open_pairs``)."""

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


@runtime_checkable
class PairJudgement(Protocol):
    """One metric's judgement of a ranking's pairs (see the module docstring)."""

    def open_pairs(self, models: Sequence[str]) -> OpenPairs:
        ...

    def report(self, models: Sequence[str]) -> PairReport:
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


@functools.lru_cache(maxsize=32)
def _upper_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.triu_indices(n, 1)``, built once per n (read-only)."""
    iu, ju = np.triu_indices(n, 1)
    iu.flags.writeable = False
    ju.flags.writeable = False
    return iu, ju


class ThetaJudgement:
    """The pairs of one metric's ranking judged on the ability scale.

    ``examinees``: model → its :class:`~lm_eval_adaptive.engine.cat.Examinee` on the metric's bank (read
    only: θ̂, SE, measurement SE, model error); ``rule``: the
    :class:`~lm_eval_adaptive.engine.pair_rules.PairRule` of a pair; ``futility``: an adjacent pair whose
    gap |θ̂_a − θ̂_b| is below ``futility`` times z·√(τ_a² + τ_b²) (τ the bank's model error, which no item
    removes), or confidently below it, is *inseparable*: no more items for it (0: off).

    Models are ordered by θ̂ (equal θ̂: the order given). With :class:`OrderConfidence` (the default rule)
    :meth:`open_pairs` judges the adjacent pairs in plain floats, pair by pair (the same decisions as the
    arrays, :mod:`lm_eval_adaptive.engine.pair_rules`); any other rule judges the arrays, a family rule
    every pair of the ranking.
    """

    def __init__(self, examinees: Mapping[str, object], rule: PairRule, futility: float, metric: str | None = None):
        self._examinees = examinees
        self.rule = rule
        self.futility = float(futility)
        self.metric = metric
        self._fast = type(rule) is OrderConfidence
        #: per model, (examinee version, θ̂, SE, measurement SE, model error SD), read again only when the
        #: examinee's version changed
        self._stats: dict[str, tuple] = {}

    def stats(self, m: str) -> tuple:
        """(version, θ̂, SE, measurement SE, model error SD) of model ``m``."""
        e = self._examinees[m]
        st = self._stats.get(m)
        if st is None or st[0] != e.version:
            st = self._stats[m] = (e.version, e.theta, e.se, e.measurement_se, e.model_error_sd)
        return st

    def _inseparable_pair(self, a: tuple, b: tuple) -> bool:
        """The futility stop for one pair, given both models' :meth:`stats`."""
        gap = abs(a[1] - b[1])
        reach = Z95 * math.hypot(a[4], b[4])  # the gap a pair needs to settle with infinitely many items
        # clearly hopeless now, or confidently below what could ever settle
        return gap < self.futility * reach or gap + Z95 * math.hypot(a[3], b[3]) < reach

    def _inseparable(self, models: Sequence[str], order, pairs: np.ndarray) -> np.ndarray:
        if self.futility == 0 or pairs.size == 0:
            return np.zeros(pairs.size, dtype=bool)
        stats = [self.stats(m) for m in models]
        return np.array([self._inseparable_pair(stats[order[u]], stats[order[u + 1]]) for u in pairs.tolist()],
                        dtype=bool)

    def _arrays(self, models: Sequence[str]):
        ex = self._examinees
        th = np.array([ex[m].theta for m in models])
        se = np.array([ex[m].se for m in models])
        return th, se, np.argsort(-th, kind="stable")

    def open_pairs(self, models: Sequence[str]) -> OpenPairs:
        rule = self.rule
        if not self._fast:
            th, se, order = self._arrays(models)
            status = adjacent_status(rule, th[order], se[order])  # a family rule sees every pair
            unsettled = np.flatnonzero(status == PairStatus.OPEN)
            unsettled = unsettled[~self._inseparable(models, order, unsettled)]
            th, se = th.tolist(), se.tolist()
            gain = [self.stats(m)[3] for m in models]
            return OpenPairs(order.tolist(), unsettled.tolist(), gain,
                             lambda j, p: rule.futile(th[j], se[j], th[p], se[p]), self.metric)
        examinees, cache = self._examinees, self._stats
        stats = []
        for m in models:
            st, e = cache.get(m), examinees[m]
            stats.append(st if st is not None and st[0] == e.version else self.stats(m))
        _, th, se, gain, _ = zip(*stats)  # per model: θ̂, SE, measurement SE
        neg = [-t for t in th]
        order = sorted(range(len(models)), key=neg.__getitem__)  # stable, as np.argsort(-th, kind="stable")
        futility = self.futility
        unsettled = []
        for u in range(len(models) - 1):
            a, b = order[u], order[u + 1]
            if rule.ordered(th[a], se[a], th[b], se[b]):
                continue
            if futility and self._inseparable_pair(stats[a], stats[b]):
                continue
            unsettled.append(u)
        return OpenPairs(order, unsettled, gain, lambda j, p: rule.futile(th[j], se[j], th[p], se[p]), self.metric)

    def report(self, models: Sequence[str]) -> PairReport:
        th, se, order = self._arrays(models)
        ranking = [models[i] for i in order]
        th_o, se_o = th[order], se[order]
        P = pairwise_matrix(th_o, se_o)
        n = len(ranking)
        iu, ju = _upper_pairs(n)
        status = np.asarray(self.rule.judge(th_o[iu], se_o[iu], th_o[ju], se_o[ju]))
        ties = [(ranking[i], ranking[j]) for i, j, st in zip(iu.tolist(), ju.tolist(), status.tolist())
                if st != PairStatus.ORDERED]
        equivalent = [(ranking[i], ranking[j]) for i, j, st in zip(iu.tolist(), ju.tolist(), status.tolist())
                      if st == PairStatus.EQUIVALENT]
        adj = [float(P[i, i + 1]) for i in range(n - 1)]
        adj_status = adjacent_status(self.rule, th_o, se_o)
        groups = tie_groups(ranking, [bool(st == PairStatus.ORDERED) for st in adj_status.tolist()])
        open_adj = np.flatnonzero(adj_status == PairStatus.OPEN)
        cut = self._inseparable(models, order, open_adj)
        inseparable = [(ranking[u], ranking[u + 1]) for u in open_adj[cut].tolist()]
        still_open = [(ranking[u], ranking[u + 1]) for u in open_adj[~cut].tolist()]
        return PairReport(ranking=ranking, theta=th_o, se=se_o, pairwise=P, ties=ties, equivalent=equivalent,
                          adjacent_confidence=adj, tie_groups=groups, inseparable=inseparable, open_pairs=still_open)

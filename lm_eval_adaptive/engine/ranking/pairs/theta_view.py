"""The pair judgement on the ability scale, kept as an option (``judgement=ThetaJudgement``; the
self-check's θ figures and the pinned ``theta_*`` runs use it): models ordered by θ̂, a
:class:`~lm_eval_adaptive.engine.ranking.pairs.rules.PairRule` (METHOD.md §4, §7) deciding each
adjacent pair, and the futility stop for pairs the bank's measured model error keeps from settling
(docs/honesty.md). It answers the same
:class:`~lm_eval_adaptive.engine.ranking.pairs.judgement.PairJudgement` protocol as the default,
:class:`~lm_eval_adaptive.engine.ranking.pairs.metric_judgement.MetricScaleJudgement`.
"""

from __future__ import annotations

import functools
import math
from typing import Mapping, Sequence

import numpy as np

from lm_eval_adaptive.engine.cat.estimation import Z95
from lm_eval_adaptive.engine.ranking.pairs.outcomes import EQUIVALENT, ORDERED, UNRESOLVED, rank_ranges
from lm_eval_adaptive.engine.ranking.pairs.rules import OrderConfidence, PairRule, PairStatus, adjacent_status

from lm_eval_adaptive.engine.ranking.pairs.judgement import OpenPairs, PairReport, pairwise_matrix, tie_groups

__all__ = ["ThetaJudgement", "theta_pair_records"]


@functools.lru_cache(maxsize=32)
def _upper_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.triu_indices(n, 1)``, built once per n (read-only)."""
    iu, ju = np.triu_indices(n, 1)
    iu.flags.writeable = False
    ju.flags.writeable = False
    return iu, ju


class ThetaJudgement:
    """The pairs of one metric's ranking judged on the ability scale.

    ``examinees``: model → its :class:`~lm_eval_adaptive.engine.cat.examinee.Examinee` on the metric's bank (read
    only: θ̂, SE, measurement SE, model error); ``rule``: the
    :class:`~lm_eval_adaptive.engine.ranking.pairs.rules.PairRule` of a pair; ``futility``: an adjacent pair whose
    gap |θ̂_a − θ̂_b| is below ``futility`` times z·√(τ_a² + τ_b²) (τ the bank's model error, which no item
    removes), or confidently below it, is *inseparable*: no more items for it (0: off).

    Models are ordered by θ̂ (equal θ̂: the order given). With :class:`OrderConfidence` (the default rule)
    :meth:`open_pairs` judges the adjacent pairs in plain floats, pair by pair (the same decisions as the
    arrays, :mod:`lm_eval_adaptive.engine.ranking.pairs.rules`); any other rule judges the arrays, a family rule
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

    name = "theta"

    def signature(self) -> dict:
        """What this judgement adds to a run's signature."""
        return {"judgement": self.name}

    def _worth(self, gain: list, models: Sequence[str]):
        ex = self._examinees
        n = [ex[m].n for m in models]

        def worth(j: int, k: int = 0) -> float:
            """θ̂'s measurement variance one more item removes, m²/(n + k + 1)."""
            return gain[j] ** 2 / (n[j] + k + 1)
        return worth

    def open_pairs(self, models: Sequence[str], remaining: float | None = None) -> OpenPairs:
        rule = self.rule
        if not self._fast:
            th, se, order = self._arrays(models)
            status = adjacent_status(rule, th[order], se[order])  # a family rule sees every pair
            unsettled = np.flatnonzero(status == PairStatus.OPEN)
            unsettled = unsettled[~self._inseparable(models, order, unsettled)]
            th, se = th.tolist(), se.tolist()
            gain = [self.stats(m)[3] for m in models]
            order = order.tolist()
            return OpenPairs(order, [(order[u], order[u + 1]) for u in unsettled.tolist()], self._worth(gain, models),
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
        pairs = []
        for u in range(len(models) - 1):
            a, b = order[u], order[u + 1]
            if rule.ordered(th[a], se[a], th[b], se[b]):
                continue
            if futility and self._inseparable_pair(stats[a], stats[b]):
                continue
            pairs.append((a, b))
        return OpenPairs(order, pairs, self._worth(gain, models),
                         lambda j, p: rule.futile(th[j], se[j], th[p], se[p]), self.metric)

    def report(self, models: Sequence[str], remaining: float | None = None) -> PairReport:
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
        records, ranges = theta_pair_records(ranking, P, iu, ju, status)
        return PairReport(ranking=ranking, theta=th_o, se=se_o, pairwise=P, ties=ties, equivalent=equivalent,
                          adjacent_confidence=adj, tie_groups=groups, inseparable=inseparable, open_pairs=still_open,
                          pairs=records, rank_range=ranges, judgement=self.name)


def theta_pair_records(ranking: Sequence[str], P: np.ndarray, iu, ju, status) -> tuple[list, dict]:
    """The pair records and rank ranges of a θ-scale judgement: ``status`` per pair (i, j) of ``ranking``
    (i above j); no cost to settle (None: the θ scale does not project one)."""
    names = {int(PairStatus.ORDERED): ORDERED, int(PairStatus.EQUIVALENT): EQUIVALENT, int(PairStatus.OPEN): UNRESOLVED}
    n = len(ranking)
    m = np.zeros((n, n), dtype=np.int8)
    records = []
    for i, j, st in zip(np.asarray(iu).tolist(), np.asarray(ju).tolist(), np.asarray(status).tolist()):
        outcome = names[int(st)]
        if outcome == ORDERED:
            m[i, j], m[j, i] = 1, -1
        records.append({"a": ranking[i], "b": ranking[j], "outcome": outcome, "p_order": float(P[i, j]),
                        "items_to_settle": None, "cost_to_settle_usd": None, "beyond_policy": False})
    best, worst = rank_ranges(m)
    return records, {r: [int(best[k]), int(worst[k])] for k, r in enumerate(ranking)}

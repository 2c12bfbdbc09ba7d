"""Several metrics in one adaptive ranking run: one generation per (model, item), every metric scored.

A task often has several continuous metrics of the same output (WMT25: XCOMET, CometKiwi,
MetricX and two GEMBA judges for every segment). Ranking the models by each metric with a
separate :class:`~lm_eval_adaptive.engine.ranking.ranker.AdaptiveRanker` generates each run's items
anew; :class:`MultiMetricRanker` generates once and scores every metric.

It is the ranker's own core with two parts plugged in, not a copy of it:

* the items are the ids every bank has (:func:`~lm_eval_adaptive.engine.irt.bank.joint_item_ids`), and each
  model is an :class:`~lm_eval_adaptive.engine.cat.examinee.Examinee` of several metrics: one
  one-metric :class:`~lm_eval_adaptive.engine.cat.examinee.Examinee` per metric on that metric's bank (θ̂, SE, person fit),
  into which every generation's score under that metric is recorded (a metric that cannot score it
  excludes the item for that metric only);
* a judgement per metric says which pairs of that metric's ranking more items should settle (by default
  :class:`~lm_eval_adaptive.engine.ranking.pairs.metric_judgement.MetricScaleJudgement`: the metric's full-task means,
  each pair ordered, equivalent or unresolved with its cost to settle, and the stopping policy; each
  metric's examinees keep the joint run's random-slot items and raw scores under that metric).

Everything else is :class:`~lm_eval_adaptive.engine.ranking.ranker.AdaptiveRanker`'s: the warm-up, the
allocation (:mod:`lm_eval_adaptive.engine.ranking.allocation`: the model given the next generation maximises
Σ_k worth_k / c_m over the metrics whose open pairs include it, worth_k the share of its open pairs'
variance under metric k one more item removes), the budget with its mean-cost reservation, calls in flight, blocking, failures, charges,
cancel/release, exclusions, stops and the replay of a journal. The item: every second slot of a model
is the first untaken item of one seeded random permutation of the joint items; the others maximise the
summed information Σ_k w_k · I_k(θ̂_k) over the metrics that need the model (all of them in the warm-up)
(:class:`~lm_eval_adaptive.engine.cat.selection.JointInformationSelector`; w_k = m_k², the share of each
needing metric's measurement variance the item removes, or 1 with ``item_weighting="summed"``).

A run stops when no metric has an open pair ("settled", or "cost_to_settle" when the stopping policy
gave up some pair for its cost), or nothing more can be bought
("budget", "max_items", "bank_exhausted"), or fewer than two models are left ("failed"). Told scores
are ``{metric: scaled score}``; :meth:`MultiMetricRanker.result` gives a
:class:`~lm_eval_adaptive.engine.ranking.result.RankingResult` per metric.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, Mapping, Sequence

import numpy as np

from lm_eval_adaptive.engine.irt.bank import ItemBank, joint_item_ids
from lm_eval_adaptive.engine.cat.examinee import Examinee
from lm_eval_adaptive.engine.cat.estimation import EstimatorFactory
from lm_eval_adaptive.engine.ranking.pairs.rules import OrderConfidence, PairRule
from lm_eval_adaptive.engine.ranking.pairs.judgement import PairJudgement
from lm_eval_adaptive.engine.ranking.ranker import AdaptiveRanker, default_judgement
from lm_eval_adaptive.engine.ranking.paired_design import DEFAULT_DESIGN
from lm_eval_adaptive.engine.ranking.ranker_state import Request
from lm_eval_adaptive.engine.cat.selection import DEFAULT_RANDOM_SHARE, ITEM_WEIGHTINGS, JointInformationSelector

__all__ = ["ITEM_WEIGHTINGS", "MultiMetricRanker", "MultiRequest", "MultiRankingResult"]

#: A request of a several-metric run: one generation of joint item ``item`` (id ``item_id``) by ``model``.
MultiRequest = Request


@dataclass
class MultiRankingResult:
    """A ranking per metric from the same generations, and what they cost."""

    results: dict  # metric -> RankingResult (its own interval, ties and confidences)
    generations: int  # distinct (model, item) generations
    total_cost: float
    stopped_because: str
    items: dict = field(default_factory=dict)  # model -> generations
    budget: float | None = None

    def to_dict(self) -> dict:
        return {"metrics": {k: r.to_dict() for k, r in self.results.items()}, "generations": self.generations,
                "total_cost_usd": self.total_cost, "stopped_because": self.stopped_because,
                "items": dict(self.items), "budget_usd": self.budget}

    def __str__(self) -> str:
        head = (f"MultiRankingResult: {len(self.results)} metrics, {self.generations} generations, "
                f"${self.total_cost:.4f}, stopped because {self.stopped_because}")
        parts = [head]
        for k, r in self.results.items():
            ties = "; ".join(" ≈ ".join(map(str, g)) for g in r.tie_groups)
            parts.append(f"  {k}: " + " > ".join(map(str, r.ranking)) + (f"  (ties: {ties})" if ties else ""))
        return "\n".join(parts)


class MultiMetricRanker(AdaptiveRanker):
    """Adaptive ranking of ``models`` by every metric of ``banks`` from one set of generations.

    Parameters
    ----------
    banks:
        Metric name → calibrated bank (at least one; continuous, 2PL or 3PL, in any mix). Items are
        joined by id.
    models:
        Names of the models (at least 2).
    item_costs:
        Per model, USD cost of each joint item (aligned with :attr:`item_ids`); omitted: 0.
    relative_costs, confidence, n_init, n_max, budget, estimator, max_in_flight, reserve_mean_cost:
        As :class:`AdaptiveRanker`'s (``budget`` caps the total spend of the generations).
    seed:
        Seed of the random half's permutation of the joint items.
    random_share:
        Share of every model's items drawn at random (default the engine's).
    pair_rules:
        Metric → :class:`~lm_eval_adaptive.engine.ranking.pairs.rules.PairRule` (default
        ``OrderConfidence(confidence)``; a tie margin or the family-wise rule per metric,
        :func:`~lm_eval_adaptive.engine.ranking.pairs.rules.pair_rule_for`; the judgement applies its confidence,
        margin and family-wise setting).
    exclude:
        Per model, joint item ids or indices never to give it (e.g. a metric has no score).
    item_weighting:
        One of :data:`ITEM_WEIGHTINGS` (default ``normalised``).
    judgement:
        As :class:`AdaptiveRanker`'s: ``judgement(examinees, pair_rule, metric)`` builds each
        metric's :class:`~lm_eval_adaptive.engine.ranking.pairs.judgement.PairJudgement` (default: the metric scale,
        its projection counting the joint selector's random share).
    """

    _item_word = "joint item"
    _items_name = "the joint items"

    def __init__(self, banks: Mapping[str, ItemBank], models: Sequence[str], *,
                 item_costs: Mapping[str, np.ndarray] | None = None,
                 relative_costs: Mapping[str, float] | None = None, confidence: float = 0.95,
                 n_init: int = 10, n_max: int | None = None, budget: float | None = None,
                 seed: int | Sequence[int] | None = 0, random_share: float = DEFAULT_RANDOM_SHARE,
                 pair_rules: Mapping[str, PairRule] | None = None,
                 exclude: Mapping[str, Sequence] | None = None, item_weighting: str = "normalised",
                 estimator: EstimatorFactory | None = None, max_in_flight: int = 1,
                 reserve_mean_cost: bool = True, judgement: Callable[..., PairJudgement] | None = None):
        if item_weighting not in ITEM_WEIGHTINGS:
            raise ValueError(f"item_weighting must be one of {ITEM_WEIGHTINGS}, got {item_weighting!r}")
        if not banks:
            raise ValueError("a multi-metric run needs at least one metric bank")
        self._metrics = [str(k) for k in banks]
        self._design = DEFAULT_DESIGN  # a joint run draws for each model alone (no paired design yet)
        self._banks = {str(k): b for k, b in banks.items()}
        ids = joint_item_ids(self._banks)
        if not ids:
            raise ValueError("the metric banks share no item id")
        self._ids_list = ids
        self._item_ids = np.asarray(ids, dtype=object)
        self._id_index = {i: j for j, i in enumerate(ids)}
        self._bank = next(iter(self._banks.values()))
        costs = self._init_core(models, len(ids), item_costs=item_costs, relative_costs=relative_costs,
                                confidence=confidence, n_init=n_init, n_max=n_max, budget=budget, seed=seed,
                                max_in_flight=max_in_flight, reserve_mean_cost=reserve_mean_cost)
        self._selector = JointInformationSelector(self._banks, ids, weighting=item_weighting, share=random_share,
                                                  seed=seed)
        self._examinees = {m: Examinee(self._banks, self._selector, m, item_costs=costs[m], estimator=estimator)
                           for m in self._models}
        rules = dict(pair_rules or {})
        unknown = set(rules) - set(self._metrics)
        if unknown:
            raise ValueError(f"pair rules for unknown metrics {sorted(unknown)} (the run's: {self._metrics})")
        self._parts = {k: MappingProxyType({m: e.parts[k] for m, e in self._examinees.items()})
                       for k in self._metrics}
        make = judgement or functools.partial(default_judgement, random_share=self._selector.share)
        self._judges = tuple(make(self._parts[k], rules.get(k) or OrderConfidence(self._confidence), k)
                             for k in self._metrics)
        self._judge = self._judges[0]
        self._all_metrics = (True,) * len(self._metrics)
        for m, items in (exclude or {}).items():
            self.exclude(m, items)

    # ----------------------------------------------------------------- reading
    @property
    def metrics(self) -> list[str]:
        return list(self._metrics)

    @property
    def banks(self) -> Mapping[str, ItemBank]:
        return MappingProxyType(self._banks)

    @property
    def item_ids(self) -> list[str]:
        """The joint items' ids (an item's index in a request is its position here)."""
        return list(self._ids_list)

    @property
    def item_weighting(self) -> str:
        return self._selector.weighting

    def metric_examinees(self, metric: str) -> Mapping[str, Examinee]:
        """Model → its :class:`~lm_eval_adaptive.engine.cat.examinee.Examinee` under ``metric`` (read-only)."""
        try:
            return self._parts[metric]
        except KeyError:
            raise ValueError(f"unknown metric {metric!r} (the run's: {self._metrics})") from None

    @property
    def generations(self) -> int:
        """Generations recorded (each (model, item) once, whatever the metrics)."""
        return int(sum(e.n for e in self._examinees.values()))

    def bank_item(self, metric: str, item: int) -> int:
        """Index in ``metric``'s bank of joint item ``item``."""
        return int(self._selector.indices[self._metrics.index(metric)][item])

    def open_pairs(self) -> dict[str, list[tuple[str, str]]]:
        """Per metric, the adjacent pairs of its θ̂ order that more items could settle."""
        return {j.metric: self._open_pairs_of(j) for j in self._judges}

    # -------------------------------------------------------------- the core's hooks
    def _ids_to_indices(self, ids: list) -> np.ndarray:
        index = self._id_index
        missing = [i for i in ids if i not in index]
        if missing:
            raise ValueError(f"item {missing[0]!r} is not one of the joint items")
        return np.array([index[i] for i in ids], dtype=np.int64)

    def _told(self, y, model: str, item_id: str):
        """A generation's scores, checked (metric → a number in [0, 1], None or NaN where it could not score)."""
        return self._examinees[model].checked_scores(y, item_id)

    def _peek(self, m: str, needs=None) -> int:
        """The model's next joint item, by the information of the metrics that need it (``needs``: the
        (judgement's open pairs, partner) that make it a candidate; None: every metric, as in the
        warm-up). Cached until the model's state changes, per set of metrics."""
        if needs is None:
            focus = self._all_metrics
        else:
            wanted = {v.metric for v, _ in needs}
            focus = tuple(k in wanted for k in self._metrics)
        e = self._examinees[m]
        cached = self._next[m]
        version = e.version
        if cached is not None and cached[0] == version and cached[1][0] == focus:
            return cached[1][1]
        item = e.next_item(self._rng, focus)
        self._next[m] = (version, (focus, item))
        return item

    # ---------------------------------------------------------------- running
    def run(self, score: Callable[[str, int], Mapping[str, float | None]]) -> MultiRankingResult:
        """Drive to the end with ``score(model, joint_item_index) -> {metric: scaled score}``."""
        while (req := self.ask()) is not None:
            self.tell(req, score(req.model, req.item))
        return self.result()

    def signature(self) -> dict:
        """What the joint run adds to each metric's signature: the metrics, the item weighting, the random
        share, the seed and the joint budget."""
        return {"joint_metrics": "+".join(self._metrics), "item_weighting": self._selector.weighting,
                "random_share": self._selector.share, "joint_seed": str(self._selector.seed), "budget": self._budget}

    def result(self) -> MultiRankingResult:
        """One :class:`RankingResult` per metric (its signature extended by :meth:`signature`)."""
        reason = self._stopped_because or "running"
        joint = self.signature()
        results = {}
        for k, judge in zip(self._metrics, self._judges):
            parts = self._parts[k]
            sig = self._signature_for(self._banks[k], judge.rule, parts.values()) | joint
            results[k] = self._ranking_result(judge, parts, self._banks[k], sig)
        return MultiRankingResult(results=results, generations=self.generations, total_cost=self.spent,
                                  stopped_because=reason, items={m: e.n for m, e in self._examinees.items()},
                                  budget=self._budget)

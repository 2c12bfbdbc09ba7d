"""Several metrics in one adaptive ranking run: one generation per (model, item), every metric scored.

A task often has several continuous metrics of the same output (WMT25: XCOMET, CometKiwi,
MetricX and two GEMBA judges for every segment). Ranking the models by each metric with a
separate :class:`~lm_eval_adaptive.engine.ranker.AdaptiveRanker` generates each run's items
anew; :class:`MultiMetricRanker` generates once and scores every metric.

Design
* A bank per metric (each calibrated on its own: metrics differ in noise and difficulty),
  joined by item id: the run's items are the ids every bank has.
* One :class:`AdaptiveRanker` per metric over the same models holds that metric's state
  (every model's :class:`~lm_eval_adaptive.engine.cat.Examinee`, its pair rule and futility
  stop) and gives that metric's :class:`~lm_eval_adaptive.engine.ranker.RankingResult`.
  Its own ``ask`` is never used: each scored generation is ``record`` ed into every metric's
  ranker.
* Selection serves every metric that still needs the model:
  - warm-up: every model gets ``n_init`` items, fewest first;
  - then a metric *needs* model m when m is in one of its open adjacent pairs (neither settled
    nor inseparable: its ranker's :meth:`~AdaptiveRanker.open_pairs`); the model given the next item maximises
    Σ_needing metrics m_k² / ((n + 1) · c_m) (the single ranker's rule, m_k the metric's
    measurement SE, summed);
  - the item: every second slot of a model is the first untaken item of one seeded random
    permutation (the random half of :func:`~lm_eval_adaptive.engine.selection.default_selector`);
    the others maximise the *normalised* summed information Σ_k m_k² · I_k(θ̂_k, b_k), the share
    of each needing metric's measurement variance the item removes (information alone is on
    each bank's own scale).
* Stop when no metric has an open adjacent pair ("settled"), or nothing more can be bought
  ("budget", "max_items", "bank_exhausted").

Like the single ranker it is driven by ask/tell (one request per model in flight), and owns
its state: callers read it through properties and :meth:`MultiMetricRanker.result`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, Mapping, Sequence

import numpy as np

from lm_eval_adaptive.engine.bank import ItemBank, joint_item_ids
from lm_eval_adaptive.engine.checks import check_cost
from lm_eval_adaptive.engine.pair_rules import PairRule
from lm_eval_adaptive.engine.ranker import DEFAULT_FUTILITY, AdaptiveRanker, RankingResult
from lm_eval_adaptive.engine.selection import DEFAULT_RANDOM_SHARE, RandomShareSelector

#: How an item's information is summed over the metrics that need the model: ``normalised``
#: Σ m_k² · I_k (the share of each metric's measurement variance it removes; the default) or
#: ``summed`` Σ I_k (each bank's information as it is, on its own scale).
ITEM_WEIGHTINGS = ("normalised", "summed")

__all__ = ["ITEM_WEIGHTINGS", "MultiMetricRanker", "MultiRequest", "MultiRankingResult", "open_adjacent_pairs", "joint_pick"]


def joint_pick(random: RandomShareSelector, taken: np.ndarray, n_used: int, parts, weighting: str) -> int:
    """The next joint item of one model (-1: none left): its random slot's item, or the untaken item of
    largest summed information over ``parts``, one ``(bank, bank indices of the joint items, examinee)``
    per metric, each weighted by the metric's measurement variance when ``weighting`` is "normalised".

    The information is the bank's own (:meth:`ItemBank.information`), so 2PL/3PL banks count their items'
    discriminations and guessing. ``MultiMetricTest`` and :class:`MultiMetricRanker` both pick with it.
    """
    if n_used >= taken.size or taken.all():
        return -1
    if random.is_random_slot(n_used):
        return random.select(0.0, taken, n_used)
    value = np.zeros(taken.size)
    for bank, index, e in parts:
        w = e.measurement_se ** 2 if weighting == "normalised" else 1.0
        value += w * bank.information(e.theta, index)
    value[taken] = -np.inf
    return int(np.argmax(value))


def open_adjacent_pairs(result: RankingResult) -> list[tuple[str, str]]:
    """Adjacent pairs of ``result``'s ranking its pair rule left open: neither ordered, nor
    settled as equivalent, nor inseparable (the futility stop): the pairs more items can settle.
    The same pairs as the ranker's :meth:`~AdaptiveRanker.open_pairs` at that moment, read from a result."""
    ties = {frozenset(p) for p in result.ties}
    done = {frozenset(p) for p in result.equivalent} | {frozenset(p) for p in result.inseparable}
    r = result.ranking
    return [(a, b) for a, b in zip(r[:-1], r[1:]) if frozenset((a, b)) in ties and frozenset((a, b)) not in done]


@dataclass(frozen=True)
class MultiRequest:
    """One generation: give joint item ``item`` (id ``item_id``) to ``model``; every metric scores it."""

    model: str
    item: int  # index into :attr:`MultiMetricRanker.item_ids`
    item_id: str
    cost: float
    phase: str  # "warmup" or "adaptive"


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


class MultiMetricRanker:
    """Adaptive ranking of ``models`` by every metric of ``banks`` from one set of generations.

    Parameters
    ----------
    banks:
        Metric name → calibrated bank (at least one). Items are joined by id.
    models:
        Names of the models (at least 2).
    item_costs:
        Per model, USD cost of each joint item (aligned with :attr:`item_ids`); omitted: 0.
    confidence, n_init, n_max, budget, futility:
        As :class:`AdaptiveRanker`'s (``budget`` caps the total spend of the generations).
    seed:
        Seed of the random half's permutation of the joint items.
    random_share:
        Share of every model's items drawn at random (default the engine's).
    pair_rules:
        Metric → :class:`~lm_eval_adaptive.engine.pair_rules.PairRule` (default: each ranker's).
    exclude:
        Per model, joint item ids or indices never to give it (e.g. a metric has no score).
    item_weighting:
        One of :data:`ITEM_WEIGHTINGS` (default ``normalised``).
    """

    def __init__(self, banks: Mapping[str, ItemBank], models: Sequence[str], *,
                 item_costs: Mapping[str, np.ndarray] | None = None, confidence: float = 0.95,
                 n_init: int = 10, n_max: int | None = None, budget: float | None = None,
                 seed: int | Sequence[int] | None = 0, random_share: float = DEFAULT_RANDOM_SHARE,
                 pair_rules: Mapping[str, PairRule] | None = None, futility: float = DEFAULT_FUTILITY,
                 exclude: Mapping[str, Sequence] | None = None, item_weighting: str = "normalised"):
        if item_weighting not in ITEM_WEIGHTINGS:
            raise ValueError(f"item_weighting must be one of {ITEM_WEIGHTINGS}, got {item_weighting!r}")
        self._weighting = item_weighting
        if not banks:
            raise ValueError("a multi-metric run needs at least one metric bank")
        models = [str(m) for m in models]
        if len(models) < 2 or len(set(models)) != len(models):
            raise ValueError("a ranking needs at least 2 distinct models")
        self._metrics = [str(k) for k in banks]
        self._banks = dict(banks)
        self._item_ids = joint_item_ids(banks)
        n = len(self._item_ids)
        if n == 0:
            raise ValueError("the metric banks share no item id")
        self._index = {i: j for j, i in enumerate(self._item_ids)}
        self._bank_index = {k: b.index_of(self._item_ids) for k, b in self._banks.items()}
        self._models = models
        self._n_init = int(n_init)
        self._n_max = n if n_max is None else int(n_max)
        self._budget = None if budget is None else float(budget)
        rules = dict(pair_rules or {})
        self._rankers = {k: AdaptiveRanker(b, models, confidence=confidence, n_init=n_init, n_max=n_max,
                                           seed=seed, futility=futility,
                                           **({"pair_rule": rules[k]} if k in rules else {}))
                         for k, b in self._banks.items()}
        costs = {m: np.zeros(n) if item_costs is None else np.asarray(item_costs[m], dtype=float) for m in models}
        for m, c in costs.items():
            if c.shape != (n,):
                raise ValueError(f"model {m!r}: {c.size} item costs for {n} joint items")
        self._costs = costs
        mean = {m: float(c.mean()) for m, c in costs.items()}
        low = min(mean.values())
        self._relative = {m: (mean[m] / low if low > 0 else 1.0) for m in models}
        # the random half: every model's random slots walk one seeded permutation of the joint items
        self._random = RandomShareSelector(np.zeros(n), share=random_share, seed=seed)
        self._taken = {m: np.zeros(n, dtype=bool) for m in models}
        self._scored = {m: [] for m in models}
        self._spent = 0.0
        self._pending: dict[str, MultiRequest] = {}
        self._stopped_because: str | None = None
        for m, items in (exclude or {}).items():
            self.exclude(m, items)

    # ----------------------------------------------------------------- reading
    @property
    def metrics(self) -> list[str]:
        return list(self._metrics)

    @property
    def models(self) -> list[str]:
        return list(self._models)

    @property
    def item_ids(self) -> list[str]:
        """The joint items' ids (an item's index in a request is its position here)."""
        return list(self._item_ids)

    @property
    def rankers(self) -> Mapping[str, AdaptiveRanker]:
        """Metric → its ranker (read it; it changes only through this object)."""
        return MappingProxyType(self._rankers)

    @property
    def spent(self) -> float:
        return self._spent

    @property
    def generations(self) -> int:
        return int(sum(len(v) for v in self._scored.values()))

    @property
    def stopped_because(self) -> str | None:
        return self._stopped_because

    @property
    def pending(self) -> Mapping[str, MultiRequest]:
        return MappingProxyType(self._pending)

    def bank_item(self, metric: str, item: int) -> int:
        """Index in ``metric``'s bank of joint item ``item``."""
        return int(self._bank_index[metric][item])

    # ---------------------------------------------------------------- changing
    def exclude(self, model: str, items) -> None:
        """Never give ``model`` these joint items (ids or indices)."""
        if model not in self._taken:
            raise ValueError(f"unknown model {model!r} (the run's models: {self._models})")
        idx = []
        for i in np.atleast_1d(np.asarray(items, dtype=object)).tolist():
            if isinstance(i, str):
                if i not in self._index:
                    raise ValueError(f"item {i!r} is not one of the joint items")
                idx.append(self._index[i])
            elif isinstance(i, (int, np.integer)) and 0 <= int(i) < len(self._item_ids):
                idx.append(int(i))
            else:
                raise ValueError(f"an item is a joint item id (str) or index (0..{len(self._item_ids) - 1}), got {i!r}")
        self._taken[model][np.asarray(idx, dtype=np.int64)] = True

    def _needs(self) -> dict[str, set]:
        """Per model, the metrics with an open adjacent pair that involves it."""
        need = {m: set() for m in self._models}
        for k, r in self._rankers.items():
            for a, b in r.open_pairs():
                need[a].add(k)
                need[b].add(k)
        return need

    def _affordable(self, m: str, item: int) -> bool:
        if self._budget is None:
            return True
        reserved = sum(r.cost for r in self._pending.values())
        return self._spent + reserved + self._costs[m][item] <= self._budget * (1 + 1e-12)

    def _item_for(self, m: str, metrics) -> int:
        """The model's next joint item (:func:`joint_pick`)."""
        taken = self._taken[m]
        parts = [(self._banks[k], self._bank_index[k], self._rankers[k].examinees[m]) for k in metrics]
        return joint_pick(self._random, taken, int(taken.sum()), parts, self._weighting)

    def _request(self, m: str, item: int, phase: str) -> MultiRequest:
        req = MultiRequest(m, int(item), self._item_ids[item], float(self._costs[m][item]), phase)
        self._taken[m][item] = True
        self._pending[m] = req
        return req

    def _stop_if_idle(self, reason: str) -> None:
        if not self._pending:
            self._stopped_because = reason

    def ask(self) -> MultiRequest | None:
        """The next generation to make, or None (finished, or waiting for a pending one)."""
        if self._stopped_because is not None:
            return None
        n = {m: len(self._scored[m]) for m in self._models}
        warm_n = min(self._n_init, self._n_max)
        warm = [m for m in self._models if n[m] < warm_n and m not in self._pending and not self._taken[m].all()]
        if warm:
            m = min(warm, key=lambda x: n[x])
            item = self._item_for(m, self._metrics)
            if not self._affordable(m, item):
                self._stop_if_idle("budget")
                return None
            return self._request(m, item, "warmup")
        if any(n[m] < warm_n for m in self._pending):
            return None
        need = self._needs()
        if not any(need.values()):
            self._stop_if_idle("settled")
            return None
        best, best_val, blocked = None, -np.inf, set()
        for m in self._models:
            if not need[m]:
                continue
            if m in self._pending:
                blocked.add("pending")
                continue
            if n[m] >= self._n_max:
                blocked.add("max_items")
                continue
            if self._taken[m].all():
                blocked.add("bank_exhausted")
                continue
            val = sum(self._rankers[k].examinees[m].measurement_se ** 2 for k in need[m]) / (
                (n[m] + 1) * self._relative[m])
            if val > best_val:
                best, best_val = m, val
        if best is None:
            if "pending" not in blocked:
                self._stop_if_idle(next(r for r in ("max_items", "bank_exhausted") if r in blocked))
            return None
        item = self._item_for(best, sorted(need[best]))
        if not self._affordable(best, item):
            self._stop_if_idle("budget")
            return None
        return self._request(best, item, "adaptive")

    def tell(self, request: MultiRequest, scores: Mapping[str, float | None], *, cost: float | None = None) -> None:
        """Record the generation's scaled score ∈ [0, 1] under every metric (None or NaN: that
        metric could not score it; the item is then excluded for the model under that metric)."""
        if self._pending.get(request.model) != request:
            raise ValueError(f"no pending request {request}")
        cost = check_cost(cost, model=request.model, item=request.item_id)
        cost = request.cost if cost is None else cost
        unknown = set(scores) - set(self._metrics)
        if unknown:
            raise ValueError(f"scores for unknown metrics {sorted(unknown)} (the run's: {self._metrics})")
        for k in self._metrics:  # check every score before recording any
            y = scores.get(k)
            if y is not None and not (isinstance(y, (int, float, np.floating, np.integer)) and
                                      (np.isnan(y) or 0.0 <= y <= 1.0)):
                raise ValueError(f"model {request.model!r}, item {request.item_id!r}, metric {k!r}: "
                                 f"a scaled score is a number in [0, 1], got {y!r}")
        del self._pending[request.model]
        for k in self._metrics:
            y = scores.get(k)
            i = self.bank_item(k, request.item)
            if y is None or np.isnan(y):
                self._rankers[k].exclude(request.model, [i])
                if cost:
                    self._rankers[k].charge(request.model, cost)
            else:
                self._rankers[k].record(request.model, i, float(y), cost=cost)
        self._scored[request.model].append(request.item)
        self._spent += cost

    def cancel(self, request: MultiRequest) -> None:
        """Give up a pending request (the call failed for good); its item stays unused for the model."""
        if self._pending.get(request.model) == request:
            del self._pending[request.model]

    def run(self, score: Callable[[str, int], Mapping[str, float | None]]) -> MultiRankingResult:
        """Drive to the end with ``score(model, joint_item_index) -> {metric: scaled score}``."""
        while (req := self.ask()) is not None:
            self.tell(req, score(req.model, req.item))
        return self.result()

    def signature(self) -> dict:
        """What the joint run adds to each metric ranker's signature: the metrics, the item weighting,
        the random share, the seed and the joint budget."""
        return {"joint_metrics": "+".join(self._metrics), "item_weighting": self._weighting,
                "random_share": self._random.share, "joint_seed": str(self._random.seed), "budget": self._budget}

    def result(self) -> MultiRankingResult:
        """One :class:`RankingResult` per metric (its signature extended by :meth:`signature`)."""
        reason = self._stopped_because or "running"
        results = {}
        for k, r in self._rankers.items():
            res = r.result()
            res.stopped_because = reason
            res.budget = self._budget
            res.signature = res.signature | self.signature()
            results[k] = res
        return MultiRankingResult(results=results, generations=self.generations, total_cost=self._spent,
                                  stopped_because=reason, items={m: len(v) for m, v in self._scored.items()},
                                  budget=self._budget)

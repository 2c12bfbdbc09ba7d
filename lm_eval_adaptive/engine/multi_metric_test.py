"""An adaptive test of one model under several metrics at once: one generation per item, every metric scored.

The single-model counterpart of :class:`~lm_eval_adaptive.engine.multi_metric_ranker.MultiMetricRanker`
(which needs at least two models): ``run --adaptive`` with a bank per metric of one task.

Design
* A bank per metric, joined by item id (:func:`~lm_eval_adaptive.engine.bank.joint_item_ids`):
  the test's items are the ids every bank has.
* One :class:`~lm_eval_adaptive.engine.cat.Examinee` per metric on that metric's own bank holds
  its θ̂, SE, items, scores and person fit. Each scored generation is recorded into every metric's
  examinee (a metric that cannot score it excludes the item for that metric only).
* A metric *needs* more items while its measurement SE is above ``se_target`` (or always
  without an SE target). The next item:
  - every second slot (the random share of
    :func:`~lm_eval_adaptive.engine.selection.default_selector`) is the first untaken item of one
    seeded random permutation of the joint items;
  - the others maximise the normalised summed information Σ_k m_k² · I_k(θ̂_k, b_k) over the
    metrics that need items (m_k: the metric's measurement SE; the share of each metric's
    measurement variance the item removes), the rule the multi-metric ranker uses;
    ``item_weighting="summed"`` uses Σ_k I_k.
* Stop (checked in this order, as :class:`~lm_eval_adaptive.engine.cat.AdaptiveTest` does):
  ``bank_exhausted`` (no joint item left), ``max_items``, ``se_target`` (every metric's
  measurement SE ≤ the target after ``min_items``), ``budget`` (the next item would overrun it).

Driven like :class:`~lm_eval_adaptive.engine.cat.AdaptiveTest`: ``next_items(k)`` then
``record(item, {metric: scaled score})`` for each. Items are indices into :attr:`item_ids`.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

import numpy as np

from lm_eval_adaptive.engine.bank import ItemBank, joint_item_ids
from lm_eval_adaptive.engine.cat import Examinee
from lm_eval_adaptive.engine.checks import check_cost
from lm_eval_adaptive.engine.multi_metric_ranker import ITEM_WEIGHTINGS, joint_pick
from lm_eval_adaptive.engine.selection import (
    DEFAULT_RANDOM_SHARE,
    RandomShareSelector,
    shared_default_selector,
)
from lm_eval_adaptive.engine.signature import versions

__all__ = ["MultiMetricTest"]


class MultiMetricTest:
    """Adaptive test of one model under every metric of ``banks`` (metric → its bank).

    ``item_costs``: USD per joint item (aligned with :attr:`item_ids`; needed for ``budget``).
    The other settings are :class:`~lm_eval_adaptive.engine.cat.AdaptiveTest`'s; ``se_target``
    applies to every metric.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, banks: Mapping[str, ItemBank], *, se_target: float | None = 0.2, min_items: int = 30,
                 max_items: int | None = 500, budget: float | None = None, item_costs: np.ndarray | None = None,
                 seed: int | None = 0, name: str = "model", item_weighting: str = "normalised",
                 random_share: float = DEFAULT_RANDOM_SHARE):
        if not banks:
            raise ValueError("a multi-metric test needs at least one metric bank")
        if item_weighting not in ITEM_WEIGHTINGS:
            raise ValueError(f"item_weighting must be one of {ITEM_WEIGHTINGS}, got {item_weighting!r}")
        if se_target is None and max_items is None and budget is None:
            raise ValueError("give at least one stopping rule: se_target, max_items or budget")
        if se_target is not None and not se_target >= 0:
            raise ValueError(f"se_target must be a number >= 0, got {se_target}")
        if min_items < 0:
            raise ValueError("min_items must be >= 0")
        if budget is not None and item_costs is None:
            raise ValueError("a budget needs item_costs")
        self._metrics = [str(k) for k in banks]
        self._banks = dict(banks)
        self._item_ids = joint_item_ids(self._banks)
        n = len(self._item_ids)
        if n == 0:
            raise ValueError("the metric banks share no item id")
        self._bank_index = {k: b.index_of(self._item_ids) for k, b in self._banks.items()}
        if item_costs is not None:
            item_costs = np.asarray(item_costs, dtype=float)
            if item_costs.shape != (n,):
                raise ValueError(f"{item_costs.size} item costs for {n} joint items")
        self._costs = item_costs
        self._se_target = se_target
        self._min_items = int(min_items)
        self._max_items = n if max_items is None else min(int(max_items), n)
        self._budget = None if budget is None else float(budget)
        self._seed = seed
        self._weighting = item_weighting
        self._examinees = {k: Examinee(b, shared_default_selector(b, seed=seed), name) for k, b in self._banks.items()}
        self._random = RandomShareSelector(np.zeros(n), share=random_share, seed=seed)
        self._taken = np.zeros(n, dtype=bool)
        self._items: list[int] = []
        self._spent = 0.0
        self._pending: set[int] = set()
        self._stopped_because: str | None = None
        self._name = name

    # ----------------------------------------------------------------- reading
    @property
    def metrics(self) -> list[str]:
        return list(self._metrics)

    @property
    def item_ids(self) -> list[str]:
        """The joint items' ids (an item index is a position here)."""
        return list(self._item_ids)

    @property
    def examinees(self) -> Mapping[str, Examinee]:
        """Metric → the model's state under it (read it; it changes only through :meth:`record`)."""
        return MappingProxyType(self._examinees)

    @property
    def items(self) -> list[int]:
        """Joint items generated and recorded, in order (each once, whatever the metrics)."""
        return list(self._items)

    @property
    def n(self) -> int:
        return len(self._items)

    @property
    def spent(self) -> float:
        """USD of the generations (each counted once)."""
        return self._spent

    @property
    def se_target(self) -> float | None:
        return self._se_target

    @property
    def min_items(self) -> int:
        return self._min_items

    @property
    def max_items(self) -> int:
        return self._max_items

    @property
    def budget(self) -> float | None:
        return self._budget

    @property
    def pending(self) -> frozenset:
        return frozenset(self._pending)

    @property
    def stopped_because(self) -> str | None:
        return self._stopped_because

    @property
    def done(self) -> bool:
        return self._stopped_because is not None

    def bank_item(self, metric: str, item: int) -> int:
        """Index in ``metric``'s bank of joint item ``item``."""
        return int(self._bank_index[metric][item])

    def needing(self) -> list[str]:
        """The metrics whose measurement SE is still above the target (every metric without one)."""
        if self._se_target is None:
            return list(self._metrics)
        return [k for k in self._metrics if self._examinees[k].measurement_se > self._se_target]

    def signature(self) -> dict:
        """What decides this test's numbers (banks, rules, seed, weighting, versions)."""
        return {"banks": {k: b.bank_id for k, b in self._banks.items()}, "se_target": self._se_target,
                "min_items": self._min_items, "max_items": self._max_items, "budget": self._budget,
                "seed": None if self._seed is None else str(self._seed), "item_weighting": self._weighting,
                "random_share": self._random.share, **versions()}

    # ----------------------------------------------------------------- running
    def _stop_reason(self) -> str | None:
        if self._taken.all():
            return "bank_exhausted"
        if self.n >= self._max_items:
            return "max_items"
        if self._se_target is not None and self.n >= self._min_items and not self.needing():
            return "se_target"
        return None

    def _pick(self, taken: np.ndarray, n_used: int, metrics) -> int:
        parts = [(self._banks[k], self._bank_index[k], self._examinees[k]) for k in metrics]
        return joint_pick(self._random, taken, n_used, parts, self._weighting)

    def next_items(self, k: int = 1) -> list[int]:
        """Up to ``k`` joint items to generate next (reserved until recorded; empty: the test is over)."""
        if self._pending:
            return sorted(self._pending)
        if self.done:
            return []
        reason = self._stop_reason()
        if reason is not None:
            self._stopped_because = reason
            return []
        metrics = self.needing() or list(self._metrics)
        k = max(1, min(int(k), self._max_items - self.n))
        taken = self._taken.copy()
        n_used = int(taken.sum())
        out, cost = [], 0.0
        for j in range(k):
            item = self._pick(taken, n_used + j, metrics)
            if item < 0:
                break
            if self._budget is not None:
                c = float(self._costs[item])
                if self._spent + cost + c > self._budget * (1 + 1e-12):
                    break
                cost += c
            out.append(item)
            taken[item] = True
        if not out:
            self._stopped_because = "budget" if not taken.all() else "bank_exhausted"
            return []
        self._taken[out] = True
        self._pending = set(out)
        return sorted(out)

    def charge(self, usd: float) -> None:
        """Add money spent without a generation (a failed call the provider may have billed): it
        counts toward the budget, and toward every metric's spend, like a generation's cost."""
        usd = check_cost(usd, model=self._name)
        self._spent += usd
        for e in self._examinees.values():
            e.charge(usd)

    def stop(self, reason: str) -> None:
        """End the test now for ``reason`` (e.g. ``"budget"``): the pending items are given back
        unscored and nothing more is given."""
        for i in self._pending:
            self._taken[i] = False
        self._pending = set()
        self._stopped_because = str(reason)

    def record(self, item: int, scores: Mapping[str, float | None], *, cost: float | None = None) -> None:
        """Record the generation of joint ``item`` (from :meth:`next_items`): its scaled score ∈ [0, 1]
        under every metric (None or NaN: that metric could not score it, the item is excluded for it).
        ``cost``: USD it cost (default: its item cost). Nothing changes when something is refused."""
        if item not in self._pending:
            raise ValueError(f"item {item} was not asked for (pending: {sorted(self._pending)})")
        iid = self._item_ids[item]
        cost = check_cost(cost, model=self._name, item=iid)
        if cost is None:
            cost = 0.0 if self._costs is None else float(self._costs[item])
        unknown = set(scores) - set(self._metrics)
        if unknown:
            raise ValueError(f"scores for unknown metrics {sorted(unknown)} (the test's: {self._metrics})")
        for k in self._metrics:
            y = scores.get(k)
            if y is not None and not (isinstance(y, (int, float, np.floating, np.integer)) and
                                      (np.isnan(y) or 0.0 <= y <= 1.0)):
                raise ValueError(f"model {self._name!r}, item {iid!r}, metric {k!r}: a scaled score is a "
                                 f"number in [0, 1], got {y!r}")
        for k in self._metrics:
            y = scores.get(k)
            i = self.bank_item(k, item)
            if y is None or np.isnan(y):
                self._examinees[k].exclude([i])
                self._examinees[k].charge(cost)
            else:
                self._examinees[k].record(i, float(y), cost=cost)
        self._pending.discard(item)
        self._items.append(item)
        self._spent += cost
        if not self._pending:
            reason = self._stop_reason()
            if reason is not None:
                self._stopped_because = reason

"""One model under several metrics at once (a bank per metric): :class:`JointExaminee`, each joint
item generated once and scored by every metric, an :class:`~lm_eval_adaptive.engine.cat.examinee.Examinee`
per metric's bank as its parts."""

from __future__ import annotations

import math
from types import MappingProxyType
from typing import Mapping

import numpy as np

from lm_eval_adaptive.engine.irt.checks import check_cost, check_raw, check_scores
from lm_eval_adaptive.engine.cat.estimation import EstimatorFactory
from lm_eval_adaptive.engine.cat.selection import (
    JointAbility,
    JointInformationSelector,
    shared_default_selector,
)
from lm_eval_adaptive.engine.cat.examinee import Examinee
from lm_eval_adaptive.engine.cat.item_ledger import ItemLedger

__all__ = ["JointExaminee"]


class JointExaminee(ItemLedger):
    """One model under several metrics at once: each joint item is generated once and scored by every metric.

    The joint items are those every bank has (:func:`~lm_eval_adaptive.engine.irt.bank.joint_item_ids`, the
    ``selector``'s ``item_ids``); an item index here is a position among them. Each metric keeps its own
    :class:`Examinee` on its own bank (:attr:`parts`: θ̂, SE, person fit, items, scores), into which every
    generation's score under that metric is recorded; a metric that cannot score a generation (None or
    NaN) excludes the item for that metric only and is charged its cost. The joint side is what a
    single bank's examinee is to a test or a ranker: the items taken (reserved, scored or excluded), the
    generations (:attr:`n`, :attr:`items`), the spend (each generation counted once, and every
    :meth:`charge`), and the next item, chosen by the
    :class:`~lm_eval_adaptive.engine.cat.selection.JointInformationSelector` from every part's θ̂ and
    measurement SE (``focus``: only some metrics' information counts). Its :attr:`measurement_se` is the
    largest of the parts' (an SE target is met when every metric meets it). Its account of the joint
    items and the spend is the :class:`~lm_eval_adaptive.engine.cat.item_ledger.ItemLedger` every
    examinee keeps, here over the joint items.
    """

    def __init__(self, selector: JointInformationSelector, name: str = "model", *,
                 item_costs: np.ndarray | None = None, estimator: EstimatorFactory | None = None):
        super().__init__(selector.item_ids, selector, name, item_costs=item_costs, unit="joint")
        self._metrics = selector.metrics
        self._index = selector.indices
        self._parts = {k: Examinee(bank, shared_default_selector(bank, seed=0), name, estimator=estimator)
                       for k, bank in zip(self._metrics, selector.banks)}
        self._part_list = tuple(self._parts.values())
        for p, index in zip(self._part_list, self._index):  # a bank's items no other bank has are never given
            other = np.ones(p.bank.n_items, dtype=bool)
            other[index] = False
            if other.any():
                p.exclude(np.flatnonzero(other))
        self._all = (True,) * len(self._metrics)
        self._items: list[int] = []
        self._scores: list[dict] = []

    # ----------------------------------------------------------------- reading
    @property
    def metrics(self) -> list[str]:
        return list(self._metrics)

    @property
    def parts(self) -> Mapping[str, Examinee]:
        """Metric → this model's :class:`Examinee` on that metric's bank (read it; it changes through this object)."""
        return MappingProxyType(self._parts)

    @property
    def selector(self) -> JointInformationSelector:
        return self._selector

    @property
    def item_ids(self) -> list[str]:
        return list(self._item_ids)

    def bank_item(self, metric: str, item: int) -> int:
        """Index in ``metric``'s bank of joint item ``item``."""
        return int(self._index[self._metrics.index(metric)][item])

    @property
    def n(self) -> int:
        """Generations recorded."""
        return len(self._items)

    @property
    def items(self) -> list[int]:
        """Joint items generated and recorded, in order (a copy)."""
        return list(self._items)

    @property
    def scores(self) -> list[dict]:
        """Per generation, metric → scaled score (None: the metric could not score it)."""
        return [dict(x) for x in self._scores]

    @property
    def measurement_se(self) -> float:
        """The largest measurement SE of the parts (what more items reduce)."""
        return max(p.measurement_se for p in self._part_list)

    def ability(self, focus=None) -> JointAbility:
        """Every part's θ̂ and measurement SE, and which metrics count (``focus``: one bool per metric;
        None: all). θ̂ is read only for the metrics that count."""
        focus = self._all if focus is None else tuple(focus)
        parts = self._part_list
        return JointAbility(tuple(p.theta if on else math.nan for p, on in zip(parts, focus)),
                            tuple(p.measurement_se if on else math.nan for p, on in zip(parts, focus)), focus)

    def next_item(self, rng: np.random.Generator | None = None, focus=None) -> int:
        """The joint selector's next item (-1: none left), the information summed over ``focus``
        (one bool per metric; None: every metric); reserves nothing."""
        sel = self._selector
        ability = self.ability(focus) if sel.uses_theta(self._n_taken) else None
        return sel.select(ability, self._mask, self._n_taken, rng)

    def candidates(self, k: int, focus=None) -> np.ndarray:
        """Up to ``k`` untaken joint items, in the order the selector would give them."""
        return self._selector.candidates(self.ability(focus), self._mask, self._n_taken, k)

    # ---------------------------------------------------------------- changing
    def checked_scores(self, scores, item_id: str) -> dict:
        """``scores`` (metric → scaled score in [0, 1], None or NaN where the metric could not score)
        checked: a mapping over the metrics only, each a number; returns metric → float or None."""
        if not isinstance(scores, Mapping):
            raise ValueError(f"model {self._name!r}, item {item_id!r}: the scores of a joint item are a mapping "
                             f"metric → scaled score, got {scores!r}")
        unknown = set(scores) - set(self._metrics)
        if unknown:
            raise ValueError(f"scores for unknown metrics {sorted(unknown)} (the run's: {list(self._metrics)})")
        out = {}
        for k in self._metrics:
            y = scores.get(k)
            if y is not None and not (isinstance(y, (int, float, np.floating, np.integer)) and
                                      (np.isnan(y) or 0.0 <= y <= 1.0)):
                raise ValueError(f"model {self._name!r}, item {item_id!r}, metric {k!r}: a scaled score is a "
                                 f"number in [0, 1], got {y!r}")
            out[k] = None if y is None or np.isnan(y) else float(y)
        return out

    def record(self, item: int, scores, *, cost: float | None = None, raw=None) -> None:
        """Record the generation of joint ``item``: ``scores`` metric → scaled score (None or NaN: the
        metric could not score it; the item is excluded for that metric, which is charged its cost).
        ``cost``: USD it cost (default: its item cost); ``raw``: metric → the raw value each score was
        scaled from (a metric absent or None: its score mapped back through its bank's range). The item
        counts as a random slot's as :meth:`Examinee.record` says, on the joint items. Nothing changes
        when anything is refused."""
        item = self._check_item(item)
        iid = self.item_id(item)
        if self._scored[item] or self._excluded[item]:
            self._check_new(item)
        ys = self.checked_scores(scores, iid)
        if cost is not None:
            cost = check_cost(cost, model=self._name, item=iid)
        else:
            cost = self.cost_of(item)
        raws = {}
        for k in self._metrics:
            v = None if raw is None else raw.get(k) if isinstance(raw, Mapping) else None
            if v is not None and ys[k] is not None:
                raws[k] = check_raw(v, model=self._name, item=iid)
        for k, p, index in zip(self._metrics, self._part_list, self._index):  # every check before any change
            y = ys[k]
            if y is not None:
                p.check_recordable(index[item:item + 1], y, [iid])
        random = bool(self._random[item]) if self._mask[item] else self._random_unreserved(item)
        self._set_random(item, random)
        for k, p, index in zip(self._metrics, self._part_list, self._index):
            y, i = ys[k], int(index[item])
            if y is None:
                p.exclude([i])
                p.charge(cost)
            else:
                p.record(i, y, cost=cost, raw=raws.get(k), random=random)
        if not self._mask[item]:
            self._mask[item] = True
            self._n_taken += 1
        self._scored[item] = True
        self._items.append(item)
        self._scores.append(ys)
        self._spent += cost
        self._version += 1

    def record_many(self, items, scores, *, costs=None, raws=None) -> None:
        """Record several generations at once (e.g. a full run): ``scores`` metric → one scaled score
        per item (NaN: the metric has none; the item is then excluded for it). ``costs``: USD per item
        (default: the item costs); ``raws``: metric → the raw values (default: the scores mapped back).
        Nothing changes when anything is refused."""
        arr = self._check_items(items)
        if np.unique(arr).size != arr.size:
            raise ValueError(f"model {self._name!r}: an item appears twice in one record_many")
        clash = arr[self._scored[arr] | self._excluded[arr]]
        if clash.size:
            raise ValueError(f"model {self._name!r}, item {self.item_id(int(clash[0]))!r}: already scored or excluded")
        if not isinstance(scores, Mapping) or set(scores) - set(self._metrics):
            raise ValueError(f"model {self._name!r}: record_many takes metric → scores over the metrics "
                             f"{list(self._metrics)}")
        c = self._costs_of(arr, costs, [self.item_id(i) for i in arr.tolist()])
        ys = {}
        for k in self._metrics:
            y = np.full(arr.size, np.nan) if k not in scores else np.asarray(scores[k], dtype=float)
            if y.shape != arr.shape:
                raise ValueError(f"model {self._name!r}, metric {k!r}: {arr.size} items but {y.size} scores")
            ys[k] = y
        for k, p, index in zip(self._metrics, self._part_list, self._index):  # checked by every part first
            y = ys[k]
            have = ~np.isnan(y)
            ids = [self.item_id(i) for i in arr[have].tolist()]
            check_scores(y[have], model=self._name, items=ids)
            p.check_recordable(index[arr[have]], y[have], ids)
        rs = {}
        for k in self._metrics:
            if raws is not None and raws.get(k) is not None:
                r = np.asarray(raws[k], dtype=float)
                if r.shape != arr.shape:
                    raise ValueError(f"model {self._name!r}, metric {k!r}: {arr.size} items but {r.size} raw values")
                bad = np.flatnonzero(~np.isnan(ys[k]) & ~np.isfinite(r))
                if bad.size:
                    check_raw(float(r[bad[0]]), model=self._name, item=self.item_id(int(arr[bad[0]])))
                rs[k] = r
        for k, p, index in zip(self._metrics, self._part_list, self._index):
            y = ys[k]
            have = ~np.isnan(y)
            if have.any():
                p.record_many(index[arr[have]], y[have], costs=c[have],
                              raws=rs[k][have] if k in rs else None)
            if (~have).any():
                p.exclude(index[arr[~have]])
                p.charge(float(np.sum(c[~have])))
        self._mark_many(arr)
        self._items.extend(arr.tolist())
        self._scores.extend({k: (None if np.isnan(ys[k][j]) else float(ys[k][j])) for k in self._metrics}
                            for j in range(arr.size))
        self._spent += float(np.sum(c))
        self._version += 1

    def charge(self, usd: float) -> None:
        """Add money spent on this model without a generation; every metric's part counts it too."""
        if usd is None:
            raise ValueError(f"model {self._name!r}: a charge needs an amount (USD)")
        usd = check_cost(usd, model=self._name)
        super().charge(usd)
        for p in self._part_list:
            p.charge(usd)

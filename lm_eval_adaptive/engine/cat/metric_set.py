"""Several metrics of one generation: :class:`MetricSet`, the part an
:class:`~lm_eval_adaptive.engine.cat.examinee.Examinee` of several metrics measures with.

A task may score each output by several metrics, a bank per metric. The examinee's items are then the
joint items (those every bank has, :func:`~lm_eval_adaptive.engine.irt.bank.joint_item_ids`), each
generated once; its ledger counts them once. This part keeps, per metric, a one-metric ``Examinee`` on
that metric's bank (its *part*: θ̂, SE, person fit, items, scores, raw values, random slots) into which
every generation's score under that metric is recorded; a metric that cannot score a generation (None or
NaN) excludes the item for that metric only and is charged its cost. The one-metric part is
:class:`~lm_eval_adaptive.engine.cat.bank_ability.BankAbility`; both answer the examinee's
:class:`~lm_eval_adaptive.engine.cat.examinee.AbilityPart` protocol.
"""

from __future__ import annotations

import math
from types import MappingProxyType
from typing import Mapping

import numpy as np

from lm_eval_adaptive.engine.irt.checks import check_raw, check_scores
from lm_eval_adaptive.engine.cat.selection import JointAbility, JointInformationSelector

__all__ = ["MetricSet"]


class MetricSet:
    """The metrics of ``selector`` (a :class:`~lm_eval_adaptive.engine.cat.selection.JointInformationSelector`,
    whose ``indices`` map the joint items into each bank), each measured by its one-metric examinee in
    ``parts`` (metric → examinee on that metric's bank; a bank's items no other bank has are excluded from
    its part here, as they are never given). Errors name the model ``name``."""

    no_ability = None  # what the joint selector is given at a random slot

    def __init__(self, selector: JointInformationSelector, parts: Mapping, name: str) -> None:
        self._name = name
        self._metrics = selector.metrics
        self._index = selector.indices
        self._item_ids = selector.item_ids
        if tuple(parts) != self._metrics:
            raise ValueError(f"parts for the metrics {list(parts)}, the selector's are {list(self._metrics)}")
        self._parts = dict(parts)
        self._part_list = tuple(self._parts.values())
        for p, index in zip(self._part_list, self._index):  # a bank's items no other bank has are never given
            other = np.ones(p.bank.n_items, dtype=bool)
            other[index] = False
            if other.any():
                p.exclude(np.flatnonzero(other))
        self._all = (True,) * len(self._metrics)

    # ----------------------------------------------------------------- reading
    @property
    def metrics(self) -> tuple[str, ...]:
        return self._metrics

    @property
    def parts(self) -> Mapping:
        """Metric → the model's one-metric examinee under it (read it; it changes through this part)."""
        return MappingProxyType(self._parts)

    @property
    def measurement_se(self) -> float:
        """The largest measurement SE of the parts (an SE target is met when every metric meets it)."""
        return max(p.measurement_se for p in self._part_list)

    def ability(self, focus=None) -> JointAbility:
        """Every part's θ̂ and measurement SE, and which metrics count (``focus``: one bool per metric;
        None: all). θ̂ is read only for the metrics that count."""
        focus = self._all if focus is None else tuple(focus)
        parts = self._part_list
        return JointAbility(tuple(p.theta if on else math.nan for p, on in zip(parts, focus)),
                            tuple(p.measurement_se if on else math.nan for p, on in zip(parts, focus)), focus)

    def bank_item(self, metric: str, item: int) -> int:
        """Index in ``metric``'s bank of joint item ``item``."""
        if metric not in self._metrics:
            raise ValueError(f"unknown metric {metric!r} (this examinee's: {list(self._metrics)})")
        return int(self._index[self._metrics.index(metric)][item])

    # --------------------------------------------------------------- checking
    def checked_score(self, scores, item_id: str) -> dict:
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

    def checked_many(self, items: np.ndarray, scores, raws, ids: list[str]) -> tuple[dict, dict]:
        """Metric → the scores of ``items`` (ids ``ids``) told in bulk (NaN: none) and metric → their raw
        values (a metric absent: mapped back by its part), checked by every part."""
        if not isinstance(scores, Mapping) or set(scores) - set(self._metrics):
            raise ValueError(f"model {self._name!r}: record_many takes metric → scores over the metrics "
                             f"{list(self._metrics)}")
        ys = {}
        for k in self._metrics:
            y = np.full(items.size, np.nan) if k not in scores else np.asarray(scores[k], dtype=float)
            if y.shape != items.shape:
                raise ValueError(f"model {self._name!r}, metric {k!r}: {items.size} items but {y.size} scores")
            ys[k] = y
        for k, p, index in zip(self._metrics, self._part_list, self._index):  # checked by every part first
            y = ys[k]
            have = ~np.isnan(y)
            some = [ids[j] for j in np.flatnonzero(have).tolist()]
            check_scores(y[have], model=self._name, items=some)
            p.check_recordable(index[items[have]], y[have], some)
        rs = {}
        for k in self._metrics:
            if raws is not None and raws.get(k) is not None:
                r = np.asarray(raws[k], dtype=float)
                if r.shape != items.shape:
                    raise ValueError(f"model {self._name!r}, metric {k!r}: {items.size} items but {r.size} raw values")
                bad = np.flatnonzero(~np.isnan(ys[k]) & ~np.isfinite(r))
                if bad.size:
                    check_raw(float(r[bad[0]]), model=self._name, item=ids[int(bad[0])])
                rs[k] = r
        return ys, rs

    # ---------------------------------------------------------------- changing
    def add(self, item: int, ys: dict, raw, cost: float, random: bool) -> None:
        """Record joint ``item``'s scores ``ys`` (metric → checked score or None) in every part: a metric
        without one excludes the item and is charged ``cost``; ``raw``: metric → the raw value each score
        was scaled from (a metric absent or None: its score mapped back by its part); ``random``: whether a
        random slot chose it. ValueError, changing nothing, unless every raw value is finite and every
        part finds its score recordable."""
        iid = str(self._item_ids[item])
        raws = {}
        for k in self._metrics:
            v = None if raw is None else raw.get(k) if isinstance(raw, Mapping) else None
            if v is not None and ys[k] is not None:
                raws[k] = check_raw(v, model=self._name, item=iid)
        for k, p, index in zip(self._metrics, self._part_list, self._index):  # every check before any change
            y = ys[k]
            if y is not None:
                p.check_recordable(index[item:item + 1], y, [iid])
        for k, p, index in zip(self._metrics, self._part_list, self._index):
            y, i = ys[k], int(index[item])
            if y is None:
                p.exclude([i])
                p.charge(cost)
            else:
                p.record(i, y, cost=cost, raw=raws.get(k), random=random)

    def add_many(self, items: np.ndarray, ys: dict, rs: dict, costs: np.ndarray) -> None:
        """Record the scores of ``items`` told in bulk in every part (checked by :meth:`checked_many`)."""
        for k, p, index in zip(self._metrics, self._part_list, self._index):
            y = ys[k]
            have = ~np.isnan(y)
            if have.any():
                p.record_many(index[items[have]], y[have], costs=costs[have],
                              raws=rs[k][have] if k in rs else None)
            if (~have).any():
                p.exclude(index[items[~have]])
                p.charge(float(np.sum(costs[~have])))

    def told(self, ys: dict) -> list[dict]:
        """The scores told in bulk, per item metric → score (None: the metric had none)."""
        n = next(iter(ys.values())).size
        return [{k: (None if np.isnan(ys[k][j]) else float(ys[k][j])) for k in self._metrics} for j in range(n)]

    @staticmethod
    def copy_scores(scores: list[dict]) -> list[dict]:
        return [dict(x) for x in scores]

    def charge(self, usd: float) -> None:
        """Money spent without a generation: every metric's part counts it too."""
        for p in self._part_list:
            p.charge(usd)

"""What every ranker holds and reports: its settings (models, costs, budget, confidence, warm-up and
length), the requests in flight (:class:`Request`), the models blocked or failed, the spend, and the
mapping of item ids to indices. :class:`RankerState` is the part of
:class:`~lm_eval_adaptive.engine.ranking.ranker.AdaptiveRanker` (and of the several-metric ranker) that
sets these up and reads them (read-only properties); the ranker's methods change them.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping, NamedTuple

import numpy as np

from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.cat.examinee import Examinee
from lm_eval_adaptive.engine.ranking.pairs.rules import PairRule
from lm_eval_adaptive.engine.cat.selection import Selector


__all__ = ["RankerState", "Request"]


class Request(NamedTuple):
    """One administration: give bank item ``item`` (id ``item_id``) to ``model``.

    Immutable and hashable (a named tuple: built in a third of a frozen dataclass's time, and an
    ask builds one per administration)."""

    model: str
    item: int
    item_id: str
    cost: float
    phase: str  # "warmup" or "adaptive"


class RankerState:
    """The settings and bookkeeping of a ranker, read-only from outside (see the module docstring)."""

    def _init_core(self, models, n_items: int, *, item_costs, relative_costs, confidence, n_init, n_max, budget,
                   seed, max_in_flight, reserve_mean_cost) -> dict:
        """The settings and bookkeeping every ranker has (models, costs, budget, what is in flight, blocked,
        failed); the per-model item costs, checked (None: items cost 0)."""
        models = [str(m) for m in models]
        if len(models) < 2:
            raise ValueError("ranking needs at least 2 models")
        if len(set(models)) != len(models):
            raise ValueError("model names must be unique")
        if not (0.5 < confidence < 1):
            raise ValueError(f"confidence must be in (0.5, 1), got {confidence}")
        if n_init < 1:
            raise ValueError("n_init must be >= 1")
        if budget is not None and not (budget >= 0):
            raise ValueError("budget must be >= 0")
        if budget is not None and item_costs is None:
            raise ValueError("a budget needs item_costs")
        self._models = tuple(models)
        self._confidence = float(confidence)
        self._upper = 1 - (1 - self._confidence) / 2
        self._n_init = int(n_init)
        self._n_items = int(n_items)
        self._n_max = n_items if n_max is None else min(int(n_max), n_items)
        if self._n_max < 1:
            raise ValueError("n_max must be >= 1")
        self._budget = budget
        self._seed = seed
        self._rng = np.random.default_rng(seed)
        costs = {}
        for m in models:
            c = None if item_costs is None else np.asarray(item_costs[m], dtype=float)
            if c is not None and c.shape != (n_items,):
                raise ValueError(f"item_costs[{m!r}] must have one cost per {self._item_word} ({n_items})")
            if c is not None and not np.all(np.isfinite(c) & (c >= 0)):
                raise ValueError(f"item_costs[{m!r}] must be finite numbers >= 0 (USD)")
            costs[m] = c
        if relative_costs is None:
            if item_costs is None:
                rel = {m: 1.0 for m in models}
            else:
                rel = {m: float(np.mean(costs[m])) for m in models}
        else:
            rel = {m: float(relative_costs[m]) for m in models}
        lo = min(rel.values())
        self._relative_costs = {m: (v / lo if lo > 0 else 1.0) for m, v in rel.items()}
        #: per model, its next item and the examinee version it was chosen at
        self._next: dict[str, tuple | None] = {m: None for m in models}
        #: False once no model needs warm-up items (scored counts only grow)
        self._warm_up = True
        if int(max_in_flight) < 1:
            raise ValueError("max_in_flight must be >= 1")
        self._max_in_flight = int(max_in_flight)
        self._pending: dict[tuple[str, int], Request] = {}  # (model, item) -> request in flight
        self._failed: dict[str, str] = {}
        # models the caller cannot pay for right now (e.g. a live run's ledger refused their
        # next call's upper estimate); skipped by ask() as over budget until unblocked
        self._blocked: set[str] = set()
        self._stopped_because: str | None = None
        self._reserve_mean_cost = bool(reserve_mean_cost)
        self._mean_cost = {m: (float(np.mean(costs[m])) if costs[m] is not None else 0.0) for m in models}
        self._committed: float | None = None  # spent + reserved, read once per ask (see _fits)
        return costs

    @property
    def bank(self) -> ItemBank:
        return self._bank

    @property
    def models(self) -> list[str]:
        """Every model, in the order given (a copy)."""
        return list(self._models)

    @property
    def confidence(self) -> float:
        return self._confidence

    @property
    def upper(self) -> float:
        """1 - (1-γ)/2: the default pair rule's threshold on P(order)."""
        return self._upper

    @property
    def n_init(self) -> int:
        return self._n_init

    @property
    def n_max(self) -> int:
        return self._n_max

    @property
    def budget(self) -> float | None:
        return self._budget

    @property
    def seed(self):
        return self._seed

    @property
    def max_in_flight(self) -> int:
        return self._max_in_flight

    @property
    def reserve_mean_cost(self) -> bool:
        return self._reserve_mean_cost

    @property
    def relative_costs(self) -> dict[str, float]:
        """c_m of the allocation rule (a copy)."""
        return dict(self._relative_costs)

    @property
    def selector(self) -> Selector:
        return self._selector

    @property
    def pair_rule(self) -> PairRule:
        return self._judge.rule

    @property
    def judgements(self) -> tuple:
        """The :class:`~lm_eval_adaptive.engine.ranking.pairs.judgement.PairJudgement` of each metric (one here)."""
        return self._judges

    @property
    def examinees(self) -> Mapping[str, Examinee]:
        """Every model's state, read-only: change it through the ranker's methods."""
        return MappingProxyType(self._examinees)

    @property
    def pending(self) -> Mapping[tuple[str, int], Request]:
        """The requests in flight, by (model, item index): a read-only view."""
        return MappingProxyType(self._pending)

    @property
    def failed(self) -> Mapping[str, str]:
        """Dropped models and why (read-only view)."""
        return MappingProxyType(self._failed)

    @property
    def blocked(self) -> frozenset:
        """Models :meth:`block` ed: not asked for now."""
        return frozenset(self._blocked)

    @property
    def stopped_because(self) -> str | None:
        """Why the run ended (one of :data:`STOP_REASONS`), or None while it runs."""
        return self._stopped_because

    @property
    def finished(self) -> bool:
        return self._stopped_because is not None

    @property
    def spent(self) -> float:
        return float(sum(e.spent for e in self._examinees.values()))

    @property
    def reserved(self) -> float:
        return float(sum(r.cost for r in self._pending.values()))

    def in_flight(self, m: str) -> int:
        """Requests of model ``m`` in flight."""
        return sum(1 for (pm, _) in self._pending if pm == m)

    def is_pending(self, request: Request) -> bool:
        """``request`` was asked and is neither told, cancelled nor released."""
        return self._pending.get((request.model, request.item)) == request

    @property
    def active(self) -> list[str]:
        """The models still ranked (not failed)."""
        return [m for m in self._models if m not in self._failed]

    def item_index(self, item) -> int:
        """The index of ``item`` (an item id, or an index, checked) in the items requests name."""
        return self._index(item)

    def _examinee(self, model: str):
        try:
            return self._examinees[model]
        except (KeyError, TypeError):
            raise ValueError(f"unknown model {model!r} (the ranker's models: {list(self._models)})") from None

    def _ids_to_indices(self, ids: list) -> np.ndarray:
        """Indices of item ids (an error naming those not known)."""
        return self._bank.index_of(ids)

    def _index(self, item) -> int:
        """Index of ``item``: an item id (str) or an index (int)."""
        if isinstance(item, str):
            return int(self._ids_to_indices([item])[0])
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, np.integer)):
            raise ValueError(f"an item is a {self._item_word} id (str) or index (int), got {item!r}")
        if not 0 <= item < self._n_items:
            raise ValueError(f"item index {item} is outside {self._items_name} (0..{self._n_items - 1})")
        return int(item)

    def _indices(self, items) -> np.ndarray:
        """Indices of ``items``: item ids (str) or indices (int), one or many."""
        arr = np.atleast_1d(np.asarray(items, dtype=object if _has_str(items) else None))
        if arr.size == 0:
            return np.zeros(0, dtype=np.int64)
        if arr.ndim != 1:
            raise ValueError("items must be a 1-d sequence of item ids or indices")
        if arr.dtype.kind in "iu":
            return self._range_checked(arr.astype(np.int64))
        if all(isinstance(x, str) for x in arr.tolist()):
            return self._ids_to_indices(arr.tolist())
        return np.array([self._index(x) for x in arr.tolist()], dtype=np.int64)

    def _range_checked(self, idx: np.ndarray) -> np.ndarray:
        bad = idx[(idx < 0) | (idx >= self._n_items)]
        if bad.size:
            raise ValueError(f"item index {int(bad[0])} is outside {self._items_name} (0..{self._n_items - 1})")
        return idx


def _has_str(items) -> bool:
    if isinstance(items, str):
        return True
    if isinstance(items, np.ndarray):
        return items.dtype.kind in "UO"
    try:
        return any(isinstance(x, str) for x in items)
    except TypeError:
        return False

"""One model on a task with no bank: documents in random order, stopped at an interval width — the honest
replacement of the harness's ``--limit`` (issue 31; docs/cold-start.md).

:class:`BankFreeTest` has the ``next_items``/``record``/``result`` protocol of
:class:`~lm_eval_adaptive.engine.cat.adaptive_test.AdaptiveTest` (so :func:`~lm_eval_adaptive.engine.evaluation.simulation.drive`
runs it): the documents in one seeded uniformly random order, the model's full-task mean with the
anytime-valid confidence sequence of :mod:`~lm_eval_adaptive.engine.anytime.confidence_sequence`; it stops
when the interval is at most ``ci_width`` wide (``ci_width``), at ``max_items`` (``max_items``), when the
next document would overrun ``budget`` (``budget``) or when every document is answered (``exhausted``:
the interval is then the exact mean). The interval holds at the stated level whenever it stops, because
the sequence holds at every look at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from lm_eval_adaptive.engine.anytime.confidence_sequence import DEFAULT_GRID, TRUNCATION, WorBettingCS
from lm_eval_adaptive.engine.irt.checks import check_cost
from lm_eval_adaptive.engine.signature import versions

__all__ = ["BankFreeTest", "BankFreeTestResult"]


@dataclass
class BankFreeTestResult:
    """What a :class:`BankFreeTest` found (metric units)."""

    __test__ = False  # not a pytest test class

    estimate: float
    lower: float
    upper: float
    n_items: int
    population: int
    spent: float
    stopped_because: str
    items: list
    scores: list
    signature: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"estimate": self.estimate, "lower": self.lower, "upper": self.upper, "n_items": self.n_items,
                "population": self.population, "spent_usd": self.spent, "stopped_because": self.stopped_because,
                "items": list(self.items), "scores": list(self.scores), "signature": dict(self.signature)}


class BankFreeTest:
    """One model's full-task mean over ``item_ids`` from documents in random order (module docstring).

    ``score_range`` (lo, hi): the metric's known range (a score outside is refused); ``confidence``: the
    interval's level; ``item_costs``: USD per document (None: 1.0 each); ``exclude``: document indices with
    no score (outside the population)."""

    __test__ = False

    def __init__(self, item_ids: Sequence, *, score_range: tuple[float, float], confidence: float = 0.95,
                 ci_width: float | None = None, max_items: int | None = None, budget: float | None = None,
                 item_costs=None, exclude: Sequence[int] = (), seed=0, grid: int = DEFAULT_GRID):
        self._ids = [str(i) for i in item_ids]
        n = len(self._ids)
        lo, hi = (float(v) for v in score_range)
        if ci_width is not None and not (ci_width > 0):
            raise ValueError(f"the interval width to stop at must be > 0, got {ci_width}")
        has = np.ones(n, dtype=bool)
        has[np.asarray(list(exclude), dtype=np.int64)] = False
        perm = np.random.default_rng(seed).permutation(n)
        self._order = perm[has[perm]]
        if self._order.size == 0:
            raise ValueError("no document to evaluate on")
        self._lo, self._hi = lo, hi
        self._cs = WorBettingCS(self._order.size, lo, hi, 1.0 - float(confidence), grid=grid)
        self._confidence, self._width = float(confidence), ci_width
        self._max = self._order.size if max_items is None else int(max_items)
        self._budget = None if budget is None else float(budget)
        self._costs = np.ones(n) if item_costs is None else np.asarray(item_costs, dtype=float)
        self._seed = seed
        self._next = 0  # position in the order of the next document to hand out
        self._scores = np.full(n, np.nan)
        self._pending: set[int] = set()
        self._absorbed = 0
        self._spent = 0.0
        self._stopped: str | None = None

    @property
    def stopped_because(self) -> str | None:
        return self._stopped

    @property
    def done(self) -> bool:
        return self._stopped is not None

    @property
    def budget(self) -> float | None:
        return self._budget

    @property
    def spent(self) -> float:
        return self._spent

    @property
    def n(self) -> int:
        """Documents scored so far."""
        return int(np.sum(~np.isnan(self._scores)))

    def charge(self, usd: float) -> None:
        """Count ``usd`` as spent with no score (a failed attempt the provider may have billed)."""
        self._spent += float(check_cost(usd, item="(charge)"))

    def stop(self, reason: str) -> None:
        """End the test (e.g. ``budget``: the cap refused the next call); a test that ended keeps its reason."""
        if self._stopped is None:
            self._stopped = str(reason)

    @property
    def interval(self) -> tuple[float, float]:
        return float(self._cs.lower), float(self._cs.upper)

    def _check_stop(self) -> None:
        if self._stopped is not None:
            return
        lo, hi = self.interval
        if self._absorbed >= self._order.size:
            self._stopped = "exhausted"
        elif self._width is not None and self._absorbed > 0 and hi - lo <= self._width:
            self._stopped = "ci_width"
        elif self._next >= self._max and not self._pending:
            self._stopped = "max_items"

    def next_items(self, k: int = 1) -> list[int]:
        """Up to ``k`` documents to give next (the next ones of the random order); [] when the test is over."""
        self._check_stop()
        out: list[int] = []
        while self._stopped is None and len(out) < k and self._next < min(self._max, self._order.size):
            item = int(self._order[self._next])
            reserved = sum(float(self._costs[i]) for i in self._pending) + sum(float(self._costs[i]) for i in out)
            if self._budget is not None and self._spent + reserved + float(self._costs[item]) > self._budget * (1 + 1e-12):
                if not self._pending and not out:
                    self._stopped = "budget"
                break
            out.append(item)
            self._next += 1
        self._pending.update(out)
        return out

    def record(self, item: int, y: float, *, cost: float | None = None) -> None:
        """The score of document ``item`` (metric units, inside the stated range)."""
        item = int(item)
        if item not in self._pending:
            raise ValueError(f"item {self._ids[item]!r} was not handed out")
        y = float(y)
        if not math.isfinite(y) or not (self._lo <= y <= self._hi):
            raise ValueError(f"item {self._ids[item]!r}: the score must be a finite number in the stated range "
                             f"[{self._lo:g}, {self._hi:g}], got {y!r}")
        self._pending.discard(item)
        self._spent += float(self._costs[item]) if cost is None else float(check_cost(cost, item=self._ids[item]))
        self._scores[item] = y
        while self._absorbed < self._order.size and not np.isnan(self._scores[self._order[self._absorbed]]):
            self._cs.update(self._scores[self._order[self._absorbed]])
            self._absorbed += 1
        self._check_stop()

    def result(self) -> BankFreeTestResult:
        lo, hi = self.interval
        taken = [int(i) for i in self._order[: self._next] if not np.isnan(self._scores[i])]
        return BankFreeTestResult(
            estimate=float(self._cs.mean) if self._absorbed else float("nan"), lower=lo, upper=hi,
            n_items=len(taken), population=int(self._order.size), spent=self._spent,
            stopped_because=self._stopped or "running", items=[self._ids[i] for i in taken],
            scores=[float(self._scores[i]) for i in taken],
            signature={"test": "bank-free", "interval": "wor-betting-cs", "truncation": TRUNCATION,
                       "confidence": self._confidence, "ci_width": self._width, "range": [self._lo, self._hi],
                       "documents": int(self._order.size),
                       "seed": self._seed if isinstance(self._seed, (int, type(None))) else str(self._seed)}
            | versions())

"""Computerized adaptive testing of one model (METHOD.md §3).

:class:`Examinee` is the state of one model under test: its posterior, the items it was
given and what they cost. :class:`AdaptiveTest` drives one examinee with stopping rules
(SE target, minimum and maximum length, dollar budget). Neither knows where scores come
from: ask for the next item, administer it however you like (simulation, the harness,
an API), then record the scaled score.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lm_eval_adaptive.engine.bank import ItemBank
from lm_eval_adaptive.engine.estimation import DEFAULT_PRIOR_SD, GridPosterior
from lm_eval_adaptive.engine.selection import MaxInfoSelector

__all__ = ["Examinee", "AdaptiveTest", "TestResult", "full_task_estimate"]


class Examinee:
    """One model's adaptive-testing state over a bank."""

    def __init__(self, bank: ItemBank, selector: MaxInfoSelector, name: str = "model", *,
                 prior_sd: float = DEFAULT_PRIOR_SD, item_costs: np.ndarray | None = None):
        self.name = name
        self.bank = bank
        self.selector = selector
        self.posterior = GridPosterior(bank.prior_mean, prior_sd)
        self.mask = selector.new_mask()
        self.n_masked = 0  # items administered, reserved or excluded (selection window size)
        self.items: list[int] = []
        self.scores: list[float] = []
        self.info_at_selection: list[float] = []
        self.item_costs = item_costs
        self.spent = 0.0

    @property
    def theta(self) -> float:
        return self.posterior.mean

    @property
    def se(self) -> float:
        return self.posterior.sd

    @property
    def n(self) -> int:
        return len(self.items)

    def next_item(self, rng: np.random.Generator | None = None) -> int:
        """Bank index of the most informative unadministered item (-1 if none left)."""
        return self.selector.select(self.posterior.mean, self.mask, self.n_masked, rng)

    def _mark(self, item: int) -> None:
        pos = self.selector.rank[item]
        if not self.mask[pos]:
            self.mask[pos] = True
            self.n_masked += 1

    def exclude(self, items) -> None:
        """Never select these bank items (e.g. the model has no score for them)."""
        pos = self.selector.rank[np.atleast_1d(np.asarray(items, dtype=np.int64))]
        self.mask[pos] = True
        self.n_masked = int(self.mask.sum())

    def cost_of(self, item: int) -> float:
        return 0.0 if self.item_costs is None else float(self.item_costs[item])

    def reserve(self, item: int) -> None:
        """Mark an item as taken (so it is never selected twice), before its score is known."""
        self._mark(item)

    def record(self, item: int, y: float, *, cost: float | None = None) -> None:
        """Add the scaled score ``y`` ∈ [0, 1] of bank item ``item``."""
        self.info_at_selection.append(float(self.bank.model.information(self.posterior.mean, self.bank.b[item])))
        self._mark(item)
        self.posterior.update(self.bank.model, self.bank.b[item], y)
        self.items.append(int(item))
        self.scores.append(float(y))
        self.spent += self.cost_of(item) if cost is None else float(cost)


def full_task_estimate(bank: ItemBank, items, raw_scores, theta: float, se: float,
                       level: float = 0.95, *, include_dropped: bool = True) -> dict:
    """Estimate of the model's mean raw metric over the whole task (ATLAS' p-IRT blend, METHOD.md §6).

    Observed raw scores on the administered items plus the model's predicted raw scores
    (μ(θ̂, b) mapped back through the bank's stored range) on every other bank item.
    Items calibration dropped (constant, negatively correlated, ...) have no difficulty;
    with ``include_dropped`` they count with their calibration models' mean raw score
    (exact for constant items), so the estimate is over every task document the
    calibration saw. The interval adds linearly (a conservative combination) the ability
    uncertainty (θ̂ ± z·SE pushed through the prediction) and the response-model noise of
    the unobserved items.
    """
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + level / 2))
    items = np.asarray(items, dtype=np.int64)
    rest = np.ones(bank.n_items, dtype=bool)
    rest[items] = False
    span = bank.hi[rest] - bank.lo[rest]
    dropped = np.array([d["mean_raw"] for d in bank.dropped if "mean_raw" in d]) if include_dropped \
        else np.zeros(0)
    fixed = float(np.sum(raw_scores)) + float(np.sum(dropped))
    n = bank.n_items + dropped.size

    def total(t):
        return fixed + float(np.sum(bank.lo[rest] + span * bank.model.mean(t, bank.b[rest])))

    est = total(theta) / n
    lo_t = total(theta - z * se) / n
    hi_t = total(theta + z * se) / n
    mu = bank.model.mean(theta, bank.b[rest])
    k = bank.k if bank.k is not None else 1.0
    noise_sd = float(np.sqrt(np.sum(k * mu * (1 - mu) * span ** 2))) / n
    return {"estimate": est, "lower": lo_t - z * noise_sd, "upper": hi_t + z * noise_sd,
            "level": level, "items_observed": int(items.size), "items_total": int(n)}


@dataclass
class TestResult:
    theta: float
    se: float
    n_items: int
    spent: float
    stopped_because: str
    items: list
    scores: list


class AdaptiveTest:
    """Adaptive test of a single model with the usual stopping rules.

    Stops when SE ≤ ``se_target`` (after ``min_items``), at ``max_items``, when the next
    item would overrun ``budget`` (needs ``item_costs``), or when the bank is exhausted.
    """

    def __init__(self, bank: ItemBank, *, se_target: float | None = 0.2, min_items: int = 30,
                 max_items: int | None = 500, budget: float | None = None,
                 item_costs: np.ndarray | None = None, top_k: int = 1, seed: int | None = None,
                 name: str = "model"):
        if se_target is None and max_items is None and budget is None:
            raise ValueError("give at least one stopping rule: se_target, max_items or budget")
        if min_items < 0:
            raise ValueError("min_items must be >= 0")
        if budget is not None and item_costs is None:
            raise ValueError("a budget needs item_costs")
        self.bank = bank
        self.se_target = se_target
        self.min_items = int(min_items)
        self.max_items = min(int(max_items), bank.n_items) if max_items is not None else bank.n_items
        self.budget = budget
        self.rng = np.random.default_rng(seed)
        self.examinee = Examinee(bank, MaxInfoSelector(bank.b, top_k=top_k), name, item_costs=item_costs)
        self.stopped_because: str | None = None
        self._pending: set[int] = set()

    @property
    def done(self) -> bool:
        return self.stopped_because is not None

    def _check_stop(self) -> None:
        e = self.examinee
        if e.n >= self.bank.n_items:
            self.stopped_because = "bank_exhausted"
        elif e.n >= self.max_items:
            self.stopped_because = "max_items"
        elif self.se_target is not None and e.n >= self.min_items and e.se <= self.se_target:
            self.stopped_because = "se_target"

    def next_items(self, k: int = 1) -> list[int]:
        """Up to ``k`` items to administer next (the most informative at the current θ̂).

        They are reserved until recorded; an empty list means the test is over. ``k > 1``
        trades a little adaptivity for fewer round trips (items are picked together).
        """
        if self._pending:
            return sorted(self._pending)
        if self.done:
            return []
        self._check_stop()
        if self.done:
            return []
        e = self.examinee
        k = max(1, min(int(k), self.max_items - e.n))
        if k == 1:
            first = e.next_item(self.rng)
            items = [] if first < 0 else [first]
        else:
            items = [int(i) for i in e.selector.candidates(e.theta, e.mask, e.n_masked, k)]
        if not items:
            self.stopped_because = "bank_exhausted"
            return []
        if self.budget is not None:
            spend = np.cumsum([e.cost_of(i) for i in items])
            items = items[: int(np.sum(e.spent + spend <= self.budget + 1e-12))]
            if not items:
                self.stopped_because = "budget"
                return []
        for i in items:
            e.reserve(i)
        self._pending = set(items)
        return sorted(items)

    def next_item(self) -> int | None:
        """Bank index of the next item to administer, or None when the test is over."""
        items = self.next_items(1)
        return items[0] if items else None

    def record(self, item: int, y: float, *, cost: float | None = None) -> None:
        """Record the scaled score of an item returned by :meth:`next_items`."""
        if item not in self._pending:
            raise ValueError(f"item {item} was not asked for (pending: {sorted(self._pending)})")
        self._pending.discard(item)
        self.examinee.record(item, y, cost=cost)
        if not self._pending:
            self._check_stop()

    def run(self, score_fn) -> TestResult:
        """Drive the test to the end with ``score_fn(item_index) -> scaled score``."""
        while (item := self.next_item()) is not None:
            self.record(item, float(score_fn(item)))
        return self.result()

    def result(self) -> TestResult:
        e = self.examinee
        return TestResult(theta=e.theta, se=e.se, n_items=e.n, spent=e.spent,
                          stopped_because=self.stopped_because or "running",
                          items=list(e.items), scores=list(e.scores))

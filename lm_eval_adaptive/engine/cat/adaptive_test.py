"""The single-model adaptive test (METHOD.md §3): :class:`AdaptiveTest` drives one examinee (an
:class:`~lm_eval_adaptive.engine.cat.examinee.Examinee`, over one bank or a bank per metric) with stopping
rules (SE target, minimum and maximum length, dollar budget; see
:mod:`lm_eval_adaptive.engine.cat.stopping`) and reports a :class:`TestResult`. It does not know where
scores come from: ask for the next item, administer it however you like, then record the scaled score.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.cat.estimation import EstimatorFactory
from lm_eval_adaptive.engine.cat.selection import Selector, shared_default_selector
from lm_eval_adaptive.engine.signature import component_name, format_signature, versions
from lm_eval_adaptive.engine.cat.stopping import (
    BankExhausted,
    Budget,
    MaxItems,
    SETarget,
    StoppingRule,
)
from lm_eval_adaptive.engine.cat.examinee import Examinee

__all__ = ["AdaptiveTest", "TestResult"]


@dataclass
class TestResult:
    """What an :class:`AdaptiveTest` found."""

    __test__ = False  # not a pytest test class

    theta: float
    se: float
    n_items: int
    spent: float
    stopped_because: str
    items: list
    scores: list
    signature: dict = field(default_factory=dict)  # what produced it (see AdaptiveTest.signature)

    @property
    def signature_string(self) -> str:
        return format_signature(self.signature)

    def __str__(self) -> str:
        """A short summary (``print(result)``), not the item list."""
        return (f"TestResult: θ̂ {self.theta:+.3f} ± {self.se:.3f} after {self.n_items} items, ${self.spent:.4f}, "
                f"stopped because {self.stopped_because}" + (f"\n  {self.signature_string}" if self.signature else ""))

    def to_dict(self) -> dict:
        return {"theta": self.theta, "se": self.se, "n_items": self.n_items, "spent_usd": self.spent,
                "stopped_because": self.stopped_because, "items": list(self.items), "scores": list(self.scores),
                "signature": dict(self.signature), "signature_string": self.signature_string}


class AdaptiveTest:
    """Adaptive test of a single model with the usual stopping rules.

    Stops when SE ≤ ``se_target`` (after ``min_items``), at ``max_items``, when the next
    item would overrun ``budget`` (needs ``item_costs``), or when the bank is exhausted
    (rules :class:`~lm_eval_adaptive.engine.cat.stopping.BankExhausted`,
    :class:`~lm_eval_adaptive.engine.cat.stopping.MaxItems`,
    :class:`~lm_eval_adaptive.engine.cat.stopping.SETarget`,
    :class:`~lm_eval_adaptive.engine.cat.stopping.Budget`, checked in that order); ``rules``
    adds more :class:`~lm_eval_adaptive.engine.cat.stopping.StoppingRule` objects after them.
    ``selector`` (default: maximum information with a random half seeded by ``seed``,
    randomesque with ``top_k`` > 1) and ``estimator`` (an estimator factory; default
    ``DispersionEAP``) swap the other parts.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, bank: ItemBank, *, se_target: float | None = 0.2, min_items: int = 30,
                 max_items: int | None = 500, budget: float | None = None,
                 item_costs: np.ndarray | None = None, top_k: int = 1, seed: int | None = None,
                 name: str = "model", selector: Selector | None = None,
                 estimator: EstimatorFactory | None = None, rules: Sequence[StoppingRule] = ()):
        self._check_settings(se_target, min_items, max_items, budget, item_costs, rules)
        self._bank = bank
        sel = selector if selector is not None else shared_default_selector(bank, top_k=top_k, seed=seed)
        self._begin(Examinee(bank, sel, name, item_costs=item_costs, estimator=estimator), se_target=se_target,
                    min_items=min_items, max_items=max_items, budget=budget, seed=seed, rules=rules)

    @staticmethod
    def _check_settings(se_target, min_items, max_items, budget, item_costs, rules) -> None:
        if se_target is None and max_items is None and budget is None and not tuple(rules):
            raise ValueError("give at least one stopping rule: se_target, max_items, budget or rules")
        if se_target is not None and not se_target >= 0:
            raise ValueError(f"se_target must be a number >= 0, got {se_target}")
        if min_items < 0:
            raise ValueError("min_items must be >= 0")
        if budget is not None and item_costs is None:
            raise ValueError("a budget needs item_costs")

    def _begin(self, examinee, *, se_target, min_items, max_items, budget, seed, rules) -> None:
        """Start the test of ``examinee`` (an :class:`Examinee`, of one bank or a bank per metric) under the
        usual rules and ``rules``."""
        self._se_target = se_target
        self._min_items = int(min_items)
        n = examinee.n_items
        self._max_items = min(int(max_items), n) if max_items is not None else n
        self._budget = budget
        self._seed = seed
        self._rng = np.random.default_rng(seed)
        self._examinee = examinee
        built: list = [BankExhausted(), MaxItems(self._max_items)]
        if se_target is not None:
            built.append(SETarget(se_target, self._min_items))
        if budget is not None:
            built.append(Budget(budget))
        self._rules = tuple(built) + tuple(rules)
        self._stopped_because: str | None = None
        self._pending: set[int] = set()
        self._peeked: tuple[int, int] | None = None  # (examinee version, item) of peek()

    # ----------------------------------------------------------------- reading
    @property
    def bank(self) -> ItemBank:
        return self._bank

    @property
    def examinee(self) -> Examinee:
        """The model's state (read it; record scores through :meth:`record`)."""
        return self._examinee

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
    def spent(self) -> float:
        """USD spent: the scored items' costs and every :meth:`charge`."""
        return self._examinee.spent

    @property
    def seed(self):
        return self._seed

    @property
    def rules(self) -> tuple:
        """The stopping rules, in the order they are checked."""
        return self._rules

    @property
    def pending(self) -> frozenset:
        """Items handed out by :meth:`next_items` and not recorded yet."""
        return frozenset(self._pending)

    @property
    def stopped_because(self) -> str | None:
        """Why the test ended (a rule's reason), or None while it runs."""
        return self._stopped_because

    @property
    def done(self) -> bool:
        return self._stopped_because is not None

    def signature(self) -> dict:
        """What decides this test's numbers (bank, rules, seed, parts, versions)."""
        sel = self._examinee.selector
        return {"bank": self._bank.bank_id, "se_target": self._se_target, "min_items": self._min_items,
                "max_items": self._max_items, "budget": self._budget, "top_k": getattr(sel, "top_k", None),
                "seed": _seed_value(self._seed), "selector": component_name(sel),
                "estimator": self._examinee.estimator_name,
                "stop": [r.describe() if hasattr(r, "describe") else str(r.reason) for r in self._rules],
                **versions()}

    # ----------------------------------------------------------------- running
    def _check_stop(self) -> None:
        e = self._examinee
        for rule in self._rules:
            if rule.reached(e):
                self._stopped_because = str(rule.reason)
                return

    def peek(self) -> int:
        """The item :meth:`next_item` would give next (-1: none left), without reserving it.

        The choice is kept until the examinee changes, so peeking draws nothing extra from
        the random stream.
        """
        e = self._examinee
        if self._peeked is None or self._peeked[0] != e.version:
            self._peeked = (e.version, self._next_item(e))
        return self._peeked[1]

    def _next_item(self, e) -> int:
        """The examinee's next item (the selector's choice)."""
        return e.next_item(self._rng)

    def _candidates(self, e, k: int) -> list[int]:
        """The examinee's next ``k`` items, best first."""
        return [int(i) for i in e.candidates(k)]

    def exclude(self, items) -> None:
        """Never give these bank items."""
        self._examinee.exclude(items)

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
        e = self._examinee
        rooms = [rule.room(e) for rule in self._rules]
        tight = next((rule for rule, n in zip(self._rules, rooms) if n < 1), None)
        if tight is not None:  # a rule that allows no more items ends the test
            self._stopped_because = str(tight.reason)
            return []
        k = max(1, int(min(int(k), *rooms)))
        if k == 1:
            first = self.peek()
            self._peeked = None
            items = [] if first < 0 else [first]
        else:
            items = self._candidates(e, k)
        if not items:
            self._stopped_because = "bank_exhausted"
            return []
        for rule in self._rules:
            n_ok = int(rule.admit(e, items))
            if n_ok < len(items):
                items = items[:max(n_ok, 0)]
            if not items:
                self._stopped_because = str(rule.reason)
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
        """Record the scaled score of an item returned by :meth:`next_items`.

        ValueError, with nothing changed, for an item not asked for, a score that is not
        a finite number in [0, 1], or a negative or non-finite cost.
        """
        if item not in self._pending:
            raise ValueError(f"item {item} was not asked for (pending: {sorted(self._pending)})")
        # the examinee checks the score (a 2PL/3PL bank's: 0 or 1) and the cost before anything changes
        self._examinee.record(item, y, cost=cost)
        self._pending.discard(item)
        if not self._pending:
            self._check_stop()

    def charge(self, usd: float) -> None:
        """Add money spent without a score (a failed call the provider may have billed): it
        counts toward the budget like a scored item's cost."""
        self._examinee.charge(usd)

    def stop(self, reason: str) -> None:
        """End the test now for ``reason`` (e.g. ``"budget"``: the caller's cap refused the next
        call): the pending items are given back unscored and nothing more is given."""
        for i in sorted(self._pending):
            self._examinee.unreserve(i)
        self._pending = set()
        self._stopped_because = str(reason)

    def run(self, score_fn) -> TestResult:
        """Drive the test to the end with ``score_fn(item_index) -> scaled score``."""
        while (item := self.next_item()) is not None:
            self.record(item, float(score_fn(item)))
        return self.result()

    def result(self) -> TestResult:
        e = self._examinee
        return TestResult(theta=e.theta, se=e.se, n_items=e.n, spent=e.spent,
                          stopped_because=self._stopped_because or "running",
                          items=e.items, scores=e.scores, signature=self.signature())


def _seed_value(seed):
    """A seed as it can be written in a signature (None: not reproducible)."""
    if seed is None or isinstance(seed, (int, np.integer)):
        return None if seed is None else int(seed)
    return str(seed)

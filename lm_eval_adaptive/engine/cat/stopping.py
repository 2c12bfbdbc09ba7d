"""Stopping: the rules that end a single-model test.

Single-model CAT (:class:`~lm_eval_adaptive.engine.cat.adaptive_test.AdaptiveTest`, and
:class:`~lm_eval_adaptive.engine.cat.multi_metric_test.MultiMetricTest` with a bank per metric) stops on the first of
a list of :class:`StoppingRule` objects that fires: :class:`BankExhausted`,
:class:`MaxItems`, :class:`SETarget` (after a minimum length) and :class:`Budget` are the
usual ones (METHOD.md §3); :class:`CIWidth` stops on the full-task estimate's interval, in the
metric's own units; any object with the same methods can be added.

A rule reads the model under test through :class:`ExamineeState` (what
:class:`~lm_eval_adaptive.engine.cat.examinee.Examinee` offers, of one bank or several metrics: items given,
SE, spend, item costs), so
this module does not import :mod:`~lm_eval_adaptive.engine.cat.examinee`. The rules that settle a pair
of models (the rankers') are in :mod:`lm_eval_adaptive.engine.ranking.pairs.rules`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from lm_eval_adaptive.engine.cat.full_task import full_task_estimate

__all__ = ["ExamineeState", "StoppingRule", "Rule", "BankExhausted", "MaxItems", "SETarget", "Budget", "CIWidth"]


class ExamineeState(Protocol):
    """What a stopping rule reads of the model under test
    (:class:`~lm_eval_adaptive.engine.cat.examinee.Examinee` has it)."""

    @property
    def n_items(self) -> int:
        """Items the examinee can be given at most (its bank's, or the joint items of several banks)."""
        ...

    @property
    def n(self) -> int:
        """Items given so far."""
        ...

    @property
    def measurement_se(self) -> float:
        """The SE that more items can still reduce."""
        ...

    @property
    def spent(self) -> float:
        """USD spent so far."""
        ...

    def cost_of(self, item: int) -> float:
        """USD one more answer to ``item`` costs."""
        ...


@runtime_checkable
class StoppingRule(Protocol):
    """One reason to end a single-model test (used by :class:`~lm_eval_adaptive.engine.cat.adaptive_test.AdaptiveTest`).

    Before it picks items the test asks every rule, in order, whether it is ``reached``
    (the first that is gives ``reason``), and how much ``room`` it leaves (at most that many
    items are picked at once; a rule that leaves none ends the test too); once it picked them, each rule may ``admit`` only the first
    few of them (a budget that the next item would overrun); none admitted → the test
    stops with that rule's ``reason``. :class:`Rule` has neutral defaults for all three.
    """

    reason: str

    def reached(self, examinee: ExamineeState) -> bool:
        ...

    def room(self, examinee: ExamineeState) -> float:
        """How many more items this rule allows (``math.inf``: no limit)."""
        ...

    def admit(self, examinee: ExamineeState, items: Sequence[int]) -> int:
        """How many of ``items`` (in order, not yet given) may be given."""
        ...


class Rule:
    """Base class of stopping rules: never reached, no limit, admits everything."""

    reason = "rule"

    def reached(self, examinee: ExamineeState) -> bool:
        return False

    def room(self, examinee: ExamineeState) -> float:
        return math.inf

    def admit(self, examinee: ExamineeState, items: Sequence[int]) -> int:
        return len(items)

    def describe(self) -> str:
        """Short text for signatures."""
        return self.reason


@dataclass(frozen=True)
class BankExhausted(Rule):
    """Every bank item was given (a model with excluded items runs out earlier: the test sees it)."""

    reason = "bank_exhausted"

    def reached(self, examinee: ExamineeState) -> bool:
        return examinee.n >= examinee.n_items


@dataclass(frozen=True)
class MaxItems(Rule):
    """At most ``n`` items."""

    n: int
    reason = "max_items"

    def __post_init__(self):
        if self.n < 0:
            raise ValueError(f"max_items must be >= 0, got {self.n}")

    def reached(self, examinee: ExamineeState) -> bool:
        return examinee.n >= self.n

    def room(self, examinee: ExamineeState) -> float:
        return self.n - examinee.n

    def describe(self) -> str:
        return f"max_items={self.n}"


@dataclass(frozen=True)
class SETarget(Rule):
    """The SE items can still reduce (``examinee.measurement_se``) is ≤ ``se``, once at least
    ``min_items`` items were given.

    The bank's measured model error (added to the SE the examinee reports) does not shrink as
    items are added, so a target below it would never be met: the target applies to the part
    that more items buy down.
    """

    se: float
    min_items: int = 0
    reason = "se_target"

    def __post_init__(self):
        if not (self.se >= 0):
            raise ValueError(f"se_target must be a number >= 0, got {self.se}")
        if self.min_items < 0:
            raise ValueError("min_items must be >= 0")

    def reached(self, examinee: ExamineeState) -> bool:
        return examinee.n >= self.min_items and examinee.measurement_se <= self.se

    def describe(self) -> str:
        return f"se_target={self.se!r}/min_items={self.min_items}"


@dataclass(frozen=True)
class Budget(Rule):
    """Spend at most ``usd``: items whose cost would overrun it are not given (needs item costs)."""

    usd: float
    reason = "budget"

    def __post_init__(self):
        if not (self.usd >= 0):
            raise ValueError(f"budget must be a number >= 0, got {self.usd}")

    def admit(self, examinee: ExamineeState, items: Sequence[int]) -> int:
        spend = np.cumsum([examinee.cost_of(i) for i in items])
        return int(np.sum(examinee.spent + spend <= self.usd + 1e-12))

    def describe(self) -> str:
        return f"budget={self.usd!r}"


@dataclass(frozen=True)
class CIWidth(Rule):
    """The full-task estimate's ``level`` interval (:func:`~lm_eval_adaptive.engine.cat.full_task.full_task_estimate`,
    the metric's own units: accuracy for a 0/1 task) has a half-width of at most ``half_width``, once at
    least ``min_items`` items were given (``run --adaptive --ci-width``).

    Reads the examinee's bank, items and scores (an :class:`~lm_eval_adaptive.engine.cat.examinee.Examinee`; a
    model under several metrics stops when every metric's interval is that narrow). The interval is a
    fixed-length one checked after every item, so the coverage at the stop is measured by backtest
    (optional stopping; docs/binary.md), not guaranteed.
    """

    half_width: float
    min_items: int = 0
    level: float = 0.95
    reason = "ci_width"

    def __post_init__(self):
        if not (self.half_width > 0):
            raise ValueError(f"ci_width must be a number > 0, got {self.half_width}")
        if self.min_items < 0:
            raise ValueError("min_items must be >= 0")
        if not (0 < self.level < 1):
            raise ValueError(f"level must be in (0, 1), got {self.level}")

    def half(self, examinee) -> float:
        """The half-width of ``examinee``'s full-task interval now (the widest of its metrics' for a model
        under several metrics; inf before its first score)."""
        parts = getattr(examinee, "parts", None)
        if parts is not None and any(p is not examinee for p in parts.values()):  # one metric: its own part
            return max((self.half(p) for p in parts.values()), default=math.inf)
        if examinee.n == 0:
            return math.inf
        bank = examinee.bank
        items = np.asarray(examinee.items, dtype=np.int64)
        raw = bank.lo[items] + np.asarray(examinee.scores, dtype=float) * (bank.hi[items] - bank.lo[items])
        est = full_task_estimate(bank, items, raw, examinee.theta, examinee.se, self.level,
                                 misfit=examinee.misfit)
        return 0.5 * (est["upper"] - est["lower"])

    def reached(self, examinee) -> bool:
        return examinee.n >= self.min_items and self.half(examinee) <= self.half_width

    def describe(self) -> str:
        return f"ci_width={self.half_width!r}/level={self.level!r}/min_items={self.min_items}"

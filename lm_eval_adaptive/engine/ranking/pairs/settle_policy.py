"""When a ranking stops buying items for a pair that is not settled: its cost to settle is too high.

On the metric's own scale (:mod:`lm_eval_adaptive.engine.ranking.pairs.metric_scale`) every pair settles by a full
run of its two models, so "more items would not order them" is never true; but a near tie can cost
most of a full run. :class:`SettlePolicy` says how much settling may cost: a pair is given no more
items once settling it (:func:`~lm_eval_adaptive.engine.ranking.pairs.outcomes.settles_after`, at its current
gap) would take

* what the run has cost so far plus the pair's cost to settle beyond ``full_run_share`` of a full run
  (every item of every model's population; models already exact, e.g. a leaderboard's full runs, count
  neither), so that a run never spends more than that share of a full run, or
  (``floor_items``) more than ``floor_items`` items per model, whichever is more: the share is at least
  ``floor_items / n``, for a full run of ``n`` items per model (at most 1: a full run). On a table of 100
  items a share of 10% is 10 items per model, the backtest's first items alone; the floor lets a small
  table's ranking buy as many items per model as a large table's may (see :meth:`SettlePolicy.share`), or
* its cost to settle beyond ``budget_share`` of the budget left (a run with a budget),

even if its true gap were ``optimism`` standard errors wider than the estimate (or, to settle as
equivalent, narrower): early on the estimated gap is noisy, and a pair that only looks expensive is
not given up.

**The pair rule** (``pair_share``, issue 32: spend where it settles; off by default) buys a pair the share
would give up:
a pair whose cost to settle at its current gap fits what the user gave (the budget left; no budget: no
such bound) and, added to what its two models have cost, is at most ``pair_share`` of a full run of the
two. A cheap pair is not left open while the budget allows it; a near tie that only (most of) a full run
could settle still stays ``unresolved`` with its cost.

**The pair's own cost** (``pair_cost_share``; off by default, on in live runs with a dollar cap:
live/stopping_policy.py) buys a pair whose cost to settle at its current gap, alone, is at most ``pair_cost_share``
of a full run of its two models and fits the budget left, whatever the two have cost so far: in a live run one
expensive model can spend past any share of its full run on the pairs that settled, and a pair of it that now costs
a few items is still cheap beside a full run of the two. With it on, the judgement also buys, where the run would
otherwise stop on cost, a pair whose *stated* cost to settle (the report's median of simulated continuations) fits
the same limit: the decision is never stricter than the figure printed. The two pair rules share one limit,
:meth:`SettlePolicy.pair_limit` (whichever allows more).

``floor_items`` raises the share on a small table; it is not a minimum: a run whose every open pair
looks beyond the share (at its gap ``optimism`` SEs more favourable) stops on cost, which can be before
``floor_items`` items per model (the warm-up, ``n_init``, is the minimum).

The pair is then reported ``unresolved`` with its items and dollars to settle, marked as beyond the
policy: a cost, never an impossibility. The default shares were chosen on the tuning half of the dev
tables by the rule in docs/metric-scale.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["SettlePolicy", "DEFAULT_FULL_RUN_SHARE", "DEFAULT_BUDGET_SHARE", "DEFAULT_OPTIMISM",
           "DEFAULT_FLOOR_ITEMS", "DEFAULT_PAIR_SHARE", "DEFAULT_PAIR_COST_SHARE", "most_items"]

#: Settling a pair may take the run's spend (so far + its cost to settle) to at most this share of a full run.
DEFAULT_FULL_RUN_SHARE = 0.1
#: A pair's cost to settle may be at most this share of the budget left (None: no such limit).
DEFAULT_BUDGET_SHARE = None
#: The policy judges a pair's cost to settle as if its gap were this many SEs more favourable.
DEFAULT_OPTIMISM = 1.0
#: The full-run share allows at least this many items per model (None: no floor); chosen on the tuning
#: halves by the rule in docs/metric-scale.md (it binds on tables of fewer than 150 items only).
DEFAULT_FLOOR_ITEMS = 15
#: A pair is bought whatever the run has spent when settling it costs at most this share of a full run of its
#: two models and fits the budget left (None: no such rule). Off by default: on the tuning tables where it acts
#: (0/1, 100 items) every share tried (0.25, 0.5) ordered a pair wrongly (confident accuracy 0.969 < 0.97);
#: the rule and the figures are in docs/metric-scale.md (*Spending where it settles*).
DEFAULT_PAIR_SHARE = None
#: A pair is bought whatever the run and its two models have spent when settling it, alone, costs at most this
#: share of a full run of the two and fits the budget left (None: no such rule). Off by default (the backtest's
#: policy is the measured one); live runs with a dollar cap turn it on (live/stopping_policy.py).
DEFAULT_PAIR_COST_SHARE = None


@dataclass(frozen=True)
class SettlePolicy:
    """How much one pair may cost (see the module docstring); a share of None is no limit."""

    full_run_share: float | None = DEFAULT_FULL_RUN_SHARE
    budget_share: float | None = DEFAULT_BUDGET_SHARE
    optimism: float = DEFAULT_OPTIMISM
    floor_items: float | None = DEFAULT_FLOOR_ITEMS
    pair_share: float | None = DEFAULT_PAIR_SHARE
    pair_cost_share: float | None = DEFAULT_PAIR_COST_SHARE

    def __post_init__(self):
        if not (isinstance(self.optimism, (int, float)) and math.isfinite(self.optimism) and self.optimism >= 0):
            raise ValueError(f"optimism must be a number >= 0, got {self.optimism!r}")
        for name in ("full_run_share", "budget_share", "pair_share", "pair_cost_share"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive number or None, got {v!r}")
        v = self.floor_items
        if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
            raise ValueError(f"floor_items must be a number >= 0 or None, got {v!r}")

    @property
    def name(self) -> str:
        def f(v):
            return "off" if v is None else f"{v:g}"
        floor = "" if not self.floor_items else f",floor_items={self.floor_items:g}"
        pair = "" if self.pair_share is None else f",pair={self.pair_share:g}"
        if self.pair_cost_share is not None:
            pair += f",pair_cost={self.pair_cost_share:g}"
        return (f"settle-cost(full_run={f(self.full_run_share)}{floor},budget={f(self.budget_share)},"
                f"optimism={self.optimism:g}{pair})")

    def pair_limit(self, pair_full_run: float, pair_spent: float, remaining: float | None) -> float:
        """The most the pair rules let one pair's settling still cost, whichever allows more: ``pair_share`` of a
        full run of its two models (``pair_full_run``) less what they have cost (``pair_spent``), and
        ``pair_cost_share`` of that full run whatever they have cost; at most the budget left (``remaining``;
        None: no budget). Negative: nothing (no pair rule on: -1)."""
        rules = [] if pair_full_run <= 0 else \
            ([] if self.pair_share is None else [self.pair_share * pair_full_run - pair_spent]) + \
            ([] if self.pair_cost_share is None else [self.pair_cost_share * pair_full_run])
        if not rules:
            return -1.0
        lim = max(rules)
        return lim if remaining is None else min(lim, remaining)

    def share(self, full_run_items: float | None = None) -> float | None:
        """The share of a full run the run may spend, for a full run of ``full_run_items`` items per model
        (the mean over the models not yet exact; None: not known, no floor): ``full_run_share`` raised to
        ``floor_items / full_run_items``, at most 1 (None: no limit)."""
        s = self.full_run_share
        if s is None or not self.floor_items or not full_run_items or full_run_items <= 0:
            return s
        return max(s, min(1.0, self.floor_items / full_run_items))

    def limit(self, spent: float, full_run: float, remaining: float | None,
              full_run_items: float | None = None) -> float:
        """The most a pair's settling may still cost, in the units of ``spent`` and ``full_run`` (what the
        run has cost and a full run's cost; inf: no limit); ``remaining``: the budget left in the same
        units (None: no budget); ``full_run_items``: the items of a full run per model (for the floor)."""
        lim = math.inf
        share = self.share(full_run_items)
        if share is not None and full_run > 0:
            lim = share * full_run - spent
        if self.budget_share is not None and remaining is not None:
            lim = min(lim, self.budget_share * remaining)
        return lim


def most_items(limit: float, nu_a: int, unit_a: float, nu_b: int, unit_b: float) -> float:
    """The most items m each model of a pair may add (each at most its unseen items ``nu``) while
    min(m, nu_a)·unit_a + min(m, nu_b)·unit_b ≤ ``limit`` (inf: no limit; -1: not even none)."""
    if limit < 0:
        return -1.0
    if math.isinf(limit):
        return math.inf
    (n1, u1), (n2, u2) = sorted(((nu_a, unit_a), (nu_b, unit_b)))
    both = u1 + u2
    if both <= 0 or limit < n1 * both:  # both models still add items
        return math.inf if both <= 0 else math.floor(limit / both)
    rest = limit - n1 * u1  # past n1 only the other model adds items
    return math.inf if u2 <= 0 else max(float(n1), math.floor(rest / u2))

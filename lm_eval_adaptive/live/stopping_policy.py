"""The stopping policy of a live ranking (``rank``, ``refresh``): the engine's default, with what the user said.

A live run judges its pairs with the engine's default
:class:`~lm_eval_adaptive.engine.ranking.pairs.settle_policy.SettlePolicy` (a run buys no pair past 10% of a full
run, at least 15 items per model on a small task), changed by two things the user states:

* ``--settle-share S``: the policy's share of a full run;
* ``--budget-usd``: a dollar cap is what the user will spend. With a cap the policy's **pair's own cost rule**
  (``SettlePolicy.pair_cost_share``; issue 32: spend where it settles) is on: a pair whose cost to settle, alone,
  fits the cap left and is at most :data:`LIVE_PAIR_COST_SHARE` of a full run of its two models is bought, though
  the run's share would give it up, whatever the two have cost so far. The cost is judged at the pair's current
  gap after every score and, where the run would otherwise stop on cost, by the figure the report states (the
  median of simulated continuations; ``MetricScaleJudgement``): a pair is never left open at a stated cost that
  fits. A near tie that only (most of) a full run could settle stays ``unresolved`` with its cost. Without a cap no
  pair is bought past the share (the cost is not bounded by anything the user said).

A stop on cost or on the cap names each pair left open with its cost to settle and the flag that would buy it:
``--settle-share S`` where the run's share gave it up (the engine's ``settle_share_to_buy``), ``--budget-usd USD``
where the cap left is short (:func:`mark_cap_to_buy`: what was spent, plus its cost, plus one call's largest
reservation, so the last call fits).

The backtest keeps the policy's measured defaults (pair rules off; docs/metric-scale.md, *Spending where it
settles*): a backtest's budget is the protocol's, not a user's statement of what to spend. The live share was
chosen on the live near tie of four WMT24 systems (benchmarks/bench_near_tie.py): with a cap above a full run that
case must still cost at most 10% of a full run (docs/live.md, *Spending the cap where it settles*).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable

from lm_eval_adaptive.engine.anytime.cost_to_settle import BANK_FREE_FLOOR_ITEMS
from lm_eval_adaptive.engine.ranking.pairs.settle_policy import (
    DEFAULT_FLOOR_ITEMS,
    DEFAULT_FULL_RUN_SHARE,
    SettlePolicy,
)
from lm_eval_adaptive.engine.ranking.ranker import default_judgement

__all__ = ["LIVE_PAIR_COST_SHARE", "LIVE_MIN_ITEMS", "live_policy", "live_judgement", "mark_cap_to_buy",
           "largest_reservation"]

#: With a dollar cap, a pair is bought when settling it (its own cost to settle, whatever its two models have
#: cost so far) is at most this share of a full run of the two and fits the cap left.
LIVE_PAIR_COST_SHARE = 0.1
#: The warm-up items every model of a live run gets by default (``--min-items``): the 15 per model README states.
LIVE_MIN_ITEMS = 15


def live_policy(settle_share: float | None, budget_usd: float | None, *, bank_free: bool = False) -> SettlePolicy:
    """The stopping policy of a live run with ``--settle-share`` ``settle_share`` (None: the default share) and
    ``--budget-usd`` ``budget_usd`` (None: no cap, no pair rule); ``bank_free``: the bank-free ranker's, whose floor of
    documents per model is its own (:data:`~lm_eval_adaptive.engine.anytime.cost_to_settle.BANK_FREE_FLOOR_ITEMS`)."""
    return SettlePolicy(full_run_share=DEFAULT_FULL_RUN_SHARE if settle_share is None else settle_share,
                        pair_cost_share=None if budget_usd is None else LIVE_PAIR_COST_SHARE,
                        floor_items=BANK_FREE_FLOOR_ITEMS if bank_free else DEFAULT_FLOOR_ITEMS)


def live_judgement(settle_share: float | None, budget_usd: float | None) -> Callable:
    """The rankers' ``judgement`` factory for a live run: :func:`default_judgement` under :func:`live_policy`."""
    return functools.partial(default_judgement, policy=live_policy(settle_share, budget_usd))


def largest_reservation(setup) -> Callable[[str], float]:
    """model → the most one call of it reserves (its dearest item's upper estimate; 0 for a model the session does
    not call, such as a leaderboard's anchor), computed once per model."""
    @functools.lru_cache(maxsize=None)
    def of(model: str) -> float:
        if model not in setup.scorers:
            return 0.0
        return max((setup.upper_cost(model, str(i)) for i in setup.item_ids), default=0.0)
    return of


def mark_cap_to_buy(pairs: Iterable[dict], *, spent: float, cap: float | None,
                    reservation: Callable[[str], float]) -> None:
    """Add ``budget_usd_to_buy`` to each unresolved pair record (``a``, ``b``, ``cost_to_settle_usd``) the cap left
    cannot buy: the cap (``--budget-usd``) that would, what the run has ``spent`` plus the pair's stated cost to settle
    plus the largest ``reservation`` of one call of its models (the last call must fit its upper estimate), rounded
    up to the cent. Nothing without a cap, or for a pair that costs nothing."""
    if cap is None:
        return
    for p in pairs:
        c = p.get("cost_to_settle_usd")
        if p.get("outcome") != "unresolved" or not isinstance(c, (int, float)) or not math.isfinite(c) or c <= 0:
            continue
        need = spent + c + max(reservation(p["a"]), reservation(p["b"]))
        if need > cap:
            p["budget_usd_to_buy"] = math.ceil(need * 100 - 1e-9) / 100

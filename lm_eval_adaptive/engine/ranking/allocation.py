"""Which model gets the next item: the one allocation policy of the rankers (METHOD.md §4, steps 1 and 3).

:class:`~lm_eval_adaptive.engine.ranking.ranker.AdaptiveRanker` (one bank) and
:class:`~lm_eval_adaptive.engine.ranking.multi_metric_ranker.MultiMetricRanker` (a bank per metric, one
generation scored by every metric) both decide with these two functions:

1. :func:`warm_up_choice`: round robin, fewest items first (items scored plus calls in flight), in
   the models' order; a model with ``max_in_flight`` calls in flight, one the caller blocked, or one
   with no item left is passed over.
2. :func:`adaptive_choice`: among the models in a pair that some metric leaves open
   (:class:`~lm_eval_adaptive.engine.ranking.pairs.judgement.OpenPairs`, one per metric), the one with the largest
   uncertainty reduction per dollar, Σ_k worth_k(m, f) / c_m: worth_k what one more item of the model
   removes from the uncertainty of its open pairs under metric k (its calls in flight f counted as
   given), summed over the metrics whose open pairs include the model, c_m its relative cost. On the
   full-task metric's scale (the default judgement) worth is the share of the open pairs' variance the
   item removes; on the ability scale it is m²/(n + f + 1), m the measurement SE and n the items.
   A candidate is passed over, and the reason noted, when it
   has ``max_in_flight`` calls in flight (``pending``), reached ``n_max`` (``max_items``), was blocked
   by the caller or cannot afford its next item (``budget``), has no item left (``bank_exhausted``), or
   when every partner of its open pairs is blocked and items for it alone cannot settle them
   (``budget``, or ``pending`` while it has calls in flight).

:func:`stop_reason` says why a run whose candidates were all passed over ends (none while calls are in
flight). The rankers own their state; these functions only read it, through the arguments.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

__all__ = ["warm_up_choice", "adaptive_choice", "stop_reason", "PASS_REASONS"]

#: Why a candidate was passed over; the first of the last three found ends a run with nothing pending.
PASS_REASONS = ("pending", "budget", "max_items", "bank_exhausted")


def warm_up_choice(active: Sequence[str], examinees: Mapping, n_warm: int, flight: Mapping[str, int],
                   blocked, most: int, peek: Callable) -> tuple[str | None, int]:
    """(model, its next item) of the warm-up round robin, or (None, -1) when no model needs a warm-up
    item it can be given now. ``examinees[m].n`` are the items scored, ``flight`` the calls in flight
    per model (absent: none), ``blocked`` the models not to ask now, ``most`` the calls one model may
    have in flight, ``peek(m, None)`` its next item (-1: none left)."""
    m, fewest, item = None, n_warm, -1
    if flight or blocked:
        for x in active:
            k = flight.get(x, 0)
            n = examinees[x].n + k
            if n < n_warm and k < most and x not in blocked:
                nxt = peek(x, None)
                if nxt >= 0 and (m is None or n < fewest):
                    m, fewest, item = x, n, nxt
        return m, item
    # nothing in flight and nothing blocked: the first model with the fewest items
    for x in active:
        n = examinees[x].n
        if n < fewest:
            m, fewest = x, n
    if m is None:
        return None, -1
    item = peek(m, None)
    if item >= 0:
        return m, item
    m, fewest = None, n_warm  # it has no item left: every model in order, as above
    for x in active:
        n = examinees[x].n
        if n < n_warm:
            nxt = peek(x, None)
            if nxt >= 0 and (m is None or n < fewest):
                m, fewest, item = x, n, nxt
    return m, item


def adaptive_choice(views: Sequence, models: Sequence[str], examinees: Mapping, flight: Mapping[str, int],
                    blocked, most: int, n_max: int, peek: Callable, affordable: Callable | None,
                    relative_costs: Mapping[str, float]) -> tuple[str | None, int, set]:
    """(the model to give the next item, or None; its item; the reasons candidates were passed over).

    ``views``: one :class:`~lm_eval_adaptive.engine.ranking.pairs.judgement.OpenPairs` per metric, each by position
    in ``models`` (the active models); ``peek(m, needs)`` the model's next item given ``needs``, the
    (view, partner) pairs that make it a candidate; ``affordable(m, item)`` whether the budget allows
    it (None: no budget). See the module docstring for the rule."""
    partners: dict[int, list] = {}  # model (position) -> its open pairs' (view, partner)
    for v in views:
        for a, b in v.pairs:
            partners.setdefault(a, []).append((v, b))
            partners.setdefault(b, []).append((v, a))
    several = len(views) > 1
    best, best_item, best_val, passed = None, -1, -math.inf, set()
    for j in sorted(partners):
        m = models[j]
        ps = partners[j]
        # items for m cannot settle a pair whose partner may not be asked now (blocked) when the pair's
        # judgement says m's items alone cannot settle it: do not buy them
        if blocked and all(models[p] in blocked and v.futile(j, p) for v, p in ps):
            passed.add("pending" if flight.get(m, 0) else "budget")
            continue
        k = flight.get(m, 0) if flight else 0
        if k >= most:
            passed.add("pending")
            continue
        if examinees[m].n + k >= n_max:
            passed.add("pending" if k else "max_items")
            continue
        if blocked and m in blocked:
            passed.add("pending" if k else "budget")
            continue
        item = peek(m, ps)
        if item < 0:
            passed.add("pending" if k else "bank_exhausted")
            continue
        if affordable is not None and not affordable(m, item):
            passed.add("budget")
            continue
        # the uncertainty one more item removes (the θ scale's model error: none), per unit cost
        v0 = ps[0][0]
        gain = v0.worth(j, k)
        if several:  # every other metric whose open pairs include m, once each
            seen = [v0]
            for v, _ in ps:
                if all(v is not s for s in seen):
                    seen.append(v)
                    gain += v.worth(j, k)
        val = gain / relative_costs[m]
        if val > best_val:
            best, best_item, best_val = m, item, val
    return best, best_item, passed


def stop_reason(passed: set) -> str | None:
    """Why a run ends when every candidate was passed over for ``passed``: None while some call is in
    flight (``pending``: its score may reopen a pair), else the first of budget, max_items,
    bank_exhausted."""
    if "pending" in passed:
        return None
    return next(r for r in ("budget", "max_items", "bank_exhausted") if r in passed)

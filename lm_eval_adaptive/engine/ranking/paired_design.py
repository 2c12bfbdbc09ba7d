"""Which item a model of an open pair gets: the item design of the adaptive phase (issue 32, item 0).

The allocation (:mod:`lm_eval_adaptive.engine.ranking.allocation`) says *which model* gets the next item;
the design says *which item* its adaptive slot takes (its random slots always take the shared random
order's next item, so the design-based correction of the full-task mean keeps its random sample):

* ``"individual"``: the selector's choice, the item most informative about the model's own θ̂ (maximum
  Fisher information at θ̂), whatever its partners were given.
* ``"paired"``: the item most informative about the *difference* of the model and its open partners,
  given to both. A document both models of a pair answer enters their difference exactly, and its own
  difficulty (and its misfit to the bank) cancels from it (METHOD.md §7-8, paired comparison). For a pair
  (m, p) at θ̂_m, θ̂_p, the two answers to one item i carry h_i = I_m(i)·I_p(i)/(I_m(i) + I_p(i)) about
  θ_m − θ_p (the inverse of the difference's variance, 1/I_m(i) + 1/I_p(i)). An item the partner
  has already answered in an adaptive slot buys that h_i with this one item; a new item buys it only once
  the partner answers it too, two items: h_i/2 per item. The design gives the model's adaptive slot the
  item of most difference information per item, summed over its open partners:

      value_i = Σ_p h_i(m, p) · (1 if p answered i adaptively, ½ if p may still take it, 0 otherwise)

  Its partners' *random* items are left out (the model's own random slots reach them through the same
  shared order; an adaptive slot taking them would thin its random sample), and so are the items the
  model may not take. With no open partner (the warm-up, a call without partners) it is the individual
  design.

:func:`paired_item` is the paired choice; the ranker (``AdaptiveRanker(design="paired")``) calls it for a
model's adaptive slots in the adaptive phase.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["DESIGNS", "DEFAULT_DESIGN", "paired_item", "paired_choice", "difference_information",
           "check_design"]

#: The item designs a ranker takes (see the module docstring).
DESIGNS = ("individual", "paired")
#: The rankers' default design (chosen on the tuning half by the rule in docs/results.md, *The paired design*).
DEFAULT_DESIGN = "individual"


def check_design(design: str) -> str:
    """``design`` if it is one of :data:`DESIGNS`, else ValueError naming it."""
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {DESIGNS}, got {design!r}")
    return design


def difference_information(info_m: np.ndarray, info_p: np.ndarray) -> np.ndarray:
    """h = I_m·I_p/(I_m + I_p) per item: what one item answered by both models adds to the information of
    the difference of their abilities (0 where either information is 0)."""
    tot = info_m + info_p
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(tot > 0, info_m * info_p / tot, 0.0)


def paired_item(examinee, partners: Sequence) -> int:
    """The bank index of the item the paired design gives ``examinee``'s next adaptive slot (-1: it has no
    untaken item). ``partners``: the examinees of its open pairs (same bank). See the module docstring."""
    free = ~examinee.taken()  # bank order: neither reserved, scored nor excluded
    if not free.any():
        return -1
    if not partners:
        return int(examinee.next_item())
    bank = examinee.bank
    info_m = bank.information(examinee.theta)
    value = np.zeros(free.size)
    for p in partners:
        h = difference_information(info_m, bank.information(p.theta))
        answered = ~np.isnan(p.raw)
        adaptive = answered & ~p.random_mask  # the partner's adaptive items: completing them pairs now
        may_take = ~p.taken()  # the partner may still take it: it pairs once the partner does
        value += h * np.where(adaptive, 1.0, np.where(may_take, 0.5, 0.0))
    # the partners' random items stay with the shared random order (see the module docstring)
    for p in partners:
        free &= ~(p.random_mask & ~np.isnan(p.raw))
    if not free.any():
        return int(examinee.next_item())
    value = np.where(free, value, -np.inf)
    return int(np.argmax(value))


def paired_choice(examinees, active: Sequence[str], m: str, needs, cache: dict) -> int | None:
    """A ranker's paired choice for model ``m`` (:func:`paired_item`), or None when its next slot is a random
    one (the selector's: the shared random order). ``needs``: the (view, partner position in ``active``) of
    its open pairs; ``cache``: model → (key, item), the ranker's choices kept until ``m`` or a partner changes."""
    e = examinees[m]
    is_random = getattr(e.selector, "is_random_slot", None)
    if is_random is not None and is_random(e.n_taken):
        return None
    partners = sorted({active[p] for _, p in needs})
    key = (e.version,) + tuple((p, examinees[p].version) for p in partners)
    cached = cache[m]
    if cached is None or cached[0] != key:
        item = paired_item(e, [examinees[p] for p in partners])
        cache[m] = (key, item)
        return item
    return cached[1]

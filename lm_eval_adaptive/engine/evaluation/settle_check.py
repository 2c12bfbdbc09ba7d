"""The measured cost to settle a pair: run its two models on from where a ranking left them until it settles.

A ranking reports, for each pair it leaves ``unresolved``, the items it would take to settle
(:func:`~lm_eval_adaptive.engine.ranking.pairs.outcomes.judge_pairs`). :func:`run_on_to_settle` measures it:
both models keep taking items the ranker's way (the selector's random slots and maximum information),
one each per step, and the pair is judged on the metric scale after every step until it is ordered
or (with a margin) equivalent, or both have answered every item. ``seed`` None continues with the
models' own selector (the run's own permutation: the one continuation the run would have made);
another seed draws the further random slots from a fresh permutation of the items not taken (the
same design: given the past, the rest of a random permutation is uniform), so several seeds give
several continuations of the same pair (the median is what a stated cost predicts; docs/metric-scale.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from lm_eval_adaptive.engine.cat.examinee import Examinee
from lm_eval_adaptive.engine.ranking.pairs.metric_scale import model_part
from lm_eval_adaptive.engine.ranking.pairs.pair_variance import pair_variance, residual_correlation
from lm_eval_adaptive.engine.ranking.pairs.outcomes import ORDERED, UNRESOLVED, decide
from lm_eval_adaptive.engine.cat.selection import DEFAULT_RANDOM_SHARE, RandomShareSelector

__all__ = ["SettleRun", "run_on_to_settle"]


@dataclass(frozen=True)
class SettleRun:
    """What running a pair on found: ``items`` both models took until the pair settled, the ``outcome``
    then (``unresolved`` only when both ran out of items first, which a full run never leaves), and
    whether the first model was the higher (``first_higher``)."""

    items: int
    outcome: str
    first_higher: bool


def _copy(e: Examinee, selector) -> Examinee:
    """A fresh examinee with ``e``'s history (items, scores, raw values, random slots, exclusions)."""
    new = Examinee(e.bank, selector, e.name)
    out = np.flatnonzero(~e.population)
    if out.size:
        new.exclude(out)
    raw, rnd = e.raw, e.random_mask
    for i, y in zip(e.items, e.scores):
        new.record(i, y, raw=float(raw[i]), random=bool(rnd[i]))
    return new


def _judge(parts, confidence: float, margin: float) -> tuple[str, bool]:
    a, b = parts
    ws = np.vstack([a.ws, b.ws])
    rho = residual_correlation(np.vstack([a.dev, b.dev]), np.vstack([a.rnd, b.rnd]))
    v = float(pair_variance(ws, rho, np.array([a.fallback_var, b.fallback_var]))[0, 1])
    d = a.estimate - b.estimate
    dfa = math.inf if a.var == 0 else a.df
    dfb = math.inf if b.var == 0 else b.df
    # equivalence at the larger of the paired and the unpaired SE, as the ranking judges it
    return decide(d, math.sqrt(v), min(dfa, dfb), confidence, margin, math.sqrt(a.var + b.var)), d >= 0


def run_on_to_settle(pair: tuple[Examinee, Examinee], score: Callable[[int, int], tuple[float, float]], *,
                     confidence: float = 0.95, margin: float = 0.0, seed=None,
                     share: float = DEFAULT_RANDOM_SHARE, max_items: int | None = None) -> SettleRun:
    """Run the two examinees of ``pair`` on until their pair settles (see the module docstring).

    ``score(k, item) -> (scaled score, raw value)`` of model k (0 or 1) on a bank item; ``confidence``
    and ``margin`` as the ranking's (pairwise); ``max_items``: stop after this many items of both
    (None: until both have answered everything). The examinees given are not changed."""
    bank = pair[0].bank
    if seed is None:
        sels = [e.selector for e in pair]
    else:
        sel = RandomShareSelector(bank.b, 1, share=share, seed=seed, information=bank.selection_information)
        sels = [sel, sel]
    ex = [_copy(e, s) for e, s in zip(pair, sels)]
    used = 0

    def parts():
        return [model_part(bank, e.raw, e.random_mask, e.theta, population=e.population, se_theta=e.se) for e in ex]

    outcome, first = _judge(parts(), confidence, margin)
    while outcome == UNRESOLVED and (max_items is None or used < max_items):
        moved = False
        for k, e in enumerate(ex):
            i = e.next_item()
            if i < 0:
                continue
            y, raw = score(k, i)
            e.reserve(i)
            e.record(i, float(y), raw=float(raw))
            used += 1
            moved = True
        if not moved:
            break
        outcome, first = _judge(parts(), confidence, margin)
    return SettleRun(items=used, outcome=outcome, first_higher=bool(first) if outcome == ORDERED else bool(first))

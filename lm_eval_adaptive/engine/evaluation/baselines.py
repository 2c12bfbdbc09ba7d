"""The baselines: METHOD.md §5's two, driven like the ranker by score callbacks, and issue 32's paired one.

* :func:`random_sampling` — spend a dollar budget by picking a random model and a random
  item it has not seen, until the next pick is unaffordable; rank by the mean raw score of
  what was sampled (the paper's protocol).
* :func:`shared_random` — every model answers the same random documents at a dollar budget and is
  ranked by its mean (paired: the documents' own difficulty cancels from every difference).
* :func:`fixed_length_cat` — give every model the same number of items by maximum
  information (an :class:`~lm_eval_adaptive.engine.cat.adaptive_test.AdaptiveTest` of that length per model,
  run by :func:`~lm_eval_adaptive.engine.evaluation.simulation.drive`) and rank by θ̂.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.cat.adaptive_test import AdaptiveTest
from lm_eval_adaptive.engine.cat.estimation import EstimatorFactory
from lm_eval_adaptive.engine.cat.selection import MaxInfoSelector, Selector
from lm_eval_adaptive.engine.evaluation.simulation import drive

__all__ = ["BaselineResult", "random_sampling", "shared_random", "fixed_length_cat"]


@dataclass
class BaselineResult:
    ranking: list
    score: dict  # what the ranking sorts by: mean sampled raw score, or θ̂
    items: dict
    cost: dict

    @property
    def total_items(self) -> int:
        return int(sum(self.items.values()))

    @property
    def total_cost(self) -> float:
        return float(sum(self.cost.values()))


def random_sampling(models: Sequence[str], available: Mapping[str, np.ndarray],
                    raw_score: Callable[[str, np.ndarray], np.ndarray],
                    item_costs: Mapping[str, np.ndarray], budget: float,
                    rng: np.random.Generator) -> BaselineResult:
    """Random sampling at a dollar budget.

    Parameters
    ----------
    available:
        Per model, the item indices it has scores for (its own index space).
    raw_score:
        ``raw_score(model, item_indices) -> raw scores`` (vectorised).
    item_costs:
        Per model, the USD cost of each item (indexed like ``available``).
    budget:
        Stop at the first pick that would overrun it.
    """
    models = list(models)
    # A random pick sequence per model: a random permutation of its items, consumed in order,
    # is the same as drawing unseen items uniformly one at a time.
    perms = {m: rng.permutation(np.asarray(available[m])) for m in models}
    pos = {m: 0 for m in models}
    spent = 0.0
    alive = [m for m in models if perms[m].size]
    while alive:
        m = alive[int(rng.integers(len(alive)))]
        item = perms[m][pos[m]]
        c = float(item_costs[m][item])
        if spent + c > budget:
            break
        spent += c
        pos[m] += 1
        if pos[m] >= perms[m].size:
            alive.remove(m)
    score, items, cost = {}, {}, {}
    for m in models:
        taken = perms[m][: pos[m]]
        items[m] = int(taken.size)
        cost[m] = float(np.sum(item_costs[m][taken])) if taken.size else 0.0
        score[m] = float(np.mean(raw_score(m, taken))) if taken.size else float("nan")
    # models with no sample rank last, in random order
    keys = {m: (score[m] if np.isfinite(score[m]) else -np.inf, rng.random()) for m in models}
    ranking = sorted(models, key=lambda m: keys[m], reverse=True)
    return BaselineResult(ranking=ranking, score=score, items=items, cost=cost)


def shared_random(hold: Sequence[str], raw_h: np.ndarray, costs: Mapping[str, np.ndarray], spend: float,
                  rng: np.random.Generator, perm: np.ndarray | None = None) -> dict:
    """Every model of ``hold`` answers the same random documents, as many as ``spend`` buys for all of
    them (each its first documents of one random order, ``perm`` or one drawn, that it has a score
    for); ranked by the mean (issue 32: the design a user would try first, no bank, no adaptivity).

    ``raw_h`` (len(hold), N): raw scores, NaN where a model has none; ``costs``: per model, the USD
    cost of each of the N documents. Returns ``ranking``, ``items`` (scores bought), ``documents``
    (the shared documents) and ``cost``."""
    n_items = raw_h.shape[1]
    perm = rng.permutation(n_items) if perm is None else np.asarray(perm)
    cum = np.zeros(n_items)
    for j, m in enumerate(hold):
        have = ~np.isnan(raw_h[j, perm])
        cum += np.cumsum(np.where(have, costs[m][perm], 0.0))
    k = int(np.searchsorted(cum, spend * (1 + 1e-12), side="right"))
    take = perm[:k]
    means = {m: float(np.nanmean(raw_h[j, take])) if np.any(~np.isnan(raw_h[j, take])) else -np.inf
             for j, m in enumerate(hold)}
    jitter = {m: rng.random() for m in hold}
    ranking = sorted(hold, key=lambda m: (means[m], jitter[m]), reverse=True)
    have = ~np.isnan(raw_h[:, take])
    items = int(np.sum(have))
    cost = float(sum(np.sum(costs[m][take][have[j]]) for j, m in enumerate(hold)))
    return {"ranking": ranking, "items": items, "documents": k, "cost": cost}


def fixed_length_cat(bank: ItemBank, models: Sequence[str], n_items: int,
                     scaled_score: Callable[[str, int], float], *,
                     item_costs: Mapping[str, np.ndarray] | None = None, top_k: int = 1,
                     rng: np.random.Generator | None = None,
                     selector: Selector | None = None, estimator: EstimatorFactory | None = None,
                     exclude: Mapping[str, np.ndarray] | None = None) -> BaselineResult:
    """Maximum-information CAT of exactly ``n_items`` items per model; rank by θ̂.

    ``exclude``: per model, bank items never to give it (it has no score for them); a
    model whose items run out gets fewer.
    """
    selector = selector or MaxInfoSelector(bank.b, top_k=top_k, information=bank.selection_information)
    rng = rng or np.random.default_rng()
    n_items = min(int(n_items), bank.n_items)
    score, items, cost = {}, {}, {}
    for m in models:
        # one fixed-length test per model, every test drawing from the one stream ``rng``
        test = AdaptiveTest(bank, se_target=None, min_items=0, max_items=n_items, seed=rng, name=m,
                            item_costs=None if item_costs is None else item_costs[m], selector=selector,
                            estimator=estimator)
        if exclude is not None and m in exclude:
            test.exclude(exclude[m])
        drive(test, lambda i, m=m: scaled_score(m, i))
        e = test.examinee
        score[m], items[m], cost[m] = e.theta, e.n, e.spent
    ranking = sorted(models, key=lambda m: score[m], reverse=True)
    return BaselineResult(ranking=ranking, score=score, items=items, cost=cost)

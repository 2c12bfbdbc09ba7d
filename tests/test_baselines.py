"""The baselines of METHOD.md §5 (random sampling at a budget, fixed-length CAT) and issue 32's shared random
documents."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_sim_bank

from lm_eval_adaptive.engine.evaluation.baselines import fixed_length_cat, random_sampling, shared_random


def _setup(rng, n_models=4, n_items=60):
    models = [f"m{j}" for j in range(n_models)]
    raw = {m: rng.uniform(0, 100, n_items) + 10 * j for j, m in enumerate(models)}
    available = {m: np.sort(rng.choice(n_items, size=int(rng.integers(5, n_items)), replace=False))
                 for m in models}
    costs = {m: rng.uniform(0.001, 0.05, n_items) * rng.choice([1, 10]) for m in models}
    return models, raw, available, costs


def test_random_sampling_budget_ranking_and_no_repeats():
    rng = np.random.default_rng(0)
    for trial in range(40):
        models, raw, available, costs = _setup(rng)
        taken = {}

        def raw_score(m, items):
            items = np.asarray(items)
            taken[m] = items.copy()
            return raw[m][items]

        budget = float(rng.uniform(0, 3))
        res = random_sampling(models, available, raw_score, costs, budget, np.random.default_rng(trial))
        assert res.total_cost <= budget
        for m in models:
            t = taken.get(m, np.array([], dtype=int))
            assert res.items[m] == t.size
            assert len(set(t.tolist())) == t.size  # never repeats an item
            assert set(t.tolist()) <= set(available[m].tolist())
            assert res.cost[m] == pytest.approx(float(costs[m][t].sum()) if t.size else 0.0)
            if t.size:
                assert res.score[m] == pytest.approx(float(raw[m][t].mean()))
            else:
                assert np.isnan(res.score[m])
        # ranked by mean sampled raw score; models with no sample last
        sampled = [m for m in res.ranking if np.isfinite(res.score[m])]
        assert res.ranking[:len(sampled)] == sampled
        assert [res.score[m] for m in sampled] == sorted((res.score[m] for m in sampled), reverse=True)
        assert sorted(res.ranking) == sorted(models)


def test_random_sampling_stops_at_first_unaffordable_pick():
    n = 50
    models = ["cheap", "dear"]
    available = {m: np.arange(n) for m in models}
    costs = {"cheap": np.full(n, 0.01), "dear": np.full(n, 1.0)}
    counts = []
    for seed in range(200):
        res = random_sampling(models, available, lambda m, i: np.ones(len(i)), costs, 0.5,
                              np.random.default_rng(seed))
        assert res.items["dear"] == 0
        counts.append(res.items["cheap"])
    # the first pick of "dear" ends the run (each pick is "dear" with probability 1/2):
    # skipping it and going on would buy all 50 cheap items
    assert max(counts) < 50
    assert np.mean(counts) < 3
    assert min(counts) == 0


def test_random_sampling_exhausts_available_items_with_a_large_budget():
    rng = np.random.default_rng(1)
    models, raw, available, costs = _setup(rng, n_models=3, n_items=30)
    res = random_sampling(models, available, lambda m, i: raw[m][i], costs, 1e9, rng)
    for m in models:
        assert res.items[m] == available[m].size
        assert res.score[m] == pytest.approx(float(raw[m][available[m]].mean()))
    assert res.total_cost == pytest.approx(sum(float(costs[m][available[m]].sum()) for m in models))


def test_random_sampling_zero_budget():
    rng = np.random.default_rng(2)
    models, raw, available, costs = _setup(rng, n_models=3)
    res = random_sampling(models, available, lambda m, i: raw[m][i], costs, 0.0, rng)
    assert res.total_items == 0 and res.total_cost == 0.0
    assert all(np.isnan(v) for v in res.score.values())


def test_fixed_length_cat(simulate):
    bank = make_sim_bank(n_items=200, seed=3)
    thetas = {"a": -1.5, "b": 1.5, "c": 0.0}
    rng = np.random.default_rng(4)
    ys = {m: simulate(t, bank.b, k=bank.k, rng=rng) for m, t in thetas.items()}
    seen = {m: [] for m in thetas}

    def score(m, i):
        seen[m].append(i)
        return float(ys[m][i])

    costs = {m: np.full(bank.n_items, 0.002 * (j + 1)) for j, m in enumerate(thetas)}
    res = fixed_length_cat(bank, list(thetas), 25, score, item_costs=costs, rng=np.random.default_rng(0))
    for j, m in enumerate(thetas):
        assert res.items[m] == 25 == len(seen[m]) == len(set(seen[m]))
        assert res.cost[m] == pytest.approx(25 * 0.002 * (j + 1))
    assert res.ranking == sorted(thetas, key=lambda m: res.score[m], reverse=True)
    assert res.ranking == ["b", "c", "a"]
    for m, t in thetas.items():
        assert abs(res.score[m] - t) < 1.0  # the score is θ̂
    # more items than the bank holds: capped at the bank
    small = make_sim_bank(n_items=8, seed=5)
    res = fixed_length_cat(small, ["a", "b"], 50, lambda m, i: 0.5)
    assert res.items == {"a": 8, "b": 8}
    assert res.total_cost == 0.0


def test_shared_random_gives_every_model_the_same_documents_within_the_spend():
    rng = np.random.default_rng(3)
    models = ["a", "b", "c"]
    raw = rng.uniform(0, 1, (3, 50))
    raw[1, [4, 9]] = np.nan  # b has no score for two documents: it is charged nothing for them
    costs = {m: rng.uniform(0.01, 0.03, 50) for m in models}
    perm = rng.permutation(50)
    for spend in (0.0, 0.3, 1.0, 100.0):
        sr = shared_random(models, raw, costs, spend, np.random.default_rng(0), perm=perm)
        take = perm[:sr["documents"]]
        assert sr["cost"] <= spend + 1e-12
        assert sr["items"] == int(np.sum(~np.isnan(raw[:, take])))
        if sr["documents"] < 50:  # one more document would overrun the spend
            more = perm[:sr["documents"] + 1]
            assert sum(np.nansum(np.where(np.isnan(raw[j, more]), 0, costs[m][more])) for j, m in enumerate(models)) > spend
        if sr["documents"]:
            means = np.nanmean(raw[:, take], axis=1)
            assert sr["ranking"] == [models[j] for j in np.argsort(-means, kind="stable")]


def test_shared_random_cancels_the_documents_difficulty_where_apart_draws_do_not():
    """Two models a constant 0.05 apart on documents whose difficulty spreads over [0, 1]: the same
    documents always order them; documents drawn apart per model often do not."""
    rng = np.random.default_rng(1)
    base = rng.uniform(0, 0.9, 400)
    raw = np.vstack([base + 0.05, base])
    costs = {"better": np.full(400, 0.01), "worse": np.full(400, 0.01)}
    shared_right = apart_right = 0
    for t in range(60):
        sr = shared_random(["better", "worse"], raw, costs, 0.2, np.random.default_rng(t))
        shared_right += sr["ranking"][0] == "better"
        rb = random_sampling(["better", "worse"], {m: np.arange(400) for m in costs},
                             lambda m, items: raw[0 if m == "better" else 1, items], costs, 0.2,
                             np.random.default_rng(t))
        apart_right += rb.ranking[0] == "better"
    assert shared_right == 60
    assert apart_right < 55

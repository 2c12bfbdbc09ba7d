"""Unit tests of the backtest's building blocks (metrics, partition, bootstrap, ground truth)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from lm_eval_adaptive.engine.evaluation.backtest_figures import (
    bootstrap_mean_ci,
    confident_accuracy,
    ground_truth,
    holdout_sets,
    kendall_tau,
    tie_metrics,
)


def test_kendall_tau():
    r = ["a", "b", "c", "d", "e"]
    assert kendall_tau(r, r) == pytest.approx(1.0)
    assert kendall_tau(r[::-1], r) == pytest.approx(-1.0)
    assert kendall_tau(["b", "a", "c", "d"], ["a", "b", "c", "d"]) == pytest.approx(1 - 2 * 1 / 6)
    # agrees with scipy on a random permutation
    rng = np.random.default_rng(0)
    p = list(rng.permutation(r))
    ref = stats.kendalltau([r.index(m) for m in r], [p.index(m) for m in r])[0]
    assert kendall_tau(p, r) == pytest.approx(ref)
    # two models: ±1
    assert kendall_tau(["x", "y"], ["y", "x"]) == pytest.approx(-1.0)


def P(*pairs):
    return {frozenset(p) for p in pairs}


def test_tie_metrics_conventions():
    assert tie_metrics(set(), set()) == (1.0, 1.0, 1.0)
    assert tie_metrics(set(), P("ab")) == (0.0, 0.0, 0.0)
    prec, rec, f1 = tie_metrics(P("ab"), set())
    assert (prec, rec, f1) == (0.0, 1.0, 0.0)
    prec, rec, f1 = tie_metrics(P("ab", "cd"), P("ab", "ef", "gh"))
    assert prec == pytest.approx(0.5) and rec == pytest.approx(1 / 3)
    assert f1 == pytest.approx(2 * 0.5 * (1 / 3) / (0.5 + 1 / 3))
    assert tie_metrics(P("ab", "cd"), P("cd", "ab")) == (1.0, 1.0, 1.0)


def test_confident_accuracy():
    assert confident_accuracy(["a", "b", "c"], ["a", "c", "b"], P("bc")) == 1.0
    assert confident_accuracy(["a", "b", "c"], ["a", "c", "b"], set()) == pytest.approx(2 / 3)
    assert confident_accuracy(["a", "b", "c"], ["c", "b", "a"], P("ab")) == 0.0
    assert confident_accuracy(["a", "b"], ["b", "a"], P("ab")) is None


def test_holdout_sets_disjoint_and_deterministic():
    models = [f"model-{i:02d}" for i in range(23)]
    sets = holdout_sets(models, 4, 5, 42)
    assert len(sets) == 5 and all(len(s) == 4 for s in sets)
    flat = [m for s in sets for m in s]
    assert len(set(flat)) == 20 and set(flat) <= set(models)
    assert holdout_sets(list(reversed(models)), 4, 5, 42) == sets  # input order does not matter
    assert holdout_sets(models, 4, 5, 42) == sets
    assert holdout_sets(models, 4, 5, 7) != sets
    # the documented scheme: consecutive blocks of RandomState(seed).shuffle(sorted names)
    names = sorted(models)
    np.random.RandomState(42).shuffle(names)
    assert sets == [names[i * 4:(i + 1) * 4] for i in range(5)]


def test_bootstrap_mean_ci_matches_scipy():
    rng = np.random.default_rng(3)
    x = np.vstack([rng.normal(0.5, 0.2, 80), rng.exponential(1.0, 80), rng.uniform(0, 1, 80)])
    x[1, 7] = np.nan  # a missing score
    x[2, [0, 40]] = np.nan
    lo, hi = bootstrap_mean_ci(x, n_resamples=20_000, confidence=0.95, rng=np.random.default_rng(1))
    assert np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))
    for r in range(x.shape[0]):
        ref = stats.bootstrap((x[r],), lambda a, axis: np.nanmean(a, axis=axis), n_resamples=20_000,
                              confidence_level=0.95, method="percentile", vectorized=True,
                              random_state=np.random.default_rng(r)).confidence_interval
        width = ref.high - ref.low
        assert width > 0
        assert lo[r] == pytest.approx(ref.low, abs=0.1 * width)
        assert hi[r] == pytest.approx(ref.high, abs=0.1 * width)
        assert lo[r] < np.nanmean(x[r]) < hi[r]
    # deterministic for a seeded rng, and batching does not change the distribution much
    lo2, hi2 = bootstrap_mean_ci(x, n_resamples=20_000, confidence=0.95, rng=np.random.default_rng(1))
    np.testing.assert_array_equal(lo, lo2)
    lo3, hi3 = bootstrap_mean_ci(x, n_resamples=20_000, confidence=0.95, rng=np.random.default_rng(2),
                                 batch=333)
    np.testing.assert_allclose(lo3, lo, atol=0.1 * np.max(hi - lo))


def test_ground_truth_ties_are_overlapping_cis():
    rng = np.random.default_rng(5)
    n = 120
    raw = np.vstack([rng.normal(0.50, 0.1, n), rng.normal(0.505, 0.1, n), rng.normal(0.80, 0.1, n),
                     rng.normal(0.20, 0.1, n)])
    raw[0, 3] = np.nan
    models = ["a", "b", "c", "d"]
    gt = ground_truth(raw, models, n_resamples=4000, confidence=0.95, rng=np.random.default_rng(0))
    assert gt["ranking"][0] == "c" and gt["ranking"][-1] == "d"
    assert gt["means"]["a"] == pytest.approx(float(np.nanmean(raw[0])))
    assert gt["ties"] == P("ab")
    ci = gt["ci"]
    want = {frozenset((p, q)) for i, p in enumerate(models) for q in models[i + 1:]
            if ci[p][0] <= ci[q][1] and ci[q][0] <= ci[p][1]}
    assert gt["ties"] == want
    for m in models:
        assert ci[m][0] < gt["means"][m] < ci[m][1]


def test_the_backtest_selector_draws_the_configured_share_from_the_shared_random_order():
    """Issue 32 (item 0's paired design, tried): --random-share sets the share of every model's items drawn from
    the one random order the hold-out models share; the default is the engine's."""
    from conftest import make_sim_bank

    from lm_eval_adaptive.engine.cat.selection import DEFAULT_RANDOM_SHARE
    from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig
    from lm_eval_adaptive.engine.evaluation.fold_parts import fold_ranker

    bank = make_sim_bank(n_items=60, seed=2)
    assert fold_ranker(bank, ["a", "b"], BacktestConfig(), 0, 0).selector.share == DEFAULT_RANDOM_SHARE
    ranker = fold_ranker(bank, ["a", "b"], BacktestConfig(random_share=1.0), 0, 0)
    assert ranker.selector.share == 1.0
    given = {}
    while (req := ranker.ask()) is not None and sum(len(v) for v in given.values()) < 20:
        given.setdefault(req.model, []).append(req.item)
        ranker.tell(req, 0.5)
    assert given["a"][:8] == given["b"][:8]  # every item from the one shared order: the same documents

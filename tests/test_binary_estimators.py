"""The full-task accuracy estimators of 0/1 banks: the factor model (engine/irt/factor_model.py), the estimate of
record (engine/cat/full_task.py), the published estimators compared with it (engine/evaluation/accuracy_estimators.py), the
model error scaled by the unseen share (engine/evaluation/model_error.py) and the CIWidth stop (engine/cat/stopping.py).

Math against closed forms and simulations with known parameters; behaviour on the real dev data is in
benchmarks/bench_binary_estimators.py (docs/binary.md)."""

from __future__ import annotations

import numpy as np
import pytest

from lm_eval_adaptive.data.responses import ResponseTable
from lm_eval_adaptive.engine.evaluation.accuracy_estimators import (
    anchor_estimate,
    anchor_points,
    design_estimate,
    factor_estimate,
    gp_irt,
    gp_weight,
    information_subset,
    irt_prediction,
    p_irt,
    sample_mean,
)
from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.irt.binary_calibration import calibrate_binary
from lm_eval_adaptive.engine.cat.adaptive_test import AdaptiveTest
from lm_eval_adaptive.engine.irt.factor_model import (
    MIN_FACTOR_MODELS,
    FactorModel,
    factor_count,
    fit_factor_model,
)
from lm_eval_adaptive.engine.cat.full_task import full_task_estimate, irt_full_task_estimate
from lm_eval_adaptive.engine.ranking.pairs.metric_scale import MetricScale
from lm_eval_adaptive.engine.evaluation.model_error import correction_from_records, corrected_figures
from lm_eval_adaptive.engine.irt.response_model import BinaryIRTModel
from lm_eval_adaptive.engine.evaluation.simulation import draw_scores
from lm_eval_adaptive.engine.cat.stopping import CIWidth


def _factor_scores(rng, M, N, d=2, noise=0.3, *, truth=False):
    """Scores of a known linear factor model, item means + W f + e (the first factor loads every item: a
    general ability); with ``truth`` also each model's expected scores."""
    base = rng.uniform(0.3, 0.7, N)
    W = rng.normal(0, 0.1, (N, d))
    W[:, 0] += 0.15
    f = rng.normal(size=(M, d))
    expected = base + f @ W.T
    e = rng.normal(0, noise, (M, N))
    return (base, W, expected + e, expected) if truth else (base, W, expected + e)


def _binary_table(rng, M=200, N=60):
    """A 0/1 table (2PL answers) whose items follow two abilities: the first half one, the rest the other."""
    th = rng.normal(size=(M, 2))
    b, a = rng.normal(0, 1.0, N), rng.lognormal(0, 0.3, N)
    dim = np.arange(N) >= N // 2
    y = draw_scores(BinaryIRTModel("2pl"), np.where(dim[None, :], th[:, 1:], th[:, :1]), b[None, :], rng,
                    a=a[None, :], c=0.0).astype(int)
    table = ResponseTable.from_columns([f"m{j}" for j in range(M) for _ in range(N)],
                                       [f"i{i}" for _ in range(M) for i in range(N)], y.ravel())
    return table, y


# ------------------------------------------------------------------ the factor model
def test_posterior_mean_is_the_best_linear_predictor_under_the_factor_covariance():
    rng = np.random.default_rng(0)
    N, d = 12, 3
    fm = FactorModel(mean=rng.uniform(0.2, 0.8, N), loadings=rng.normal(0, 0.3, (N, d)),
                     noise=rng.uniform(0.05, 0.2, N), n_models=100)
    S = np.array([0, 3, 4, 9])
    y = rng.uniform(0, 1, S.size)
    Sigma = fm.loadings @ fm.loadings.T + np.diag(fm.noise)
    U = np.setdiff1d(np.arange(N), S)
    blup = fm.mean[U] + Sigma[np.ix_(U, S)] @ np.linalg.solve(Sigma[np.ix_(S, S)], y - fm.mean[S])
    f, cov = fm.posterior(S, y)
    assert np.allclose(fm.mean[U] + fm.loadings[U] @ f, blup)
    # the variance of the unseen items' total given the seen ones: the conditional covariance, summed
    cond = Sigma[np.ix_(U, U)] - Sigma[np.ix_(U, S)] @ np.linalg.solve(Sigma[np.ix_(S, S)], Sigma[np.ix_(S, U)])
    fm01 = FactorModel(mean=fm.mean, loadings=fm.loadings, noise=fm.noise, n_models=100, lo=-10, hi=10)
    est, var = fm01.full_task(S, y)
    assert var == pytest.approx(cond.sum() / N ** 2)
    assert est == pytest.approx((y.sum() + blup.sum()) / N)


def test_a_full_run_is_exact_and_the_variance_falls_with_every_item():
    rng = np.random.default_rng(1)
    mu, W, Y = _factor_scores(rng, 300, 40)
    fm = fit_factor_model(Y, 2, lo=-5, hi=5)
    y = Y[0]
    order = rng.permutation(40)
    variances = [fm.full_task(order[:n], y[order[:n]])[1] for n in range(0, 41, 5)]
    assert all(a > b for a, b in zip(variances, variances[1:-1]))
    est, var = fm.full_task(np.arange(40), y)
    assert var == 0.0 and est == pytest.approx(y.mean())


def test_the_fit_recovers_the_factor_structure_and_predicts_better_than_the_item_means():
    rng = np.random.default_rng(2)
    mu, W, Y, expected = _factor_scores(rng, 400, 80, d=2, noise=0.2, truth=True)
    fm = fit_factor_model(Y[:300], 2, lo=-5, hi=5)
    # the same column space: W's projection onto the fitted loadings' span keeps nearly all of it
    Q, _ = np.linalg.qr(fm.loadings)
    assert np.linalg.norm(Q @ (Q.T @ W)) / np.linalg.norm(W) > 0.95
    S = np.arange(20)
    err_fa, err_mean = [], []
    for y, ey in zip(Y[300:], expected[300:]):  # against each model's expected mean on the other 60 items
        err_fa.append(np.mean(fm.predict(S, y[S])[20:]) - np.mean(ey[20:]))
        err_mean.append(np.mean(fm.mean[20:]) - np.mean(ey[20:]))
    assert np.mean(np.abs(err_fa)) < 0.5 * np.mean(np.abs(err_mean))


def test_its_interval_covers_at_the_stated_rate_when_the_model_is_right():
    """Scores drawn from a known factor model, the model fitted on 500 others: 95% intervals of the
    full-task mean from 15 random items of 60 hold 95% of the time (binomial band for 1,000 draws)."""
    rng = np.random.default_rng(3)
    mu, W, Y = _factor_scores(rng, 1500, 60, d=2, noise=0.25)
    fm = fit_factor_model(Y[:500], 2, lo=-10, hi=10)
    hits = []
    for y in Y[500:]:
        S = rng.choice(60, 15, replace=False)
        est, var = fm.full_task(S, y[S])
        hits.append(abs(est - y.mean()) <= 1.96 * np.sqrt(var))
    assert 0.93 <= np.mean(hits) <= 0.97


def test_factor_count_follows_the_models():
    assert factor_count(MIN_FACTOR_MODELS - 1, 100) == 0
    assert factor_count(20, 100) == 1
    assert factor_count(59, 100) == 2
    assert factor_count(300, 100) == 5
    assert factor_count(300, 3) == 2
    assert factor_count(300, 100, requested=0) == 0


def test_malformed_factor_blocks_are_refused():
    good = FactorModel(mean=np.zeros(3) + 0.5, loadings=np.ones((3, 1)), noise=np.ones(3) * 0.1, n_models=30)
    assert FactorModel.from_dict(good.to_dict(), 3).n_factors == 1
    with pytest.raises(ValueError, match="3 items, the bank has 4"):
        FactorModel.from_dict(good.to_dict(), 4)
    bad = good.to_dict() | {"noise": [0.1, 0.0, 0.1]}
    with pytest.raises(ValueError, match="noise must be > 0"):
        FactorModel.from_dict(bad, 3)
    with pytest.raises(ValueError, match="linear-factor"):
        FactorModel.from_dict({"kind": "other"}, 3)


# ------------------------------------------------------------------ banks with a factor model
@pytest.fixture(scope="module")
def binary():
    rng = np.random.default_rng(4)
    table, y = _binary_table(rng)
    bank = calibrate_binary(table, response_model="2pl")
    return bank, table, y


def test_a_binary_bank_carries_its_factor_model_through_its_file(binary, tmp_path):
    bank, table, y = binary
    assert bank.factors is not None and bank.factors.n_factors == factor_count(200, 60)
    assert bank.diagnostics["factors"] == bank.factors.n_factors
    path = bank.save(tmp_path / "b.json")
    back = ItemBank.load(path)
    assert back.bank_id == bank.bank_id
    assert np.allclose(back.factors.loadings, bank.factors.loadings, atol=1e-7)
    # a bank with fewer models than a factor model needs has none, and its file and id read as before
    small = calibrate_binary(table.select_models([f"m{j}" for j in range(MIN_FACTOR_MODELS - 1)]),
                             response_model="2pl")
    assert small.factors is None and "factors" not in small.to_dict()


def test_the_estimate_of_record_is_the_factor_estimate_exact_at_a_full_run(binary):
    bank, table, y = binary
    bank.set_model_error({"ability_sd": 0.1, "full_task_sd": 0.02})
    try:
        col = {str(v): i for i, v in enumerate(table.items)}
        ym = y[0][[col[str(x)] for x in bank.item_ids]]
        est = full_task_estimate(bank, np.arange(bank.n_items), ym, 0.0, 0.3)
        assert est["method"] == "factor" and est["estimate"] == pytest.approx(ym.mean())
        assert est["lower"] == est["upper"] == pytest.approx(ym.mean())
        part = full_task_estimate(bank, np.arange(20), ym[:20], 0.0, 0.3)
        fm_est, fm_var = bank.factors.full_task(np.arange(20), ym[:20])
        u = 40 / 60
        half = 1.959964 * np.hypot(np.sqrt(fm_var), 0.02 * u)
        assert part["estimate"] == pytest.approx(fm_est)
        assert part["upper"] - part["estimate"] == pytest.approx(min(half, 1 - fm_est), rel=1e-5)
        assert part["error_scale"] == pytest.approx(u)
        irt = irt_full_task_estimate(bank, np.arange(20), ym[:20], 0.0, 0.3)
        assert irt["method"] == "irt" and irt["error_scale"] == 1.0
    finally:
        bank.set_model_error({})


# ------------------------------------------------------------------ the compared estimators
def test_sample_mean_is_the_srs_mean_with_its_finite_population_variance():
    rng = np.random.default_rng(5)
    pop = (rng.random(200) < 0.3).astype(float)
    draws, var = [], []
    for _ in range(4000):
        s = rng.choice(200, 40, replace=False)
        e, v = sample_mean(200, pop[s], pop[s])
        draws.append(e.estimate)
        var.append(v)
        assert e.estimate == pytest.approx(pop[s].mean())
    assert np.mean(draws) == pytest.approx(pop.mean(), abs=0.003)
    assert np.var(draws) == pytest.approx(np.mean(var), rel=0.08)  # (1 − n/N)·s²/n


def test_gp_irt_weights_the_unbiased_estimate_by_the_squared_bias():
    assert gp_weight(0.0, 0.01) == 0.0
    assert gp_weight(0.01, 0.0) == 1.0
    assert gp_weight(0.01, 0.03) == pytest.approx(0.25)
    assert gp_irt(0.5, 0.3, 0.03, 0.01).estimate == pytest.approx(0.25 * 0.3 + 0.75 * 0.5)


def test_p_irt_and_irt_prediction_and_the_design_estimate_are_the_engine_s_own(binary):
    bank, table, y = binary
    col = {str(v): i for i, v in enumerate(table.items)}
    ym = y[1][[col[str(x)] for x in bank.item_ids]]
    items = np.arange(0, 30)
    assert p_irt(bank, items, ym[items], 0.2, 0.4).estimate == pytest.approx(
        irt_full_task_estimate(bank, items, ym[items], 0.2, 0.4)["estimate"])
    assert irt_prediction(bank, 0.2).estimate == pytest.approx(
        np.mean(bank.model.mean(0.2, bank.b, **bank.item_params())))
    assert factor_estimate(bank, items, ym[items]).estimate == pytest.approx(
        full_task_estimate(bank, items, ym[items], 0.2, 0.4)["estimate"])
    row = np.full(bank.n_items, np.nan)
    row[items] = ym[items]
    rnd = np.zeros(bank.n_items, dtype=bool)
    rnd[items[::2]] = True
    ms = MetricScale(bank, row[None], rnd[None], np.array([0.2]), se_theta=np.array([0.4]))
    d = design_estimate(bank, items, ym[items], items[::2], 0.2, 0.4)
    assert d.estimate == pytest.approx(ms.estimate[0]) and d.lower == pytest.approx(ms.interval()[0][0])


def test_anchor_points_are_cluster_medoids_whose_weights_sum_to_one():
    rng = np.random.default_rng(6)
    # three groups of identical items: three anchors, one per group, weighted by the group's size
    base = (rng.random((50, 3)) < 0.5).astype(float)
    Y = np.repeat(base, [10, 5, 25], axis=1)
    items, w = anchor_points(Y, 3, seed=0)
    groups = np.repeat([0, 1, 2], [10, 5, 25])
    assert sorted(groups[items].tolist()) == [0, 1, 2]
    assert dict(zip(groups[items].tolist(), w.tolist())) == pytest.approx({0: 0.25, 1: 0.125, 2: 0.625})
    # the weighted anchors give each model's accuracy exactly here
    for y in Y:
        assert anchor_estimate(y[items], w).estimate == pytest.approx(y.mean())


def test_information_subset_takes_distinct_informative_items(binary):
    bank, table, y = binary
    abil = list(bank.diagnostics["abilities"].values())
    s = information_subset(bank, 15, abil)
    assert s.size == 15 and np.unique(s).size == 15
    info_all = np.mean([bank.information(float(t)) for t in np.quantile(abil, [0.25, 0.5, 0.75])], axis=0)
    assert info_all[s].mean() > info_all.mean()


# ------------------------------------------------------------------ model error scaled by the unseen share
def _record(err, h, u, n):
    return {"d": 0.0, "s2": 1.0, "se": 0.2, "misfit": False, "err": err, "lo": h, "hi": h, "lo2": h, "hi2": h,
            "u": u, "n": n, "leg": "single"}


def test_the_factor_model_error_is_measured_per_unseen_share_and_covers_95_percent():
    rng = np.random.default_rng(7)
    recs = []
    for n, u in ((20, 0.8), (50, 0.5), (100, 0.0)):
        for _ in range(200):
            miss = 0.0 if u == 0 else rng.normal(0, 0.03 * u)  # a bias that lives on the unseen items only
            recs.append(_record(miss, 0.01 if u else 0.0, u, n))
    c = correction_from_records(recs)
    # every miss is 0.03·u·z: σ ≈ 0.03 (the 95% quantile of (err² − h²)/(1.96·u)²), whatever the length
    assert 0.025 < c["full_task_sd"] < 0.035
    cover, _ = corrected_figures(recs, c)
    assert cover >= 0.95
    # the full runs stay exact: no width is added where nothing is unseen
    exact = [r for r in recs if r["u"] == 0]
    assert corrected_figures(exact, c)[0] == 1.0


# ------------------------------------------------------------------ stopping in the metric's units
def test_ci_width_stops_once_the_full_task_half_width_is_reached(binary):
    bank, table, y = binary
    col = {str(v): i for i, v in enumerate(table.items)}
    ym = y[2][[col[str(x)] for x in bank.item_ids]].astype(float)
    rule = CIWidth(0.08, min_items=5)
    test = AdaptiveTest(bank, se_target=None, min_items=0, max_items=bank.n_items, seed=0, rules=(rule,))
    halves = []
    e = test.examinee
    while (item := test.next_item()) is not None:
        test.record(item, float(ym[item]))
        halves.append(rule.half(e))
    assert test.stopped_because == "ci_width"
    assert halves[-1] <= 0.08 and e.n >= 5
    assert all(h > 0.08 for h in halves[4:-1])  # it did not stop earlier once allowed to
    est = full_task_estimate(bank, e.items, ym[e.items], e.theta, e.se)
    assert 0.5 * (est["upper"] - est["lower"]) == pytest.approx(halves[-1])
    with pytest.raises(ValueError):
        CIWidth(0.0)

"""Issue 31 item 3: a small history is honest. A bank from too few models is not used (the runs fall back to the
bank-free estimate and say so); a 0/1 bank from 8 real models gives intervals inside [0, 1], never of zero width
before a full run (no collapse after all-right answers), holding the held-out models' full-task means."""

from __future__ import annotations

import numpy as np
import pytest

from lm_eval_adaptive.data.prices import uniform_prices
from lm_eval_adaptive.data.tables import load_any_table
from lm_eval_adaptive.engine.anytime.history_backtest import history_backtest
from lm_eval_adaptive.engine.anytime.small_bank import (
    MIN_BANK_MODELS,
    MIN_BANK_MODELS_ESTIMATE,
    bank_use,
    calibrate_line,
    calibration_models,
)
from lm_eval_adaptive.engine.cat.full_task import full_task_estimate
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig
from lm_eval_adaptive.engine.evaluation.self_check import calibrate_checked
from lm_eval_adaptive.engine.ranking.pairs.metric_scale import MetricScale
from lm_eval_adaptive.harness.task_loop import AdaptiveRunConfig, adaptive_test


def test_the_rule_says_which_banks_are_used_and_why():
    small = bank_use(MIN_BANK_MODELS - 1)
    assert not small.use_bank
    assert f"bank from {MIN_BANK_MODELS - 1} models" in small.reason and f"at least {MIN_BANK_MODELS}" in small.reason
    assert bank_use(MIN_BANK_MODELS).use_bank and bank_use(None).use_bank  # unknown: used as given
    assert not bank_use(MIN_BANK_MODELS, what="estimating").use_bank  # run --adaptive needs more
    assert bank_use(MIN_BANK_MODELS_ESTIMATE, what="estimating").use_bank
    assert calibrate_line(MIN_BANK_MODELS_ESTIMATE) is None
    line = calibrate_line(2)
    assert "bank-free" in line and "\n" not in line
    assert "used by rank, not by run --adaptive" in calibrate_line(MIN_BANK_MODELS)


def test_the_history_curve_falls_back_below_the_threshold():
    """N = 2: the runs are the bank-free ranker's (the N = 0 runs, same seeds); without the fallback the banked
    ranker runs on the 2-model bank."""
    t = load_any_table("wmt24/en-zh/chrf")
    config = BacktestConfig(seeds=1)
    after = history_backtest(t, config=config, history=[0, 2], prices=uniform_prices(t.models))
    n0, n2 = after["curve"]["0"], after["curve"]["2"]
    assert n2["modes"] == {"bank-free": n2["runs"]}
    assert [r["tau"] for r in n2["runs_detail"]] == [r["tau"] for r in n0["runs_detail"]]
    assert n2["coverage"] == n0["coverage"]
    before = history_backtest(t, config=config, history=[2], prices=uniform_prices(t.models), fallback=False)
    assert before["curve"]["2"]["modes"] == {"banked": before["curve"]["2"]["runs"]}


@pytest.mark.slow
def test_a_zero_one_bank_from_eight_models_stays_honest():
    """Open LLM Leaderboard tinyHellaSwag (97 questions, 0/1) cut to 8 calibration models, calibrated as
    ``calibrate`` does (with its self-check); 40 other models run as ``run --adaptive`` runs them (its default
    stopping rules). After every answer: the full-task interval inside [0, 1] and of positive width before the
    last document; after 12 documents and at the stop it holds the model's full-task mean in ≥ 93% of the models.
    And the issue's case, 12 of 12 right (on the items the test asks for), on the ranking's scale and the
    single-model estimate: inside [0, 1], not collapsed to a point."""
    table = load_any_table("ollb/tiny_hellaswag")
    models = list(table.models)
    pick = np.random.default_rng(0).choice(len(models), 8 + 40, replace=False)
    bank = calibrate_checked(table.select_models([models[i] for i in pick[:8]]))
    # rank uses a bank from 8 models; run --adaptive runs bank-free unless --use-small-bank (this estimator)
    assert calibration_models(bank) == 8 and bank_use(8).use_bank and not bank_use(8, what="estimating").use_bank
    matrix = table.mean_matrix()
    cols = {str(i): j for j, i in enumerate(table.items)}
    idx = np.array([cols[str(i)] for i in bank.item_ids])
    covered, covered_12 = [], []
    for m in pick[8:]:
        raw = matrix[m, idx]
        test = adaptive_test(bank, np.zeros(bank.n_items), AdaptiveRunConfig(), str(m))
        truth = float(np.mean(raw))
        while items := test.next_items(1):
            for i in items:
                test.record(i, float(bank.scale(i, raw[i])))
            e = test.examinee
            est = full_task_estimate(bank, e.items, raw[e.items], e.theta, e.se, misfit=e.misfit)
            assert 0.0 <= est["lower"] <= est["estimate"] <= est["upper"] <= 1.0, (m, e.n, est)
            if e.n < bank.n_items:
                assert est["upper"] - est["lower"] > 1e-6, (m, e.n, est)
            if e.n == 12:  # the rank stopped after 12-13 items
                covered_12.append(est["lower"] - 1e-9 <= truth <= est["upper"] + 1e-9)
        covered.append(est["lower"] - 1e-9 <= truth <= est["upper"] + 1e-9)
    assert np.mean(covered) >= 0.93, np.mean(covered)
    assert np.mean(covered_12) >= 0.93, np.mean(covered_12)

    test = adaptive_test(bank, np.zeros(bank.n_items), AdaptiveRunConfig(), "all-right")
    while test.examinee.n < 12:  # 12 of 12 right, on the items the test asks for
        for i in test.next_items(1):
            test.record(i, float(bank.scale(i, 1.0)))
    e = test.examinee
    est = full_task_estimate(bank, e.items, np.ones(e.n), e.theta, e.se, misfit=e.misfit)
    raw = np.full((1, bank.n_items), np.nan)
    raw[0, e.items] = 1.0
    sc = MetricScale(bank, raw, np.zeros_like(raw, dtype=bool), [e.theta], se_theta=[e.se])
    lo, hi = sc.interval()
    for low, high in ((est["lower"], est["upper"]), (float(lo[0]), float(hi[0]))):
        assert 0.0 <= low and high <= 1.0
        assert high - low > 1e-6, (low, high)  # not collapsed to a point (the issue: [0.9974, 1.0026])

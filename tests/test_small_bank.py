"""Issue 31 item 3: a small history is honest. A bank from too few models is not used (the runs fall back to the
bank-free estimate and say so); a 0/1 bank from 8 real models gives intervals inside [0, 1], never of zero width
before a full run (no collapse after all-right answers), holding the held-out models' full-task means."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from lm_eval_adaptive.data.prices import uniform_prices
from lm_eval_adaptive.data.tables import load_any_table
from lm_eval_adaptive.engine.anytime.history_backtest import history_backtest
from lm_eval_adaptive.engine.anytime.small_bank import (
    MIN_BANK_MODELS,
    MIN_BANK_MODELS_ESTIMATE,
    bank_use,
    bank_use_of,
    calibrate_line,
    calibration_models,
    self_check_line,
    self_check_taus,
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
    # rank and run --adaptive run bank-free on a bank from 8 models (rank since stop 32: MIN_BANK_MODELS = 10);
    # run --adaptive --use-small-bank uses this estimator, and a rank scale is checked below
    assert calibration_models(bank) == 8 and not bank_use(8).use_bank and not bank_use(8, what="estimating").use_bank
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


# ------------------------------------------------ the bank's own self-check decides (issue 31 item 3, issue 32)
BELOW = {"mean_tau": 0.40, "shared_random_tau": 0.60, "tau_runs": 10}  # banked 0.20 below shared random


def test_the_self_check_rule_rejects_a_bank_below_shared_random_by_more_than_m():
    use = bank_use(12, self_check=BELOW, margin=0.10)
    assert not use.use_bank
    assert "self-check" in use.reason and "0.400 against 0.600 over 10 runs" in use.reason
    assert use.reason.endswith("ranking without it")
    assert bank_use(12, self_check=BELOW, margin=0.25).use_bank  # within m: used
    assert bank_use(12, self_check={**BELOW, "mean_tau": 0.60}, margin=0.0).use_bank  # equal: used
    assert bank_use(12, self_check=BELOW, margin=None).use_bank  # None: never fall back
    # the model count still decides first; run --adaptive's rule is the count alone
    assert "too few" in bank_use(MIN_BANK_MODELS - 1, self_check=BELOW, margin=0.10).reason
    assert bank_use(MIN_BANK_MODELS_ESTIMATE, what="estimating", self_check=BELOW, margin=0.10).use_bank


def test_an_old_bank_without_the_figures_is_used_as_today():
    """A bank whose self-check was written before it recorded the shared-random τ (a shipped bank with those
    figures taken out, as banks built before stop 31 are): the rule has nothing to compare, the model count alone
    decides (as before), and calibrate would say nothing of it."""
    from lm_eval_adaptive.harness.bank_source import load_bank

    bank = load_bank("wmt24_en-de.bleu")
    check = {k: v for k, v in bank.diagnostics["self_check"].items() if k not in ("shared_random_tau", "tau_runs")}
    bank.diagnostics["self_check"] = check
    assert "mean_tau" in check and "shared_random_tau" not in check
    assert self_check_taus(check) is None
    for m in (0.10, 0.0, -1.0):
        assert bank_use_of(bank, margin=m).use_bank
    assert self_check_line(bank, margin=0.0) is None
    bank.diagnostics["self_check"] = {**check, **BELOW}  # the same bank with the figures: rejected, and said
    assert not bank_use_of(bank, margin=0.10).use_bank
    line = self_check_line(bank, margin=0.10)
    assert "0.400 against 0.600" in line and "will not use this bank" in line and "\n" not in line
    assert "will use this bank" in self_check_line(bank, margin=0.25)


def test_calibrate_records_the_self_check_against_shared_random():
    t = load_any_table("wmt24/en-zh/chrf")
    bank = calibrate_checked(t)
    check = bank.diagnostics["self_check"]
    taus = self_check_taus(check)
    assert taus is not None and -1 <= taus[0] <= 1 and -1 <= taus[1] <= 1
    assert taus[2] == check["folds"] * check["seeds"] > 0


def test_the_backtest_falls_back_where_the_rule_rejects_the_bank():
    """m = −1 (banked τ must beat shared random by 1: never) rejects every fold's bank: each is ranked by the
    bank-free ranker (the history curve's N = 0 runs, same seeds: same items, dollars, pairs and coverage);
    m = 2 rejects none (the runs of the backtest without the rule). The self-check inside each fold's bank
    does not apply the rule to itself."""
    from lm_eval_adaptive.engine.evaluation.backtest import backtest, self_check_backtest

    t = load_any_table("wmt24/en-zh/chrf")
    prices = uniform_prices(t.models)
    config = BacktestConfig(seeds=1, settle_seeds=0, folds=2)
    never = backtest(t, config=config, prices=prices)
    kept = backtest(t, config=replace(config, bank_use_margin=2.0), prices=prices)
    fell = backtest(t, config=replace(config, bank_use_margin=-1.0), prices=prices)
    assert never.folds_fallen_back == kept.folds_fallen_back == 0 and fell.folds_fallen_back == fell.folds_run == 2
    assert [f["adaptive_tau"] for f in kept.folds] == [f["adaptive_tau"] for f in never.folds]
    assert all(not f["bank_used"] and "self-check" in f["bank_use_reason"] for f in fell.folds)
    assert all(f["self_check_taus"]["tau_runs"] > 0 for f in fell.folds)
    n0 = history_backtest(t, config=config, history=[0], prices=prices)["curve"]["0"]["runs_detail"]
    assert fell.adaptive.items == pytest.approx(np.mean([r["items"] for r in n0]))
    assert fell.counts["confident"] == sum(r["confident"][1] for r in n0)
    assert fell.counts["covered"] == sum(sum(r["covered"]) for r in n0)
    assert set(fell.stopped_because) <= {"settled", "budget", "max_items", "exhausted"}
    assert fell.fixed.items > 0  # fixed-length CAT still runs on the bank
    inner = self_check_backtest(t.select_models(list(t.models)[:10]), replace(config, bank_use_margin=-1.0))
    assert inner.folds_fallen_back == 0

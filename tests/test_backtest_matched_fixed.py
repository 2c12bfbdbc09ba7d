"""Fixed-length CAT at the adaptive run's spend (``fixed_matched``) beside the paper's busiest-model version, and the
oracle bank (calibrated in-sample on every model: a bound) of the backtest (engine/evaluation/backtest.py)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import simulate_scores

from lm_eval_adaptive.data.responses import ResponseTable
from lm_eval_adaptive.engine.evaluation.backtest import (
    assemble_backtest,
    backtest_fold,
    matched_fixed_length,
    plan_backtest,
)
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig

H = 4


def _table(n_models=10, n_items=60, seed=3, drop=()) -> ResponseTable:
    """Continuous scores of models spread in ability; ``drop``: (model index, item index) pairs left unscored."""
    rng = np.random.default_rng(seed)
    b = rng.normal(0, 1.2, n_items)
    model, item, score = [], [], []
    for j, t in enumerate(np.linspace(-1.5, 1.5, n_models)):
        y = simulate_scores(t, b, k=0.1, rng=rng)
        for i in range(n_items):
            if (j, i) not in drop:
                model.append(f"sys{j}")
                item.append(f"seg{i:03d}")
                score.append(100 * y[i])
    return ResponseTable.from_columns(model, item, score, metric="chrf")


def _outcomes(table, **kw):
    config = BacktestConfig(seeds=2, folds=2, holdout_size=H, bootstrap=300, min_items=5, target_items=10,
                            self_check=False, settle_seeds=0, **kw)
    plan = plan_backtest(table, config)
    return plan, [backtest_fold(table, plan, f) for f in range(plan.n_folds)]


def test_matched_length_rounds_the_adaptive_items_per_model_half_up():
    assert matched_fixed_length(54, 4) == 14  # 13.5 → 14 (half up, not to even)
    assert matched_fixed_length(53, 4) == 13 and matched_fixed_length(55, 4) == 14
    assert matched_fixed_length(80, 4) == 20


def test_fixed_matched_spends_the_adaptive_items_within_rounding_and_fixed_the_busiest_models():
    table = _table()
    plan, outcomes = _outcomes(table)
    runs = [r for o in outcomes for r in o.runs]
    assert runs
    for r in runs:
        # every model has a score for every item: each gets exactly the rounded share
        assert r.fixed_matched_items == H * matched_fixed_length(r.adaptive_items, H)
        assert abs(r.fixed_matched_items - r.adaptive_items) <= H / 2
        assert r.fixed_items >= r.fixed_matched_items  # the busiest model's items for every model
        assert -1.0 <= r.fixed_matched_tau <= 1.0
    res = assemble_backtest(table, plan, outcomes, seconds=0.0)
    d = res.to_dict()
    assert set(d["fixed_matched"]) >= {"tau", "tau_std", "items", "pct_used", "cost"}
    assert res.method("fixed_matched").items == pytest.approx(np.mean([r.fixed_matched_items for r in runs]))
    assert abs(res.method("fixed_matched").items - res.adaptive.items) <= H / 2
    assert all("fixed_matched_tau" in f for f in res.folds)


def test_a_model_without_scores_for_some_items_gets_fewer_matched_items_never_an_unscored_one():
    # sys1..sys9 lack scores for most items: a hold-out model among them runs out before the matched length
    drop = {(j, i) for j in range(10) for i in range(8, 60) if j % 2}
    table = _table(drop=drop)
    _, outcomes = _outcomes(table)
    runs = [r for o in outcomes for r in o.runs]
    assert all(r.fixed_matched_items <= H * matched_fixed_length(r.adaptive_items, H) for r in runs)
    assert any(r.fixed_matched_items < H * matched_fixed_length(r.adaptive_items, H) for r in runs)


def test_the_oracle_bank_calibrates_on_every_model_and_is_named_in_the_signature():
    table = _table()
    plan, outcomes = _outcomes(table, oracle_bank=True)
    assert all(o.summary["calibration_models"] == table.n_models for o in outcomes)
    res = assemble_backtest(table, plan, outcomes, seconds=0.0)
    assert "oracle_bank" in res.signature
    plain_plan, plain = _outcomes(table)
    assert all(o.summary["calibration_models"] == table.n_models - H for o in plain)
    assert "oracle_bank" not in assemble_backtest(table, plain_plan, plain, seconds=0.0).signature


def test_the_self_check_of_an_oracle_bank_stays_out_of_sample():
    from dataclasses import replace

    from lm_eval_adaptive.engine.evaluation.backtest import self_check_backtest

    table = _table(n_models=8)
    config = BacktestConfig(seeds=1, folds=1, holdout_size=H, bootstrap=200, min_items=5, target_items=10,
                            self_check_seeds=1, settle_seeds=0)
    oracle, plain = (self_check_backtest(table, replace(config, oracle_bank=o)) for o in (True, False))
    assert oracle.settings["oracle_bank"] is False
    assert all(f["calibration_models"] < table.n_models for f in oracle.folds)
    assert oracle.signature == plain.signature

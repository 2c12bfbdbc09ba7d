"""Integration: the paper's protocol on real recorded systems from ../shared/data."""

import json

import numpy as np
import pytest

from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig
from lm_eval_adaptive.engine.evaluation.backtest import backtest
from lm_eval_adaptive.errors import InputError


@pytest.fixture(scope="module")
def wmt_bleu():
    from lm_eval_adaptive.data.named_tables import load_named

    try:
        return load_named("wmt24/en-de/bleu")
    except InputError as e:
        pytest.skip(f"real data not available: {e}")


def test_backtest_on_real_wmt_table(wmt_bleu):
    r = backtest(wmt_bleu, config=BacktestConfig(seeds=2))
    assert r.n_models == 26 and r.n_items == 997
    assert r.runs == 10
    # adaptive beats random sampling at matched dollars, and is rarely wrong when it is confident
    assert r.adaptive.tau > r.random.tau
    assert r.confident_accuracy >= 0.95
    # a few percent of the (model, item) pairs of each hold-out set
    assert r.adaptive.pct_used < 5.0
    assert 40 <= r.adaptive.items <= 200
    for f in r.folds:
        # the adaptive runs never spend more than the budget; random spends at most their mean spend
        assert f["matched_cost_usd"] <= f["budget_usd"] * (1 + 1e-9)
        assert len(f["holdout"]) == 4 and f["calibration_models"] == 22
    assert r.random.cost <= np.mean([f["matched_cost_usd"] for f in r.folds]) * (1 + 1e-9)
    assert set(r.to_dict()["ties"]) == {"adaptive_pct", "truth_pct", "precision", "recall", "f1"}
    assert "seeds:2" in r.signature and "version:" in r.signature


def test_hold_out_models_never_calibrate_their_own_bank(wmt_bleu, monkeypatch):
    import lm_eval_adaptive.engine.evaluation.backtest as bt

    seen = []
    real = bt.calibrate

    def spy(table, **kw):
        seen.append(set(map(str, table.models[np.unique(table.model_idx)])))
        return real(table, **kw)

    monkeypatch.setattr(bt, "calibrate", spy)
    r = backtest(wmt_bleu, config=BacktestConfig(seeds=1, folds=3))
    # each fold calibrates its bank on the other models, then its self-check calibrates inner banks on
    # subsets of those: no call, outer or inner, sees the fold's hold-out models
    n_calib = wmt_bleu.n_models - 4
    starts = [k for k, used in enumerate(seen) if len(used) == n_calib]
    assert len(starts) == 3 and len(seen) > 3
    for f, (a, b) in zip(r.folds, zip(starts, starts[1:] + [len(seen)])):
        assert all(not used & set(f["holdout"]) for used in seen[a:b])


def test_backtest_cli_on_named_real_table(wmt_bleu, tmp_path, capsys):
    out = tmp_path / "bt.json"
    rc = main(["backtest", "wmt24/en-de/bleu", "--seeds", "1", "--folds", "2", "--bootstrap", "500",
               "--json", str(out)])
    assert rc == 0
    d = json.loads(out.read_text())
    assert d["table"] == "wmt24/en-de/bleu"
    assert d["settings"]["folds"] == 2
    assert "adaptive τ" in capsys.readouterr().out


@pytest.fixture(scope="module")
def wmt25_xcomet():
    from lm_eval_adaptive.data.wmt25 import load_wmt25

    try:
        return load_wmt25("en-de", "xcomet")
    except InputError as e:
        pytest.skip(f"real data not available: {e}")


def test_backtest_on_a_table_without_token_counts_budgets_items(wmt25_xcomet):
    r = backtest(wmt25_xcomet, config=BacktestConfig(seeds=1, target_items=15))
    # every item costs the same (1 + 1 tokens at the default price): the budget buys 15 items a model
    unit = 1e-6 + 3e-6
    for f in r.folds:
        assert f["budget_usd"] == pytest.approx(4 * 15 * unit)
    assert r.adaptive.cost > 0 and r.adaptive.items <= 4 * 15 + 1e-9
    assert r.random.items == pytest.approx(r.adaptive.cost / unit, rel=0.35)


def test_backtest_reports_how_honest_its_numbers_are(wmt_bleu):
    r = backtest(wmt_bleu, config=BacktestConfig(seeds=1))
    assert 0 <= r.full_task_coverage <= 1 and r.folds_run == 5
    z = r.se_calibration
    assert z["n"] > 0 and 0 <= z["share_abs_z_over_1_96"] <= 1
    assert r.person_misfit_flags["n"] == 5 * 4 and 0 <= r.person_misfit_flags["share"] <= 1
    # an adaptive set costs a few percent of running the four models on every item
    assert 0 < r.cost_share_of_full_run < 0.1
    d = r.to_dict()
    assert {"full_task_coverage", "se_calibration", "person_misfit_flags", "cost_share_of_full_run"} <= set(d)


def test_backtest_reports_the_metric_scale_figures_of_issue_21(wmt_bleu):
    """The ground truth at δ (truly tied pairs), equivalence claims against the tie margin, and each
    unresolved pair's stated cost to settle against the items it took run on (one continuation and the
    median of several); the θ-scale full-task interval's coverage is reported beside the metric scale's."""
    from lm_eval_adaptive.engine.evaluation.backtest import pooled

    cfg = BacktestConfig(seeds=1, folds=3, settle_runs=3, tie_margin_share=0.5, truth_margin_share=0.1)
    r = backtest(wmt_bleu, config=cfg)
    p = pooled([r])
    assert 0 <= p["tied_pairs_ordered_share"] <= 1 and p["tied_pairs"] > 0
    assert p["equivalent_claims"] > 0 and 0 <= p["equivalence_accuracy"] <= 1
    st = r.settle
    assert st["pairs"] > 0 and st["runs_per_pair"] == 3
    assert st["mean_stated"] > 0 and st["mean_measured"] > 0 and 0 <= st["within_2x_median"] <= 1
    for x in r.settle_records:
        assert len(x["runs"]) == 3 and x["measured"] == x["runs"][0] and x["median"] == np.median(x["runs"])
    for f in r.folds:  # δ and the margin are the stated shares of the range of the table's full-task means
        assert f["tie_margin"] == pytest.approx(0.5 / cfg.truth_margin_share * f["truth_delta"])
    assert 0 <= r.theta_full_task_coverage <= 1 and r.full_task_coverage == r.metric_full_task_coverage


def test_backtest_with_no_continuation_measures_no_cost_to_settle(wmt_bleu):
    """settle_runs 0 (bench_binary_honesty.py --settle-runs 0) runs the backtest with no settle checks, as
    settle_seeds 0 does, where it raised IndexError at the first unresolved pair; below 0 is refused."""
    cfg = dict(seeds=1, folds=2, tie_margin_share=0.5, truth_margin_share=0.1)
    with_runs = backtest(wmt_bleu, config=BacktestConfig(settle_runs=1, **cfg))
    assert with_runs.settle["pairs"] > 0  # unresolved pairs are there to run on
    none = backtest(wmt_bleu, config=BacktestConfig(settle_runs=0, **cfg))
    assert none.settle == {"pairs": 0} and none.settle_records == []
    assert none.adaptive.tau == with_runs.adaptive.tau and none.adaptive.items == with_runs.adaptive.items
    with pytest.raises(InputError, match="--settle-runs must be at least 0"):
        backtest(wmt_bleu, config=BacktestConfig(settle_runs=-1, **cfg))


def test_backtest_on_a_small_table_runs_the_hold_out_sets_that_fit(wmt_bleu):
    small = wmt_bleu.select_models(list(wmt_bleu.models)[:12])  # 12 // 4 complete sets, as the paper's code
    r = backtest(small, config=BacktestConfig(seeds=1))
    assert r.folds_run == 3 and len(r.folds) == 3 and r.runs == 3  # (n - 2) // 4 ran 2 (issue 32)
    assert all(f["calibration_models"] == 8 for f in r.folds)
    with pytest.raises(InputError, match="needs at least 6 models"):
        backtest(wmt_bleu.select_models(list(wmt_bleu.models)[:5]), config=BacktestConfig(seeds=1))


@pytest.mark.slow
def test_the_self_check_predicts_the_coverage_measured_on_left_out_models():
    """Each fold's bank is corrected by its own self-check, which aims its intervals at 95% on the
    calibration models; the coverage then measured on the truly left-out models is within 5 points."""
    from lm_eval_adaptive.data.named_tables import load_named
    from lm_eval_adaptive.engine.evaluation.backtest import pooled

    try:
        tables = [load_named(n) for n in ("wmt24/en-de/bleu", "wmt25/en-ja/gemba-gpt4.1", "wmt25/en-zh/cometkiwi")]
    except InputError as e:
        pytest.skip(f"real data not available: {e}")
    p = pooled([backtest(t, config=BacktestConfig(seeds=3)) for t in tables])
    assert abs(p["theta_full_task_coverage"] - 0.95) <= 0.05  # the θ-scale interval the self-check corrects
    assert p["share_abs_z_over_1_96"] <= 0.10
    assert abs(p["full_task_coverage"] - 0.95) <= 0.05  # the metric scale's, which needs no correction

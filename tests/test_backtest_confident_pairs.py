"""The backtest's record of every confident pair (engine/evaluation/run_records.py ``confident_pair_records``): what each pair
the ranker reported ordered rested on, so that a wrong one can be read (docs/binary.md)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import stdtrit

from lm_eval_adaptive.data.responses import ResponseTable
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig
from lm_eval_adaptive.engine.evaluation.backtest import backtest, pooled
from lm_eval_adaptive.engine.irt.response_model import BinaryIRTModel
from lm_eval_adaptive.engine.evaluation.simulation import draw_scores


def _binary_table(n_models: int, n_items: int, seed: int) -> ResponseTable:
    """2PL answers of models spread widely in ability (so that some pairs are ordered)."""
    rng = np.random.default_rng(seed)
    theta, b, a = rng.normal(0, 1.5, n_models), rng.normal(0, 1, n_items), rng.lognormal(0.2, 0.3, n_items)
    y = draw_scores(BinaryIRTModel("2pl"), theta[:, None], b[None, :], rng, a=a[None, :])
    mi, ii = np.meshgrid(np.arange(n_models), np.arange(n_items), indexing="ij")
    return ResponseTable.from_columns([f"m{j:03d}" for j in mi.ravel()], [f"i{i}" for i in ii.ravel()], y.ravel(),
                                      metric="acc")


@pytest.fixture(scope="module")
def result():
    return backtest(_binary_table(60, 60, 0),
                    config=BacktestConfig(seeds=2, folds=3, self_check=False, response_model="2pl", bootstrap=500))


def test_one_record_per_confident_pair_and_the_counts_agree(result):
    recs = result.confident_pairs
    assert len(recs) == result.counts["confident"] > 0
    assert sum(p["right"] for p in recs) == result.counts["confident_right"]
    assert "confident_pairs" not in result.to_dict()


def test_each_record_is_an_order_its_own_figures_claim(result):
    for p in result.confident_pairs:
        a, b = p["models"][p["a"]], p["models"][p["b"]]
        df = min(a["df"], b["df"])
        # the one ranked above has the higher estimate, and the difference is past the two-sided t quantile
        assert p["difference"] == pytest.approx(a["estimate"] - b["estimate"], abs=1e-9)
        if p["se"] > 0:
            assert p["difference"] > stdtrit(df, 0.975) * p["se"] * (1 - 1e-9)
        assert p["p_order"] >= 0.975 - 1e-9
        # right means the truth puts a above b (no tied true means here: 60 items of a spread population)
        if p["true_gap"] != 0:
            assert p["right"] == (p["true_gap"] > 0)
        for st in (a, b):
            assert st["items"] >= st["random_items"] >= st["comparable_random_items"]
            if st["method"] == "design":  # the variance used is the residuals' own or the floor, never below
                assert st["s2_used"] >= st["s2_residuals"] * (1 - 1e-9)
                assert st["floored"] == (st["s2_used"] > st["s2_residuals"] * (1 + 1e-9) + 1e-15)


def test_floored_stops_split_the_metric_scale_coverage(result):
    """The model stops whose residual variance sat at its floor and the others partition the coverage."""
    p = pooled([result])
    c = result.counts
    assert 0 <= c["floored_covered"] <= c["floored"] <= c["models"] == p["models_ranked"]
    covered = p["floored_coverage"] * c["floored"] if c["floored"] else 0.0
    covered += p["unfloored_coverage"] * (c["models"] - c["floored"])
    assert covered == pytest.approx(c["covered_metric"])
    floored_in_pairs = [st["floored"] for q in result.confident_pairs for st in q["models"].values()]
    assert not any(floored_in_pairs) or c["floored"] > 0

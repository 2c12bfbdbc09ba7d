"""Issue 31 item 3: on a 0/1 bank no full-task interval reaches past what the unseen items could add (every
one wrong, every one right): a bank from few models printed accuracy intervals above 1 ([0.5342, 1.2086]).
A continuous bank's stored ranges are only what calibration saw, so its intervals are not cut."""

from __future__ import annotations

import numpy as np

from lm_eval_adaptive.data.tables import load_any_table
from lm_eval_adaptive.engine.cat.full_task import irt_full_task_estimate
from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.irt.calibration import calibrate
from lm_eval_adaptive.engine.irt.response_model import BernoulliResponseModel, ContinuousResponseModel
from lm_eval_adaptive.engine.irt.response_model import binary_mean_bounds
from lm_eval_adaptive.engine.ranking.pairs.metric_scale import MetricScale


def _bank(model, n=80, seed=0):
    rng = np.random.default_rng(seed)
    return ItemBank(item_ids=np.array([f"q{j}" for j in range(n)], dtype=object), b=rng.normal(0, 1, n),
                    model=model, scaling="global", lo=0.0, hi=1.0, input_tokens=100.0, output_tokens=10.0,
                    task="t", metric="acc")


def test_twelve_right_of_eighty_stays_inside_what_the_rest_could_add():
    bank = _bank(BernoulliResponseModel(a=1.0))
    raw = np.full((2, 80), np.nan)
    raw[0, :12] = 1.0  # 12 of 12 right
    raw[1, :12] = 0.0  # 12 of 12 wrong
    sc = MetricScale(bank, raw, np.zeros((2, 80), dtype=bool), [3.0, -3.0], se_theta=[2.0, 2.0])
    lo, hi = sc.interval()
    assert np.all(lo >= 0.0) and np.all(hi <= 1.0)
    assert lo[0] >= 12 / 80 and hi[1] <= 68 / 80  # the answers seen are part of the mean
    floor, ceiling = sc.logical_bounds()
    assert np.allclose(floor, [12 / 80, 0.0]) and np.allclose(ceiling, [1.0, 68 / 80])
    est = irt_full_task_estimate(bank, np.arange(12), np.ones(12), theta=3.0, se=2.0)
    assert 12 / 80 <= est["lower"] <= est["estimate"] <= est["upper"] <= 1.0


def test_a_continuous_bank_is_not_cut():
    bank = _bank(ContinuousResponseModel(k=0.2))
    assert binary_mean_bounds(bank.model, np.zeros(1), np.ones(1), np.ones(1)) is None
    raw = np.full((1, 80), np.nan)
    raw[0, :5] = 0.99
    sc = MetricScale(bank, raw, np.zeros((1, 80), dtype=bool), [4.0], se_theta=[3.0])
    assert sc.logical_bounds() is None
    lo, hi = sc.interval()
    h = sc.quantile(sc.df, 0.975) * sc.se
    assert np.allclose(hi, sc.estimate + h) and np.allclose(lo, sc.estimate - h)


def test_a_bank_from_eight_real_models_gives_intervals_inside_zero_one():
    """A dev 0/1 table (Open LLM Leaderboard tinyTruthfulQA) cut to 8 calibration models, 2PL: the held-out
    models answer the bank's 12 easiest items (most of them all right, as in the issue) and are judged by the
    response model at θ̂ ± SE. Without the bounds this gave intervals from -0.056 to 1.112; every one is now
    inside [0, 1], and inside what the unseen items could add."""
    table = load_any_table("ollb/tiny_truthfulqa")
    models = list(table.models)
    bank = calibrate(table.select_models(models[:8]), response_model="2pl")
    matrix = table.mean_matrix()
    held = list(range(8, 28))
    cols = {str(i): j for j, i in enumerate(table.items)}
    easiest = np.argsort(bank.b)[:12]
    raw = np.full((len(held), bank.n_items), np.nan)
    for r, m in enumerate(held):
        for j in easiest:
            raw[r, j] = matrix[m, cols[str(bank.item_ids[j])]]
    all_right = np.nanmean(raw, axis=1) == 1.0
    assert all_right.sum() >= 5
    theta = np.where(all_right, 2.0, 0.0)
    sc = MetricScale(bank, raw, np.zeros_like(raw, dtype=bool), theta, se_theta=np.full(len(held), 1.5))
    lo, hi = sc.interval()
    assert np.all(lo >= 0.0) and np.all(hi <= 1.0), (lo.min(), hi.max())
    floor, ceiling = sc.logical_bounds()
    assert np.all(lo >= floor - 1e-12) and np.all(hi <= ceiling + 1e-12)
    assert np.any(hi == ceiling)  # the bound was reached: without it some interval passed 1

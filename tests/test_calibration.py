"""Calibration: recovery of known parameters from data simulated under the response model."""

import numpy as np
import pytest

from lm_eval_adaptive.data.responses import ResponseTable
from lm_eval_adaptive.engine.irt.calibration import calibrate
from lm_eval_adaptive.engine.irt.response_model import ContinuousResponseModel
from lm_eval_adaptive.engine.evaluation.simulation import draw_scores
from lm_eval_adaptive.errors import InputError


@pytest.fixture
def real_table():
    from lm_eval_adaptive.data.named_tables import load_named

    def get(name):
        try:
            return load_named(name)
        except InputError as e:  # no ../shared/data and no LM_EVAL_ADAPTIVE_DATA
            pytest.skip(f"real data not available: {e}")

    return get


def simulate(M=40, N=500, k=0.1, seed=0, missing=0.0, repeats=1):
    """Scores ~ Beta with mean μ = logistic(θ-b) and variance k·μ(1-μ): the model's moments, in [0, 1]."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1, M)
    theta -= theta.mean()
    b = rng.normal(0, 1.5, N)
    rows_m, rows_i, ys = [], [], []
    for _ in range(repeats):
        y = draw_scores(ContinuousResponseModel(k=k), theta[:, None], b[None, :], rng, distribution="beta")
        keep = rng.random((M, N)) >= missing
        mm, ii = np.nonzero(keep)
        rows_m.append(mm)
        rows_i.append(ii)
        ys.append(y[keep])
    mm, ii, y = map(np.concatenate, (rows_m, rows_i, ys))
    table = ResponseTable.from_columns([f"m{j:02d}" for j in mm], [f"i{i:04d}" for i in ii], y)
    return table, theta, b


def _truth_for(bank, b_true):
    idx = np.array([int(s[1:]) for s in bank.item_ids])
    return b_true[idx]


def test_joint_recovers_b_theta_and_k():
    table, theta, b = simulate(k=0.1)
    bank = calibrate(table, scaling="global", method="joint")
    # global scaling of scores already in [0,1] is ~identity; both scales are centred at mean θ = 0
    rmse = np.sqrt(np.mean((bank.b - _truth_for(bank, b)) ** 2))
    assert rmse < 0.2
    est_theta = np.array([bank.diagnostics["abilities"][f"m{j:02d}"] for j in range(len(theta))])
    assert np.max(np.abs(est_theta - theta)) < 0.15
    assert bank.k == pytest.approx(0.1, rel=0.1)
    assert bank.discrimination == pytest.approx(1 / np.sqrt(bank.k))
    assert bank.diagnostics["conformance_r2"] > 0.8


@pytest.mark.parametrize("k", [0.05, 0.3])
def test_joint_recovers_k_across_noise_levels(k):
    table, _, _ = simulate(k=k, seed=3)
    bank = calibrate(table, scaling="global", method="joint")
    assert bank.k == pytest.approx(k, rel=0.12)


def test_recovery_with_missing_pairs_and_repeated_observations():
    table, theta, b = simulate(k=0.1, missing=0.3, repeats=2, seed=5)
    assert table.n_obs < 2 * 40 * 500
    bank = calibrate(table, scaling="global", method="joint")
    rmse = np.sqrt(np.mean((bank.b - _truth_for(bank, b)) ** 2))
    assert rmse < 0.2
    assert bank.k == pytest.approx(0.1, rel=0.12)


def test_moments_method_orders_items_like_the_truth():
    table, _, b = simulate(k=0.1)
    bank = calibrate(table, scaling="global", method="moments")
    assert np.corrcoef(bank.b, _truth_for(bank, b))[0, 1] > 0.98
    # METHOD.md §2: difficulties come from p̂ min-max normalised to [ε, 1-ε], so they span ±logit(1-ε)
    assert bank.b.max() - bank.b.min() == pytest.approx(2 * np.log(0.999 / 0.001), rel=1e-6)
    assert bank.calibration["method"] == "moments"


def test_moments_k_is_the_method_of_moments_formula():
    table, _, _ = simulate(M=12, N=80, k=0.2, seed=2)
    bank = calibrate(table, scaling="global", method="moments", drop_negative=False)
    th = np.array([bank.diagnostics["abilities"][m] for m in table.models])
    pos = {v: i for i, v in enumerate(bank.item_ids)}
    lo, hi = table.score.min(), table.score.max()
    num = den = 0.0
    for m, i, s in zip(table.model_idx, table.item_idx, table.score):
        j = pos.get(table.items[i])
        if j is None:
            continue
        mu = 1 / (1 + np.exp(-(th[m] - bank.b[j])))
        y = (s - lo) / (hi - lo)
        num += (y - mu) ** 2
        den += mu * (1 - mu)
    assert bank.k == pytest.approx(num / den, rel=1e-5)  # diagnostics round abilities to 1e-6


def test_drops_negative_correlation_and_constant_items():
    table, _, _ = simulate(M=20, N=60, seed=1)
    f = table.to_frame()
    theta_rank = f.groupby("model")["score"].mean().rank()
    bad = f["model"].map(theta_rank)  # score increases with model ability ...
    f.loc[f["item"] == "i0000", "score"] = 1 - bad[f["item"] == "i0000"] / 20  # ... reversed for i0000
    f.loc[f["item"] == "i0001", "score"] = 0.5  # constant
    t2 = ResponseTable.from_columns(f["model"], f["item"], f["score"])
    bank = calibrate(t2, scaling="per_item")
    reasons = {d["id"]: d["reason"] for d in bank.dropped}
    assert reasons["i0000"] == "negative_correlation"
    assert reasons["i0001"] == "constant"
    assert "i0000" not in set(bank.item_ids) and "i0001" not in set(bank.item_ids)
    kept_negative = calibrate(t2, scaling="per_item", drop_negative=False)
    assert "i0000" in set(kept_negative.item_ids)


def test_per_item_scaling_stores_each_items_range():
    table, _, _ = simulate(M=10, N=30, seed=4)
    bank = calibrate(table, scaling="per_item")
    f = table.to_frame()
    rng_ = f.groupby("item")["score"].agg(["min", "max"])
    for j, item in enumerate(bank.item_ids):
        assert bank.lo[j] == pytest.approx(rng_.loc[item, "min"])
        assert bank.hi[j] == pytest.approx(rng_.loc[item, "max"])
    # a live score outside the stored range is clipped into [0, 1]
    assert bank.scale(0, bank.hi[0] + 5) == 1.0
    assert bank.scale(0, bank.lo[0] - 5) == 0.0


def test_atlas_filters_drop_easy_items():
    table, _, _ = simulate(M=15, N=100, seed=6)
    f = table.to_frame()
    rank = f["model"].map(f.groupby("model")["score"].mean().rank(pct=True))
    sel = f["item"] == "i0002"
    f.loc[sel, "score"] = 0.955 + 0.04 * rank[sel]  # rises with ability, but mean > 95%
    t2 = ResponseTable.from_columns(f["model"], f["item"], f["score"])
    bank = calibrate(t2, scaling="global", atlas_filters=True)
    reasons = {d["id"]: d["reason"] for d in bank.dropped}
    assert reasons.get("i0002") == "too_easy"
    assert "i0002" in set(calibrate(t2, scaling="global").item_ids)  # kept without the ATLAS filters


def test_bad_calibration_input():
    t = ResponseTable.from_columns(["a", "a", "b", "b"], ["1", "2", "1", "2"], [0.5, 0.5, 0.5, 0.5])
    with pytest.raises(InputError, match="every score"):
        calibrate(t, scaling="global")
    with pytest.raises(InputError, match="no item's scores vary"):
        calibrate(t, scaling="per_item")  # every item constant → nothing left
    t2 = ResponseTable.from_columns(["a", "b"], ["1", "1"], [0.2, 0.4])
    with pytest.raises(InputError):
        calibrate(t2, scaling="global", method="nope")
    with pytest.raises(InputError):
        calibrate(t2, scaling="sideways")


def test_a_corrupt_score_is_refused_not_squashed_into_the_range():
    table, _, _ = simulate(M=10, N=60, seed=3)
    score = np.array(table.score)
    score[17] = -12540.0
    fields = dict(models=table.models, items=table.items, model_idx=table.model_idx,
                  item_idx=table.item_idx, score=score, input_tokens=None, output_tokens=None,
                  source="built.csv")
    bad = ResponseTable(**fields)  # the plain constructor does not check values
    model, item = table.models[table.model_idx[17]], table.items[table.item_idx[17]]
    with pytest.raises(InputError, match=rf"^built\.csv: observation 18: score -12540\.0 of model "
                                         rf"'{model}' on item '{item}' is far outside"):
        calibrate(bad)
    # accepted on request: then every other score sits in the top sliver of the range
    bank = calibrate(ResponseTable(**fields, outliers_allowed=True), scaling="global")
    assert bank.lo[0] == -12540.0


def test_calibration_on_real_wmt_table_is_plausible(real_table):
    bank = calibrate(real_table("wmt24/en-de/bleu"))
    d = bank.diagnostics
    assert d["n_models"] == 26
    assert 900 < bank.n_items <= 997
    assert 0.1 < bank.discrimination < 10
    assert np.all(np.isfinite(bank.b))
    # stronger systems get higher abilities: GPT-4 above Phi-3-Medium on BLEU
    assert d["abilities"]["Unbabel-Tower70B"] > d["abilities"]["Phi-3-Medium"]

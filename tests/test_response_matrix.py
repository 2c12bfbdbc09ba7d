"""ResponseMatrix (the dense table) and calibration on it: the same bank as on the long table.

A small long table is calibrated by the reference arithmetic (sums over observations, 100 sweeps),
a matrix or a large long table by passes over the (model, item) matrix that stop at convergence:
these tests hold the two to the same bank."""

import numpy as np
import pytest
from scipy.special import expit

from lm_eval_adaptive.data.response_matrix import ResponseMatrix
from lm_eval_adaptive.engine.irt import calibration, matrix_passes
from lm_eval_adaptive.engine.irt.calibration import calibrate
from lm_eval_adaptive.engine.irt.response_model import ContinuousResponseModel
from lm_eval_adaptive.engine.evaluation.simulation import draw_scores
from lm_eval_adaptive.errors import InputError


def simulated(M=30, N=400, k=0.1, missing=0.2, seed=1, dtype=np.float64, odd_items=True):
    """Beta scores with mean logistic(θ-b) and variance k·μ(1-μ); with ``odd_items`` item 0 is
    constant, item 1 has no score, item 2 falls as ability rises."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1, M)
    theta -= theta.mean()
    b = rng.normal(0, 1.5, N)
    y = draw_scores(ContinuousResponseModel(k=k), theta[:, None], b[None, :], rng, distribution="beta")
    y[rng.random((M, N)) < missing] = np.nan
    if odd_items:
        y[:, 0] = 0.5
        y[:, 1] = np.nan
        y[:, 2] = expit(-3 * theta)
    matrix = ResponseMatrix(models=[f"m{j:02d}" for j in range(M)], items=[f"i{i:04d}" for i in range(N)],
                            scores=y.astype(dtype), source="sim")
    return matrix, theta, b


def assert_same_bank(a, b, tol):
    assert list(a.item_ids) == list(b.item_ids)
    assert a.dropped == b.dropped
    np.testing.assert_allclose(a.b, b.b, rtol=0, atol=tol)
    assert a.model.k == pytest.approx(b.model.k, rel=tol)
    ta, tb = a.diagnostics["abilities"], b.diagnostics["abilities"]
    assert max(abs(ta[m] - tb[m]) for m in ta) <= max(tol, 1e-6)  # abilities are rounded to 1e-6
    assert a.diagnostics["conformance_r2"] == pytest.approx(b.diagnostics["conformance_r2"], abs=tol)
    assert a.diagnostics["n_observations"] == b.diagnostics["n_observations"]


@pytest.mark.parametrize("kw", [{}, {"scaling": "global"}, {"method": "moments"}, {"atlas_filters": True}])
def test_matrix_and_long_table_give_the_same_bank(kw):
    matrix, _, _ = simulated()
    bank = calibrate(matrix, **kw)
    reasons = {d["id"]: d["reason"] for d in bank.dropped}
    assert reasons["i0001"] == "no_observations" and reasons["i0002"] == "negative_correlation"
    assert reasons.get("i0000") == (None if kw.get("scaling") == "global" else "constant")
    assert_same_bank(bank, calibrate(matrix.to_table(), **kw), 1e-9)


def test_blocks_of_rows_do_not_change_the_fit(monkeypatch):
    matrix, _, _ = simulated(missing=0.3)
    whole = calibrate(matrix)
    monkeypatch.setattr(matrix_passes, "_BLOCK_CELLS", 1000)  # 30 x 400 in blocks of 2 rows
    assert_same_bank(calibrate(matrix), whole, 1e-10)
    assert_same_bank(calibrate(matrix.to_table()), whole, 1e-9)


def test_joint_fit_stops_at_its_fixed_point(monkeypatch):
    matrix, _, _ = simulated(missing=0.0, odd_items=False)
    early = calibrate(matrix)
    monkeypatch.setattr(matrix_passes, "_JOINT_TOL", 0.0)  # every one of the 100 sweeps
    assert_same_bank(early, calibrate(matrix), 1e-8)


def test_float32_matrix_gives_nearly_the_same_bank():
    m64, _, _ = simulated()
    m32 = ResponseMatrix(models=m64.models, items=m64.items, scores=m64.scores.astype(np.float32))
    assert m32.scores.dtype == np.float32
    assert_same_bank(calibrate(m32), calibrate(m64), 1e-4)


def test_recovers_known_parameters_from_a_matrix():
    matrix, theta, b = simulated(M=60, N=800, k=0.1, missing=0.1, odd_items=False)
    bank = calibrate(matrix, scaling="global")
    idx = np.array([int(s[1:]) for s in bank.item_ids])
    assert np.corrcoef(bank.b, b[idx])[0, 1] > 0.98
    th = np.array([bank.diagnostics["abilities"][f"m{j:02d}"] for j in range(60)])
    assert np.corrcoef(th, theta)[0, 1] > 0.99
    assert bank.model.k == pytest.approx(0.1, rel=0.15)


def test_conformance_on_a_seeded_sample_above_the_limit(monkeypatch):
    matrix, _, _ = simulated(missing=0.0, odd_items=False)
    for table in (matrix, matrix.to_table()):
        full = calibrate(table)
        assert "conformance_sample" not in full.diagnostics
        with monkeypatch.context() as patch:
            patch.setattr(matrix_passes, "_CONFORMANCE_MAX_CELLS", 3000)
            sampled = calibrate(table)
        assert 2500 < sampled.diagnostics["conformance_sample"] <= 3000
        assert sampled.diagnostics["conformance_r2"] == pytest.approx(full.diagnostics["conformance_r2"], abs=0.2)
        np.testing.assert_array_equal(sampled.b, full.b)  # only the diagnostic is sampled


def test_matrix_validation():
    ok = np.array([[0.1, 0.2], [0.3, np.nan]])
    m = ResponseMatrix(models=["a", "b"], items=["x", "y"], scores=ok)
    assert (m.n_models, m.n_items, m.n_obs) == (2, 2, 3)
    assert not m.scores.flags.writeable
    t = m.to_table()
    assert t.n_obs == 3
    np.testing.assert_array_equal(t.mean_matrix(), ok)
    for kwargs, message in [
        (dict(models=["a", "b"], items=["x"], scores=ok), "shape"),
        (dict(models=["a", "a"], items=["x", "y"], scores=ok), "more than once"),
        (dict(models=["a"], items=["x", "y"], scores=ok[:1]), "at least 2"),
        (dict(models=["a", "b"], items=["x", "y"], scores=np.where(np.isnan(ok), np.inf, ok)), "not finite"),
        (dict(models=["a", "b"], items=["x", "y"], scores=np.full((2, 2), np.nan)), "no scores"),
        (dict(models=["a", "b"], items=["x", "y"], scores=ok, input_tokens=[1.0]), "input_tokens"),
    ]:
        with pytest.raises(InputError, match=message):
            ResponseMatrix(**kwargs)


def test_a_corrupt_cell_is_refused_naming_it():
    matrix, _, _ = simulated(odd_items=False)
    scores = matrix.scores.copy()
    scores[3, 7] = 1e6
    bad = ResponseMatrix(models=matrix.models, items=matrix.items, scores=scores, source="sim")
    with pytest.raises(InputError, match=r"model 'm03' on item 'i0007'"):
        calibrate(bad)
    allowed = ResponseMatrix(models=matrix.models, items=matrix.items, scores=scores, outliers_allowed=True)
    assert calibrate(allowed, scaling="per_item").n_items > 300


@pytest.mark.parametrize("repeats", [1, 3])
def test_a_large_long_table_takes_the_matrix_path_to_the_same_bank(monkeypatch, repeats):
    rng = np.random.default_rng(5)
    matrix, _, _ = simulated(M=20, N=300, missing=0.25)
    long = matrix.to_table()
    # repeated observations of every pair: the pair's mean and the spread around it both count
    noisy = [np.clip(long.score + rng.normal(0, 0.05, long.n_obs), 0, 1) for _ in range(repeats)]
    table = type(long)(models=long.models, items=long.items, model_idx=np.tile(long.model_idx, repeats),
                       item_idx=np.tile(long.item_idx, repeats), score=np.concatenate(noisy),
                       input_tokens=None, output_tokens=None)
    reference = [calibrate(table), calibrate(table, method="moments")]
    monkeypatch.setattr(calibration, "_REFERENCE_MAX_OBS", 0)
    assert_same_bank(calibrate(table), reference[0], 1e-9)
    assert_same_bank(calibrate(table, method="moments"), reference[1], 1e-12)


def test_matrix_fences_are_the_long_tables():
    from lm_eval_adaptive.data.response_matrix import check_matrix_outliers
    from lm_eval_adaptive.data.score_outliers import outlier_fences

    rng = np.random.default_rng(3)
    for n_rows in (2, 3, 7, 101):
        scores = rng.normal(0, 1, (n_rows, 53))
        scores[rng.random(scores.shape) < 0.1] = np.nan
        low, high = outlier_fences(scores[~np.isnan(scores)])
        names = dict(models=[f"m{j}" for j in range(n_rows)], items=[f"i{i}" for i in range(53)])
        far = 20 * (high - low)
        for value, surely_refused in ((high * 0.999, False), (high * 1.001, False), (low * 1.001, False),
                                      (high + far, True), (low - far, True)):
            s = scores.copy()
            s[1, 5] = value
            low2, high2 = outlier_fences(s[~np.isnan(s)])  # the long table's rule on the same scores
            refused = bool(value < low2 or value > high2)
            assert refused or not surely_refused
            matrix = ResponseMatrix(scores=s, **names)
            if refused:
                with pytest.raises(InputError, match=r"model 'm1' on item 'i5'"):
                    check_matrix_outliers(matrix)
            else:
                check_matrix_outliers(matrix)

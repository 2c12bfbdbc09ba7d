"""Closed forms of the response models (METHOD.md §1)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit

from lm_eval_adaptive.engine.irt.response_model import (
    BernoulliResponseModel,
    ContinuousResponseModel,
    response_model_from_dict,
)
from lm_eval_adaptive.engine.evaluation.simulation import draw_scores

THETAS = np.array([-3.0, -1.2, 0.0, 0.4, 2.5])
BS = np.array([-2.0, 0.0, 0.3, 1.7])


def _grid():
    return np.meshgrid(THETAS, BS, indexing="ij")


# ------------------------------------------------------------------ continuous
@pytest.mark.parametrize("k", [0.05, 0.1, 0.7])
def test_continuous_mean_information_discrimination(k):
    m = ContinuousResponseModel(k=k)
    th, b = _grid()
    mu = 1.0 / (1.0 + np.exp(-(th - b)))
    np.testing.assert_allclose(m.mean(th, b), mu, rtol=1e-12)
    np.testing.assert_allclose(m.information(th, b), mu * (1 - mu) / k, rtol=1e-12)
    assert m.discrimination == pytest.approx(1.0 / np.sqrt(k), rel=1e-12)
    # information peaks at θ = b with value 1/(4k)
    assert float(m.information(0.7, 0.7)) == pytest.approx(0.25 / k)
    # broadcasting: scalar θ against a vector of b
    assert m.mean(0.0, BS).shape == BS.shape


def _fd(f, x, h):
    d1 = (f(x + h) - f(x - h)) / (2 * h)
    d2 = (f(x + h) - 2 * f(x) + f(x - h)) / h ** 2
    return d1, d2


@pytest.mark.parametrize("y", [0.0, 0.13, 0.5, 0.92, 1.0])
@pytest.mark.parametrize("b", [-1.5, 0.0, 2.0])
def test_quasi_score_and_curvature_by_finite_differences(y, b):
    k = 0.1
    m = ContinuousResponseModel(k=k, likelihood="quasi")
    for theta in (-2.0, -0.3, 0.8, 3.0):
        d1, _ = _fd(lambda t: float(m.log_likelihood(y, t, b)), theta, 1e-5)
        _, d2 = _fd(lambda t: float(m.log_likelihood(y, t, b)), theta, 1e-3)
        mu = float(expit(theta - b))
        assert d1 == pytest.approx((y - mu) / k, rel=1e-6, abs=1e-6)
        # -d²/dθ² Q = μ(1-μ)/k, the Fisher information, whatever y is
        assert -d2 == pytest.approx(float(m.information(theta, b)), rel=1e-4, abs=1e-6)


def test_quasi_score_variance_equals_information_by_simulation(simulate):
    k = 0.1
    m = ContinuousResponseModel(k=k)
    rng = np.random.default_rng(123)
    n = 400_000
    b = 0.0
    for theta in (-1.0, 0.0, 1.2):
        mu = float(expit(theta - b))
        # the mean/variance model: y ~ N(μ, kμ(1-μ)), unclipped
        y = draw_scores(m, np.full(n, theta), b, rng, clip=False)
        score = (y - mu) / k
        # the score is the θ-derivative of the quasi-likelihood (checked above); E[score] = 0
        assert abs(score.mean()) < 4 * score.std() / np.sqrt(n)
        assert np.mean(score ** 2) == pytest.approx(float(m.information(theta, b)), rel=0.02)
    # the clipped simulator of conftest, at θ = b where clipping is negligible (3 SDs away)
    y = simulate(np.zeros(n), b, k=k, rng=rng)
    score = (y - 0.5) / k
    assert np.mean(score ** 2) == pytest.approx(float(m.information(0.0, b)), rel=0.03)


@pytest.mark.parametrize("k", [0.05, 0.3])
def test_normal_likelihood_matches_scipy_up_to_constant(k):
    m = ContinuousResponseModel(k=k, likelihood="normal")
    assert m.likelihood == "normal"
    rng = np.random.default_rng(0)
    th = np.linspace(-3, 3, 41)
    for b in (-1.0, 0.0, 1.5):
        y = rng.uniform(0.05, 0.95)
        mu = expit(th - b)
        ref = stats.norm.logpdf(y, mu, np.sqrt(k * mu * (1 - mu)))
        ll = m.log_likelihood(y, th, b)
        diff = ll - ref
        # a θ-independent constant: exactly the dropped -0.5·log(2π)
        assert np.ptp(diff) < 1e-9
        np.testing.assert_allclose(diff, 0.5 * np.log(2 * np.pi), atol=1e-9)


def test_quasi_and_normal_differ():
    q = ContinuousResponseModel(k=0.1, likelihood="quasi")
    n = ContinuousResponseModel(k=0.1, likelihood="normal")
    th = np.linspace(-2, 2, 5)
    assert not np.allclose(q.log_likelihood(0.3, th, 0.0) - q.log_likelihood(0.3, 0.0, 0.0),
                           n.log_likelihood(0.3, th, 0.0) - n.log_likelihood(0.3, 0.0, 0.0))


def test_continuous_loglik_is_finite_at_extremes():
    m = ContinuousResponseModel(k=0.1)
    ll = m.log_likelihood(np.array([0.0, 1.0]), np.array([-40.0, 40.0]), 0.0)
    assert np.all(np.isfinite(ll))
    ll = m.log_likelihood(np.array([1.0, 0.0]), np.array([-800.0, 800.0]), 0.0)
    assert np.all(np.isfinite(ll)) and np.all(ll < -100)


def test_continuous_validate_scores():
    m = ContinuousResponseModel(k=0.1)
    m.validate_scores(np.array([0.0, 0.5, 1.0]))
    for bad in ([np.nan], [-0.01], [1.01], [np.inf]):
        with pytest.raises(ValueError):
            m.validate_scores(np.array(bad))


# ------------------------------------------------------------------- Bernoulli
@pytest.mark.parametrize("a", [0.5, 1.0, 2.3])
def test_bernoulli_closed_forms(a):
    m = BernoulliResponseModel(a=a)
    th, b = _grid()
    p = 1.0 / (1.0 + np.exp(-a * (th - b)))
    np.testing.assert_allclose(m.mean(th, b), p, rtol=1e-12)
    np.testing.assert_allclose(m.information(th, b), a ** 2 * p * (1 - p), rtol=1e-12)
    assert m.discrimination == a
    for y in (0.0, 1.0):
        np.testing.assert_allclose(m.log_likelihood(y, th, b), stats.bernoulli.logpmf(int(y), p),
                                   rtol=1e-10, atol=1e-12)
    # expected curvature of the log-likelihood = Fisher information
    theta, bb, h = 0.4, -0.2, 1e-3
    f = lambda t, y: float(m.log_likelihood(y, t, bb))  # noqa: E731
    P = float(m.mean(theta, bb))
    curv = sum(w * (f(theta + h, y) - 2 * f(theta, y) + f(theta - h, y)) / h ** 2
               for y, w in ((1.0, P), (0.0, 1 - P)))
    assert -curv == pytest.approx(float(m.information(theta, bb)), rel=1e-4)


def test_bernoulli_validate_scores():
    m = BernoulliResponseModel()
    m.validate_scores(np.array([0.0, 1.0, 1.0]))
    with pytest.raises(ValueError):
        m.validate_scores(np.array([0.0, 0.5]))
    with pytest.raises(ValueError):
        m.validate_scores(np.array([np.nan]))


# -------------------------------------------------------------------- invalid
@pytest.mark.parametrize("k", [0.0, -0.1, np.nan, np.inf])
def test_invalid_k(k):
    with pytest.raises(ValueError, match="k"):
        ContinuousResponseModel(k=k)


@pytest.mark.parametrize("a", [0.0, -1.0, np.nan, np.inf])
def test_invalid_a(a):
    with pytest.raises(ValueError, match="discrimination"):
        BernoulliResponseModel(a=a)


def test_invalid_likelihood():
    with pytest.raises(ValueError, match="likelihood"):
        ContinuousResponseModel(k=0.1, likelihood="exact")


# -------------------------------------------------------------------- to_dict
@pytest.mark.parametrize("model", [ContinuousResponseModel(k=0.0731),
                                   ContinuousResponseModel(k=0.25, likelihood="normal"),
                                   BernoulliResponseModel(a=1.7)])
def test_dict_round_trip(model):
    d = model.to_dict()
    assert d["kind"] == model.kind
    back = response_model_from_dict(d)
    assert back == model
    assert type(back) is type(model)
    th = np.linspace(-2, 2, 7)
    np.testing.assert_array_equal(back.log_likelihood(1.0, th, 0.3), model.log_likelihood(1.0, th, 0.3))
    if model.kind == "continuous":
        assert d["a"] == pytest.approx(1 / np.sqrt(model.k))
        assert d["likelihood"] == model.likelihood


def test_from_dict_unknown_kind():
    with pytest.raises(ValueError, match="unknown response model kind"):
        response_model_from_dict({"kind": "gaussian", "k": 1})

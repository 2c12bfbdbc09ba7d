"""GridPosterior (EAP on a grid) against direct numerical integration."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats

from lm_eval_adaptive.engine.cat.estimation import DEFAULT_PRIOR_SD, DispersionPosterior, GridPosterior
from lm_eval_adaptive.engine.irt.response_model import (
    BernoulliResponseModel,
    ContinuousResponseModel,
)


def quad_moments(model, b, y, prior_mean, prior_sd):
    """Posterior mean and SD of θ by adaptive quadrature of prior × likelihood."""
    b = np.asarray(b, dtype=float)
    y = np.asarray(y, dtype=float)

    def logf(t):
        return (stats.norm.logpdf(t, prior_mean, prior_sd)
                + float(np.sum(model.log_likelihood(y, t, b))))

    # centre the exponent to avoid underflow
    ts = np.linspace(prior_mean - 30, prior_mean + 30, 6001)
    c = max(logf(t) for t in ts[::10])
    lo, hi = prior_mean - 30, prior_mean + 30
    pts = list(np.linspace(lo, hi, 31)[1:-1])
    kw = dict(points=pts, limit=400, epsabs=0, epsrel=1e-11)
    z = integrate.quad(lambda t: np.exp(logf(t) - c), lo, hi, **kw)[0]
    m = integrate.quad(lambda t: t * np.exp(logf(t) - c), lo, hi, **kw)[0] / z
    v = integrate.quad(lambda t: (t - m) ** 2 * np.exp(logf(t) - c), lo, hi, **kw)[0] / z
    return m, np.sqrt(v)


CASES = [
    ("quasi", ContinuousResponseModel(k=0.1), [-0.5, 0.2, 1.1], [0.71, 0.35, 0.0]),
    ("quasi-k", ContinuousResponseModel(k=0.4), [0.0, 2.0, -1.0, 0.5], [0.9, 0.2, 1.0, 0.55]),
    ("normal", ContinuousResponseModel(k=0.1, likelihood="normal"), [-0.5, 0.2, 1.1], [0.71, 0.35, 0.12]),
    ("bernoulli", BernoulliResponseModel(a=1.3), [-1.0, 0.0, 0.5, 1.5, -0.3], [1, 1, 0, 0, 1]),
]


@pytest.mark.parametrize("name,model,b,y", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("prior_mean", [0.0, 0.8])
def test_grid_posterior_matches_quadrature(name, model, b, y, prior_mean):
    g = GridPosterior(prior_mean, DEFAULT_PRIOR_SD)
    for bi, yi in zip(b, y):
        g.update(model, bi, yi)
    m, s = quad_moments(model, b, y, prior_mean, DEFAULT_PRIOR_SD)
    assert g.n_obs == len(b)
    assert g.mean == pytest.approx(m, abs=1e-4)
    assert g.sd == pytest.approx(s, abs=1e-4)
    # the density is normalised on the grid (trapezoid rule on the composite grid)
    assert float(np.trapezoid(g.density(), g.grid)) == pytest.approx(1.0, abs=1e-9)


def test_no_data_posterior_is_the_prior_on_a_wide_grid():
    g = GridPosterior(0.7, 5.0, half_width=40.0)
    assert g.n_obs == 0
    assert g.mean == pytest.approx(0.7, abs=1e-3)
    assert g.sd == pytest.approx(5.0, abs=1e-3)


def test_no_data_posterior_is_the_prior_on_the_default_grid():
    g = GridPosterior(0.7)
    assert g.mean == pytest.approx(0.7, abs=1e-3)
    assert g.sd == pytest.approx(DEFAULT_PRIOR_SD, abs=1e-3)


def test_update_many_equals_repeated_update(simulate):
    rng = np.random.default_rng(5)
    b = rng.normal(0, 1.5, 40)
    y = simulate(0.3, b, rng=rng)
    for model in (ContinuousResponseModel(k=0.1), ContinuousResponseModel(k=0.1, likelihood="normal")):
        g1 = GridPosterior(0.1)
        g2 = GridPosterior(0.1)
        for bi, yi in zip(b, y):
            g1.update(model, bi, yi)
        _ = g2.mean  # a cached summary must be invalidated by update_many
        g2.update_many(model, b, y)
        assert g1.n_obs == g2.n_obs == 40
        np.testing.assert_allclose(g1.log_post, g2.log_post, rtol=1e-10, atol=1e-8)
        assert g1.mean == pytest.approx(g2.mean, abs=1e-10)
        assert g1.sd == pytest.approx(g2.sd, abs=1e-10)
        assert g2.sd < 1.0
    g = GridPosterior(0.0)
    g.update_many(ContinuousResponseModel(k=0.1), np.array([]), np.array([]))
    assert g.n_obs == 0


def test_cached_summary_invalidated_by_update():
    m = ContinuousResponseModel(k=0.1)
    g = GridPosterior(0.0)
    before = (g.mean, g.sd)
    g.update(m, 0.0, 1.0)
    assert g.mean > before[0] + 0.1
    assert g.sd < before[1]


def _near_normal_posterior(simulate, step):
    model = ContinuousResponseModel(k=0.1)
    rng = np.random.default_rng(11)
    b = rng.normal(0, 1.0, 60)
    y = simulate(0.4, b, rng=rng)
    g = GridPosterior(0.0, step=step)
    g.update_many(model, b, y)
    return g


def _check_interval(g):
    lo, hi = g.interval(0.95)
    assert lo < g.mean < hi
    # symmetric around the mean (a shift of half a grid step would fail this)
    assert (lo + hi) / 2 == pytest.approx(g.mean, abs=0.002)
    assert lo == pytest.approx(g.mean - 1.959964 * g.sd, abs=0.02 * g.sd + 0.002)
    assert hi == pytest.approx(g.mean + 1.959964 * g.sd, abs=0.02 * g.sd + 0.002)
    lo8, hi8 = g.interval(0.8)
    assert lo < lo8 < hi8 < hi
    assert hi8 - lo8 == pytest.approx(2 * 1.281552 * g.sd, rel=0.03)


def test_interval_of_near_normal_posterior_fine_grid(simulate):
    g = _near_normal_posterior(simulate, step=0.001)
    assert g.sd < 0.15
    _check_interval(g)


def test_interval_of_near_normal_posterior_default_grid(simulate):
    g = _near_normal_posterior(simulate, step=0.025)
    _check_interval(g)


@pytest.mark.parametrize("n", [10, 40, 160, 640])
def test_sd_shrinks_like_inverse_sqrt_information(n, simulate):
    k, b0, theta = 0.1, 0.3, 0.8
    model = ContinuousResponseModel(k=k)
    rng = np.random.default_rng(n)
    b = np.full(n, b0)
    y = simulate(theta, b, k=k, rng=rng)
    g = GridPosterior(0.0)
    g.update_many(model, b, y)
    expected = 1.0 / np.sqrt(1.0 / DEFAULT_PRIOR_SD ** 2 + float(np.sum(model.information(g.mean, b))))
    assert g.sd == pytest.approx(expected, rel=0.05)
    assert abs(g.mean - theta) < 4 * g.sd


def test_invalid_prior_sd():
    for bad in (0.0, -1.0, np.nan):
        with pytest.raises(ValueError):
            GridPosterior(0.0, bad)


@pytest.mark.parametrize("factory", [GridPosterior, DispersionPosterior])
def test_the_prior_alone_gives_its_centre_exactly(factory):
    # An even bank's median lies halfway between two items, so θ̂ before any score decides between
    # them by its last bits: the rounding of the grid sums (which differs between BLAS builds) must
    # not, or the first item differs from machine to machine under the same seed.
    rng = np.random.default_rng(11)
    for c in np.concatenate([rng.normal(0.0, 1.5, 200), [0.0, -0.05852002053291551]]):
        post = factory(float(c))
        assert post.mean == float(c)
        assert 4.9 < post.sd < 5.1  # the prior's SD (5), on the grid

"""The hot path's fast forms (issue 13 item 5) against the definitions they replace.

Each fast form is checked against the plain computation it stands for: the nearest-item walk
against the windowed NumPy search, the random slot's short scan against the whole permutation,
the one-exp log-likelihoods against ``log_likelihood``, the shifted grid summary against sums
over ``exp(log_post)``, the shared selector and the stable sort against building them afresh;
the posterior's softplus-form update against adding ``log_likelihood``, the plain-float pair
judgement against ``OrderConfidence.judge``, and the information at selection filled on first read
against reading θ̂ before every score.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from conftest import make_sim_bank, simulate_scores
from lm_eval_adaptive.engine.cat.examinee import Examinee
from lm_eval_adaptive.engine.cat.estimation import DispersionPosterior, GridPosterior
from lm_eval_adaptive.engine.ranking.pairs.rules import OrderConfidence
from lm_eval_adaptive.engine.irt.response_model import BernoulliResponseModel, ContinuousResponseModel
from lm_eval_adaptive.engine.cat.selection import (
    MaxInfoSelector,
    RandomShareSelector,
    default_selector,
    shared_default_selector,
)

MODELS = [ContinuousResponseModel(k=0.25), ContinuousResponseModel(k=0.1, likelihood="normal"),
          BernoulliResponseModel(a=1.7)]


def test_nearest_item_walk_equals_the_windowed_search():
    rng = np.random.default_rng(0)
    for trial in range(600):
        n = int(rng.integers(1, 300))
        b = rng.normal(0, 1, n)
        if trial % 3 == 0:
            b = np.round(b, 1)  # many equal difficulties
        if trial % 7 == 0:
            b[:] = 0.5
        sel = MaxInfoSelector(b)
        mask = rng.random(n) < rng.random()  # from nearly empty to nearly full: long walks too
        theta = float(rng.choice(b)) if trial % 5 == 0 else float(rng.normal(0, 1.2))
        c = sel.candidates(theta, mask, int(mask.sum()), 1)
        assert sel.select(theta, mask, int(mask.sum())) == (int(c[0]) if c.size else -1)


def test_random_slot_is_the_first_untaken_item_of_the_permutation():
    rng = np.random.default_rng(1)
    sel = RandomShareSelector(rng.normal(0, 1, 500), seed=3)
    perm = np.random.default_rng(3).permutation(500)
    mask = sel.new_mask()
    checked = 0
    for _ in range(500):
        # take items in a random order; at every random slot the pick is the permutation's first free item
        free = [i for i in perm if not mask[sel.positions(i)]]
        n = int(mask.sum())
        if sel.is_random_slot(n):
            assert sel.select(0.0, mask, n) == free[0]
            checked += 1
        mask[sel.positions(int(rng.choice(free)))] = True
    assert checked == 250
    assert sel.select(0.0, mask, 500) == -1


@pytest.mark.parametrize("model", MODELS, ids=lambda m: f"{m.kind}-{getattr(m, 'likelihood', '')}")
def test_log_likelihood_sums_equal_the_definition(model):
    rng = np.random.default_rng(2)
    grid = np.linspace(-40, 40, 801)
    b = rng.normal(0, 3, 300)
    y = (rng.random(300) < 0.5).astype(float) if model.kind == "bernoulli" else rng.random(300)
    want = model.log_likelihood(y[:, None], grid[None, :], b[:, None])
    one = np.zeros_like(grid)
    for yi, bi in zip(y, b):
        model.add_log_likelihood(one, yi, grid, bi)
    many = np.zeros_like(grid)
    model.add_log_likelihoods(many, y, grid, b)
    scale = np.abs(want.sum(axis=0)).max()
    np.testing.assert_allclose(one, want.sum(axis=0), rtol=0, atol=1e-13 * scale)
    np.testing.assert_allclose(many, want.sum(axis=0), rtol=0, atol=1e-13 * scale)
    # far beyond where e^x is finite: the overflow-free form
    wide = np.linspace(-800, 800, 5)
    out = np.zeros_like(wide)
    model.add_log_likelihood(out, 0.3 if model.kind != "bernoulli" else 1.0, wide, 0.0)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, model.log_likelihood(0.3 if model.kind != "bernoulli" else 1.0, wide, 0.0),
                               rtol=1e-12, atol=1e-12)


def _plain_summary(g: GridPosterior) -> tuple[float, float]:
    lp = g.log_post
    w = np.exp(lp - lp.max()) * g.weights
    m = float(w @ g.grid / w.sum())
    return m, float(np.sqrt(w @ (g.grid - m) ** 2 / w.sum()))


@pytest.mark.parametrize("model", MODELS + [BernoulliResponseModel(a=25.0)],
                         ids=["quasi", "normal", "bernoulli", "steep-bernoulli"])
def test_grid_summary_equals_the_plain_sums(model):
    """Also where one update moves the log posterior by hundreds (the shift is found afresh) and
    where θ̂ lies far from the grid's centre (the variance's centred sum)."""
    rng = np.random.default_rng(4)
    g = GridPosterior(0.0, 5.0)
    for k in range(60):
        bk = float(rng.normal(6.0 if k > 30 else 0.0, 1.0))
        yk = float(rng.random() < 0.5) if model.kind == "bernoulli" else float(rng.random())
        g.update(model, bk, yk)
        m, s = _plain_summary(g)
        assert g.mean == pytest.approx(m, rel=1e-12, abs=1e-12)
        assert g.sd == pytest.approx(s, rel=1e-10)


def test_log_post_can_be_read_and_set():
    g = GridPosterior(0.5)
    g.update(ContinuousResponseModel(k=0.2), 0.3, 0.8)
    lp = g.log_post
    h = GridPosterior(0.5)
    h.log_post = lp
    assert (h.mean, h.sd) == pytest.approx((g.mean, g.sd), rel=1e-12)
    with pytest.raises(ValueError):
        h.log_post = lp[:-1]


def test_rankers_on_one_bank_share_its_default_selector():
    bank = make_sim_bank(200)
    a = shared_default_selector(bank, 1, 7)
    assert shared_default_selector(bank, 1, 7) is a
    assert shared_default_selector(bank, 2, 7) is not a
    assert shared_default_selector(bank, 1, 8) is not a
    assert shared_default_selector(bank, 1, None) is not shared_default_selector(bank, 1, None)
    fresh = default_selector(bank.b, 1, 7)
    np.testing.assert_array_equal(a.order, fresh.order)
    np.testing.assert_array_equal(a.perm_pos, fresh.perm_pos)
    bank.b = bank.b + 1.0  # new difficulties: a new selector
    assert shared_default_selector(bank, 1, 7) is not a


@pytest.mark.parametrize("kind", ["distinct", "ties", "nan"])
def test_the_difficulty_order_is_the_stable_sort(kind):
    rng = np.random.default_rng(5)
    b = rng.normal(0, 1, 1000)
    if kind == "ties":
        b = np.round(b, 1)
    if kind == "nan":
        b[[3, 10, 500]] = np.nan
    np.testing.assert_array_equal(MaxInfoSelector(b).order, np.argsort(b, kind="stable"))


@pytest.mark.parametrize("model", MODELS, ids=lambda m: f"{m.kind}-{getattr(m, 'likelihood', '')}")
def test_posterior_update_adds_the_log_likelihood(model):
    """The softplus-form update (quasi and Bernoulli: e^x from a table, log(1 + e^x) in a column, the
    slope and the constant as scalars) keeps log_post equal to prior + Σ log_likelihood; so do the
    other likelihoods' update, update_many, a difficulty beyond the table's range, and a change of
    model midway (its terms are folded into lw)."""
    rng = np.random.default_rng(6)
    g = GridPosterior(0.3, 5.0)
    want = -0.5 * ((g.grid - 0.3) / 5.0) ** 2
    other = BernoulliResponseModel(a=0.7)
    for k in range(80):
        m = other if 40 <= k < 45 else model
        bk = float(rng.normal(0, 2)) if k != 20 else 690.0  # one item beyond e^x's table
        yk = float(rng.random() < 0.5) if m.kind == "bernoulli" else float(rng.random())
        g.update(m, bk, yk)
        want = want + m.log_likelihood(yk, g.grid, bk)
        if k % 10 == 0:
            got = g.log_post
            np.testing.assert_allclose(got - got.max(), want - want.max(), rtol=0,
                                       atol=1e-12 * max(1.0, float(np.abs(want).max())))
            m_, s_ = _plain_summary(g)
            assert (g.mean, g.sd) == pytest.approx((m_, s_), rel=1e-10, abs=1e-12)
    b = rng.normal(0, 2, 30)
    y = (rng.random(30) < 0.5).astype(float) if model.kind == "bernoulli" else rng.random(30)
    g.update_many(model, b, y)
    want = want + model.log_likelihood(y[:, None], g.grid[None, :], b[:, None]).sum(axis=0)
    got = g.log_post
    np.testing.assert_allclose(got - got.max(), want - want.max(), rtol=0,
                               atol=1e-12 * max(1.0, float(np.abs(want).max())))
    told_b, told_y = g.told
    assert told_b.size == g.n_obs == 110 and told_b[-1] == b[-1] and told_y[-1] == y[-1]


def test_posterior_copies_and_pickles_keep_their_columns():
    model = ContinuousResponseModel(k=0.25)
    g = DispersionPosterior(0.0, 5.0)
    for k in range(5):
        g.update(model, 0.2 * k, 0.6)
    for h in (copy.deepcopy(g), pickle.loads(pickle.dumps(g))):
        h.update(model, 0.5, 0.9)
        g2 = copy.deepcopy(g)
        g2.update(model, 0.5, 0.9)
        assert h.theta == pytest.approx(g2.theta, rel=1e-14) and h.n_obs == 6
    assert g.n_obs == 5  # the copies' updates went into their own columns


def test_plain_float_pair_judgement_is_the_array_one():
    rng = np.random.default_rng(7)
    for conf in (0.8, 0.9, 0.95, 0.99):
        rule = OrderConfidence(conf)
        lo, hi = rule.z_bounds
        n = 20000
        ta, tb = rng.normal(0, 1, n), rng.normal(0, 1, n)
        sa, sb = rng.uniform(0, 0.8, n), rng.uniform(0, 0.8, n)
        sa[:50] = sb[:50] = 0.0  # no uncertainty at all: P = 0.5, open
        # pairs whose z lies within a few doubles of either threshold
        s = np.sqrt(sa[50:250] ** 2 + sb[50:250] ** 2)
        edge = np.where(np.arange(200) % 2, hi, lo) + rng.integers(-3, 4, 200) * np.spacing(hi)
        ta[50:250] = tb[50:250] + edge * s
        want = rule.judge(ta, sa, tb, sb) == 1
        got = np.array([rule.ordered(*v) for v in zip(ta.tolist(), sa.tolist(), tb.tolist(), sb.tolist())])
        np.testing.assert_array_equal(got, want)
        assert want[50:250].any() and not want[50:250].all()


def test_information_at_selection_filled_on_read_equals_reading_theta_each_time():
    """Random slots do not estimate θ̂; their information at selection is computed on first read by
    telling a fresh estimator the scores again. It equals what reading θ̂ before every score gives."""
    bank = make_sim_bank(300, seed=4)
    rng = np.random.default_rng(9)
    y = simulate_scores(0.4, bank.b, rng=rng)
    lazy = Examinee(bank, default_selector(bank.b, seed=2))
    eager = Examinee(bank, default_selector(bank.b, seed=2))
    skipped = 0
    for _ in range(40):
        i = lazy.next_item()
        skipped += not lazy.estimator.estimated  # a random slot: θ̂ not estimated
        eager.theta  # noqa: B018 - θ̂ read before every score: the information is taken at once
        assert eager.next_item() == i
        lazy.record(i, float(y[i]))
        eager.record(i, float(y[i]))
    assert skipped == 20
    np.testing.assert_allclose(lazy.info_at_selection, eager.info_at_selection, rtol=1e-12)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: f"{m.kind}-{getattr(m, 'likelihood', '')}")
def test_theta_is_a_function_of_the_scores_told_not_of_when_it_was_read(model):
    """The summary's shift is set by the updates alone: a posterior read after every score and one
    read now and then agree bit for bit (a resumed run equals the uninterrupted one), past the
    periodic exact maximum and past an outlier that sends the sum out of range."""
    rng = np.random.default_rng(10)
    often, seldom = DispersionPosterior(0.0, 5.0), DispersionPosterior(0.0, 5.0)
    for k in range(200):
        bk = {90: -40.0, 120: -400.0}.get(k, float(rng.normal(0, 1.5)))  # -400: the bound hundreds too high
        yk = float(rng.random() < 0.5) if model.kind == "bernoulli" else float(rng.random())
        for g in (often, seldom):
            g.update(model, bk, yk)
        often.theta  # noqa: B018
        if k % 37 == 0 or k == 199:
            assert (seldom.theta, seldom.sd, seldom.se) == (often.theta, often.sd, often.se)

"""2PL/3PL binary response model: closed forms, the bank file, selection, and θ recovery by simulation."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.special import expit

from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.cat.adaptive_test import AdaptiveTest
from lm_eval_adaptive.engine.cat.estimation import DispersionPosterior, GridPosterior
from lm_eval_adaptive.engine.cat.person_fit import dispersion_fit
from lm_eval_adaptive.engine.ranking.ranker import AdaptiveRanker
from lm_eval_adaptive.engine.irt.response_model import (
    BernoulliResponseModel,
    BinaryIRTModel,
    response_model_from_dict,
)
from lm_eval_adaptive.engine.evaluation.simulation import bank_scores
from lm_eval_adaptive.engine.cat.selection import MaxInfoSelector, select_max_information
from lm_eval_adaptive.errors import BankError


def binary_bank(n=300, seed=0, kind="3pl", c=0.25) -> ItemBank:
    rng = np.random.default_rng(seed)
    return ItemBank(item_ids=np.array([f"q{i}" for i in range(n)], dtype=object),
                    b=rng.normal(0, 1.2, n), model=BinaryIRTModel(kind), scaling="global", lo=0.0, hi=1.0,
                    input_tokens=50.0, output_tokens=1.0, task="mc", metric="acc",
                    a=rng.lognormal(0.0, 0.4, n), c=np.full(n, c if kind == "3pl" else 0.0))


def draw(bank, theta, items, rng):
    return bank_scores(bank, theta, rng, items)


def test_mean_and_information_closed_forms():
    m = BinaryIRTModel("3pl")
    theta, b, a, c = np.linspace(-4, 4, 33), 0.3, 1.7, 0.25
    p = c + (1 - c) * expit(a * (theta - b))
    np.testing.assert_allclose(m.mean(theta, b, a=a, c=c), p, rtol=1e-12)
    want = a ** 2 * (1 - p) / p * ((p - c) / (1 - c)) ** 2
    np.testing.assert_allclose(m.information(theta, b, a=a, c=c), want, rtol=1e-10)
    # information = E[score²] of the log-likelihood: Σ_y P(y)·(d/dθ log L(y))², by finite differences
    h = 1e-5
    score = {y: (m.log_likelihood(y, theta + h, b, a=a, c=c) - m.log_likelihood(y, theta - h, b, a=a, c=c)) / (2 * h)
             for y in (0.0, 1.0)}
    np.testing.assert_allclose(p * score[1.0] ** 2 + (1 - p) * score[0.0] ** 2, want, rtol=1e-6)
    # log-likelihood is log P / log(1 - P)
    np.testing.assert_allclose(m.log_likelihood(1.0, theta, b, a=a, c=c), np.log(p), rtol=1e-12)
    np.testing.assert_allclose(m.log_likelihood(0.0, theta, b, a=a, c=c), np.log1p(-p), rtol=1e-10)
    # 3PL information peaks at θ = b + log((1 + √(1 + 8c))/2)/a (Birnbaum), not at b
    fine = np.linspace(-2, 3, 200001)
    peak = fine[np.argmax(m.information(fine, b, a=a, c=c))]
    assert peak == pytest.approx(b + np.log((1 + np.sqrt(1 + 8 * c)) / 2) / a, abs=1e-4)


def test_2pl_with_equal_a_is_the_1pl_bernoulli_model():
    two, one = BinaryIRTModel("2pl"), BernoulliResponseModel(a=1.3)
    theta, b = np.linspace(-3, 3, 13)[:, None], np.array([-1.0, 0.0, 2.0])[None, :]
    np.testing.assert_allclose(two.information(theta, b, a=1.3, c=0.0), one.information(theta, b), rtol=1e-12)
    np.testing.assert_allclose(two.log_likelihood(1.0, theta, b, a=1.3), one.log_likelihood(1.0, theta, b), rtol=1e-12)
    # extreme abilities stay finite
    assert np.all(np.isfinite(two.log_likelihood(np.array([0.0, 1.0]), np.array([-60.0, 60.0]), 0.0, a=3.0)))


def test_missing_item_parameters_fail_loudly_and_scores_are_binary():
    m = BinaryIRTModel("2pl")
    with pytest.raises(TypeError, match="discriminations"):
        m.information(0.0, 0.0)
    with pytest.raises(TypeError, match="per item"):
        _ = m.discrimination
    with pytest.raises(ValueError, match="0 or 1"):
        m.validate_scores([1.0, 0.5])
    m.validate_scores([0.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="kind"):
        BinaryIRTModel("4pl")
    assert response_model_from_dict({"kind": "3pl"}) == BinaryIRTModel("3pl")


def test_bank_round_trip_and_checks(tmp_path):
    bank = binary_bank(40)
    back = ItemBank.load(bank.save(tmp_path / "b.json"))
    assert back.bank_id == bank.bank_id and back.model == BinaryIRTModel("3pl")
    np.testing.assert_allclose(back.a, bank.a, rtol=1e-9)
    np.testing.assert_allclose(back.c, 0.25)
    d = json.loads((tmp_path / "b.json").read_text())
    assert d["response_model"] == {"kind": "3pl"} and len(d["items"]["a"]) == 40
    assert back.discrimination == pytest.approx(float(np.mean(bank.a)))
    # the bank id covers a and c
    d2 = bank.to_dict()
    d2["items"]["a"][0] += 0.5
    assert ItemBank.from_dict(d2).bank_id != bank.bank_id
    # a 2pl file may leave c out
    two = binary_bank(10, kind="2pl").to_dict()
    del two["items"]["c"]
    assert np.all(ItemBank.from_dict(two).c == 0)
    bad = bank.to_dict()
    bad["items"]["a"][3] = -1.0
    with pytest.raises(BankError, match=r"items.a\[3\]"):
        ItemBank.from_dict(bad)
    bad = bank.to_dict()
    del bad["items"]["a"]
    with pytest.raises(BankError, match="items.a"):
        ItemBank.from_dict(bad)
    bad = binary_bank(10, kind="2pl").to_dict()
    bad["items"]["c"][2] = 0.2
    with pytest.raises(BankError, match="3pl"):
        ItemBank.from_dict(bad)


def test_selector_with_per_item_information_is_brute_force_max_information():
    bank = binary_bank(200, seed=3)
    sel = MaxInfoSelector(bank.b, information=bank.selection_information)
    rng = np.random.default_rng(1)
    mask = sel.new_mask()
    administered = np.zeros(bank.n_items, dtype=bool)
    for step in range(60):
        theta = float(rng.normal(0, 1.5))
        got = sel.select(theta, mask, step)
        want = select_max_information(bank.model, theta, bank.b, administered, **bank.item_params())
        assert got == want
        info = np.where(administered, -np.inf, bank.information(theta))
        top5 = np.lexsort((np.arange(bank.n_items), -info))[:5]
        np.testing.assert_array_equal(sel.candidates(theta, mask, step, 5), top5)
        mask[sel.positions(got)] = True
        administered[got] = True
    # the one-parameter window rule (nearest b) would pick differently on this bank
    near = MaxInfoSelector(bank.b)
    assert any(near.select(t, near.new_mask(), 0) != sel.select(t, sel.new_mask(), 0) for t in (-1.0, 0.0, 1.0))


def test_full_bank_posterior_and_cat_recover_theta():
    bank = binary_bank(600, seed=5)
    rng = np.random.default_rng(7)
    for theta in (-1.0, 0.4, 1.5):
        y = draw(bank, theta, np.arange(bank.n_items), rng)
        post = GridPosterior(bank.prior_mean)
        post.update_many(bank.model, bank.b, y, **bank.item_params())
        assert abs(post.mean - theta) < 3 * post.sd
        # SE ≈ 1/√(Σ I(θ)) (the posterior is near normal with 600 items)
        assert post.sd == pytest.approx(1 / np.sqrt(bank.information(theta).sum()), rel=0.15)
        # one item at a time gives the same posterior
        one = DispersionPosterior(bank.prior_mean)
        for i in range(bank.n_items):
            one.update(bank.model, bank.b[i], y[i], **bank.item_params(i))
        assert one.mean == pytest.approx(post.mean, abs=1e-9)
        fit = dispersion_fit(bank, np.arange(bank.n_items), y, theta)
        assert not fit.flagged and 0.8 < fit.dispersion < 1.2
    # adaptive tests: θ̂ within 2.5 SE of the truth for most of 30 simulated models
    hits = 0
    thetas = rng.normal(0, 1, 30)
    for j, theta in enumerate(thetas):
        t = AdaptiveTest(bank, se_target=0.35, min_items=10, max_items=150, seed=j)
        r = t.run(lambda i, th=theta: float(draw(bank, th, i, rng)))
        hits += abs(r.theta - theta) < 2.5 * r.se
        assert r.n_items <= 150
    assert hits >= 26


def test_ranker_orders_well_separated_models_on_a_3pl_bank():
    bank = binary_bank(500, seed=11)
    truth = {"low": -1.5, "mid": 0.0, "high": 1.5}
    rng = np.random.default_rng(3)
    r = AdaptiveRanker(bank, list(truth), n_init=10, n_max=200, seed=0)
    res = r.run(lambda m, i: float(draw(bank, truth[m], i, rng)))
    assert res.ranking == ["high", "mid", "low"]


def test_a_binary_bank_refuses_scores_other_than_0_and_1():
    bank = binary_bank(20)
    t = AdaptiveTest(bank, se_target=None, max_items=5, seed=0)
    i = t.next_item()
    with pytest.raises(ValueError, match="0 or 1 only"):
        t.record(i, 0.5)
    t.record(i, 1.0)
    assert t.result().n_items == 1


def test_one_parameter_banks_keep_their_file_and_id(tmp_path):
    rng = np.random.default_rng(0)
    one = ItemBank(item_ids=np.array(["x", "y", "z"], dtype=object), b=rng.normal(size=3),
                   model=BernoulliResponseModel(a=1.4), scaling="global", lo=0.0, hi=1.0,
                   input_tokens=1.0, output_tokens=1.0)
    d = one.to_dict()
    assert set(d["items"]) == {"id", "b", "input_tokens", "output_tokens"}  # no a/c columns
    assert d["response_model"] == {"kind": "bernoulli", "a": 1.4}
    back = ItemBank.load(one.save(tmp_path / "one.json"))
    assert back.bank_id == one.bank_id and back.a is None and back.item_params([0, 1]) == {}
    assert back.selection_information is None  # the nearest-b window selector, as before
    with pytest.raises(BankError, match="2PL/3PL"):
        ItemBank(item_ids=np.array(["x"], dtype=object), b=[0.0], model=BernoulliResponseModel(), scaling="global",
                 lo=0.0, hi=1.0, input_tokens=1.0, output_tokens=1.0, a=[1.0])

"""The parts that keep the numbers honest when the response model is wrong: the random share of
items, the per-model dispersion, the additive model error."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SIM_K, make_sim_bank, simulate_scores

from lm_eval_adaptive.engine.cat.adaptive_test import AdaptiveTest
from lm_eval_adaptive.engine.cat.estimation import DispersionPosterior, GridPosterior
from lm_eval_adaptive.engine.ranking.ranker import AdaptiveRanker
from lm_eval_adaptive.engine.cat.selection import MaxInfoSelector, RandomShareSelector


@pytest.fixture(scope="module")
def bank():
    return make_sim_bank(n_items=400, seed=3)


def _take(sel, mask, items):
    mask[sel.positions(np.asarray(items))] = True


def test_every_second_item_is_the_next_one_of_a_shared_random_permutation(bank):
    sel = RandomShareSelector(bank.b, share=0.5, seed=11)
    info = MaxInfoSelector(bank.b)
    perm = np.random.default_rng(11).permutation(bank.n_items)
    assert [sel.is_random_slot(k) for k in range(6)] == [False, True, False, True, False, True]
    # two models at different abilities: their random slots walk the same permutation
    for theta in (-1.0, 2.0):
        mask, got, random_items = sel.new_mask(), [], []
        for k in range(10):
            i = sel.select(theta, mask, k)
            if sel.is_random_slot(k):
                random_items.append(i)
            else:
                assert i == info.select(theta, mask, k)  # the other slots: maximum information
            _take(sel, mask, [i])
            got.append(i)
        expected = [int(p) for p in perm if p not in set(got) - set(random_items)][:5]
        assert random_items == expected
        assert len(set(got)) == 10


def test_candidates_are_the_next_slots_in_order(bank):
    sel = RandomShareSelector(bank.b, share=0.5, seed=2)
    mask = sel.new_mask()
    _take(sel, mask, [5, 6, 7])
    batch = sel.candidates(0.3, mask, 3, 4).tolist()
    one_by_one, m = [], mask.copy()
    for k in range(3, 7):
        i = sel.select(0.3, m, k)
        one_by_one.append(i)
        _take(sel, m, [i])
    assert batch == one_by_one


def test_share_zero_is_maximum_information_and_share_one_is_random_order(bank):
    mask = np.zeros(bank.n_items, dtype=bool)
    assert RandomShareSelector(bank.b, share=0.0).select(0.5, mask, 0) == MaxInfoSelector(bank.b).select(0.5, mask, 0)
    sel = RandomShareSelector(bank.b, share=1.0, seed=4)
    assert sel.select(0.5, sel.new_mask(), 0) == int(np.random.default_rng(4).permutation(bank.n_items)[0])
    with pytest.raises(ValueError, match="random share"):
        RandomShareSelector(bank.b, share=1.5)


def test_dispersion_is_about_one_when_the_model_holds_and_grows_with_extra_noise(bank):
    rng = np.random.default_rng(0)
    items = rng.choice(bank.n_items, 200, replace=False)
    b = bank.b[items]
    fits = DispersionPosterior(bank.prior_mean)
    fits.update_many(bank.model, b, simulate_scores(0.4, b, rng=rng))
    assert fits.dispersion == pytest.approx(1.0, abs=0.2)
    plain = GridPosterior(bank.prior_mean)
    # four times the bank's noise: φ ≈ 4 shrunk toward 1 by 10 pseudo-items out of 209
    noisy_y = simulate_scores(0.4, b, k=4 * SIM_K, rng=rng)
    noisy = DispersionPosterior(bank.prior_mean)
    noisy.update_many(bank.model, b, noisy_y)
    plain.update_many(bank.model, b, noisy_y)
    assert 2.5 < noisy.dispersion < 4.5
    assert noisy.mean == plain.mean  # θ̂ is the posterior mean, unchanged
    assert noisy.se == pytest.approx(plain.sd * np.sqrt(noisy.dispersion))
    # residuals smaller than the bank expects never narrow the SE
    quiet = DispersionPosterior(bank.prior_mean)
    quiet.update_many(bank.model, b, np.asarray(bank.model.mean(0.4, b)))
    assert quiet.dispersion == 1.0


def test_the_se_target_applies_to_what_items_can_reduce(bank):
    b = make_sim_bank(n_items=400, seed=3)
    b.set_model_error({"ability_sd": 0.25, "full_task_sd": 0.0, "ability_sd_misfit": 0.25,
                       "full_task_sd_misfit": 0.0, "runs": 50})
    rng = np.random.default_rng(1)
    test = AdaptiveTest(b, se_target=0.2, min_items=10, max_items=300, seed=0)
    res = test.run(lambda i: float(simulate_scores(0.2, b.b[i], rng=rng)))
    e = test.examinee
    assert res.stopped_because == "se_target" and e.n < 300
    assert e.measurement_se <= 0.2 < e.se  # the reported SE keeps the model error no item removes
    assert e.se == pytest.approx(np.hypot(e.measurement_se, 0.25))

"""AdaptiveTest (single-model CAT): stopping rules, recovery of θ, full-task estimate."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_sim_bank

from lm_eval_adaptive.engine.cat.adaptive_test import AdaptiveTest
from lm_eval_adaptive.engine.cat.full_task import full_task_estimate


def _score_fn(bank, theta, simulate, seed):
    rng = np.random.default_rng(seed)
    y = simulate(theta, bank.b, k=bank.k, rng=rng)  # one fixed realisation per item
    return lambda i: float(y[i]), y


def test_stops_on_se_target_after_min_items(sim_bank, simulate):
    fn, _ = _score_fn(sim_bank, 0.5, simulate, 1)
    t = AdaptiveTest(sim_bank, se_target=0.2, min_items=30, max_items=500)
    res = t.run(fn)
    assert res.stopped_because == "se_target"
    assert res.n_items == 30  # SE 0.2 is reached well before 30 items on this bank
    assert res.se <= 0.2
    assert t.done and t.next_item() is None

    t = AdaptiveTest(sim_bank, se_target=0.2, min_items=0, max_items=500)
    ses = []
    while (i := t.next_item()) is not None:
        t.record(i, fn(i))
        ses.append(t.examinee.se)
    assert t.stopped_because == "se_target"
    assert 3 <= len(ses) < 30
    assert ses[-1] <= 0.2 < ses[-2]  # stops at the first item that reaches the target


def test_stops_on_max_items(sim_bank, simulate):
    fn, _ = _score_fn(sim_bank, -0.7, simulate, 2)
    res = AdaptiveTest(sim_bank, se_target=None, min_items=0, max_items=17).run(fn)
    assert res.stopped_because == "max_items"
    assert res.n_items == 17 == len(set(res.items))
    res = AdaptiveTest(sim_bank, se_target=1e-4, min_items=5, max_items=40).run(fn)
    assert res.stopped_because == "max_items" and res.n_items == 40


@pytest.mark.parametrize("seed", range(5))
def test_stops_on_budget_never_overspends(sim_bank, simulate, seed):
    rng = np.random.default_rng(seed)
    costs = rng.uniform(0.001, 0.02, sim_bank.n_items)
    budget = float(rng.uniform(0.05, 0.5))
    fn, _ = _score_fn(sim_bank, float(rng.normal()), simulate, seed)
    t = AdaptiveTest(sim_bank, se_target=None, min_items=0, max_items=None, budget=budget,
                     item_costs=costs)
    res = t.run(fn)
    assert res.stopped_because == "budget"
    assert res.spent <= budget + 1e-12
    assert res.spent == pytest.approx(float(costs[res.items].sum()))
    # the item it would have given next did not fit
    nxt = t.peek()
    assert nxt >= 0 and res.spent + costs[nxt] > budget
    assert t.peek() == nxt  # peeking reserves nothing and is stable


def test_budget_needs_costs_and_some_rule(sim_bank):
    with pytest.raises(ValueError):
        AdaptiveTest(sim_bank, budget=1.0)
    with pytest.raises(ValueError):
        AdaptiveTest(sim_bank, se_target=None, max_items=None, budget=None)
    with pytest.raises(ValueError):
        AdaptiveTest(sim_bank, min_items=-1)


def test_stops_on_exhausted_bank(simulate):
    bank = make_sim_bank(n_items=12, seed=3)
    fn, _ = _score_fn(bank, 0.0, simulate, 0)
    t = AdaptiveTest(bank, se_target=1e-6, min_items=0, max_items=None)
    t.exclude([0, 1, 2, 3, 4])
    res = t.run(fn)
    assert res.stopped_because == "bank_exhausted"
    assert sorted(res.items) == list(range(5, 12))
    # a tiny bank given entirely: every item exactly once, then nothing more
    t = AdaptiveTest(bank, se_target=1e-6, min_items=0, max_items=10_000)
    res = t.run(fn)
    assert sorted(res.items) == list(range(12))
    assert res.stopped_because in ("max_items", "bank_exhausted")
    assert t.next_item() is None


def test_record_must_match_the_asked_item(sim_bank):
    t = AdaptiveTest(sim_bank, se_target=0.2, min_items=1)
    i = t.next_item()
    assert t.next_item() == i  # pending item is repeated until recorded
    with pytest.raises(ValueError):
        t.record((i + 1) % sim_bank.n_items, 0.5)
    t.record(i, 0.5)
    assert t.examinee.n == 1 and t.examinee.items == [i]


@pytest.mark.parametrize("theta", [-2.5, -1.0, 0.0, 0.8, 2.2])
def test_run_recovers_theta(sim_bank, simulate, theta):
    fn, _ = _score_fn(sim_bank, theta, simulate, int(100 * (theta + 5)))
    res = AdaptiveTest(sim_bank, se_target=0.15, min_items=10, max_items=200, seed=0).run(fn)
    assert res.stopped_because == "se_target"
    assert abs(res.theta - theta) < 3 * res.se
    assert res.se < 0.16
    assert len(set(res.items)) == res.n_items


def test_top_k_run_recovers_theta(sim_bank, simulate):
    fn, _ = _score_fn(sim_bank, 1.0, simulate, 42)
    res = AdaptiveTest(sim_bank, se_target=0.15, min_items=10, top_k=5, seed=1).run(fn)
    assert abs(res.theta - 1.0) < 3 * res.se
    assert len(set(res.items)) == res.n_items


def test_full_task_estimate_with_every_item_is_the_observed_mean(simulate):
    bank = make_sim_bank(n_items=40, seed=8)
    rng = np.random.default_rng(0)
    raw = simulate(0.3, bank.b, rng=rng)
    items = rng.permutation(bank.n_items)
    est = full_task_estimate(bank, items, raw[items], theta=0.3, se=0.2)
    assert est["estimate"] == pytest.approx(float(raw.mean()), abs=1e-12)
    assert est["lower"] == pytest.approx(est["estimate"], abs=1e-12)
    assert est["upper"] == pytest.approx(est["estimate"], abs=1e-12)
    assert est["items_observed"] == est["items_total"] == 40
    # with none administered: the model's prediction, and a real interval
    est0 = full_task_estimate(bank, [], [], theta=0.3, se=0.2)
    assert est0["estimate"] == pytest.approx(float(np.mean(bank.model.mean(0.3, bank.b))))
    assert est0["lower"] < est0["estimate"] < est0["upper"]


def test_full_task_estimate_interval_coverage(simulate):
    bank = make_sim_bank(n_items=300, seed=4)
    rng = np.random.default_rng(2024)
    hits, widths = 0, []
    for r in range(50):
        theta = float(rng.normal(0, 1.2))
        y = simulate(theta, bank.b, k=bank.k, rng=rng)  # lo=0, hi=1: raw = scaled
        truth = float(y.mean())
        t = AdaptiveTest(bank, se_target=0.25, min_items=15, max_items=60)
        res = t.run(lambda i: float(y[i]))
        est = full_task_estimate(bank, res.items, y[res.items], res.theta, res.se)
        assert est["lower"] <= est["estimate"] <= est["upper"]
        hits += est["lower"] <= truth <= est["upper"]
        widths.append(est["upper"] - est["lower"])
    assert hits / 50 >= 0.85
    assert np.median(widths) < 0.2  # informative, not trivially wide

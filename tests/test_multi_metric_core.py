"""One adaptive core: whatever a single-bank ranking run can do, a several-bank run can do.

MultiMetricRanker is AdaptiveRanker's core with a judgement per metric and joint examinees: with one
bank it gives the single ranker's run item for item; with several it ranks continuous, 2PL and 3PL
banks in any mix, and takes failures, blocking, charges, cancel/release, exclusions, stops, calls in
flight, the replay of its outcomes, the family-wise rule and a tie margin. MultiMetricTest stops
through the StoppingRule objects.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from conftest import make_sim_bank, simulate_scores

from lm_eval_adaptive.engine.ranking.allocation import adaptive_choice, stop_reason, warm_up_choice
from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.ranking.multi_metric_ranker import MultiMetricRanker
from lm_eval_adaptive.engine.cat.multi_metric_test import MultiMetricTest
from lm_eval_adaptive.engine.ranking.pairs.rules import FamilyWise, pair_rule_for
from lm_eval_adaptive.engine.ranking.pairs.judgement import OpenPairs, PairJudgement
from lm_eval_adaptive.engine.ranking.pairs.metric_judgement import MetricScaleJudgement
from lm_eval_adaptive.engine.ranking.ranker import AdaptiveRanker
from lm_eval_adaptive.engine.ranking.replay import ReplayError, ReplayEvent
from lm_eval_adaptive.engine.irt.response_model import BinaryIRTModel
from lm_eval_adaptive.engine.ranking.pairs.settle_policy import SettlePolicy
from lm_eval_adaptive.engine.evaluation.simulation import bank_scores
from lm_eval_adaptive.engine.cat.stopping import MaxItems, Rule, SETarget

THETAS = {"m0": 1.2, "m1": 0.4, "m2": -0.3, "m3": -1.1}


def binary_bank(n: int, seed: int, kind: str = "2pl", ids=None) -> ItemBank:
    rng = np.random.default_rng(seed)
    return ItemBank(item_ids=np.array(ids if ids is not None else [f"item{i:04d}" for i in range(n)], dtype=object),
                    b=rng.normal(0.0, 1.2, n), model=BinaryIRTModel(kind), scaling="global", lo=0.0, hi=1.0,
                    input_tokens=50.0, output_tokens=1.0, task="sim-task", metric=f"{kind}{seed}",
                    a=rng.lognormal(0.0, 0.4, n), c=np.full(n, 0.2 if kind == "3pl" else 0.0))


def scores_of(banks, thetas, seed):
    """metric -> model -> one simulated score per bank item (0/1 for binary banks)."""
    rng = np.random.default_rng(seed)
    return {k: {m: bank_scores(bank, t, rng) for m, t in thetas.items()} for k, bank in banks.items()}


def joint_scorer(r, ys):
    return lambda m, j: {k: float(ys[k][m][r.bank_item(k, j)]) for k in r.metrics}


@pytest.fixture(scope="module")
def cont():
    return make_sim_bank(n_items=300, k=0.15, seed=4)


# --------------------------------------------------------------------------- one core
@pytest.mark.parametrize("budgeted", [False, True])
def test_with_one_bank_the_joint_run_is_the_single_rankers_run(cont, budgeted):
    """The same warm-up, allocation, item choice and stop: the one-bank joint run gives every model the
    single ranker's items in its order, and the same estimates and spend."""
    ys = scores_of({"m": cont}, THETAS, 1)["m"]
    rng = np.random.default_rng(2)
    costs = {m: rng.uniform(0.001, 0.003, cont.n_items) for m in THETAS}
    kw = dict(n_init=5, n_max=60, seed=7, **({"item_costs": costs, "budget": 0.12} if budgeted else {}))
    single = AdaptiveRanker(cont, list(THETAS), **kw).run(lambda m, i: float(ys[m][i]))
    joint = MultiMetricRanker({"m": cont}, list(THETAS), **kw)
    res = joint.run(joint_scorer(joint, {"m": ys})).results["m"]
    assert res.item_log == single.item_log and sum(map(len, res.item_log.values())) > 60
    assert res.theta == single.theta and res.se == single.se
    assert res.stopped_because == single.stopped_because == ("budget" if budgeted else res.stopped_because)
    assert res.total_cost == pytest.approx(single.total_cost)
    assert res.ranking == single.ranking and res.ties == single.ties


def test_the_allocation_sums_each_metrics_gain_once_over_the_metrics_that_need_a_model():
    class E:
        def __init__(self, n):
            self.n = n

    never = (lambda j, p: False)

    def worth(gain):  # the θ scale's worth at n = 4 items, nothing in flight: m²/(n + 1)
        return lambda j, k: gain[j] ** 2 / (4 + k + 1)

    a = OpenPairs([0, 1, 2], [(0, 1)], worth([0.5, 0.4, 0.3]), never, "a")  # pair (0, 1) open under a
    b = OpenPairs([2, 1, 0], [(2, 1), (1, 0)], worth([0.2, 0.1, 0.6]), never, "b")  # (2, 1), (1, 0) open under b
    models = ["x", "y", "z"]
    ex = {m: E(4) for m in models}
    got, item, passed = adaptive_choice([a, b], models, ex, flight={}, blocked=set(), most=1, n_max=50,
                                        peek=lambda m, needs: 7, affordable=None,
                                        relative_costs={"x": 1.0, "y": 1.0, "z": 1.0})
    # x: 0.5² + 0.2² (a, b); y: 0.4² + 0.1² (a, and b once though in two of b's pairs); z: 0.6² (b)
    assert (got, item, passed) == ("z", 7, set())
    value = {"x": 0.25 + 0.04, "y": 0.16 + 0.01, "z": 0.36}
    assert max(value, key=value.get) == "z"
    # z over its n_max: the next best; every candidate passed over: the stop reason
    got, _, passed = adaptive_choice([a, b], models, {"x": E(4), "y": E(4), "z": E(50)}, flight={}, blocked=set(),
                                     most=1, n_max=50, peek=lambda m, needs: 7, affordable=None,
                                     relative_costs={"x": 1.0, "y": 1.0, "z": 1.0})
    assert got == "x" and passed == {"max_items"}
    got, _, passed = adaptive_choice([a, b], models, ex, flight={}, blocked=set(), most=1, n_max=50,
                                     peek=lambda m, needs: -1, affordable=None,
                                     relative_costs={"x": 1.0, "y": 1.0, "z": 1.0})
    assert got is None and stop_reason(passed) == "bank_exhausted"
    assert stop_reason({"pending", "budget"}) is None and stop_reason({"budget", "max_items"}) == "budget"
    m, item = warm_up_choice(models, {"x": E(2), "y": E(1), "z": E(1)}, 3, flight={}, blocked=set(), most=1,
                             peek=lambda m, needs: 3)
    assert (m, item) == ("y", 3)


def test_the_pair_status_seam_is_a_protocol_a_judgement_plugs_into(cont):
    """The ranker asks its judgement which pairs are open; a judgement that says none is the run's stop."""

    class NothingOpen(MetricScaleJudgement):
        def open_pairs(self, models, remaining=None):
            return super().open_pairs(models, remaining)._replace(pairs=[])

    r = AdaptiveRanker(cont, list(THETAS), n_init=3, seed=0)
    assert isinstance(r.judgements[0], MetricScaleJudgement) and isinstance(r.judgements[0], PairJudgement)
    ys = scores_of({"m": cont}, THETAS, 3)["m"]
    r = AdaptiveRanker(cont, list(THETAS), n_init=3, seed=0, judgement=NothingOpen)
    res = r.run(lambda m, i: float(ys[m][i]))
    assert res.stopped_because == "settled" and res.total_items == 3 * len(THETAS)
    two = MultiMetricRanker({"a": cont, "b": cont}, list(THETAS), n_init=3, seed=0, judgement=NothingOpen)
    assert [j.metric for j in two.judgements] == ["a", "b"]
    res = two.run(lambda m, j: {"a": float(ys[m][j]), "b": float(ys[m][j])})
    assert res.stopped_because == "settled" and res.generations == 3 * len(THETAS)


# --------------------------------------------------------------------------- bank kinds
@pytest.mark.parametrize("kinds", [("2pl", "2pl"), ("continuous", "2pl"), ("continuous", "3pl")])
def test_several_banks_of_any_kind_rank_jointly(cont, kinds):
    ids = [str(i) for i in cont.item_ids]
    banks = {}
    for j, kind in enumerate(kinds):
        banks[f"{kind}{j}"] = cont if kind == "continuous" else binary_bank(300, 10 + j, kind, ids=ids)
    thetas = {"high": 2.0, "mid": 0.0, "low": -2.0}
    ys = scores_of(banks, thetas, 5)
    r = MultiMetricRanker(banks, list(thetas), n_init=10, n_max=150, seed=0)
    res = r.run(joint_scorer(r, ys))
    for k in banks:
        assert res.results[k].ranking == ["high", "mid", "low"], (k, res.results[k].ranking)
        assert res.results[k].signature["joint_metrics"] == "+".join(banks)
    # every generation was recorded into every metric
    for m in thetas:
        n = r.examinees[m].n
        assert all(r.metric_examinees(k)[m].n == n for k in banks) and n >= 10
    assert res.generations == sum(res.items.values())


def test_a_binary_metric_refuses_a_score_that_is_not_0_or_1_and_nothing_changes(cont):
    ids = [str(i) for i in cont.item_ids]
    r = MultiMetricRanker({"c": cont, "b": binary_bank(300, 3, ids=ids)}, ["a", "b"], n_init=2, seed=0)
    req = r.ask()
    with pytest.raises(ValueError, match="0 or 1"):
        r.tell(req, {"c": 0.4, "b": 0.5})
    assert r.is_pending(req) and r.examinees[req.model].n == 0
    assert r.metric_examinees("c")[req.model].n == 0
    r.tell(req, {"c": 0.4, "b": 1.0})
    assert r.metric_examinees("b")[req.model].scores == [1.0]


# ------------------------------------------------------------------- what a live run does
@pytest.fixture(scope="module")
def two(cont):
    other = make_sim_bank(n_items=300, k=0.3, seed=9)
    return {"x": cont, "y": other}


def test_blocking_failures_charges_and_calls_in_flight(two):
    rng = np.random.default_rng(0)
    costs = {m: rng.uniform(0.001, 0.002, 300) for m in THETAS}
    r = MultiMetricRanker(two, list(THETAS), item_costs=costs, budget=1.0, n_init=3, seed=1, max_in_flight=2)
    asked = [r.ask() for _ in range(8)]
    assert all(q is not None for q in asked) and r.ask() is None  # two in flight per model
    assert {q.model for q in asked} == set(THETAS) and r.reserved == pytest.approx(sum(q.cost for q in asked))
    r.release(asked[0])  # never made: its item may be asked again
    assert not r.examinees[asked[0].model].is_taken(asked[0].item)
    r.cancel(asked[1])  # failed for good: the item stays used
    assert r.examinees[asked[1].model].is_taken(asked[1].item) and not r.is_pending(asked[1])
    r.block("m0")
    assert all(q is None or q.model != "m0" for q in [r.ask() for _ in range(3)])
    r.unblock_all()
    r.charge("m3", 0.01)  # a call lost in flight: every metric's spend counts it
    assert r.examinees["m3"].spent == pytest.approx(0.01)
    assert all(r.metric_examinees(k)["m3"].spent == pytest.approx(0.01) for k in two)
    r.fail("m2", "keeps failing")
    assert not any(k[0] == "m2" for k in r.pending)
    ys = scores_of(two, THETAS, 2)
    score = joint_scorer(r, ys)
    for req in list(r.pending.values()):
        r.tell(req, score(req.model, req.item), cost=0.001)
    while (req := r.ask()) is not None:
        r.tell(req, score(req.model, req.item))
    res = r.result()
    for k in two:
        assert "m2" not in res.results[k].ranking and res.results[k].failed == {"m2": "keeps failing"}
    assert r.spent <= 1.0 + 1e-9 and res.total_cost == pytest.approx(r.spent)
    r.exclude("m0", [0, 1])
    r.stop("budget")
    assert r.stopped_because == res.stopped_because or r.stopped_because == "budget"
    assert r.ask() is None


def test_a_budget_holds_with_the_mean_cost_reserved_as_the_single_ranker_does(two):
    rng = np.random.default_rng(3)
    costs = {m: rng.uniform(0.0005, 0.004, 300) for m in THETAS}
    close = {"m0": 0.0, "m1": 0.02, "m2": 0.04, "m3": 0.06}
    r = MultiMetricRanker(two, list(close), item_costs=costs, budget=0.15, n_init=5, seed=2)
    res = r.run(joint_scorer(r, scores_of(two, close, 4)))
    assert res.stopped_because == "budget" and res.total_cost <= 0.15 * (1 + 1e-12)
    mean = {m: float(np.mean(c)) for m, c in costs.items()}
    assert 0.15 - res.total_cost < max(mean.values()) * 1.0001  # nothing more fitted, the typical item counted


def run_logging(r, ys, rng=None):
    """Run to the end (``rng``: two in flight, told in random order); the outcomes as replay events. Some
    calls fail, and metric y cannot score some generations (decided by model and item)."""
    score = joint_scorer(r, ys)
    events, inflight = [], []
    while True:
        while (req := r.ask()) is not None:
            inflight.append(req)
            if rng is None:
                break
        if not inflight:
            return events
        req = inflight.pop(int(rng.integers(len(inflight))) if rng is not None else 0)
        k = 3 * req.item + int(req.model[1:])
        if k % 7 == 0:
            r.cancel(req)
            events.append(ReplayEvent.failure(req.model, req.item_id))
            continue
        y = score(req.model, req.item)
        if k % 5 == 0:
            y["y"] = None  # that metric could not score it
        r.tell(req, y, cost=0.001)
        events.append(ReplayEvent.score(req.model, req.item_id, y, 0.001))


def state(r):
    return {m: (e.items, e.scores, e.spent, e.taken().tobytes(),
                {k: (p.items, p.scores, p.theta, p.se) for k, p in e.parts.items()}) for m, e in r.examinees.items()}


def test_replay_then_continue_equals_the_uninterrupted_run(two):
    ys = scores_of(two, THETAS, 6)
    kw = dict(n_init=4, n_max=40, seed=5, pair_rules={k: pair_rule_for(b, 0.95, None, True) for k, b in two.items()})
    live = MultiMetricRanker(two, list(THETAS), **kw)
    events = run_logging(live, ys)
    want = live.result()
    assert len(events) > 40 and any(e.kind == "failure" for e in events)
    for n in (0, 9, len(events) // 2, len(events)):
        r = MultiMetricRanker(two, list(THETAS), **kw)
        stats = r.replay(events[:n])
        n_scores = sum(e.kind == "score" for e in events[:n])
        assert (stats.scores, stats.asked, stats.direct) == (n_scores, n_scores, 0)
        assert run_logging(r, ys) == events[n:]  # the same calls afterwards
        got = r.result()
        assert state(r) == state(live)
        for k in two:
            a, b = got.results[k], want.results[k]
            assert a.item_log == b.item_log and a.theta == b.theta and a.ties == b.ties
            assert a.signature["pair_rule"] == FamilyWise.name


def test_replay_of_calls_completed_out_of_order_and_bad_events(two):
    ys = scores_of(two, THETAS, 7)
    live = MultiMetricRanker(two, list(THETAS), n_init=4, n_max=30, seed=8, max_in_flight=2)
    events = run_logging(live, ys, rng=np.random.default_rng(1))
    r = MultiMetricRanker(two, list(THETAS), n_init=4, n_max=30, seed=8, max_in_flight=2)
    stats = r.replay(events)
    assert stats.direct > 0 and stats.asked + stats.direct == stats.scores
    assert state(r) == state(live)
    fresh = MultiMetricRanker(two, list(THETAS), seed=8)
    first = live.item_ids[0]
    for bad, match in [(ReplayEvent.score("m0", "nope", {"x": 0.5}), "not in the joint items"),
                       (ReplayEvent.score("m0", first, {"x": 1.5}), r"in \[0, 1\]"),
                       (ReplayEvent.score("m0", first, {"z": 0.5}), "unknown metrics"),
                       (ReplayEvent.score("m0", first, 0.5), "mapping")]:
        with pytest.raises(ReplayError, match=match):
            fresh.replay([bad])
    lost = MultiMetricRanker(two, list(THETAS), seed=8)
    item = lost.peek("m1")
    lost.replay([ReplayEvent.lost("m1", item, cost=0.01)])
    assert lost.examinees["m1"].is_excluded(item) and lost.spent == pytest.approx(0.01) and lost.peek("m1") != item


def test_a_tie_margin_per_metric_settles_a_near_tie_as_equivalent(two):
    near = {"a": 0.0, "b": 0.01, "c": 2.0}
    rules = {k: pair_rule_for(b, 0.95, 0.05, False) for k, b in two.items()}
    # equivalence within 0.05 on the metric scale takes ~100 items a model here, more than the default
    # stopping policy lets one pair cost (it stops as cost_to_settle): no policy, the run settles the tie
    no_policy = functools.partial(MetricScaleJudgement, policy=SettlePolicy(None, None))
    r = MultiMetricRanker(two, list(near), n_init=10, seed=3, pair_rules=rules, judgement=no_policy)
    res = r.run(joint_scorer(r, scores_of(two, near, 8)))
    assert res.stopped_because == "settled"
    for k in two:
        assert {frozenset(p) for p in res.results[k].equivalent} == {frozenset(("a", "b"))}
        assert res.results[k].signature["tie_margin"] == 0.05
        assert res.results[k].items["a"] + res.results[k].items["b"] < 2 * 300  # before a full run of a and b


# ------------------------------------------------------------------- the joint test's stops
def test_the_joint_test_stops_through_its_stopping_rules(two):
    t = MultiMetricTest(two, se_target=0.3, min_items=5, max_items=200, seed=1)
    kinds = [type(x) for x in t.rules]
    assert MaxItems in kinds and SETarget in kinds

    class AfterSeven(Rule):
        reason = "seven"

        def reached(self, examinee):
            return examinee.n >= 7

    t = MultiMetricTest(two, se_target=None, max_items=None, seed=1, rules=[AfterSeven()])
    rng = np.random.default_rng(0)
    while items := t.next_items(1):
        t.record(items[0], {k: float(simulate_scores(0.2, [b.b[t.bank_item(k, items[0])]], k=b.k, rng=rng)[0])
                            for k, b in two.items()})
    assert t.stopped_because == "seven" and t.n == 7
    res = t.result()
    assert set(res) == set(two) and all(x.n_items == 7 and math.isfinite(x.theta) for x in res.values())

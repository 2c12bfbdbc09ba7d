"""The engine's public API: it owns its state, checks what it is told, and its parts plug in.

Checked: scores and costs are refused at every entry (tell, record, record_many, replay,
charge, AdaptiveTest.record, Examinee.record); each public method of the ranker does what
the edge used to do by hand; state is read-only from outside; a custom Selector, ability
Estimator, pair rule and stopping rule are used when plugged in; results carry a
reproducibility signature; a replay through the public API equals the uninterrupted run.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import make_sim_bank, simulate_scores

import lm_eval_adaptive
from lm_eval_adaptive.engine.cat.adaptive_test import AdaptiveTest
from lm_eval_adaptive.engine.cat.examinee import Examinee
from lm_eval_adaptive.engine.cat.estimation import (
    AbilityEstimator,
    DispersionPosterior,
    EstimatorFactory,
    GridEAP,
    GridPosterior,
)
from lm_eval_adaptive.engine.ranking.pairs.rules import OrderConfidence, PairRule, PairStatus
from lm_eval_adaptive.engine.ranking.multi_metric_ranker import MultiMetricRanker
from lm_eval_adaptive.engine.ranking.ranker import STOP_REASONS, AdaptiveRanker
from lm_eval_adaptive.engine.ranking.replay import ReplayError, ReplayEvent
from lm_eval_adaptive.engine.cat.selection import MaxInfoSelector, Selector
from lm_eval_adaptive.engine.cat.stopping import Rule, StoppingRule
from lm_eval_adaptive.errors import BankError

THETAS = {"m0": -0.6, "m1": 0.0, "m2": 0.4, "m3": 1.5}
BAD_SCORES = [math.nan, math.inf, -math.inf, 1.5, -0.1, 1 + 1e-9, "0.5", None, True, [0.5]]
BAD_COSTS = [-0.01, math.nan, math.inf, "1", True]


@pytest.fixture(scope="module")
def bank():
    return make_sim_bank(n_items=250, seed=5)


@pytest.fixture(scope="module")
def world(bank):
    rng = np.random.default_rng(9)
    Y = {m: simulate_scores(t, bank.b, k=bank.k, rng=rng) for m, t in THETAS.items()}
    scale = {"m0": 1.0, "m1": 3.0, "m2": 0.5, "m3": 2.0}
    costs = {m: scale[m] * rng.uniform(0.001, 0.003, bank.n_items) for m in THETAS}
    return Y, costs


def make(bank, world, **kw):
    _, costs = world
    opts = dict(item_costs=costs, budget=0.6, n_init=5, n_max=60, confidence=0.95, top_k=3, seed=11)
    opts.update(kw)
    return AdaptiveRanker(bank, list(THETAS), **opts)


def state(r):
    return {m: (e.items, e.scores, e.theta, e.se, e.spent, e.info_at_selection, e.taken().tobytes())
            for m, e in r.examinees.items()}


# ----------------------------------------------------------------------------- checks
@pytest.mark.parametrize("y", BAD_SCORES, ids=repr)
def test_tell_refuses_a_bad_score_naming_model_item_and_value(bank, world, y):
    r = make(bank, world)
    req = r.ask()
    before = state(r)
    with pytest.raises(ValueError) as err:
        r.tell(req, y)
    msg = str(err.value)
    assert repr(req.model) in msg and repr(req.item_id) in msg and repr(y) in msg
    assert r.is_pending(req) and state(r) == before  # nothing changed: the request can still be told
    r.tell(req, 0.5)
    assert r.examinees[req.model].n == 1


@pytest.mark.parametrize("cost", BAD_COSTS, ids=repr)
def test_tell_refuses_a_bad_cost(bank, world, cost):
    r = make(bank, world)
    req = r.ask()
    with pytest.raises(ValueError, match="cost"):
        r.tell(req, 0.5, cost=cost)
    assert r.is_pending(req) and r.spent == 0
    r.tell(req, 0.5, cost=0)  # free is fine
    assert r.spent == 0


def test_a_nan_score_stops_a_run_instead_of_looping(bank, world):
    r = make(bank, world, budget=None, item_costs=None)
    with pytest.raises(ValueError, match="nan"):
        r.run(lambda m, i: math.nan)
    with pytest.raises(ValueError, match="1.2"):
        make(bank, world).run(lambda m, i: 1.2)  # out of range used to drive θ̂ to the grid's edge


@pytest.mark.parametrize("y", [math.nan, math.inf, 2.0, -1.0, "x"], ids=repr)
def test_every_record_path_refuses_a_bad_score(bank, world, y):
    r = make(bank, world)
    with pytest.raises(ValueError, match="item0003"):
        r.record("m1", 3, y)
    with pytest.raises(ValueError, match="'m1'"):
        r.record_many("m1", [3, 4, 5], [0.5, y, 0.5])
    assert r.examinees["m1"].n == 0 and not r.examinees["m1"].is_taken(3)
    e = Examinee(bank, MaxInfoSelector(bank.b), "solo")
    with pytest.raises(ValueError, match="'solo', item 'item0003'"):
        e.record(3, y)
    assert e.n == 0 and e.n_taken == 0
    t = AdaptiveTest(bank, se_target=0.3, min_items=1, name="single")
    i = t.next_item()
    with pytest.raises(ValueError, match="'single'"):
        t.record(i, y)
    assert t.pending == {i}  # still waiting for a good score
    t.record(i, 0.5)
    assert t.examinee.n == 1


@pytest.mark.parametrize("cost", BAD_COSTS, ids=repr)
def test_every_record_path_refuses_a_bad_cost(bank, world, cost):
    r = make(bank, world)
    with pytest.raises(ValueError, match="cost"):
        r.record("m1", 3, 0.5, cost=cost)
    with pytest.raises(ValueError, match="cost"):
        r.record_many("m1", [3, 4], [0.5, 0.5], costs=[0.1, cost])
    with pytest.raises(ValueError, match="cost"):
        r.charge("m1", cost)
    with pytest.raises(ValueError):
        r.charge("m1", None)
    t = AdaptiveTest(bank, se_target=0.3, min_items=1)
    i = t.next_item()
    with pytest.raises(ValueError, match="cost"):
        t.record(i, 0.5, cost=cost)
    assert r.spent == 0 and r.examinees["m1"].n == 0


def test_item_costs_must_be_finite_and_non_negative(bank):
    bad = np.full(bank.n_items, 0.01)
    bad[7] = -1
    with pytest.raises(ValueError, match="item_costs"):
        AdaptiveRanker(bank, ["a", "b"], item_costs={"a": bad, "b": np.abs(bad)})
    bad[7] = math.nan
    with pytest.raises(ValueError, match="item_costs"):
        AdaptiveRanker(bank, ["a", "b"], item_costs={"a": bad, "b": np.ones(bank.n_items)})


# ---------------------------------------------------------------------- public methods
def test_state_is_read_only_from_outside(bank, world):
    r = make(bank, world)
    req = r.ask()
    for name, value in [("stopped_because", "budget"), ("pending", {}), ("blocked", set()), ("failed", {}),
                        ("examinees", {}), ("budget", 1.0), ("n_max", 3), ("confidence", 0.9), ("models", [])]:
        with pytest.raises(AttributeError):
            setattr(r, name, value)
    with pytest.raises(TypeError):
        r.pending[("m0", 1)] = req  # a read-only view
    with pytest.raises(TypeError):
        r.examinees["m0"] = None
    e = r.examinees[req.model]
    for name in ("spent", "items", "scores", "theta", "se", "n_taken"):
        with pytest.raises(AttributeError):
            setattr(e, name, 0)
    e.items.append(123)  # a copy: the examinee is not changed
    assert e.items == []
    assert r.is_pending(req) and list(r.pending) == [(req.model, req.item)]


def test_block_unblock(bank, world):
    r = make(bank, world, budget=None)
    r.block("m0")
    asked = [r.ask() for _ in range(3)]
    assert [q.model for q in asked] == ["m1", "m2", "m3"] and r.blocked == {"m0"}
    assert r.ask() is None and not r.finished  # only m0 could be asked: waiting
    r.unblock("m0")
    assert r.ask().model == "m0"
    r.block("m1")
    r.block("m2")
    r.unblock_all()
    assert r.blocked == frozenset()
    with pytest.raises(ValueError, match="unknown model"):
        r.block("zz")


def test_charge_counts_against_the_budget(bank, world):
    r = make(bank, world, budget=0.05)
    r.charge("m2", 0.0499)
    assert r.spent == pytest.approx(0.0499) and r.examinees["m2"].spent == pytest.approx(0.0499)
    assert r.ask() is None and r.stopped_because == "budget"  # nothing more fits
    assert r.result().cost["m2"] == pytest.approx(0.0499)


def test_stop_takes_only_known_reasons_and_keeps_the_first(bank, world):
    r = make(bank, world)
    with pytest.raises(ValueError, match="unknown stop reason"):
        r.stop("bored")
    assert not r.finished
    r.stop("failed")
    r.stop("budget")
    assert r.finished and r.stopped_because == "failed" and r.ask() is None
    assert r.result().stopped_because == "failed"
    assert set(STOP_REASONS) >= {"settled", "budget", "max_items", "bank_exhausted", "failed"}


def test_exclude_by_id_or_index(bank, world):
    r = make(bank, world, top_k=1, budget=None, item_costs=None)
    first = r.peek("m0")
    assert r.peek("m0") == first  # stable, reserves nothing
    r.exclude("m0", [first])
    second = r.peek("m0")
    assert second != first
    r.exclude("m0", [str(bank.item_ids[second])])
    third = r.peek("m0")
    assert third not in (first, second)
    assert r.examinees["m0"].is_excluded(first) and r.examinees["m0"].is_excluded(second)
    req = r.ask()
    assert (req.model, req.item) == ("m0", third)
    with pytest.raises(BankError):
        r.exclude("m0", ["no-such-item"])
    with pytest.raises(ValueError, match="outside the bank"):
        r.exclude("m0", [bank.n_items])
    with pytest.raises(ValueError, match="excluded"):
        r.record("m0", first, 0.5)


def test_record_administers_directly(bank, world):
    r = make(bank, world)
    r.record("m1", "item0010", 0.7, cost=0.004)
    r.record("m1", 11, 0.6)
    e = r.examinees["m1"]
    _, costs = world
    assert e.items == [10, 11] and e.scores == [0.7, 0.6]
    assert e.spent == pytest.approx(0.004 + costs["m1"][11])
    assert e.is_scored(10) and e.is_taken(11)
    with pytest.raises(ValueError, match="already scored"):
        r.record("m1", 10, 0.5)
    req = r.ask()
    with pytest.raises(ValueError, match="in flight"):
        r.record(req.model, req.item, 0.5)
    with pytest.raises(ValueError, match="unknown model"):
        r.record("zz", 1, 0.5)


def test_record_many_is_one_vectorised_update(bank, world):
    r = make(bank, world)
    items = np.arange(20, 60)
    y = np.clip(np.linspace(0.1, 0.9, items.size), 0, 1)
    r.record_many("m2", items, y, costs=np.zeros(items.size))
    e = r.examinees["m2"]
    ref = DispersionPosterior(bank.prior_mean)
    ref.update_many(bank.model, bank.b[items], y)
    assert (e.theta, e.se) == (ref.mean, ref.se)
    one = DispersionPosterior(bank.prior_mean)  # the same as one update per item
    for b, s in zip(bank.b[items], y):
        one.update(bank.model, b, s)
    assert one.mean == pytest.approx(ref.mean, abs=1e-9) and one.se == pytest.approx(ref.se, rel=1e-9)
    assert e.items == items.tolist() and e.n_taken == items.size and e.spent == 0
    assert all(math.isnan(v) for v in e.info_at_selection)
    with pytest.raises(ValueError, match="twice"):
        r.record_many("m3", [1, 1], [0.5, 0.5])
    with pytest.raises(ValueError, match="already scored"):
        r.record_many("m2", [19, 20], [0.5, 0.5])
    with pytest.raises(ValueError, match="2 items but 1 scores"):
        r.record_many("m3", [1, 2], [0.5])
    assert r.examinees["m3"].n == 0


def test_release_gives_the_item_back(bank, world):
    r = make(bank, world, top_k=1)
    req = r.ask()
    e = r.examinees[req.model]
    assert e.is_taken(req.item) and r.is_pending(req)
    r.release(req)
    assert not e.is_taken(req.item) and not r.is_pending(req)
    assert r.ask() == req  # asked again
    r.tell(req, 0.5)
    with pytest.raises(ValueError, match="already scored"):
        e.unreserve(req.item)


# ----------------------------------------------------------------------- custom parts
class FirstFreeSelector:
    """Bank order, lowest untaken index first (a toy, to see that the selector is used)."""

    name = "first-free"

    def __init__(self, n):
        self.n = n

    def new_mask(self):
        return np.zeros(self.n, dtype=bool)

    def positions(self, items):
        return items

    def candidates(self, theta, mask, n_used, k):
        return np.flatnonzero(~mask)[:k]

    def select(self, theta, mask, n_used, rng=None):
        free = np.flatnonzero(~mask)
        return int(free[0]) if free.size else -1


class MeanScore:
    """θ̂ = the bank's median b + logit(mean score); SE = 1/√(n+1) (a toy estimator)."""

    def __init__(self, center):
        self.center, self.total, self.n = center, 0.0, 0

    @property
    def theta(self):
        m = min(max((self.total + 0.5) / (self.n + 1), 1e-3), 1 - 1e-3)
        return self.center + math.log(m / (1 - m))

    @property
    def se(self):
        return 1 / math.sqrt(self.n + 1)

    def update(self, model, b, y):
        self.total += float(y)
        self.n += 1

    def update_many(self, model, b, y):
        self.total += float(np.sum(y))
        self.n += int(np.size(y))


class MeanScoreFactory:
    name = "mean-score"

    def __init__(self):
        self.built = 0

    def __call__(self, bank):
        self.built += 1
        return MeanScore(bank.prior_mean)


class Always:
    """A pair rule with a fixed answer; counts its calls."""

    def __init__(self, status):
        self.status, self.calls, self.name = status, 0, f"always-{PairStatus(status).name.lower()}"

    def judge(self, theta_a, se_a, theta_b, se_b):
        self.calls += 1
        return np.full(np.shape(theta_a), int(self.status))


def test_the_protocols_describe_the_default_parts(bank):
    assert isinstance(MaxInfoSelector(bank.b), Selector) and isinstance(FirstFreeSelector(3), Selector)
    assert isinstance(GridEAP(), EstimatorFactory) and isinstance(MeanScoreFactory(), EstimatorFactory)
    assert isinstance(GridPosterior(), AbilityEstimator) and isinstance(MeanScore(0.0), AbilityEstimator)
    assert isinstance(OrderConfidence(0.9), PairRule) and isinstance(Always(PairStatus.OPEN), PairRule)
    assert isinstance(Rule(), StoppingRule)


def test_a_custom_selector_is_used(bank, world):
    Y, _ = world
    sel = FirstFreeSelector(bank.n_items)
    r = AdaptiveRanker(bank, ["m0", "m3"], n_init=4, n_max=12, seed=0, selector=sel)
    res = r.run(lambda m, i: float(Y[m][i]))
    for m in ("m0", "m3"):
        assert r.examinees[m].items == list(range(res.items[m]))
    assert res.signature["selector"] == "first-free" and res.signature["top_k"] is None
    t = AdaptiveTest(bank, se_target=None, max_items=7, selector=sel)
    assert t.run(lambda i: 0.5).items == list(range(7))
    assert t.next_items(3) == []
    t = AdaptiveTest(bank, se_target=None, max_items=7, selector=sel)
    assert t.next_items(3) == [0, 1, 2]  # several at once: the selector's candidates


def test_a_custom_estimator_is_used(bank, world):
    Y, _ = world
    factory = MeanScoreFactory()
    r = AdaptiveRanker(bank, list(THETAS), n_init=3, n_max=30, seed=0, estimator=factory)
    assert factory.built == len(THETAS)
    res = r.run(lambda m, i: float(Y[m][i]))
    for m in THETAS:
        e = r.examinees[m]
        want = MeanScore(bank.prior_mean)
        want.update_many(bank.model, bank.b[e.items], np.array(e.scores))
        assert res.theta[m] == pytest.approx(want.theta) and res.se[m] == pytest.approx(1 / math.sqrt(e.n + 1))
    assert res.signature["estimator"] == "mean-score"
    t = AdaptiveTest(bank, se_target=0.25, min_items=0, max_items=None, estimator=factory)
    out = t.run(lambda i: 0.5)
    assert out.n_items == 15 and out.stopped_because == "se_target"  # 1/√16 = 0.25
    assert out.signature["estimator"] == "mean-score"
    # the default factory with another prior is named with it
    assert AdaptiveRanker(bank, ["a", "b"], estimator=GridEAP(prior_sd=1.0)).result().signature["estimator"] == \
        "grid-eap(prior_sd=1.0)"


def test_a_pair_rule_of_another_kind_is_refused_by_the_one_judgement(bank):
    # a custom rule decides pairs from θ̂ and SE: the ranking judges pairs on the full-task metric's scale only
    for status in (PairStatus.ORDERED, PairStatus.OPEN):
        with pytest.raises(ValueError, match="full-task metric's scale.*Always"):
            AdaptiveRanker(bank, list(THETAS), n_init=4, seed=0, pair_rule=Always(status))
    with pytest.raises(ValueError, match="Always"):
        MultiMetricRanker({"m": bank}, list(THETAS), pair_rules={"m": Always(PairStatus.OPEN)})
    # the default rule is METHOD.md §4's, at the ranker's γ (the metric scale's test at that γ)
    r = AdaptiveRanker(bank, ["a", "b"], confidence=0.9)
    assert isinstance(r.pair_rule, OrderConfidence) and r.pair_rule.upper == pytest.approx(0.95) == r.upper
    assert r.judgements[0].confidence == 0.9 and r.judgements[0].name == "metric-scale"
    codes = OrderConfidence(0.9).judge(np.array([1.0, 0.1, 0.0]), np.array([0.3, 0.3, 0.0]),
                                       np.array([0.0, 0.0, 0.0]), np.array([0.3, 0.3, 0.0]))
    assert codes.tolist() == [PairStatus.ORDERED, PairStatus.OPEN, PairStatus.OPEN]


def test_a_custom_stopping_rule_ends_a_single_model_test(bank):
    class FirstPerfect(Rule):
        reason = "perfect"

        def reached(self, examinee):
            return bool(examinee.scores) and examinee.scores[-1] == 1.0

    ys = iter([0.2, 0.4, 1.0, 0.5, 0.5])
    t = AdaptiveTest(bank, se_target=None, max_items=None, rules=[FirstPerfect()])
    res = t.run(lambda i: next(ys))
    assert res.stopped_because == "perfect" and res.n_items == 3
    assert res.signature["stop"] == ["bank_exhausted", f"max_items={bank.n_items}", "perfect"]
    assert [r.reason for r in t.rules] == ["bank_exhausted", "max_items", "perfect"]


# ------------------------------------------------------------------------ signatures
def test_results_carry_a_reproducibility_signature(bank, world):
    Y, _ = world
    r = make(bank, world, seed=7)
    res = r.run(lambda m, i: float(Y[m][i]))
    sig = res.signature
    assert sig == r.signature()
    assert sig["bank"] == bank.bank_id and sig["confidence"] == 0.95 and sig["n_init"] == 5
    assert sig["n_max"] == 60 and sig["budget"] == 0.6 and sig["top_k"] == 3 and sig["seed"] == 7
    assert sig["selector"] == "max-info+random(share=0.5,seed=7)" and sig["estimator"] == "grid-eap+dispersion"
    assert "futility" not in sig  # the θ-scale judgement's stop, retired with it
    assert sig["pair_rule"] == "order-confidence"
    assert sig["version"] == lm_eval_adaptive.__version__ and sig["numpy"] == np.__version__
    line = res.signature_string
    assert "\n" not in line and line.startswith(f"bank:{bank.bank_id}|") and "|seed:7|" in line
    assert line.endswith(f"|version:{lm_eval_adaptive.__version__}|numpy:{np.__version__}")
    d = res.to_dict()
    assert d["signature"] == sig and d["signature_string"] == line
    again = make(bank, world, seed=7).run(lambda m, i: float(Y[m][i]))
    assert again.signature_string == line and again.item_log == res.item_log  # same signature, same run
    assert make(bank, world, seed=8).result().signature["seed"] == 8
    t = AdaptiveTest(bank, se_target=0.3, min_items=2, budget=1.0, item_costs=np.full(bank.n_items, 0.01), seed=3)
    tres = t.run(lambda i: 0.5)
    ts = tres.signature
    assert ts["bank"] == bank.bank_id and ts["seed"] == 3 and ts["se_target"] == 0.3 and ts["budget"] == 1.0
    assert ts["stop"] == ["bank_exhausted", "max_items=250", "se_target=0.3/min_items=2", "budget=1.0"]
    assert tres.to_dict()["signature_string"] == tres.signature_string


# ---------------------------------------------------------------------------- replay
def fails(model, item):
    return (item * 7 + list(THETAS).index(model)) % 23 == 0


def run_logging(r, Y, costs, rng=None):
    """Run to the end, one request at a time (``rng``: several in flight, told in random order);
    the outcomes as replay events, in the order they happened."""
    events, inflight = [], []
    while True:
        while (req := r.ask()) is not None:
            inflight.append(req)
            if rng is None:
                break
        if not inflight:
            return events
        req = inflight.pop(int(rng.integers(len(inflight))) if rng is not None else 0)
        if fails(req.model, req.item):
            r.cancel(req)
            events.append(ReplayEvent.failure(req.model, req.item_id))
            continue
        y, cost = float(Y[req.model][req.item]), 0.9 * float(costs[req.model][req.item])
        r.tell(req, y, cost=cost)
        events.append(ReplayEvent.score(req.model, req.item_id, y, cost))


@pytest.mark.parametrize("top_k", [1, 3])
def test_replay_then_continue_equals_the_uninterrupted_run(bank, world, top_k):
    Y, costs = world
    live = make(bank, world, top_k=top_k)
    events = run_logging(live, Y, costs)
    want = live.result()
    assert len(events) > 60 and any(e.kind == "failure" for e in events)
    for n in sorted({0, 1, 19, 20, 21, len(events) // 2, len(events) - 1, len(events)}):
        r = make(bank, world, top_k=top_k)
        stats = r.replay(events[:n])
        n_scores = sum(e.kind == "score" for e in events[:n])
        assert (stats.scores, stats.asked, stats.direct, stats.failures) == (n_scores, n_scores, 0, n - n_scores)
        assert run_logging(r, Y, costs) == events[n:]  # the same calls afterwards
        got = r.result()
        assert got.ranking == want.ranking and got.item_log == want.item_log
        assert got.theta == want.theta and got.se == want.se and got.cost == want.cost  # bit for bit
        assert got.stopped_because == want.stopped_because and got.signature == want.signature
        assert state(r) == state(live)


def test_replay_of_calls_completed_out_of_order(bank, world):
    """top_k = 1, several requests in flight told in random order: each model ends where it was."""
    Y, costs = world
    live = make(bank, world, top_k=1, max_in_flight=2)
    events = run_logging(live, Y, costs, rng=np.random.default_rng(4))
    direct = 0
    for n in sorted({5, 20, len(events) // 2, len(events)}):
        r = make(bank, world, top_k=1, max_in_flight=2)
        stats = r.replay(events[:n])
        direct += stats.direct
        assert stats.asked + stats.direct == stats.scores and not r.pending
        for m, e in r.examinees.items():
            done = [(ev.item, ev.y) for ev in events[:n] if ev.kind == "score" and ev.model == m]
            assert sorted(zip(e.items, e.scores)) == sorted((int(bank.index_of([i])[0]), y) for i, y in done)
    assert direct > 0
    assert (r.result().theta, r.spent) == (live.result().theta, live.spent)


def test_replay_refuses_events_that_do_not_fit(bank, world):
    r = make(bank, world)
    ok = ReplayEvent.score("m0", "item0001", 0.5)
    for bad, match in [(ReplayEvent.score("zz", "item0001", 0.5), "model 'zz'"),
                       (ReplayEvent.score("m0", "nope", 0.5), "item 'nope' is not in the bank"),
                       (ReplayEvent.score("m0", "item0002", math.nan), "scaled score"),
                       (ReplayEvent.score("m0", "item0002", 0.5, cost=-1.0), "cost"),
                       (ReplayEvent.score("m0", "item0001", 0.5), "already given")]:
        with pytest.raises(ReplayError, match=match) as err:
            make(bank, world).replay([ok, bad])
        assert err.value.index == 1
    with pytest.raises(ValueError, match="kind"):
        ReplayEvent("oops", "m0", "item0001")
    r.ask()
    with pytest.raises(ValueError, match="in flight"):
        r.replay([ok])


def test_replay_of_a_call_lost_in_flight(bank, world):
    r = make(bank, world, top_k=1)
    item = r.peek("m2")
    stats = r.replay([ReplayEvent.lost("m2", int(item), cost=0.01)])
    e = r.examinees["m2"]
    assert stats.lost == 1 and e.is_excluded(item) and e.spent == pytest.approx(0.01) and e.n == 0
    assert r.peek("m2") != item

"""AdaptiveRanker (METHOD.md §4, §8): stopping, budget, warm-up, allocation, ask/tell, pairwise.

The ranker judges pairs on the full-task metric's scale (its one judgement); ``NO_POLICY`` is that
judgement without a stopping policy."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from conftest import make_sim_bank

from lm_eval_adaptive.engine.ranking.ranker import STOP_REASONS, AdaptiveRanker
from lm_eval_adaptive.engine.ranking.ranker_state import Request
from lm_eval_adaptive.engine.ranking.pairs.metric_judgement import MetricScaleJudgement
from lm_eval_adaptive.engine.ranking.pairs.settle_policy import SettlePolicy

#: the metric-scale judgement with no stopping policy: a run buys until its pairs settle or a cap binds
NO_POLICY = functools.partial(MetricScaleJudgement, policy=SettlePolicy(None, None))


@pytest.fixture(scope="module")
def bank():
    return make_sim_bank(n_items=300, seed=1)


def scorer(bank, thetas: dict, simulate, seed=0):
    """score(model, item) from one fixed simulated realisation per model."""
    rng = np.random.default_rng(seed)
    ys = {m: simulate(t, bank.b, k=bank.k, rng=rng) for m, t in thetas.items()}
    return lambda m, i: float(ys[m][i])


def drive(ranker, score):
    """Run ask/tell to the end, returning every request in order."""
    log = []
    while (req := ranker.ask()) is not None:
        log.append(req)
        ranker.tell(req, score(req.model, req.item))
    return log


def test_well_separated_models_settle_in_order(bank, simulate):
    thetas = {"low": -2.0, "high": 2.0, "mid": 0.0}
    r = AdaptiveRanker(bank, list(thetas), n_init=10, confidence=0.95, seed=0)
    res = r.run(scorer(bank, thetas, simulate, 1))
    assert res.stopped_because == "settled"
    assert res.ranking == ["high", "mid", "low"]
    assert res.ties == [] and res.tie_groups == []
    assert all(p > 0.975 for p in res.adjacent_confidence)
    # separated by 2 logits, the warm-up alone almost settles it: few items in all
    assert res.total_items < 60
    assert res.theta["high"] > res.theta["mid"] > res.theta["low"]
    d = res.to_dict()
    assert [row["model"] for row in d["ranking"]] == res.ranking
    assert d["stopped_because"] == "settled"


def test_identical_models_are_never_ordered_and_cost_a_stated_price_on_the_metric_scale(bank, simulate):
    """The very same scores for every model: no pair is ordered; with no tie margin none can be settled as
    equivalent either, so each stays unresolved with a cost to settle, and the stopping policy ends the run
    on that cost (never "inseparable")."""
    y = simulate(0.4, bank.b, k=bank.k, rng=np.random.default_rng(3))
    same = lambda m, i: float(y[i])  # noqa: E731 - the very same scores for every model
    models = ["a", "b", "c"]
    res = AdaptiveRanker(bank, models, n_init=5, n_max=40, seed=0).run(same)
    assert res.stopped_because == "cost_to_settle" and not res.inseparable
    assert {p["outcome"] for p in res.pairs} == {"unresolved"}
    assert all(p["beyond_policy"] and 0 < p["items_to_settle"] <= 3 * bank.n_items for p in res.pairs)
    assert res.tie_groups == [] and all(r == [1, 3] for r in res.rank_range.values())


def test_identical_models_are_reported_as_ties(bank, simulate):
    y = simulate(0.4, bank.b, k=bank.k, rng=np.random.default_rng(3))
    same = lambda m, i: float(y[i])  # noqa: E731 - the very same scores for every model
    models = ["a", "b", "c"]
    # no stopping policy: the pairs stay unresolved (a zero difference is never ordered) until a cap binds
    every = {frozenset(p) for p in (("a", "b"), ("a", "c"), ("b", "c"))}
    res = AdaptiveRanker(bank, models, n_init=5, n_max=40, seed=0, judgement=NO_POLICY).run(same)
    assert res.stopped_because == "max_items"
    assert all(n == 40 for n in res.items.values())
    assert {frozenset(p) for p in res.ties} == every and {p["outcome"] for p in res.pairs} == {"unresolved"}
    assert all(r == [1, 3] for r in res.rank_range.values())
    costs = {m: np.full(bank.n_items, 0.01) for m in models}
    res = AdaptiveRanker(bank, models, item_costs=costs, budget=0.6, n_init=5, seed=0,
                         judgement=NO_POLICY).run(same)
    assert res.stopped_because == "budget"
    assert res.total_cost <= 0.6 + 1e-12
    assert {frozenset(p) for p in res.ties} == every


def test_budget_is_never_exceeded(bank, simulate):
    rng = np.random.default_rng(77)
    reasons = set()
    for trial in range(30):
        n_models = int(rng.integers(2, 6))
        models = [f"m{j}" for j in range(n_models)]
        thetas = {m: float(rng.normal(0, 0.6)) for m in models}
        scale = {m: float(rng.choice([0.1, 1.0, 3.0, 10.0])) for m in models}
        costs = {m: scale[m] * rng.uniform(0.0005, 0.004, bank.n_items) for m in models}
        budget = float(rng.uniform(0.0, 1.5))
        r = AdaptiveRanker(bank, models, item_costs=costs, budget=budget,
                           n_init=int(rng.integers(1, 12)), confidence=float(rng.uniform(0.6, 0.99)),
                           n_max=int(rng.integers(5, 120)), top_k=int(rng.integers(1, 4)), seed=trial)
        score = scorer(bank, thetas, simulate, trial)
        log = drive(r, score)
        res = r.result()
        reasons.add(res.stopped_because)
        assert res.stopped_because in STOP_REASONS
        assert res.total_cost <= budget * (1 + 1e-9)
        assert sum(q.cost for q in log) == pytest.approx(res.total_cost)
        for m in models:
            assert res.cost[m] == pytest.approx(float(costs[m][r.examinees[m].items].sum()))
        if res.stopped_because == "budget":
            # nothing a candidate could still be given fits in what is left
            left = budget - res.total_cost
            nxt = {m: r.peek(m) for m in models if r.examinees[m].n < r.n_max}
            # (the ranker may also plan with the model's mean item cost: either must not fit)
            assert any(i >= 0 and max(costs[m][i], costs[m].mean()) > left for m, i in nxt.items())
    assert "budget" in reasons


def test_warmup_gives_every_model_n_init_first(bank, simulate):
    thetas = {"a": -0.2, "b": 0.0, "c": 0.15, "d": 0.3}
    r = AdaptiveRanker(bank, list(thetas), n_init=7, n_max=60, seed=0)
    log = drive(r, scorer(bank, thetas, simulate, 5))
    phases = [q.phase for q in log]
    n_warm = phases.count("warmup")
    assert n_warm == 7 * 4
    assert phases[:n_warm] == ["warmup"] * n_warm  # no adaptive request before warm-up ends
    assert "adaptive" in phases[n_warm:] and set(phases[n_warm:]) == {"adaptive"}
    for m in thetas:
        assert sum(1 for q in log[:n_warm] if q.model == m) == 7
    # round robin: after each full round every model has the same count
    for k in range(0, n_warm, 4):
        assert sorted(q.model for q in log[k:k + 4]) == sorted(thetas)


def test_n_max_is_respected(bank, simulate):
    thetas = {"a": 0.0, "b": 0.05, "c": 0.1}
    r = AdaptiveRanker(bank, list(thetas), n_init=5, n_max=25, seed=0, judgement=NO_POLICY)
    res = r.run(scorer(bank, thetas, simulate, 9))
    assert max(res.items.values()) == 25  # close models: the cap binds
    assert res.stopped_because == "max_items"
    # n_max below n_init: warm-up is cut at n_max
    r = AdaptiveRanker(bank, ["a", "b"], n_init=10, n_max=3, seed=0)
    res = r.run(scorer(bank, {"a": 0.0, "b": 0.0}, simulate, 9))
    assert res.items == {"a": 3, "b": 3}
    # n_max above the bank is capped at the bank size
    assert AdaptiveRanker(bank, ["a", "b"], n_max=10 ** 6).n_max == bank.n_items


def _each_adaptive_request_is_the_best(r: AdaptiveRanker, score, choice, rel: float) -> int:
    """Run ``r`` to its end; each adaptive request must go to a model ``choice(r)`` (recomputed before the ask,
    model → value; only models in unsettled pairs) values highest, within ``rel``. Returns how many were checked."""
    checked = 0
    while True:
        warm = any(r.examinees[m].n < r.n_init for m in r.models)
        vals = None if warm else choice(r)
        req = r.ask()
        if req is None:
            break
        if req.phase == "adaptive":
            assert vals, "an adaptive request although every pair is settled"
            assert req.model in vals  # only models in unsettled pairs
            assert vals[req.model] == pytest.approx(max(vals.values()), rel=rel)
            checked += 1
        r.tell(req, score(req.model, req.item))
    return checked


def _metric_choice(r: AdaptiveRanker):
    """The metric scale's allocation, recomputed from a MetricScale of the ranker's state (no budget, nothing
    pending): per candidate, Σ over its unresolved pairs of its share of the pair's variance times the share
    of its own variance one more item removes, per relative cost."""
    from lm_eval_adaptive.engine.ranking.pairs.metric_scale import MetricScale
    from lm_eval_adaptive.engine.ranking.pairs.pair_variance import shrink_factor
    from lm_eval_adaptive.engine.ranking.pairs.outcomes import UNRESOLVED, judge_pairs
    ex = r.examinees
    models = r.models
    sc = MetricScale(r.bank, np.array([ex[m].raw for m in models]), np.array([ex[m].random_mask for m in models]),
                     [ex[m].theta for m in models], population=np.array([ex[m].population for m in models]),
                     se_theta=[ex[m].se for m in models])
    j = judge_pairs(sc, confidence=r.confidence, settle_cost=False)
    vals = {}
    for a, b, o in zip(j.a, j.b, j.outcome):
        if o != UNRESOLVED:
            continue
        for x, y in ((a, b), (b, a)):
            w = sc.var[x] / (sc.var[x] + sc.var[y])
            step = 1 - float(shrink_factor(sc.n_unseen[x], sc.n_random[x], 1))
            if ex[models[x]].n < r.n_max:
                vals[models[x]] = vals.get(models[x], 0.0) + w * step / r.relative_costs[models[x]]
    return vals


def test_the_metric_scale_allocation_maximises_the_share_of_variance_removed_per_cost(bank, simulate):
    thetas = {"a": -1.5, "b": 0.0, "c": 0.12, "d": 0.3, "e": 1.6}
    costs = {m: np.full(bank.n_items, c) for m, c in zip(thetas, (1.0, 2.0, 1.0, 5.0, 1.0))}
    r = AdaptiveRanker(bank, list(thetas), item_costs=costs, n_init=5, n_max=80, seed=0, judgement=NO_POLICY)
    assert r.relative_costs == {"a": 1.0, "b": 2.0, "c": 1.0, "d": 5.0, "e": 1.0}
    assert _each_adaptive_request_is_the_best(r, scorer(bank, thetas, simulate, 21), _metric_choice, 1e-6) > 20


def test_ten_times_more_expensive_model_gets_fewer_items(bank, simulate):
    """The judgement splits a budget between two equally uncertain models as √(cost ratio): the variance
    of their difference, ∝ 1/n_a + 1/n_b, falls fastest per dollar there."""
    judgement = NO_POLICY
    rng = np.random.default_rng(8)
    ys = {m: simulate(0.0, bank.b, k=bank.k, rng=rng) for m in ("cheap", "dear")}  # a near tie: not settled
    same = lambda m, i: float(ys[m][i])  # noqa: E731
    costs = {"cheap": np.full(bank.n_items, 0.001), "dear": np.full(bank.n_items, 0.01)}
    res = AdaptiveRanker(bank, ["cheap", "dear"], item_costs=costs, n_init=5, budget=0.4, seed=0,
                         judgement=judgement).run(same)
    assert res.stopped_because == "budget"
    # SE² ≈ 1/(n·I): the rule balances n_cheap ≈ √10 · n_dear
    assert 2.5 < res.items["cheap"] / res.items["dear"] < 4.5
    # equal costs: the same split between identical models
    costs = {"cheap": np.full(bank.n_items, 0.001), "dear": np.full(bank.n_items, 0.001)}
    res = AdaptiveRanker(bank, ["cheap", "dear"], item_costs=costs, n_init=5, budget=0.2, seed=0,
                         judgement=judgement).run(same)
    # each model's variance is its own residuals': an even split up to that
    assert res.stopped_because == "budget" and 0.6 < res.items["cheap"] / res.items["dear"] < 1.6


def test_pending_requests_and_tell(bank, simulate):
    score = scorer(bank, {"a": 0.0, "b": 1.0}, simulate, 2)
    r = AdaptiveRanker(bank, ["a", "b"], n_init=2, n_max=10, seed=0)
    q1 = r.ask()
    q2 = r.ask()
    assert {q1.model, q2.model} == {"a", "b"}
    assert r.ask() is None and not r.finished  # waiting, not done
    assert r.ask() is None and not r.finished
    r.tell(q1, score(q1.model, q1.item))
    q3 = r.ask()
    assert q3 is not None and q3.model == q1.model and q3.item != q1.item
    with pytest.raises(ValueError):
        r.tell(q1, 0.5)  # already told
    with pytest.raises(ValueError):
        r.tell(Request(model="b", item=q2.item + 1, item_id="x", cost=0.0, phase="warmup"), 0.5)
    with pytest.raises((ValueError, KeyError)):
        r.tell(Request(model="zzz", item=0, item_id="x", cost=0.0, phase="warmup"), 0.5)
    r.tell(q2, score(q2.model, q2.item))
    r.tell(q3, score(q3.model, q3.item))
    drive(r, score)
    assert r.finished
    assert r.ask() is None


def test_pairwise_matrix_on_the_metric_scale(bank, simulate):
    """P(ranking[i] > ranking[j]) is each pair's p_order (its complement the other way round); the ties are
    the pairs not ordered, and every ordered pair is in the ranking's order."""
    thetas = {"a": -0.5, "b": 0.0, "c": 0.3, "d": 1.0}
    res = AdaptiveRanker(bank, list(thetas), n_init=6, n_max=30, seed=0).run(scorer(bank, thetas, simulate, 8))
    P = res.pairwise
    n = len(res.ranking)
    np.testing.assert_allclose(P + P.T, np.ones((n, n)), atol=1e-12)
    pos = {m: k for k, m in enumerate(res.ranking)}
    for p in res.pairs:
        assert P[pos[p["a"]], pos[p["b"]]] == pytest.approx(p["p_order"])
        if p["outcome"] == "ordered":
            assert pos[p["a"]] < pos[p["b"]] and p["p_order"] > 1 - (1 - res.confidence) / 2
    assert {frozenset(p) for p in res.ties} == {frozenset((p["a"], p["b"])) for p in res.pairs
                                                if p["outcome"] != "ordered"}
    assert res.adjacent_confidence == pytest.approx([P[i, i + 1] for i in range(n - 1)])
    assert res.judgement == "metric-scale" and not res.inseparable


def test_items_never_repeat_and_exclusions_hold(bank, simulate):
    thetas = {"a": 0.0, "b": 0.02, "c": -0.03}
    excl = {"a": np.argsort(np.abs(bank.b - bank.prior_mean))[:20]}
    r = AdaptiveRanker(bank, list(thetas), n_init=10, n_max=150, top_k=3, seed=3, exclude=excl, judgement=NO_POLICY)
    res = r.run(scorer(bank, thetas, simulate, 13))
    for m in thetas:
        ids = [i for i, _ in res.item_log[m]]
        assert len(ids) == len(set(ids)) == res.items[m]
    assert max(res.items.values()) > 50
    given_a = set(r.examinees["a"].items)
    assert not given_a & set(excl["a"].tolist())


def test_invalid_arguments(bank):
    with pytest.raises(ValueError):
        AdaptiveRanker(bank, ["only"])
    with pytest.raises(ValueError):
        AdaptiveRanker(bank, ["a", "a"])
    for c in (1.2, 1.0, 0.5, 0.3):
        with pytest.raises(ValueError):
            AdaptiveRanker(bank, ["a", "b"], confidence=c)
    with pytest.raises(ValueError):
        AdaptiveRanker(bank, ["a", "b"], budget=1.0)  # a budget without item costs
    with pytest.raises(ValueError):
        AdaptiveRanker(bank, ["a", "b"], n_init=0)
    costs = {"a": np.ones(bank.n_items), "b": np.ones(bank.n_items)}
    with pytest.raises(ValueError):
        AdaptiveRanker(bank, ["a", "b"], item_costs=costs, budget=-1.0)
    with pytest.raises(ValueError):
        AdaptiveRanker(bank, ["a", "b"], item_costs={"a": np.ones(3), "b": np.ones(3)})
    with pytest.raises(ValueError):
        AdaptiveRanker(bank, ["a", "b"], n_max=0)


def test_warmup_skips_a_model_whose_items_run_out(sim_bank):
    """A model with (almost) every item excluded finishes warm-up early; the others go on."""
    import numpy as np

    from lm_eval_adaptive.engine.ranking.ranker import AdaptiveRanker

    n = sim_bank.n_items
    ranker = AdaptiveRanker(sim_bank, ["a", "b", "c"], n_init=5, n_max=8,
                            exclude={"c": np.arange(n - 2)})
    res = ranker.run(lambda m, i: {"a": 0.9, "b": 0.5, "c": 0.1}[m])
    assert res.items["c"] == 2
    assert res.items["a"] >= 5 and res.items["b"] >= 5
    assert res.stopped_because in {"settled", "max_items", "bank_exhausted"}

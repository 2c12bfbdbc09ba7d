"""Ties as a result: the equivalence-margin pair rule (TOST in the metric's units): its θ-scale decision
(``EquivalenceMargin.judge``) and whole runs of the ranker's one judgement, which applies its margin on the
full-task metric's scale (the judgement's own tests: test_scale_judgement.py)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import simulate_scores

from lm_eval_adaptive.engine.ranking.pairs.rules import EquivalenceMargin, OrderConfidence, PairStatus
import functools

from lm_eval_adaptive.engine.ranking.pairs.metric_judgement import MetricScaleJudgement
from lm_eval_adaptive.engine.ranking.pairs.settle_policy import SettlePolicy
from lm_eval_adaptive.engine.ranking.ranker import AdaptiveRanker

#: the one judgement without a stopping policy: a run buys until its pairs settle or a cap binds
NO_POLICY = functools.partial(MetricScaleJudgement, policy=SettlePolicy(None, None))


def _rank(bank, thetas, rule, seed=0, n_max=300):
    rng = np.random.default_rng(seed)
    r = AdaptiveRanker(bank, list(thetas), pair_rule=rule, n_max=n_max, seed=seed, judgement=NO_POLICY)
    res = r.run(lambda m, i: float(simulate_scores(thetas[m], bank.b[i], rng=rng)))
    return res


def test_metric_curve_and_its_slope(sim_bank):
    rule = EquivalenceMargin(sim_bank, 0.01)
    m = rule.metric([-1.0, 0.0, 1.0])
    assert np.all(np.diff(m) > 0) and np.all((0 < m) & (m < 1))
    mu = sim_bank.model.mean(0.0, sim_bank.b)
    assert m[1] == pytest.approx(np.mean(mu))
    assert rule.slope(0.0)[0] == pytest.approx(np.mean(mu * (1 - mu)), rel=1e-5)


def test_a_near_tie_stops_early_as_a_tie_and_distinct_models_stay_ordered(sim_bank):
    thetas = {"a": 1.0, "b": 1.0, "c": -1.0}
    plain = [_rank(sim_bank, thetas, OrderConfidence(0.95), seed=s) for s in range(8)]
    margin = [_rank(sim_bank, thetas, EquivalenceMargin(sim_bank, 0.03, 0.95), seed=s) for s in range(8)]
    # without a margin an exact tie either runs to the item cap or gets a (meaningless) order
    assert sum(r.stopped_because == "max_items" for r in plain) >= 2
    assert all(r.stopped_because == "settled" for r in margin)
    # fewer items (measured: 0.68 of the plain runs' mean; the runs whose pair orders early are the same)
    assert np.mean([r.total_items for r in margin]) < 0.8 * np.mean([r.total_items for r in plain])
    for p, m in zip(plain, margin):
        if p.stopped_because == "max_items":  # the runs that needed the margin: settled as a tie
            assert {frozenset(x) for x in m.equivalent} == {frozenset({"a", "b"})}
        assert m.ranking[-1] == "c"  # the distinct model stays ordered below both
    res = next(m for m in margin if m.equivalent)
    assert res.signature["tie_margin"] == 0.03 and res.to_dict()["equivalent"]
    assert {frozenset(x) for x in res.equivalent} <= {frozenset(x) for x in res.ties}


def test_equivalence_needs_the_interval_inside_the_margin(sim_bank):
    rule = EquivalenceMargin(sim_bank, 0.02, 0.95)
    # same θ, tiny SEs: equivalent; same θ, wide SEs: open; far apart: ordered
    st = rule.judge(np.array([0.0, 0.0, 2.0]), np.array([0.01, 0.5, 0.05]),
                    np.array([0.0, 0.0, 0.0]), np.array([0.01, 0.5, 0.05]))
    assert st.tolist() == [PairStatus.EQUIVALENT, PairStatus.OPEN, PairStatus.ORDERED]
    # the two-sided 95% interval inside ±margin (z = 1.96), as the metric-scale judgement asks: a pair whose
    # 90% interval (TOST's usual z = 1.645) fits and whose 95% interval does not stays open
    d, s = rule.difference(np.array([0.0]), np.array([0.1]), np.array([0.0]), np.array([0.1]))
    wide = EquivalenceMargin(sim_bank, float(1.8 * s[0]), 0.95)
    assert wide.judge(np.array([0.0]), np.array([0.1]), np.array([0.0]), np.array([0.1])).tolist() == [PairStatus.OPEN]
    assert EquivalenceMargin(sim_bank, float(2.0 * s[0]), 0.95).judge(
        np.array([0.0]), np.array([0.1]), np.array([0.0]), np.array([0.1])).tolist() == [PairStatus.EQUIVALENT]
    with pytest.raises(ValueError, match="margin"):
        EquivalenceMargin(sim_bank, 0.0)


def test_false_ties_are_rare_when_the_gap_exceeds_the_margin(sim_bank):
    # two models whose true metric gap is twice the margin: almost never called equivalent
    rule = EquivalenceMargin(sim_bank, 0.02, 0.95)
    gap = 0.0
    for t in np.linspace(0.05, 1.0, 200):  # θ_b such that m(0) - m(θ_b) = 2·margin
        if rule.metric(0.0)[0] - rule.metric(-t)[0] >= 0.04:
            gap = t
            break
    thetas = {"a": 0.0, "b": -gap}
    wrong = sum(bool(_rank(sim_bank, thetas, rule, seed=s, n_max=150).equivalent) for s in range(20))
    assert wrong <= 2

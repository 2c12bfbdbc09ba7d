"""Family-wise control of a ranking (pair_rules.FamilyWise, ``--family-wise``).

Checked: Holm's step-down against hand-computed cases; FamilyWise orders exactly the pairs
Holm rejects and is OrderConfidence for one pair; the ranker judges a family rule's adjacent
pairs among every pair of the ranking, consistently in ask() and result(); with many models
of nearly equal ability the per-pair rule reports a wrong order in far more than 1 − γ of the
runs while the family-wise rule stays within 1 − γ (a fixed-sample simulation of the rule and
a simulation of whole adaptive runs, known abilities); the flag reaches the ranker's
signature from ``rank``, ``demo`` and ``backtest``.
"""

from __future__ import annotations

import dataclasses

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import make_sim_bank, simulate_scores
from scipy.special import ndtri
from scipy.stats import binom

from lm_eval_adaptive.cli.main import build_parser, main
from lm_eval_adaptive.engine.ranking.pairs.rules import (
    EquivalenceMargin,
    FamilyWise,
    OrderConfidence,
    PairRule,
    PairStatus,
    adjacent_status,
    holm,
    pair_rule_for,
    ranking_status,
)
from lm_eval_adaptive.engine.ranking.ranker import AdaptiveRanker
from lm_eval_adaptive.live.leaderboard import REFRESH_KEYS
from lm_eval_adaptive.live.session import RUN_KEYS, LiveSettings, rank_ranker

O, N = int(PairStatus.ORDERED), int(PairStatus.OPEN)


# ------------------------------------------------------------------------------ Holm
@pytest.mark.parametrize("p, rejected", [
    # sorted 0.01 < .05/3 ✓; 0.03 < .05/2 ✗ → stop (0.04 < .05 does not matter: step-down)
    ([0.01, 0.04, 0.03], [True, False, False]),
    ([0.01, 0.02, 0.04], [True, True, True]),  # 0.01 < .0167, 0.02 < .025, 0.04 < .05
    ([0.04, 0.01, 0.02, 0.03], [False, True, False, False]),  # 0.01 < .0125; 0.02 ≥ .0167
    ([0.02, 0.001], [True, True]),  # 0.001 < .025, 0.02 < .05
    ([0.06, 0.001], [False, True]),  # 0.06 ≥ .05
    ([0.025, 0.05], [False, False]),  # strict: 0.025 is not < .05/2
    ([0.3], [False]),
    ([], []),
])
def test_holm_step_down_by_hand(p, rejected):
    assert holm(p, 0.05).tolist() == rejected


def _pairs_with_p(p):
    """Pairs (θ_a, SE_a, θ_b, SE_b) whose two-sided p-value of the order is ``p`` (√(SE_a² + SE_b²) = 1)."""
    d = ndtri(1 - np.asarray(p) / 2)
    s = np.full(d.size, np.sqrt(0.5))
    return d, s, np.zeros(d.size), s


def test_family_wise_orders_what_holm_rejects_and_per_pair_orders_more():
    p = [0.01, 0.04, 0.03]
    fw = FamilyWise(OrderConfidence(0.95))
    assert isinstance(fw, PairRule) and fw.name == "family-wise-holm" and fw.family
    np.testing.assert_allclose(fw.p_values(*_pairs_with_p(p)), p)
    assert fw.judge(*_pairs_with_p(p)).tolist() == [O, N, N]
    assert OrderConfidence(0.95).judge(*_pairs_with_p(p)).tolist() == [O, O, O]  # each p < 0.05
    # γ = 0.9: α = 0.1: 0.01 < .033, 0.03 < .05, 0.04 < .1
    assert FamilyWise(OrderConfidence(0.9)).judge(*_pairs_with_p(p)).tolist() == [O, O, O]


def test_one_pair_is_order_confidence():
    rng = np.random.default_rng(0)
    fw, oc = FamilyWise(OrderConfidence(0.95)), OrderConfidence(0.95)
    for _ in range(300):
        ta, tb = sorted(rng.normal(0, 1, 2), reverse=True)
        sa, sb = rng.uniform(0.05, 1, 2)
        assert fw.judge([ta], [sa], [tb], [sb]).tolist() == oc.judge([ta], [sa], [tb], [sb]).tolist()
    assert fw.judge([0.0], [0.0], [0.0], [0.0]).tolist() == [N]  # no information: open


def test_the_family_is_every_pair_of_the_ranking():
    # three models 1.2 apart with √(SE²+SE²) = 1: adjacent p = 0.23 each, far pair p = 0.016
    theta, se = np.array([2.4, 1.2, 0.0]), np.full(3, np.sqrt(0.5))
    fw = FamilyWise()
    st = ranking_status(fw, theta, se)
    assert st[0, 2] == O and st[0, 1] == st[1, 2] == N  # 0.016 < .05/3; then 0.23 fails
    assert adjacent_status(fw, theta, se).tolist() == [N, N]
    # adjacent p = 0.0002 each, far pair smaller: all ordered; adjacent status = the matrix's superdiagonal
    theta = np.array([7.4, 3.7, 0.0])
    assert ranking_status(fw, theta, se)[np.triu_indices(3, 1)].tolist() == [O, O, O]
    assert adjacent_status(fw, theta, se).tolist() == [O, O]
    # a per-pair rule is asked about the adjacent pairs alone, as before
    assert adjacent_status(OrderConfidence(), np.array([2.4, 1.2, 0.0]), se).tolist() == [N, N]


def test_family_wise_with_a_tie_margin_keeps_the_equivalence_test_per_pair():
    bank = make_sim_bank(n_items=60, seed=1)
    eq = EquivalenceMargin(bank, 0.05, 0.95)
    fw = pair_rule_for(bank, 0.95, 0.05, family_wise=True)
    assert isinstance(fw, FamilyWise) and fw.base.margin == fw.margin == 0.05
    ta, sa, tb, sb = np.array([0.30, 0.02]), np.array([0.02, 0.02]), np.array([0.0, 0.0]), np.array([0.02, 0.02])
    assert eq.judge(ta, sa, tb, sb).tolist() == [O, int(PairStatus.EQUIVALENT)]
    assert fw.judge(ta, sa, tb, sb).tolist() == [O, int(PairStatus.EQUIVALENT)]
    assert pair_rule_for(bank, 0.95).name == "order-confidence" and pair_rule_for(bank, 0.9, family_wise=True).confidence == 0.9


# ------------------------------------------------------------------------------ simulations
def _any_wrong(ranking_true_pos, ranked, ordered):
    """Is any pair reported as ordered in the wrong order?"""
    k = len(ranked)
    return any(ordered[i, j] and ranking_true_pos[ranked[i]] > ranking_true_pos[ranked[j]]
               for i in range(k) for j in range(i + 1, k))


def test_many_models_per_pair_errs_in_more_than_1_minus_gamma_of_rankings_family_wise_does_not():
    """10 models 0.02 SE apart (nearly equal), θ̂ ~ N(θ, SE), 3000 rankings at γ = 0.95."""
    rng = np.random.default_rng(42)
    k, reps = 10, 3000
    theta = 0.02 * np.arange(k)[::-1]  # model 0 is the best
    se = np.full(k, 1.0)
    wrong = {"per pair": 0, "family-wise": 0}
    rules = {"per pair": OrderConfidence(0.95), "family-wise": FamilyWise(OrderConfidence(0.95))}
    for _ in range(reps):
        est = rng.normal(theta, se)
        order = np.argsort(-est, kind="stable")
        for name, rule in rules.items():
            ordered = ranking_status(rule, est[order], se[order]) == O
            wrong[name] += _any_wrong(np.arange(k), order, ordered)
    # family-wise: at most 1 − γ, up to the 99.9% binomial slack of 3000 runs
    assert wrong["family-wise"] <= binom.ppf(0.999, reps, 0.05)
    assert wrong["per pair"] / reps > 0.3  # measured 0.44 (family-wise: 0.013)


def test_adaptive_runs_with_known_abilities_family_wise_within_1_minus_gamma():
    """Whole adaptive runs (sequential looks, the random half, the metric scale's judgement) of 8
    models 0.03 apart on a simulated bank: the share of runs reporting any wrong order.

    Each run has a bank of its own: with 4-12 items a model, one shared bank's first item (the same
    for every model and run) decided most runs' fate (10 of 40 wrong on one such item, 1 of 40 on its
    neighbour)."""
    k, runs = 8, 80
    names = [f"m{i}" for i in range(k)]
    theta = dict(zip(names, 0.03 * np.arange(k)[::-1]))
    pos = {m: i for i, m in enumerate(names)}
    wrong = {"per pair": 0, "family-wise": 0}
    for seed in range(runs):
        bank = make_sim_bank(n_items=120, seed=3 + seed)
        rng = np.random.default_rng(100 + seed)
        y = {m: simulate_scores(t, bank.b, k=bank.k, rng=rng) for m, t in theta.items()}
        for name, rule in (("per pair", OrderConfidence(0.95)), ("family-wise", FamilyWise(OrderConfidence(0.95)))):
            res = AdaptiveRanker(bank, names, n_init=4, n_max=12, seed=seed, pair_rule=rule).run(
                lambda m, i, _y=y: float(_y[m][i]))
            ties = {frozenset(p) for p in res.ties}
            r = res.ranking
            wrong[name] += any(pos[a] > pos[b] for i, a in enumerate(r) for b in r[i + 1:] if frozenset((a, b)) not in ties)
            assert res.signature["pair_rule"] == ("family-wise-holm" if name == "family-wise" else "order-confidence")
    assert wrong["family-wise"] <= binom.ppf(0.99, runs, 0.05)  # ≤ 9 of 80 (measured 0)
    assert wrong["family-wise"] <= wrong["per pair"]
    # the per-pair rule errs more often but within the binomial noise of 80 runs (measured 7 of 80): its
    # intervals hold
    assert wrong["per pair"] <= binom.ppf(0.99, runs, 0.05)


# ------------------------------------------------------------------------------ the flag
def test_rank_flag_reaches_the_ranker_signature():
    args = build_parser().parse_args(["rank", "--models", "litellm:model=a", "litellm:model=b", "--tasks", "t",
                                      "--bank", "b.json", "--budget-usd", "1", "--family-wise"])
    a = LiveSettings.from_mapping(vars(args))
    assert a.family_wise is True and "family_wise" in RUN_KEYS and "family_wise" in REFRESH_KEYS
    bank = make_sim_bank(n_items=30, seed=0)
    setup = SimpleNamespace(bank=bank, joint=False, specs=[SimpleNamespace(name="a"), SimpleNamespace(name="b")],
                            bank_costs={"a": np.full(30, 0.01), "b": np.full(30, 0.01)})
    assert rank_ranker(setup, a).signature()["pair_rule"] == "family-wise-holm"
    # a task given a bank per metric: every metric's ranking takes the flag
    other = make_sim_bank(n_items=30, seed=1)
    joint = SimpleNamespace(bank=bank, joint=True, banks={"x": bank, "y": other}, specs=setup.specs,
                            bank_costs=setup.bank_costs)
    res = rank_ranker(joint, a).result()
    assert {k: r.signature["pair_rule"] for k, r in res.results.items()} == {"x": "family-wise-holm",
                                                                             "y": "family-wise-holm"}
    with pytest.raises(dataclasses.FrozenInstanceError):  # resolved once by the command line, never changed
        a.family_wise = False
    a = dataclasses.replace(a, family_wise=False)
    assert rank_ranker(setup, a).signature()["pair_rule"] == "order-confidence"
    refresh = build_parser().parse_args(["refresh", "--leaderboard", "x.json", "--add", "litellm:model=a",
                                         "--family-wise"])
    assert LiveSettings.from_mapping(vars(refresh)).family_wise is True


def test_demo_and_backtest_flags_reach_the_ranker(tmp_path):
    rng = np.random.default_rng(0)
    b = rng.normal(0, 1.2, 40)
    rows = [{"model": f"sys{j}", "item": f"seg{i:03d}", "score": float(y)}
            for j, t in enumerate(np.linspace(-1.5, 1.5, 6)) for i, y in enumerate(simulate_scores(t, b, k=0.1, rng=rng))]
    csv = tmp_path / "runs.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    js = tmp_path / "demo.json"
    assert main(["demo", "--table", str(csv), "--models", "sys0", "sys2", "sys4", "--family-wise", "--json", str(js)]) == 0
    assert json.loads(js.read_text())["signature"]["pair_rule"] == "family-wise-holm"
    out = tmp_path / "bt.json"
    assert main(["backtest", str(csv), "--seeds", "1", "--folds", "1", "--holdout-size", "3", "--bootstrap", "50",
                 "--no-self-check", "--no-progress", "--family-wise", "--json", str(out)]) == 0
    bt = json.loads(out.read_text())
    assert bt["settings"]["family_wise"] is True and "family_wise:True" in bt["signature"]
    assert 0.0 <= bt["any_wrong_share"] <= 1.0 and bt["counts"]["runs"] == 1

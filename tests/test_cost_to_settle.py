"""The bank-free ranker's stopping policy on the cost to settle (issue 31; engine/anytime/cost_to_settle.py): a near
tie is given up with its cost and the share that buys it, pairs that settle cheaply are bought as without the policy,
and each judgement is a function of the run's state alone (a resumed run decides as the uninterrupted one)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from lm_eval_adaptive.engine.anytime.bank_free_ranker import BankFreeRanker
from lm_eval_adaptive.engine.anytime.driven_ranker import DrivenBankFreeRanker
from lm_eval_adaptive.engine.anytime.pair_decisions import ORDERED, UNRESOLVED
from lm_eval_adaptive.engine.evaluation.simulation import drive
from lm_eval_adaptive.engine.ranking.pairs.settle_policy import SettlePolicy

N = 1000


def four_models(seed: int = 1) -> dict:
    """Four models on N documents: A far above, B and C a near tie (0.004 apart), D far below."""
    rng = np.random.default_rng(seed)
    base = rng.beta(2, 3, size=N)
    shift = {"A": 0.10, "B": 0.003, "C": 0.0, "D": -0.10}
    return {m: np.clip(base + s + rng.normal(0, 0.1, N), 0, 1) for m, s in shift.items()}


def rank(Y: dict, policy, **kw):
    r = BankFreeRanker(list(Y), [str(i) for i in range(N)], score_range=(0, 1), settle_policy=policy, seed=0, **kw)
    return r, drive(r, lambda m, i: float(Y[m][i]))


def pair(res, a, b) -> dict:
    return next(p for p in res.pairs if {p["a"], p["b"]} == {a, b})


def test_a_near_tie_is_given_up_with_its_cost_and_the_share_that_buys_it():
    Y = four_models()
    _, without = rank(Y, None)
    r, res = rank(Y, SettlePolicy())
    # without the policy the near tie is bought up to most of a full run; with it the run stops on cost
    assert without.stopped_because == "settled" and pair(without, "B", "C")["common_items"] > N // 2
    assert res.stopped_because == "cost_to_settle"
    p = pair(res, "B", "C")
    assert p["outcome"] == UNRESOLVED and p["beyond_policy"] is True
    assert p["cost_to_settle_usd"] > 0 and p["items_to_settle"] > 0
    spent_share = res.total_cost / (4 * N)  # every document costs 1
    assert spent_share <= SettlePolicy().full_run_share * 1.2
    assert spent_share < p["settle_share_to_buy"] <= 1.0
    assert (p["a"], p["b"]) not in res.open_pairs  # given up: the run buys nothing more for it
    # the far pairs are ordered, as without the policy, and rightly
    truth = {m: float(y.mean()) for m, y in Y.items()}
    for q in res.pairs:
        if {q["a"], q["b"]} != {"B", "C"}:
            assert q["outcome"] == ORDERED == pair(without, q["a"], q["b"])["outcome"]
            assert truth[q["a"]] > truth[q["b"]]
    assert res.signature["settle_policy"] == SettlePolicy().name and without.signature["settle_policy"] is None


def test_a_larger_share_buys_more_of_the_near_tie():
    Y = four_models()
    _, res = rank(Y, SettlePolicy())
    share = pair(res, "B", "C")["settle_share_to_buy"]
    _, more = rank(Y, SettlePolicy(full_run_share=share))
    assert more.total_cost > res.total_cost
    assert pair(more, "B", "C")["common_items"] > pair(res, "B", "C")["common_items"]


def test_pairs_that_settle_cheaply_are_bought_as_without_the_policy():
    Y = {k: v for k, v in four_models().items() if k in ("A", "C", "D")}  # no near tie
    _, without = rank(Y, None)
    _, res = rank(Y, SettlePolicy())
    assert res.stopped_because == without.stopped_because == "settled"
    assert res.items == without.items and res.total_cost == without.total_cost


def test_a_run_resumed_from_its_journal_decides_as_the_uninterrupted_one():
    """The judge keeps each pair's projection; a run rebuilt from the scores so far (``--resume``: nothing judged
    before) asks the same documents and stops at the same point."""
    Y = four_models(seed=4)

    def ranker():
        return DrivenBankFreeRanker(list(Y), [str(i) for i in range(N)], score_range=(0, 1),
                                    settle_policy=SettlePolicy(), seed=3)

    def go(r, told):
        while (req := r.ask()) is not None:
            r.tell(req, float(Y[req.model][req.item]))
            told.append(SimpleNamespace(kind="score", model=req.model, item=req.item, y=float(Y[req.model][req.item]),
                                        cost=None))
        return r.result()

    whole: list = []
    straight = go(ranker(), whole)
    assert straight.stopped_because == "cost_to_settle" and len(whole) > 300
    for k in (40, 150, 300):
        r = ranker()
        r.replay(whole[:k])
        rest = whole[:k]
        resumed = go(r, rest)
        assert [(e.model, e.item) for e in rest] == [(e.model, e.item) for e in whole]
        assert resumed.stopped_because == straight.stopped_because and resumed.pairs == straight.pairs


def test_a_pair_is_judged_only_from_its_tenth_common_document():
    """After a few equal answers every difference is 0 and no continuation settles: that is not enough to give
    up a pair (two models right on the same first documents of a 0/1 task)."""
    first = np.random.default_rng(0).permutation(N)  # the ranker's shared order at seed 0
    Y = {"A": np.zeros(N), "B": np.ones(N)}  # far apart ...
    Y["A"][first[:9]] = 1.0  # ... after nine equal answers
    r = BankFreeRanker(["A", "B"], [str(i) for i in range(N)], score_range=(0, 1), settle_policy=SettlePolicy(),
                       seed=0)
    res = drive(r, lambda m, i: float(Y[m][i]))
    assert res.stopped_because == "settled" and pair(res, "A", "B")["outcome"] == ORDERED


def test_the_policy_on_a_real_dev_table_gives_up_the_near_tie_and_orders_the_rest():
    """WMT24 en-de BLEU, the live near tie's four systems (benchmarks/near_tie_case.json): GPT-4 and Claude-3.5
    are 0.003 apart over 997 documents."""
    from lm_eval_adaptive.data.tables import load_any_table

    table = load_any_table("wmt24/en-de/bleu")
    raw = table.mean_matrix()
    names = list(table.models)
    pick = ["GPT-4", "Claude-3.5", "Llama3-70B", "NVIDIA-NeMo"]
    rows = {m: raw[names.index(m)] for m in pick}
    r = BankFreeRanker(pick, table.items, score_range=(0.0, 1.0), settle_policy=SettlePolicy(), seed=0,
                       exclude={m: np.flatnonzero(np.isnan(rows[m])) for m in pick})
    res = drive(r, lambda m, i: float(rows[m][i]))
    truth = {m: float(np.nanmean(rows[m])) for m in pick}
    full = sum(int(np.sum(~np.isnan(rows[m]))) for m in pick)
    assert res.stopped_because in ("cost_to_settle", "settled")
    assert sum(res.items.values()) / full <= 0.15
    for p in res.pairs:
        if p["outcome"] == ORDERED:
            assert truth[p["a"]] > truth[p["b"]]
        else:
            assert p["beyond_policy"] and p["cost_to_settle_usd"] > 0
    assert pair(res, "GPT-4", "Claude-3.5")["outcome"] == UNRESOLVED
    for m in pick:
        assert res.estimates[m]["lower"] <= truth[m] <= res.estimates[m]["upper"]


@pytest.mark.parametrize("bad", [0.0, -0.1, float("nan")])
def test_a_bad_share_is_refused_by_the_policy(bad):
    with pytest.raises(ValueError, match="full_run_share"):
        SettlePolicy(full_run_share=bad)

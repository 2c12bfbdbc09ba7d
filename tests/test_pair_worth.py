"""The bank-free ranker's allocation (engine/anytime/pair_worth.py): how an open pair is weighed, and
that ``steer`` sends the documents to the open pair still in doubt while every model keeps answering a
prefix of the one shared order (what the intervals' guarantee rests on)."""

from __future__ import annotations

import numpy as np
import pytest

from lm_eval_adaptive.engine.anytime.bank_free_ranker import BankFreeRanker
from lm_eval_adaptive.engine.anytime.pair_decisions import ORDERED, UNRESOLVED
from lm_eval_adaptive.engine.anytime.pair_worth import STEER_WARMUP, pair_weight, p_order
from lm_eval_adaptive.engine.evaluation.simulation import drive


def test_pair_weights():
    rng = np.random.default_rng(0)
    far = 0.3 + rng.normal(0, 0.1, 20)  # a pair clearly apart
    level = rng.normal(0, 0.1, 20)
    level -= level.mean()  # a paired mean of exactly 0
    assert pair_weight("settle", far, 200) == 1.0
    assert pair_weight("steer", far[: STEER_WARMUP - 1], 200) == 1.0  # too few for a t-statistic
    assert pair_weight("steer", level, 200) == pytest.approx(1.0)  # t = 0: a coin flip
    assert pair_weight("steer", far, 200) < 1e-3
    # the Student-t weight is wider than the normal one at few documents
    few = 0.05 + rng.normal(0, 0.1, 6)
    assert pair_weight("steer", few, 200) > pair_weight("uncertainty", few, 200)
    p = p_order(far, 200)
    assert p > 0.999 and pair_weight("uncertainty", far, 200) == pytest.approx(max(2 * (1 - p), 1e-6))
    # steer-settle: a clear pair whose interval would exclude 0 by the time its documents double keeps weight 1
    assert pair_weight("steer-settle", far, 200, interval=(0.1, 0.5)) == 1.0
    assert pair_weight("steer-settle", far, 200, interval=(-0.3, 0.9)) == pair_weight("steer", far, 200)
    with pytest.raises(ValueError, match="allocation"):
        pair_weight("greedy", far, 200)


def _run(allocation: str, y: np.ndarray, budget: float):
    models = ["a", "b", "c"]
    r = BankFreeRanker(models, range(y.shape[1]), score_range=(0, 1), budget=budget, seed=5, allocation=allocation)
    res = drive(r, lambda m, i: float(y[models.index(m), i]))
    return r, res


def test_steer_gives_the_open_close_pair_the_documents():
    rng = np.random.default_rng(4)
    n = 300
    base = rng.beta(2, 2, n)
    # known means: a and b 0.02 apart (in doubt at this budget), c 0.3 below both (clear after a few)
    y = np.clip(np.stack([base + rng.normal(0, 0.08, n), base - 0.02 + rng.normal(0, 0.08, n),
                          base - 0.3 + rng.normal(0, 0.08, n)]), 0, 1)
    r, res = _run("steer", y, budget=120.0)
    assert res.stopped_because == "budget"
    assert res.items["a"] > 2 * res.items["c"] and res.items["b"] > 2 * res.items["c"]
    _, flat = _run("settle", y, budget=120.0)
    # settle keeps c level with a and b until c's pairs are ordered: c gets more there than under steer
    assert flat.items["c"] > res.items["c"]
    assert all(p["outcome"] == ORDERED for p in flat.pairs if "c" in (p["a"], p["b"]))
    # steering chooses when each model's prefix of the shared order grows, never which documents it holds
    perm = r.permutation
    for m in ("a", "b", "c"):
        taken = [int(i) for i, _ in res.item_log[m]]
        assert sorted(taken) == sorted(perm[: res.items[m]].tolist())
    for m in ("a", "b", "c"):
        assert 0 <= res.estimates[m]["lower"] <= res.estimates[m]["upper"] <= 1
    means = y.mean(axis=1)
    for p in res.pairs:  # whatever it settled, it settled right
        if p["outcome"] == ORDERED:
            i, j = "abc".index(p["a"]), "abc".index(p["b"])
            assert (p["lower"] > 0) == (means[i] > means[j])


def test_steer_settle_orders_a_clear_pair_that_steer_leaves_open():
    rng = np.random.default_rng(4)
    n = 300
    base = 0.6 + 0.3 * rng.beta(2, 2, n)
    # a and b 0.02 apart; c 0.6 below with little spread: a few more documents order c's pairs
    y = np.clip(np.stack([base + rng.normal(0, 0.08, n), base - 0.02 + rng.normal(0, 0.08, n),
                          base - 0.6 + rng.normal(0, 0.02, n)]), 0, 1)
    _, steer = _run("steer", y, budget=120.0)
    _, both = _run("steer-settle", y, budget=120.0)
    c_pairs = lambda res: [p["outcome"] for p in res.pairs if "c" in (p["a"], p["b"])]  # noqa: E731
    assert c_pairs(steer) == [UNRESOLVED, UNRESOLVED]  # c starved once its order was no longer in doubt
    assert c_pairs(both) == [ORDERED, ORDERED]
    assert both.items["a"] > both.items["c"] and both.items["b"] > both.items["c"]

"""Anytime-valid intervals without a bank (issue 31): the confidence sequence for sampling without
replacement, the paired pair decisions and the bank-free ranker."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lm_eval_adaptive.engine.anytime.bank_free_ranker import BankFreeRanker
from lm_eval_adaptive.engine.anytime.confidence_sequence import (
    PAIR_TRUNCATION,
    TRUNCATION,
    WorBettingCS,
    wor_betting_cs,
)
from lm_eval_adaptive.engine.anytime.pair_decisions import EQUIVALENT, ORDERED, UNRESOLVED, decide, pair_alpha
from lm_eval_adaptive.engine.evaluation.simulation import drive


def _confseq_hedged(x, n, alpha, grid, trunc=0.5):
    """A direct transcription of confseq's ``betting_mart`` (hedged, max form, m-truncation ``trunc``: confseq's
    default 1/2, ``lambda_predmix_eb``) for one candidate mean at a time, as the reference for the vectorised one."""
    x = np.asarray(x, float)
    t = np.arange(1, len(x) + 1)
    mh = np.minimum((0.5 + np.cumsum(x)) / (t + 1), 1)
    s2 = (0.25 + np.cumsum((x - mh) ** 2)) / (t + 1)
    s2p = np.append(0.25, s2[:-1])
    out = []
    for m in np.linspace(0, 1, grid):
        mu = (n * m - np.append(0, np.cumsum(x)[:-1])) / (n - (t - 1))
        with np.errstate(divide="ignore", invalid="ignore"):
            lp = np.minimum(np.sqrt(2 * np.log(1 / (alpha / 2)) / (t * np.log(1 + t) * s2p)), trunc / mu)
            ln = np.minimum(np.sqrt(2 * np.log(1 / (alpha / 2)) / (t * np.log(1 + t) * s2p)), trunc / (1 - mu))
            kp = np.cumprod(1 + lp * (x - mu))
            kn = np.cumprod(1 - ln * (x - mu))
        k = np.maximum(0.5 * np.nan_to_num(kp), 0.5 * np.nan_to_num(kn))
        k[(mu < 0) | (mu > 1)] = np.inf
        out.append(k < 1 / alpha)
    return np.array(out)  # (grid, T): accepted


@pytest.mark.parametrize("trunc", [TRUNCATION, PAIR_TRUNCATION])
def test_matches_a_direct_transcription_of_the_reference_martingale(trunc):
    """A mean's truncation (confseq's 1/2) and a pair's (0.9): the reference martingale either way."""
    rng = np.random.default_rng(3)
    pop = rng.beta(2, 3, 60)
    x = rng.permutation(pop)[:40]
    lower, upper = wor_betting_cs(x, 60, 0.0, 1.0, 0.05, grid=101, truncation=trunc)
    acc = _confseq_hedged(x, 60, 0.05, 101, trunc)
    m = np.linspace(0, 1, 101)
    run_lo, run_hi = 0.0, 1.0
    for j in range(40):
        ok = np.flatnonzero(acc[:, j])
        s = np.sum(x[:j + 1])
        run_lo = max(run_lo, m[ok[0]] - 0.01, s / 60)  # widened a grid step, the logical bounds, running
        run_hi = min(run_hi, m[ok[-1]] + 0.01, s / 60 + (60 - j - 1) / 60)
        assert lower[j] == pytest.approx(run_lo, abs=1e-12) and upper[j] == pytest.approx(run_hi, abs=1e-12)


def test_exact_with_zero_width_at_a_full_run_and_inside_the_range():
    rng = np.random.default_rng(0)
    pop = rng.uniform(-25, 0, 50)  # a MetricX-like range
    x = rng.permutation(pop)
    lower, upper = wor_betting_cs(x, 50, -25.0, 0.0)
    assert lower[-1] == upper[-1] == pytest.approx(pop.mean())
    assert np.all(lower >= -25) and np.all(upper <= 0) and np.all(lower <= upper)
    assert np.all(np.diff(upper - lower) <= 1e-12)  # never wider than before


def test_all_right_and_all_wrong_stay_inside_the_range_and_do_not_collapse():
    """The issue's 0/1 case: 12 of 12 right on an 80-question task is not a proof of 100%."""
    up = WorBettingCS(80, 0.0, 1.0)
    up.update_many([1.0] * 12)
    assert float(up.upper) == 1.0 and 12 / 80 <= float(up.lower) < 0.9  # a full run of 0.900 is still inside
    down = WorBettingCS(80, 0.0, 1.0)
    down.update_many([0.0] * 12)
    assert float(down.lower) == 0.0 and 0.1 < float(down.upper) <= 1 - 12 / 80
    down.update_many([0.0] * 68)
    assert float(down.lower) == float(down.upper) == 0.0


@pytest.mark.parametrize("trunc", [TRUNCATION, PAIR_TRUNCATION])
def test_anytime_coverage_of_the_full_task_mean_by_simulation(trunc):
    """1,000 runs, each looking after every document: the share whose interval EVER misses the
    population mean (so: misses it at any stopping time whatever) is at most 5% at 95%, at a mean's
    truncation and at a pair's."""
    rng = np.random.default_rng(11)
    n = 150
    pop = np.clip(rng.beta(1.5, 4.0, n) + 0.05 * (rng.random(n) < 0.1), 0, 1)
    runs = np.stack([rng.permutation(pop) for _ in range(1000)])
    lower, upper = wor_betting_cs(runs, n, 0.0, 1.0, 0.05, grid=401, truncation=trunc)
    ever = np.any((lower > pop.mean() + 1e-12) | (upper < pop.mean() - 1e-12), axis=1)
    print(f"ever missed: {ever.mean():.3f}")
    assert ever.mean() <= 0.05
    assert np.all(upper[:, -1] - lower[:, -1] < 1e-12)


def test_a_pairs_truncation_narrows_differences_that_spread_far_less_than_their_range():
    """Paired differences of two BLEU-like systems (SD 0.12 on the stated range [-1, 1]): at 100 documents the
    pair's truncation (0.9) gives a narrower sequence than a mean's (1/2) in most runs, and both hold the mean."""
    rng = np.random.default_rng(0)
    n = 997
    pop = np.clip(rng.normal(0.03, 0.12, n), -1.0, 1.0)
    runs = np.stack([rng.permutation(pop)[:100] for _ in range(100)])
    w = {}
    for trunc in (TRUNCATION, PAIR_TRUNCATION):
        lower, upper = wor_betting_cs(runs, n, -1.0, 1.0, 0.05, grid=1001, truncation=trunc)
        assert np.mean((lower[:, -1] > pop.mean()) | (upper[:, -1] < pop.mean())) <= 0.05
        w[trunc] = upper[:, -1] - lower[:, -1]
    assert np.median(w[PAIR_TRUNCATION]) < 0.8 * np.median(w[TRUNCATION])
    with pytest.raises(ValueError, match="truncation"):
        WorBettingCS(10, 0.0, 1.0, truncation=1.0)


def test_a_restarted_sequence_retraces_the_same_intervals():
    """``restarted()`` is the sequence as made (range, level, grid, truncation): fed the same scores, the same path."""
    rng = np.random.default_rng(4)
    d = np.clip(rng.normal(0.05, 0.2, 40), -1.0, 1.0)
    cs = WorBettingCS(200, -1.0, 1.0, 0.1, grid=301, truncation=PAIR_TRUNCATION)
    cs.update_many(d)
    again = cs.restarted()
    assert again.t == 0 and again.truncation == PAIR_TRUNCATION and again.m.size == 301
    again.update_many(d)
    assert float(again.lower) == float(cs.lower) and float(again.upper) == float(cs.upper)
    cs.narrow_grid(most=50)  # a narrowed sequence restarts on the grid it was made with
    assert cs.restarted().m.size == 301


def test_paired_decisions_stopped_at_the_first_claim_are_right_by_simulation():
    """1,000 runs of two models on the same random documents, judged after every document and stopped
    at the first look that claims anything (ordered or equivalent): the share of wrong order claims (a
    tied pair ordered, or a close pair ordered the wrong way) is at most 1 − γ, and the two models'
    intervals at that stopping time miss their full-task means at most 5% of the time."""
    rng = np.random.default_rng(5)
    n = 100
    a = np.clip(rng.beta(2, 3, n), 0, 1)
    tol = 1e-9
    for gap in (0.0, 0.02):
        if gap == 0.0:  # a true tie: the same scores on other documents (equal full-task means exactly)
            b, true = rng.permutation(a), 0.0
        else:
            b = np.clip(a - gap + rng.normal(0, 0.15, n), 0, 1)
            b = np.clip(b - (b.mean() - (a.mean() - gap)), 0, 1)  # full-task gap about ``gap``
            true = a.mean() - b.mean()
        runs = 1000
        order = np.argsort(rng.random((runs, n)), axis=1)
        ya, yb = a[order], b[order]
        pair = WorBettingCS(n, -1.0, 1.0, 0.05, shape=(runs,), grid=201)
        ca = WorBettingCS(n, 0.0, 1.0, 0.05, shape=(runs,), grid=201)
        cb = WorBettingCS(n, 0.0, 1.0, 0.05, shape=(runs,), grid=201)
        stopped = np.zeros(runs, dtype=bool)
        wrong = np.zeros(runs, dtype=bool)
        missed = np.zeros(runs, dtype=bool)
        claimed = np.zeros(runs, dtype=bool)
        for j in range(n):
            live = ~stopped
            pair.update(ya[:, j] - yb[:, j], mask=live)
            ca.update(ya[:, j], mask=live)
            cb.update(yb[:, j], mask=live)
            lo, hi = pair.lower, pair.upper
            claim = live & ((lo > tol) | (hi < -tol))
            wrong |= claim & ((true == 0) | (np.sign(lo + hi) != np.sign(true)))
            claimed |= claim & (j < n - 1)
            now = claim | (live & (j == n - 1))
            missed |= now & ((ca.lower > a.mean() + 1e-12) | (ca.upper < a.mean() - 1e-12)
                             | (cb.lower > b.mean() + 1e-12) | (cb.upper < b.mean() - 1e-12))
            stopped |= now
        print(f"gap {gap}: wrong order claims {wrong.mean():.3f}, intervals missing at the stop {missed.mean():.3f}, "
              f"claims before the last document {claimed.mean():.3f}")
        assert wrong.mean() <= 0.05, (gap, wrong.mean())
        assert missed.mean() <= 0.05, (gap, missed.mean())


def test_decide_and_levels():
    assert decide(0.01, 0.2) == ORDERED and decide(-0.3, -0.01) == ORDERED
    assert decide(-0.01, 0.01, margin=0.02) == EQUIVALENT and decide(0.0, 0.0) == EQUIVALENT
    assert decide(-0.01, 0.05, margin=0.02) == UNRESOLVED
    assert pair_alpha(0.95, 6, False) == pytest.approx(0.05)
    assert pair_alpha(0.95, 6, True) == pytest.approx(0.05 / 6)


def _table(rng, k=4, n=200, gaps=(0.0, 0.03, 0.08, 0.2)):
    base = rng.beta(2, 2, n)
    return np.clip(np.stack([base - g + rng.normal(0, 0.1, n) for g in gaps[:k]]), 0, 1)


def test_ranker_shares_one_order_and_the_cheaper_model_goes_first():
    rng = np.random.default_rng(1)
    y = _table(rng, k=2)
    costs = {"a": np.full(200, 3.0), "b": np.full(200, 1.0)}
    r = BankFreeRanker(["a", "b"], [f"d{i}" for i in range(200)], score_range=(0, 1), item_costs=costs, seed=4)
    first = r.ask()
    assert first.model == "b" and first.item == r.permutation[0] and first.cost == 1.0
    r.tell(first, y[1, first.item])
    second = r.ask()
    assert second.model == "a" and second.item == first.item  # the partner catches up on the same document
    with pytest.raises(ValueError, match="stated range"):
        r.tell(second, 1.5)


def test_ranker_stops_at_the_budget_and_states_a_cost_to_settle():
    rng = np.random.default_rng(2)
    y = _table(rng)
    models = ["m0", "m1", "m2", "m3"]
    r = BankFreeRanker(models, range(200), score_range=(0, 1), budget=80.0, seed=0)
    res = drive(r, lambda m, i: float(y[models.index(m), i]))
    assert res.stopped_because == "budget" and res.total_items <= 80
    unresolved = [p for p in res.pairs if p["outcome"] == UNRESOLVED]
    assert unresolved  # m0 and m1 are a near tie: 80 items cannot settle them
    for p in unresolved:
        lo, hi = p["items_to_settle_range"]
        assert 0 < lo <= p["items_to_settle"] <= hi <= 2 * 200 and math.isfinite(p["cost_to_settle_usd"])
    for m in models:
        est = res.estimates[m]
        assert 0 <= est["lower"] <= est["upper"] <= 1


def test_ranker_run_to_the_end_is_exact():
    rng = np.random.default_rng(3)
    y = _table(rng, k=3, n=60, gaps=(0.0, 0.0, 0.1))
    y[1] = y[0]  # an exact tie
    models = ["a", "b", "c"]
    r = BankFreeRanker(models, range(60), score_range=(0, 1), seed=2)
    res = drive(r, lambda m, i: float(y[models.index(m), i]))
    assert res.stopped_because == "settled"
    rec = {frozenset((p["a"], p["b"])): p for p in res.pairs}
    assert rec[frozenset(("a", "b"))]["outcome"] == EQUIVALENT  # two full runs with equal means
    assert rec[frozenset(("a", "b"))]["lower"] == rec[frozenset(("a", "b"))]["upper"] == 0.0
    assert [sorted(g) for g in res.tie_groups] == [["a", "b"]] and res.ranking[-1] == "c"
    assert res.rank_range["c"] == [3, 3] and all(res.rank_range[m] == [1, 2] for m in ("a", "b"))


def test_ranker_on_a_real_dev_table_orders_every_pair_right():
    from lm_eval_adaptive.data.tables import load_any_table

    table = load_any_table("wmt24/en-de/bleu")
    raw = table.mean_matrix()
    names = list(table.models)
    pick = [names[i] for i in np.random.default_rng(0).choice(len(names), 5, replace=False)]
    rows = {m: raw[names.index(m)] for m in pick}
    lo, hi = float(np.nanmin(raw)), float(np.nanmax(raw))
    r = BankFreeRanker(pick, table.items, score_range=(lo, hi), n_max=300, seed=7,
                       exclude={m: np.flatnonzero(np.isnan(rows[m])) for m in pick})
    res = drive(r, lambda m, i: float(rows[m][i]))
    truth = {m: float(np.nanmean(rows[m])) for m in pick}
    ordered = [p for p in res.pairs if p["outcome"] == ORDERED]
    assert ordered
    for p in ordered:
        assert truth[p["a"]] > truth[p["b"]]
    for m in pick:
        assert res.estimates[m]["lower"] <= truth[m] <= res.estimates[m]["upper"]


def test_calls_in_flight_told_out_of_order_give_the_same_intervals():
    rng = np.random.default_rng(4)
    y = _table(rng, k=3, n=80)
    models = ["a", "b", "c"]

    def run(most, reverse):
        r = BankFreeRanker(models, range(80), score_range=(0, 1), seed=9, n_max=30, max_in_flight=most)
        while True:
            batch = []
            while (req := r.ask()) is not None:
                batch.append(req)
            if not batch:
                break
            for req in (batch[::-1] if reverse else batch):
                r.tell(req, float(y[models.index(req.model), req.item]))
        return r

    one, many = run(1, False), run(3, True)
    assert many.stopped_because == one.stopped_because == "max_items"
    for m in models:
        assert many.items(m) == one.items(m) == 30
        assert many.interval(m) == pytest.approx(one.interval(m))
    assert many.pair_interval("a", "c") == pytest.approx(one.pair_interval("a", "c"))


def test_a_failed_model_leaves_the_ranking():
    rng = np.random.default_rng(6)
    y = _table(rng, k=3, n=50)
    models = ["a", "b", "c"]
    r = BankFreeRanker(models, range(50), score_range=(0, 1), seed=1, budget=30.0)
    req = r.ask()
    r.fail(req.model, "HTTP 500")
    assert req.model not in r.active and not r.pending
    res = drive(r, lambda m, i: float(y[models.index(m), i]))
    assert req.model not in res.ranking and res.failed == {req.model: "HTTP 500"} and len(res.ranking) == 2


def test_one_model_to_an_interval_width_on_a_real_table():
    """The honest replacement of ``--limit``: documents in random order until the interval is 0.06 wide."""
    from lm_eval_adaptive.data.tables import load_any_table
    from lm_eval_adaptive.engine.anytime.bank_free_test import BankFreeTest

    table = load_any_table("wmt24/en-de/chrf")
    raw = table.mean_matrix()
    row = raw[0]
    lo, hi = float(np.nanmin(raw)), float(np.nanmax(raw))
    test = BankFreeTest(table.items, score_range=(lo, hi), ci_width=0.06, seed=3,
                        exclude=np.flatnonzero(np.isnan(row)))
    res = drive(test, lambda i: float(row[i]))
    truth = float(np.nanmean(row))
    assert res.stopped_because == "ci_width" and res.upper - res.lower <= 0.06
    assert res.lower <= truth <= res.upper and res.n_items < res.population
    with pytest.raises(ValueError, match="stated range"):
        t2 = BankFreeTest(table.items, score_range=(lo, hi), seed=0)
        t2.record(t2.next_items(1)[0], hi + 1)


def test_family_wise_any_wrong_claim_in_a_run_is_rare_by_simulation():
    """1,000 runs of 4 exactly tied models (the same scores on other documents), every pair's sequence at
    (1 − γ)/6 and looked at after every shared document: the share of runs with ANY ordered claim (each one
    wrong) is at most 1 − γ."""
    rng = np.random.default_rng(8)
    n, runs = 60, 1000
    base = rng.beta(2, 3, n)
    scores = np.stack([base] + [rng.permutation(base) for _ in range(3)])
    alpha = pair_alpha(0.95, 6, True)
    order = np.argsort(rng.random((runs, n)), axis=1)
    pairs = [(i, j) for i in range(4) for j in range(i + 1, 4)]
    cs = {p: WorBettingCS(n, -1.0, 1.0, alpha, shape=(runs,), grid=201) for p in pairs}
    any_claim = np.zeros(runs, dtype=bool)
    for k in range(n - 1):  # the last document makes every pair exact (and exactly tied)
        docs = order[:, k]
        for i, j in pairs:
            c = cs[(i, j)]
            c.update(scores[i, docs] - scores[j, docs])
            any_claim |= (c.lower > 1e-9) | (c.upper < -1e-9)
    print(f"runs with any wrong claim, family-wise: {any_claim.mean():.3f}")
    assert any_claim.mean() <= 0.05

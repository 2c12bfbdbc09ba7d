"""The full-task metric as the quantity of record (engine/ranking/pairs/metric_scale.py, engine/ranking/pairs/outcomes.py):
closed forms, coverage by simulation with known and with wrong response models, paired against
unpaired variance, the three outcomes per pair, the cost to settle, rank ranges, misfit widening."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_sim_bank

from lm_eval_adaptive.engine.cat.adaptive_test import AdaptiveTest
from lm_eval_adaptive.engine.ranking.pairs.metric_scale import MetricScale, predicted_raw, random_share_mask
from lm_eval_adaptive.engine.ranking.pairs.outcomes import (
    EQUIVALENT,
    ORDERED,
    UNRESOLVED,
    judge_pairs,
    rank_ranges,
)
from lm_eval_adaptive.engine.irt.response_model import ContinuousResponseModel
from lm_eval_adaptive.engine.cat.selection import RandomShareSelector
from lm_eval_adaptive.engine.evaluation.simulation import draw_scores

N_SIM = 200


MODEL = ContinuousResponseModel(0.1)


def _scores(kind, theta, b, rng, shared=None):
    """One model's scores on every item (engine/evaluation/simulation.py): the bank's continuous model (k = 0.1)
    or a wrong one, written as the abilities and difficulties it amounts to."""
    b = np.asarray(b, dtype=float)
    if kind == "interaction":  # an item × model effect the bank does not know
        b = b + rng.normal(0, 0.8, b.size)
    if kind == "shared":  # an item effect both models of a pair share (paired designs remove it)
        b = b + shared
    if kind == "flat":  # a model whose curve is much flatter than the bank's: logistic(0.35 (θ - b))
        theta, b = 0.35 * theta, 0.35 * b
    if kind == "heavy":  # heavy-tailed noise (Student t, 1.5 df)
        return draw_scores(MODEL, theta, b, rng, distribution="t", df=1.5, noise=0.5)
    return draw_scores(MODEL, theta, b, rng)


def _adaptive_path(bank, y, n, seed):
    """The items the default selector gives a model with scores ``y`` (its first ``n``), their random
    flags (bank order) and θ̂ after them."""
    t = AdaptiveTest(bank, se_target=None, max_items=n, min_items=0, seed=seed)
    e = t.examinee
    while (i := t.next_item()) is not None:
        t.record(i, float(y[i]))
    raw = np.full(bank.n_items, np.nan)
    raw[e.items] = y[e.items]
    return raw, random_share_mask(e.selector, e.items, bank.n_items), e.theta, e.se


# ---------------------------------------------------------------------------------- closed forms
def test_a_full_run_is_exact_with_zero_width():
    bank = make_sim_bank(50)
    y = np.random.default_rng(1).random((2, 50))
    sc = MetricScale(bank, y, np.zeros((2, 50), dtype=bool), [0.3, -0.2])
    assert np.array_equal(sc.estimate, y.mean(1))
    assert np.all(sc.se == 0) and list(sc.method) == ["exact", "exact"]
    lo, hi = sc.interval()
    assert np.array_equal(lo, hi) and np.array_equal(lo, y.mean(1))
    D, S, _ = sc.differences()
    assert D[0, 1] == y[0].mean() - y[1].mean() and S[0, 1] == 0


def test_the_estimate_and_its_variance_by_hand():
    """Random items only (no adaptive pick sweeps any): the difference estimator and the
    finite-population prediction variance s²(N_U²/n_R + N_U)/N², t with n_R − 1 df."""
    bank = make_sim_bank(12, seed=3)
    rng = np.random.default_rng(4)
    y = rng.random(12)
    seen = np.array([0, 2, 3, 7, 9])
    raw = np.full(12, np.nan)
    raw[seen] = y[seen]
    rnd = np.zeros(12, dtype=bool)
    rnd[seen] = True
    theta = 0.4
    sc = MetricScale(bank, raw, rnd, theta)
    pred = predicted_raw(bank, theta)[0]
    unseen = np.setdiff1d(np.arange(12), seen)
    r = y[seen] - pred[seen]
    n_r, n_u = seen.size, unseen.size
    est = (y[seen].sum() + pred[unseen].sum() + n_u * r.mean()) / 12
    var = r.var(ddof=1) * (n_u ** 2 / n_r + n_u) / 12 ** 2
    assert sc.estimate[0] == pytest.approx(est, rel=1e-12)
    assert sc.var[0] == pytest.approx(var, rel=1e-12)
    assert sc.df[0] == n_r - 1 and sc.method[0] == "design"
    # the finite-population correction: the same as (1 − n_R/N_R)·s²/n_R on the mean of N_R = n_R + N_U items
    big_n = n_r + n_u
    assert sc.var[0] == pytest.approx((1 - n_r / big_n) * r.var(ddof=1) / n_r * (big_n / 12) ** 2, rel=1e-12)
    lo, hi = sc.interval()
    from scipy import stats
    assert hi[0] - sc.estimate[0] == pytest.approx(stats.t.ppf(0.975, n_r - 1) * np.sqrt(var), rel=1e-9)


def test_random_items_an_adaptive_run_swept_do_not_stand_for_the_unseen_ones():
    bank = make_sim_bank(40, seed=5)
    order = np.argsort(bank.b)
    raw = np.full(40, np.nan)
    y = np.random.default_rng(6).random(40)
    mid = order[15:25]  # a band of adjacent difficulties, all taken: 5 adaptive, 5 random
    far = order[[2, 5, 30, 35]]  # random items outside the band
    raw[mid] = y[mid]
    raw[far] = y[far]
    rnd = np.zeros(40, dtype=bool)
    rnd[mid[::2]] = True
    rnd[far] = True
    sc = MetricScale(bank, raw, rnd, 0.0)
    assert sc.n_drawn[0] == 9 and sc.n_random[0] == 4  # the band's random items are swept
    assert set(np.flatnonzero(sc.random_mask[0])) == set(far.tolist())


def _swept_by_hand(b, seen, adaptive):
    """Walk the items in difficulty order: a seen item is swept when its run of seen items (no
    unseen item between) holds an adaptive pick."""
    order = np.argsort(b, kind="stable")
    swept = np.zeros(b.size, dtype=bool)
    run: list[int] = []
    for i in list(order) + [-1]:
        if i >= 0 and seen[i]:
            run.append(i)
            continue
        if any(adaptive[j] for j in run):
            swept[run] = True
        run = []
    return swept


def test_the_comparable_random_items_are_the_drawn_ones_outside_every_swept_run():
    rng = np.random.default_rng(8)
    for t in range(60):
        n = int(rng.integers(8, 80))
        bank = make_sim_bank(n, seed=t)
        seen = rng.random(n) < rng.random()
        drawn = seen & (rng.random(n) < 0.5)
        raw = np.where(seen, rng.random(n), np.nan)
        sc = MetricScale(bank, raw, drawn, 0.0)
        expected = drawn & ~_swept_by_hand(bank.b, seen, seen & ~drawn)
        assert np.array_equal(sc.random_mask[0], expected), t


def test_the_population_leaves_out_items_a_model_has_no_score_for():
    bank = make_sim_bank(30)
    y = np.random.default_rng(2).random(30)
    pop = np.ones(30, dtype=bool)
    pop[:5] = False
    raw = np.where(pop, y, np.nan)
    sc = MetricScale(bank, raw, np.zeros(30, dtype=bool), 0.0, population=pop)
    assert sc.estimate[0] == pytest.approx(y[5:].mean()) and sc.se[0] == 0 and sc.n_total[0] == 25


def test_too_few_random_items_fall_back_to_the_response_model():
    bank = make_sim_bank(60)
    raw = np.full(60, np.nan)
    raw[[1, 2, 3]] = 0.5
    rnd = np.zeros(60, dtype=bool)
    rnd[1] = True
    sc = MetricScale(bank, raw, rnd, 0.0, se_theta=0.5)
    assert sc.method[0] == "model" and np.isfinite(sc.se[0]) and sc.se[0] > 0
    assert np.isinf(MetricScale(bank, raw, rnd, 0.0).se[0])  # no SE of θ̂: no claim


def test_random_share_mask_follows_the_selectors_slots():
    sel = RandomShareSelector(np.zeros(10), share=0.5, seed=0)
    m = random_share_mask(sel, [4, 1, 7, 2], 10)
    assert set(np.flatnonzero(m)) == {1, 2}  # slots 1 and 3 are random
    m = random_share_mask(sel, [4, 1, 7, 2], 10, first_slot=1)  # one item excluded first
    assert set(np.flatnonzero(m)) == {4, 7}


# -------------------------------------------------------------------------- coverage by simulation
def _coverage(kind, reps, share, seed):
    bank = make_sim_bank(N_SIM, seed=seed)
    rng = np.random.default_rng(seed + 100)
    hits, widths = [], []
    for r in range(reps):
        y = _scores(kind, rng.normal(0, 1.2), bank.b, rng)
        raw, rnd, theta, se = _adaptive_path(bank, y, int(share * N_SIM), seed=r)
        sc = MetricScale(bank, raw, rnd, theta, se_theta=se)
        lo, hi = sc.interval()
        hits.append(lo[0] <= y.mean() <= hi[0])
        widths.append(hi[0] - lo[0])
    return np.mean(hits), np.median(widths)


# 95% stated; with 300 runs the binomial SD of a coverage is 0.013: accept 0.91-0.99
@pytest.mark.parametrize("kind", ["model", "interaction", "flat", "heavy"])
def test_intervals_cover_at_the_stated_rate_whatever_the_response_model(kind):
    for share in (0.2, 0.6):
        cov, width = _coverage(kind, 300, share, seed=11)
        assert 0.91 <= cov <= 0.99, (kind, share, cov)
        assert width > 0


def test_intervals_shrink_as_items_accrue():
    widths = [_coverage("interaction", 60, s, seed=3)[1] for s in (0.1, 0.3, 0.6, 0.9)]
    assert all(a > b for a, b in zip(widths, widths[1:])), widths


# ------------------------------------------------------------------------------------- pairs
def _pair_runs(kind, reps, share, seed, gap=0.3):
    bank = make_sim_bank(N_SIM, seed=seed)
    rng = np.random.default_rng(seed + 7)
    hits, paired, unpaired = [], [], []
    for r in range(reps):
        shared = rng.normal(0, 1.0, N_SIM)
        t = rng.normal(0, 1)
        ya = _scores(kind, t + gap, bank.b, rng, shared)
        yb = _scores(kind, t, bank.b, rng, shared)
        pa = _adaptive_path(bank, ya, int(share * N_SIM), seed=r)
        pb = _adaptive_path(bank, yb, int(share * N_SIM), seed=r)  # the same permutation: a paired design
        sc = MetricScale(bank, np.vstack([pa[0], pb[0]]), np.vstack([pa[1], pb[1]]), [pa[2], pb[2]])
        D, S, F = sc.differences()
        q = sc.quantile(F[0, 1], 0.975)
        hits.append(abs(D[0, 1] - (ya.mean() - yb.mean())) <= q * S[0, 1])
        paired.append(S[0, 1])
        unpaired.append(np.hypot(sc.se[0], sc.se[1]))
    return np.mean(hits), np.median(np.asarray(paired) / np.asarray(unpaired))


def test_a_shared_item_effect_makes_the_paired_se_smaller_and_it_still_covers():
    cov, ratio = _pair_runs("shared", 300, 0.3, seed=21)
    assert 0.91 <= cov <= 0.99, cov
    # the variance the two models share cancels (the correlation used is ρ̂'s 95% lower bound: most of it)
    assert ratio < 0.85, ratio


def test_a_correlation_from_a_handful_of_items_is_not_used():
    """ρ̂ from 4 common random items can be 0.9 by chance; the pair's variance uses its one-sided 95%
    lower bound (0 here), and never a negative one. With many items a real correlation is used."""
    from lm_eval_adaptive.engine.ranking.pairs.pair_variance import residual_correlation
    rng = np.random.default_rng(1)
    rnd = np.zeros((2, 50), dtype=bool)
    rnd[:, :4] = True
    base = rng.normal(size=4)
    dev = np.zeros((2, 50))
    dev[0, :4] = base
    dev[1, :4] = base + 0.6 * rng.normal(size=4)
    assert 0.8 < np.corrcoef(dev[0, :4], dev[1, :4])[0, 1] < 0.95  # a high ρ̂ on 4 items
    assert residual_correlation(dev, rnd)[0, 1] == 0.0
    rnd[:, :40] = True
    shared = rng.normal(size=40)
    dev[0, :40] = shared + 0.5 * rng.normal(size=40)
    dev[1, :40] = shared + 0.5 * rng.normal(size=40)
    rho = residual_correlation(dev, rnd)[0, 1]
    full = np.corrcoef(dev[0, :40], dev[1, :40])[0, 1]
    assert 0.3 < rho < full < 1
    dev[1, :40] = -dev[0, :40]  # a negative correlation would widen the pair: not used either
    assert residual_correlation(dev, rnd)[0, 1] == 0.0


def test_a_near_perfect_correlation_on_few_items_is_capped_and_needs_ten_items():
    """Two weak models that both score nothing on the few random items they share have residuals that
    differ only by their predictions: ρ̂ ≈ 1 on 5 or 11 items (alpaca_eval/judge). Below 10 common items no
    correlation is used; above, ρ̂ counts as at most 0.99 before its lower bound."""
    from lm_eval_adaptive.engine.ranking.pairs.pair_variance import residual_correlation
    rnd = np.zeros((2, 50), dtype=bool)
    dev = np.zeros((2, 50))
    rnd[:, :5] = True
    dev[0, :5] = -np.linspace(0.03, 0.05, 5)
    dev[1, :5] = dev[0, :5] - 0.001
    assert residual_correlation(dev, rnd)[0, 1] == 0.0
    rnd[:, :11] = True
    dev[0, :11] = -np.linspace(0.03, 0.05, 11)
    dev[1, :11] = dev[0, :11] - 0.001 + 1e-6 * np.arange(11)
    rho = residual_correlation(dev, rnd)[0, 1]
    assert np.corrcoef(dev[0, :11], dev[1, :11])[0, 1] > 0.9999
    assert 0.9 < rho < 0.97  # tanh(atanh(0.99) - 1.645 / √8)


def test_equivalence_is_tested_at_the_unpaired_se_when_it_is_larger():
    """A paired SE far below the two models' own SEs (a correlation near 1) orders pairs as before, but does
    not make a pair equivalent: equivalence uses the larger of the paired and unpaired SE."""
    from lm_eval_adaptive.engine.ranking.pairs.outcomes import decide
    inf = float("inf")
    assert decide(0.0005, 0.0005, inf, 0.95, 0.015) == EQUIVALENT
    assert decide(0.0005, 0.0005, inf, 0.95, 0.015, se_apart=0.03) == UNRESOLVED
    assert decide(0.0005, 0.0005, inf, 0.95, 0.015, se_apart=0.007) == EQUIVALENT  # 0.0005 + 1.96·0.007 < 0.015
    assert decide(0.01, 0.001, inf, 0.95, 0.015, se_apart=0.03) == ORDERED
    assert decide(0.0, 0.0, inf, 0.95, 0.015, se_apart=0.0) == EQUIVALENT  # two full runs, equal means
    assert decide(0.002, 0.0, inf, 0.95, 0.015, se_apart=0.0) == ORDERED


def test_equivalent_means_the_two_sided_interval_lies_inside_the_margin():
    """Equivalence is claimed when the printed γ interval of the difference, D̂ ± t_{1−(1−γ)/2}·SE, lies
    inside ±δ; TOST's usual 1 − 2(1 − γ) interval (D̂ + t_γ·SE ≤ δ) is not enough (a ranker looks after
    every item: claims at that level were wrong 2 of 35 times at |Δ| ≈ 1.1 δ on the dev tables)."""
    from lm_eval_adaptive.engine.ranking.pairs.outcomes import decide
    from lm_eval_adaptive.engine.ranking.pairs.rules import equivalence_level
    inf = float("inf")
    assert equivalence_level(0.95) == pytest.approx(0.975)
    assert decide(0.002, 0.0065, inf, 0.95, 0.014) == UNRESOLVED  # 0.002 + 1.645·0.0065 = 0.0127 ≤ 0.014 (TOST's 90%)
    assert decide(0.002, 0.0065, inf, 0.95, 0.0149) == EQUIVALENT  # 0.002 + 1.96·0.0065 = 0.01474
    assert decide(0.002, 0.0065, 10, 0.95, 0.0149) == UNRESOLVED  # t₁₀ at 0.975 is 2.228


def test_without_a_shared_effect_paired_and_unpaired_agree():
    cov, ratio = _pair_runs("model", 200, 0.3, seed=22)
    assert 0.90 <= cov <= 0.99, cov
    assert 0.85 < ratio < 1.15, ratio


# ------------------------------------------------------------------------------- three outcomes
def _exact_scale(means, n=20):
    bank = make_sim_bank(n)
    raw = np.repeat(np.asarray(means, dtype=float)[:, None], n, axis=1)
    return MetricScale(bank, raw, np.zeros(raw.shape, dtype=bool), np.zeros(len(means)), names="abcd"[:len(means)])


def test_full_runs_with_different_means_are_ordered_and_equal_ones_equivalent():
    j = judge_pairs(_exact_scale([0.5, 0.5001, 0.5]))
    out = {(j.names[a], j.names[b]): o for a, b, o in zip(j.a, j.b, j.outcome)}
    assert out[("b", "a")] == ORDERED and out[("b", "c")] == ORDERED
    assert EQUIVALENT in (out.get(("a", "c")), out.get(("c", "a")))
    assert np.all(j.items_to_settle == 0) and np.all(j.se == 0)
    best, worst = j.rank_ranges()
    assert list(best) == [2, 1, 2] and list(worst) == [3, 1, 3]


def _open_pair(gap, n_seen=20, seed=0, kind="interaction"):
    bank = make_sim_bank(300, seed=seed)
    rng = np.random.default_rng(seed)
    ya = _scores(kind, 0.0 + gap, bank.b, rng)
    yb = _scores(kind, 0.0, bank.b, rng)
    pa = _adaptive_path(bank, ya, n_seen, seed=1)
    pb = _adaptive_path(bank, yb, n_seen, seed=1)
    return MetricScale(bank, np.vstack([pa[0], pb[0]]), np.vstack([pa[1], pb[1]]), [pa[2], pb[2]])


def test_an_unresolved_pair_has_a_cost_to_settle_within_the_rest_of_a_full_run():
    checked = 0
    for seed in range(6):
        sc = _open_pair(0.05, seed=seed)
        j = judge_pairs(sc, item_costs=np.full(2, 0.01))
        if j.outcome[0] != UNRESOLVED:
            continue
        checked += 1
        rest = int(sc.n_unseen.sum())
        assert 0 < j.items_to_settle[0] <= rest
        assert j.cost_to_settle[0] == pytest.approx(0.01 * j.items_to_settle[0])
        # the same pair with its difference doubled (every score of a shifted up) costs fewer items
        raw = sc.raw.copy()
        raw[0] += j.difference[0] if j.a[0] == 0 else -j.difference[0]
        wider = judge_pairs(MetricScale(sc.bank, raw, sc.drawn_mask, sc.theta))
        assert wider.outcome[0] == ORDERED or wider.items_at_gap[0] < j.items_at_gap[0]
        assert wider.outcome[0] == ORDERED or wider.items_to_settle[0] <= j.items_to_settle[0]
    assert checked >= 2


def test_the_stated_cost_is_where_the_projected_interval_first_excludes_zero():
    sc, j = next((sc, j) for sc, j in ((sc, judge_pairs(sc)) for sc in (_open_pair(0.15, seed=s) for s in range(20)))
                 if j.outcome[0] == UNRESOLVED and j.items_at_gap[0] < sc.n_unseen.sum())
    m = j.items_at_gap[0] / 2
    f = sc.projected_variance_factor([m - 1, m])
    w = sc.var / sc.var.sum()
    v = j.se[0] ** 2 * (w[:, None] * f).sum(0)
    df = [sc.n_random.min() + (m - 1) / 2 - 1, sc.n_random.min() + m / 2 - 1]
    q = sc.quantile(df, 0.975)
    assert q[1] * np.sqrt(v[1]) < j.difference[0] <= q[0] * np.sqrt(v[0])


def test_a_tie_margin_settles_a_near_tie_as_equivalent():
    n_equivalent = 0
    for seed in range(4):  # two models of equal ability (their full-task means differ by noise only)
        sc = _open_pair(0.0, n_seen=150, seed=seed, kind="model")
        no_margin = judge_pairs(sc)
        margin = judge_pairs(sc, tie_margin=0.1)
        assert margin.outcome[0] in (ORDERED, EQUIVALENT)
        if margin.outcome[0] == EQUIVALENT:
            n_equivalent += 1
            assert margin.items_to_settle[0] == 0
            assert no_margin.outcome[0] == UNRESOLVED and no_margin.items_to_settle[0] > 0
    assert n_equivalent >= 2


def test_rank_ranges_from_settled_pairs_only_no_transitivity():
    # a > b and b > c are settled, a ? c is not: ranges take no transitive step
    m = np.zeros((3, 3), dtype=int)
    m[0, 1], m[1, 0] = 1, -1
    m[1, 2], m[2, 1] = 1, -1
    best, worst = rank_ranges(m)
    assert list(best) == [1, 2, 2] and list(worst) == [2, 2, 3]
    # nothing settled: every entry anywhere
    best, worst = rank_ranges(np.zeros((4, 4), dtype=int))
    assert list(best) == [1] * 4 and list(worst) == [4] * 4


def test_equivalence_is_pairwise_and_never_chained():
    # a ≈ b and b ≈ c settled as ties, a ? c not: no tie group {a, b, c}, every rank open
    from lm_eval_adaptive.engine.ranking.pairs.outcomes import PairOutcomes
    z = np.zeros(3)
    j = PairOutcomes(names=["a", "b", "c"], a=np.array([0, 1, 0]), b=np.array([1, 2, 2]),
                      outcome=np.array([EQUIVALENT, EQUIVALENT, UNRESOLVED]), difference=z, se=z, df=z,
                      p_order=z, items_to_settle=np.array([0, 0, 40]), cost_to_settle=z, confidence=0.95,
                      tie_margin=0.01)
    assert j.equivalents() == [["b"], ["a", "c"], ["b"]]
    best, worst = j.rank_ranges()
    assert list(best) == [1, 1, 1] and list(worst) == [3, 3, 3]
    # exact full runs that differ are ordered even within the margin (ordered is checked first)
    j = judge_pairs(_exact_scale([0.50, 0.505, 0.51]), tie_margin=0.006)
    assert set(j.outcome) == {ORDERED}


def test_records_carry_the_issue_keys():
    rec = judge_pairs(_open_pair(0.05)).to_records()[0]
    assert {"a", "b", "outcome", "p_order", "items_to_settle", "cost_to_settle_usd"} <= set(rec)


# --------------------------------------------------------------------------- misfit widens
def test_more_scatter_around_the_bank_never_narrows_an_interval(monkeypatch):
    bank = make_sim_bank(200, seed=9)
    rng = np.random.default_rng(9)
    for _ in range(20):
        y = _scores("model", rng.normal(), bank.b, rng)
        raw, rnd, theta, se = _adaptive_path(bank, y, int(rng.integers(10, 150)), seed=int(rng.integers(100)))
        pred = predicted_raw(bank, theta)[0]
        for floor in (MetricScale.model_floor, 0.0):
            monkeypatch.setattr(MetricScale, "model_floor", floor)
            widths = []
            for c in (0.5, 1.0, 1.5, 3.0):  # the same items, residuals c times as large: a model that fits worse
                sc = MetricScale(bank, pred + c * (raw - pred), rnd, theta, se_theta=se)
                lo, hi = sc.interval()
                widths.append(hi[0] - lo[0])
            assert all(a <= b for a, b in zip(widths, widths[1:])), widths
            if floor == 0:  # the design-based interval alone scales with the residuals
                assert widths[3] == pytest.approx(6 * widths[0])
            else:  # the floor: never narrower than its share of the response model's noise
                sc = MetricScale(bank, pred + 0.01 * (raw - pred), rnd, theta)
                if sc.method[0] == "design":
                    assert sc.var[0] > 0 and sc.s2_design[0] < sc.var[0] / ((sc.n_unseen[0] ** 2 / sc.n_random[0]
                                                                             + sc.n_unseen[0]) / sc.n_total[0] ** 2)


def test_a_misfitting_model_gets_a_wider_interval_than_a_fitting_one():
    bank = make_sim_bank(N_SIM, seed=12)
    rng = np.random.default_rng(12)
    ratios = []
    for r in range(40):
        t = rng.normal()
        fit = _adaptive_path(bank, _scores("model", t, bank.b, rng), 60, seed=r)
        mis = _adaptive_path(bank, _scores("flat", t, bank.b, rng), 60, seed=r)
        sc = MetricScale(bank, np.vstack([fit[0], mis[0]]), np.vstack([fit[1], mis[1]]), [fit[2], mis[2]])
        ratios.append(sc.se[1] / sc.se[0])
    assert np.median(ratios) > 1.2

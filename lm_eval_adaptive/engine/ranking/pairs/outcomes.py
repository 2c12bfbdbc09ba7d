"""Three outcomes per pair on the metric's own scale, the cost to settle the rest, rank ranges.

Every pair of a :class:`~lm_eval_adaptive.engine.ranking.pairs.metric_scale.MetricScale` is judged on the
difference of the two full-task means, D̂ = T̂_a − T̂_b, with its SE and degrees of freedom
(METHOD.md §7-8; docs/metric-scale.md):

* ``ordered``: the two-sided test at γ rejects D = 0, |D̂|/SE > t_{1−(1−γ)/2}; ``a`` is the
  higher. Two full runs with different means are ordered (SE = 0). Family-wise (``family_wise``):
  Holm's step-down over every pair's two-sided p-value at level 1 − γ instead.
* ``equivalent``: the two-sided γ interval of D lies inside ±δ (the tie margin, metric units):
  |D̂| + t_{1−(1−γ)/2}·SE ≤ δ, i.e. both one-sided tests (Schuirmann 1987) at (1 − γ)/2 each
  (:func:`~lm_eval_adaptive.engine.ranking.pairs.rules.equivalence_level`). Two full runs with equal means are equivalent at any δ.
  ``ordered`` is checked first: a pair known to differ is ordered even when within δ.
* ``unresolved``: neither, with its **cost to settle**: the items (and dollars) at which running
  the pair on would settle it, the median and the 80% range of simulated continuations (the estimate
  moves as items accrue; the variance falls to 0 at a full run, so every pair settles by then; the
  count is capped at the rest of a full run of both models). The projection at the current D̂
  (n ≈ (t·s_d/D̂)² with the finite-population factor; ``items_at_gap``) is what the stopping policy
  judges by. Never "no number of items settles it".

:func:`rank_ranges` turns the ordered pairs into each entry's best and worst rank (as Chatbot
Arena reports them); equivalence is a separate claim (:meth:`PairOutcomes.equivalents`) and is
never chained.

:func:`decide` and :func:`settles_after` are the same decisions for one pair in plain floats (a
ranker judges its pairs after every score with them; tests check they agree with :func:`judge_pairs`).
"""

from __future__ import annotations

from collections.abc import Sequence
import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import stdtr, stdtrit

from lm_eval_adaptive.engine.ranking.pairs.metric_scale import MetricScale
from lm_eval_adaptive.engine.ranking.pairs.pair_variance import shrink_factor, shrink_one
from lm_eval_adaptive.engine.ranking.pairs.rules import equivalence_level, holm
from lm_eval_adaptive.engine.cat.selection import DEFAULT_RANDOM_SHARE

__all__ = ["ORDERED", "EQUIVALENT", "UNRESOLVED", "equivalence_groups", "PairOutcomes", "judge_pairs", "judge_apart", "rank_ranges", "decide",
           "settles_after", "settle_items", "t_quantile"]

ORDERED, EQUIVALENT, UNRESOLVED = "ordered", "equivalent", "unresolved"


@dataclass(frozen=True)
class PairOutcomes:
    """Every pair of K models, judged (arrays aligned by pair; ``a`` is the higher estimate).

    ``p_order``: P(T_a > T_b) = F_t(D̂/SE) (1 for an exact positive difference);
    ``items_to_settle`` and ``cost_to_settle``: 0 for a settled pair; for an unresolved one the median of
    where running on settles it, ``settle_range``/``cost_range`` its 80% range, ``items_at_gap`` the
    projection at the current D̂ (the stopping policy's view).
    """

    names: list
    a: np.ndarray
    b: np.ndarray
    outcome: np.ndarray
    difference: np.ndarray
    se: np.ndarray
    df: np.ndarray
    p_order: np.ndarray
    items_to_settle: np.ndarray
    cost_to_settle: np.ndarray
    confidence: float
    tie_margin: float
    family_wise: bool = False
    settle_range: np.ndarray | None = None  # (pairs, 2): the 80% range of the items to settle (None: not made)
    cost_range: np.ndarray | None = None  # (pairs, 2): its dollars
    items_at_gap: np.ndarray | None = None  # the items at which the projection at the current D̂ settles a pair

    def matrix(self) -> np.ndarray:
        """(K, K) int: +1 where row is ordered above column, −1 below, 0 otherwise."""
        K = len(self.names)
        m = np.zeros((K, K), dtype=np.int8)
        o = self.outcome == ORDERED
        m[self.a[o], self.b[o]] = 1
        m[self.b[o], self.a[o]] = -1
        return m

    def rank_ranges(self) -> tuple[np.ndarray, np.ndarray]:
        """(best, worst) rank of each model (1 = top), from the ordered pairs."""
        return rank_ranges(self.matrix())

    def equivalents(self) -> list[list[str]]:
        """Per model, the models it is ``equivalent`` to (pairwise claims, no chaining)."""
        K = len(self.names)
        out: list[list[str]] = [[] for _ in range(K)]
        for a, b in zip(self.a[self.outcome == EQUIVALENT], self.b[self.outcome == EQUIVALENT]):
            out[a].append(self.names[b])
            out[b].append(self.names[a])
        return out

    def to_records(self) -> list[dict]:
        """The pairs as JSON records (issue 21's ``pairs`` keys, plus the difference and its SE, and where
        made, ``items_to_settle_range`` / ``cost_to_settle_usd_range``: the 80% range of what settling
        an unresolved pair takes, [0, 0] for a settled one)."""
        out = []
        for k, (a, b, o, p, d, s, n, c) in enumerate(zip(self.a, self.b, self.outcome, self.p_order, self.difference,
                                                         self.se, self.items_to_settle, self.cost_to_settle)):
            rec = {"a": self.names[a], "b": self.names[b], "outcome": str(o), "p_order": float(p),
                   "difference": float(d), "se": float(s), "items_to_settle": int(n), "cost_to_settle_usd": float(c)}
            if self.settle_range is not None:
                rec["items_to_settle_range"] = [int(v) for v in self.settle_range[k]]
                rec["cost_to_settle_usd_range"] = [float(v) for v in self.cost_range[k]]
            out.append(rec)
        return out


def rank_ranges(ordered) -> tuple[np.ndarray, np.ndarray]:
    """(best, worst) rank of each of K entries from a (K, K) matrix whose [i, j] is +1 when i is
    settled above j (−1 below, 0 not ordered): best = 1 + the entries settled above it, worst =
    K − the entries settled below it. No transitivity is assumed or added."""
    m = np.asarray(ordered)
    K = m.shape[0]
    above = (m == -1).sum(1)
    below = (m == 1).sum(1)
    return 1 + above, K - below


def judge_pairs(scale: MetricScale, *, confidence: float = 0.95, tie_margin: float = 0.0,
                item_costs=None, settle_cost: bool = True,
                random_share: float = DEFAULT_RANDOM_SHARE, family_wise: bool = False) -> PairOutcomes:
    """Judge every pair of ``scale``'s models (see the module docstring).

    ``confidence``: γ. ``tie_margin``: δ ≥ 0 in metric units (0: no equivalence except exact
    equality). ``item_costs``: USD per item, (K, N) or (K,) (one price per item of each model;
    None: dollars are 0); ``settle_cost=False`` skips the costs (0 for every pair: the outcomes
    alone). The cost of an unresolved pair is the items each model would add (the share
    ``random_share`` of them random, as the selector gives them) times its mean unseen item cost.
    ``family_wise``: the orders hold jointly at γ (Holm over every pair's two-sided p-value; an
    unresolved pair's cost to settle is then at the level Holm would next test it at, 1 − (1 − γ)/m
    with m the pairs not ordered); equivalence stays pairwise.
    """
    if not (0.5 < confidence < 1):
        raise ValueError(f"confidence must be in (0.5, 1), got {confidence}")
    if not (np.isfinite(tie_margin) and tie_margin >= 0):
        raise ValueError(f"the tie margin must be a number >= 0, got {tie_margin!r}")
    K = scale.n_models
    D, S, F = scale.differences()
    i, j = np.triu_indices(K, 1)
    d, s, df = D[i, j], S[i, j], F[i, j]
    swap = d < 0
    a = np.where(swap, j, i)
    b = np.where(swap, i, j)
    d = np.abs(d)
    two = scale.quantile(df, 1 - (1 - confidence) / 2)
    one = scale.quantile(df, equivalence_level(confidence))
    exact = s == 0
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(exact, np.where(d > 0, np.inf, 0.0), d / s)
    p = stdtr(df, z)
    if family_wise:
        ordered = holm(np.minimum(1.0, 2 * (1 - p)), 1 - confidence) | (exact & (d > 0))
    else:
        ordered = np.where(exact, d > 0, d > two * s)
    # equivalence never leans on the residual correlation: it is tested at the larger of the paired SE and
    # the unpaired one, √(Var_a + Var_b). A few random items on which two weak models both score nothing
    # show ρ̂ ≈ 1 and a paired SE near 0, which made such pairs "equivalent" (alpaca_eval/judge: 2 of 3
    # claims wrong at δ = 2% of the range); orders, checked first, keep the paired SE
    var = np.asarray(scale.var, dtype=float)
    apart = np.sqrt(var[i] + var[j])
    s_eq = np.maximum(s, apart)
    equivalent = ~ordered & (d + np.where(s_eq == 0, 0.0, one * s_eq) <= tie_margin)
    outcome = np.where(ordered, ORDERED, np.where(equivalent, EQUIVALENT, UNRESOLVED))
    level = settle_level(confidence, int(np.count_nonzero(~ordered)), family_wise)
    open_ = (outcome == UNRESOLVED) & settle_cost
    items, cost, items_range, cost_range, at_gap = _cost_to_settle(scale, a, b, d, s, open_, level, tie_margin,
                                                                   item_costs, float(random_share), confidence)
    return PairOutcomes(names=list(scale.names), a=a, b=b, outcome=outcome, difference=d, se=s, df=df,
                        p_order=p, items_to_settle=items, cost_to_settle=cost, confidence=float(confidence),
                        tie_margin=float(tie_margin), family_wise=bool(family_wise),
                        settle_range=items_range if settle_cost else None,
                        cost_range=cost_range if settle_cost else None, items_at_gap=at_gap)


def judge_apart(names, points, ses, *, confidence: float = 0.95, tie_margin: float = 0.0) -> PairOutcomes:
    """Every pair of K full-task estimates made apart (different runs, no item scored in common), each
    a normal estimate ``points`` ± ``ses`` (SE 0: a full run, exact): the difference's SE is
    √(SE_a² + SE_b²) (independent runs; runs that did share items would only be judged more
    sharply) and the pair is decided as :func:`decide` does with df = ∞. Used where no scale holds
    both models' items (a leaderboard's entries from different refreshes). ``items_to_settle`` is −1
    and ``cost_to_settle`` NaN for an unresolved pair: what settles it is a run that holds both."""
    x = np.asarray(points, dtype=float)
    v = np.asarray(ses, dtype=float) ** 2
    if x.shape != v.shape or x.ndim != 1 or len(names) != x.size:
        raise ValueError("names, points and ses must be 1-d and of one length")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(v))):
        raise ValueError("points and ses must be finite")
    i, j = np.triu_indices(x.size, 1)
    d = x[i] - x[j]
    swap = d < 0
    a, b, d = np.where(swap, j, i), np.where(swap, i, j), np.abs(d)
    s = np.sqrt(v[i] + v[j])
    outcome = np.array([decide(float(dd), float(ss), math.inf, confidence, tie_margin) for dd, ss in zip(d, s)],
                       dtype=object).astype(str) if d.size else np.array([], dtype=str)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(s == 0, np.where(d > 0, np.inf, 0.0), d / np.where(s == 0, 1.0, s))
    p = stdtr(np.inf, z)
    unresolved = outcome == UNRESOLVED
    return PairOutcomes(names=list(names), a=a, b=b, outcome=outcome, difference=d, se=s, df=np.full(d.size, np.inf),
                        p_order=p, items_to_settle=np.where(unresolved, -1, 0),
                        cost_to_settle=np.where(unresolved, np.nan, 0.0), confidence=float(confidence),
                        tie_margin=float(tie_margin))


def settle_level(confidence: float, n_open: int, family_wise: bool) -> float:
    """The confidence an open pair's order must reach to settle: γ, or family-wise 1 − (1 − γ)/m with m
    the pairs not ordered (the level Holm tests the first of them at)."""
    return 1 - (1 - confidence) / max(n_open, 1) if family_wise else confidence


@functools.lru_cache(maxsize=4096)
def t_quantile(df: float, upper: float) -> float:
    """Student t quantile at ``upper`` with ``df`` degrees of freedom (normal for inf), cached."""
    return float(stdtrit(df, upper))


def decide(d: float, se: float, df: float, confidence: float, margin: float, se_apart: float | None = None) -> str:
    """:func:`judge_pairs`' outcome of one pair (not family-wise) from |D̂| = ``d``, its SE and degrees of
    freedom, in plain floats. ``se_apart``: the SE the difference would have unpaired (√(Var_a + Var_b));
    equivalence is tested at the larger of the two (see :func:`judge_pairs`)."""
    d = abs(d)
    if se == 0 and not se_apart:
        return ORDERED if d > 0 else (EQUIVALENT if d <= margin else UNRESOLVED)
    if se > 0 and d > t_quantile(df, 1 - (1 - confidence) / 2) * se:
        return ORDERED
    if se == 0 and d > 0:
        return ORDERED
    se_eq = max(se, se_apart or 0.0)
    if margin > 0 and d + t_quantile(df, equivalence_level(confidence)) * se_eq <= margin:
        return EQUIVALENT
    return UNRESOLVED


def settles_after(m: float, d: float, var: float, share_a: float, nu_a: int, nr_a: int, design_a: bool,
                  nu_b: int, nr_b: int, design_b: bool, confidence: float, margin: float,
                  random_share: float = DEFAULT_RANDOM_SHARE, var_apart: float = 0.0) -> bool:
    """Whether a pair would be settled after each of its models adds ``m`` items, at the current |D̂| =
    ``d`` (:func:`judge_pairs`' projection, for one pair in plain floats): the pair's variance ``var``
    shrinks as its models' own (``share_a``: model a's share of it; ``nu``/``nr``: unseen and comparable
    random items; ``design``: the model's interval is design-based), its degrees of freedom grow with the
    random share of the new items; settled when the projected interval orders it or (``margin`` > 0) puts
    it within ±margin, or the variance is 0 (both full runs). ``var_apart``: Var_a + Var_b, the variance
    equivalence is tested at where it is the larger (as :func:`decide` does; it shrinks the same way)."""
    d = abs(d)
    f = 1.0 if m <= 0 else (share_a * shrink_one(nu_a, nr_a, m, random_share)
                            + (1 - share_a) * shrink_one(nu_b, nr_b, m, random_share))
    v = var * f
    if v <= 0:
        return True
    dfa = nr_a + random_share * m - 1 if design_a and nu_a > m else math.inf
    dfb = nr_b + random_share * m - 1 if design_b and nu_b > m else math.inf
    df = max(min(dfa, dfb), 1.0)
    se = math.sqrt(v)
    if d > t_quantile(df, 1 - (1 - confidence) / 2) * se:
        return True
    return margin > 0 and d + t_quantile(df, equivalence_level(confidence)) * math.sqrt(max(var, var_apart) * f) <= margin


def settle_items(d: float, var: float, share_a: float, nu_a: int, nr_a: int, design_a: bool, nu_b: int, nr_b: int,
                 design_b: bool, confidence: float, margin: float,
                 random_share: float = DEFAULT_RANDOM_SHARE) -> int:
    """The items (both models together) one pair needs to settle at the gap ``d``: :func:`settles_after`'s
    smallest m found by bisection, each model adding at most its unseen items (the cost to settle of
    :func:`judge_pairs` for one pair in plain floats, at any gap: the backtest states it at the true gap
    too, as an oracle)."""
    hi = float(max(nu_a, nu_b))
    if settles_after(0.0, d, var, share_a, nu_a, nr_a, design_a, nu_b, nr_b, design_b, confidence, margin,
                     random_share):
        return 0
    lo, up = 0.0, hi
    while up - lo > 1:
        mid = math.floor((lo + up) / 2)
        if settles_after(mid, d, var, share_a, nu_a, nr_a, design_a, nu_b, nr_b, design_b, confidence, margin,
                         random_share):
            up = mid
        else:
            lo = mid
    return int(min(up, nu_a) + min(up, nu_b))


SETTLE_RANGE = (0.1, 0.9)  # the range of the items to settle stated with the point: its 10% and 90% quantiles
SETTLE_PATHS = 400  # simulated continuations per pair (a fixed seed: the same result gives the same range)
_SETTLE_GRID = np.unique(np.geomspace(1e-3, 1.0, 72))  # the looks of a simulated continuation, as shares of hi


def _cost_to_settle(scale: MetricScale, a, b, d, s, open_, confidence, margin, item_costs, share, margin_level=None):
    """Items (both models together) and dollars for each open pair to settle: the median and the 80%
    range (:data:`SETTLE_RANGE`) of simulated continuations, and the projection at the current D̂.

    Each model of the pair adds m items (up to its unseen ones); the pair's variance is assumed to
    shrink as its members' own variances do (:meth:`MetricScale.projected_variance_factor`, weighted
    by their shares of the variance now) and its degrees of freedom to grow with the random share of
    the new items. The projection (``items_at_gap``) is the smallest m that orders the pair (t·SE < |D̂|)
    or, with a margin, makes it equivalent (|D̂| + t·SE ≤ δ) at the current D̂; found by bisection,
    vectorised over pairs.

    The stated point and range are the median and 10%-90% quantiles of the first m at which a
    continuation settles the pair (what running on measures):
    the estimate moves as it gathers items, D̂_m = D̂ + W(V − V_m) with W a Brownian motion (the
    estimate of a full-task difference whose posterior is N(D̂, V) is a martingale whose variance grows
    by what the pair's variance shrinks; at a full run it is the true difference), looked at on a
    geometric grid of m; :data:`SETTLE_PATHS` paths per pair with a fixed seed. The projection at the
    current D̂ overstates what a small noisy D̂ takes (the true gap is as likely wider; the first
    crossing comes early: docs/metric-scale.md)."""
    n_pairs = a.size
    eq_level = equivalence_level(confidence if margin_level is None else margin_level)  # pairwise
    items = np.zeros(n_pairs, dtype=np.int64)
    cost = np.zeros(n_pairs)
    items_range = np.zeros((n_pairs, 2), dtype=np.int64)
    cost_range = np.zeros((n_pairs, 2))
    at_gap = np.zeros(n_pairs, dtype=np.int64)
    idx = np.flatnonzero(open_)
    if idx.size == 0:
        return items, cost, items_range, cost_range, at_gap
    pa, pb = a[idx], b[idx]
    dd, v_now = d[idx], s[idx] ** 2
    nu = scale.n_unseen
    hi = np.maximum(nu[pa], nu[pb]).astype(float)  # a full run of both: exact
    va, vb = scale.var[pa], scale.var[pb]
    vsum = va + vb
    with np.errstate(invalid="ignore", divide="ignore"):
        wa = np.where(vsum > 0, va / vsum, 0.5)
    design = scale.method == "design"
    nr = scale.n_random.astype(float)

    nua, nub = nu[pa].astype(float), nu[pb].astype(float)
    nra, nrb = nr[pa], nr[pb]
    da, db = design[pa], design[pb]

    def col(x, m):  # a per-pair array shaped to broadcast against m ((P,) or (P, G))
        return x if np.ndim(m) == 1 else x[:, None]

    def variance(m):
        return col(v_now, m) * (col(wa, m) * shrink_factor(col(nua, m), col(nra, m), m, share)
                                + (1 - col(wa, m)) * shrink_factor(col(nub, m), col(nrb, m), m, share))

    def dof(m):
        dfa = np.where(col(da, m) & (col(nua, m) > m), col(nra, m) + share * m - 1, np.inf)
        dfb = np.where(col(db, m) & (col(nub, m) > m), col(nrb, m) + share * m - 1, np.inf)
        return np.maximum(np.minimum(dfa, dfb), 1.0)

    # equivalence is tested at the larger of the paired and the unpaired variance (judge_pairs); both shrink alike
    with np.errstate(invalid="ignore", divide="ignore"):
        eq_ratio = np.where(v_now > 0, np.maximum(vsum / v_now, 1.0), 1.0)

    def bounds(m, v):
        """What a look after m items (variance v) asks of |D̂|: above ``order`` it is ordered (t·SE < |D̂|),
        at most ``equiv`` equivalent (|D̂| + t·SE_eq ≤ δ); ``exact`` (variance 0: a full run) settles it."""
        df = dof(m)
        se = np.sqrt(v)
        order = scale.quantile(df, 1 - (1 - confidence) / 2) * se
        equiv = margin - scale.quantile(df, eq_level) * se * np.sqrt(col(eq_ratio, m))
        return order, equiv, v == 0

    def settled(gap, m):  # gap: |D̂| at m (broadcast against m)
        order, equiv, exact = bounds(m, variance(m))
        return (gap > order) | (gap <= equiv) | exact

    lo = np.zeros(idx.size)  # open at m = lo (it is open now)
    up = hi.copy()  # settled at m = up (a full run of both: variance 0)
    for _ in range(64):
        gap = up - lo > 1
        if not gap.any():
            break
        mid = np.floor((lo + up) / 2)
        ok = settled(dd, mid)
        up = np.where(gap & ok, mid, up)
        lo = np.where(gap & ~ok, mid, lo)

    # the range: simulated continuations, looked at on a grid of m (P, G), the last look a full run
    grid = np.maximum(np.ceil(hi[:, None] * _SETTLE_GRID[None, :]), 1.0)
    v_grid = variance(grid)
    v_grid[:, -1] = 0.0
    step = np.sqrt(np.maximum(-np.diff(np.concatenate([v_now[:, None], v_grid], axis=1), axis=1), 0.0))
    noise = np.random.default_rng(0).standard_normal((SETTLE_PATHS, grid.shape[1]))  # the same paths for every pair
    order, equiv, exact = bounds(grid, v_grid)  # per look, not per path (the t quantiles are the cost)
    m_sim = np.empty((idx.size, 3))  # 10%, 50%, 90% of the first settled look
    G = grid.shape[1]
    for c0 in range(0, idx.size, 32):  # in chunks of pairs: (pairs, paths, looks) floats
        sl = slice(c0, c0 + 32)
        path = np.abs(dd[sl, None, None] + np.cumsum(step[sl, None, :] * noise[None], axis=2))
        ok = (path > order[sl, None, :]) | (path <= equiv[sl, None, :]) | exact[sl, None, :]
        first = np.where(ok.any(2), ok.argmax(2), G - 1)
        m_sim[sl] = np.quantile(np.take_along_axis(grid[sl], first, axis=1), (SETTLE_RANGE[0], 0.5, SETTLE_RANGE[1]),
                                axis=1).T

    def both(m):  # items of both models for m each (each at most its unseen)
        return np.minimum(m, col(nu[pa], m)), np.minimum(m, col(nu[pb], m))

    at_gap[idx] = sum(both(up)).astype(np.int64)
    add_a, add_b = both(np.ceil(m_sim[:, 1]))
    items[idx] = (add_a + add_b).astype(np.int64)
    ra, rb = both(np.ceil(m_sim[:, [0, 2]]))
    items_range[idx] = (ra + rb).astype(np.int64)
    if item_costs is not None:
        c = np.asarray(item_costs, dtype=float)
        if c.ndim == 1:
            unit = c
        else:
            unseen = scale.unseen_mask
            with np.errstate(invalid="ignore"):
                unit = np.where(unseen.sum(1) > 0, (c * unseen).sum(1) / np.maximum(unseen.sum(1), 1), 0.0)
        cost[idx] = add_a * unit[pa] + add_b * unit[pb]
        cost_range[idx] = ra * unit[pa][:, None] + rb * unit[pb][:, None]
    return items, cost, items_range, cost_range, at_gap


def equivalence_groups(ranking: Sequence[str], equivalent) -> list[list[str]]:
    """Tie groups from equivalence alone: runs of consecutive entries of ``ranking`` every two of which
    are settled ``equivalent`` (a group never grows through an entry that is not equivalent to all of
    it: equivalence is not chained). Groups of two or more."""
    eq = {frozenset(p) for p in equivalent}
    groups, cur = [], []
    for m in ranking:
        if cur and all(frozenset((m, x)) in eq for x in cur):
            cur.append(m)
            continue
        if len(cur) > 1:
            groups.append(cur)
        cur = [m]
    if len(cur) > 1:
        groups.append(cur)
    return groups

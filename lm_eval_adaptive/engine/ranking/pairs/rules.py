"""Pair rules: the settings a ranking's pairs are judged with, and their decisions on two θ̂ ± SE.

A :class:`PairRule` carries what the rankers' one judgement
(:class:`~lm_eval_adaptive.engine.ranking.pairs.metric_judgement.MetricScaleJudgement`) applies on the
full-task metric's scale: its confidence γ (``confidence``), its tie margin (``margin``) and whether the
whole ranking is held at γ (``family``). :class:`OrderConfidence` is the plain rule, :class:`EquivalenceMargin`
the rule with a tie margin, and :class:`FamilyWise` (``--family-wise``) the wrapper that controls the whole
ranking instead of each pair: the chance that *any* order the ranking reports is wrong stays under 1 − γ
(Holm's step-down over every pair of the ranking). :func:`pair_rule_for` builds the rule of a command's
settings; the ranker refuses a rule of another kind (nothing would apply it).

Each rule also decides pairs of two independent estimates θ̂ ± SE on the ability scale (``judge``, a
:class:`PairStatus` per pair: ``OPEN``, ``ORDERED`` or ``EQUIVALENT``; :func:`ranking_status`,
:func:`adjacent_status` for a ranking's pairs): METHOD.md §4's rule, the pair settled when
P(θ_a > θ_b) = Φ((θ̂_a − θ̂_b)/√(SE_a² + SE_b²)) lies outside [(1−γ)/2, 1 − (1−γ)/2]. No ranking judges with
these since issue 29; ``OrderConfidence.probability``/``ordered`` give the θ view of two runs in
``compare`` (``harness/comparison.py``).

The rules that end a single-model test are in :mod:`lm_eval_adaptive.engine.cat.stopping`.
"""

from __future__ import annotations

import functools
import math
from enum import IntEnum
from typing import Protocol, runtime_checkable

import numpy as np
from scipy.special import ndtr, ndtri

__all__ = ["PairStatus", "PairRule", "OrderConfidence", "EquivalenceMargin", "FamilyWise", "holm", "ranking_status",
           "adjacent_status", "pair_rule_for", "equivalence_level"]

class PairStatus(IntEnum):
    """What a :class:`PairRule` says about a pair of models."""

    OPEN = 0  #: not settled: more items may settle it
    ORDERED = 1  #: the order of the pair is settled
    EQUIVALENT = 2  #: settled as a tie (the two are within a margin of each other)


@runtime_checkable
class PairRule(Protocol):
    """Decides when two models' order needs no more items (see the module docstring).

    Arrays are aligned by pair; in each pair ``a`` is ranked at or above ``b`` (θ̂_a ≥ θ̂_b).
    """

    name: str

    def judge(self, theta_a: np.ndarray, se_a: np.ndarray, theta_b: np.ndarray,
              se_b: np.ndarray) -> np.ndarray:
        """A :class:`PairStatus` code per pair (an int array)."""
        ...


class OrderConfidence:
    """METHOD.md §4: a pair is settled when P(θ_a > θ_b) is outside [(1−γ)/2, 1 − (1−γ)/2].

    P(θ_a > θ_b) = Φ((θ̂_a − θ̂_b)/√(SE_a² + SE_b²)) under independent normal posteriors
    (0.5 when both SEs are 0).
    """

    name = "order-confidence"

    def __init__(self, confidence: float = 0.95):
        if not (0.5 < confidence < 1):
            raise ValueError(f"confidence must be in (0.5, 1), got {confidence}")
        self.confidence = float(confidence)
        self.upper = 1 - (1 - self.confidence) / 2
        self.z = float(ndtri(self.upper))
        self._x_bounds = _ndtr_bounds(self.upper)

    def probability(self, theta_a, se_a, theta_b, se_b) -> np.ndarray:
        """P(θ_a > θ_b) per pair."""
        d = np.asarray(theta_a, dtype=float) - np.asarray(theta_b, dtype=float)
        s = np.sqrt(np.asarray(se_a, dtype=float) ** 2 + np.asarray(se_b, dtype=float) ** 2)
        with np.errstate(invalid="ignore", divide="ignore"):
            p = ndtr(d / s)
        return np.where(s == 0, 0.5, p)

    def judge(self, theta_a, se_a, theta_b, se_b) -> np.ndarray:
        p = self.probability(theta_a, se_a, theta_b, se_b)
        settled = (p > self.upper) | (p < 1 - self.upper)
        return np.where(settled, int(PairStatus.ORDERED), int(PairStatus.OPEN))

    @property
    def z_bounds(self) -> tuple[float, float] | None:
        """(x_lo, x_hi): the pair is ``ORDERED`` exactly when x = (θ̂_a − θ̂_b)/√(SE_a² + SE_b²) ≤ x_lo or
        ≥ x_hi (the doubles where ``ndtr`` leaves the band); None where ndtr is not monotone there."""
        return self._x_bounds

    def ordered(self, theta_a: float, se_a: float, theta_b: float, se_b: float) -> bool:
        """:meth:`judge` of one pair in plain floats: True where it says ``ORDERED``, the same decision.

        P = Φ(x), x = (θ̂_a − θ̂_b)/√(SE_a² + SE_b²), is outside the band exactly when x is at or
        beyond the first double on either side where ``ndtr`` leaves it (found once per level, by
        stepping through the doubles around Φ⁻¹): one division and two comparisons, no arrays.
        """
        s = math.sqrt(se_a * se_a + se_b * se_b)  # the same operations, in the same order, as probability()
        if s == 0:
            return False
        x = (theta_a - theta_b) / s
        bounds = self._x_bounds
        if bounds is None:  # ndtr not monotone around the thresholds: ask it
            p = float(ndtr(x))
            return p > self.upper or p < 1 - self.upper
        return x >= bounds[1] or x <= bounds[0]

    def __repr__(self) -> str:
        return f"OrderConfidence({self.confidence!r})"


_BOUND_CHECK_ULPS = 256  # doubles checked on each side of a threshold found by _ndtr_bounds


@functools.lru_cache(maxsize=32)
def _ndtr_bounds(upper: float) -> tuple[float, float] | None:
    """(x_lo, x_hi): the largest double x with ndtr(x) < 1 - upper and the smallest with ndtr(x) > upper,
    or None when ndtr is not monotone over the 256 doubles on each side of either (then
    :meth:`OrderConfidence.ordered` calls ndtr)."""

    def first_above(level: float, start: float) -> float:  # smallest x with ndtr(x) > level
        x = start
        while ndtr(x) > level:
            x = np.nextafter(x, -np.inf)
        while not ndtr(x) > level:
            x = np.nextafter(x, np.inf)
        return float(x)

    def last_below(level: float, start: float) -> float:  # largest x with ndtr(x) < level
        x = start
        while ndtr(x) < level:
            x = np.nextafter(x, np.inf)
        while not ndtr(x) < level:
            x = np.nextafter(x, -np.inf)
        return float(x)

    lower = 1 - upper
    hi = first_above(upper, float(ndtri(upper)))
    lo = last_below(lower, float(ndtri(lower)))
    # the comparisons are exact only if ndtr crosses each level once nearby: check the doubles around
    n = _BOUND_CHECK_ULPS
    xs_hi = _doubles_around(hi, n)
    xs_lo = _doubles_around(lo, n)
    p_hi, p_lo = ndtr(xs_hi), ndtr(xs_lo)
    if not (np.all((p_hi > upper) == (xs_hi >= hi)) and np.all((p_lo < lower) == (xs_lo <= lo))):
        return None
    return lo, hi


def _doubles_around(x: float, n: int) -> np.ndarray:
    """The n doubles below x, x, and the n doubles above it, in order."""
    below, above = [x], [x]
    for _ in range(n):
        below.append(float(np.nextafter(below[-1], -np.inf)))
        above.append(float(np.nextafter(above[-1], np.inf)))
    return np.array(below[:0:-1] + above)


def equivalence_level(confidence: float) -> float:
    """The upper quantile each one-sided test of equivalence is run at: 1 − (1 − γ)/2, the two-sided γ
    interval inside ±δ. At γ itself (a 1 − 2(1 − γ) interval, TOST's usual level) the claims were too
    often wrong on the dev tables at 10% of the range: a ranker tests a pair after every item and stops
    at the first look that passes, and the claims that pass cluster at |Δ| ≈ δ (tuning 19 of 20 right,
    report 33 of 35: 1.11 δ and 1.06 δ, after 12-34 items; docs/metric-scale.md). Both judgements,
    the metric scale's (:mod:`~lm_eval_adaptive.engine.ranking.pairs.outcomes`) and :class:`EquivalenceMargin`'s, use it."""
    return 1 - (1 - confidence) / 2


class EquivalenceMargin:
    """:class:`OrderConfidence`, plus practical equivalence: a pair closer than a margin is a tie.

    Two one-sided tests (Schuirmann 1987; METHOD.md §7) in the metric's own units: with
    m(θ) the model's predicted mean raw metric over the bank's items (the bank's stored
    ranges map μ(θ, b) back to the metric), Δ = m(θ̂_a) − m(θ̂_b) and
    SE_Δ = √((m'(θ̂_a)·SE_a)² + (m'(θ̂_b)·SE_b)²), a pair whose order is not settled is
    ``EQUIVALENT`` once |Δ| + z·SE_Δ < ``margin``, z = Φ⁻¹(1 − (1 − γ)/2) (both one-sided tests
    at (1 − γ)/2: the two-sided γ interval inside ±margin, :func:`equivalence_level`). A near-tie
    then stops as a tie instead of buying items until the budget runs out. ``margin`` is in the metric's units (e.g. 0.01 BLEU on a 0-1 scale).
    """

    name = "equivalence-margin"

    def __init__(self, bank, margin: float, confidence: float = 0.95):
        if not (isinstance(margin, (int, float)) and math.isfinite(margin) and margin > 0):
            raise ValueError(f"the tie margin must be a positive number, got {margin!r}")
        self.order = OrderConfidence(confidence)
        self.margin = float(margin)
        self.z = float(ndtri(equivalence_level(confidence)))
        self._bank = bank
        self._items = np.arange(bank.n_items)[None, :]

    @property
    def confidence(self) -> float:
        return self.order.confidence

    def metric(self, theta) -> np.ndarray:
        """m(θ): the predicted mean raw metric over the bank's items, per θ."""
        t = np.atleast_1d(np.asarray(theta, dtype=float))
        bank = self._bank
        return bank.unscale(self._items, bank.model.mean(
            t[:, None], bank.b[None, :], **{k: v[None, :] for k, v in bank.item_params().items()})).mean(axis=1)

    def slope(self, theta, h: float = 1e-4) -> np.ndarray:
        """m'(θ) by central difference."""
        t = np.atleast_1d(np.asarray(theta, dtype=float))
        return (self.metric(t + h) - self.metric(t - h)) / (2 * h)

    def difference(self, theta_a, se_a, theta_b, se_b) -> tuple[np.ndarray, np.ndarray]:
        """(Δ, SE_Δ) of the predicted metric per pair."""
        ta, tb = np.atleast_1d(theta_a), np.atleast_1d(theta_b)
        d = self.metric(ta) - self.metric(tb)
        s = np.hypot(self.slope(ta) * np.asarray(se_a, dtype=float), self.slope(tb) * np.asarray(se_b, dtype=float))
        return d, s

    def equivalent(self, theta_a, se_a, theta_b, se_b) -> np.ndarray:
        """Per pair: the difference is confidently within ±``margin`` (both one-sided tests pass)."""
        if np.asarray(theta_a).size == 0:
            return np.zeros(0, dtype=bool)
        d, s = self.difference(theta_a, se_a, theta_b, se_b)
        return np.abs(d) + self.z * s < self.margin

    def judge(self, theta_a, se_a, theta_b, se_b) -> np.ndarray:
        status = self.order.judge(theta_a, se_a, theta_b, se_b)
        if np.asarray(theta_a).size == 0:
            return status
        equivalent = self.equivalent(theta_a, se_a, theta_b, se_b)
        return np.where(status == int(PairStatus.ORDERED), status,
                        np.where(equivalent, int(PairStatus.EQUIVALENT), int(PairStatus.OPEN)))

    def __repr__(self) -> str:
        return f"EquivalenceMargin(margin={self.margin!r}, confidence={self.confidence!r})"


def holm(p, alpha: float) -> np.ndarray:
    """Holm's (1979) step-down: which of the hypotheses with p-values ``p`` are rejected at
    family-wise level ``alpha``.

    Sort p_(1) ≤ … ≤ p_(M); reject H_(1) … H_(k), k the largest such that
    p_(j) < alpha / (M − j + 1) for every j ≤ k (strict, as :class:`OrderConfidence`'s threshold).
    The chance of rejecting any true hypothesis is ≤ ``alpha`` whatever their dependence.
    """
    p = np.asarray(p, dtype=float).ravel()
    m = p.size
    rejected = np.zeros(m, dtype=bool)
    if m == 0:
        return rejected
    order = np.argsort(p, kind="stable")
    passes = p[order] < alpha / (m - np.arange(m))
    k = m if passes.all() else int(np.argmin(passes))  # up to the first that fails
    rejected[order[:k]] = True
    return rejected


class FamilyWise:
    """The whole ranking at confidence γ: P(any order the ranking reports is wrong) ≤ 1 − γ.

    :class:`OrderConfidence` holds each pair's order at γ, so with K models the chance that at
    least one of the K(K−1)/2 reported orders is wrong grows with K. This rule judges the
    pairs given in one call as one family: each pair's two-sided p-value
    p = 2·min(P, 1 − P), P = P(θ_a > θ_b) as in :class:`OrderConfidence`, and :func:`holm` at
    level 1 − γ; the pairs Holm rejects are ``ORDERED``. With one pair it is
    :class:`OrderConfidence` (p < 1 − γ ⇔ P outside [(1−γ)/2, 1 − (1−γ)/2]).

    The family is **every pair of the current ranking**, not only the adjacent ones: every pair
    the result does not list as a tie is a reported order (a model may be reported above one
    two places down while its neighbour is a tie), so all of them must hold jointly. The ranker
    passes every pair also when it only needs the adjacent ones (``family = True``;
    :func:`adjacent_status`). It costs about what Holm over the K − 1 adjacent pairs costs:
    pairs further apart have the smallest p-values, pass at the strictest thresholds
    α/M, α/(M−1), …, and leave α/(K−1), …, α/2, α to the adjacent pairs.

    The family is taken afresh at each look, as the ranking changes; the stated level holds at
    each look, and the backtest measures it over whole adaptive runs (docs/honesty.md).
    ``base``'s equivalence test (an :class:`EquivalenceMargin`) still settles a pair that Holm
    does not order as ``EQUIVALENT``, pair by pair: the family-wise level covers the reported
    orders, not the ties.
    """

    name = "family-wise-holm"
    family = True

    def __init__(self, base: OrderConfidence | EquivalenceMargin | None = None):
        self.base = base if base is not None else OrderConfidence()
        order = self.base if isinstance(self.base, OrderConfidence) else self.base.order
        self._order = order
        self.alpha = 1 - order.confidence

    @property
    def confidence(self) -> float:
        return self._order.confidence

    @property
    def margin(self) -> float | None:
        """The tie margin of ``base`` (None: no equivalence test)."""
        return getattr(self.base, "margin", None)

    def p_values(self, theta_a, se_a, theta_b, se_b) -> np.ndarray:
        """Two-sided p-value of each pair's order, 2·min(P, 1 − P)."""
        p = self._order.probability(theta_a, se_a, theta_b, se_b)
        return np.minimum(1.0, 2 * np.minimum(p, 1 - p))

    def judge(self, theta_a, se_a, theta_b, se_b) -> np.ndarray:
        ordered = holm(self.p_values(theta_a, se_a, theta_b, se_b), self.alpha)
        status = np.where(ordered, int(PairStatus.ORDERED), int(PairStatus.OPEN))
        if isinstance(self.base, EquivalenceMargin) and status.size:
            eq = self.base.equivalent(theta_a, se_a, theta_b, se_b)
            status = np.where(~ordered & eq, int(PairStatus.EQUIVALENT), status)
        return status

    def __repr__(self) -> str:
        return f"FamilyWise({self.base!r})"


def ranking_status(rule, theta, se) -> np.ndarray:
    """The :class:`PairStatus` of every pair of models listed best first: a (K, K) int array whose
    [i, j], i < j, is pair (i, j)'s (the rest is ``OPEN``); one call of ``rule.judge`` on all pairs."""
    theta, se = np.asarray(theta, dtype=float), np.asarray(se, dtype=float)
    k = theta.size
    iu, ju = np.triu_indices(k, 1)
    out = np.full((k, k), int(PairStatus.OPEN), dtype=int)
    out[iu, ju] = np.asarray(rule.judge(theta[iu], se[iu], theta[ju], se[ju]))
    return out


def adjacent_status(rule, theta, se) -> np.ndarray:
    """The :class:`PairStatus` of each adjacent pair (i, i + 1) of models listed best first. A rule
    with ``family = True`` judges them among every pair of the ranking (:func:`ranking_status`);
    any other rule is asked about the adjacent pairs alone."""
    theta, se = np.asarray(theta, dtype=float), np.asarray(se, dtype=float)
    if getattr(rule, "family", False):
        return np.diagonal(ranking_status(rule, theta, se), 1).copy()
    return np.asarray(rule.judge(theta[:-1], se[:-1], theta[1:], se[1:]))


def pair_rule_for(bank, confidence: float = 0.95, tie_margin: float | None = None, family_wise: bool = False):
    """The pair rule of a ranking: :class:`EquivalenceMargin` with a tie margin, else
    :class:`OrderConfidence`; wrapped in :class:`FamilyWise` with ``family_wise``."""
    rule = OrderConfidence(confidence) if tie_margin is None else EquivalenceMargin(bank, tie_margin, confidence)
    return FamilyWise(rule) if family_wise else rule

"""The full-task metric as the quantity of record (METHOD.md §8; docs/metric-scale.md).

What a user compares is a model's *full-task mean*: its mean raw metric over the bank's items
(those it has a score for), a finite population of N numbers. After some items of an adaptive
test the engine knows those exactly; for the N_U unseen ones it has the bank's prediction
ŷᵢ = unscale(μ(θ̂, bᵢ)). The estimate of record is the difference estimator of survey sampling
(Särndal, Swensson & Wretman 1992, §6.3) for the unseen part:

    T̂ = (Σ_seen yᵢ + Σ_unseen ŷᵢ + N_U · r̄) / N,

r̄ the mean residual y − ŷ on the model's *comparable random items*: the items its random-share
slots (:class:`~lm_eval_adaptive.engine.cat.selection.RandomShareSelector`, the first untaken item
of one random permutation) drew, less those the adaptive slots have since swept past
(:func:`_swept`: had the random slot not taken them, maximum information would have, so no
unseen item is like them). With n_R such items, the variance is the finite-population
prediction variance

    Var(T̂ − T) = s² · (N_U²/n_R + N_U) / N²   ( = (1 − n_R/N_R) · s²/n_R on the mean of the
                                                  N_R = n_R + N_U comparable items, times (N_R/N)²),

s² the residuals' sample variance, floored at :attr:`MetricScale.model_floor` times the response
model's own noise on those items (a sample of residuals can miss rare large ones; misfit widens
an interval, never narrows it), and the interval uses Student's t with n_R − 1 degrees of
freedom. It holds whatever the response model (a bad one makes s² larger), shrinks with every
item (N_U falls), and is exactly the full-task mean with zero width when every item is seen.
Why the comparable random items stand for the unseen ones under adaptive selection, and how
well the intervals cover (simulations with wrong response models, held-out real models), is in
docs/metric-scale.md.

A model with fewer than :data:`MIN_RANDOM_ITEMS` comparable random items (a selector without a
random share, the first items of a run) falls back to the response model: θ̂'s SE pushed
through the prediction plus the model's noise on the unseen items (``method = "model"``).

The *difference* of two models' full-task means (:meth:`MetricScale.differences`) is judged on
the same scale: items both saw contribute their exact difference, the rest the predictions and
the two corrections, whose errors are correlated through the items both drew at random (the
same permutation: paired). A full run enters with no uncertainty.

Pure NumPy over a (models × items) layout: one call judges every model and pair
(:class:`MetricScale`, O(K·N + K²·N)); :mod:`~lm_eval_adaptive.engine.ranking.pairs.outcomes` turns it
into outcomes, costs to settle and rank ranges.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy.special import stdtrit

from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.irt.response_model import binary_mean_bounds
from lm_eval_adaptive.engine.cat.selection import DEFAULT_RANDOM_SHARE
from lm_eval_adaptive.engine.ranking.pairs.pair_variance import pair_variance, residual_correlation, shrink_factor

__all__ = ["MetricScale", "ScaleEntry", "ModelPart", "model_part", "random_share_mask", "predicted_raw",
           "MIN_RANDOM_ITEMS"]

#: Fewest random-share items for the design-based interval (a variance needs two).
MIN_RANDOM_ITEMS = 2


def random_share_mask(selector, items, n_items: int, *, first_slot: int = 0) -> np.ndarray:
    """Bank-order boolean array: True for the items of ``items`` that a random slot chose.

    ``items`` are one model's taken items in the order they were taken (slot ``first_slot``
    first: a model excluded from ``e`` items before its first pick starts at slot ``e``);
    ``selector.is_random_slot(k)`` says which slots are random (a selector without that
    method has no random share: all False).
    """
    items = np.asarray(items, dtype=np.int64)
    out = np.zeros(int(n_items), dtype=bool)
    is_random = getattr(selector, "is_random_slot", None)
    if is_random is None or items.size == 0:
        return out
    flags = np.fromiter((is_random(first_slot + k) for k in range(items.size)), dtype=bool, count=items.size)
    out[items[flags]] = True
    return out


def predicted_raw(bank: ItemBank, theta) -> np.ndarray:
    """The bank's predicted raw metric of every item at each ability: (K, N) for K abilities."""
    return _predicted(bank, theta)[1]


def _predicted(bank: ItemBank, theta) -> tuple[np.ndarray, np.ndarray]:
    """(μ, ŷ) of every item at each ability, (K, N): the mean scaled score and the raw prediction."""
    t = np.atleast_1d(np.asarray(theta, dtype=float))[:, None]
    params = {k: v[None, :] for k, v in bank.item_params().items()}
    mu = bank.model.mean(t, bank.b[None, :], **params)
    return mu, bank.lo[None, :] + mu * (bank.hi - bank.lo)[None, :]


def _predicted_row(bank: ItemBank, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """(μ, ŷ) of every item at one ability, (N,) each."""
    if bank.model.per_item:
        mu, pred = _predicted(bank, theta)
        return mu[0], pred[0]
    mu = bank.model.mean(float(theta), bank.b)
    pred = mu * _span(bank)
    pred += bank.lo
    return mu, pred


def _model_variance(bank: ItemBank, mu: np.ndarray) -> np.ndarray:
    """The response model's variance of a raw score, μ'(θ)²/I(θ) in scaled units, which is
    k·μ(1−μ) for the continuous model and P(1−P) for the binary ones, times the item's range²
    (``mu``: one row of the bank's items, or (K, N))."""
    k = bank.k if bank.k is not None else 1.0
    return k * mu * (1.0 - mu) * _range2(bank)


def _slope(bank: ItemBank, theta, h: float = 1e-4) -> np.ndarray:
    """dŷ/dθ of every item at each ability, (K, N), by central difference."""
    theta = np.asarray(theta, dtype=float)
    return (predicted_raw(bank, theta + h) - predicted_raw(bank, theta - h)) / (2 * h)


class ModelPart(NamedTuple):
    """One model's full-task mean on one bank and what its pairs need (:func:`model_part`).

    ``estimate``: the difference estimator T̂ (the interval's centre); ``prediction``: the response model's
    own estimate, the scores seen and the bank's predictions for the rest without the random share's
    correction; ``point``: the point estimate of record, the composite of the two (:func:`model_part`;
    all three equal for a full run); ``var``: Var(T̂ − T) (0 for a full run); ``df``: the interval's degrees of freedom (inf: normal or
    exact); ``method``: ``"exact"``, ``"design"`` or ``"model"`` (see :class:`ScaleEntry`); ``ws``: the
    influence weights times the residual SD, bank order (N_U/n_R·s on a comparable random item, −s on
    an unseen one, over N; zeros for a full run or the fallback), so that Var = Σ ws² for a design
    model; ``dev``: each comparable random item's residual less their mean (0 elsewhere); ``rnd``,
    ``unseen``, ``drawn``: bank-order masks of the comparable random items, the unseen items of the
    population and the random-slot items scored; ``raw``, ``seen``, ``predicted``: the scores (0 where not
    seen), the seen items and the bank's prediction of every item."""

    estimate: float
    prediction: float
    point: float
    var: float
    df: float
    method: str
    n_seen: int
    n_random: int
    n_unseen: int
    n_total: int
    n_drawn: int
    s2_design: float
    s2: float  # the residual variance a design interval uses: s2_design, raised to the floor where it binds
    fallback_var: float
    ws: np.ndarray
    dev: np.ndarray
    rnd: np.ndarray
    unseen: np.ndarray
    drawn: np.ndarray
    raw: np.ndarray  # the raw metric where seen, 0 elsewhere
    seen: np.ndarray
    predicted: np.ndarray


def model_part(bank: ItemBank, raw, random, theta: float, *, population=None, se_theta=None,
               floor: float | None = None) -> ModelPart:
    """One model's :class:`ModelPart`: ``raw`` (N,) its raw metric, NaN where unseen; ``random`` (N,)
    bool, the items random slots chose; ``theta`` its ability estimate; ``population`` (N,) bool, the
    items its full-task mean is over (default every bank item); ``se_theta`` θ̂'s SE (the fallback's;
    None: its interval is infinite; a callable is called only when the fallback needs it); ``floor``: the residual variance floor as a share of the
    response model's noise (default :attr:`MetricScale.model_floor`). One vectorised pass over the
    bank (see the module docstring for the formulas; a ranker calls it after every score of a model,
    so it is written in few NumPy calls).

    The point estimate of record (``point``) is a composite estimator (Purcell & Kish 1979; Särndal,
    Swensson & Wretman 1992 on small domains): the response model's prediction P plus the random share's
    correction C = T̂ − P shrunk by w = max(0, 1 − V_C/C²), V_C the correction's variance, the estimated
    share of C that is bias rather than noise (the weight minimising the mean squared error with the
    bias² estimated by C² − V_C). A model the bank fits keeps nearly its prediction (a noisy correction is
    mostly noise); one it does not fit moves to T̂. It always lies inside T̂'s interval (|point − T̂| =
    min(|C|, V_C/|C|) ≤ √V_C ≤ SE); the interval and the pair decisions are T̂'s."""
    raw = np.asarray(raw, dtype=float)
    N = raw.shape[-1]
    if N != bank.n_items:
        raise ValueError(f"raw has {N} items per model, the bank {bank.n_items}")
    random = np.asarray(random, dtype=bool)
    seen = raw == raw  # scored (not NaN)
    if population is None:
        unseen = ~seen
    else:
        pop = np.asarray(population, dtype=bool)
        seen &= pop
        unseen = pop ^ seen  # in the population and not seen
    drawn = seen & random
    # the random items comparable with the unseen ones: those no adaptive pick has swept past
    rnd = drawn > _swept_row(bank, unseen, seen > random)
    n_seen = int(np.count_nonzero(seen))
    n_u = int(np.count_nonzero(unseen))
    n_tot = n_seen + n_u
    if n_tot == 0:
        raise ValueError("a model's population has no items")
    ridx = np.flatnonzero(rnd)
    n_r = int(ridx.size)
    mu, pred = _predicted_row(bank, theta)
    design = n_r >= MIN_RANDOM_ITEMS and n_u > 0
    exact = n_u == 0
    resid = raw[ridx] - pred[ridx]
    rbar = float(np.add.reduce(resid)) / n_r if n_r else 0.0
    d = resid - rbar
    s2 = float(d @ d) / (n_r - 1) if n_r >= 2 else 0.0
    s2_design = s2
    floor = MetricScale.model_floor if floor is None else floor
    if floor > 0 and n_u + n_r > 0 and s2 < floor * _noise_bound(bank):
        # a floor at a share of the response model's own noise on these items: scatter beyond it widens the
        # interval, scatter below it does not narrow it further (a sample of residuals that missed the rare
        # large ones is caught). Skipped when s² is above any item's noise (the floor cannot bind).
        noise = _model_variance(bank, mu)
        s2 = max(s2, floor * (float(noise @ unseen) + float(np.add.reduce(noise[ridx]))) / (n_u + n_r))
    y = np.where(seen, raw, 0.0)
    synthetic = float(np.add.reduce(y)) + float(pred @ unseen)
    estimate = (synthetic + (n_u * rbar if design else 0.0)) / n_tot
    dev = np.zeros(N)
    dev[ridx] = d
    fallback_var = 0.0
    if exact:
        var, df, method = 0.0, math.inf, "exact"
        ws = np.zeros(N)
    elif design:
        # influence weights on the residuals: e = Σ w·(r − E r), so Var(e) = s²·Σw² for independent items:
        # N_U/n_R on a comparable random item, −1 on an unseen one, over N
        scale = 1.0 / n_tot
        w_r = n_u / n_r * scale
        var = s2 * (n_r * w_r * w_r + n_u * scale * scale)
        s = math.sqrt(s2)
        ws = unseen * (-scale * s)
        ws[ridx] = w_r * s
        df, method = max(n_r - 1.0, 1.0), "design"
    else:
        ws = np.zeros(N)
        if callable(se_theta):  # read only here: the fallback is the one part that needs θ̂'s SE
            se_theta = se_theta()
        if se_theta is None or not math.isfinite(se_theta):
            fallback_var = math.inf
        else:
            slope = float(_slope(bank, theta)[0] @ unseen)
            noise = float(_model_variance(bank, mu) @ unseen)
            fallback_var = ((slope * se_theta) ** 2 + noise) / n_tot ** 2
            if math.isnan(fallback_var):
                fallback_var = math.inf
        var, df, method = fallback_var, math.inf, "model"
    prediction = synthetic / n_tot
    point = prediction if design else estimate
    if design:
        # the composite point estimate: the correction shrunk toward 0 by how much of it its noise explains
        corr = estimate - prediction
        v_corr = var * n_u / (n_u + n_r)  # the correction's own variance (the part of var from r̄)
        if corr * corr > v_corr:
            point = prediction + (1.0 - v_corr / (corr * corr)) * corr
    return ModelPart(estimate=estimate, prediction=prediction, point=point, var=var, df=df, method=method,
                     n_seen=n_seen, n_random=n_r,
                     n_unseen=n_u, n_total=n_tot, n_drawn=int(np.count_nonzero(drawn)), s2_design=s2_design, s2=s2,
                     fallback_var=fallback_var, ws=ws, dev=dev, rnd=rnd, unseen=unseen, drawn=drawn,
                     raw=y, seen=seen, predicted=pred)


@dataclass(frozen=True)
class ScaleEntry:
    """One model's full-task mean on the metric's own scale.

    ``estimate``: the point estimate of record (:attr:`ModelPart.point`, the composite; inside the
    interval); ``center``: the interval's centre, the difference estimator T̂; ``prediction``: the
    response model's own estimate. ``method``: ``"exact"`` (every item seen: the full-task mean, zero
    width), ``"design"`` (the random share's correction and its finite-population interval) or
    ``"model"`` (fewer than :data:`MIN_RANDOM_ITEMS` random items: the response model's interval).
    ``df``: the degrees of freedom of the interval's t quantile (inf: normal, or exact).
    """

    name: str
    estimate: float
    se: float
    lower: float
    upper: float
    level: float
    df: float
    items_seen: int
    items_random: int
    items_total: int
    method: str
    center: float = float("nan")
    prediction: float = float("nan")

    @property
    def exact(self) -> bool:
        return self.method == "exact"

    def to_dict(self) -> dict:
        return {"name": self.name, "estimate": self.estimate, "se": self.se, "lower": self.lower,
                "upper": self.upper, "level": self.level, "df": self.df, "items_seen": self.items_seen,
                "items_random": self.items_random, "items_total": self.items_total, "method": self.method,
                "center": self.center, "prediction": self.prediction}


class MetricScale:
    """Full-task means of K models on one bank, and the differences of every pair.

    Parameters
    ----------
    bank:
        The item bank (its ranges map predictions back to the raw metric).
    raw:
        (K, N) raw metric values in bank order, NaN where the model has no score yet.
    random:
        (K, N) bool: the item was chosen by a random-share slot (:func:`random_share_mask`).
    theta:
        (K,) ability estimates the predictions are made at.
    names:
        The models' names (default ``"0"``, ``"1"``, …).
    population:
        (K, N) bool: the items a model's full-task mean is over (default: every bank item);
        items a model was excluded from (it has no score for them) are outside it.
    se_theta:
        (K,) ability SEs, used only by the response-model fallback (None: that fallback's
        interval is infinite).
    level:
        The level of :meth:`entry` intervals.

    Each model is one :func:`model_part` (the same computation a ranker keeps per model and redoes only
    for the model a score changed); :meth:`from_parts` builds the scale from parts already computed.
    Attributes (arrays over models): ``estimate``, ``se``, ``df``, ``n_seen``, ``n_random``,
    ``n_unseen``, ``n_total``, ``method`` (see :class:`ScaleEntry`).
    """

    #: The residual variance is floored at this share of the response model's own noise on the same
    #: items (0: no floor). 0.5 is the smallest of 0, 0.25, 0.5, 1 whose pooled coverage on the tuning
    #: half reached 0.95 at 20 items and at 10%, 50% and 90% of the items (docs/metric-scale.md).
    model_floor = 0.5

    def __init__(self, bank: ItemBank, raw, random, theta, *, names=None, population=None, se_theta=None,
                 level: float = 0.95):
        raw = np.atleast_2d(np.asarray(raw, dtype=float))
        K, N = raw.shape
        if N != bank.n_items:
            raise ValueError(f"raw has {N} items per model, the bank {bank.n_items}")
        random = np.broadcast_to(np.asarray(random, dtype=bool), (K, N))
        theta = np.broadcast_to(np.asarray(theta, dtype=float), (K,)).astype(float)
        pop = None if population is None else np.broadcast_to(np.asarray(population, dtype=bool), (K, N))
        se_t = None if se_theta is None else np.broadcast_to(np.asarray(se_theta, dtype=float), (K,))
        parts = [model_part(bank, raw[k], random[k], float(theta[k]), population=None if pop is None else pop[k],
                            se_theta=None if se_t is None else float(se_t[k])) for k in range(K)]
        self._init(bank, parts, theta, names, level)

    @classmethod
    def from_parts(cls, bank: ItemBank, parts, theta, *, names=None, level: float = 0.95) -> MetricScale:
        """The scale of models whose :func:`model_part` s are computed already (``theta``: their θ̂)."""
        self = cls.__new__(cls)
        self._init(bank, list(parts), np.asarray(theta, dtype=float), names, level)
        return self

    def _init(self, bank, parts, theta, names, level) -> None:
        if not (0 < level < 1):
            raise ValueError(f"level must be in (0, 1), got {level}")
        K = len(parts)
        self.bank = bank
        self.level = float(level)
        self.names = [str(k) for k in range(K)] if names is None else [str(n) for n in names]
        if len(self.names) != K:
            raise ValueError(f"{len(self.names)} names for {K} models")
        self.theta = theta
        self.parts = parts

        def col(name, dtype=float):
            return np.array([getattr(p, name) for p in parts], dtype=dtype)

        self.estimate = col("estimate")
        self.point = col("point")
        self.prediction = col("prediction")
        self.var = col("var")
        self.se = np.sqrt(self.var)
        self.df = col("df")
        self.n_seen, self.n_random, self.n_unseen, self.n_total = (col(k, np.int64) for k in
                                                                   ("n_seen", "n_random", "n_unseen", "n_total"))
        self.n_drawn = col("n_drawn", np.int64)
        self.s2_design = col("s2_design")
        self.method = np.array([p.method for p in parts])
        self._fallback_var = col("fallback_var")
        self._ws = np.array([p.ws for p in parts]).reshape(K, bank.n_items)
        self._dev = np.array([p.dev for p in parts]).reshape(K, bank.n_items)
        self._rnd = np.array([p.rnd for p in parts], dtype=bool).reshape(K, bank.n_items)
        self.unseen_mask = np.array([p.unseen for p in parts], dtype=bool).reshape(K, bank.n_items)
        self.random_mask = self._rnd
        self.drawn_mask = np.array([p.drawn for p in parts], dtype=bool).reshape(K, bank.n_items)
        self.raw = np.where(np.array([p.seen for p in parts], dtype=bool).reshape(K, bank.n_items),
                            np.array([p.raw for p in parts]).reshape(K, bank.n_items), np.nan)
        self.predicted = np.array([p.predicted for p in parts]).reshape(K, bank.n_items)

    # ------------------------------------------------------------------ models
    @property
    def n_models(self) -> int:
        return len(self.names)

    @property
    def exact(self) -> np.ndarray:
        return self.method == "exact"

    @staticmethod
    def quantile(df, upper: float) -> np.ndarray:
        """Student t quantile at ``upper`` with ``df`` degrees of freedom (the normal one where df is inf)."""
        return stdtrit(np.asarray(df, dtype=float), upper)

    def interval(self, level: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) of every model's interval at ``level`` (default: the scale's)."""
        lv = self.level if level is None else float(level)
        h = self.quantile(self.df, 0.5 + lv / 2) * self.se
        h = np.where(self.var == 0, 0.0, h)
        lower, upper = self.estimate - h, self.estimate + h
        bounds = self.logical_bounds()
        if bounds is not None:
            lower, upper = np.maximum(lower, bounds[0]), np.minimum(upper, bounds[1])
        return lower, upper

    def logical_bounds(self) -> tuple[np.ndarray, np.ndarray] | None:
        """On a 0/1 bank (each score is 0 or 1), (least, most) each model's full-task mean can be: the scores
        seen, and every unseen item wrong or right. No interval reaches past them (issue 31: a bank from 8
        models printed accuracy intervals above 1); cutting an interval there never makes it miss. None on a
        continuous bank, whose stored ranges are what calibration saw, not the metric's bounds."""
        return binary_mean_bounds(self.bank.model, np.nansum(self.raw, axis=1), self.n_unseen, self.n_total)

    def entry(self, k: int) -> ScaleEntry:
        lo, hi = self.interval()
        return ScaleEntry(name=self.names[k], estimate=float(self.point[k]), center=float(self.estimate[k]),
                          prediction=float(self.prediction[k]), se=float(self.se[k]),
                          lower=float(lo[k]), upper=float(hi[k]), level=self.level, df=float(self.df[k]),
                          items_seen=int(self.n_seen[k]), items_random=int(self.n_random[k]),
                          items_total=int(self.n_total[k]), method=str(self.method[k]))

    def entries(self) -> list[ScaleEntry]:
        return [self.entry(k) for k in range(self.n_models)]

    # ------------------------------------------------------------------- pairs
    def residual_correlation(self) -> np.ndarray:
        """(K, K) correlation of two models' residuals over the items both drew at random (0 where
        fewer than 4 such items or a constant residual; the 95% lower bound, never below 0: :func:`_lower_bound`)."""
        return residual_correlation(self._dev, self._rnd)

    def differences(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(D, SE, DF), each (K, K): D[a, b] = T̂_a − T̂_b, its SE and degrees of freedom.

        Var(D̂ − D) = s_a²·Σw_a² + s_b²·Σw_b² − 2·ρ_ab·s_a·s_b·Σw_a·w_b, w the models' influence
        weights on their residuals (N_U/n_R on a random item, −1 on an unseen one, over N) and ρ
        the residual correlation on the items both drew at random: items both have seen cancel
        exactly, and items both still miss are paired. A full run has w = 0. DF: the smaller of
        the two models' (a full run's is infinite).
        """
        D = self.estimate[:, None] - self.estimate[None, :]
        V = pair_variance(self._ws, self.residual_correlation(), self._fallback_var)
        df = np.where(self.var == 0, np.inf, self.df)
        DF = np.minimum(df[:, None], df[None, :])
        return D, np.sqrt(V), DF

    def difference(self, a: int, b: int) -> tuple[float, float, float]:
        """(T̂_a − T̂_b, its SE, its degrees of freedom) of one pair."""
        D, S, F = self.differences()
        return float(D[a, b]), float(S[a, b]), float(F[a, b])

    def projected_variance_factor(self, extra, random_share: float = DEFAULT_RANDOM_SHARE) -> np.ndarray:
        """(K, …) :func:`shrink_factor` of every model after ``extra`` more items (0 for a full run)."""
        m = np.asarray(extra, dtype=float)
        shape = (self.n_models,) + (1,) * m.ndim
        return shrink_factor(self.n_unseen.reshape(shape), self.n_random.reshape(shape), m, random_share)


def _swept_row(bank: ItemBank, unseen: np.ndarray, adaptive: np.ndarray) -> np.ndarray:
    """Bank-order bool: the items the adaptive slots have swept, for one model.

    Maximum information on a one-parameter bank takes the untaken item nearest θ̂ in
    difficulty, so every item between θ̂ and an adaptive pick was taken before it: in the
    difficulty order, an adaptive pick lies in a run of taken items that no unseen item
    interrupts. Those runs are swept: an item in them would have been taken adaptively had the
    random share not taken it first, so no unseen item is like it. (A 2PL/3PL bank selects by
    information, not by nearness in b: there the runs in difficulty order are an approximation.)

    In difficulty order, a taken (or out-of-population) item's run is the number of unseen items
    before it; the runs that hold an adaptive pick are swept.
    """
    rank = _bank_rank(bank)
    order = _bank_order(bank)
    run = np.add.accumulate(unseen[order], dtype=np.intp)[rank]  # bank order: unseen items at or before it
    picked = np.zeros(run.size + 1, dtype=bool)
    picked[run[adaptive]] = True
    return picked[run] > unseen  # in a picked run, and taken


def _swept(bank: ItemBank, unseen: np.ndarray, adaptive: np.ndarray) -> np.ndarray:
    """(K, N) :func:`_swept_row` of each model."""
    return np.array([_swept_row(bank, u, a) for u, a in zip(unseen, adaptive)], dtype=bool).reshape(unseen.shape)


def _range2(bank: ItemBank) -> np.ndarray:
    """(hi − lo)² of every item (computed once per bank)."""
    return _spans(bank)[1]


def _noise_bound(bank: ItemBank) -> float:
    """The largest noise the response model gives any item, k·¼·max range² (μ(1−μ) ≤ ¼)."""
    k = bank.k if bank.k is not None else 1.0
    return 0.25 * k * _spans(bank)[2]


def _span(bank: ItemBank) -> np.ndarray:
    """hi − lo of every item (computed once per bank)."""
    return _spans(bank)[0]


def _spans(bank: ItemBank) -> tuple[np.ndarray, np.ndarray, float]:
    """(hi − lo, its square, the square's largest value) of every item, computed once per bank."""
    cached = _RANGE2.get(bank)
    if cached is None or cached[0] is not bank.hi or cached[1] is not bank.lo:
        span = bank.hi - bank.lo
        cached = _RANGE2[bank] = (bank.hi, bank.lo, span, span * span, float((span * span).max()))
    return cached[2], cached[3], cached[4]


_RANGE2: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_ORDER: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _bank_order(bank: ItemBank) -> np.ndarray:
    """The items in difficulty order (stable), the order the selector's window runs through (computed
    once per bank)."""
    return _ranks(bank)[1]


def _bank_rank(bank: ItemBank) -> np.ndarray:
    """Each item's place in difficulty order (computed once per bank)."""
    return _ranks(bank)[0]


def _ranks(bank: ItemBank) -> tuple[np.ndarray, np.ndarray]:
    cached = _ORDER.get(bank)
    if cached is None or cached[0] is not bank.b:
        order = np.argsort(bank.b, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        cached = _ORDER[bank] = (bank.b, rank, order)
    return cached[1], cached[2]

"""Full-benchmark accuracy from a few items: the published estimators beside the engine's, for comparison.

Every function takes a bank and a model's raw scores on some of its items and returns an
:class:`AccuracyEstimate` of the model's mean raw score over every bank item (with a ``level``
interval where the method has one). The estimate of record (what ``run --adaptive``, the self-check
and ``--ci-width`` use) is :func:`~lm_eval_adaptive.engine.cat.full_task.full_task_estimate`: the factor
estimate on a bank with a factor model, p-IRT otherwise; benchmarks/bench_binary_estimators.py
compares all of them on the same folds and items (docs/binary.md).

* :func:`irt_prediction`: the bank's mean predicted score over all items at θ̂ (the answers seen
  enter only through θ̂);
* :func:`p_irt`: the scores seen plus the predictions at θ̂ for the rest (tinyBenchmarks' p-IRT,
  ATLAS' blend), the engine's interval (θ̂ ± SE pushed through, the unseen items' Bernoulli
  noise, the self-check's model error);
* :func:`sample_mean`: the scores seen plus the mean of the randomly drawn ones for the rest (the
  plain mean of a random sample; with the adaptive items known exactly), a finite-population
  normal interval;
* :func:`gp_irt`: tinyBenchmarks' gp-IRT, λ·(a sample estimate) + (1 − λ)·p-IRT with
  λ = b²/(b² + v), the weight that minimises the mean squared error of a blend of an unbiased
  estimate of variance v and one of squared bias b² (b² measured on validation models, as
  tinyBenchmarks does); no interval;
* :func:`design_estimate`: the model-assisted difference estimator with the random share
  (:class:`~lm_eval_adaptive.engine.ranking.pairs.metric_scale.MetricScale`, used as it is);
* :func:`factor_estimate`: the bank's linear factor model (engine/irt/factor_model.py), the scores
  seen plus the best linear prediction of the rest;
* anchor designs: :func:`anchor_points` (tinyBenchmarks: K-means on the items' correctness
  vectors over the calibration models, the item nearest each centroid, weighted by its cluster's
  share) with :func:`anchor_estimate`; :func:`information_subset` (metabench-style: items chosen
  for their information over the calibration models' abilities, then scored by p-IRT or the factor
  model).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri  # the normal quantile (scipy.stats' norm.ppf), without importing scipy.stats

from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.cat.full_task import factor_full_task_estimate, irt_full_task_estimate
from lm_eval_adaptive.engine.ranking.pairs.metric_scale import MetricScale

__all__ = ["AccuracyEstimate", "irt_prediction", "p_irt", "sample_mean", "gp_irt", "gp_weight", "design_estimate",
           "factor_estimate", "anchor_points", "anchor_estimate", "information_subset"]


@dataclass(frozen=True)
class AccuracyEstimate:
    """An estimate of the full-task mean; ``lower``/``upper`` NaN where the method states no interval."""

    estimate: float
    lower: float = float("nan")
    upper: float = float("nan")
    method: str = ""

    @property
    def has_interval(self) -> bool:
        return bool(np.isfinite(self.lower) and np.isfinite(self.upper))

    @property
    def half_width(self) -> float:
        return 0.5 * (self.upper - self.lower)


def _from_dict(d: dict, method: str) -> AccuracyEstimate:
    return AccuracyEstimate(float(d["estimate"]), float(d["lower"]), float(d["upper"]), method)


def _predicted(bank: ItemBank, theta: float) -> np.ndarray:
    """The bank's predicted raw score of every item at θ."""
    return bank.lo + (bank.hi - bank.lo) * bank.model.mean(theta, bank.b, **bank.item_params())


def irt_prediction(bank: ItemBank, theta: float) -> AccuracyEstimate:
    """The mean predicted raw score of every bank item at θ̂ (tinyBenchmarks' and ATLAS' IRT estimate)."""
    return AccuracyEstimate(float(np.mean(_predicted(bank, theta))), method="irt")


def p_irt(bank: ItemBank, items, raw, theta: float, se: float, level: float = 0.95, *,
          misfit: bool = False) -> AccuracyEstimate:
    """The scores seen plus the predictions at θ̂ for the rest, with the engine's p-IRT interval
    (:func:`~lm_eval_adaptive.engine.cat.full_task.irt_full_task_estimate`)."""
    return _from_dict(irt_full_task_estimate(bank, items, raw, theta, se, level, misfit=misfit), "p-irt")


def factor_estimate(bank: ItemBank, items, raw, level: float = 0.95, *, misfit: bool = False) -> AccuracyEstimate:
    """The bank's factor-model estimate (:func:`~lm_eval_adaptive.engine.cat.full_task.factor_full_task_estimate`)."""
    if bank.factors is None:
        raise ValueError("the bank has no factor model (calibrated on too few models, or before factor models)")
    return _from_dict(factor_full_task_estimate(bank, items, raw, level, misfit=misfit), "factor")


def sample_mean(n_total: int, known, sample, level: float = 0.95) -> tuple[AccuracyEstimate, float]:
    """(estimate, its variance): ``known`` raw scores counted as they are and the other
    N_U = n_total − len(known) items estimated by the mean of ``sample`` (part of ``known``: drawn at
    random from the items not yet known), with the finite-population normal interval, variance
    s²·(N_U²/n + N_U)/N² (the error is N_U·(ȳ − Ȳ_U)/N). With ``known`` the sample alone, the plain
    mean of a simple random sample and its variance (1 − n/N)·s²/n."""
    known = np.asarray(known, dtype=float)
    sample = np.asarray(sample, dtype=float)
    n_rest = n_total - known.size
    n_s = sample.size
    if n_s == 0:
        return AccuracyEstimate(float("nan"), method="sample-mean"), float("nan")
    mean = float(np.mean(sample))
    est = (float(np.sum(known)) + n_rest * mean) / n_total
    s2 = float(np.var(sample, ddof=1)) if n_s > 1 else 0.25
    var = max(s2, 1e-12) * (n_rest * n_rest / n_s + n_rest) / (n_total * n_total)
    half = float(ndtri(0.5 + level / 2)) * np.sqrt(var)
    return AccuracyEstimate(est, est - half, est + half, "sample-mean"), var


def gp_weight(bias2: float, variance: float) -> float:
    """λ = b²/(b² + v): the MSE-optimal weight of an unbiased estimate of variance v against one of
    squared bias b² (and negligible variance)."""
    if not (bias2 >= 0 and variance >= 0) or bias2 + variance == 0:
        return 0.0
    return float(bias2 / (bias2 + variance))


def gp_irt(p_irt_estimate: float, sample_estimate: float, sample_variance: float, bias2: float) -> AccuracyEstimate:
    """tinyBenchmarks' gp-IRT: λ·sample + (1 − λ)·p-IRT, λ = :func:`gp_weight` (no interval)."""
    lam = gp_weight(bias2, sample_variance)
    if not np.isfinite(sample_estimate):
        lam, sample_estimate = 0.0, 0.0
    return AccuracyEstimate(lam * sample_estimate + (1 - lam) * p_irt_estimate, method="gp-irt")


def design_estimate(bank: ItemBank, items, raw, random_items, theta: float, se: float,
                    level: float = 0.95) -> AccuracyEstimate:
    """The difference estimator with the random share (:class:`~lm_eval_adaptive.engine.ranking.pairs.metric_scale.MetricScale`):
    ``random_items`` are the items of ``items`` a random slot drew."""
    n = bank.n_items
    row = np.full(n, np.nan)
    items = np.asarray(items, dtype=np.int64)
    row[items] = np.asarray(raw, dtype=float)
    rnd = np.zeros(n, dtype=bool)
    rnd[np.asarray(random_items, dtype=np.int64)] = True
    scale = MetricScale(bank, row[None, :], rnd[None, :], np.array([theta]), se_theta=np.array([se]), level=level)
    lo, hi = scale.interval()
    return AccuracyEstimate(float(scale.estimate[0]), float(lo[0]), float(hi[0]), "design")


def anchor_points(responses, n: int, *, seed: int = 0, restarts: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """tinyBenchmarks' anchor points: (items, weights) of ``n`` anchors of the (models × items) 0/1
    ``responses`` of calibration models (NaN: counted at the item's mean): K-means (k-means++ starts,
    the best of ``restarts`` by within-cluster sum of squares) on each item's vector of answers, the
    item nearest each centroid, weighted by the share of the items in its cluster (the weights sum to 1)."""
    from scipy.cluster.vq import kmeans2  # noqa: PLC0415 - with scipy.spatial, not needed at start-up

    Y = np.asarray(responses, dtype=float)
    mean = np.nanmean(Y, axis=0)
    X = np.where(np.isfinite(Y), Y, mean).T  # items × models
    N = X.shape[0]
    n = int(min(n, N))
    if n >= N:
        return np.arange(N), np.full(N, 1.0 / N)
    best = None
    for r in range(restarts):
        cent, lab = kmeans2(X, n, minit="++", seed=np.random.default_rng([seed, r]))
        sse = float(np.sum((X - cent[lab]) ** 2))
        if best is None or sse < best[0]:
            best = (sse, cent, lab)
    _, cent, lab = best
    items, weights = [], []
    for k in range(n):
        members = np.flatnonzero(lab == k)
        if members.size == 0:
            continue
        d = np.sum((X[members] - cent[k]) ** 2, axis=1)
        items.append(int(members[np.argmin(d)]))
        weights.append(members.size / N)
    return np.asarray(items, dtype=np.int64), np.asarray(weights, dtype=float)


def anchor_estimate(raw_anchors, weights) -> AccuracyEstimate:
    """The weighted mean of the anchors' raw scores (tinyBenchmarks' anchor estimate; no interval)."""
    return AccuracyEstimate(float(np.dot(np.asarray(weights, dtype=float), np.asarray(raw_anchors, dtype=float))),
                            method="anchor")


def information_subset(bank: ItemBank, n: int, abilities) -> np.ndarray:
    """metabench-style item subset: ``n`` items chosen for their Fisher information over the calibration
    models' ``abilities`` (one pass over the ability quantiles, each taking the most informative item
    not yet chosen at its quantile)."""
    n = int(min(n, bank.n_items))
    q = np.quantile(np.asarray(abilities, dtype=float), (np.arange(n) + 0.5) / n)
    chosen = np.zeros(bank.n_items, dtype=bool)
    out = []
    for t in q:
        info = np.where(chosen, -np.inf, bank.information(float(t)))
        i = int(np.argmax(info))
        chosen[i] = True
        out.append(i)
    return np.asarray(out, dtype=np.int64)

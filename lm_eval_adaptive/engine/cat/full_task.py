"""The full-task estimate: a model's mean raw metric over the whole task from an adaptive test's
items and ability estimate.

Two predictors of the items a model has not answered, whichever the bank has:

* a bank with a factor model of its calibration answers (``bank.factors``: 0/1 banks calibrated on
  enough models, engine/irt/factor_model.py) predicts them by the best linear predictor from the
  answers seen (:func:`factor_full_task_estimate`; docs/binary.md: on the Open LLM Leaderboard
  tables it is the most accurate of the estimators compared, and the estimate of record of 0/1
  banks);
* any other bank by its response model's curves at θ̂ (:func:`irt_full_task_estimate`: ATLAS'
  p-IRT, METHOD.md §6).
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri  # the normal quantile (scipy.stats' norm.ppf), without importing scipy.stats

from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.irt.response_model import binary_mean_bounds

__all__ = ["full_task_estimate", "irt_full_task_estimate", "factor_full_task_estimate"]


def full_task_estimate(bank: ItemBank, items, raw_scores, theta: float, se: float,
                       level: float = 0.95, *, include_dropped: bool = True, misfit: bool = False) -> dict:
    """Estimate of the model's mean raw metric over the whole task, with its ``level`` interval: by
    the bank's factor model when it has one (:func:`factor_full_task_estimate`), else by its response
    model at θ̂ (:func:`irt_full_task_estimate`). Keys: ``estimate``, ``lower``, ``upper``, ``level``,
    ``items_observed``, ``items_total``, ``method`` (``"factor"`` or ``"irt"``), ``unseen_share`` (the
    share of the items the estimate predicts) and ``error_scale`` (what the bank's model error,
    ``bank.full_task_error_sd``, is multiplied by before it widens the interval: the unseen share for
    the factor estimate, 1 for the other)."""
    if bank.factors is not None:
        return factor_full_task_estimate(bank, items, raw_scores, level, include_dropped=include_dropped,
                                         misfit=misfit)
    return irt_full_task_estimate(bank, items, raw_scores, theta, se, level, include_dropped=include_dropped,
                                  misfit=misfit)


def _dropped_means(bank: ItemBank, include_dropped: bool) -> np.ndarray:
    return np.array([d["mean_raw"] for d in bank.dropped if "mean_raw" in d]) if include_dropped \
        else np.zeros(0)


def factor_full_task_estimate(bank: ItemBank, items, raw_scores, level: float = 0.95, *,
                              include_dropped: bool = True, misfit: bool = False) -> dict:
    """The full-task mean by the bank's factor model: the scores seen plus the best linear prediction
    of the rest from them (:meth:`~lm_eval_adaptive.engine.irt.factor_model.FactorModel.full_task`).

    The interval adds in quadrature the factor model's variance of the unseen items' mean and the
    model error the bank's self-check measured for this estimator (``bank.full_task_error_sd(misfit)``),
    scaled by the unseen share u = N_U/N: the miss of a prediction is a miss on the unseen items only,
    so a full run is exact (width 0). Bounded by the metric's range."""
    z = float(ndtri(0.5 + level / 2))
    fm = bank.factors
    items = np.asarray(items, dtype=np.int64)
    raw = np.asarray(raw_scores, dtype=float)
    est, var = fm.full_task(items, raw)
    N = bank.n_items
    u = (N - np.unique(items).size) / N
    dropped = _dropped_means(bank, include_dropped)
    n = N + dropped.size
    est = (est * N + float(np.sum(dropped))) / n
    sd = np.sqrt(var) * N / n
    half = float(np.hypot(z * sd, z * bank.full_task_error_sd(misfit) * u))
    return {"estimate": est, "lower": max(est - half, fm.lo), "upper": min(est + half, fm.hi),
            "level": level, "items_observed": int(items.size), "items_total": int(n), "method": "factor",
            "unseen_share": u, "error_scale": u}


def irt_full_task_estimate(bank: ItemBank, items, raw_scores, theta: float, se: float,
                           level: float = 0.95, *, include_dropped: bool = True, misfit: bool = False) -> dict:
    """Estimate of the model's mean raw metric over the whole task (ATLAS' p-IRT blend, METHOD.md §6).

    Observed raw scores on the administered items plus the model's predicted raw scores
    (μ(θ̂, b) mapped back through the bank's stored range) on every other bank item.
    Items calibration dropped (constant, negatively correlated, ...) have no difficulty;
    with ``include_dropped`` they count with their calibration models' mean raw score
    (exact for constant items), so the estimate is over every task document the
    calibration saw. The interval adds linearly (a conservative combination) the ability
    uncertainty (θ̂ ± z·SE pushed through the prediction) and the response-model noise of
    the unobserved items, then in quadrature the model error the bank's self-check measured
    (``bank.full_task_error_sd(misfit)``: how far full-task estimates of left-out models
    missed; ``misfit``: the person-fit statistic flags this model).
    """
    z = float(ndtri(0.5 + level / 2))
    items = np.asarray(items, dtype=np.int64)
    rest = np.ones(bank.n_items, dtype=bool)
    rest[items] = False
    span = bank.hi[rest] - bank.lo[rest]
    dropped = _dropped_means(bank, include_dropped)
    fixed = float(np.sum(raw_scores)) + float(np.sum(dropped))
    n = bank.n_items + dropped.size

    def total(t):
        return fixed + float(np.sum(bank.lo[rest] + span * bank.model.mean(t, bank.b[rest], **bank.item_params(rest))))

    est = total(theta) / n
    lo_t = total(theta - z * se) / n
    hi_t = total(theta + z * se) / n
    mu = bank.model.mean(theta, bank.b[rest], **bank.item_params(rest))
    k = bank.k if bank.k is not None else 1.0
    noise_sd = float(np.sqrt(np.sum(k * mu * (1 - mu) * span ** 2))) / n
    lower, upper = lo_t - z * noise_sd, hi_t + z * noise_sd
    extra = z * bank.full_task_error_sd(misfit)  # the model error the bank's self-check measured, in quadrature
    if extra > 0:
        lower = est - float(np.hypot(est - lower, extra))
        upper = est + float(np.hypot(upper - est, extra))
    bounds = binary_mean_bounds(bank.model, fixed, float(rest.sum()), n)  # issue 31 saw [0.8107, 1.0030]
    if bounds is not None:
        lower, upper = max(lower, float(bounds[0])), min(upper, float(bounds[1]))
    return {"estimate": est, "lower": lower, "upper": upper,
            "level": level, "items_observed": int(items.size), "items_total": int(n), "method": "irt",
            "unseen_share": float(rest.sum()) / n, "error_scale": 1.0}

"""The full-task estimate: a model's mean raw metric over the whole task from an adaptive test's
items and ability estimate (ATLAS' p-IRT blend, METHOD.md §6).
"""

from __future__ import annotations

import numpy as np

from lm_eval_adaptive.engine.bank import ItemBank

__all__ = ["full_task_estimate"]


def full_task_estimate(bank: ItemBank, items, raw_scores, theta: float, se: float,
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
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + level / 2))
    items = np.asarray(items, dtype=np.int64)
    rest = np.ones(bank.n_items, dtype=bool)
    rest[items] = False
    span = bank.hi[rest] - bank.lo[rest]
    dropped = np.array([d["mean_raw"] for d in bank.dropped if "mean_raw" in d]) if include_dropped \
        else np.zeros(0)
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
    return {"estimate": est, "lower": lower, "upper": upper,
            "level": level, "items_observed": int(items.size), "items_total": int(n)}

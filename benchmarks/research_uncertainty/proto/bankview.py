"""A view of an engine ItemBank with everything the prototype needs (research code).

Adds to the engine bank: item slopes ``a`` (1 for the 1PL bank; fitted by :func:`fit_2pl`),
the mapping bank item -> table item, and the calibration models' mean raw score of every table
item (the prediction for items the bank dropped).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import expit

from lm_eval_adaptive.engine.bank import ItemBank
from lm_eval_adaptive.engine.calibration import calibrate


@dataclass
class BankView:
    bank: ItemBank
    b: np.ndarray
    a: np.ndarray
    k: float
    lo: np.ndarray
    hi: np.ndarray
    tpos: np.ndarray          # table index of each bank item
    n_task: int               # items in the table
    task_pred_other: np.ndarray  # (n_task,) calibration models' mean raw of each table item
    bank_of_task: np.ndarray  # (n_task,) bank index of each table item, -1 if not in bank
    theta_cal: np.ndarray     # abilities of the calibration models (bank scale)
    extra: dict = field(default_factory=dict)

    @property
    def n_items(self) -> int:
        return int(self.b.size)

    @property
    def prior_mean(self) -> float:
        return float(np.median(self.b))

    @property
    def span(self) -> np.ndarray:
        return self.hi - self.lo

    def mu(self, theta, items=None):
        if items is None:
            return expit(self.a * (theta - self.b))
        return expit(self.a[items] * (theta - self.b[items]))

    def predict_task_raw(self, theta: float) -> np.ndarray:
        """Predicted raw score of every table item at ability theta."""
        out = self.task_pred_other.copy()
        out[self.tpos] = self.lo + self.span * self.mu(theta)
        return out

    def scale(self, items, raw):
        return np.clip((raw - self.lo[items]) / (self.hi[items] - self.lo[items]), 0.0, 1.0)


def table_positions(table, bank) -> np.ndarray:
    pos = {v: i for i, v in enumerate(np.asarray(table.items, dtype=object).tolist())}
    return np.array([pos[str(x)] for x in bank.item_ids], dtype=np.int64)


def make_view(table, calib_models, *, method="joint", scaling="global", slopes=None) -> BankView:
    """Calibrate with the engine on ``calib_models`` and wrap the bank.

    ``slopes``: None (1PL) or a dict of :func:`fit_2pl` options.
    """
    sub = table.select_models(calib_models)
    bank = calibrate(sub, scaling=scaling, method=method, metric=getattr(table, "metric", None))
    tpos = table_positions(table, bank)
    raw = sub.mean_matrix()
    with np.errstate(invalid="ignore"):
        other = np.nanmean(raw, axis=0)
    other = np.where(np.isfinite(other), other, np.nanmean(raw))
    bot = np.full(table.n_items, -1, dtype=np.int64)
    bot[tpos] = np.arange(bank.n_items)
    ab = bank.diagnostics["abilities"]
    theta_cal = np.array([ab[str(m)] for m in calib_models])
    view = BankView(bank=bank, b=bank.b.copy(), a=np.ones(bank.n_items), k=float(bank.k), lo=bank.lo.copy(),
                    hi=bank.hi.copy(), tpos=tpos, n_task=table.n_items, task_pred_other=other,
                    bank_of_task=bot, theta_cal=theta_cal)
    # scaled calibration matrix on bank items, kept for calibration-time statistics
    Y = np.clip((raw[:, tpos] - view.lo) / view.span, 0, 1)
    view.extra["Y_cal"] = Y
    view.extra["raw_cal"] = raw
    if slopes is not None:
        fit_2pl(view, **slopes)
    return view


def fit_2pl(view: BankView, *, tau: float = 0.3, iterations: int = 200, b_prior_sd: float = 10.0) -> None:
    """Item slopes a_i (continuous 2PL, quasi-likelihood), shrunk by a N(0, tau²) prior on log a_i.

    Alternating Newton steps over θ_j (calibration models), b_i and log a_i, starting at the
    1PL bank; after each sweep the slopes are renormalised to geometric mean 1 (θ, b rescaled)
    and θ re-centred, so the scale stays the 1PL bank's. k is re-estimated by moments.
    """
    Y = view.extra["Y_cal"]
    P = ~np.isnan(Y)
    Yz = np.where(P, Y, 0.0)
    th = view.theta_cal.copy()
    b = view.b.copy()
    la = np.zeros_like(b)
    k = view.k
    for it in range(iterations):
        a = np.exp(la)
        x = a[None, :] * (th[:, None] - b[None, :])
        mu = expit(x)
        v = mu * (1 - mu) * P
        r = (Yz - mu) * P
        # theta
        g = (r * a).sum(1)
        h = (v * a * a).sum(1)
        th = th + np.clip(g / np.maximum(h, 1e-9), -1, 1)
        mu = expit(a[None, :] * (th[:, None] - b[None, :]))
        v = mu * (1 - mu) * P
        r = (Yz - mu) * P
        # b: dQ/db = -a Σ r ; info a² Σ v
        g = -(a * r.sum(0)) / k - b / b_prior_sd ** 2
        h = (a * a * v.sum(0)) / k + 1 / b_prior_sd ** 2
        sb = np.clip(g / h, -1, 1)
        b = b + sb
        # log a: dQ/dla = a Σ r (θ-b) ; info ≈ a² Σ v (θ-b)²
        d = th[:, None] - b[None, :]
        mu = expit(a[None, :] * d)
        v = mu * (1 - mu) * P
        r = (Yz - mu) * P
        g = (a * (r * d).sum(0)) / k - la / tau ** 2
        h = (a * a * (v * d * d).sum(0)) / k + 1 / tau ** 2
        sa = np.clip(g / h, -0.5, 0.5)
        la = la + sa
        # renormalise: geometric mean slope 1, mean ability 0
        c = la.mean()
        la -= c
        s = np.exp(c)  # a' = a/s, so θ and b scale by s
        th = th * s
        b = b * s
        m = th.mean()
        th -= m
        b -= m
        if max(np.abs(sb).max(), np.abs(sa).max()) < 1e-6:
            break
    a = np.exp(la)
    mu = expit(a[None, :] * (th[:, None] - b[None, :]))
    k_new = float(np.sum(((Yz - mu) ** 2) * P) / np.sum(mu * (1 - mu) * P))
    view.b = b
    view.a = a
    view.k = k_new
    view.theta_cal = th
    view.extra["slopes"] = {"tau": tau, "iterations": it + 1, "sd_log_a": float(la.std())}

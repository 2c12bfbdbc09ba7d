"""Full-task mean estimators with intervals, and pairwise decision rules (research prototype).

Full-task mean T_m = mean raw metric of model m over every table item it has a score for.

* :func:`ft_engine` -- today's engine ``full_task_estimate`` (p-IRT blend; θ ± z·SE pushed
  through the prediction, plus response-model noise, added linearly).
* :func:`ft_model` -- the same blend with an honest SE (any estimator's ``sd``), the
  model noise scaled by φ_m, and optionally an extra "misfit" SD σ_T (remedy 8: the spread of
  full-task prediction errors measured by leave-models-out CV at calibration), combined in
  quadrature (normal) or linearly (as the engine).
* :func:`ft_design` -- remedy 4: the model-assisted difference estimator
  T̂ = mean_i x̂_i(θ̂) + mean_{i∈S}(x_i - x̂_i) over a simple random sample S; variance
  (1 - r/N)·s_e²/r; t interval with r-1 df. Holds whatever the response model.

Pair rules (remedy 5) return a :class:`PairStat` (difference d in the rule's units, its SE, df,
and d, SE converted to metric units for the equivalence test); :func:`decide` turns it into
"order" | "tie" | None: order when |d|/se > t_{1-α/2}; tie (TOST at α) when
|d_T| + t_{1-α}·se_T < δ.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats
from scipy.special import expit

from lm_eval_adaptive.engine.cat import full_task_estimate

from .bankview import BankView
from .state import ModelState


def _q(level_two_sided: float, df: float) -> float:
    p = 0.5 + level_two_sided / 2
    return float(stats.norm.ppf(p)) if not np.isfinite(df) else float(stats.t.ppf(p, df))


# ---------------------------------------------------------------- full-task mean
def ft_engine(bv: BankView, st: ModelState, level=0.95):
    it, raw = st.bank_items_observed()
    r = full_task_estimate(bv.bank, it, raw, st.est.mean, st.est.model_sd, level)
    return r["estimate"], r["lower"], r["upper"]


def task_mean_pred(bv: BankView, st: ModelState, theta: float) -> float:
    """Prediction of the model's full-task mean at θ: observed raw where seen, x̂ elsewhere."""
    x = bv.predict_task_raw(theta)
    x = np.where(st.observed, np.nan_to_num(st.raw), x)
    return float(np.mean(x[st.avail]))


def task_slope(bv: BankView, st: ModelState, theta: float, h: float = 0.05) -> float:
    """dT/dθ of the prediction (unobserved items only contribute)."""
    return (task_mean_pred(bv, st, theta + h) - task_mean_pred(bv, st, theta - h)) / (2 * h)


def ft_model(bv: BankView, st: ModelState, level=0.95, *, extra_sd: float = 0.0, combine: str = "quadrature"):
    est = st.est
    th, se, phi, df = est.mean, est.sd, est.phi, est.df
    q = _q(level, df)
    T = task_mean_pred(bv, st, th)
    unobs = st.avail & ~st.observed
    N = int(st.avail.sum())
    # response-model noise of the unobserved items (raw units), scaled by φ
    ib = bv.bank_of_task[unobs]
    ib = ib[ib >= 0]
    mu = bv.mu(th, ib)
    noise_sd = float(np.sqrt(np.sum(bv.k * phi * mu * (1 - mu) * bv.span[ib] ** 2))) / N
    if combine == "linear":
        lo_t = task_mean_pred(bv, st, th - q * se)
        hi_t = task_mean_pred(bv, st, th + q * se)
        lo = lo_t - q * np.hypot(noise_sd, extra_sd)
        hi = hi_t + q * np.hypot(noise_sd, extra_sd)
        return T, lo, hi
    s = np.sqrt((task_slope(bv, st, th) * se) ** 2 + noise_sd ** 2 + extra_sd ** 2)
    return T, T - q * s, T + q * s


def ft_design(bv: BankView, st: ModelState, level=0.95, *, min_r: int = 4):
    """Difference estimator over the model's random sample; (nan, nan, nan) if r < min_r."""
    S = st.sample()
    r = S.size
    if r < min_r:
        return np.nan, np.nan, np.nan
    x_hat = bv.predict_task_raw(st.est.mean)
    N = int(st.avail.sum())
    e = st.raw[S] - x_hat[S]
    T = float(np.mean(x_hat[st.avail])) + float(e.mean())
    se = float(np.sqrt(max(1 - r / N, 0.0) * e.var(ddof=1) / r))
    q = _q(level, r - 1)
    return T, T - q * se, T + q * se


# ---------------------------------------------------------------- pair rules
@dataclass
class PairStat:
    d: float        # difference a - b in the rule's units (θ or metric)
    se: float
    df: float
    d_metric: float
    se_metric: float


def _metric_conv(bv, a: ModelState, b: ModelState, d_theta_se: float):
    ta, tb = a.est.mean, b.est.mean
    Ta, Tb = task_mean_pred(bv, a, ta), task_mean_pred(bv, b, tb)
    slope = 0.5 * (task_slope(bv, a, ta) + task_slope(bv, b, tb))
    return Ta - Tb, abs(slope) * d_theta_se


def rule_theta_indep(bv, a: ModelState, b: ModelState, *, metric=True) -> PairStat:
    """Today's rule: independent normal posteriors on θ (with the estimator's SE)."""
    d = a.est.mean - b.est.mean
    se = float(np.hypot(a.est.sd, b.est.sd))
    df = min(a.est.df, b.est.df)
    dm, sm = _metric_conv(bv, a, b, se) if metric else (np.nan, np.nan)
    return PairStat(d, se, df, dm, sm)


def _influence(st: ModelState):
    """Per bank item influence u_i = a_i(y_i-μ_i)/(k·I) of each observed item on θ̂."""
    est = st.est
    a, r, v = est.residuals()
    k = st.bv.k
    info = np.sum(a * a * v) / k + 1.0 / 25.0
    return np.asarray(est.items, dtype=np.int64), a * r / (k * info)


def rule_theta_paired(bv, a: ModelState, b: ModelState, *, max_corr=0.9, metric=True) -> PairStat:
    """Paired θ comparison: Var(θ̂_a-θ̂_b) = V_a + V_b - 2·Cov_ab, Cov_ab the sandwich cross term
    Σ_{common items} u_ai·u_bi, correlation clipped to [0, max_corr]."""
    ia, ua = _influence(a)
    ib, ub = _influence(b)
    common, pa, pb = np.intersect1d(ia, ib, assume_unique=True, return_indices=True)
    cov = float(np.sum(ua[pa] * ub[pb])) if common.size else 0.0
    va, vb = a.est.sd ** 2, b.est.sd ** 2
    # the cross-product is on the sandwich scale; express it as a correlation of the sandwich
    # parts and apply it to the (possibly inflated) variances
    swa, swb = float(np.sum(ua * ua)), float(np.sum(ub * ub))
    corr = cov / np.sqrt(swa * swb) if swa > 0 and swb > 0 else 0.0
    corr = float(np.clip(corr, 0.0, max_corr))
    var = va + vb - 2 * corr * np.sqrt(va * vb)
    se = float(np.sqrt(max(var, 1e-12)))
    d = a.est.mean - b.est.mean
    df = min(a.est.df, b.est.df)
    dm, sm = _metric_conv(bv, a, b, se) if metric else (np.nan, np.nan)
    return PairStat(d, se, df, dm, sm)


def rule_design_paired(bv, a: ModelState, b: ModelState, *, min_r: int = 4) -> PairStat:
    """Design-based paired difference of full-task means on the common random items."""
    Sa, Sb = a.sample(), b.sample()
    both = a.avail & b.avail
    common = np.intersect1d(Sa, Sb)
    common = common[both[common]]
    r = common.size
    xa = bv.predict_task_raw(a.est.mean)
    xb = bv.predict_task_raw(b.est.mean)
    N = int(both.sum())
    pred = float(np.mean(xa[both] - xb[both]))
    if r < min_r:
        return PairStat(np.nan, np.inf, 1.0, np.nan, np.inf)
    e = (a.raw[common] - xa[common]) - (b.raw[common] - xb[common])
    d = pred + float(e.mean())
    se = float(np.sqrt(max(1 - r / N, 0.0) * e.var(ddof=1) / r))
    return PairStat(d, se, r - 1, d, se)


def decide(ps: PairStat, *, confidence=0.95, delta: float | None = None, tie_alpha: float = 0.05) -> str | None:
    """"order" (a vs b confidently ordered by sign of d), "tie" (TOST within ±δ at level
    tie_alpha: the (1-2·tie_alpha) interval of the metric difference lies inside ±δ), or None."""
    if not np.isfinite(ps.se) or not np.isfinite(ps.d):
        return None
    q = _q(confidence, ps.df)
    if ps.se <= 0 or abs(ps.d) / ps.se > q:
        return "order"
    if delta is not None and np.isfinite(ps.se_metric):
        q1 = _q(1 - 2 * tie_alpha, ps.df)  # one-sided (1 - tie_alpha) quantile
        if abs(ps.d_metric) + q1 * ps.se_metric < delta:
            return "tie"
    return None


RULES = {"theta_indep": rule_theta_indep, "theta_paired": rule_theta_paired, "design_paired": rule_design_paired}

"""Calibration of a binary (0/1) response table under the 2PL or 3PL model.

P(y_ji = 1) = c_i + (1 - c_i)·logistic(a_i·(θ_j - b_i)) (engine/response_model.py,
:class:`~lm_eval_adaptive.engine.response_model.BinaryIRTModel`). The fit is a regularised
joint maximum a posteriori (JML with priors) over every model's ability and every item's
parameters at once, with scipy's L-BFGS-B on the analytic gradient (vectorised over the
observations with ``np.bincount``):

* θ_j ~ N(0, 1): sets the scale (a and θ trade off otherwise) and keeps a model that
  answers everything right (or wrong) finite;
* b_i ~ N(0, ``b_prior_sd``²), log a_i ~ N(log 1, ``log_a_prior_sd``²): with a few dozen
  calibration models an item's discrimination rests on few bits; the prior shrinks it to 1;
* 3PL: c_i fixed when known (``guessing``: 1/k for a k-option multiple-choice item), else
  estimated with logit c_i ~ N(logit 0.2, 1).

Repeated rows of a (model, item) pair count as several Bernoulli observations. Items whose
calibration scores are all equal carry no information and are dropped (``constant``), and so
are items whose scores correlate negatively with ability (``negative_correlation``, unless
``drop_negative=False``). The ability scale is then set to mean 0, SD 1 over the calibration
models (difficulties and discriminations mapped with it; the likelihood is unchanged).
Scores are taken as they are (scaling ``none``, range [0, 1]): the table must hold 0 and 1 only.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, logit

from lm_eval_adaptive import __version__
from lm_eval_adaptive.engine.bank import ItemBank
from lm_eval_adaptive.engine.response_model import BINARY_KINDS, BinaryIRTModel
from lm_eval_adaptive.errors import InputError

__all__ = ["calibrate_binary", "is_binary_table", "DEFAULT_GUESSING_PRIOR"]

#: Prior mean of an estimated 3PL guessing parameter (logit-normal, SD 1 on the logit scale).
DEFAULT_GUESSING_PRIOR = 0.2
_B_PRIOR_SD = 3.0
_LOG_A_PRIOR_SD = 0.5
_C_LOGIT_PRIOR_SD = 1.0
_EPS = 1e-12


def is_binary_table(table) -> bool:
    """Every score of ``table`` is 0 or 1 (a 2PL/3PL table). A long table's ``score`` or a dense
    table's ``scores`` (NaN: missing)."""
    s = np.asarray(table.score if hasattr(table, "score") else table.scores, dtype=float).ravel()
    s = s[~np.isnan(s)]
    return bool(s.size) and bool(np.all((s == 0.0) | (s == 1.0)))


def _long_format(table):
    """The table in long format (a dense table that can say it as one, converted)."""
    return table if hasattr(table, "model_idx") or not hasattr(table, "to_table") else table.to_table()


def _guessing_vector(guessing, item_ids: np.ndarray) -> np.ndarray | None:
    """Per-item fixed c (NaN: estimate), from a number, a mapping item id -> c, or None."""
    n = item_ids.size
    if guessing is None:
        return None
    if isinstance(guessing, Mapping):
        c = np.array([float(guessing.get(str(i), np.nan)) for i in item_ids])
    else:
        c = np.full(n, float(guessing))
    bad = np.isfinite(c) & ~((c >= 0) & (c < 1))
    if np.any(bad):
        raise InputError(f"guessing parameters must lie in [0, 1), got {c[bad][0]!r}")
    return c


def calibrate_binary(table, *, response_model: str = "2pl", guessing=None, drop_negative: bool = True,
                     b_prior_sd: float = _B_PRIOR_SD, log_a_prior_sd: float = _LOG_A_PRIOR_SD,
                     task: str | None = None, metric: str | None = None) -> ItemBank:
    """A 2PL/3PL :class:`ItemBank` from a 0/1 response table (see the module docstring).

    ``guessing`` (3PL only): c for every item (a number, e.g. 0.25 for four options) or per
    item (a mapping item id -> c; items it leaves out are estimated); None: every c estimated.
    """
    if response_model not in BINARY_KINDS:
        raise InputError(f"binary calibration fits {' or '.join(BINARY_KINDS)}, not {response_model!r}")
    if response_model == "2pl" and guessing is not None:
        raise InputError("a guessing parameter needs the 3pl response model")
    table = _long_format(table)
    M, N = int(table.n_models), int(table.n_items)
    if M < 2:
        raise InputError(f"calibration needs at least 2 models, the table has {M}", path=table.source)
    if not is_binary_table(table):
        raise InputError(f"the {response_model} response model takes scores 0 or 1 only; this table has others "
                         "(use --response-model continuous)", path=table.source)
    mi = np.asarray(table.model_idx, dtype=np.int64)
    ii = np.asarray(table.item_idx, dtype=np.int64)
    y = np.asarray(table.score, dtype=float)
    item_ids = np.asarray(table.items, dtype=object)
    models = [str(m) for m in table.models]

    # -- filters ----------------------------------------------------------------------
    n_obs = np.bincount(ii, minlength=N)
    ones = np.bincount(ii, weights=y, minlength=N)
    dropped: dict[int, str] = {int(i): "no_observations" for i in np.flatnonzero(n_obs == 0)}
    for i in np.flatnonzero((n_obs > 0) & ((ones == 0) | (ones == n_obs))):
        dropped[int(i)] = "constant"
    model_mean = np.bincount(mi, weights=y, minlength=M) / np.maximum(np.bincount(mi, minlength=M), 1)
    ability0 = logit(np.clip(model_mean, 0.02, 0.98))
    keep = np.ones(N, dtype=bool)
    keep[list(dropped)] = False
    if drop_negative:
        r = _item_ability_corr(mi, ii, y, ability0, N)
        for i in np.flatnonzero(keep & (r < 0)):
            dropped[int(i)] = "negative_correlation"
        keep &= ~(r < 0)
    kept = np.flatnonzero(keep)
    if kept.size < 2:
        raise InputError(f"only {kept.size} item(s) left after filtering; cannot calibrate", path=table.source)

    # -- fit on the kept items -----------------------------------------------------------
    pos = np.full(N, -1, dtype=np.int64)
    pos[kept] = np.arange(kept.size)
    use = keep[ii]
    fixed_c = _guessing_vector(guessing, item_ids[kept]) if response_model == "3pl" else np.zeros(kept.size)
    if fixed_c is None:
        fixed_c = np.full(kept.size, np.nan)
    theta, b, a, c, nll = _fit(mi[use], pos[ii[use]], y[use], M, kept.size, fixed_c,
                               ability0, ones[kept] / n_obs[kept], b_prior_sd, log_a_prior_sd)
    # the ability scale: mean 0, SD 1 over the calibration models (the likelihood is unchanged:
    # θ' = (θ - m)/s, b' = (b - m)/s, a' = a·s; the priors alone compress a joint fit's θ)
    shift, scale = float(theta.mean()), float(theta.std())
    scale = scale if scale > 1e-6 else 1.0
    theta, b, a = (theta - shift) / scale, (b - shift) / scale, a * scale

    with np.errstate(invalid="ignore", divide="ignore"):
        raw_item_mean = ones / n_obs
    reasons: dict[str, int] = {}
    for v in dropped.values():
        reasons[v] = reasons.get(v, 0) + 1
    estimated_c = response_model == "3pl" and bool(np.any(np.isnan(fixed_c)))
    diagnostics = {
        "n_models": M, "n_items_in": N, "n_items_kept": int(kept.size), "n_observations": int(y.size),
        "k": None, "response_model": response_model,
        "discrimination": float(np.mean(a)),
        "discrimination_quantiles": [round(float(v), 4) for v in np.quantile(a, [0.05, 0.5, 0.95])],
        "guessing_mean": float(np.mean(c)),
        "conformance_r2": None,
        "neg_log_posterior": float(nll),
        "dropped_by_reason": reasons,
        "abilities": {m: round(float(t), 6) for m, t in zip(models, theta)},
        "mean_raw_score": {m: round(float(v), 6) for m, v in zip(models, model_mean)},
    }
    in_tok, out_tok = table.item_tokens()
    return ItemBank(
        item_ids=item_ids[kept], b=b, model=BinaryIRTModel(response_model), scaling="none", lo=0.0, hi=1.0,
        input_tokens=in_tok[kept], output_tokens=out_tok[kept], a=a, c=c,
        task=task, metric=metric if metric is not None else getattr(table, "metric", None),
        dropped=[_dropped_entry(item_ids[i], dropped[i], raw_item_mean[i]) for i in sorted(dropped)],
        diagnostics=diagnostics,
        calibration={"method": "jml-map", "response_model": response_model, "scaling": "none",
                     "guessing": ("estimated" if estimated_c else
                                  (float(c[0]) if response_model == "3pl" and np.all(c == c[0]) else
                                   ("per_item" if response_model == "3pl" else None))),
                     "priors": {"theta_sd": 1.0, "b_sd": b_prior_sd, "log_a_sd": log_a_prior_sd,
                                **({"c_logit_mean": float(logit(DEFAULT_GUESSING_PRIOR)),
                                    "c_logit_sd": _C_LOGIT_PRIOR_SD} if estimated_c else {})},
                     "drop_negative": drop_negative, "models": models,
                     "source": str(getattr(table, "source", "")), "software": f"lm-eval-adaptive {__version__}"},
    )


def _fit(mi, ii, y, M, N, fixed_c, theta0, p_item, b_sd, log_a_sd):
    """Joint MAP of θ (M), b, log a and (where ``fixed_c`` is NaN) logit c (N each)."""
    free_c = np.isnan(fixed_c)
    nc = int(free_c.sum())
    c_prior = float(logit(DEFAULT_GUESSING_PRIOR))
    # start: θ from the models' means, b from the items' (logit of the share wrong), a = 1
    b0 = logit(np.clip(1 - p_item, 0.02, 0.98)) + float(np.mean(theta0))
    x0 = np.concatenate([np.clip(theta0 - theta0.mean(), -3, 3), b0, np.zeros(N), np.full(nc, c_prior)])
    free_idx = np.flatnonzero(free_c)

    def unpack(x):
        theta, b, log_a = x[:M], x[M:M + N], x[M + N:M + 2 * N]
        c = np.where(free_c, 0.0, np.nan_to_num(fixed_c))
        c[free_idx] = expit(x[M + 2 * N:])
        return theta, b, log_a, c

    def objective(x):
        theta, b, log_a, c = unpack(x)
        a = np.exp(log_a)
        d = theta[mi] - b[ii]
        z = a[ii] * d
        q = expit(z)
        ci = c[ii]
        p = np.clip(ci + (1 - ci) * q, _EPS, 1 - _EPS)
        ll = np.sum(y * np.log(p) + (1 - y) * np.log1p(-p))
        # dLL/dz = (y - p)/(p(1-p)) · (1-c)·q(1-q)
        r = (y - p) / (p * (1 - p))
        dz = r * (1 - ci) * q * (1 - q)
        g_theta = np.bincount(mi, weights=dz * a[ii], minlength=M)
        g_b = -np.bincount(ii, weights=dz * a[ii], minlength=N)
        g_loga = np.bincount(ii, weights=dz * z, minlength=N)
        # priors (log densities, up to constants)
        lp = (-0.5 * np.sum(theta ** 2) - 0.5 * np.sum((b / b_sd) ** 2) - 0.5 * np.sum((log_a / log_a_sd) ** 2))
        g_theta -= theta
        g_b -= b / b_sd ** 2
        g_loga -= log_a / log_a_sd ** 2
        grads = [g_theta, g_b, g_loga]
        if nc:
            g_c_all = np.bincount(ii, weights=r * (1 - q), minlength=N)  # dLL/dc
            lc = x[M + 2 * N:]
            cf = c[free_idx]
            g_lc = g_c_all[free_idx] * cf * (1 - cf) - (lc - c_prior) / _C_LOGIT_PRIOR_SD ** 2
            lp -= 0.5 * np.sum(((lc - c_prior) / _C_LOGIT_PRIOR_SD) ** 2)
            grads.append(g_lc)
        return -(ll + lp), -np.concatenate(grads)

    res = minimize(objective, x0, jac=True, method="L-BFGS-B",
                   options={"maxiter": 5000, "maxfun": 10000, "gtol": 1e-6})
    theta, b, log_a, c = unpack(res.x)
    return theta, b, np.exp(log_a), c, res.fun


def _item_ability_corr(mi, ii, y, ability, N) -> np.ndarray:
    """Pearson correlation per item of its 0/1 scores with the models' abilities (NaN: undefined)."""
    x = ability[mi]
    n = np.bincount(ii, minlength=N).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = np.bincount(ii, weights=x, minlength=N) / n
        my = np.bincount(ii, weights=y, minlength=N) / n
        dx, dy = x - mx[ii], y - my[ii]
        cov = np.bincount(ii, weights=dx * dy, minlength=N)
        sx = np.sqrt(np.bincount(ii, weights=dx * dx, minlength=N))
        sy = np.sqrt(np.bincount(ii, weights=dy * dy, minlength=N))
        r = cov / (sx * sy)
    r[(n < 3) | ~(sx > 1e-12) | ~(sy > 1e-12)] = np.nan
    return r


def _dropped_entry(item_id, reason: str, mean_raw: float) -> dict:
    d = {"id": str(item_id), "reason": reason}
    if np.isfinite(mean_raw):
        d["mean_raw"] = round(float(mean_raw), 6)
    return d

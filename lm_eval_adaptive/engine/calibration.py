"""Calibration: item difficulties and the noise parameter k from full runs of many models.

Implements METHOD.md §2 on a long-format :class:`~lm_eval_adaptive.data.responses.ResponseTable`
(missing (model, item) pairs allowed; repeated rows are several observations, averaged
per model for difficulties and kept one by one for k). Everything is vectorised over
observations with ``np.bincount``.

Steps
0. Refuse a table with a score far outside the bulk of its scores (one corrupt value would
   squash every other score in the global min-max range; the rule is in
   :mod:`lm_eval_adaptive.data.responses`), unless the table was read with
   ``allow_outliers=True``.
1. Scale raw scores into [0, 1]: ``global`` (one min/max over all calibration
   observations, the reference code) or ``per_item`` (each item's own min/max across the
   calibration models, the paper's data preparation). Items whose calibration scores are
   all equal carry no information and are dropped (``constant``).
2. Model abilities θ_j = logit(ȳ_j), ȳ_j the model's mean scaled score.
3. Drop items whose (model-averaged) scores correlate negatively with ability
   (``negative_correlation``); optional ATLAS filters (``low_variance``, ``too_easy``,
   ``low_point_biserial``).
4. Difficulties: p̂_i = mean scaled score of item i, min-max normalised to [ε, 1-ε],
   b_i = log((1-p̂_i)/p̂_i); abilities and difficulties shifted so mean ability is 0.
5. k = Σ(y - μ)² / Σ μ(1-μ) over every observation of the kept items, μ = logistic(θ_j - b_i).
6. Conformance: bin observations by predicted μ, compare the observed residual variance
   with k·μ(1-μ) per bin, report R².
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, logit

from lm_eval_adaptive import __version__
from lm_eval_adaptive.data.responses import check_score_outliers
from lm_eval_adaptive.engine.bank import SCALINGS, ItemBank
from lm_eval_adaptive.engine.binary_calibration import calibrate_binary, is_binary_table
from lm_eval_adaptive.engine.response_model import ContinuousResponseModel
from lm_eval_adaptive.errors import InputError

__all__ = ["calibrate", "DEFAULT_SCALING", "DEFAULT_EPSILON", "RESPONSE_MODELS", "resolve_response_model"]

#: Chosen by backtest on the real tables: see docs/calibration.md.
DEFAULT_SCALING = "per_item"
DEFAULT_EPSILON = 1e-3
METHODS = ("moments", "joint")
DEFAULT_METHOD = "joint"
_JOINT_ITERATIONS = 100
_JOINT_B_PRIOR_SD = 10.0
_ABILITY_CLIP = 1e-6
#: ``calibrate(response_model=...)``: the continuous model (METHOD.md §1) or a binary 2PL/3PL
#: (engine/binary_calibration.py).
RESPONSE_MODELS = ("continuous", "2pl", "3pl")


def resolve_response_model(table, response_model: str | None) -> str:
    """The response model to calibrate ``table`` with: as asked, or by default ``2pl`` for a table
    of 0/1 scores (accuracy, exact match, win/lose) and ``continuous`` for any other."""
    if response_model is None:
        return "2pl" if is_binary_table(table) else "continuous"
    if response_model not in RESPONSE_MODELS:
        raise InputError(f"unknown response model {response_model!r}; choose one of {', '.join(RESPONSE_MODELS)}")
    return response_model


def _nanmean_rows(x: np.ndarray) -> np.ndarray:
    cnt = np.sum(~np.isnan(x), axis=1)
    s = np.nansum(x, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(cnt > 0, s / np.maximum(cnt, 1), np.nan)


def _column_corr(Y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Pearson correlation of each column of Y (NaN = missing) with vector x, over rows present."""
    present = ~np.isnan(Y)
    n = present.sum(axis=0)
    X = np.where(present, x[:, None], 0.0)
    Yz = np.where(present, Y, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = X.sum(axis=0) / n
        my = Yz.sum(axis=0) / n
        dx = np.where(present, X - mx, 0.0)
        dy = np.where(present, Yz - my, 0.0)
        cov = (dx * dy).sum(axis=0)
        sx = np.sqrt((dx * dx).sum(axis=0))
        sy = np.sqrt((dy * dy).sum(axis=0))
        r = cov / (sx * sy)
    r[(n < 3) | (sx < 1e-12) | (sy < 1e-12)] = np.nan
    return r


def conformance_r2(y: np.ndarray, mu: np.ndarray, k: float, n_bins: int = 10) -> dict:
    """Observed vs predicted variance k·μ(1-μ) in equal-count bins of predicted μ."""
    order = np.argsort(mu, kind="stable")
    bins = np.array_split(order, min(n_bins, max(1, mu.size // 2)))
    obs = np.array([np.mean((y[b] - mu[b]) ** 2) for b in bins])
    pred = np.array([k * np.mean(mu[b] * (1 - mu[b])) for b in bins])
    centre = np.array([np.mean(mu[b]) for b in bins])
    ss_tot = np.sum((obs - obs.mean()) ** 2)
    r2 = float(1 - np.sum((obs - pred) ** 2) / ss_tot) if ss_tot > 0 else float("nan")
    return {"r2": r2, "bins": [{"mu": round(float(c), 4), "observed_var": round(float(o), 6),
                                "predicted_var": round(float(p), 6)}
                               for c, o, p in zip(centre, obs, pred)]}


def calibrate(table, *, scaling: str = DEFAULT_SCALING, epsilon: float = DEFAULT_EPSILON,
              drop_negative: bool = True, atlas_filters: bool = False,
              likelihood: str = "quasi", method: str = DEFAULT_METHOD, task: str | None = None,
              metric: str | None = None, response_model: str | None = None, guessing=None) -> ItemBank:
    """Build an :class:`ItemBank` from a response table of full runs (see module docstring).

    Parameters
    ----------
    table:
        A ResponseTable with at least 2 models. Its scores are checked for outliers
        (step 0) unless ``table.outliers_allowed``.
    scaling:
        ``"global"`` or ``"per_item"`` (see module docstring).
    epsilon:
        Difficulties come from p̂ min-max normalised to [ε, 1-ε].
    drop_negative:
        Drop items whose scores correlate negatively with model ability.
    atlas_filters:
        Also drop items with score SD < 1%, mean > 95% or point-biserial < 0.1 (ATLAS).
    likelihood:
        Likelihood the bank's response model will use in estimation ("quasi" or "normal").
    method:
        ``"moments"``: METHOD.md §2 exactly (difficulties from min-max normalised item
        means, abilities from model means). ``"joint"``: start there, then maximise the
        quasi-likelihood jointly over abilities and difficulties (alternating Newton
        steps, a weak N(0, 10²) prior on b), which puts b and θ on one consistent scale.
    response_model:
        ``"continuous"``, ``"2pl"`` or ``"3pl"``; None: 2pl for a table of 0/1 scores, else
        continuous (:func:`resolve_response_model`). 2PL/3PL are fitted by
        :func:`~lm_eval_adaptive.engine.binary_calibration.calibrate_binary` (scaling, epsilon,
        likelihood, method and the ATLAS filters do not apply to them).
    guessing:
        3PL only: the items' guessing c (a number, e.g. 1/k for k-option items, or a mapping
        item id -> c); None: estimated.
    """
    kind = resolve_response_model(table, response_model)
    if kind != "continuous":
        return calibrate_binary(table, response_model=kind, guessing=guessing, drop_negative=drop_negative,
                                task=task, metric=metric)
    if guessing is not None:
        raise InputError("a guessing parameter needs the 3pl response model")
    if method not in METHODS:
        raise InputError(f"unknown calibration method {method!r}; choose one of {', '.join(METHODS)}")
    if scaling not in SCALINGS:
        raise InputError(f"unknown scaling {scaling!r}; choose one of {', '.join(SCALINGS)}")
    if not (0 < epsilon < 0.5):
        raise InputError(f"epsilon must be in (0, 0.5), got {epsilon}")
    M, N = int(table.n_models), int(table.n_items)
    if M < 2:
        raise InputError(f"calibration needs at least 2 models, the table has {M}", path=table.source)
    if not getattr(table, "outliers_allowed", False):
        check_score_outliers(table)
    mi = np.asarray(table.model_idx, dtype=np.int64)
    ii = np.asarray(table.item_idx, dtype=np.int64)
    raw = np.asarray(table.score, dtype=float)
    item_ids = np.asarray(table.items, dtype=object)
    dropped: dict[int, str] = {}

    # -- 1. scaling ranges -------------------------------------------------------
    if scaling == "global":
        g_lo, g_hi = float(raw.min()), float(raw.max())
        if not g_hi > g_lo:
            raise InputError(f"every score in the table equals {g_lo}; nothing to calibrate",
                             path=table.source)
        lo = np.full(N, g_lo)
        hi = np.full(N, g_hi)
    else:
        lo = np.full(N, np.inf)
        hi = np.full(N, -np.inf)
        np.minimum.at(lo, ii, raw)
        np.maximum.at(hi, ii, raw)
    has_obs = np.bincount(ii, minlength=N) > 0
    for i in np.flatnonzero(has_obs & ~(hi > lo)):
        dropped[int(i)] = "constant"
    for i in np.flatnonzero(~has_obs):
        dropped[int(i)] = "no_observations"
    ok_range = hi > lo
    if not ok_range.any():
        raise InputError("no item's scores vary across models; nothing to calibrate", path=table.source)
    span = np.where(ok_range, hi - lo, 1.0)
    y = np.clip((raw - lo[ii]) / span[ii], 0.0, 1.0)

    # per (model, item) mean of the scaled observations
    pair = mi * N + ii
    cnt = np.bincount(pair, minlength=M * N).reshape(M, N)
    tot = np.bincount(pair, weights=y, minlength=M * N).reshape(M, N)
    with np.errstate(invalid="ignore", divide="ignore"):
        Y = np.where(cnt > 0, tot / np.maximum(cnt, 1), np.nan)
    Y[:, ~ok_range] = np.nan

    # -- 2. abilities --------------------------------------------------------------
    ybar = _nanmean_rows(Y)
    if np.any(np.isnan(ybar)):
        bad = [str(table.models[j]) for j in np.flatnonzero(np.isnan(ybar))]
        raise InputError(f"model(s) with no usable scores: {', '.join(bad[:5])}", path=table.source)
    theta = logit(np.clip(ybar, _ABILITY_CLIP, 1 - _ABILITY_CLIP))

    # -- 3. item filters -------------------------------------------------------------
    keep = ok_range.copy()
    r = _column_corr(Y, theta)
    if drop_negative:
        for i in np.flatnonzero(keep & (r < 0)):
            dropped[int(i)] = "negative_correlation"
        keep &= ~(r < 0)
    if atlas_filters:
        with np.errstate(invalid="ignore"):
            sd = np.nanstd(Y, axis=0)
            mean_i = np.nanmean(Y, axis=0)
        pb = _column_corr(Y, ybar)
        for name, bad in (("low_variance", sd < 0.01), ("too_easy", mean_i > 0.95),
                          ("low_point_biserial", pb < 0.1)):
            for i in np.flatnonzero(keep & bad):
                dropped[int(i)] = name
            keep &= ~bad
    kept = np.flatnonzero(keep)
    if kept.size < 2:
        raise InputError(f"only {kept.size} item(s) left after filtering; cannot calibrate",
                         path=table.source)

    # -- 4. difficulties --------------------------------------------------------------
    p = _nanmean_rows(Y[:, kept].T)
    p_lo, p_hi = p.min(), p.max()
    if p_hi > p_lo:
        p = epsilon + (p - p_lo) * (1 - 2 * epsilon) / (p_hi - p_lo)
    else:
        p = np.full_like(p, 0.5)
    b = np.log((1 - p) / p)
    shift = float(theta.mean())
    theta = theta - shift
    b = b - shift

    b_full = np.full(N, np.nan)
    b_full[kept] = b
    use = keep[ii]
    if method == "joint":
        theta, b_full = _joint_fit(mi[use], ii[use], y[use], theta, b_full, M, N)
        b = b_full[kept]

    # -- 5. noise k over every observation of kept items ----------------------------
    mu = expit(theta[mi[use]] - b_full[ii[use]])
    yk = y[use]
    denom = float(np.sum(mu * (1 - mu)))
    k = float(np.sum((yk - mu) ** 2) / denom) if denom > 0 else 1.0
    if not k > 0:
        k = 1e-6
    model = ContinuousResponseModel(k=k, likelihood=likelihood)

    # -- 6. diagnostics ------------------------------------------------------------------
    conf = conformance_r2(yk, mu, k)
    in_tok, out_tok = table.item_tokens()
    models = [str(m) for m in table.models]
    with np.errstate(invalid="ignore", divide="ignore"):
        raw_item_mean = np.bincount(ii, weights=raw, minlength=N) / np.bincount(ii, minlength=N)
    reasons: dict[str, int] = {}
    for v in dropped.values():
        reasons[v] = reasons.get(v, 0) + 1
    diagnostics = {
        "n_models": M,
        "n_items_in": N,
        "n_items_kept": int(kept.size),
        "n_observations": int(raw.size),
        "k": k,
        "discrimination": model.discrimination,
        "conformance_r2": conf["r2"],
        "conformance_bins": conf["bins"],
        "dropped_by_reason": reasons,
        "abilities": {m: round(float(t), 6) for m, t in zip(models, theta)},
        "mean_raw_score": {m: round(float(v), 6) for m, v in zip(models, _model_raw_means(mi, raw, M))},
    }
    bank = ItemBank(
        item_ids=item_ids[kept], b=b, model=model, scaling=scaling, lo=lo[kept], hi=hi[kept],
        input_tokens=in_tok[kept], output_tokens=out_tok[kept],
        task=task, metric=metric if metric is not None else getattr(table, "metric", None),
        dropped=[_dropped_entry(item_ids[i], dropped[i], raw_item_mean[i]) for i in sorted(dropped)],
        diagnostics=diagnostics,
        calibration={"method": method, "scaling": scaling, "epsilon": epsilon,
                     "drop_negative": drop_negative, "atlas_filters": atlas_filters,
                     "models": models, "source": str(getattr(table, "source", "")),
                     "software": f"lm-eval-adaptive {__version__}"},
    )
    return bank


def _joint_fit(mi, ii, y, theta, b, M, N, iterations=_JOINT_ITERATIONS):
    """Alternating Newton steps on the quasi-log-likelihood Σ y·log μ + (1-y)·log(1-μ).

    Each step updates all abilities (then all difficulties) at once from per-model (per-item)
    sums of the score (y - μ) and information μ(1-μ); steps are capped at 1 logit; a weak
    normal prior keeps difficulties of items that every model aces (or fails) finite.
    Abilities are re-centred at mean 0 after each sweep.
    """
    theta = theta.copy()
    b = b.copy()
    prec = 1.0 / _JOINT_B_PRIOR_SD ** 2
    for _ in range(iterations):
        mu = expit(theta[mi] - b[ii])
        g = np.bincount(mi, weights=y - mu, minlength=M)
        h = np.bincount(mi, weights=mu * (1 - mu), minlength=M)
        theta += np.clip(g / np.maximum(h, 1e-12), -1, 1)
        mu = expit(theta[mi] - b[ii])
        g = -np.bincount(ii, weights=y - mu, minlength=N) - prec * np.nan_to_num(b)
        h = np.bincount(ii, weights=mu * (1 - mu), minlength=N) + prec
        step = np.clip(g / h, -1, 1)  # Newton ascent: b + (dL/db) / (-d²L/db²)
        b = b + step
        shift = theta.mean()
        theta -= shift
        b -= shift
        if np.nanmax(np.abs(step)) < 1e-6:
            break
    return theta, b


def _dropped_entry(item_id, reason: str, mean_raw: float) -> dict:
    """A dropped item, with the calibration models' mean raw score when there is one
    (full-task estimates use it to stand in for the item)."""
    d = {"id": str(item_id), "reason": reason}
    if np.isfinite(mean_raw):
        d["mean_raw"] = round(float(mean_raw), 6)
    return d


def _model_raw_means(mi: np.ndarray, raw: np.ndarray, M: int) -> np.ndarray:
    c = np.bincount(mi, minlength=M)
    return np.bincount(mi, weights=raw, minlength=M) / np.maximum(c, 1)

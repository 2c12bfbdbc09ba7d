"""Calibration: item difficulties and the noise parameter k from full runs of many models.

Implements METHOD.md §2 on a long-format :class:`~lm_eval_adaptive.data.responses.ResponseTable`
(missing (model, item) pairs allowed; repeated rows are several observations, averaged
per model for difficulties and kept one by one for k) or on a dense
:class:`~lm_eval_adaptive.data.response_matrix.ResponseMatrix`. A long table is first turned into
the (model, item) matrix of mean scaled scores; every later step is a vectorised pass over that
matrix, a block of rows at a time (so 5,000 models × 30,000 items fit in a few GB; see
docs/scale.md), and the joint fit stops when a sweep moves no parameter by 1e-10. A long table
of at most 1 M observations (every real table) keeps the reference arithmetic instead: sums over
its observations with ``np.bincount`` and every one of 100 sweeps, bit for bit as before the
matrix path, so shipped banks rebuild byte-identical; the two agree to ~1e-10 (tested).

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
   with k·μ(1-μ) per bin, report R² (above 1 M observations, or 1 M cells of a matrix: on a
   seeded random sample of 1 M of them, recorded as ``conformance_sample``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit, logit

from lm_eval_adaptive import __version__
from lm_eval_adaptive.data.response_matrix import ResponseMatrix, check_matrix_outliers
from lm_eval_adaptive.data.responses import check_score_outliers
from lm_eval_adaptive.engine.irt.bank import K_RANGE, SCALINGS, ItemBank
from lm_eval_adaptive.engine.irt.binary_calibration import calibrate_binary, is_binary_table
from lm_eval_adaptive.engine.irt.response_model import ContinuousResponseModel
from lm_eval_adaptive.engine.irt.matrix_passes import (
    sample_index,
    row_blocks,
    row_means,
    column_stats,
    nanmean_rows,
    column_corr,
    joint_fit_observations,
    KeptCells,
    joint_fit,
)
from lm_eval_adaptive.errors import InputError

__all__ = ["calibrate", "DEFAULT_SCALING", "DEFAULT_EPSILON", "RESPONSE_MODELS", "resolve_response_model",
           "BINARY_BY_CHOICE"]

#: Chosen by backtest on the real tables: see docs/calibration.md.
DEFAULT_SCALING = "per_item"
DEFAULT_EPSILON = 1e-3
METHODS = ("moments", "joint")
DEFAULT_METHOD = "joint"
_ABILITY_CLIP = 1e-6
#: ``calibrate(response_model=...)``: the continuous model (METHOD.md §1) or a binary 2PL/3PL
#: (engine/irt/binary_calibration.py).
RESPONSE_MODELS = ("continuous", "2pl", "3pl")
#: Long tables of up to this many observations get the reference arithmetic (see calibrate).
_REFERENCE_MAX_OBS = 1_000_000


#: What :func:`resolve_response_model` says of a 0/1 table when no model is asked for: 2PL or 3PL,
#: whichever has the higher held-out likelihood (engine/irt/binary_calibration.py).
BINARY_BY_CHOICE = "2pl-or-3pl"


def resolve_response_model(table, response_model: str | None) -> str:
    """The response model to calibrate ``table`` with: as asked, or by default :data:`BINARY_BY_CHOICE`
    for a table of 0/1 scores (accuracy, exact match, win/lose: 2PL or 3PL by held-out likelihood)
    and ``continuous`` for any other."""
    if response_model is None:
        return BINARY_BY_CHOICE if is_binary_table(table) else "continuous"
    if response_model not in RESPONSE_MODELS:
        raise InputError(f"unknown response model {response_model!r}; choose one of {', '.join(RESPONSE_MODELS)}")
    return response_model


def conformance_r2(y: np.ndarray, mu: np.ndarray, k: float, n_bins: int = 10) -> dict:
    """Observed vs predicted variance k·μ(1-μ) in equal-count bins of predicted μ."""
    order = np.argsort(mu, kind="stable")
    y, mu = y[order], mu[order]
    bins = np.array_split(np.arange(mu.size), min(n_bins, max(1, mu.size // 2)))
    bins = [slice(int(b[0]), int(b[-1]) + 1) if b.size else slice(0, 0) for b in bins]
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
              metric: str | None = None, response_model: str | None = None, guessing=None,
              guessing_prior=None) -> ItemBank:
    """Build an :class:`ItemBank` from a response table of full runs (see module docstring).

    Parameters
    ----------
    table:
        A ResponseTable (long format) or a ResponseMatrix (dense) with at least 2 models. Its
        scores are checked for outliers (step 0) unless ``table.outliers_allowed``.
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
        ``"continuous"``, ``"2pl"`` or ``"3pl"``; None: for a table of 0/1 scores 2pl or 3pl,
        whichever has the higher held-out likelihood (3pl when a guessing level is given), else
        continuous (:func:`resolve_response_model`). 2PL/3PL are fitted by
        :func:`~lm_eval_adaptive.engine.irt.binary_calibration.calibrate_binary` (scaling, epsilon,
        likelihood, method and the ATLAS filters do not apply to them).
    guessing:
        3PL only: the items' guessing c (a number, e.g. 1/k for k-option items, or a mapping
        item id -> c); None: estimated.
    guessing_prior:
        3PL only: the mode of an estimated c's prior (1/k for k options; a number or a mapping item
        id -> mode); None: estimated from the bank.
    """
    kind = resolve_response_model(table, response_model)
    if kind != "continuous":
        if kind == BINARY_BY_CHOICE:  # a guessing level asked for needs the 3PL; else 2PL or 3PL by held-out likelihood
            kind = "3pl" if guessing is not None or guessing_prior is not None else None
        return calibrate_binary(table, response_model=kind, guessing=guessing, guessing_prior=guessing_prior,
                                drop_negative=drop_negative, task=task, metric=metric)
    if guessing_prior is not None:
        raise InputError("a guessing parameter needs the 3pl response model")
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
    dense = isinstance(table, ResponseMatrix)
    if not getattr(table, "outliers_allowed", False):
        (check_matrix_outliers if dense else check_score_outliers)(table)
    item_ids = np.asarray(table.items, dtype=object)

    # -- 1. scaling; Y = mean scaled score of each (model, item) pair ----------------
    obs = _from_matrix(table, scaling) if dense else _from_table(table, scaling)
    Y, count, dropped, lo, hi = obs.Y, obs.count, obs.dropped, obs.lo, obs.hi
    # a small long table (every real one): the reference arithmetic, bit for bit (sums over the
    # observations, 100 sweeps), so shipped banks rebuild byte-identical; else passes over Y
    reference = not dense and obs.n_obs <= _REFERENCE_MAX_OBS

    # -- 2. abilities --------------------------------------------------------------
    ybar = nanmean_rows(Y) if reference else row_means(Y)
    if np.any(np.isnan(ybar)):
        bad = [str(table.models[j]) for j in np.flatnonzero(np.isnan(ybar))]
        raise InputError(f"model(s) with no usable scores: {', '.join(bad[:5])}", path=table.source)
    theta = logit(np.clip(ybar, _ABILITY_CLIP, 1 - _ABILITY_CLIP))

    # -- 3. item filters -------------------------------------------------------------
    keep = obs.ok_range.copy()
    col = None if reference else column_stats(Y, theta)
    r = column_corr(Y, theta) if reference else col.r
    if drop_negative:
        for i in np.flatnonzero(keep & (r < 0)):
            dropped[int(i)] = "negative_correlation"
        keep &= ~(r < 0)
    if atlas_filters:
        if reference:
            with np.errstate(invalid="ignore"):
                sd = np.nanstd(Y, axis=0)
                mean_i = np.nanmean(Y, axis=0)
            pb = column_corr(Y, ybar)
        else:
            with np.errstate(invalid="ignore", divide="ignore"):
                sd = np.sqrt(col.ss / col.n)
            mean_i = col.mean
            pb = column_stats(Y, ybar).r
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
    p = nanmean_rows(Y[:, kept].T) if reference else col.mean[kept]
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
    if reference:
        y, mi, ii = obs.long
        use = keep[ii]
        if method == "joint":
            theta, b_full = joint_fit_observations(mi[use], ii[use], y[use], theta, b_full, M, N)
            b = b_full[kept]
    else:
        cells = KeptCells(Y, count, kept)
        if method == "joint":
            theta, b, _ = joint_fit(cells, theta, b)
            b_full[kept] = b

    # -- 5. noise k over every observation of kept items ----------------------------
    if reference:
        mu = expit(theta[mi[use]] - b_full[ii[use]])
        sq, info = float(np.sum((y[use] - mu) ** 2)), float(np.sum(mu * (1 - mu)))
    else:
        sq, info = cells.residual_sums(theta, b)
        sq += float(obs.within_ss[kept].sum())
    k = float(sq / info) if info > 0 else 1.0
    if not k >= K_RANGE[0]:  # nearly noiseless (or degenerate) scores: the smallest k a bank may hold
        k = K_RANGE[0]
    model = ContinuousResponseModel(k=k, likelihood=likelihood)

    # -- 6. diagnostics ------------------------------------------------------------------
    ys, mis, iis = obs.sample
    use = keep[iis]
    ys, mis, iis = ys[use], mis[use], iis[use]
    conf = conformance_r2(ys, expit(theta[mis] - b_full[iis]), k)
    in_tok, out_tok = table.item_tokens()
    models = [str(m) for m in table.models]
    reasons: dict[str, int] = {}
    for v in dropped.values():
        reasons[v] = reasons.get(v, 0) + 1
    diagnostics = {
        "n_models": M,
        "n_items_in": N,
        "n_items_kept": int(kept.size),
        "n_observations": obs.n_obs,
        "k": k,
        "discrimination": model.discrimination,
        "conformance_r2": conf["r2"],
        "conformance_bins": conf["bins"],
        "dropped_by_reason": reasons,
        "abilities": {m: round(float(t), 6) for m, t in zip(models, theta)},
        "mean_raw_score": {m: round(float(v), 6) for m, v in zip(models, obs.raw_model_mean)},
    }
    if obs.sampled:
        diagnostics["conformance_sample"] = int(ys.size)
    bank = ItemBank(
        item_ids=item_ids[kept], b=b, model=model, scaling=scaling, lo=lo[kept], hi=hi[kept],
        input_tokens=in_tok[kept], output_tokens=out_tok[kept],
        task=task, metric=metric if metric is not None else getattr(table, "metric", None),
        dropped=[_dropped_entry(item_ids[i], dropped[i], obs.raw_item_mean[i]) for i in sorted(dropped)],
        diagnostics=diagnostics,
        calibration={"method": method, "scaling": scaling, "epsilon": epsilon,
                     "drop_negative": drop_negative, "atlas_filters": atlas_filters,
                     "models": models, "source": str(getattr(table, "source", "")),
                     "software": f"lm-eval-adaptive {__version__}"},
    )
    return bank


# --------------------------------------------------------------------------- #
# Step 1: from a table to the (model, item) matrix of mean scaled scores
# --------------------------------------------------------------------------- #


@dataclass
class _Scaled:
    Y: np.ndarray  # (M, N) mean scaled score per pair; NaN: no observation, or a constant item
    count: np.ndarray | None  # (M, N) observations per pair, None when each pair has at most one
    within_ss: np.ndarray  # (N,) Σ (y - pair mean)² over each item's observations (repeats only)
    lo: np.ndarray
    hi: np.ndarray
    ok_range: np.ndarray  # (N,) the item's scores vary
    dropped: dict
    n_obs: int
    raw_item_mean: np.ndarray
    raw_model_mean: np.ndarray
    long: tuple | None  # (y, model index, item index) of every observation (a long table)
    sample: tuple  # (y, model index, item index) of the observations the conformance R² uses
    sampled: bool  # the sample is not every observation


def _check_ranges(lo, hi, has_obs, source) -> tuple[dict, np.ndarray, np.ndarray]:
    dropped: dict[int, str] = {}
    for i in np.flatnonzero(has_obs & ~(hi > lo)):
        dropped[int(i)] = "constant"
    for i in np.flatnonzero(~has_obs):
        dropped[int(i)] = "no_observations"
    ok_range = hi > lo
    if not ok_range.any():
        raise InputError("no item's scores vary across models; nothing to calibrate", path=source)
    return dropped, ok_range, np.where(ok_range, hi - lo, 1.0)


def _global_range(g_lo: float, g_hi: float, n_items: int, source) -> tuple[np.ndarray, np.ndarray]:
    """Every item's (lo, hi) under global scaling: the whole table's range (InputError if empty)."""
    if not g_hi > g_lo:
        raise InputError(f"every score in the table equals {g_lo}; nothing to calibrate", path=source)
    return np.full(n_items, g_lo), np.full(n_items, g_hi)

def _from_table(table, scaling: str) -> _Scaled:
    M, N = int(table.n_models), int(table.n_items)
    mi = np.asarray(table.model_idx, dtype=np.int64)
    ii = np.asarray(table.item_idx, dtype=np.int64)
    raw = np.asarray(table.score, dtype=float)
    if scaling == "global":
        lo, hi = _global_range(float(raw.min()), float(raw.max()), N, table.source)
    else:
        lo = np.full(N, np.inf)
        hi = np.full(N, -np.inf)
        np.minimum.at(lo, ii, raw)
        np.maximum.at(hi, ii, raw)
    n_item = np.bincount(ii, minlength=N)
    dropped, ok_range, span = _check_ranges(lo, hi, n_item > 0, table.source)
    y = np.clip((raw - lo[ii]) / span[ii], 0.0, 1.0)

    pair = mi * N + ii
    cnt = np.bincount(pair, minlength=M * N)
    tot = np.bincount(pair, weights=y, minlength=M * N)
    with np.errstate(invalid="ignore", divide="ignore"):
        Y = np.where(cnt > 0, tot / np.maximum(cnt, 1), np.nan)
    repeats = bool(cnt.max() > 1)
    within = np.zeros(N)
    if repeats:
        within = np.bincount(ii, weights=(y - Y[pair]) ** 2, minlength=N)
    Y = Y.reshape(M, N)
    Y[:, ~ok_range] = np.nan
    sample = sample_index(raw.size)
    with np.errstate(invalid="ignore", divide="ignore"):
        raw_item_mean = np.bincount(ii, weights=raw, minlength=N) / n_item
    return _Scaled(Y=Y, count=cnt.reshape(M, N) if repeats else None, within_ss=within, lo=lo, hi=hi,
                   ok_range=ok_range, dropped=dropped, n_obs=int(raw.size),
                   raw_item_mean=raw_item_mean, raw_model_mean=_model_raw_means(mi, raw, M),
                   long=(y, mi, ii), sample=(y[sample], mi[sample], ii[sample]),
                   sampled=sample.size < raw.size)


def _from_matrix(matrix, scaling: str) -> _Scaled:
    S = matrix.scores
    M, N = S.shape
    n_item = np.zeros(N)
    sum_item = np.zeros(N)
    n_model = np.zeros(M)
    sum_model = np.zeros(M)
    lo = np.full(N, np.inf)
    hi = np.full(N, -np.inf)
    for rows in row_blocks(M, N):
        block = S[rows]
        present = ~np.isnan(block)
        n_item += present.sum(axis=0)
        n_model[rows] = present.sum(axis=1)
        np.fmin(lo, np.fmin.reduce(block, axis=0), out=lo)  # fmin/fmax skip NaN
        np.fmax(hi, np.fmax.reduce(block, axis=0), out=hi)
        block = np.where(present, block, 0)
        sum_item += block.sum(axis=0, dtype=np.float64)
        sum_model[rows] = block.sum(axis=1, dtype=np.float64)
    if scaling == "global":
        lo, hi = _global_range(float(lo.min()), float(hi.max()), N, matrix.source)
    dropped, ok_range, span = _check_ranges(lo, hi, n_item > 0, matrix.source)
    Y = np.empty_like(S)
    lo_s, span_s = np.where(ok_range, lo, 0).astype(S.dtype), span.astype(S.dtype)
    for rows in row_blocks(M, N):
        block = S[rows] - lo_s
        block /= span_s
        np.clip(block, 0.0, 1.0, out=block)
        block[:, ~ok_range] = np.nan
        Y[rows] = block
    cells = M * N
    flat = sample_index(cells)
    sampled = flat.size < cells
    mi, ii = np.divmod(flat, N)
    ys = Y[mi, ii].astype(np.float64)
    seen = ~np.isnan(ys)  # the observations (constant items' cells go with their items)
    with np.errstate(invalid="ignore", divide="ignore"):
        raw_item_mean = sum_item / n_item
        raw_model_mean = sum_model / np.maximum(n_model, 1)
    return _Scaled(Y=Y, count=None, within_ss=np.zeros(N), lo=lo, hi=hi, ok_range=ok_range,
                   dropped=dropped, n_obs=int(matrix.n_obs), raw_item_mean=raw_item_mean,
                   raw_model_mean=raw_model_mean, long=None, sample=(ys[seen], mi[seen], ii[seen]),
                   sampled=sampled)


# --------------------------------------------------------------------------- #
# Steps 2-5: sums over the matrix, a block of rows at a time
# --------------------------------------------------------------------------- #


# Reference arithmetic for small long tables (the calibration as it was before the matrix path)


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

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
from lm_eval_adaptive.errors import InputError

__all__ = ["calibrate", "DEFAULT_SCALING", "DEFAULT_EPSILON", "RESPONSE_MODELS", "resolve_response_model",
           "BINARY_BY_CHOICE"]

#: Chosen by backtest on the real tables: see docs/calibration.md.
DEFAULT_SCALING = "per_item"
DEFAULT_EPSILON = 1e-3
METHODS = ("moments", "joint")
DEFAULT_METHOD = "joint"
_JOINT_ITERATIONS = 100
_JOINT_B_PRIOR_SD = 10.0
#: A joint-fit sweep that moves no parameter by more than this has converged.
_JOINT_TOL = 1e-10
_ABILITY_CLIP = 1e-6
#: ``calibrate(response_model=...)``: the continuous model (METHOD.md §1) or a binary 2PL/3PL
#: (engine/irt/binary_calibration.py).
RESPONSE_MODELS = ("continuous", "2pl", "3pl")
#: Cells per block of rows in the passes over the (model, item) matrix.
_BLOCK_CELLS = 1 << 20
#: Above this many cells, the conformance R² uses a seeded random sample of this many.
_CONFORMANCE_MAX_CELLS = 1_000_000
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
    ybar = _nanmean_rows(Y) if reference else _row_means(Y)
    if np.any(np.isnan(ybar)):
        bad = [str(table.models[j]) for j in np.flatnonzero(np.isnan(ybar))]
        raise InputError(f"model(s) with no usable scores: {', '.join(bad[:5])}", path=table.source)
    theta = logit(np.clip(ybar, _ABILITY_CLIP, 1 - _ABILITY_CLIP))

    # -- 3. item filters -------------------------------------------------------------
    keep = obs.ok_range.copy()
    col = None if reference else _column_stats(Y, theta)
    r = _column_corr(Y, theta) if reference else col.r
    if drop_negative:
        for i in np.flatnonzero(keep & (r < 0)):
            dropped[int(i)] = "negative_correlation"
        keep &= ~(r < 0)
    if atlas_filters:
        if reference:
            with np.errstate(invalid="ignore"):
                sd = np.nanstd(Y, axis=0)
                mean_i = np.nanmean(Y, axis=0)
            pb = _column_corr(Y, ybar)
        else:
            with np.errstate(invalid="ignore", divide="ignore"):
                sd = np.sqrt(col.ss / col.n)
            mean_i = col.mean
            pb = _column_stats(Y, ybar).r
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
    p = _nanmean_rows(Y[:, kept].T) if reference else col.mean[kept]
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
            theta, b_full = _joint_fit_observations(mi[use], ii[use], y[use], theta, b_full, M, N)
            b = b_full[kept]
    else:
        cells = _KeptCells(Y, count, kept)
        if method == "joint":
            theta, b, _ = _joint_fit(cells, theta, b)
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
    sample = _sample_index(raw.size)
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
    for rows in _row_blocks(M, N):
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
    for rows in _row_blocks(M, N):
        block = S[rows] - lo_s
        block /= span_s
        np.clip(block, 0.0, 1.0, out=block)
        block[:, ~ok_range] = np.nan
        Y[rows] = block
    cells = M * N
    flat = _sample_index(cells)
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


def _sample_index(n: int) -> np.ndarray:
    """Every index below n, or a seeded random sample of ``_CONFORMANCE_MAX_CELLS`` of them (sorted)."""
    if n <= _CONFORMANCE_MAX_CELLS:
        return np.arange(n)
    return np.sort(np.random.default_rng(0).integers(0, n, _CONFORMANCE_MAX_CELLS))


# --------------------------------------------------------------------------- #
# Steps 2-5: sums over the matrix, a block of rows at a time
# --------------------------------------------------------------------------- #


def _row_blocks(M: int, N: int):
    """Slices of rows of about ``_BLOCK_CELLS`` cells: temporaries stay small (and in cache)."""
    size = max(1, _BLOCK_CELLS // max(N, 1))
    for start in range(0, M, size):
        yield slice(start, min(M, start + size))


def _map_blocks(fn, M: int, N: int) -> list:
    """``[fn(rows) for each block of rows]``, in block order."""
    return [fn(rows) for rows in _row_blocks(M, N)]


def _row_means(Y: np.ndarray) -> np.ndarray:
    """Mean of each row over its non-NaN cells (NaN for a row with none)."""
    M, N = Y.shape
    out = np.empty(M)
    for rows in _row_blocks(M, N):
        x = Y[rows]
        cnt = np.sum(~np.isnan(x), axis=1)
        s = np.nansum(x, axis=1, dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[rows] = np.where(cnt > 0, s / np.maximum(cnt, 1), np.nan)
    return out


@dataclass
class _ColumnStats:
    n: np.ndarray  # non-NaN cells per column
    mean: np.ndarray  # mean of the column's cells
    ss: np.ndarray  # Σ (y - mean)² over the column's cells
    r: np.ndarray  # Pearson correlation of the column with x over the column's rows


def _column_stats(Y: np.ndarray, x: np.ndarray) -> _ColumnStats:
    """Per column of Y (NaN = missing): count, mean, sum of squares, correlation with x (two passes)."""
    M, N = Y.shape
    n = np.zeros(N)
    sx = np.zeros(N)
    sy = np.zeros(N)
    for rows in _row_blocks(M, N):
        present = ~np.isnan(Y[rows])
        n += present.sum(axis=0)
        sx += np.where(present, x[rows, None], 0.0).sum(axis=0)
        sy += np.where(present, Y[rows], 0.0).sum(axis=0, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = sx / n
        my = sy / n
    cov = np.zeros(N)
    sxx = np.zeros(N)
    syy = np.zeros(N)
    for rows in _row_blocks(M, N):
        block = Y[rows]
        present = ~np.isnan(block)
        with np.errstate(invalid="ignore"):
            dx = np.where(present, x[rows, None] - mx, 0.0)
            dy = np.where(present, block - my, 0.0)
        cov += (dx * dy).sum(axis=0)
        sxx += (dx * dx).sum(axis=0)
        syy += (dy * dy).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        sdx, sdy = np.sqrt(sxx), np.sqrt(syy)
        r = cov / (sdx * sdy)
    r[(n < 3) | (sdx < 1e-12) | (sdy < 1e-12)] = np.nan
    return _ColumnStats(n=n, mean=my, ss=syy, r=r)


# Reference arithmetic for small long tables (the calibration as it was before the matrix path)


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


def _joint_fit_observations(mi, ii, y, theta, b, M, N, iterations=_JOINT_ITERATIONS):
    """Alternating Newton steps on the quasi-log-likelihood Σ y·log μ + (1-y)·log(1-μ).

    Each step updates all abilities (then all difficulties) at once from per-model (per-item)
    sums of the score (y - μ) and information μ(1-μ); steps are capped at 1 logit; a weak
    normal prior keeps difficulties of items that every model aces (or fails) finite.
    Abilities are re-centred at mean 0 after each sweep. The reference arithmetic: sums over the
    observations with ``np.bincount``, every one of ``iterations`` sweeps (its own stopping rule
    never fires: the re-centring moves every parameter at each sweep); :func:`_joint_fit` is the
    same fit over the matrix, stopped when a sweep moves nothing.
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


class _KeptCells:
    """The kept items' columns of Y as the fit needs them: each pair's weight (its number of
    observations, 1 or 0 without repeats; None when every pair has one) and the weighted sums of
    the scores per model and per item, which do not change while the parameters do.

    Sums over μ = logistic(θ - b) = 1/(1 + e^-θ·e^b) take one product per cell (no exp), a block of
    rows at a time into one reused buffer (a fresh 8 MB array per block costs more in page
    faults than the arithmetic); Σμ² is one ``einsum`` without a temporary."""

    def __init__(self, Y: np.ndarray, count: np.ndarray | None, kept: np.ndarray):
        M = Y.shape[0]
        self.shape = (M, kept.size)
        self.all_kept = kept.size == Y.shape[1]
        self.kept = kept
        self.Y = Y
        self.count = count
        self._buf = None
        weight = None if count is None else count[:, kept]

        def scan(rows):
            block = self._columns(Y[rows])
            present = ~np.isnan(block)
            wy = np.where(present, block, 0.0)
            if weight is not None:
                wy *= weight[rows]
            return (present if weight is None and not present.all() else None,
                    wy.sum(axis=1, dtype=np.float64), wy.sum(axis=0, dtype=np.float64))

        parts = _map_blocks(scan, *self.shape)
        blocks = list(_row_blocks(*self.shape))
        self.row_y = np.zeros(M)
        self.col_y = np.zeros(kept.size)
        for rows, (_, row_y, col_y) in zip(blocks, parts):
            self.row_y[rows] = row_y
            self.col_y += col_y
        if weight is None and any(part[0] is not None for part in parts):
            weight = np.ones(self.shape, dtype=bool)
            for rows, (present, _, _) in zip(blocks, parts):
                if present is not None:
                    weight[rows] = present
        self.weight = weight

    def _columns(self, block):
        return block if self.all_kept else block[:, self.kept]

    def _mu(self, u, v, rows):
        """μ of the block's cells, in the reused buffer."""
        n = rows.stop - rows.start
        if self._buf is None or self._buf.shape[0] < n:
            self._buf = np.empty((n, v.size))
        mu = self._buf[:n]
        np.multiply.outer(u[rows], v, out=mu)
        mu += 1.0
        np.reciprocal(mu, out=mu)
        return mu

    def _sums(self, theta, b, axis: int):
        """Per model (axis 1) or per kept item (axis 0): Σ w·μ and Σ w·μ(1-μ), block by block."""
        with np.errstate(over="ignore"):
            u = np.exp(-theta)
            v = np.exp(b)
        spec = "ij,ij->i" if axis == 1 else "ij,ij->j"

        def one(rows):
            mu = self._mu(u, v, rows)
            wmu = mu if self.weight is None else mu * self.weight[rows]
            s1 = wmu.sum(axis=axis)
            return s1, s1 - np.einsum(spec, wmu, mu)

        return _map_blocks(one, *self.shape)

    def row_sums(self, theta, b) -> tuple[np.ndarray, np.ndarray]:
        """Per model: Σ w(y - μ), Σ w·μ(1-μ)."""
        parts = self._sums(theta, b, axis=1)
        return self.row_y - np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def column_sums(self, theta, b) -> tuple[np.ndarray, np.ndarray]:
        """Per kept item: Σ w(y - μ), Σ w·μ(1-μ)."""
        s_mu = np.zeros(self.shape[1])
        s_info = np.zeros(self.shape[1])
        for mu, info in self._sums(theta, b, axis=0):
            s_mu += mu
            s_info += info
        return self.col_y - s_mu, s_info

    def residual_sums(self, theta, b) -> tuple[float, float]:
        """Σ w(ȳ - μ)², Σ w·μ(1-μ) over the kept pairs (ȳ the pair's mean score)."""
        with np.errstate(over="ignore"):
            u = np.exp(-theta)
            v = np.exp(b)

        def one(rows):
            mu = self._mu(u, v, rows)
            block = self._columns(self.Y[rows])
            present = ~np.isnan(block)
            r = np.where(present, block - mu, 0.0)
            r *= r
            info = np.where(present, mu - mu * mu, 0.0)
            if self.count is not None:
                w = self.weight[rows]
                r *= w
                info *= w
            return float(r.sum()), float(info.sum())

        parts = _map_blocks(one, *self.shape)
        return sum(p[0] for p in parts), sum(p[1] for p in parts)


def _joint_fit(cells: _KeptCells, theta, b, iterations=_JOINT_ITERATIONS, tol=_JOINT_TOL):
    """Alternating Newton steps on the quasi-log-likelihood Σ y·log μ + (1-y)·log(1-μ).

    Each step updates all abilities (then all difficulties) at once from per-model (per-item)
    sums of the score (y - μ) and information μ(1-μ); steps are capped at 1 logit; a weak
    normal prior keeps difficulties of items that every model aces (or fails) finite.
    Abilities are re-centred at mean 0 after each sweep. Stops when a sweep moves no
    parameter by more than ``tol`` (after the re-centring), or after ``iterations`` sweeps.
    Returns (θ, b, sweeps made).
    """
    theta = theta.copy()
    b = b.copy()
    prec = 1.0 / _JOINT_B_PRIOR_SD ** 2
    for sweep in range(1, iterations + 1):
        theta_old, b_old = theta.copy(), b.copy()
        g, h = cells.row_sums(theta, b)
        theta += np.clip(g / np.maximum(h, 1e-12), -1, 1)
        g, h = cells.column_sums(theta, b)
        g = -g - prec * b
        h = h + prec
        step = np.clip(g / h, -1, 1)  # Newton ascent: b + (dL/db) / (-d²L/db²)
        b = b + step
        shift = theta.mean()
        theta -= shift
        b -= shift
        moved = max(np.max(np.abs(theta - theta_old)), np.max(np.abs(b - b_old)))
        if moved < tol or np.max(np.abs(step)) < 1e-6:
            break
    return theta, b, sweep


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

"""The passes of calibration over the (model × item) matrix of mean scaled scores, a block of rows at a
time (so 5,000 models × 30,000 items fit in a few GB; docs/scale.md): row means, column statistics and
correlations, the seeded sample of cells the conformance R² reads, and the joint fit of abilities and
difficulties (:func:`joint_fit` on the matrix's kept cells, :func:`joint_fit_observations`, the reference
arithmetic over a long table's observations)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

__all__ = ["sample_index", "row_blocks", "map_blocks", "row_means", "ColumnStats", "column_stats", "nanmean_rows",
           "column_corr", "joint_fit_observations", "KeptCells", "joint_fit"]

_JOINT_ITERATIONS = 100
_JOINT_B_PRIOR_SD = 10.0
#: A joint-fit sweep that moves no parameter by more than this has converged.
_JOINT_TOL = 1e-10
#: Cells per block of rows in the passes over the (model, item) matrix.
_BLOCK_CELLS = 1 << 20
#: Above this many cells, the conformance R² uses a seeded random sample of this many.
_CONFORMANCE_MAX_CELLS = 1_000_000


def sample_index(n: int) -> np.ndarray:
    """Every index below n, or a seeded random sample of ``_CONFORMANCE_MAX_CELLS`` of them (sorted)."""
    if n <= _CONFORMANCE_MAX_CELLS:
        return np.arange(n)
    return np.sort(np.random.default_rng(0).integers(0, n, _CONFORMANCE_MAX_CELLS))


def row_blocks(M: int, N: int):
    """Slices of rows of about ``_BLOCK_CELLS`` cells: temporaries stay small (and in cache)."""
    size = max(1, _BLOCK_CELLS // max(N, 1))
    for start in range(0, M, size):
        yield slice(start, min(M, start + size))


def map_blocks(fn, M: int, N: int) -> list:
    """``[fn(rows) for each block of rows]``, in block order."""
    return [fn(rows) for rows in row_blocks(M, N)]


def row_means(Y: np.ndarray) -> np.ndarray:
    """Mean of each row over its non-NaN cells (NaN for a row with none)."""
    M, N = Y.shape
    out = np.empty(M)
    for rows in row_blocks(M, N):
        x = Y[rows]
        cnt = np.sum(~np.isnan(x), axis=1)
        s = np.nansum(x, axis=1, dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[rows] = np.where(cnt > 0, s / np.maximum(cnt, 1), np.nan)
    return out


@dataclass
class ColumnStats:
    n: np.ndarray  # non-NaN cells per column
    mean: np.ndarray  # mean of the column's cells
    ss: np.ndarray  # Σ (y - mean)² over the column's cells
    r: np.ndarray  # Pearson correlation of the column with x over the column's rows


def column_stats(Y: np.ndarray, x: np.ndarray) -> ColumnStats:
    """Per column of Y (NaN = missing): count, mean, sum of squares, correlation with x (two passes)."""
    M, N = Y.shape
    n = np.zeros(N)
    sx = np.zeros(N)
    sy = np.zeros(N)
    for rows in row_blocks(M, N):
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
    for rows in row_blocks(M, N):
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
    return ColumnStats(n=n, mean=my, ss=syy, r=r)


def nanmean_rows(x: np.ndarray) -> np.ndarray:
    cnt = np.sum(~np.isnan(x), axis=1)
    s = np.nansum(x, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(cnt > 0, s / np.maximum(cnt, 1), np.nan)


def column_corr(Y: np.ndarray, x: np.ndarray) -> np.ndarray:
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


def joint_fit_observations(mi, ii, y, theta, b, M, N, iterations=_JOINT_ITERATIONS):
    """Alternating Newton steps on the quasi-log-likelihood Σ y·log μ + (1-y)·log(1-μ).

    Each step updates all abilities (then all difficulties) at once from per-model (per-item)
    sums of the score (y - μ) and information μ(1-μ); steps are capped at 1 logit; a weak
    normal prior keeps difficulties of items that every model aces (or fails) finite.
    Abilities are re-centred at mean 0 after each sweep. The reference arithmetic: sums over the
    observations with ``np.bincount``, every one of ``iterations`` sweeps (its own stopping rule
    never fires: the re-centring moves every parameter at each sweep); :func:`joint_fit` is the
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


class KeptCells:
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

        parts = map_blocks(scan, *self.shape)
        blocks = list(row_blocks(*self.shape))
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

        return map_blocks(one, *self.shape)

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

        parts = map_blocks(one, *self.shape)
        return sum(p[0] for p in parts), sum(p[1] for p in parts)


def joint_fit(cells: KeptCells, theta, b, iterations=_JOINT_ITERATIONS, tol=_JOINT_TOL):
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

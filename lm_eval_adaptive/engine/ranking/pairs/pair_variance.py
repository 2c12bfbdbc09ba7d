"""How two models' full-task estimates vary together on the metric's scale: the residual correlation of
the items both drew at random (and its one-sided lower bound), the variance of a pair's difference, and
the shrink factor of the random share's correction (docs/metric-scale.md)."""

from __future__ import annotations

import math

import numpy as np

from lm_eval_adaptive.engine.cat.selection import DEFAULT_RANDOM_SHARE


__all__ = ["shrink_factor", "shrink_one", "residual_correlation", "pair_variance"]

_MIN_COMMON = 10  # fewest items both models drew at random to estimate their residual correlation
_MAX_RHO = 0.99  # a sample correlation is taken as at most this before its lower bound (see _lower_bound)
_Z_LOWER = 1.6448536269514722  # the one-sided 95% normal quantile (the correlation's lower bound)


def shrink_factor(n_unseen, n_random, extra, random_share: float = DEFAULT_RANDOM_SHARE) -> np.ndarray:
    """f(m)/f(0): how a model's variance shrinks with m = ``extra`` more items of which the share
    ``random_share`` are random, f(m) = u²/(n_R + share·m) + u, u = max(N_U − m, 0) (the variance's
    shape, s² held fixed). 0 where nothing is unseen; 1 at m = 0."""
    nu = np.asarray(n_unseen, dtype=float)
    nr = np.maximum(np.asarray(n_random, dtype=float), 1.0)
    m = np.asarray(extra, dtype=float)
    u = np.maximum(nu - m, 0.0)
    f0 = nu * nu / nr + nu
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(f0 > 0, (u * u / (nr + random_share * m) + u) / f0, 0.0)


def shrink_one(nu: float, nr: float, m: float, share: float = DEFAULT_RANDOM_SHARE) -> float:
    """:func:`shrink_factor` of one model in plain floats (a ranker's hot path)."""
    nr = max(nr, 1.0)
    f0 = nu * nu / nr + nu
    if f0 <= 0:
        return 0.0
    u = max(nu - m, 0.0)
    return (u * u / (nr + share * m) + u) / f0


def residual_correlation(dev: np.ndarray, rnd: np.ndarray, rows=None) -> np.ndarray:
    """Correlation of two models' residuals over the items both drew at random (comparable ones):
    (K, K), or (len(rows), K) for the models ``rows`` against every model; 0 where fewer than 4 such
    items or a constant residual, 1 for a model with itself. ``dev``: (K, N) residual deviations
    (0 off the comparable random items), ``rnd``: (K, N) those items."""
    if rows is not None:
        return np.array([_correlation_row(dev, rnd, int(k)) for k in rows]).reshape(len(rows), dev.shape[0])
    m = rnd.astype(float)
    r = dev
    n = m @ m.T
    sa = r @ m.T  # [a, b]: Σ over common items of r_a
    sb = sa.T
    saa = (r * r) @ m.T
    sbb = saa.T
    sab = r @ r.T
    with np.errstate(invalid="ignore", divide="ignore"):
        cov = sab - sa * sb / n
        va = saa - sa * sa / n
        vb = sbb - sb * sb / n
        rho = cov / np.sqrt(va * vb)
    rho = _lower_bound(np.where((n >= _MIN_COMMON) & np.isfinite(rho), rho, 0.0), n)
    np.fill_diagonal(rho, 1.0)
    return rho


def _correlation_row(dev: np.ndarray, rnd: np.ndarray, k: int) -> np.ndarray:
    """Row k of :func:`residual_correlation`, over model k's comparable random items only (O(K·n_R): two
    small matrix products, then each model's correlation and its lower bound in plain floats)."""
    idx = np.flatnonzero(rnd[k])
    K = dev.shape[0]
    rho = [0.0] * K
    if idx.size >= _MIN_COMMON:
        r = dev[:, idx]  # 0 off each model's own comparable items
        rk = r[k]
        one = np.ones(idx.size)
        # per model j: n, Σ r_k, Σ r_k² over the common items; Σ r_j, Σ r_j·r_k (r_j is 0 off them); Σ r_j²
        na = (rnd[:, idx].astype(float) @ np.stack((one, rk, rk * rk), axis=1)).tolist()
        nb = (r @ np.stack((one, rk), axis=1)).tolist()
        sbb = np.einsum("ij,ij->i", r, r).tolist()
        for j in range(K):
            n, sa, saa = na[j]
            if n < _MIN_COMMON:
                continue
            sb, sab = nb[j]
            den = (saa - sa * sa / n) * (sbb[j] - sb * sb / n)
            if not den > 0:
                continue
            rho[j] = _lower_bound_one((sab - sa * sb / n) / math.sqrt(den), n)
    rho[k] = 1.0
    return np.array(rho)


def _lower_bound_one(rho: float, n: float) -> float:
    """:func:`_lower_bound` of one correlation, in plain floats."""
    if n <= 3:
        return 0.0
    z = math.atanh(min(max(rho, -_MAX_RHO), _MAX_RHO))
    return max(math.tanh(z - _Z_LOWER / math.sqrt(n - 3.0)), 0.0)


def _lower_bound(rho: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The correlation a pair's variance uses: the one-sided 95% lower bound of ρ̂ (Fisher's z, n common
    items), and 0 below 0. A positive ρ narrows a pair's interval, and ρ̂ from a handful of items both drew
    at random is wild (4 items can give 0.9 by chance and order a near tie after 8 items each); the bound
    uses the correlation only where the items show it. A negative ρ̂ is taken as 0: the pair counts as
    unpaired (its lower bound would double the variance of every early pair)."""
    z = np.arctanh(np.clip(rho, -_MAX_RHO, _MAX_RHO))
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.tanh(z - _Z_LOWER / np.sqrt(np.maximum(n - 3.0, 1e-12)))
    return np.where(n > 3, np.maximum(low, 0.0), 0.0)


def pair_variance(ws: np.ndarray, rho: np.ndarray, fallback_var: np.ndarray, rows=None, own=None) -> np.ndarray:
    """Var(D̂ − D) of the pairs of models: (K, K), or (len(rows), K) for ``rows`` against every model.

    Var = s_a²·Σw_a² + s_b²·Σw_b² − 2·ρ_ab·s_a·s_b·Σw_a·w_b (``ws``: (K, N) each model's ``ModelPart.ws``;
    ``rho``: :func:`residual_correlation` of the same rows; ``own``: Σ ws² per model, if known), plus both
    models' fallback variances; 0 for a model with itself."""
    idx = np.arange(ws.shape[0]) if rows is None else np.asarray(rows, dtype=np.int64)
    wa = ws[idx]
    cross = wa @ ws.T  # s_a·s_b·Σ w_a·w_b
    if own is None:
        own = np.einsum("ij,ij->i", ws, ws)
    V = own[idx][:, None] + own[None, :] - 2 * rho * cross
    V = V + fallback_var[idx][:, None] + fallback_var[None, :]
    V = np.maximum(V, 0.0)
    V[np.arange(idx.size), idx] = 0.0
    return V

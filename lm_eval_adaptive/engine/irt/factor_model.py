"""A linear factor model of a bank's calibration answers: the full-task accuracy of a model from a few items.

A 2PL/3PL bank predicts a model's answer to an unseen item from one ability θ̂ through the item's
curve. On the Open LLM Leaderboard tables that prediction misses a model's accuracy by 0.025
(mmlu_pro_math_7b) to 0.036 (bbh_shuffled_objects_5) on average even at the θ̂ of every item
(docs/binary.md): the models' answers share more than one ability (families that share guesses,
answer positions, skills), and weighting items by their slopes estimates an ability that is not
the unweighted accuracy. What predicts an unseen item's answer best, linearly, from the answers
seen is the calibration models' own covariance of the items: the best linear predictor
(kriging, the BLUP) ŷ_U = μ_U + Σ_US Σ_SS⁻¹ (y_S − μ_S). With the covariance of ``N`` items
estimated from far fewer models it needs structure: a low rank plus a diagonal,
Σ = W Wᵀ + diag(ψ) (factor analysis; probabilistic PCA, Tipping & Bishop 1999, with a noise
variance per item), under which the predictor is the Gaussian posterior mean of the model's
factor scores f ~ N(0, I):

    A = I + W_Sᵀ diag(1/ψ_S) W_S,   f̂ = A⁻¹ W_Sᵀ diag(1/ψ_S) (y_S − μ_S),   ŷ = μ + W f̂,

and the variance of the unseen items' total given the answers seen is w_Uᵀ A⁻¹ w_U + Σ_U ψᵢ
(w_U = Σ_U Wᵢ), so an estimate of the full-task mean (Σ_S y + Σ_U ŷ)/N comes with a model-based
variance that is exactly 0 once every item is seen. The fit is principal components of the
calibration answers (items centred at their means; a missing answer counts at its item's mean):
W the first ``d`` components scaled to unit-variance factor scores, ψ the variance each item
keeps outside them (floored at :data:`MIN_NOISE`). Predictions are clipped to the metric's range
item by item.

What this buys over the 2PL/3PL prediction (the same adaptive items, 200 held-out models,
docs/binary.md): mean absolute error of the full-task accuracy at 100 items 0.014 against 0.026
(p-IRT) on mmlu_pro_math_7b and 0.016 against 0.036 on bbh_shuffled_objects_5; at 30 items on the
100-item tables a little lower than p-IRT (0.015-0.036 against 0.016-0.036; their 100 items were
chosen by tinyBenchmarks to be predictable by one dimension).

Pure NumPy: fitting is one SVD of the (models × items) matrix; a prediction is O(n·d² + N·d).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["FactorModel", "fit_factor_model", "factor_count", "DEFAULT_FACTORS", "MODELS_PER_FACTOR",
           "MIN_FACTOR_MODELS", "MIN_NOISE"]

#: Factors of a bank calibrated on many models. On the tuning half (adaptive items, 20, 30 and 100 per
#: model; docs/binary.md) 2, 3, 5 and 8 factors gave the same pooled mean absolute error within 0.0002;
#: on its one large bank (mmlu_pro_math_7b, 100 items) 5 gave the lowest (0.0141 against 0.0150-0.0163)
#: with its interval still holding 0.935.
DEFAULT_FACTORS = 5
#: At most one factor per this many calibration models (a factor's loadings rest on the models).
MODELS_PER_FACTOR = 20
#: Fewest calibration models for a factor model at all: with fewer, the covariance of the items is
#: not estimated well enough to predict from, and the bank predicts with its 2PL/3PL curves alone.
MIN_FACTOR_MODELS = 20
#: Floor of an item's own variance ψ (an item every calibration model answered alike has ψ = 0).
MIN_NOISE = 1e-3


def factor_count(n_models: int, n_items: int, requested: int | None = None) -> int:
    """How many factors a bank gets: ``requested`` (default :data:`DEFAULT_FACTORS`), at most one per
    :data:`MODELS_PER_FACTOR` models (at least 1) and fewer than the models and the items; 0 below
    :data:`MIN_FACTOR_MODELS` models."""
    if n_models < MIN_FACTOR_MODELS or n_items < 2:
        return 0
    d = DEFAULT_FACTORS if requested is None else int(requested)
    return max(0, min(d, max(1, n_models // MODELS_PER_FACTOR), n_models - 1, n_items - 1))


@dataclass(frozen=True, eq=False)
class FactorModel:
    """μ (N,), W (N, d), ψ (N,) of a bank's items (see the module docstring), and the metric's range."""

    mean: np.ndarray
    loadings: np.ndarray
    noise: np.ndarray
    n_models: int
    lo: float = 0.0
    hi: float = 1.0

    def __post_init__(self):
        mean = np.asarray(self.mean, dtype=float)
        W = np.asarray(self.loadings, dtype=float)
        psi = np.asarray(self.noise, dtype=float)
        if W.ndim == 1:
            W = W[:, None]
        n = mean.size
        if mean.ndim != 1 or W.shape[0] != n or psi.shape != (n,):
            raise ValueError(f"factor model: mean, loadings and noise must cover the same {n} items")
        if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(W)) and np.all(np.isfinite(psi))):
            raise ValueError("factor model: every mean, loading and noise must be finite")
        if np.any(psi <= 0):
            raise ValueError("factor model: every item's noise must be > 0")
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "loadings", W)
        object.__setattr__(self, "noise", psi)

    @property
    def n_items(self) -> int:
        return int(self.mean.size)

    @property
    def n_factors(self) -> int:
        return int(self.loadings.shape[1])

    def posterior(self, items, y) -> tuple[np.ndarray, np.ndarray]:
        """(f̂, A⁻¹): the posterior mean and covariance of the factor scores given raw scores ``y`` on
        bank ``items``."""
        items = np.asarray(items, dtype=np.int64)
        y = np.asarray(y, dtype=float)
        W, psi = self.loadings, self.noise
        d = W.shape[1]
        if items.size == 0:
            return np.zeros(d), np.eye(d)
        Ws = W[items] / psi[items, None]
        A = np.eye(d) + W[items].T @ Ws
        cov = np.linalg.inv(A)
        f = cov @ (Ws.T @ (y - self.mean[items]))
        return f, cov

    def predict(self, items, y) -> np.ndarray:
        """Every bank item's predicted raw score given raw scores ``y`` on ``items`` (clipped to the range)."""
        f, _ = self.posterior(items, y)
        return np.clip(self.mean + self.loadings @ f, self.lo, self.hi)

    def full_task(self, items, y) -> tuple[float, float]:
        """(estimate, model-based variance) of the mean raw score over every bank item: the scores seen
        and the predictions for the rest; the variance is that of the unseen items' mean given the
        scores (0 when every item was seen)."""
        items = np.asarray(items, dtype=np.int64)
        y = np.asarray(y, dtype=float)
        n = self.n_items
        unseen = np.ones(n, dtype=bool)
        unseen[items] = False
        f, cov = self.posterior(items, y)
        pred = np.clip(self.mean[unseen] + self.loadings[unseen] @ f, self.lo, self.hi)
        est = (float(np.sum(y)) + float(np.sum(pred))) / n
        w = self.loadings[unseen].sum(0)
        var = (float(w @ cov @ w) + float(np.sum(self.noise[unseen]))) / (n * n)
        return est, var

    def to_dict(self) -> dict:
        return {"kind": "linear-factor", "n_models": int(self.n_models), "lo": float(self.lo), "hi": float(self.hi),
                "mean": [round(float(v), 8) for v in self.mean],
                "loadings": [[round(float(v), 8) for v in row] for row in self.loadings],
                "noise": [round(float(v), 8) for v in self.noise]}

    @classmethod
    def from_dict(cls, d: dict, n_items: int) -> "FactorModel":
        """From a bank file's ``factors`` block (ValueError when malformed or not over ``n_items`` items)."""
        if not isinstance(d, dict) or d.get("kind") != "linear-factor":
            raise ValueError("factors: not a linear factor model (kind 'linear-factor')")
        try:
            fm = cls(mean=np.asarray(d["mean"], dtype=float), loadings=np.asarray(d["loadings"], dtype=float),
                     noise=np.asarray(d["noise"], dtype=float), n_models=int(d.get("n_models", 0)),
                     lo=float(d.get("lo", 0.0)), hi=float(d.get("hi", 1.0)))
        except (KeyError, TypeError) as e:
            raise ValueError(f"factors: {type(e).__name__}: {e}") from None
        if fm.n_items != n_items:
            raise ValueError(f"factors: {fm.n_items} items, the bank has {n_items}")
        return fm


def fit_factor_model(Y, d: int, *, lo: float = 0.0, hi: float = 1.0) -> FactorModel:
    """The factor model of the (models × items) raw scores ``Y`` (NaN: no score) with ``d`` factors:
    principal components of the item-centred matrix (a missing score at its item's mean)."""
    Y = np.asarray(Y, dtype=float)
    M, N = Y.shape
    if not 1 <= d < min(M, N + 1):
        raise ValueError(f"a factor model of {M} models x {N} items cannot have {d} factors")
    have = np.isfinite(Y)
    cnt = have.sum(0)
    mean = np.where(cnt > 0, np.where(have, Y, 0.0).sum(0) / np.maximum(cnt, 1), 0.5 * (lo + hi))
    X = np.where(have, Y - mean, 0.0)
    U, s, Vt = np.linalg.svd(X, full_matrices=False)
    W = Vt[:d].T * (s[:d] / np.sqrt(M))
    resid = X - (U[:, :d] * s[:d]) @ Vt[:d]
    psi = np.maximum((resid * resid).sum(0) / M, MIN_NOISE)
    return FactorModel(mean=mean, loadings=W, noise=psi, n_models=M, lo=lo, hi=hi)

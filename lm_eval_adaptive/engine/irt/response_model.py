"""Item-response models: how a score depends on ability θ and item difficulty b.

Two models share one small interface, so selection, estimation and the ranker never
ask which one they have:

* :class:`ContinuousResponseModel` (METHOD.md §1): a score y ∈ [0, 1] with mean
  μ = logistic(θ - b) and variance k·μ(1-μ). Fisher information μ(1-μ)/k; equivalent
  discrimination a = 1/√k.
* :class:`BernoulliResponseModel`: a binary score (exact match, multiple choice),
  P(y = 1) = logistic(a·(θ - b)) with one bank-wide a, Fisher information a²·P(1-P).
* :class:`BinaryIRTModel` (``"2pl"``, ``"3pl"``): a binary score with per-item
  discrimination a_i and guessing c_i, P(y = 1) = c + (1-c)·logistic(a·(θ - b)). Its
  item parameters live in the bank (``items.a``, ``items.c``); every method takes them as
  keyword arguments ``a=`` and ``c=`` aligned with ``b`` (``**bank.item_params(items)``).
  The one-parameter models take no such arguments (``item_params`` is empty for them), so
  a call site that forgets them fails loudly on a 2PL/3PL bank.

Likelihood used for the posterior
---------------------------------
For the continuous model two likelihoods are available:

``"quasi"`` (default)
    The quasi-likelihood of the mean/variance model, Q(θ) = [y·log μ + (1-y)·log(1-μ)] / k.
    Its score (y - μ)/k has expectation 0 whenever the mean model is right and its
    curvature is exactly the Fisher information μ(1-μ)/k of METHOD.md §1, whatever the
    true shape of the score distribution. Real metric scores are bounded, skewed and
    often exactly 0 (sentence BLEU), so this is the robust choice; it is also what the
    paper's reference code's one-step update linearises.
``"normal"``
    The full heteroscedastic normal log-density N(y; μ, k·μ(1-μ)). It also extracts
    information from the size of the residuals (a second Fisher term (1-2μ)²/2), which
    is only right if the variance model is exactly right.

Everything is vectorised: ``theta`` and ``b`` broadcast against each other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

__all__ = ["BINARY_MODEL_KINDS", "binary_mean_bounds", 
    "ResponseModel",
    "ContinuousResponseModel",
    "BernoulliResponseModel",
    "BinaryIRTModel",
    "BINARY_KINDS",
    "response_model_from_dict",
]

_EPS = 1e-12


def _log_expit(x: np.ndarray) -> np.ndarray:
    """log(logistic(x)) computed without overflow."""
    return -np.logaddexp(0.0, -x)


def _expit_scalar(x: float) -> float:
    """logistic(x) of one float, without overflow."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


_SOFTPLUS_DIRECT = 700.0  # log(1 + e^x) as written while e^x stays finite (x < 709.78)


_ROWS = 2048  # scores per block in _add_binary_log_likelihoods (a block is rows × grid doubles)


def _add_binary_log_likelihoods(out: np.ndarray, y: np.ndarray, theta: np.ndarray, b: np.ndarray,
                                a: float, scale: float) -> None:
    """``out += Σᵢ (yᵢ·log σ(xᵢ) + (1-yᵢ)·log σ(-xᵢ)) / scale`` with xᵢ = a·(θ - bᵢ): the bracket is
    yᵢ·xᵢ - log(1 + e^xᵢ), and Σᵢ yᵢ·xᵢ = a·(θ·Σy - Σ y·b) needs no (scores × grid) array."""
    total = (a * float(np.sum(y))) * theta - a * float(y @ b)
    if b.size and theta.size:
        finite = a * max(abs(float(theta.max()) - float(b.min())), abs(float(theta.min()) - float(b.max()))) \
            < _SOFTPLUS_DIRECT
        for lo in range(0, b.size, _ROWS):
            x = np.subtract.outer(-b[lo:lo + _ROWS], -theta)  # θ - b, one row per score
            if a != 1.0:
                x *= a
            if finite:
                np.exp(x, out=x)
                np.log1p(x, out=x)
            else:
                np.logaddexp(0.0, x, out=x)
            total -= x.sum(axis=0)
    if scale != 1.0:
        total /= scale
    out += total


def _add_binary_log_likelihood(out: np.ndarray, y: float, x: np.ndarray, scale: float,
                               sp: np.ndarray | None = None) -> None:
    """``out += (y·log σ(x) + (1-y)·log σ(-x)) / scale``, overwriting ``x`` (and ``sp``, a scratch
    array shaped like ``x``, when given: nothing is allocated then).

    The bracket is y·x - log(1 + e^x): one exp and one log1p per point instead of two
    logaddexp (the same values up to rounding; e^x is finite on any grid the estimators
    build, and the overflow-free form is used when it would not be).
    """
    if x.size and max(abs(float(x[0])), abs(float(x[-1]))) < _SOFTPLUS_DIRECT:  # x is monotone in θ
        sp = np.exp(x, out=sp)
        np.log1p(sp, out=sp)
    else:
        sp = np.logaddexp(0.0, x, out=sp)
    x *= y
    x -= sp
    if scale != 1.0:
        x *= 1.0 / scale  # a product is about twice as fast as a quotient (the same up to one rounding)
    out += x


class ResponseModel:
    """Interface of a response model (see module docstring)."""

    kind: str = "abstract"
    #: True when items carry their own parameters besides b (a, c: keyword arguments).
    per_item = False

    @property
    def discrimination(self) -> float:  # pragma: no cover - interface
        raise NotImplementedError

    def mean(self, theta, b) -> np.ndarray:  # pragma: no cover - interface
        """Expected score μ(θ, b)."""
        raise NotImplementedError

    def information(self, theta, b) -> np.ndarray:  # pragma: no cover - interface
        """Fisher information of one item at θ."""
        raise NotImplementedError

    def item_information(self, theta: float, b: float) -> float:
        """:meth:`information` of one item at one θ, as a float (the same value up to rounding)."""
        return float(self.information(theta, b))

    def log_likelihood(self, y, theta, b) -> np.ndarray:  # pragma: no cover - interface
        """Log-likelihood (up to a constant in θ) of score ``y`` on item ``b`` at ``theta``."""
        raise NotImplementedError

    def add_log_likelihood(self, out: np.ndarray, y: float, theta: np.ndarray, b: float, *,
                           work: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """``out += log_likelihood(y, theta, b)`` in place, for one score ``y`` on one item ``b``
        at every ability in ``theta`` (the grid posterior's update; the same values up to
        rounding, in fewer passes over the grid where a model overrides it). ``work``: two
        scratch arrays shaped like ``theta`` that a model may overwrite instead of allocating."""
        out += self.log_likelihood(y, theta, b)

    def softplus_form(self) -> tuple[float, float] | None:
        """``(a, scale)`` when ``log_likelihood(y, θ, b)`` is (y·x - log(1 + eˣ)) / scale with
        x = a·(θ - b), one ``a`` and ``scale`` for every item (the binary-type likelihoods); None
        for any other likelihood. The grid posterior uses it to update in fewer passes."""
        return None

    def add_log_likelihoods(self, out: np.ndarray, y: np.ndarray, theta: np.ndarray, b: np.ndarray) -> None:
        """``out += Σᵢ log_likelihood(y[i], theta, b[i])`` in place: several scores (1-d ``y``, ``b``)
        at every ability in ``theta`` (the grid posterior's :meth:`update_many`)."""
        out += self.log_likelihood(y[:, None], theta[None, :], b[:, None]).sum(axis=0)

    def validate_scores(self, y: np.ndarray) -> None:
        """Raise ValueError if ``y`` holds scores the model cannot take."""
        y = np.asarray(y, dtype=float)
        if not np.all(np.isfinite(y)):
            raise ValueError("scores must be finite numbers")
        if np.any((y < 0.0) | (y > 1.0)):
            raise ValueError("scores must lie in [0, 1] after scaling")

    def to_dict(self) -> dict:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass(frozen=True)
class ContinuousResponseModel(ResponseModel):
    """Continuous 1PL: y ~ N(μ, k·μ(1-μ)), μ = logistic(θ - b)."""

    k: float
    likelihood: str = "quasi"
    kind: str = "continuous"

    def __post_init__(self):
        if not (np.isfinite(self.k) and self.k > 0):
            raise ValueError(f"noise parameter k must be a positive number, got {self.k!r}")
        if self.likelihood not in ("quasi", "normal"):
            raise ValueError(f"likelihood must be 'quasi' or 'normal', got {self.likelihood!r}")

    @property
    def discrimination(self) -> float:
        """Equivalent discrimination a = 1/√k."""
        return 1.0 / math.sqrt(self.k)  # (sqrt is correctly rounded: the value np.sqrt gives)

    def mean(self, theta, b):
        return expit(np.subtract(theta, b))

    def information(self, theta, b):
        mu = self.mean(theta, b)
        return mu * (1.0 - mu) / self.k

    def item_information(self, theta, b) -> float:
        mu = _expit_scalar(float(theta) - float(b))
        return mu * (1.0 - mu) / self.k

    def log_likelihood(self, y, theta, b):
        x = np.subtract(theta, b)
        y = np.asarray(y, dtype=float)
        if self.likelihood == "quasi":
            return (y * _log_expit(x) + (1.0 - y) * _log_expit(-x)) / self.k
        mu = expit(x)
        var = np.maximum(self.k * mu * (1.0 - mu), _EPS)
        return -0.5 * np.log(var) - 0.5 * (y - mu) ** 2 / var

    def softplus_form(self) -> tuple[float, float] | None:
        return (1.0, float(self.k)) if self.likelihood == "quasi" else None

    def add_log_likelihood(self, out, y, theta, b, *, work=None) -> None:
        if self.likelihood != "quasi":
            out += self.log_likelihood(y, theta, b)
            return
        if work is None:
            _add_binary_log_likelihood(out, float(y), np.subtract(theta, b), self.k)
        else:
            _add_binary_log_likelihood(out, float(y), np.subtract(theta, b, out=work[0]), self.k, work[1])

    def add_log_likelihoods(self, out, y, theta, b) -> None:
        if self.likelihood != "quasi":
            super().add_log_likelihoods(out, y, theta, b)
            return
        _add_binary_log_likelihoods(out, np.asarray(y, dtype=float), np.asarray(theta, dtype=float),
                                    np.asarray(b, dtype=float), 1.0, self.k)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "k": float(self.k), "a": self.discrimination,
                "likelihood": self.likelihood}


@dataclass(frozen=True)
class BernoulliResponseModel(ResponseModel):
    """Binary 1PL/Rasch-type model: P(y=1) = logistic(a·(θ - b))."""

    a: float = 1.0
    kind: str = "bernoulli"

    def __post_init__(self):
        if not (np.isfinite(self.a) and self.a > 0):
            raise ValueError(f"discrimination a must be a positive number, got {self.a!r}")

    @property
    def discrimination(self) -> float:
        return float(self.a)

    def mean(self, theta, b):
        return expit(self.a * np.subtract(theta, b))

    def information(self, theta, b):
        p = self.mean(theta, b)
        return self.a ** 2 * p * (1.0 - p)

    def item_information(self, theta, b) -> float:
        p = _expit_scalar(self.a * (float(theta) - float(b)))
        return self.a ** 2 * p * (1.0 - p)

    def log_likelihood(self, y, theta, b):
        x = self.a * np.subtract(theta, b)
        y = np.asarray(y, dtype=float)
        return y * _log_expit(x) + (1.0 - y) * _log_expit(-x)

    def softplus_form(self) -> tuple[float, float] | None:
        return float(self.a), 1.0

    def add_log_likelihood(self, out, y, theta, b, *, work=None) -> None:
        if work is None:
            _add_binary_log_likelihood(out, float(y), self.a * np.subtract(theta, b), 1.0)
        else:
            x = np.subtract(theta, b, out=work[0])
            x *= self.a  # a·(θ - b): the same product as above
            _add_binary_log_likelihood(out, float(y), x, 1.0, work[1])

    def add_log_likelihoods(self, out, y, theta, b) -> None:
        _add_binary_log_likelihoods(out, np.asarray(y, dtype=float), np.asarray(theta, dtype=float),
                                    np.asarray(b, dtype=float), float(self.a), 1.0)

    def validate_scores(self, y):
        y = np.asarray(y, dtype=float)
        if not np.all((y == 0.0) | (y == 1.0)):
            raise ValueError("the Bernoulli response model takes scores 0 or 1 only")

    def to_dict(self) -> dict:
        return {"kind": self.kind, "a": float(self.a)}


#: The per-item binary models: ``"2pl"`` (c = 0) and ``"3pl"`` (guessing c per item).
BINARY_KINDS = ("2pl", "3pl")
#: Every response model whose scores are 0 or 1 (the Bernoulli model and the per-item binary ones).
BINARY_MODEL_KINDS = ("bernoulli", *BINARY_KINDS)


def binary_mean_bounds(model: ResponseModel, seen_sum, n_unseen, n_total):
    """The logical bounds of a full-task mean when every score is 0 or 1: ((seen + 0·unseen) / N,
    (seen + 1·unseen) / N), arrays or floats alike (issue 31: no interval past them); None for a model whose
    scores are not 0/1 (a continuous bank's stored ranges are what calibration saw, not the metric's bounds)."""
    if model.kind not in BINARY_MODEL_KINDS:
        return None
    n = np.maximum(n_total, 1)
    return seen_sum / n, (seen_sum + n_unseen) / n


def _validate_binary(y) -> None:
    y = np.asarray(y, dtype=float)
    if not np.all((y == 0.0) | (y == 1.0)):
        raise ValueError("a binary response model takes scores 0 or 1 only")


@dataclass(frozen=True)
class BinaryIRTModel(ResponseModel):
    """Binary 2PL/3PL: P(y = 1) = c + (1-c)·logistic(a·(θ - b)), per-item a > 0 and 0 ≤ c < 1.

    With q = logistic(a·(θ - b)) and P = c + (1-c)·q the Fisher information is
    a²·(1-P)/P·((P-c)/(1-c))² = a²·(1-c)·q²·(1-q)/P (the 3PL closed form; a²·q·(1-q) at c = 0).
    """

    kind: str = "2pl"
    per_item = True

    def __post_init__(self):
        if self.kind not in BINARY_KINDS:
            raise ValueError(f"binary model kind must be one of {BINARY_KINDS}, got {self.kind!r}")

    @property
    def discrimination(self) -> float:
        raise TypeError(f"a {self.kind} model has one discrimination per item: read the bank's items.a")

    @staticmethod
    def _params(a, c):
        if a is None:
            raise TypeError("a 2PL/3PL model needs the items' discriminations a= (pass **bank.item_params(items))")
        return np.asarray(a, dtype=float), (0.0 if c is None else np.asarray(c, dtype=float))

    def mean(self, theta, b, a=None, c=None):
        a, c = self._params(a, c)
        return c + (1.0 - c) * expit(a * np.subtract(theta, b))

    def information(self, theta, b, a=None, c=None):
        a, c = self._params(a, c)
        q = expit(a * np.subtract(theta, b))
        p = c + (1.0 - c) * q
        return a ** 2 * (1.0 - c) * q * q * (1.0 - q) / np.maximum(p, _EPS)

    def log_likelihood(self, y, theta, b, a=None, c=None):
        a, c = self._params(a, c)
        x = a * np.subtract(theta, b)
        y = np.asarray(y, dtype=float)
        with np.errstate(divide="ignore"):
            log_c, log_1c = np.log(c), np.log1p(-np.asarray(c, dtype=float))
        log_p = np.logaddexp(log_c, log_1c + _log_expit(x))  # log(c + (1-c)·q)
        log_q = log_1c + _log_expit(-x)                       # log(1 - P) = log((1-c)(1-q))
        return y * log_p + (1.0 - y) * log_q

    def validate_scores(self, y):
        _validate_binary(y)

    def to_dict(self) -> dict:
        return {"kind": self.kind}


def response_model_from_dict(d: dict) -> ResponseModel:
    """Inverse of ``to_dict``."""
    kind = d.get("kind")
    if kind in BINARY_KINDS:
        return BinaryIRTModel(kind=kind)
    if kind == "continuous":
        return ContinuousResponseModel(k=float(d["k"]), likelihood=d.get("likelihood", "quasi"))
    if kind == "bernoulli":
        return BernoulliResponseModel(a=float(d.get("a", 1.0)))
    raise ValueError(f"unknown response model kind {kind!r} (expected 'continuous', 'bernoulli', '2pl' or '3pl')")

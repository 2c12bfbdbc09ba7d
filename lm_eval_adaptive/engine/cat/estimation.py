"""Ability estimation: the posterior of θ on a grid (EAP) with a normal prior.

The posterior is kept as log-density values on a fixed uniform grid; each observed score
adds its log-likelihood (a vector op over the grid, independent of the bank size).
The expected a-posteriori (EAP) estimate and the posterior standard deviation (the SE
of METHOD.md §3) are sums over the grid. A uniform grid integrates a smooth unimodal
posterior very accurately even when the posterior SD is close to the grid step (the
error of the discrete sum of a Gaussian falls like exp(-2π²σ²/h²)), so the default
step 0.025 is accurate down to SEs of about 0.02 — well below any useful SE target.

:class:`AbilityEstimator` is the interface of every ability estimator
(:class:`GridPosterior` is the default). An examinee builds its estimator with an
:class:`EstimatorFactory` — ``factory(bank) -> AbilityEstimator`` — so a new estimator
(another prior, a per-model dispersion, a sandwich variance) plugs in as a factory:
``Examinee(bank, selector, estimator=MyFactory())`` or
``AdaptiveRanker(bank, models, estimator=MyFactory())``. :class:`GridEAP` is the factory
of :class:`GridPosterior`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from lm_eval_adaptive.engine.irt.response_model import ResponseModel

if TYPE_CHECKING:  # pragma: no cover
    from lm_eval_adaptive.engine.irt.bank import ItemBank

__all__ = ["AbilityEstimator", "EstimatorFactory", "GridEAP", "GridPosterior", "DispersionEAP", "DispersionPosterior",
           "DEFAULT_PRIOR_SD", "Z95", "DEFAULT_DISPERSION_PRIOR_ITEMS",
           "DEFAULT_GRID_HALF_WIDTH", "DEFAULT_GRID_STEP"]

#: METHOD.md §3: prior θ ~ Normal(median b, 25).
DEFAULT_PRIOR_SD = 5.0
#: Φ⁻¹(0.975): the normal quantile of every two-sided 95% interval the package reports.
Z95 = 1.959963984540054
#: Pseudo-items of the dispersion prior (:class:`DispersionPosterior`): the bank's noise counts
#: as this many items' worth of evidence about a model's own noise.
DEFAULT_DISPERSION_PRIOR_ITEMS = 10.0
DEFAULT_GRID_HALF_WIDTH = 12.0
DEFAULT_GRID_STEP = 0.025
_COARSE_STEP = 0.25
_EXP_FLOOR = -700.0  # e^-700 ≈ 1e-304: still a normal double (below ≈ -708 exp turns subnormal, and slow)
_RECENTRE = 64  # softplus-form updates between two exact maxima of the log weights (see GridPosterior)
_SOFTPLUS_FORM_LIMIT = 700.0  # |a·g|, |a·b| and |a·(g - b)| below this: every factor of e^(a(g - b)) is a normal double


@runtime_checkable
class AbilityEstimator(Protocol):
    """One model's ability estimate, updated one observed score at a time.

    ``theta`` is the point estimate θ̂ and ``se`` its standard error: the ranker orders
    models by ``theta`` and its pair rule and allocation use ``se``.
    """

    @property
    def theta(self) -> float:
        ...

    @property
    def se(self) -> float:
        ...

    def update(self, model: ResponseModel, b: float, y: float, **item) -> None:
        """Add one scaled score ``y`` ∈ [0, 1] on an item of difficulty ``b``; ``item``: its other
        parameters (``a``, ``c`` of a 2PL/3PL bank, ``bank.item_params(i)``; none for one-parameter banks)."""
        ...

    def update_many(self, model: ResponseModel, b: np.ndarray, y: np.ndarray, **item) -> None:
        """Add several scores at once (the same result as :meth:`update` on each, up to rounding)."""
        ...


@runtime_checkable
class EstimatorFactory(Protocol):
    """Builds a fresh :class:`AbilityEstimator` for one model on a bank; ``name`` goes into signatures."""

    name: str

    def __call__(self, bank: ItemBank) -> AbilityEstimator:
        ...


class GridPosterior:
    """Posterior of one model's ability θ on a uniform grid.

    Parameters
    ----------
    prior_mean, prior_sd:
        Normal prior on θ.
    half_width, step:
        The fine part of the grid spans ``prior_mean ± half_width`` with spacing ``step``;
        beyond it a coarse grid (spacing 0.25) reaches ``prior_mean ± 6·prior_sd`` so the
        prior's tails are not cut off. Sums use trapezoid weights.
    """

    __slots__ = ("grid", "weights", "_lw", "_shift", "_mean", "_sd", "n_obs", "prior_mean", "prior_sd", "_tables",
                 "_work", "_scratch", "_pristine", "_const", "_form_model", "_form", "_told", "_item", "_model",
                 "_cols", "_u", "_coef")
    name = "grid-eap"

    def __init__(self, prior_mean: float = 0.0, prior_sd: float = DEFAULT_PRIOR_SD, *,
                 half_width: float = DEFAULT_GRID_HALF_WIDTH, step: float = DEFAULT_GRID_STEP,
                 grid: np.ndarray | None = None):
        if not (np.isfinite(prior_sd) and prior_sd > 0):
            raise ValueError(f"prior_sd must be positive, got {prior_sd!r}")
        if grid is None:
            tables = _grid_tables(float(prior_mean), float(prior_sd), float(half_width), float(step))
        else:
            tables = _tables(np.array(grid, dtype=float), float(prior_mean), float(prior_sd))
        self.grid, self.weights, prior, self._tables = tables
        self.prior_mean = float(prior_mean)
        self.prior_sd = float(prior_sd)
        # The log posterior plus the log trapezoid weights (the log of what the sums weigh) is kept
        # as four columns: lw, the grid g, U and 1, so that lw + S·g - U/scale - shift is one
        # matrix-vector product with the coefficients [1, S, -1/scale, -shift]. lw is the prior
        # (and log weights) plus every likelihood added as it is; a softplus-form update (see
        # ``update``) adds its log(1 + eˣ) to U and its slope to S, and leaves out its constant
        # term, kept in ``_const``.
        self._cols = self._tables[7].copy(order="F")
        self._lw = self._cols[:, 0]
        self._u = self._cols[:, 2]
        self._coef = np.array([1.0, 0.0, 0.0, 0.0])
        self._const = 0.0
        self._form_model = None  # the response model whose softplus form ``_form`` holds
        self._form = None
        # what it was told: difficulties and scores (rows 0 and 1 of a buffer that doubles when full;
        # the first n_obs columns are filled), the per-item parameters (a, c) of a 2PL/3PL bank
        # aligned with them, and the response model (the last one given)
        self._told = np.empty((2, 32))
        self._item: dict = {}
        self._model = None
        # The summary weighs exp(lw + S·g - U/scale - shift). ``_shift`` is an upper bound of the
        # largest of those log weights, set by the updates alone (so that θ̂ is a function of the
        # scores told, whenever it is read): the maximum itself after the first softplus-form update
        # and every _RECENTRE-th, else raised by each update's constant and its largest possible
        # log-likelihood. None: unknown (the summary takes the maximum).
        self._shift = None
        self._pristine = True  # the log posterior is the prior's table, untouched
        self.n_obs = 0
        self._mean = None
        self._sd = None
        self._work = None  # scratch array for _summarise
        self._scratch = None  # two scratch arrays for update

    def __getstate__(self) -> dict:
        # every slot but the two column views, which a copy or an unpickled posterior takes of its own columns
        state = {}
        for cls in type(self).__mro__:
            for name in getattr(cls, "__slots__", ()):
                if name not in ("_lw", "_u") and hasattr(self, name):
                    state[name] = getattr(self, name)
        return state

    def __setstate__(self, state: dict) -> None:
        for name, value in state.items():
            setattr(self, name, value)
        self._lw = self._cols[:, 0]
        self._u = self._cols[:, 2]

    def _total(self, shift: float = 0.0, out: np.ndarray | None = None) -> np.ndarray:
        """lw + S·g - U/scale - ``shift``: the log posterior plus the log weights, less the constant terms
        in ``_const``, less ``shift``."""
        coef = self._coef
        coef[3] = -shift
        return np.dot(self._cols, coef, out=out)

    @property
    def log_post(self) -> np.ndarray:
        """The log posterior on the grid, up to a constant (a new array)."""
        lp = self._total()
        lp -= self._tables[2]
        if self._const:
            lp -= self._const
        return lp

    @log_post.setter
    def log_post(self, value) -> None:
        lw = np.array(value, dtype=float) + self._tables[2]
        if lw.shape != self.grid.shape:
            raise ValueError("the log posterior needs one value per grid point")
        self._lw[:] = lw
        self._u[:] = 0.0
        self._coef[1] = 0.0
        self._shift, self._mean, self._pristine, self._const = None, None, False, 0.0

    def _set_form(self, model: ResponseModel) -> None:
        """Cache ``model``'s softplus form on this grid: (e^(a·g), a, 1/scale, a·g at both ends), or None."""
        form = getattr(model, "softplus_form", None)
        form = form() if form is not None else None
        self._form_model = model
        self._form = None
        coef = self._coef
        if coef[1] != 0.0 or coef[2] != 0.0:  # another model's softplus terms: move them into lw
            self._lw[:] = self._total()
            self._u[:] = 0.0
            coef[1] = coef[2] = 0.0
        if form is not None:
            a, scale = float(form[0]), float(form[1])
            ends = (a * float(self.grid[0]), a * float(self.grid[-1]))
            if a > 0 and scale > 0 and max(abs(ends[0]), abs(ends[1])) < _SOFTPLUS_FORM_LIMIT:
                self._form = (_exp_table(self.grid, self._tables, a), a, 1.0 / scale, ends[0], ends[1])
                coef[2] = -1.0 / scale

    def update(self, model: ResponseModel, b: float, y: float, **item) -> None:
        """Add one observed score ``y`` on an item of difficulty ``b`` (``item``: its a, c if any)."""
        if model is not self._form_model:
            self._set_form(model)
        work = self._scratch
        if work is None:
            work = self._scratch = (np.empty_like(self._lw), np.empty_like(self._lw))
        b, y = float(b), float(y)
        form = self._form
        step = None  # how much this score raises the bound ``_shift`` (None: unknown, the general update)
        if form is not None and not item:
            # a binary-type likelihood, (y·x - log(1 + eˣ))/scale with x = a(θ - b): e^x is the table
            # e^(a·g) times e^(-a·b), log(1 + eˣ) goes into U, the linear part y·a·θ/scale into S,
            # and its constant y·a·b/scale into ``_const`` (and into the summary's shift, so that the
            # weights stay ≤ 1)
            ea, a, inv_scale, lo, hi = form
            ab = a * b
            if -_SOFTPLUS_FORM_LIMIT < ab < _SOFTPLUS_FORM_LIMIT and lo - ab > -_SOFTPLUS_FORM_LIMIT \
                    and hi - ab < _SOFTPLUS_FORM_LIMIT:
                t = np.multiply(ea, math.exp(-ab), out=work[0])
                np.log1p(t, out=t)
                u = self._u
                u += t
                # the largest the bracket y·x - log(1 + eˣ) can be: y·log y + (1 - y)·log(1 - y), at x = logit y
                top = y * math.log(y) + (1.0 - y) * math.log1p(-y) if 0.0 < y < 1.0 else 0.0
                const = 0.0
                if y:
                    slope = y * a * inv_scale
                    self._coef[1] += slope
                    const = slope * b
                    self._const += const
                step = top * inv_scale + const
        if step is None:
            add = None if item else getattr(model, "add_log_likelihood", None)
            if add is not None:
                add(self._lw, y, self.grid, b, work=work)
            else:
                self._lw += model.log_likelihood(y, self.grid, b, **item)
        self._pristine = False
        n = self.n_obs
        told = self._told if n < self._told.shape[1] else self._grow(n + 1)
        told[0, n] = b
        told[1, n] = y
        self.n_obs = n + 1
        self._mean = None
        self._model = model
        for k, v in item.items():
            self._item.setdefault(k, []).append(float(v))
        if step is None:
            self._shift = None
        elif self._shift is None or self.n_obs % _RECENTRE == 0:
            self._shift = float(self._total(0.0, work[1]).max())
        else:
            self._shift += step

    def update_many(self, model: ResponseModel, b: np.ndarray, y: np.ndarray, **item) -> None:
        """Add several observations at once (a (n, grid) product; for replays and tests)."""
        b = np.asarray(b, dtype=float)
        y = np.asarray(y, dtype=float)
        n = self.n_obs
        if b.size:
            told = self._grow(n + b.size)
            told[0, n:n + b.size] = b.ravel()
            told[1, n:n + b.size] = y.ravel()
            add = None if item else getattr(model, "add_log_likelihoods", None)
            if add is not None:
                add(self._lw, y.ravel(), self.grid, b.ravel())
            else:
                col = {k: np.broadcast_to(np.asarray(v, dtype=float), b.shape)[:, None] for k, v in item.items()}
                self._lw += model.log_likelihood(y[:, None], self.grid[None, :], b[:, None], **col).sum(axis=0)
            self.n_obs += int(b.size)
            self._pristine = False
            self._mean = None
            self._shift = None
        self._model = model
        for k, v in item.items():
            self._item.setdefault(k, []).extend(np.broadcast_to(np.asarray(v, dtype=float), b.shape).ravel().tolist())

    def _grow(self, n: int) -> np.ndarray:
        """The buffer of what it was told, with room for ``n`` columns (doubled as needed)."""
        told = self._told
        if n > told.shape[1]:
            bigger = np.empty((2, max(n, 2 * told.shape[1])))
            bigger[:, :self.n_obs] = told[:, :self.n_obs]
            told = self._told = bigger
        return told

    @property
    def told(self) -> tuple[np.ndarray, np.ndarray]:
        """(b, y): the difficulties and scores of every observation, in the order told (read-only views)."""
        b, y = self._told[0, :self.n_obs], self._told[1, :self.n_obs]
        b.flags.writeable = y.flags.writeable = False
        return b, y

    def _summarise(self) -> None:
        # Weights w ∝ exp(lp)·(trapezoid weights); θ̂ = Σ w·g / Σ w and the variance are their moments
        # about the grid's centre c. Points more than 700 below the largest weigh < 1e-300 relative
        # to it (nothing, in double precision): they count as e^-700, which keeps exp off its very
        # slow subnormal path.
        c, sq, log_w, powers, prior, floor, _, _ = self._tables
        w = self._work
        if w is None:
            w = self._work = np.empty_like(self._lw)
        if self._pristine:
            # the prior alone: on a grid symmetric about the prior's centre c (the default grid) θ̂ is c
            # up to the rounding of the sums, and that rounding, which differs between BLAS builds,
            # decided between the two items equally near c (an even bank's median): θ̂ is c exactly
            # there, so the first item is the same on every machine
            np.subtract(prior, prior.max(), out=w)
            np.maximum(w, floor, out=w)
            np.exp(w, out=w)
            w *= self.weights
            z = float(w.sum())
            m = float(w @ self.grid) / z
            if abs(m - c) <= 1e-9 * self.prior_sd:
                m = c
            d = m - c
            v = float(w @ sq) / z - d * d
        else:
            # exp(lw - shift), shift an upper bound of lw set by the updates (see __init__): no weight
            # exceeds 1 and none needs the maximum found first (when the sum leaves [1e-250, 1e250]
            # it is found after all). Nothing here depends on earlier summaries.
            shift = self._shift
            if shift is None:
                shift = float(self._total(0.0, w).max())
            coef = self._coef  # self._total(shift, w), inline
            coef[3] = -shift
            np.dot(self._cols, coef, out=w)
            np.maximum(w, floor, out=w)
            np.exp(w, w)
            z, s1, s2 = (powers @ w).tolist()  # the mass and both moments in one product
            if not 1e-250 < z < 1e250:  # once more, relative to the maximum
                shift = float(self._total(0.0, w).max())
                self._total(shift, w)
                np.maximum(w, floor, out=w)
                np.exp(w, w)
                z, s1, s2 = (powers @ w).tolist()
            d = s1 / z
            m = c + d
            v = s2 / z - d * d
        if d * d > 100.0 * v:  # far from the centre: the centred sum, to keep every digit of v
            dev = self.grid - m
            dev *= dev
            v = float(w @ dev) / z
        self._mean = m
        self._sd = math.sqrt(max(v, 0.0))

    @property
    def estimated(self) -> bool:
        """θ̂ and the SD are summarised for the scores told so far (reading them costs nothing)."""
        return self._mean is not None

    @property
    def mean(self) -> float:
        """EAP estimate θ̂."""
        if self._mean is None:
            self._summarise()
        return self._mean

    @property
    def sd(self) -> float:
        """Posterior standard deviation (the standard error of θ̂)."""
        if self._mean is None:
            self._summarise()
        return self._sd

    @property
    def theta(self) -> float:
        """θ̂ (the :class:`AbilityEstimator` name of :attr:`mean`)."""
        if self._mean is None:
            self._summarise()
        return self._mean

    @property
    def se(self) -> float:
        """SE of θ̂ (the :class:`AbilityEstimator` name of :attr:`sd`)."""
        return self.sd

    def density(self) -> np.ndarray:
        """Normalised posterior density on the grid (integrates to 1 with the trapezoid weights)."""
        p = np.exp(self.log_post - self.log_post.max())
        return p / float(p @ self.weights)

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """Equal-tailed credible interval from the grid posterior."""
        p = self.density()
        # CDF at the grid points by the trapezoid rule
        c = np.concatenate([[0.0], np.cumsum((p[1:] + p[:-1]) / 2 * np.diff(self.grid))])
        c /= c[-1]
        lo = float(np.interp((1 - level) / 2, c, self.grid))
        hi = float(np.interp(1 - (1 - level) / 2, c, self.grid))
        return lo, hi


def _tables(grid: np.ndarray, prior_mean: float, prior_sd: float) -> tuple:
    """(grid, trapezoid weights, log prior, (centre c, (g - c)², log weights, rows 1, g - c, (g - c)²,
    log prior, the exp floor per point, {a: e^(a·g)} filled by :func:`_exp_table`, the posterior's
    initial columns (see :class:`GridPosterior`))), read-only."""
    if grid.ndim != 1 or grid.size < 3 or np.any(np.diff(grid) <= 0):
        raise ValueError("grid must be strictly increasing with at least 3 points")
    w = np.empty_like(grid)
    w[1:-1] = (grid[2:] - grid[:-2]) / 2
    w[0] = (grid[1] - grid[0]) / 2
    w[-1] = (grid[-1] - grid[-2]) / 2
    prior = -0.5 * ((grid - prior_mean) / prior_sd) ** 2
    c = float(grid[grid.size // 2])
    dev = grid - c
    powers = np.stack([np.ones_like(grid), dev, dev * dev])
    sq = powers[2]
    log_w = np.log(w)
    floor = np.full_like(grid, _EXP_FLOOR)  # np.maximum against an array: no scalar to convert per call
    cols = np.asfortranarray(np.stack([prior + log_w, grid, np.zeros_like(grid), np.ones_like(grid)], axis=1))
    for a in (grid, w, prior, powers, log_w, floor, cols):
        a.flags.writeable = False
    return grid, w, prior, (c, sq, log_w, powers, prior, floor, {}, cols)


def _exp_table(grid: np.ndarray, tables: tuple, a: float) -> np.ndarray:
    """e^(a·g) on ``grid`` (whose ``_tables`` tuple is ``tables``), built once per a and shared read-only."""
    cache = tables[6]
    e = cache.get(a)
    if e is None:
        e = np.exp(a * grid)
        e.flags.writeable = False
        cache[a] = e
    return e


@functools.lru_cache(maxsize=64)
def _grid_tables(prior_mean: float, prior_sd: float, half_width: float, step: float) -> tuple:
    """The default grid around ``prior_mean`` (see :class:`GridPosterior`) and its tables, built once
    per setting and shared (read-only) by every posterior that uses it."""
    n = int(round(2 * half_width / step)) + 1
    fine = np.linspace(-half_width, half_width, n)
    outer = 6.0 * prior_sd
    if outer > half_width:
        m = int(np.ceil((outer - half_width) / _COARSE_STEP))
        tail = half_width + _COARSE_STEP * np.arange(1, m + 1)
        fine = np.concatenate([-tail[::-1], fine, tail])
    return _tables(prior_mean + fine, prior_mean, prior_sd)


@dataclass(frozen=True)
class GridEAP:
    """Factory of :class:`GridPosterior` estimators: prior Normal(the bank's median b, ``prior_sd``²)."""

    prior_sd: float = DEFAULT_PRIOR_SD
    half_width: float = DEFAULT_GRID_HALF_WIDTH
    step: float = DEFAULT_GRID_STEP

    @property
    def name(self) -> str:
        """``grid-eap``, with the settings that differ from the defaults."""
        diff = [f"{k}={v!r}" for k, v, d in (("prior_sd", self.prior_sd, DEFAULT_PRIOR_SD),
                                              ("half_width", self.half_width, DEFAULT_GRID_HALF_WIDTH),
                                              ("step", self.step, DEFAULT_GRID_STEP)) if v != d]
        return "grid-eap" + (f"({','.join(diff)})" if diff else "")

    def __call__(self, bank: ItemBank) -> GridPosterior:
        return GridPosterior(bank.prior_mean, self.prior_sd, half_width=self.half_width, step=self.step)


class DispersionPosterior(GridPosterior):
    """:class:`GridPosterior`, with the SE scaled by the model's own dispersion (person fit).

    The bank's noise k describes its calibration models; a model may scatter more around its
    curve. Its dispersion φ (its noise relative to k) is estimated from its own residuals at θ̂,
    information-weighted: φ̂ = Σ(y - μ)² / (k·Σμ(1 - μ)) · n/(n - 1), and shrunk toward 1 with a
    prior worth ``prior_items`` items: φ = (ν₀ + (n - 1)·φ̂) / (ν₀ + n - 1), never below 1. The
    SE is the posterior SD × √φ; θ̂ is the posterior mean, unchanged.
    """

    __slots__ = ("prior_items", "_phi")
    name = "grid-eap+dispersion"

    def __init__(self, prior_mean: float = 0.0, prior_sd: float = DEFAULT_PRIOR_SD, *,
                 prior_items: float = DEFAULT_DISPERSION_PRIOR_ITEMS, **grid):
        super().__init__(prior_mean, prior_sd, **grid)
        if not prior_items >= 0:
            raise ValueError(f"prior_items must be >= 0, got {prior_items!r}")
        self.prior_items = float(prior_items)
        self._phi = (0, 1.0)  # (scores told, the dispersion then)

    @property
    def dispersion(self) -> float:
        """φ: the shrunk dispersion (1 until two scores are known); computed once per update."""
        phi = self._phi
        if phi[0] != self.n_obs:
            phi = self._phi = (self.n_obs, self._dispersion())
        return phi[1]

    def _dispersion(self) -> float:
        n = self.n_obs
        if n < 2:
            return 1.0
        b, y = self._told[0, :n], self._told[1, :n]
        model = self._model
        if self._item:
            mu = np.asarray(model.mean(self.mean, b, **{k: np.asarray(v) for k, v in self._item.items()}), dtype=float)
        else:
            mu = np.asarray(model.mean(self.mean, b), dtype=float)
        # a 2PL/3PL bank's scores are Bernoulli: variance P(1 - P), no noise factor
        k = 1.0 if model.per_item else 1.0 / model.discrimination ** 2
        info = float(mu @ (1.0 - mu))  # Σ μ(1 - μ)
        if info <= 0:
            return 1.0
        r = y - mu
        raw = float(r @ r) / (k * info) * n / (n - 1)
        phi = (self.prior_items + (n - 1) * raw) / (self.prior_items + n - 1)
        return max(1.0, phi)

    @property
    def se(self) -> float:
        return self.sd * math.sqrt(self.dispersion)


@dataclass(frozen=True)
class DispersionEAP(GridEAP):
    """Factory of :class:`DispersionPosterior` estimators (the engine's default)."""

    prior_items: float = DEFAULT_DISPERSION_PRIOR_ITEMS

    @property
    def name(self) -> str:
        base = super().name.replace("grid-eap", "grid-eap+dispersion", 1)
        if self.prior_items != DEFAULT_DISPERSION_PRIOR_ITEMS:
            base += f"(prior_items={self.prior_items!r})"
        return base

    def __call__(self, bank: ItemBank) -> DispersionPosterior:
        return DispersionPosterior(bank.prior_mean, self.prior_sd, half_width=self.half_width, step=self.step,
                                   prior_items=self.prior_items)

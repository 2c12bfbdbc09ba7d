"""Ability estimators with an honest standard error (research prototype).

Interface (what an engine port would need): ``update(i, y)`` with bank item ``i`` and scaled
score ``y``; properties ``mean`` (θ̂), ``sd`` (the SE used for decisions and intervals),
``model_sd`` (the plain posterior SD), ``phi`` (variance inflation applied, 1 for the plain
posterior), ``df`` (degrees of freedom for a t quantile; inf = normal).

* :class:`GridEstimator` -- today's engine: EAP on the engine's grid with the quasi-likelihood
  Q = [y log μ + (1-y) log(1-μ)]/k; with item slopes a_i when the bank has them (2PL).
* :class:`DispersionEstimator` -- remedy 1 (person fit): the model's own dispersion
  k_m/k = φ_m estimated from its residuals and shrunk toward φ0 by a scaled-inverse-χ²
  prior with ν0 pseudo-items; SE = posterior SD·√φ_m; t with ν0+n-1 df.
* :class:`SandwichEstimator` -- remedy 2: Var(θ̂) = Σ s_i² / (Σ I_i)² · n/(n-1)
  (s_i = a_i(y_i-μ_i)/k, I_i = a_i² μ_i(1-μ_i)/k), optionally floored at the model variance.
* ``CalibratedInflation`` -- remedy 8: SE multiplied by a constant c found at calibration by
  leave-models-out CV (c = 95% quantile of |z| on the calibration history / 1.96).
"""
from __future__ import annotations

import numpy as np
from scipy.special import expit

from lm_eval_adaptive.engine.estimation import DEFAULT_PRIOR_SD, GridPosterior

from .bankview import BankView


def _log_expit(x):
    return -np.logaddexp(0.0, -x)


class GridEstimator:
    """Today's posterior (engine GridPosterior arithmetic), 1PL or 2PL items."""

    def __init__(self, bv: BankView, prior_sd: float = DEFAULT_PRIOR_SD):
        gp = GridPosterior(bv.prior_mean, prior_sd)
        self.bv = bv
        self.grid = gp.grid
        self.weights = gp.weights
        self.log_post = gp.log_post
        self.two_pl = not np.all(bv.a == 1.0)
        self.items: list[int] = []
        self.ys: list[float] = []
        self._m = None
        self._sd = None

    def update(self, i: int, y: float) -> None:
        bv = self.bv
        x = self.grid - bv.b[i]
        if self.two_pl:
            x = bv.a[i] * x
        self.log_post += (y * _log_expit(x) + (1.0 - y) * _log_expit(-x)) / bv.k
        self.items.append(int(i))
        self.ys.append(float(y))
        self._m = None

    def update_many(self, items, ys) -> None:
        items = np.asarray(items, dtype=np.int64)
        ys = np.asarray(ys, dtype=float)
        bv = self.bv
        if items.size == 0:
            return
        x = self.grid[None, :] - bv.b[items][:, None]
        if self.two_pl:
            x = bv.a[items][:, None] * x
        self.log_post += ((ys[:, None] * _log_expit(x) + (1 - ys[:, None]) * _log_expit(-x)) / bv.k).sum(0)
        self.items.extend(items.tolist())
        self.ys.extend(ys.tolist())
        self._m = None

    def _summarise(self):
        lp = self.log_post
        w = np.exp(lp - lp.max()) * self.weights
        z = w.sum()
        m = float(w @ self.grid) / z
        d = self.grid - m
        v = float(w @ (d * d)) / z
        self._m = m
        self._sd = float(np.sqrt(max(v, 0.0)))

    @property
    def n(self) -> int:
        return len(self.items)

    @property
    def mean(self) -> float:
        if self._m is None:
            self._summarise()
        return self._m

    @property
    def model_sd(self) -> float:
        if self._m is None:
            self._summarise()
        return self._sd

    sd = model_sd
    phi = 1.0
    df = np.inf

    # helpers shared by the robust estimators
    def residuals(self, theta=None):
        """(a_i, y_i - μ_i, μ_i(1-μ_i)) of the observed items at θ̂."""
        th = self.mean if theta is None else theta
        it = np.asarray(self.items, dtype=np.int64)
        a = self.bv.a[it]
        mu = expit(a * (th - self.bv.b[it]))
        return a, np.asarray(self.ys) - mu, mu * (1 - mu)


class DispersionEstimator(GridEstimator):
    """Remedy 1: person-fit dispersion φ_m, shrunk toward φ0 with ν0 pseudo-items.

    weighting="info": φ̂ = Σ a²(y-μ)² / (k Σ a² μ(1-μ)) -- the sandwich/model variance ratio;
    weighting="pearson": mean of (y-μ)²/(k μ(1-μ)) (μ(1-μ) floored at 0.01).
    S = (n-1)·φ̂·n/(n-1) ~ φ·χ²_{n-1}; φ_post = (ν0 φ0 + S) / (ν0 + n - 1); floor: φ ≥ floor.
    """

    def __init__(self, bv, *, phi0: float = 1.0, nu0: float = 10.0, weighting: str = "info",
                 floor: float | None = 1.0, use_t: bool = True, prior_sd: float = DEFAULT_PRIOR_SD):
        super().__init__(bv, prior_sd)
        self.phi0 = phi0
        self.nu0 = nu0
        self.weighting = weighting
        self.floor = floor
        self.use_t = use_t

    @property
    def phi_hat(self) -> float:
        """Unshrunk dispersion estimate (n/(n-1) corrected)."""
        n = self.n
        if n < 2:
            return float("nan")
        a, r, v = self.residuals()
        if self.weighting == "info":
            ph = float(np.sum(a * a * r * r) / (self.bv.k * np.sum(a * a * v)))
        else:
            ph = float(np.mean(r * r / (self.bv.k * np.maximum(v, 0.01))))
        return ph * n / (n - 1)

    @property
    def phi(self) -> float:
        n = self.n
        if n < 2:
            p = self.phi0
        else:
            p = (self.nu0 * self.phi0 + (n - 1) * self.phi_hat) / (self.nu0 + n - 1)
        if self.floor is not None:
            p = max(p, self.floor)
        return p

    @property
    def df(self) -> float:
        return (self.nu0 + max(self.n - 1, 0)) if self.use_t else np.inf

    @property
    def sd(self) -> float:
        return self.model_sd * float(np.sqrt(self.phi))


class SandwichEstimator(GridEstimator):
    """Remedy 2: robust (sandwich) variance of θ̂: Σ s_i² / (Σ I_i)² · n/(n-1).

    ``floor_model``: never report less than the model-based posterior SD.
    """

    def __init__(self, bv, *, floor_model: bool = True, min_items: int = 5, prior_sd: float = DEFAULT_PRIOR_SD):
        super().__init__(bv, prior_sd)
        self.floor_model = floor_model
        self.min_items = min_items

    @property
    def sandwich_var(self) -> float:
        n = self.n
        a, r, v = self.residuals()
        k = self.bv.k
        s = a * r / k
        info = np.sum(a * a * v / k) + 1.0 / DEFAULT_PRIOR_SD ** 2
        return float(np.sum(s * s) / info ** 2) * n / max(n - 1, 1)

    @property
    def sd(self) -> float:
        if self.n < self.min_items:
            return self.model_sd
        s = float(np.sqrt(self.sandwich_var))
        return max(s, self.model_sd) if self.floor_model else s

    @property
    def phi(self) -> float:
        return (self.sd / self.model_sd) ** 2


class InflatedEstimator(GridEstimator):
    """Remedy 8 (and the wrapper for any constant inflation): SE = c · (inner estimator's SE)."""

    def __init__(self, bv, inner_cls=GridEstimator, c: float = 1.0, **kw):
        super().__init__(bv, kw.pop("prior_sd", DEFAULT_PRIOR_SD))
        self._inner = inner_cls(bv, **kw) if inner_cls is not GridEstimator else None
        self.c = c

    def update(self, i, y):
        super().update(i, y)
        if self._inner is not None:
            self._inner.update(i, y)

    def update_many(self, items, ys):
        super().update_many(items, ys)
        if self._inner is not None:
            self._inner.update_many(items, ys)

    @property
    def sd(self):
        base = self._inner.sd if self._inner is not None else self.model_sd
        return self.c * base

    @property
    def phi(self):
        return (self.sd / self.model_sd) ** 2

    @property
    def df(self):
        return self._inner.df if self._inner is not None else np.inf


class MisfitEstimator(InflatedEstimator):
    """Remedy 8: SE² = (inner SE)² + τ_θ², τ_θ the bank's ability misfit SD measured at calibration
    by leave-models-out CV (selfcheck.misfit_constants); a bias-like term that does not shrink
    with the number of items."""

    def __init__(self, bv, inner_cls=GridEstimator, tau: float | None = None, key: str = "plain",
                 person_fit: bool = False, **kw):
        super().__init__(bv, inner_cls, 1.0, **kw)
        consts = bv.extra.get("tau_theta", {})
        if tau is None:
            tau = consts.get(key, 0.0)
        self._tau = float(tau)
        self.person_fit = person_fit
        if person_fit:
            self._tau_cls = {c: float(consts.get(f"{key}|{c}", tau)) for c in ("fit", "misfit")}
            self.lz_thr = float(bv.extra.get("lz_thr", -1.645))

    @property
    def tau(self) -> float:
        if not self.person_fit:
            return self._tau
        from .personfit import person_fit_lz
        lz = person_fit_lz(self)
        return self._tau_cls["misfit" if (np.isfinite(lz) and lz < self.lz_thr) else "fit"]

    @property
    def sd(self):
        base = self._inner.sd if self._inner is not None else self.model_sd
        return float(np.sqrt(base ** 2 + self.tau ** 2))


def make_estimator(bv: BankView, spec: dict):
    """Estimator from a spec dict: {"kind": "plain"|"dispersion"|"sandwich"|"inflated", ...}."""
    spec = dict(spec)
    kind = spec.pop("kind", "plain")
    if kind == "plain":
        return GridEstimator(bv)
    if kind == "dispersion":
        return DispersionEstimator(bv, **spec)
    if kind == "sandwich":
        return SandwichEstimator(bv, **spec)
    if kind == "inflated":
        inner = spec.pop("inner", None)
        cls = {None: GridEstimator, "dispersion": DispersionEstimator, "sandwich": SandwichEstimator}[inner]
        return InflatedEstimator(bv, cls, **spec)
    if kind == "misfit":
        inner = spec.pop("inner", None)
        cls = {None: GridEstimator, "dispersion": DispersionEstimator, "sandwich": SandwichEstimator}[inner]
        return MisfitEstimator(bv, cls, key=spec.pop("key", inner and {"dispersion": "disp_nu10"}.get(inner, inner) or "plain"), **spec)
    raise ValueError(kind)

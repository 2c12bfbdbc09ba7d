"""Calibration of a binary (0/1) response table under the 2PL or 3PL model.

P(y_ji = 1) = c_i + (1 - c_i)·logistic(a_i·θ_j + d_i), b_i = -d_i / a_i
(engine/irt/response_model.py, :class:`~lm_eval_adaptive.engine.irt.response_model.BinaryIRTModel`).

The fit is marginal maximum a posteriori by the EM algorithm of Bock & Aitkin (1981): the
calibration models' abilities are integrated out over a fixed quadrature grid with the
population N(0, 1) (which also sets the ability scale), and the item parameters maximise the
expected complete-data log-posterior, every item at once:

* E-step: each model's posterior over the grid, from its log-likelihood at every node, one
  matrix product of its successes and failures with log P and log (1 - P) (dense, or sparse
  for a table with missing pairs); the expected numbers of right and wrong answers of each
  item at each node follow from one more product;
* M-step: Fisher-scoring steps on the items' expected log-posterior (separable by item: every
  item's 2×2 or 3×3 system solved at once, vectorised over the items × nodes array), each step
  halved where it would not gain (a generalised EM).

Priors (the slopes and the guessing are estimated, not assumed, and shrunk):

* log a_i ~ N(μ_a, ``log_a_prior_sd``²), μ_a estimated from the bank (empirical Bayes): an item's
  slope rests on few bits with few calibration models and is shrunk toward the bank's typical
  slope, never to an assumed one; a > 0, so an item whose answers run against ability gets a
  slope near zero (a flat curve: its prediction is its mean) instead of being dropped;
* d_i ~ N(0, ``d_prior_sd``²): keeps an item that every calibration model got right (or wrong)
  finite;
* 3PL: c_i ~ Beta with mode c₀ and ``guessing_strength`` prior answers: c₀ the chance level
  when known (``guessing_prior``: 1/k for k options; a mapping per item), else estimated from
  the bank (empirical Bayes), so that multiple choice gets c near 1/k and exact match near 0;
  ``guessing`` fixes c instead (a number, or a mapping item id -> c).

Which model (``response_model=None``, the default for a 0/1 table): 2PL and 3PL are fitted on a
seeded 80% of the models and the one whose marginal log-likelihood of the other 20% is higher
is fitted on every model (model choice by held-out likelihood); with fewer than
:data:`MIN_MODELS_FOR_CHOICE` models, the 2PL.

Every item with at least one score is kept: none is dropped for a negative item-total
correlation (near chance that is mostly noise, and a dropped item's own answers could never
count in a full-task estimate) nor for being constant (the prior keeps it finite). Repeated
rows of a (model, item) pair count as several Bernoulli observations. Scores are taken as they
are (scaling ``none``, range [0, 1]): the table must hold 0 and 1 only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.special import betaln, expit, logit

from lm_eval_adaptive import __version__
from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.irt.factor_model import factor_count, fit_factor_model
from lm_eval_adaptive.engine.irt.response_model import BINARY_KINDS, BinaryIRTModel
from lm_eval_adaptive.errors import InputError

__all__ = ["calibrate_binary", "is_binary_table", "choose_binary_model", "fit_mml", "BinaryCounts", "MMLFit",
           "DEFAULT_GUESSING_PRIOR",
           "LOG_A_PRIOR_SD", "D_PRIOR_SD", "GUESSING_STRENGTH", "MIN_MODELS_FOR_CHOICE"]

#: Start (and, with ``guessing_prior=None`` on a 3PL, the starting point of the estimated mode) of
#: the guessing prior.
DEFAULT_GUESSING_PRIOR = 0.2
#: SD of log a around the bank's typical slope.
LOG_A_PRIOR_SD = 0.75
#: SD of the intercept d = -a·b.
D_PRIOR_SD = 5.0
#: Weight of the guessing prior, in answers: Beta(ν·c₀ + 1, ν·(1 - c₀) + 1).
GUESSING_STRENGTH = 20.0
#: Quadrature nodes on [-_GRID_HALF, _GRID_HALF] for the N(0, 1) population.
_NODES = 41
_GRID_HALF = 5.0
_MAX_EM = 500
#: EM stops when the log-posterior gains less than this (nats) per model in an iteration, or when
#: no item's curve moves by more than _P_TOL (mean absolute change of P over the population).
_EM_TOL = 1e-6
_P_TOL = 1e-4
#: Bounds of the M-step: log a, d, logit c.
_LOG_A_BOUNDS = (np.log(0.02), np.log(30.0))
_D_BOUNDS = (-40.0, 40.0)
#: The range an estimated SD of log a may take.
_LOG_A_SD_RANGE = (0.05, 2.0)
_C_BOUNDS = (float(logit(1e-4)), float(logit(0.75)))
#: A table with at most this many (model, item) cells is held as dense arrays.
_DENSE_CELLS = 20_000_000
_HOLDOUT_SHARE = 0.2
#: Fewest models for the choice of 2PL or 3PL by held-out likelihood: with fewer, a fifth of them is
#: too few to tell (and a guessing level rests on the few weakest models); the 2PL is fitted.
MIN_MODELS_FOR_CHOICE = 50
_CHOICE_SEED = 0
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


def _per_item(value, item_ids: np.ndarray, name: str) -> np.ndarray | None:
    """Per-item values in [0, 1) (NaN: not given) from a number, a mapping item id -> value, or None."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        v = np.array([float(value.get(str(i), np.nan)) for i in item_ids])
    else:
        v = np.full(item_ids.size, float(value))
    bad = np.isfinite(v) & ~((v >= 0) & (v < 1))
    if np.any(bad):
        raise InputError(f"{name} parameters must lie in [0, 1), got {v[bad][0]!r}")
    return v


# --------------------------------------------------------------------------- #
# The counts
# --------------------------------------------------------------------------- #


@dataclass
class BinaryCounts:
    """Successes and failures per (model, item): dense arrays, or CSR matrices for a sparse table.
    A complete table (one score per pair) keeps the successes alone (F is None): its failures are 1 - S."""

    S: object
    F: object | None
    n_models: int
    n_items: int

    @classmethod
    def from_long(cls, mi, ii, y, M, N, dense: bool | None = None) -> "BinaryCounts":
        if dense is None:
            dense = M * N <= _DENSE_CELLS and mi.size >= 0.3 * M * N
        if dense:
            S = np.bincount(mi * N + ii, weights=y, minlength=M * N).reshape(M, N)
            T = np.bincount(mi * N + ii, minlength=M * N).reshape(M, N).astype(float)
            if np.all(T == 1.0):
                return cls(S, None, M, N)
            return cls(S, T - S, M, N)
        S = sparse.csr_matrix((y, (mi, ii)), shape=(M, N))
        F = sparse.csr_matrix((1.0 - y, (mi, ii)), shape=(M, N))
        S.eliminate_zeros()
        F.eliminate_zeros()
        return cls(S, F, M, N)

    def rows(self, idx: np.ndarray) -> "BinaryCounts":
        return BinaryCounts(self.S[idx], None if self.F is None else self.F[idx], int(idx.size), self.n_items)

    def totals(self) -> tuple[np.ndarray, np.ndarray]:
        """Per item: successes, failures."""
        s = np.asarray(self.S.sum(axis=0)).ravel()
        return s, (self.n_models - s if self.F is None else np.asarray(self.F.sum(axis=0)).ravel())

    def loglik_nodes(self, logP: np.ndarray, log1P: np.ndarray) -> np.ndarray:
        """(models × nodes): each model's log-likelihood at every node (items × nodes inputs)."""
        if self.F is None:  # Σ y·log P + (1 - y)·log(1 - P) = Σ y·(log P - log(1 - P)) + Σ log(1 - P)
            return self.S @ (logP - log1P) + log1P.sum(axis=0)[None, :]
        return np.asarray(self.S @ logP + self.F @ log1P)

    def expected(self, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(items × nodes) expected right and wrong answers under the posterior weights W (models × nodes)."""
        r = np.asarray(self.S.T @ W)
        if self.F is None:
            return r, W.sum(axis=0)[None, :] - r
        return r, np.asarray(self.F.T @ W)


# --------------------------------------------------------------------------- #
# The fit
# --------------------------------------------------------------------------- #


@dataclass
class MMLFit:
    """A fit of :func:`fit_mml`: the items' log a, d and c, the priors' estimated centres and spread,
    the marginal log-likelihood, and each calibration model's EAP ability and its SD."""

    log_a: np.ndarray
    d: np.ndarray
    c: np.ndarray
    mu_a: float
    la_sd: float
    c0: float | None
    loglik: float  # marginal log-likelihood of the calibration models
    log_post: float
    iterations: int
    theta: np.ndarray  # EAP of each calibration model
    theta_sd: np.ndarray


def _std_normal_logpdf(x):
    """log φ(x), as scipy.stats' ``norm.logpdf`` computes it (without importing scipy.stats: ~0.4 s)."""
    return -x**2 / 2.0 - np.log(np.sqrt(2 * np.pi))


def _probabilities(log_a, d, c, nodes):
    q = expit(np.exp(log_a)[:, None] * nodes[None, :] + d[:, None])
    P = c[:, None] + (1.0 - c[:, None]) * q
    return np.clip(P, _EPS, 1 - _EPS), q


def _posterior(counts: BinaryCounts, log_a, d, c, nodes, log_w):
    """(weights models × nodes, marginal log-likelihood per model)."""
    P, _ = _probabilities(log_a, d, c, nodes)
    L = counts.loglik_nodes(np.log(P), np.log1p(-P)) + log_w[None, :]
    mx = L.max(axis=1, keepdims=True)
    W = np.exp(L - mx)
    Z = W.sum(axis=1, keepdims=True)
    W /= Z
    return W, (mx + np.log(Z)).ravel()


def _beta_log_prior(c, c0, nu):
    """log Beta(c; ν·c₀ + 1, ν·(1 - c₀) + 1)."""
    al, be = nu * c0 + 1.0, nu * (1.0 - c0) + 1.0
    return (al - 1) * np.log(c) + (be - 1) * np.log1p(-c) - betaln(al, be)


def _item_objective(r, f, nodes, la, dd, c, mu_a, la_sd, d_sd, c0, nu, free_c):
    """Per item: Σ_q r·log P + f·log(1 - P) + log prior (the M-step's objective, items × nothing)."""
    P, _ = _probabilities(la, dd, c, nodes)
    out = np.sum(r * np.log(P) + f * np.log1p(-P), axis=1)
    out -= 0.5 * ((la - mu_a) / la_sd) ** 2 + 0.5 * (dd / d_sd) ** 2
    if free_c.any():
        out[free_c] += _beta_log_prior(c[free_c], c0[free_c], nu)
    return out


def _m_step(r, f, nodes, log_a, d, gc, free_c, fixed_c, mu_a, la_sd, d_sd, c0, nu, steps: int = 2):
    """Raise Σ_q r·log P + f·log(1 - P) + log prior of every item by ``steps`` Fisher-scoring steps
    on (log a, d[, logit c]), each item's 2×2 or 3×3 system solved at once for all items, halving a
    step where it would lower the item's objective (a generalised EM: each step gains)."""
    N, Q = d.shape[0], nodes.size
    n = r + f
    has_c = bool(free_c.any())
    k = 3 if has_c else 2
    fc = free_c.astype(float)

    def c_of(g):
        return np.where(free_c, expit(g), fixed_c)

    c = c_of(gc)
    cur = _item_objective(r, f, nodes, log_a, d, c, mu_a, la_sd, d_sd, c0, nu, free_c)
    for _ in range(steps):
        a = np.exp(log_a)
        q = expit(a[:, None] * nodes[None, :] + d[:, None])
        P = np.clip(c[:, None] + (1 - c[:, None]) * q, _EPS, 1 - _EPS)
        w = (r - n * P) / (P * (1 - P))  # dℓ/dP
        dq = (1 - c[:, None]) * q * (1 - q)  # dP/dz
        J = np.empty((N, Q, k))
        J[:, :, 0] = dq * (a[:, None] * nodes[None, :])
        J[:, :, 1] = dq
        if has_c:
            J[:, :, 2] = (1 - q) * (c * (1 - c) * fc)[:, None]
        h = n / (P * (1 - P))
        g = np.stack([(w * J[:, :, i]).sum(axis=1) for i in range(k)], axis=1)
        info = np.empty((N, k, k))
        for i in range(k):
            hj = h * J[:, :, i]
            for j in range(i, k):
                info[:, i, j] = info[:, j, i] = (hj * J[:, :, j]).sum(axis=1)
        g[:, 0] -= (log_a - mu_a) / la_sd ** 2
        g[:, 1] -= d / d_sd ** 2
        info[:, 0, 0] += 1.0 / la_sd ** 2
        info[:, 1, 1] += 1.0 / d_sd ** 2
        if has_c:
            al, be = nu * c0 + 1.0, nu * (1.0 - c0) + 1.0
            g[:, 2] += fc * ((al - 1) * (1 - c) - (be - 1) * c)
            info[:, 2, 2] += fc * (al + be - 2) * c * (1 - c) + (1 - fc)  # a fixed c: an inert unit pivot
        info[:, np.arange(k), np.arange(k)] += 1e-9
        step = np.linalg.solve(info, g[:, :, None])[:, :, 0]
        var_la = np.linalg.inv(info)[:, 0, 0]  # posterior variance of log a (the prior's included)
        step = np.clip(step, -2.0, 2.0)
        la_new = np.clip(log_a + step[:, 0], *_LOG_A_BOUNDS)
        d_new = np.clip(d + step[:, 1], *_D_BOUNDS)
        gc_new = np.clip(gc + step[:, 2], *_C_BOUNDS) if has_c else gc.copy()
        new = _item_objective(r, f, nodes, la_new, d_new, c_of(gc_new), mu_a, la_sd, d_sd, c0, nu, free_c)
        tol = 1e-10 * (1.0 + np.abs(cur))
        bad = np.flatnonzero(new < cur - tol)
        t = 1.0
        for _half in range(6):  # halve the steps of the items that lost, those items alone
            if not bad.size:
                break
            t *= 0.5
            la_new[bad] = np.clip(log_a[bad] + t * step[bad, 0], *_LOG_A_BOUNDS)
            d_new[bad] = np.clip(d[bad] + t * step[bad, 1], *_D_BOUNDS)
            if has_c:
                gc_new[bad] = np.clip(gc[bad] + t * step[bad, 2], *_C_BOUNDS)
            fb = free_c[bad]
            new[bad] = _item_objective(r[bad], f[bad], nodes, la_new[bad], d_new[bad],
                                       np.where(fb, expit(gc_new[bad]), fixed_c[bad]), mu_a, la_sd, d_sd,
                                       c0[bad], nu, fb)
            bad = bad[new[bad] < cur[bad] - tol[bad]]
        ok = new >= cur - tol
        log_a = np.where(ok, la_new, log_a)
        d = np.where(ok, d_new, d)
        gc = np.where(ok, gc_new, gc)
        c = c_of(gc)
        cur = np.where(ok, new, cur)
    return log_a, d, gc, c, var_la


def fit_mml(counts: BinaryCounts, kind: str, fixed_c: np.ndarray | None, c_prior: np.ndarray | None, *,
          la_sd: float | None, d_sd: float, nu: float, start: MMLFit | None = None, max_iter: int = _MAX_EM,
          tol: float = _EM_TOL) -> MMLFit:
    """Bock-Aitkin EM for one kind ("2pl" or "3pl"). ``fixed_c``: per-item c (NaN: estimate); ``c_prior``:
    per-item prior mode (NaN: the bank's estimated c₀)."""
    from scipy.optimize import minimize_scalar  # noqa: PLC0415 - ~0.2 s to import: not at every command's start-up

    M, N = counts.n_models, counts.n_items
    nodes = np.linspace(-_GRID_HALF, _GRID_HALF, _NODES)
    log_w = _std_normal_logpdf(nodes)
    log_w -= np.logaddexp.reduce(log_w)
    if kind == "2pl":
        free_c = np.zeros(N, dtype=bool)
        fixed = np.zeros(N)
    else:
        fixed = np.zeros(N) if fixed_c is None else np.nan_to_num(fixed_c, nan=0.0)
        free_c = np.ones(N, dtype=bool) if fixed_c is None else np.isnan(fixed_c)
    estimate_c0 = bool(free_c.any()) and (c_prior is None or bool(np.isnan(c_prior[free_c]).any()))
    c0_bank = DEFAULT_GUESSING_PRIOR if start is None or start.c0 is None else start.c0
    prior_mode = np.full(N, c0_bank) if c_prior is None else np.where(np.isnan(c_prior), c0_bank, c_prior)

    if start is not None:
        log_a, d, mu_a = start.log_a.copy(), start.d.copy(), start.mu_a
        c_start = np.where(free_c, np.clip(start.c, 1e-3, 0.7), fixed)
    else:
        # items' shares right among the models, as if every model were at θ = 0
        S_tot, F_tot = counts.totals()
        p = (S_tot + 0.5) / (S_tot + F_tot + 1.0)
        c_start = np.where(free_c, np.minimum(prior_mode, 0.5 * p), fixed)
        q = np.clip((p - c_start) / (1 - c_start), 0.02, 0.98)
        log_a, d, mu_a = np.zeros(N), logit(q), 0.0
    gc = logit(np.clip(c_start, 1e-4, 0.75))
    c = np.where(free_c, expit(gc), fixed)

    prev = -np.inf
    it = 0
    sd_a = LOG_A_PRIOR_SD if la_sd is None else la_sd
    if la_sd is None and start is not None:
        sd_a = start.la_sd
    pop = np.exp(log_w)  # the population's weight of each node
    P_prev = None
    for it in range(1, max_iter + 1):
        W, ll_models = _posterior(counts, log_a, d, c, nodes, log_w)
        r, f = counts.expected(W)
        log_a, d, gc, c, var_la = _m_step(r, f, nodes, log_a, d, gc, free_c, fixed, mu_a, sd_a, d_sd,
                                          prior_mode, nu)
        mu_a = float(np.mean(log_a))  # empirical Bayes: the prior's centre is the bank's typical slope
        if la_sd is None:  # and its spread (the EM update of a normal prior's variance)
            sd_a = float(np.clip(np.sqrt(np.mean((log_a - mu_a) ** 2 + var_la)), *_LOG_A_SD_RANGE))
        if estimate_c0:
            cf = c[free_c]
            sel = free_c if c_prior is None else free_c & np.isnan(c_prior)
            cs = c[sel]
            res = minimize_scalar(lambda c0: -float(np.sum(_beta_log_prior(cs, c0, nu))),
                                  bounds=(1e-3, 0.6), method="bounded")
            c0_bank = float(res.x)
            prior_mode = np.where(sel, c0_bank, prior_mode)
            del cf
        log_post = float(np.sum(ll_models)) - 0.5 * float(np.sum(((log_a - mu_a) / sd_a) ** 2)) \
            - N * np.log(sd_a) - 0.5 * float(np.sum((d / d_sd) ** 2))
        if free_c.any():
            log_post += float(np.sum(_beta_log_prior(c[free_c], prior_mode[free_c], nu)))
        P_now, _ = _probabilities(log_a, d, c, nodes)
        moved = float(np.max(np.abs(P_now - P_prev) @ pop)) if P_prev is not None else np.inf
        P_prev = P_now
        if abs(log_post - prev) < tol * M or moved < _P_TOL:
            break
        prev = log_post
    W, ll_models = _posterior(counts, log_a, d, c, nodes, log_w)
    theta = W @ nodes
    theta_sd = np.sqrt(np.maximum(W @ nodes ** 2 - theta ** 2, 0.0))
    return MMLFit(log_a=log_a, d=d, c=c, mu_a=mu_a, la_sd=sd_a, c0=c0_bank if estimate_c0 else None,
                loglik=float(np.sum(ll_models)), log_post=log_post, iterations=it, theta=theta, theta_sd=theta_sd)


def _marginal_loglik(counts: BinaryCounts, fit: MMLFit) -> float:
    nodes = np.linspace(-_GRID_HALF, _GRID_HALF, _NODES)
    log_w = _std_normal_logpdf(nodes)
    log_w -= np.logaddexp.reduce(log_w)
    _, ll = _posterior(counts, fit.log_a, fit.d, fit.c, nodes, log_w)
    return float(np.sum(ll))


def choose_binary_model(counts: BinaryCounts, fixed_c, c_prior, *, la_sd: float | None, d_sd: float, nu: float,
                        seed: int = _CHOICE_SEED) -> tuple[str, dict, dict]:
    """2PL or 3PL by the marginal log-likelihood of a seeded 20% of the models, both fitted on the
    other 80%; returns (kind, the held-out log-likelihood per model of each, the 80% fits)."""
    M = counts.n_models
    perm = np.random.default_rng(seed).permutation(M)
    n_out = max(1, int(round(_HOLDOUT_SHARE * M)))
    out, fit_rows = np.sort(perm[:n_out]), np.sort(perm[n_out:])
    train, test = counts.rows(fit_rows), counts.rows(out)
    fits, held = {}, {}
    for kind in BINARY_KINDS:
        fits[kind] = fit_mml(train, kind, fixed_c, c_prior, la_sd=la_sd, d_sd=d_sd, nu=nu)
        held[kind] = _marginal_loglik(test, fits[kind]) / n_out
    kind = "3pl" if held["3pl"] > held["2pl"] else "2pl"
    return kind, held, fits


def calibrate_binary(table, *, response_model: str | None = "2pl", guessing=None, guessing_prior=None,
                     drop_negative: bool = True, log_a_prior_sd: float = LOG_A_PRIOR_SD,
                     d_prior_sd: float = D_PRIOR_SD, guessing_strength: float = GUESSING_STRENGTH,
                     task: str | None = None, metric: str | None = None, factors: int | None = None) -> ItemBank:
    """A 2PL/3PL :class:`ItemBank` from a 0/1 response table (see the module docstring).

    ``response_model``: "2pl", "3pl", or None (the one with the higher held-out likelihood).
    ``guessing`` (3PL only): c for every item (a number, e.g. 0.25 for four options) or per item
    (a mapping item id -> c; items it leaves out are estimated); None: every c estimated.
    ``guessing_prior``: the mode of an estimated c's prior (1/k for k options; a number or a
    mapping per item); None: estimated from the bank. ``drop_negative`` is the continuous
    calibration's filter and has no effect here (no binary item is dropped for a negative
    correlation: its slope is estimated, floored above 0).
    ``factors``: the factors of the bank's linear factor model of the answers (engine/irt/factor_model.py,
    what the full-task estimate predicts unseen items with); None: the default
    (:func:`~lm_eval_adaptive.engine.irt.factor_model.factor_count`: 5, fewer with fewer than 100 models,
    none below 20); 0: none.
    """
    if response_model is not None and response_model not in BINARY_KINDS:
        raise InputError(f"binary calibration fits {' or '.join(BINARY_KINDS)}, not {response_model!r}")
    if response_model == "2pl" and (guessing is not None or guessing_prior is not None):
        raise InputError("a guessing parameter needs the 3pl response model")
    table = _long_format(table)
    M, N = int(table.n_models), int(table.n_items)
    if M < 2:
        raise InputError(f"calibration needs at least 2 models, the table has {M}", path=table.source)
    if not is_binary_table(table):
        raise InputError(f"the {response_model or 'binary'} response model takes scores 0 or 1 only; this table "
                         "has others (use --response-model continuous)", path=table.source)
    mi = np.asarray(table.model_idx, dtype=np.int64)
    ii = np.asarray(table.item_idx, dtype=np.int64)
    y = np.asarray(table.score, dtype=float)
    item_ids = np.asarray(table.items, dtype=object)
    models = [str(m) for m in table.models]

    n_obs = np.bincount(ii, minlength=N)
    ones = np.bincount(ii, weights=y, minlength=N)
    dropped: dict[int, str] = {int(i): "no_observations" for i in np.flatnonzero(n_obs == 0)}
    kept = np.flatnonzero(n_obs > 0)
    if kept.size < 2:
        raise InputError(f"only {kept.size} item(s) have scores; cannot calibrate", path=table.source)
    pos = np.full(N, -1, dtype=np.int64)
    pos[kept] = np.arange(kept.size)
    counts = BinaryCounts.from_long(mi, pos[ii], y, M, kept.size)
    fixed_c = _per_item(guessing, item_ids[kept], "guessing")
    c_prior = _per_item(guessing_prior, item_ids[kept], "guessing prior")
    opts = dict(la_sd=log_a_prior_sd, d_sd=d_prior_sd, nu=guessing_strength)

    choice = None
    if response_model is None and M < MIN_MODELS_FOR_CHOICE:
        kind = "2pl"
        choice = {"by": f"fewer than {MIN_MODELS_FOR_CHOICE} models: the 2pl"}
        fit = fit_mml(counts, kind, fixed_c, c_prior, **opts)
    elif response_model is None:
        kind, held, fits = choose_binary_model(counts, fixed_c, c_prior, **opts)
        choice = {"by": "held-out marginal log-likelihood per model", "share": _HOLDOUT_SHARE,
                  "seed": _CHOICE_SEED, **{k: round(v, 6) for k, v in held.items()}}
        fit = fit_mml(counts, kind, fixed_c, c_prior, start=fits[kind], **opts)
    else:
        kind = response_model
        fit = fit_mml(counts, kind, fixed_c, c_prior, **opts)

    a = np.exp(fit.log_a)
    b = -fit.d / a
    c = fit.c if kind == "3pl" else np.zeros(kept.size)
    model_mean = np.bincount(mi, weights=y, minlength=M) / np.maximum(np.bincount(mi, minlength=M), 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        raw_item_mean = ones / n_obs
    reasons: dict[str, int] = {}
    for v in dropped.values():
        reasons[v] = reasons.get(v, 0) + 1
    estimated_c = kind == "3pl" and (fixed_c is None or bool(np.any(np.isnan(fixed_c))))
    flat = int(np.sum(a < 0.1))
    diagnostics = {
        "n_models": M, "n_items_in": N, "n_items_kept": int(kept.size), "n_observations": int(y.size),
        "k": None, "response_model": kind,
        "discrimination": float(np.mean(a)),
        "discrimination_quantiles": [round(float(v), 4) for v in np.quantile(a, [0.05, 0.5, 0.95])],
        "flat_items": flat,  # slope below 0.1: answers that do not follow ability (near chance, or against it)
        "guessing_mean": float(np.mean(c)),
        "guessing_prior_mode": None if fit.c0 is None else round(float(fit.c0), 6),
        "conformance_r2": None,
        "marginal_log_likelihood": float(fit.loglik),
        "em_iterations": int(fit.iterations),
        "model_choice": choice,
        "dropped_by_reason": reasons,
        "abilities": {m: round(float(t), 6) for m, t in zip(models, fit.theta)},
        "mean_raw_score": {m: round(float(v), 6) for m, v in zip(models, model_mean)},
    }
    n_factors = factor_count(M, int(kept.size), factors)
    factor_model = None
    if n_factors > 0:
        factor_model = fit_factor_model(_mean_matrix(mi, pos[ii], y, M, int(kept.size)), n_factors)
    diagnostics["factors"] = n_factors
    in_tok, out_tok = table.item_tokens()
    return ItemBank(
        item_ids=item_ids[kept], b=b, model=BinaryIRTModel(kind), scaling="none", lo=0.0, hi=1.0,
        input_tokens=in_tok[kept], output_tokens=out_tok[kept], a=a, c=c,
        task=task, metric=metric if metric is not None else getattr(table, "metric", None),
        dropped=[_dropped_entry(item_ids[i], dropped[i], raw_item_mean[i]) for i in sorted(dropped)],
        diagnostics=diagnostics, factors=factor_model,
        calibration={"method": "mml-em", "response_model": kind, "scaling": "none",
                     "guessing": ("estimated" if estimated_c else
                                  (float(c[0]) if kind == "3pl" and np.all(c == c[0]) else
                                   ("per_item" if kind == "3pl" else None))),
                     "priors": {"theta": "N(0, 1) population", "log_a_sd": log_a_prior_sd,
                                "log_a_mean": round(float(fit.mu_a), 6), "d_sd": d_prior_sd,
                                **({"c": f"Beta mode {'per_item' if c_prior is not None else 'estimated'}",
                                    "c_strength": guessing_strength} if estimated_c else {})},
                     "quadrature": {"nodes": _NODES, "range": [-_GRID_HALF, _GRID_HALF]},
                     "model_choice": "held-out likelihood" if response_model is None else "given",
                     "models": models,
                     "source": str(getattr(table, "source", "")), "software": f"lm-eval-adaptive {__version__}"},
    )


def _mean_matrix(mi, ii, y, M: int, N: int) -> np.ndarray:
    """(M, N) mean score of each (model, item) cell (NaN: none); a table too large to hold densely is
    cut to a seeded subsample of its models that fits (the factor model needs no more)."""
    keep = np.arange(M)
    if M * N > _DENSE_CELLS:
        keep = np.sort(np.random.default_rng(_CHOICE_SEED).permutation(M)[:max(2, _DENSE_CELLS // N)])
    rowpos = np.full(M, -1, dtype=np.int64)
    rowpos[keep] = np.arange(keep.size)
    ok = rowpos[mi] >= 0
    cell = rowpos[mi[ok]] * N + ii[ok]
    size = keep.size * N
    tot = np.bincount(cell, weights=y[ok], minlength=size)
    cnt = np.bincount(cell, minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(cnt > 0, tot / np.maximum(cnt, 1), np.nan).reshape(keep.size, N)


def _dropped_entry(item_id, reason: str, mean_raw: float) -> dict:
    d = {"id": str(item_id), "reason": reason}
    if np.isfinite(mean_raw):
        d["mean_raw"] = round(float(mean_raw), 6)
    return d

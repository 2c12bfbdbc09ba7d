"""Anytime-valid confidence sequences for the mean of a finite population sampled without replacement.

A task's full-task metric is the mean of N bounded scores, one per document. A run that answers the
documents in a uniformly random order (sampling without replacement) and looks at its interval after
every document needs an interval that holds **at every look at once**: a confidence sequence. This is
the hedged-capital betting confidence sequence of Waudby-Smith & Ramdas (2020, "Confidence sequences
for sampling without replacement", NeurIPS; the betting form of their 2023 JRSS-B paper "Estimating
means of bounded random variables by betting"), the construction of the reference package ``confseq``
(``betting.hedged_cs`` with ``N``), vectorised over a grid of candidate means and over runs.

Scores are mapped to [0, 1] by the known range [lo, hi]. For a candidate population mean m, after
t − 1 documents with sum S, the next document's conditional mean is μ_t(m) = (N·m − S)/(N − t + 1).
Two capital processes bet on the score being above or below it,

    K⁺_t(m) = Π (1 + λ⁺_i (x_i − μ_i(m))),   K⁻_t(m) = Π (1 − λ⁻_i (x_i − μ_i(m))),

with predictable bets (the predictable-mixture empirical-Bernstein size, λ_i = √(2 log(1/(α/2)) /
(σ̂²_{i−1} · i · log(1 + i))), truncated at c/μ_i(m) and c/(1 − μ_i(m)): c = :data:`TRUNCATION`, confseq's ½, for a
mean, :data:`PAIR_TRUNCATION` for a pair's paired differences). At the true mean both are
non-negative martingales, so by Ville's inequality P(∃t: ½K⁺_t ≥ 1/α or ½K⁻_t ≥ 1/α) ≤ α: the set of
m not yet rejected, {m: max(½K⁺_t(m), ½K⁻_t(m)) < 1/α}, holds the population mean at every t with
probability ≥ 1 − α, whenever the run stops, however often it looks.

What the interval is, by construction:

* the accepted set on the grid, widened by one grid step each way (the boundary lies between an
  accepted and a rejected grid point), intersected with the **logical bounds** — the mean is at least
  (S + 0·(N − t))/N and at most (S + 1·(N − t))/N whatever the unseen scores are — and with every
  earlier interval (the running intersection; a confidence sequence's running intersection is one);
* always inside [lo, hi]; **exact, zero width, at t = N** (the logical bounds meet at the mean);
* a candidate m whose μ_t(m) leaves [0, 1] is impossible and rejected for good.

The grid has ``grid`` points on [0, 1] (default 1,001: a resolution of 0.1% of the range); each
observation costs O(grid) per run. :class:`WorBettingCS` keeps a batch of independent runs (any leading
shape) and is updated one score per run at a time; :func:`wor_betting_cs` gives the whole path of one
sequence of scores.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["WorBettingCS", "wor_betting_cs", "DEFAULT_GRID", "TRUNCATION", "PAIR_TRUNCATION", "HEDGE"]

#: Candidate means on [0, 1] (grid points): 0.1% of the range between two.
DEFAULT_GRID = 1001
#: Bets are truncated at this share of the largest bet that keeps the capital positive (confseq's 1/2). Any share
#: below 1 keeps every capital process a non-negative martingale: the guarantee is the same at every share, only the
#: width changes.
TRUNCATION = 0.5
#: The share for a sequence of paired differences (the bank-free ranker's pairs), chosen on the tuning half
#: (docs/results/stop35_rules.txt, rule 3): a pair's differences spread far less than their stated range
#: [lo − hi, hi − lo], and the bets that order it quickly are larger than 1/2 allows (docs/cold-start.md, *The
#: truncation of a pair's bets*). A model's own scores keep 1/2: with 0.9 a single model's interval on a real table
#: narrowed later, not sooner (`--ci-width 0.06` on wmt24/en-de/chrf: 379 documents instead of 266).
PAIR_TRUNCATION = 0.9
#: Weight of the "above" capital process in the hedge (confseq's θ = 1/2).
HEDGE = 0.5


class WorBettingCS:
    """A batch of hedged-capital betting confidence sequences for the mean of ``n`` scores in
    [``lo``, ``hi``] sampled without replacement, at level 1 − ``alpha`` (see the module docstring).

    ``shape``: the batch (``()`` for one sequence). :meth:`update` takes one score per run (an array of
    ``shape``; with ``mask``, only the runs where it is true take theirs); :attr:`lower`, :attr:`upper`
    are the current interval of each run in metric units, :attr:`t` the scores taken.
    """

    def __init__(self, n: int, lo: float, hi: float, alpha: float = 0.05, *, shape=(), grid: int = DEFAULT_GRID,
                 prior_mean: float = 0.5, prior_variance: float = 0.25, fake_obs: float = 1.0,
                 truncation: float = TRUNCATION):
        if int(n) < 1:
            raise ValueError(f"the population needs at least 1 document, got {n}")
        if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
            raise ValueError(f"the score range must be finite with hi > lo, got [{lo}, {hi}]")
        if not (0.0 < alpha < 1.0):
            raise ValueError(f"alpha must be in (0, 1), got {alpha}")
        if int(grid) < 3:
            raise ValueError(f"the grid needs at least 3 points, got {grid}")
        if not (0.0 < truncation < 1.0):
            raise ValueError(f"the truncation must be in (0, 1) (1 or more lets the capital reach 0), got {truncation}")
        self.truncation = float(truncation)
        # what :meth:`restarted` builds the same sequence from
        self._made_with = {"grid": int(grid), "prior_mean": float(prior_mean), "prior_variance": float(prior_variance),
                           "fake_obs": float(fake_obs), "truncation": self.truncation}
        self.n, self.lo, self.hi, self.alpha = int(n), float(lo), float(hi), float(alpha)
        self.shape = tuple(np.shape(np.empty(shape)))
        self.m = np.linspace(0.0, 1.0, int(grid))
        self.step = 1.0 / (int(grid) - 1)
        self._log_threshold = math.log(1.0 / self.alpha)
        # the bet size's numerator: each process at its share of α (as confseq's hedged_cs)
        self._c_up = 2.0 * math.log(1.0 / (self.alpha * HEDGE))
        self._c_down = 2.0 * math.log(1.0 / (self.alpha * (1.0 - HEDGE)))
        self._prior_mean, self._fake = float(prior_mean), float(fake_obs)
        self.t = np.zeros(self.shape, dtype=np.int64)
        self.s = np.zeros(self.shape)  # sum of the scores in [0, 1]
        self._raw_sum = np.zeros(self.shape)  # sum of the scores as told (the exact mean at t = N)
        self._mean_sum = np.full(self.shape, self._fake * self._prior_mean)  # fake·prior + Σx
        self._var_sum = np.full(self.shape, self._fake * float(prior_variance))  # fake·prior var + Σ(x − μ̂)²
        self.log_up = np.zeros(self.shape + (self.m.size,))
        self.log_down = np.zeros(self.shape + (self.m.size,))
        self._lo01 = np.zeros(self.shape)
        self._hi01 = np.ones(self.shape)

    # ------------------------------------------------------------------ updates
    def update(self, x, mask=None, *, shift=None, spread=None) -> None:
        """Take one score per run (``x``: metric units, in [lo, hi]); with ``mask``, only where true.

        ``shift`` (metric units): a **control variate** (a prediction-powered bet). With the drawn
        document's prediction ŷ and the mean ĉ of the predictions over the documents not yet drawn
        (before this one), ``shift`` = ŷ − ĉ; the capital processes then bet on z = x − shift, whose
        conditional mean given the past is x's own, μ_t(m), whatever the predictions are (the document is
        drawn uniformly from those left, so E[ŷ] = ĉ): the martingales at the true mean, and so the
        guarantee, stay as they are, and predictions that track x make z vary less and the bets grow
        faster. The predictions must be fixed before the draw (predictable). ``spread`` = (a, b), metric
        units: how far the shift can reach on either side, max ŷ − ĉ and ĉ − min ŷ over the documents
        not yet drawn, so that z ∈ [lo − a, hi + b] and the bets are truncated to keep the capital
        positive there (c/(μ + a) and c/(1 + b − μ) in units of the range, c the truncation). The interval's logical
        bounds and the exact end at t = N are x's, unchanged."""
        x = np.broadcast_to(np.asarray(x, dtype=float), self.shape)
        take = np.ones(self.shape, dtype=bool) if mask is None else np.broadcast_to(np.asarray(mask, bool), self.shape)
        if not np.any(take):
            return
        if np.any(~np.isfinite(x[take])) or np.any((x[take] < self.lo) | (x[take] > self.hi)):
            raise ValueError(f"a score outside the stated range [{self.lo:g}, {self.hi:g}] breaks the "
                             f"interval's guarantee: got {x[take][(x[take] < self.lo) | (x[take] > self.hi) | ~np.isfinite(x[take])][:3]}")
        if np.any(self.t[take] >= self.n):
            raise ValueError(f"every one of the {self.n} documents was already taken")
        x01 = np.clip((x - self.lo) / (self.hi - self.lo), 0.0, 1.0)
        width = self.hi - self.lo
        if shift is None:
            z01, below, above = x01, 0.0, 0.0
        else:
            z01 = x01 - np.broadcast_to(np.asarray(shift, dtype=float), self.shape) / width
            a, b = (0.0, 0.0) if spread is None else spread
            below = np.maximum(np.broadcast_to(np.asarray(a, dtype=float), self.shape), 0.0)[..., None] / width
            above = np.maximum(np.broadcast_to(np.asarray(b, dtype=float), self.shape), 0.0)[..., None] / width
        t = self.t.astype(float)  # documents before this one
        i = t + 1.0
        with np.errstate(divide="ignore", invalid="ignore"):
            mu = (self.n * self.m - self.s[..., None]) / (self.n - t)[..., None]  # (..., grid)
            sigma2 = self._var_sum / (t + self._fake)  # σ̂² of the documents before (predictable)
            base = np.sqrt(1.0 / (sigma2 * i * np.log1p(i)))
            lam_up = np.minimum((math.sqrt(self._c_up) * base)[..., None], self.truncation / (mu + below))
            lam_down = np.minimum((math.sqrt(self._c_down) * base)[..., None], self.truncation / (1.0 + above - mu))
            dx = z01[..., None] - mu
            step_up = np.log1p(lam_up * dx)
            step_down = np.log1p(-lam_down * dx)
        # a candidate whose next conditional mean leaves [0, 1] is impossible (its steps may be NaN there)
        impossible = (mu < 0.0) | (mu > 1.0)
        step_up = np.where(impossible, np.inf, step_up)
        step_down = np.where(impossible, np.inf, step_down)
        tk = take[..., None]
        self.log_up = np.where(tk, self.log_up + step_up, self.log_up)
        self.log_down = np.where(tk, self.log_down + step_down, self.log_down)
        s_new = self.s + x01
        mean_sum = self._mean_sum + z01
        mu_hat = mean_sum / (i + self._fake)  # includes x (confseq's lambda_predmix_eb); z's with a control variate
        self._var_sum = np.where(take, self._var_sum + (z01 - mu_hat) ** 2, self._var_sum)
        self._mean_sum = np.where(take, mean_sum, self._mean_sum)
        self.s = np.where(take, s_new, self.s)
        self._raw_sum = np.where(take, self._raw_sum + x, self._raw_sum)
        self.t = np.where(take, self.t + 1, self.t)
        self._refresh(take)

    def update_many(self, xs) -> None:
        """Take a sequence of scores (one run: ``shape`` must be ``()``), one after another."""
        for x in np.asarray(xs, dtype=float).ravel():
            self.update(x)

    def _refresh(self, take) -> None:
        rejected = np.maximum(math.log(HEDGE) + self.log_up, math.log(1.0 - HEDGE) + self.log_down) >= self._log_threshold
        accepted = ~rejected
        anyacc = accepted.any(axis=-1)
        first = np.argmax(accepted, axis=-1)
        last = self.m.size - 1 - np.argmax(accepted[..., ::-1], axis=-1)
        lo = np.where(anyacc, self.m[first] - self.step, 0.0)
        hi = np.where(anyacc, self.m[last] + self.step, 1.0)
        # logical bounds: the unseen documents score at least 0 and at most 1
        rest = (self.n - self.t) / self.n
        lo = np.maximum(lo, self.s / self.n)
        hi = np.minimum(hi, self.s / self.n + rest)
        lo, hi = np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)
        # the running intersection (unless empty: then the CS already missed; keep today's)
        run_lo, run_hi = np.maximum(self._lo01, lo), np.minimum(self._hi01, hi)
        empty = run_lo > run_hi
        run_lo, run_hi = np.where(empty, lo, run_lo), np.where(empty, hi, run_hi)
        exact = self.t >= self.n
        run_lo = np.where(exact, self.s / self.n, run_lo)
        run_hi = np.where(exact, self.s / self.n, run_hi)
        self._lo01 = np.where(take, run_lo, self._lo01)
        self._hi01 = np.where(take, run_hi, self._hi01)

    # ------------------------------------------------------------------ reading
    @property
    def lower(self) -> np.ndarray:
        """The lower end in metric units (at t = N the population mean itself, as told)."""
        return np.where(self.exact, self._raw_sum / self.n, self.lo + (self.hi - self.lo) * self._lo01)

    @property
    def upper(self) -> np.ndarray:
        return np.where(self.exact, self._raw_sum / self.n, self.lo + (self.hi - self.lo) * self._hi01)

    @property
    def mean(self) -> np.ndarray:
        """The mean of the scores taken (NaN before the first)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.t > 0, self._raw_sum / np.maximum(self.t, 1), np.nan)

    @property
    def exact(self) -> np.ndarray:
        return self.t >= self.n

    def restarted(self) -> WorBettingCS:
        """A single sequence as this one was made (population, range, level, grid, prior, truncation), before any
        score."""
        return WorBettingCS(self.n, self.lo, self.hi, self.alpha, **self._made_with)

    def copy_batch(self, shape) -> WorBettingCS:
        """This one-run sequence (``shape`` ``()``) repeated over a batch of ``shape`` runs (its
        continuations: each then takes its own scores)."""
        if self.shape != ():
            raise ValueError("only a single sequence can be repeated into a batch")
        out = WorBettingCS.__new__(WorBettingCS)
        out.__dict__.update(self.__dict__)
        out.shape = tuple(np.shape(np.empty(shape)))
        for name in ("t", "s", "_raw_sum", "_mean_sum", "_var_sum", "_lo01", "_hi01"):
            setattr(out, name, np.broadcast_to(getattr(self, name), out.shape).copy())
        for name in ("log_up", "log_down"):
            setattr(out, name, np.broadcast_to(getattr(self, name), out.shape + (self.m.size,)).copy())
        return out

    def narrow_grid(self, most: int | None = None) -> None:
        """Keep only the grid points inside the widest current interval of the batch (± two steps):
        the running intersection never lets a point outside it back in, so they need no updating
        (a continuation then costs O(its interval's width) per score, not O(grid)). With ``most``, keep
        at most about that many of them, evenly spaced: the intervals are then wider by the coarser step
        (still valid; used for projections, where speed matters more than the last grid step)."""
        lo, hi = float(np.min(self._lo01)), float(np.max(self._hi01))
        keep = np.flatnonzero((self.m >= lo - 2 * self.step) & (self.m <= hi + 2 * self.step))
        if keep.size < 3:
            return
        if most is not None and keep.size > most:
            k = int(np.ceil(keep.size / most))
            keep = keep[::k]
            self.step = self.step * k
        self.m = self.m[keep]
        self.log_up = self.log_up[..., keep]
        self.log_down = self.log_down[..., keep]


def wor_betting_cs(x, n: int, lo: float, hi: float, alpha: float = 0.05, *, grid: int = DEFAULT_GRID,
                   truncation: float = TRUNCATION):
    """(lower, upper): the confidence sequence's interval after each of the scores ``x`` (in the order
    drawn, without replacement, from a population of ``n``); ``x`` of shape (T,) or (runs, T)."""
    x = np.asarray(x, dtype=float)
    batch = x.shape[:-1]
    cs = WorBettingCS(n, lo, hi, alpha, shape=batch, grid=grid, truncation=truncation)
    lower = np.empty(x.shape)
    upper = np.empty(x.shape)
    for j in range(x.shape[-1]):
        cs.update(x[..., j])
        lower[..., j] = cs.lower
        upper[..., j] = cs.upper
    return lower, upper

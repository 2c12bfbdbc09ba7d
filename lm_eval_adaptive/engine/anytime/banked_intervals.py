"""Anytime-valid intervals for the banked ranker: the bank as a control variate, the design as the guarantee.

The banked ranker's default intervals (:mod:`~lm_eval_adaptive.engine.ranking.pairs.metric_scale`) are
fixed-time intervals whose coverage under adaptive stopping is measured, not guaranteed. This part gives
the same ranker intervals that hold **at every look at once**, whatever the bank and however the run
stops (issue 31, item 2), for :class:`~lm_eval_adaptive.engine.ranking.pairs.metric_judgement.MetricScaleJudgement`
to decide its pairs on (``intervals=``; docs/cold-start.md, *What each mode guarantees*).

**Why a random permutation's prefix is a sample without replacement under adaptive selection.** The
ranker's selector (:class:`~lm_eval_adaptive.engine.cat.selection.RandomShareSelector`) draws one uniformly
random permutation π of the bank, shared by every model; a random slot takes the first item of π the model
has not taken. So at any time the items of π before the model's next random pick are all taken (by random
slots, or by adaptive ones that happened to reach them first), and their scores are known. That prefix
(π restricted to the model's population: the bank items it has a score for) is the first t draws of a
uniformly random order of the population, whatever the adaptive slots did: the adaptive choices only decide
*when* the prefix grows, and :class:`~lm_eval_adaptive.engine.anytime.confidence_sequence.WorBettingCS`, a
confidence sequence, holds at every t at once (Ville's inequality), so at any random time, stopping rules
and adaptive choices included. The adaptive items off the prefix are not used for the interval (they are
not a random sample), only for θ̂, the ranking's point estimates and the allocation.

**The bank narrows, never invalidates.** Each document of the prefix is taken with a control variate
(``WorBettingCS.update``'s ``shift``): the bank's prediction of it at an ability fitted on the prefix *before*
the block of documents it is used for (predictable), less the mean prediction over the documents not yet
drawn. The conditional mean of the shifted score is the score's own, whatever the predictions: a wrong bank
costs width, not validity; a good one removes the variation it explains. The ability is the moment fit
on the prefix (:func:`prefix_ability`: the θ whose predicted mean over the prefix equals the observed mean),
not the examinee's θ̂, which also reads adaptive items that may lie ahead in the permutation.

**Pairs.** The difference of two models' full-task means over the items both have is the mean of
d_i = y_a,i − y_b,i over those items; the pair's prefix is π restricted to them, up to the first item one
of the two has not taken; its sequence runs on d in [lo − hi, hi − lo] with the difference of the two
models' predictions (each at its moment fit on the pair's prefix) as control variate. ``ordered`` when the
interval excludes 0, ``equivalent`` when it lies inside ±δ, else ``unresolved``; at level γ per pair, or
(``family``) at (1 − γ)/P each for P pairs (Bonferroni: every claim at once). Two models whose populations
differ are compared on the items both have (the difference of their means over those).

What the guarantee needs: scores inside the stated range ``[lo, hi]`` (refused otherwise), a permutation drawn
independently of the scores (the selector's, seeded), and a population fixed independently of the order (a
model's exclusions; one made mid-run restarts its sequences over the new population, replaying the prefix, which
assumes the exclusion did not depend on the order). The control variate reads only the prefix already taken
(its items and scores), so it is predictable however the ranker allocates, selects or keeps calls in flight.
One bank only (the single-metric ranker's selector); the multi-metric ranker's joint selector is not covered.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from lm_eval_adaptive.engine.anytime.confidence_sequence import DEFAULT_GRID, WorBettingCS
from lm_eval_adaptive.engine.ranking.pairs.outcomes import EQUIVALENT, ORDERED, UNRESOLVED

__all__ = ["BankedAnytimeIntervals", "prefix_ability", "ABILITY_GRID", "CONTROL_SHRINK"]

#: Prefix documents at which the control variate has half its weight (β = t / (t + CONTROL_SHRINK)).
CONTROL_SHRINK = 20.0
#: Abilities the moment fit looks at (the bank's scale is centred at the mean model's 0).
ABILITY_GRID = np.linspace(-8.0, 8.0, 161)


def _predicted(bank, theta, items=None) -> np.ndarray:
    """The bank's predicted raw metric of ``items`` (default every item) at each ability: (len(theta), n)."""
    idx = np.arange(bank.n_items) if items is None else np.asarray(items, dtype=np.int64)
    t = np.atleast_1d(np.asarray(theta, dtype=float))[:, None]
    params = {k: v[None, :] for k, v in bank.item_params(idx).items()}
    mu = bank.model.mean(t, bank.b[idx][None, :], **params)
    return bank.lo[idx][None, :] + mu * (bank.hi - bank.lo)[idx][None, :]


def prefix_ability(bank, items, scores) -> float:
    """The moment fit on the prefix: the ability (on :data:`ABILITY_GRID`, interpolated) at which the bank's
    mean prediction over ``items`` equals the mean of ``scores``; 0 (the mean model) for no items, the grid's
    end when the scores lie beyond every prediction."""
    items = np.asarray(items, dtype=np.int64)
    if items.size == 0:
        return 0.0
    pred = _predicted(bank, ABILITY_GRID, items).mean(axis=1)  # increasing in θ
    target = float(np.mean(scores))
    order = np.argsort(pred, kind="stable")
    return float(np.interp(target, pred[order], ABILITY_GRID[order]))


class _Sequence:
    """One confidence sequence along the permutation: a model's (``rows`` = (k,)) or a pair's (k, l: the
    difference of their scores), over the items in every row's population."""

    def __init__(self, rows: tuple, population: np.ndarray, perm: np.ndarray, lo: float, hi: float, alpha: float,
                 grid: int):
        self.rows = rows
        self.population = population
        order = perm[population[perm]]  # the permutation restricted to the population
        self.order = order
        self.pos = 0  # items of ``order`` taken
        self.cs = WorBettingCS(max(1, order.size), lo, hi, alpha, grid=grid)
        self.left_pred_sum = None  # Σ of the current predictions over the items not yet taken (per block)

    @property
    def lower(self) -> float:
        return float(self.cs.lower)

    @property
    def upper(self) -> float:
        return float(self.cs.upper)


class BankedAnytimeIntervals:
    """Anytime-valid intervals of the banked ranker's models and pairs (see the module docstring).

    ``examinees``: model → examinee (read: ``raw``, the raw metric, NaN where unseen; ``population``);
    ``names``: the models in the judgement's order; ``bank``; ``permutation``: the selector's random order of
    the bank (bank indices); ``score_range``: (lo, hi), the bounds every raw score lies in; ``confidence``: γ;
    ``family``: Bonferroni over the pairs; ``control_variate``: use the bank's predictions (False: the plain
    sequence on the prefix, the bank-free ranker's); ``grid``: the sequence's grid.

    :meth:`refresh` (model k's scores changed) takes the new prefix documents into its sequence and its pairs';
    :meth:`model_interval`, :meth:`pair_interval` and :meth:`pair_outcome` read them.
    """

    name = "anytime"
    anytime_valid = True

    def __init__(self, examinees: Mapping[str, object], names: Sequence[str], bank, permutation, score_range,
                 confidence: float, family: bool = False, *, control_variate: bool = True, grid: int = DEFAULT_GRID):
        lo, hi = (float(v) for v in score_range)
        if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
            raise ValueError(f"the score range must be finite with hi > lo, got [{lo}, {hi}]")
        self.lo, self.hi = lo, hi
        self._examinees = examinees
        self._names = list(names)
        self._bank = bank
        self._perm = np.asarray(permutation, dtype=np.int64)
        if self._perm.size != bank.n_items:
            raise ValueError(f"the permutation has {self._perm.size} items, the bank {bank.n_items}")
        K = len(self._names)
        self.alpha = 1.0 - float(confidence)
        self.pair_alpha = self.alpha / max(1, K * (K - 1) // 2) if family else self.alpha
        self.control_variate = bool(control_variate)
        self._grid = int(grid)
        self._models: list = [None] * K
        self._pairs: dict = {}

    def signature(self) -> dict:
        return {"intervals": self.name, "control_variate": self.control_variate, "score_range": [self.lo, self.hi]}

    # ----------------------------------------------------------------- state
    def _state(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(raw, population) of model k: its raw scores (NaN unseen) and population mask."""
        e = self._examinees[self._names[k]]
        raw = np.asarray(e.raw, dtype=float)
        pop = getattr(e, "population", None)
        pop = np.ones(raw.size, dtype=bool) if pop is None else np.asarray(pop, dtype=bool)
        bad = pop & (raw == raw) & ((raw < self.lo) | (raw > self.hi))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"model {self._names[k]!r}: score {raw[i]:g} of bank item {i} lies outside the stated "
                             f"score range [{self.lo:g}, {self.hi:g}]; the anytime-valid interval needs it")
        return raw, pop

    def _fresh(self, rows: tuple, population: np.ndarray) -> _Sequence:
        lo, hi = (self.lo, self.hi) if len(rows) == 1 else (self.lo - self.hi, self.hi - self.lo)
        return _Sequence(rows, population, self._perm, lo, hi, self.alpha if len(rows) == 1 else self.pair_alpha,
                         self._grid)

    def refresh(self, k: int) -> None:
        """Model k's scores changed: advance its sequence and those of its pairs along the permutation."""
        raws, pops = {}, {}

        def state(j):
            if j not in raws:
                raws[j], pops[j] = self._state(j)
            return raws[j], pops[j]

        raw, pop = state(k)
        seq = self._models[k]
        if seq is None or not np.array_equal(seq.population, pop):
            seq = self._models[k] = self._replayed(self._models[k], (k,), pop, state)
        self._advance(seq, state)
        for j in range(len(self._names)):
            if j == k or self._models[j] is None:
                continue
            key = (min(j, k), max(j, k))
            common = pops[k] & state(j)[1]
            pseq = self._pairs.get(key)
            if pseq is None or not np.array_equal(pseq.population, common):
                pseq = self._pairs[key] = self._replayed(pseq, key, common, state)
            self._advance(pseq, state)

    def _replayed(self, old: _Sequence | None, rows: tuple, population: np.ndarray, state) -> _Sequence:
        """A fresh sequence over ``population`` (the first, or after a mid-run exclusion: replayed up to where
        the old one was, in one block)."""
        seq = self._fresh(rows, population)
        if old is not None and old.pos:
            self._advance(seq, state, limit=int(np.count_nonzero(population[old.order[:old.pos]])))
        return seq

    def _values(self, seq: _Sequence, state) -> np.ndarray:
        """The scores (a model's) or differences (a pair's) of every bank item, NaN where one of its rows has none."""
        if len(seq.rows) == 1:
            return state(seq.rows[0])[0]
        return state(seq.rows[0])[0] - state(seq.rows[1])[0]

    def _predictions(self, seq: _Sequence, state) -> np.ndarray:
        """The control variate's predictions of every bank item: each row's model at its moment fit on the
        sequence's prefix so far (predictable: fixed before the block's documents are taken)."""
        taken = seq.order[:seq.pos]
        preds = []
        for r in seq.rows:
            theta = prefix_ability(self._bank, taken, state(r)[0][taken])
            preds.append(_predicted(self._bank, theta)[0])
        pred = preds[0] if len(preds) == 1 else preds[0] - preds[1]
        if seq.pos == 0:
            return np.zeros_like(pred)
        # shrunk toward their mean while the prefix is short, and kept inside what the prefix showed: the bets'
        # truncation pays for the predictions' spread, which a short prefix cannot yet repay (any predictable
        # transformation keeps the guarantee)
        seen = self._values(seq, state)[taken]
        pred = np.clip(pred, float(seen.min()), float(seen.max()))
        weight = seq.pos / (seq.pos + CONTROL_SHRINK)
        return weight * pred

    def _advance(self, seq: _Sequence, state, limit: int | None = None) -> None:
        """Take the sequence's next prefix documents: those of its order, from ``pos`` on, that every row has
        seen, up to the first one some row has not (or ``limit`` in all)."""
        vals = self._values(seq, state)
        rest = seq.order[seq.pos:]
        if rest.size == 0:
            return
        seen = vals[rest] == vals[rest]
        n_new = int(rest.size if seen.all() else np.argmin(seen))
        if limit is not None:
            n_new = min(n_new, max(0, limit - seq.pos))
        if n_new == 0:
            return
        new = rest[:n_new]
        if not self.control_variate:
            for x in vals[new].tolist():
                seq.cs.update(x)
            seq.pos += n_new
            return
        pred = self._predictions(seq, state)
        left = pred[rest]  # the predictions of the documents not yet taken, in draw order
        # before the j-th new document: the mean, largest and smallest prediction over left[j:]
        suffix_sum = np.cumsum(left[::-1])[::-1][:n_new]
        n_left = rest.size - np.arange(n_new)
        c = suffix_sum / n_left
        top = np.maximum.accumulate(left[::-1])[::-1][:n_new]
        bottom = np.minimum.accumulate(left[::-1])[::-1][:n_new]
        shift = left[:n_new] - c
        for x, s, a, b in zip(vals[new].tolist(), shift.tolist(), (top - c).tolist(), (c - bottom).tolist()):
            seq.cs.update(x, shift=s, spread=(a, b))
        seq.pos += n_new

    # ----------------------------------------------------------------- reading
    def model_interval(self, k: int) -> tuple[float, float]:
        """Model k's anytime-valid interval of its full-task mean ((lo, hi) before any score)."""
        seq = self._models[k]
        if seq is None or seq.pos == 0:
            return self.lo, self.hi
        return seq.lower, seq.upper

    def model_prefix(self, k: int) -> int:
        """The documents model k's interval rests on (its prefix of the permutation)."""
        seq = self._models[k]
        return 0 if seq is None else seq.pos

    def pair_interval(self, i: int, j: int) -> tuple[float, float]:
        """The anytime-valid interval of T_i − T_j (the full-task means' difference over the items both have)."""
        key = (min(i, j), max(i, j))
        seq = self._pairs.get(key)
        if seq is None or seq.pos == 0:
            lo, hi = self.lo - self.hi, self.hi - self.lo
        else:
            lo, hi = seq.lower, seq.upper
        return (lo, hi) if i < j else (-hi, -lo)

    def pair_outcome(self, i: int, j: int, margin: float = 0.0) -> tuple[str, bool | None]:
        """(outcome, i above j): ``ordered`` when the interval of T_i − T_j excludes 0 (float rounding of the
        range excepted), ``equivalent`` when inside ±``margin``, else ``unresolved`` (above: None unless ordered)."""
        lo, hi = self.pair_interval(i, j)
        tol = 1e-9 * (self.hi - self.lo)
        if lo > tol:
            return ORDERED, True
        if hi < -tol:
            return ORDERED, False
        if lo >= -margin - tol and hi <= margin + tol:
            return EQUIVALENT, None
        return UNRESOLVED, None

    @classmethod
    def factory(cls, score_range, *, control_variate: bool = True, grid: int = DEFAULT_GRID):
        """``intervals=`` for :class:`~lm_eval_adaptive.engine.ranking.pairs.metric_judgement.MetricScaleJudgement`:
        called with (examinees, names, bank, permutation, confidence, family)."""

        def build(examinees, names, bank, permutation, confidence, family):
            return cls(examinees, names, bank, permutation, score_range, confidence, family,
                       control_variate=control_variate, grid=grid)

        build.signature = {"intervals": cls.name, "control_variate": bool(control_variate)}
        return build

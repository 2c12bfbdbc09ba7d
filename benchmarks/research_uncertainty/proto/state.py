"""One model under test: its estimator, the items it was given, and the random (design) part.

Design (remedy 4): a share ``rho`` of the paid items are drawn at random. All models of a run
share one random permutation ``perm`` of the table's items; a model's random sample S is the
first r items of ``perm`` it can answer (items it was already given adaptively join S for free;
items it has no score for are not part of its population). Because S is a prefix of a uniform
permutation it is a simple random sample without replacement, with inclusion probability r/N;
and two models' samples share their common prefix, which the paired comparison uses.
Slot k (0-based, over paid items) is random iff floor((k+1)·rho) > floor(k·rho).
"""
from __future__ import annotations

import numpy as np
from scipy.special import expit

from .bankview import BankView


class ModelState:
    def __init__(self, name: str, bv: BankView, est, raw_row: np.ndarray, costs: np.ndarray,
                 perm: np.ndarray | None = None, rho: float = 0.0, random_first: int = 0):
        self.name = name
        self.bv = bv
        self.est = est
        self.raw = raw_row                      # (n_task,) raw scores, NaN = not available
        self.avail = ~np.isnan(raw_row)
        self.costs = costs                      # (n_task,) cost of each table item
        self.perm = perm
        self.rho = float(rho)
        self.random_first = int(random_first)   # the first this many paid items are random
        self.observed = np.zeros(bv.n_task, dtype=bool)
        self.bank_avail = self.avail[bv.tpos]
        self.bank_used = ~self.bank_avail      # bank items not selectable (missing or observed)
        self.ptr = 0                            # next position in perm
        self.S: list[int] = []                  # random sample (table indices), in perm order
        self.order: list[int] = []              # paid items in order (table indices)
        self.kinds: list[str] = []
        self.spent = 0.0
        self.mean_cost_bank = float(np.mean(costs[bv.tpos]))

    # ----------------------------------------------------------------- design
    @property
    def n(self) -> int:
        return len(self.order)

    def slot_is_random(self) -> bool:
        k = self.n
        if self.perm is None:
            return False
        if k < self.random_first:
            return True
        if self.rho <= 0:
            return False
        return np.floor((k + 1) * self.rho) > np.floor(k * self.rho)

    def _advance_random(self) -> int:
        """Move the pointer past items already known (they join S for free) or unavailable;
        return the next new random item, or -1 at the end of the permutation."""
        perm = self.perm
        while self.ptr < perm.size:
            t = int(perm[self.ptr])
            if not self.avail[t]:
                self.ptr += 1
                continue
            if self.observed[t]:
                self.S.append(t)
                self.ptr += 1
                continue
            return t
        return -1

    def _max_info(self) -> int:
        bv = self.bv
        th = self.est.mean
        if np.all(bv.a == 1.0):
            key = -np.abs(bv.b - th)
        else:
            mu = expit(bv.a * (th - bv.b))
            key = bv.a * bv.a * mu * (1 - mu)
        key = np.where(self.bank_used, -np.inf, key)
        i = int(np.argmax(key))
        return -1 if self.bank_used[i] else int(bv.tpos[i])

    def peek(self) -> tuple[int, str]:
        """(table index, "random" | "adaptive") of the next paid item; (-1, ...) if none."""
        if self.slot_is_random():
            t = self._advance_random()
            if t >= 0:
                return t, "random"
        return self._max_info(), "adaptive"

    def record(self, t: int, kind: str) -> None:
        bv = self.bv
        self.observed[t] = True
        i = int(bv.bank_of_task[t])
        if i >= 0:
            self.bank_used[i] = True
            y = float(bv.scale(i, self.raw[t]))
            self.est.update(i, y)
        if kind == "random":
            self.S.append(t)
            self.ptr += 1
        self.order.append(t)
        self.kinds.append(kind)
        self.spent += float(self.costs[t])

    # ------------------------------------------------------------- summaries
    def bank_items_observed(self):
        """(bank indices, raw scores) of the observed bank items, in order."""
        it = [int(self.bv.bank_of_task[t]) for t in self.order if self.bv.bank_of_task[t] >= 0]
        it = np.asarray(it, dtype=np.int64)
        return it, self.raw[self.bv.tpos[it]]

    def sample(self) -> np.ndarray:
        """The random sample S (table indices), after absorbing any known prefix items."""
        if self.perm is not None and self.S is not None:
            # absorb known items that lie next in the permutation (free)
            while self.ptr < self.perm.size:
                t = int(self.perm[self.ptr])
                if not self.avail[t]:
                    self.ptr += 1
                elif self.observed[t]:
                    self.S.append(t)
                    self.ptr += 1
                else:
                    break
        return np.asarray(self.S, dtype=np.int64)

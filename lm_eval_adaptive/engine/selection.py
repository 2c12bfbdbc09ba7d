"""Item selection: maximum Fisher information, optionally randomesque (top-k).

For the response models here the information of an item is a decreasing function of
|θ - b| (logistic, symmetric around b, one discrimination per bank), so the most
informative unadministered item is the one whose difficulty is nearest to θ̂. The
selector keeps the difficulties sorted and looks only at a window around θ̂ wide
enough to hold the k nearest unadministered items (at most ``n_administered + k`` on
each side), so one selection costs O(log N + n_administered) however large the bank.
:func:`select_max_information` is the brute-force definition over the whole bank; the
tests check that both always agree.

:class:`Selector` is the interface every selector implements (:class:`MaxInfoSelector`
is the one used by default); an :class:`~lm_eval_adaptive.engine.cat.Examinee` or an
:class:`~lm_eval_adaptive.engine.ranker.AdaptiveRanker` takes any object that has it.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from lm_eval_adaptive.engine.response_model import ResponseModel

__all__ = ["Selector", "MaxInfoSelector", "select_max_information"]


@runtime_checkable
class Selector(Protocol):
    """Chooses a model's next item among those it has not taken.

    A selector keeps no per-model state: each examinee owns a boolean *taken mask* in the
    selector's own layout (``new_mask()``; bank item ``i`` is ``mask[positions(i)]``, True
    once the item is reserved, scored or excluded) and the number of True entries,
    ``n_used``. The layout is the selector's choice (bank order is the simplest;
    :class:`MaxInfoSelector` sorts by difficulty so that it looks at a window only).

    ``name`` appears in result signatures.
    """

    name: str

    def new_mask(self) -> np.ndarray:
        """A fresh taken mask (all False) in this selector's layout."""
        ...

    def positions(self, items) -> np.ndarray:
        """Where bank items ``items`` (an index or an array of indices) sit in the mask."""
        ...

    def select(self, theta: float, mask: np.ndarray, n_used: int,
               rng: np.random.Generator | None = None) -> int:
        """Bank index of the next item at ability ``theta``, or -1 when none is left.

        ``rng`` is the caller's random stream, for selectors that draw (exposure control).
        """
        ...

    def candidates(self, theta: float, mask: np.ndarray, n_used: int, k: int) -> np.ndarray:
        """Bank indices of (up to) ``k`` untaken items, best first, without drawing at random
        (several items given at once)."""
        ...


def select_max_information(model: ResponseModel, theta: float, b: np.ndarray,
                           administered: np.ndarray) -> int:
    """Index of the unadministered item with maximum information at ``theta`` (brute force).

    Ties go to the lowest index. Returns -1 when every item was administered.
    """
    info = model.information(theta, b)
    info = np.where(administered, -np.inf, info)
    i = int(np.argmax(info))
    return -1 if administered[i] else i


class MaxInfoSelector:
    """Maximum-information selection over one bank's difficulties.

    Parameters
    ----------
    b:
        Item difficulties (the bank's order).
    top_k:
        1 for strict maximum information; k > 1 picks uniformly at random among the k
        most informative unadministered items (ATLAS' exposure control).
    """

    name = "max-info"

    def __init__(self, b: np.ndarray, top_k: int = 1):
        b = np.asarray(b, dtype=float)
        if b.ndim != 1 or b.size == 0:
            raise ValueError("the bank needs at least one item")
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        # stable sort: among equal difficulties the lower bank index comes first
        self.order = np.argsort(b, kind="stable")
        self.b_sorted = b[self.order]
        self.rank = np.empty_like(self.order)
        self.rank[self.order] = np.arange(b.size)
        self.top_k = int(top_k)
        self.n_items = int(b.size)

    def new_mask(self) -> np.ndarray:
        """A fresh 'administered' mask in sorted order: item i is ``mask[rank[i]]``."""
        return np.zeros(self.n_items, dtype=bool)

    def positions(self, items) -> np.ndarray:
        """Positions of bank items in the (difficulty-sorted) mask."""
        return self.rank[items]

    def candidates(self, theta: float, mask: np.ndarray, n_used: int, k: int) -> np.ndarray:
        """Bank indices of the (up to) k unmasked items nearest to θ, nearest first.

        ``mask`` is in sorted order (``mask[rank[i]]`` for bank item i) and ``n_used`` must
        be its number of True entries: the window is sized from it.
        """
        n = self.n_items
        pos = int(np.searchsorted(self.b_sorted, theta))
        w = n_used + k
        lo = max(0, pos - w)
        hi = min(n, pos + w)
        idx = np.arange(lo, hi)
        idx = idx[~mask[lo:hi]]
        if idx.size == 0:
            return idx
        d = np.abs(self.b_sorted[idx] - theta)
        # widen to every unmasked item as near as the k-th nearest, so that ties with
        # items just outside the window are seen too
        dk = np.partition(d, min(k, d.size) - 1)[min(k, d.size) - 1]
        lo2 = int(np.searchsorted(self.b_sorted, theta - dk, "left"))
        hi2 = int(np.searchsorted(self.b_sorted, theta + dk, "right"))
        if lo2 < lo or hi2 > hi:
            idx = np.arange(lo2, hi2)
            idx = idx[~mask[lo2:hi2]]
            d = np.abs(self.b_sorted[idx] - theta)
        # nearest first; equal distance → lower bank index (as the brute-force definition)
        bank_idx = self.order[idx]
        return bank_idx[np.lexsort((bank_idx, d))[:k]]

    def select(self, theta: float, mask: np.ndarray, n_used: int,
               rng: np.random.Generator | None = None) -> int:
        """Bank index of the next item, or -1 if the bank is exhausted for this model."""
        cand = self.candidates(theta, mask, n_used, self.top_k)
        if cand.size == 0:
            return -1
        if self.top_k == 1 or cand.size == 1:
            return int(cand[0])
        if rng is None:
            rng = np.random.default_rng()
        return int(cand[rng.integers(cand.size)])

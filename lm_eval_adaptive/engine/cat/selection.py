"""Item selection: maximum Fisher information, optionally randomesque (top-k).

For the one-parameter response models the information of an item is a decreasing function of
|θ - b| (logistic, symmetric around b, one discrimination per bank), so the most
informative unadministered item is the one whose difficulty is nearest to θ̂. The
selector keeps the difficulties sorted and looks only at a window around θ̂ wide
enough to hold the k nearest unadministered items (at most ``n_administered + k`` on
each side), so one selection costs O(log N + n_administered) however large the bank.
:func:`select_max_information` is the brute-force definition over the whole bank; the
tests check that both always agree. A 2PL/3PL bank (per-item a and c) has no such order:
its selector is given ``bank.selection_information`` and ranks every item by information.

:class:`Selector` is the interface every selector implements (:class:`MaxInfoSelector`
is the one used by default); an :class:`~lm_eval_adaptive.engine.cat.examinee.Examinee` or an
:class:`~lm_eval_adaptive.engine.ranking.ranker.AdaptiveRanker` takes any object that has it.
"""

from __future__ import annotations

import math
import weakref
from typing import Mapping, NamedTuple, Protocol, Sequence, runtime_checkable

import numpy as np

from lm_eval_adaptive.engine.irt.response_model import ResponseModel

__all__ = ["Selector", "MaxInfoSelector", "RandomShareSelector", "select_max_information", "DEFAULT_RANDOM_SHARE",
           "default_selector", "shared_default_selector", "JointAbility", "JointInformationSelector", "ITEM_WEIGHTINGS"]

#: Share of every model's items drawn at random (docs/honesty.md): maximum information alone
#: concentrates a test on a narrow band of items where a model's curve may differ from the
#: bank's; a random half keeps θ̂ close to what every item would give.
DEFAULT_RANDOM_SHARE = 0.5

#: How :class:`JointInformationSelector` sums an item's information over the metrics that count:
#: ``normalised`` Σ m_k² · I_k (the share of each metric's measurement variance the item removes; the
#: default) or ``summed`` Σ I_k (each bank's information as it is, on its own scale).
ITEM_WEIGHTINGS = ("normalised", "summed")


@runtime_checkable
class Selector(Protocol):
    """Chooses a model's next item among those it has not taken.

    A selector keeps no per-model state: each examinee owns a boolean *taken mask* in the
    selector's own layout (``new_mask()``; bank item ``i`` is ``mask[positions(i)]``, True
    once the item is reserved, scored or excluded) and the number of True entries,
    ``n_used``. The layout is the selector's choice (bank order is the simplest;
    :class:`MaxInfoSelector` sorts by difficulty so that it looks at a window only).

    ``name`` appears in result signatures.

    A selector may also define ``uses_theta(n_used) -> bool``: False when its next choice does not
    depend on θ̂ (:class:`RandomShareSelector`'s random slots), so that the caller need not estimate
    θ̂ for it and passes NaN.
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


_WALK = 32  # positions walked one by one before the search goes on in NumPy blocks


def _free_right(mask: np.ndarray, i: int, n: int) -> int:
    """The first position ≥ i whose mask entry is False (n: none)."""
    stop = min(n, i + _WALK)
    while i < stop:
        if not mask[i]:
            return i
        i += 1
    step = 4 * _WALK
    while i < n:
        free = ~mask[i:i + step]
        j = int(free.argmax())
        if free[j]:
            return i + j
        i += step
        step *= 2
    return n


def _free_left(mask: np.ndarray, i: int) -> int:
    """The last position ≤ i whose mask entry is False (-1: none)."""
    stop = max(-1, i - _WALK)
    while i > stop:
        if not mask[i]:
            return i
        i -= 1
    step = 4 * _WALK
    while i >= 0:
        lo = max(0, i - step + 1)
        free = ~mask[lo:i + 1][::-1]
        j = int(free.argmax())
        if free[j]:
            return i - j
        i = lo - 1
        step *= 2
    return -1


def select_max_information(model: ResponseModel, theta: float, b: np.ndarray,
                           administered: np.ndarray, **item) -> int:
    """Index of the unadministered item with maximum information at ``theta`` (brute force;
    ``item``: the per-item a, c of a 2PL/3PL bank).

    Ties go to the lowest index. Returns -1 when every item was administered.
    """
    info = model.information(theta, b, **item)
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
    information:
        None when an item's information falls with |θ - b| alone (one discrimination per
        bank: the window search). For per-item discriminations and guessing (2PL/3PL) pass
        ``bank.selection_information``, ``theta -> information of every bank item``: each
        selection then ranks the whole bank by it (one vectorised O(N) pass).
    """

    name = "max-info"

    def __init__(self, b: np.ndarray, top_k: int = 1, *, information=None):
        b = np.asarray(b, dtype=float)
        if b.ndim != 1 or b.size == 0:
            raise ValueError("the bank needs at least one item")
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        # stable sort: among equal difficulties the lower bank index comes first
        self.order = _stable_argsort(b)
        self.b_sorted = b[self.order]
        self.rank = np.empty_like(self.order)
        self.rank[self.order] = np.arange(b.size)
        self.top_k = int(top_k)
        self.n_items = int(b.size)
        self.information = information

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
        if self.information is not None:
            return self._ranked_by_information(theta, mask, k)
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

    def _ranked_by_information(self, theta: float, mask: np.ndarray, k: int) -> np.ndarray:
        """The k untaken items of highest information at θ (ties: lower bank index first)."""
        vals = np.asarray(self.information(theta), dtype=float)[self.order]  # mask (sorted) layout
        vals[mask] = -np.inf
        n_free = self.n_items - int(np.count_nonzero(mask))
        if n_free == 0:
            return np.zeros(0, dtype=np.int64)
        k = min(k, n_free)
        # the k-th largest value, then every free item at least as informative (ties at the edge)
        kth = np.partition(vals, self.n_items - k)[self.n_items - k]
        pos = np.flatnonzero((vals >= kth) & ~mask)
        bank_idx = self.order[pos]
        return bank_idx[np.lexsort((bank_idx, -vals[pos]))[:k]]

    def _nearest(self, theta: float, mask: np.ndarray) -> int:
        """:meth:`candidates` ``(theta, mask, n_used, 1)[0]`` (-1: none), in plain Python: walk out from
        θ's place in the sorted difficulties to the nearest untaken item on each side, then take
        the nearer; equal distances (on either side) go to the lower bank index."""
        bs = self.b_sorted
        n = self.n_items
        pos = int(bs.searchsorted(theta))
        lo = _free_left(mask, pos - 1)
        hi = _free_right(mask, pos, n)
        order = self.order
        best, best_d = -1, math.inf
        if lo >= 0:  # the left side: every untaken item as near as the nearest (sorted: contiguous)
            best_d = abs(float(bs[lo]) - theta)
            best = int(order[lo])
            j = lo - 1
            while j >= 0 and abs(float(bs[j]) - theta) == best_d:
                if not mask[j] and order[j] < best:
                    best = int(order[j])
                j -= 1
        if hi < n:
            d = abs(float(bs[hi]) - theta)
            if d <= best_d:
                right = int(order[hi])
                j = hi + 1
                while j < n and abs(float(bs[j]) - theta) == d:
                    if not mask[j] and order[j] < right:
                        right = int(order[j])
                    j += 1
                if d < best_d or right < best:
                    best, best_d = right, d
        return best

    def select(self, theta: float, mask: np.ndarray, n_used: int,
               rng: np.random.Generator | None = None) -> int:
        """Bank index of the next item, or -1 if the bank is exhausted for this model."""
        if self.top_k == 1 and self.information is None:
            return self._nearest(float(theta), mask)
        cand = self.candidates(theta, mask, n_used, self.top_k)
        if cand.size == 0:
            return -1
        if self.top_k == 1 or cand.size == 1:
            return int(cand[0])
        if rng is None:
            rng = np.random.default_rng()
        return int(cand[rng.integers(cand.size)])


class RandomShareSelector(MaxInfoSelector):
    """Maximum information, except that a share ``share`` of every model's items are drawn at random.

    Slot ``k`` of a model (its ``k``-th taken item, counted by ``n_used``) is random iff
    ⌊(k+1)·share⌋ > ⌊k·share⌋ (share 0.5: every second item); a random slot takes the first
    item the model has not taken in one random permutation of the bank (``seed``), the same
    permutation for every model that shares this selector. The other slots are
    :class:`MaxInfoSelector`'s. The random half keeps an adaptive test from drifting on a band
    of items where the model's curve differs from the bank's (docs/honesty.md).
    """

    def __init__(self, b: np.ndarray, top_k: int = 1, *, share: float = DEFAULT_RANDOM_SHARE,
                 seed: int | None = None, information=None):
        super().__init__(b, top_k, information=information)
        if not (0.0 <= float(share) <= 1.0):
            raise ValueError(f"the random share must be in [0, 1], got {share}")
        self.share = float(share)
        self.seed = seed
        perm = np.random.default_rng(seed).permutation(self.n_items)
        self.perm_pos = self.rank[perm]  # mask positions in permutation order

    @property
    def name(self) -> str:
        return f"max-info+random(share={self.share:g},seed={self.seed})"

    def is_random_slot(self, k: int) -> bool:
        """Slot ``k`` (0-based) is drawn at random."""
        s = self.share
        return s > 0 and math.floor((k + 1) * s) > math.floor(k * s)

    def random_slots(self, n: int) -> int:
        """How many of the first ``n`` slots are random (⌊n·share⌋)."""
        return math.floor(n * self.share)

    def random_item(self, mask: np.ndarray, n_used: int | None = None) -> int:
        """The item a random slot takes now: the first untaken item of the permutation (-1: none)."""
        return self._random(mask, n_used)

    def uses_theta(self, n_used: int) -> bool:
        """The next slot (``n_used`` items taken) needs θ̂: it is not a random one (a caller may pass NaN
        for θ̂ otherwise, and skip estimating it)."""
        return not self.is_random_slot(n_used)

    def _random(self, mask: np.ndarray, n_used: int | None = None) -> int:
        """The first untaken item of the permutation (-1: none). With ``n_used`` (the mask's True
        entries) only the permutation's first ``n_used + 1`` places are looked at: one of them
        is untaken."""
        perm_pos = self.perm_pos
        if n_used is not None and n_used + 1 < perm_pos.size:
            head = perm_pos[:n_used + 1]
            taken = mask[head]
            j = int(taken.argmin())  # the first untaken place (argmin: the first False)
            if not taken[j]:
                return int(self.order[head[j]])
        taken = mask[perm_pos]
        j = int(taken.argmin())
        return -1 if taken[j] else int(self.order[perm_pos[j]])

    def select(self, theta: float, mask: np.ndarray, n_used: int,
               rng: np.random.Generator | None = None) -> int:
        s = self.share  # is_random_slot(n_used), inline
        if s > 0 and math.floor((n_used + 1) * s) > math.floor(n_used * s):
            return self._random(mask, n_used)
        if self.top_k == 1 and self.information is None:  # MaxInfoSelector.select's first case
            return self._nearest(float(theta), mask)
        return super().select(theta, mask, n_used, rng)

    def candidates(self, theta: float, mask: np.ndarray, n_used: int, k: int) -> np.ndarray:
        """The next ``k`` slots' items in order: random slots from the permutation, the others
        the most informative untaken items."""
        if self.share == 0:
            return super().candidates(theta, mask, n_used, k)
        m = mask.copy()
        out = []
        for j in range(k):
            if self.is_random_slot(n_used + j):
                item = self._random(m, n_used + j)
            else:
                c = super().candidates(theta, m, n_used + j, 1)
                item = int(c[0]) if c.size else -1
            if item < 0:
                break
            out.append(item)
            m[self.rank[item]] = True
        return np.asarray(out, dtype=np.int64)


class JointAbility(NamedTuple):
    """What :class:`JointInformationSelector` reads of one model where one bank's selector reads θ̂: per
    metric (in the selector's metric order) θ̂, the measurement SE (what more items reduce) and whether
    the metric's information counts for this choice (``focus``: e.g. only the metrics that still need
    the model)."""

    theta: tuple
    se: tuple
    focus: tuple


class JointInformationSelector(RandomShareSelector):
    """Item choice over the *joint* items of several banks (one per metric of one task): each item is
    generated once and scored by every metric, so its worth is summed over the metrics.

    The layout is the joint items' order (``item_ids``; bank ``k``'s index of joint item ``j`` is
    ``indices[k][j]``). Slot ``n`` of a model is random as :class:`RandomShareSelector`'s (the first
    untaken item of one seeded permutation of the joint items, shared by every model); any other slot
    takes the untaken item of largest Σ_k w_k · I_k(θ̂_k) over the metrics in the ability's ``focus``,
    I_k the bank's own information (2PL/3PL banks count their items' a and c), w_k = m_k² (the
    metric's measurement variance: the share of it the item removes) with ``weighting="normalised"``,
    1 with ``"summed"``. ``theta`` is a :class:`JointAbility`; ties go to the lower joint index.
    """

    def __init__(self, banks: Mapping[str, object], item_ids: Sequence[str], *, weighting: str = "normalised",
                 share: float = DEFAULT_RANDOM_SHARE, seed=None):
        if weighting not in ITEM_WEIGHTINGS:
            raise ValueError(f"item_weighting must be one of {ITEM_WEIGHTINGS}, got {weighting!r}")
        if not banks:
            raise ValueError("a joint selector needs at least one metric bank")
        ids = [str(i) for i in item_ids]
        if not ids:
            raise ValueError("the metric banks share no item id")
        super().__init__(np.zeros(len(ids)), share=share, seed=seed)
        self.weighting = weighting
        self.metrics = tuple(str(k) for k in banks)
        self.banks = tuple(banks.values())
        self.item_ids = ids
        self.indices = tuple(np.asarray(b.index_of(ids), dtype=np.int64) for b in self.banks)

    @property
    def name(self) -> str:
        return f"joint-info({self.weighting})+random(share={self.share:g},seed={self.seed})"

    def value(self, ability: JointAbility) -> np.ndarray:
        """Σ_k w_k · I_k(θ̂_k) of every joint item, over the metrics in ``ability.focus``."""
        value = np.zeros(self.n_items)
        normalised = self.weighting == "normalised"
        for bank, index, theta, se, on in zip(self.banks, self.indices, ability.theta, ability.se, ability.focus):
            if on:
                w = se ** 2 if normalised else 1.0
                value += w * bank.information(theta, index)
        return value

    def select(self, theta, mask: np.ndarray, n_used: int, rng: np.random.Generator | None = None) -> int:
        if self.is_random_slot(n_used):
            return self._random(mask, n_used)
        value = self.value(theta)
        value[mask] = -np.inf
        i = int(np.argmax(value))
        return -1 if mask[i] else i

    def candidates(self, theta, mask: np.ndarray, n_used: int, k: int) -> np.ndarray:
        """The next ``k`` slots' items in order (random slots from the permutation, the others by
        the summed information at ``theta``, most informative first)."""
        m = mask.copy()
        value = None
        out = []
        for j in range(k):
            if self.is_random_slot(n_used + j):
                item = self._random(m, n_used + j)
            else:
                if value is None:
                    value = self.value(theta)
                v = np.where(m, -np.inf, value)
                item = int(np.argmax(v))
                item = -1 if m[item] else item
            if item < 0:
                break
            out.append(item)
            m[item] = True
        return np.asarray(out, dtype=np.int64)


def default_selector(b: np.ndarray, top_k: int = 1, seed: int | None = None, *,
                     information=None) -> RandomShareSelector:
    """The selector the engine uses unless told otherwise: :class:`RandomShareSelector` with
    :data:`DEFAULT_RANDOM_SHARE` (``information``: ``bank.selection_information``)."""
    return RandomShareSelector(b, top_k, share=DEFAULT_RANDOM_SHARE, seed=seed, information=information)


_SHARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def shared_default_selector(bank, top_k: int = 1, seed=None) -> RandomShareSelector:
    """``default_selector(bank.b, top_k, seed, information=bank.selection_information)``, built once per bank, ``top_k`` and integer seed.

    A selector keeps no per-model state, so every ranker or test on one bank with the same
    settings can share it: the sort of the bank and the random permutation are paid once (a
    100,000-item bank: milliseconds). Another seed (None, a sequence) builds a fresh one.
    """
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        return default_selector(bank.b, top_k=top_k, seed=seed, information=bank.selection_information)
    entry = _SHARED.get(bank)
    if entry is None or entry[0] is not bank.b:  # a bank whose difficulties were replaced starts afresh
        entry = (bank.b, {})
        _SHARED[bank] = entry
    key = (int(top_k), int(seed))
    sel = entry[1].get(key)
    if sel is None:
        sel = entry[1][key] = default_selector(bank.b, top_k=top_k, seed=seed,
                                              information=bank.selection_information)
    return sel


def _stable_argsort(b: np.ndarray) -> np.ndarray:
    """``np.argsort(b, kind="stable")``, faster when no two values are equal (the usual bank): the
    sorted order is then unique, so the unstable sort finds the same one."""
    order = np.argsort(b)
    bs = b[order]
    if bs.size > 1 and not bool(np.all(bs[1:] > bs[:-1])):  # ties (or NaN): the stable sort decides
        order = np.argsort(b, kind="stable")
    return order

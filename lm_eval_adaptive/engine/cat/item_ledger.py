"""Which items one model has taken over a bank: reserved (asked, score not known yet), scored or
excluded, and which of them a random slot of the selector chose.

:class:`ItemLedger` is the part of an :class:`~lm_eval_adaptive.engine.cat.examinee.Examinee` that keeps
this account (the selector never offers a taken item); the examinee adds the ability estimate, the
scores and their costs. Its state changes only through its methods.
"""

from __future__ import annotations

import numpy as np

from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.cat.selection import Selector

__all__ = ["ItemLedger"]


class ItemLedger:
    """The items one model has taken over ``bank``, in the ``selector``'s mask (its positions), and
    bank-order flags: scored, excluded, chosen by a random slot. ``name`` names the model in errors."""

    def __init__(self, bank: ItemBank, selector: Selector, name: str) -> None:
        self._name = name
        self._bank = bank
        self._selector = selector
        self._n_items = bank.n_items
        self._mask = selector.new_mask()
        self._n_taken = 0  # True entries of the mask (the selector's window size)
        self._excluded = np.zeros(bank.n_items, dtype=bool)
        self._scored = np.zeros(bank.n_items, dtype=bool)
        self._version = 0
        self._random = np.zeros(bank.n_items, dtype=bool)  # taken by a random slot of the selector
        self._n_random_taken = 0  # True entries of _random
        self._is_random_slot = getattr(selector, "is_random_slot", None)
        self._changes = 0  # scores and exclusions recorded (what the metric scale reads changed)

    @property
    def name(self) -> str:
        return self._name

    @property
    def bank(self) -> ItemBank:
        return self._bank

    @property
    def selector(self) -> Selector:
        return self._selector

    @property
    def n_items(self) -> int:
        """Items of the bank (the most this examinee can be given)."""
        return self._n_items

    @property
    def n_taken(self) -> int:
        """Items taken: reserved, scored or excluded."""
        return self._n_taken

    @property
    def version(self) -> int:
        """A counter that changes whenever what the selector sees changes (taken items, θ̂):
        a cached next item is valid while the version is the same."""
        return self._version

    @property
    def changes(self) -> int:
        """A counter that changes whenever a score or an exclusion is recorded (what the full-task
        metric reads: :attr:`raw`, :attr:`random_mask`, :attr:`population`, θ̂); reservations leave it."""
        return self._changes

    @property
    def random_mask(self) -> np.ndarray:
        """Bank-order: True for the items a random slot of the selector chose (read-only view; for a
        reserved item not scored yet it says what the slot was)."""
        v = self._random.view()
        v.flags.writeable = False
        return v

    @property
    def population(self) -> np.ndarray:
        """Bank-order: the items the model's full-task mean is over, every item except those excluded
        without a score (e.g. it has no recorded answer)."""
        return self._scored | ~self._excluded

    def item_id(self, item: int) -> str:
        return str(self._bank.item_ids[item])

    def is_taken(self, item: int) -> bool:
        """The item is reserved, scored or excluded (the selector will not offer it)."""
        return bool(self._mask[self._selector.positions(self._check_item(item))])

    def is_scored(self, item: int) -> bool:
        return bool(self._scored[self._check_item(item)])

    def is_excluded(self, item: int) -> bool:
        return bool(self._excluded[self._check_item(item)])

    def taken(self) -> np.ndarray:
        """Bank-order boolean array: True for every taken item (a copy)."""
        return self._mask[self._selector.positions(np.arange(self._bank.n_items))].copy()

    def _check_item(self, item) -> int:
        if type(item) is int and 0 <= item < self._n_items:  # the common case
            return item
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, np.integer)):
            raise ValueError(f"model {self._name!r}: an item is a bank index (int), got {item!r}")
        if not 0 <= item < self._bank.n_items:
            raise ValueError(f"model {self._name!r}: item index {item} is outside the bank "
                             f"(0..{self._bank.n_items - 1})")
        return int(item)

    def _check_items(self, items) -> np.ndarray:
        arr = np.atleast_1d(np.asarray(items))
        if arr.size == 0:
            return np.zeros(0, dtype=np.int64)
        if arr.ndim != 1 or arr.dtype.kind not in "iu":
            raise ValueError(f"model {self._name!r}: items must be bank indices (ints), got {items!r}")
        arr = arr.astype(np.int64)
        bad = arr[(arr < 0) | (arr >= self._bank.n_items)]
        if bad.size:
            raise ValueError(f"model {self._name!r}: item index {int(bad[0])} is outside the bank "
                             f"(0..{self._bank.n_items - 1})")
        return arr

    def _mark(self, item: int) -> None:
        pos = self._selector.positions(item)
        if not self._mask[pos]:
            self._mask[pos] = True
            self._n_taken += 1

    def exclude(self, items) -> None:
        """Never select these bank items (e.g. the model has no score for them)."""
        items = self._check_items(items)
        pos = self._selector.positions(items)
        self._mask[pos] = True
        self._n_taken = int(self._mask.sum())
        self._excluded[items] = True
        self._version += 1
        self._changes += 1

    def reserve(self, item: int) -> None:
        """Mark an item as taken (so it is never selected twice), before its score is known; the slot it
        fills is noted as random when the selector says so (``is_random_slot``)."""
        item = item if type(item) is int and 0 <= item < self._n_items else self._check_item(item)
        pos = self._selector.positions(item)
        if not self._mask[pos]:
            is_random = self._is_random_slot
            if is_random is not None and is_random(self._n_taken):
                self._random[item] = True
                self._n_random_taken += 1
            self._mask[pos] = True
            self._n_taken += 1
        self._version += 1

    def _random_unreserved(self, item: int) -> bool:
        """Whether an item recorded without a reservation counts as a random slot's: it is the random
        share's next item (the first untaken item of the selector's permutation) and fewer items are
        marked random than there are random slots among the first ``n_taken + 1``. A run told its
        scores in another order than it asked them (a replay) marks its random items this way."""
        sel = self._selector
        head = getattr(sel, "random_item", None)
        if head is None or sel.random_slots(self._n_taken + 1) <= self._n_random_taken:
            return False
        return head(self._mask, self._n_taken) == item

    def unreserve(self, item: int) -> None:
        """Undo :meth:`reserve`: the item may be selected again (an excluded item stays excluded)."""
        item = self._check_item(item)
        if self._scored[item]:
            raise ValueError(f"model {self._name!r}, item {self.item_id(item)!r}: already scored, "
                             "it cannot be given back")
        if not self._excluded[item]:
            pos = self._selector.positions(item)
            if self._mask[pos]:
                self._mask[pos] = False
                self._n_taken -= 1
        if self._random[item]:
            self._random[item] = False
            self._n_random_taken -= 1
        self._version += 1

    def _check_new(self, item: int) -> None:
        if self._scored[item]:
            raise ValueError(f"model {self._name!r}, item {self.item_id(item)!r}: already scored")
        if self._excluded[item]:
            raise ValueError(f"model {self._name!r}, item {self.item_id(item)!r}: excluded for this model")

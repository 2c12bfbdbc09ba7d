"""Which items one model has taken over an item set: reserved (asked, score not known yet), scored or
excluded, which of them a random slot of the selector chose, and what the model cost.

:class:`ItemLedger` is what every :class:`~lm_eval_adaptive.engine.cat.examinee.Examinee` is built on:
over one bank's items, or over the joint items of several banks (a bank per metric; each metric's own
one-metric examinee then keeps a ledger over its bank). The examinee adds the scores and the part that
measures the ability. The selector never offers a taken item. Its state changes only through its methods.
"""

from __future__ import annotations

import numpy as np

from lm_eval_adaptive.engine.irt.checks import check_cost, check_costs
from lm_eval_adaptive.engine.cat.selection import Selector

__all__ = ["ItemLedger"]


class ItemLedger:
    """The items one model has taken over the items ``item_ids`` (an item is its index there), in the
    ``selector``'s mask (its positions), and item-order flags: scored, excluded, chosen by a random slot;
    and the model's spend (``item_costs``: USD per item, None: items cost 0). ``name`` names the model in
    errors, ``unit`` the item set (``"bank"``: a bank's items; ``"joint"``: the joint items of several)."""

    _UNITS = {"bank": ("a bank index", "bank indices", "the bank"),
              "joint": ("a joint item index", "joint item indices", "the joint items")}

    def __init__(self, item_ids, selector: Selector, name: str, *, item_costs: np.ndarray | None = None,
                 unit: str = "bank") -> None:
        self._name = name
        self._item_ids = item_ids
        self._selector = selector
        self._n_items = n = len(item_ids)
        self._words = self._UNITS[unit]
        self._mask = selector.new_mask()
        self._n_taken = 0  # True entries of the mask (the selector's window size)
        self._excluded = np.zeros(n, dtype=bool)
        self._scored = np.zeros(n, dtype=bool)
        self._version = 0
        self._random = np.zeros(n, dtype=bool)  # taken by a random slot of the selector
        self._n_random_taken = 0  # True entries of _random
        self._is_random_slot = getattr(selector, "is_random_slot", None)
        self._changes = 0  # scores and exclusions recorded (what the metric scale reads changed)
        self._item_costs = item_costs
        self._spent = 0.0

    @property
    def name(self) -> str:
        return self._name

    @property
    def selector(self) -> Selector:
        return self._selector

    @property
    def n_items(self) -> int:
        """Items of the item set (the most this examinee can be given)."""
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
        """Item-order: True for the items a random slot of the selector chose (read-only view; for a
        reserved item not scored yet it says what the slot was)."""
        v = self._random.view()
        v.flags.writeable = False
        return v

    @property
    def population(self) -> np.ndarray:
        """Item-order: the items the model's full-task mean is over, every item except those excluded
        without a score (e.g. it has no recorded answer)."""
        return self._scored | ~self._excluded

    def item_id(self, item: int) -> str:
        return str(self._item_ids[item])

    def is_taken(self, item: int) -> bool:
        """The item is reserved, scored or excluded (the selector will not offer it)."""
        return bool(self._mask[self._selector.positions(self._check_item(item))])

    def is_scored(self, item: int) -> bool:
        return bool(self._scored[self._check_item(item)])

    def is_excluded(self, item: int) -> bool:
        return bool(self._excluded[self._check_item(item)])

    def taken(self) -> np.ndarray:
        """Item-order boolean array: True for every taken item (a copy)."""
        return self._mask[self._selector.positions(np.arange(self._n_items))].copy()

    def _check_item(self, item) -> int:
        if type(item) is int and 0 <= item < self._n_items:  # the common case
            return item
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, np.integer)):
            raise ValueError(f"model {self._name!r}: an item is {self._words[0]} (int), got {item!r}")
        if not 0 <= item < self._n_items:
            raise ValueError(f"model {self._name!r}: item index {item} is outside {self._words[2]} "
                             f"(0..{self._n_items - 1})")
        return int(item)

    def _check_items(self, items) -> np.ndarray:
        arr = np.atleast_1d(np.asarray(items))
        if arr.size == 0:
            return np.zeros(0, dtype=np.int64)
        if arr.ndim != 1 or arr.dtype.kind not in "iu":
            raise ValueError(f"model {self._name!r}: items must be {self._words[1]} (ints), got {items!r}")
        arr = arr.astype(np.int64)
        bad = arr[(arr < 0) | (arr >= self._n_items)]
        if bad.size:
            raise ValueError(f"model {self._name!r}: item index {int(bad[0])} is outside {self._words[2]} "
                             f"(0..{self._n_items - 1})")
        return arr

    def _mark_many(self, items: np.ndarray) -> None:
        """Mark ``items`` taken (recorded in bulk): none of them counts as a random slot's any more."""
        pos = self._selector.positions(items)
        self._n_taken += int(np.count_nonzero(~self._mask[pos]))
        self._mask[pos] = True
        self._scored[items] = True
        was = self._random[items]
        if was.any():  # reserved at a random slot, then recorded in bulk: not a random slot's after all
            self._n_random_taken -= int(was.sum())
            self._random[items] = False

    def _set_random(self, item: int, random: bool) -> None:
        if bool(random) != bool(self._random[item]):
            self._random[item] = bool(random)
            self._n_random_taken += 1 if random else -1

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

    # ------------------------------------------------------------------- spend
    @property
    def spent(self) -> float:
        """USD spent on this model: the recorded items' costs and every :meth:`charge`."""
        return self._spent

    @property
    def item_costs(self) -> np.ndarray | None:
        return self._item_costs

    def cost_of(self, item: int) -> float:
        return 0.0 if self._item_costs is None else float(self._item_costs[item])

    def _costs_of(self, items: np.ndarray, costs, ids) -> np.ndarray:
        """USD of each of ``items`` recorded in bulk: ``costs`` checked (one per item), or the item costs."""
        if costs is None:
            return np.zeros(items.size) if self._item_costs is None else \
                np.asarray(self._item_costs, dtype=float)[items]
        c = check_costs(costs, model=self._name, items=ids)
        if c.shape != items.shape:
            raise ValueError(f"model {self._name!r}: {items.size} items but {c.size} costs")
        return c

    def charge(self, usd: float) -> None:
        """Add money spent on this model without a score (a call lost in flight, a paid call
        whose scoring failed). ValueError for a negative or non-finite amount."""
        if usd is None:
            raise ValueError(f"model {self._name!r}: a charge needs an amount (USD)")
        self._spent += check_cost(usd, model=self._name)

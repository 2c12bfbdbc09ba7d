"""A dollar cap for live API calls that many threads share: reserve before a call, settle after.

The protocol for every paid call::

    est = upper_estimate(price, input_tokens, max_output_tokens)
    if not ledger.reserve(key, est):      # would break the cap: do not make the call
        ...
    try:
        response = call(..., max_tokens=max_output_tokens)
    except Exception:
        ledger.release(key)               # failed before anything was charged
        raise
    ledger.settle(key, actual_cost(price, response.usage))

``reserve`` checks and books in one step under a lock, so however many calls are in flight
the money reserved plus the money spent never exceeds the cap. The check is exact: every
amount is kept as an integer number of 1e-12 USD (each amount rounded to the nearest such
unit once, when it enters the ledger), so sums never drift the way float sums do.

Callers must reserve an UPPER estimate of the call's cost: the input tokens at the input
price plus the *maximum* number of output tokens the call may produce (the ``max_tokens``
sent with it; for reasoning models the completion limit covers the reasoning tokens too)
at the output price. A charge above its reservation is still booked (it is what the
provider bills) but can push spending past the cap; it is reported as ``overshoot_usd`` and
logged as a warning, and means the estimate was not an upper bound.

At resume, charges already paid in an earlier process (read from the run's journal) enter
with :meth:`BudgetLedger.charge_known`; a key is charged at most once.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Hashable
from fractions import Fraction
from typing import Any

from lm_eval_adaptive.data.prices import nonnegative_amount
from lm_eval_adaptive.display import SHOWN_LOG_FILTER

__all__ = ["BudgetLedger"]

log = logging.getLogger(__name__)
log.addFilter(SHOWN_LOG_FILTER)  # names in messages shown escaped

_UNITS_PER_USD = 10**12  # the ledger counts in 1e-12 USD


def _units(value: Any, what: str) -> int:
    """USD -> integer 1e-12 USD (exact conversion of the float, rounded to nearest)."""
    return round(Fraction(nonnegative_amount(value, what)) * _UNITS_PER_USD)


def _usd(units: int) -> float:
    return units / _UNITS_PER_USD  # int / int is correctly rounded


class BudgetLedger:
    """Thread-safe ledger of a dollar cap: spent, reserved for calls in flight, available.

    Parameters
    ----------
    cap_usd:
        The hard cap in USD; None for no cap (the ledger then only counts).

    Invariant (short of overshoots, see the module docstring): ``spent + reserved <= cap``
    at every moment, however many threads reserve, settle and release at once.
    Keys name one call each (e.g. ``(model, item_id)``): a key cannot be reserved while it is
    reserved, nor once it was charged (settled or :meth:`charge_known`), so no call is
    charged twice. A released key (failed, nothing charged) may be reserved again.
    """

    def __init__(self, cap_usd: float | None):
        self._cap = None if cap_usd is None else _units(cap_usd, "cap_usd")
        self._lock = threading.Lock()
        self._reservations: dict[Hashable, int] = {}
        self._reserved = 0
        self._spent = 0
        self._charges: list[tuple[Hashable, int]] = []
        self._charged: set[Hashable] = set()
        self._n_settled = 0
        self._n_known = 0
        self._n_refused = 0
        self._overshoot = 0

    # ------------------------------------------------------------------ calls
    def reserve(self, key: Hashable, upper_estimate_usd: float) -> bool:
        """Book ``upper_estimate_usd`` for call ``key`` if it fits under the cap.

        Returns False, booking nothing, when spent + reserved + estimate would exceed the
        cap. ValueError when ``key`` is already reserved or already charged.
        """
        u = _units(upper_estimate_usd, "upper_estimate_usd")
        with self._lock:
            if key in self._reservations:
                raise ValueError(f"key {key!r} is already reserved (keys name one call in flight)")
            if key in self._charged:
                raise ValueError(f"key {key!r} was already charged; a call is paid for once")
            if self._cap is not None and self._spent + self._reserved + u > self._cap:
                self._n_refused += 1
                return False
            self._reservations[key] = u
            self._reserved += u
            return True

    def settle(self, key: Hashable, actual_usd: float) -> float:
        """Replace the reservation of ``key`` by the real charge ``actual_usd``.

        A charge below the reservation frees the difference. A charge above it is booked
        anyway (the provider bills it), added to :attr:`overshoot_usd` and logged as a
        warning; the overshoot is returned (0.0 normally). KeyError if ``key`` is not reserved.
        """
        a = _units(actual_usd, "actual_usd")
        with self._lock:
            try:
                r = self._reservations.pop(key)
            except KeyError:
                raise KeyError(f"no reservation for key {key!r}") from None
            self._reserved -= r
            self._spent += a
            self._charges.append((key, a))
            self._charged.add(key)
            self._n_settled += 1
            over = max(0, a - r)
            self._overshoot += over
            spent, cap = self._spent, self._cap
        if over:
            log.warning(
                "call %r cost $%.6g, $%.6g more than its reservation of $%.6g (spent $%.6g%s); "
                "reserve an UPPER estimate (input tokens + max output tokens) so the cap holds",
                key, _usd(a), _usd(over), _usd(r), _usd(spent),
                "" if cap is None else f" of ${_usd(cap):.6g}")
        return _usd(over)

    def release(self, key: Hashable) -> float:
        """Drop the reservation of a call that failed without charge; returns the USD freed.

        KeyError if ``key`` is not reserved.
        """
        with self._lock:
            try:
                r = self._reservations.pop(key)
            except KeyError:
                raise KeyError(f"no reservation for key {key!r}") from None
            self._reserved -= r
        return _usd(r)

    def charge_known(self, key: Hashable, usd: float) -> None:
        """Book a charge paid earlier (replayed from a journal at resume); no reservation.

        It counts as spent even beyond the cap (it was paid; a warning says so). ValueError
        when ``key`` was already charged or is reserved: nothing is charged twice.
        """
        u = _units(usd, "usd")
        with self._lock:
            if key in self._charged:
                raise ValueError(f"key {key!r} was already charged")
            if key in self._reservations:
                raise ValueError(f"key {key!r} is reserved for a call in flight")
            self._spent += u
            self._charges.append((key, u))
            self._charged.add(key)
            self._n_known += 1
            spent, cap = self._spent, self._cap
        if cap is not None and spent > cap:
            log.warning("known charges reach $%.6g, over the cap of $%.6g", _usd(spent), _usd(cap))

    # ------------------------------------------------------------------ state
    @property
    def cap(self) -> float | None:
        return None if self._cap is None else _usd(self._cap)

    @property
    def spent(self) -> float:
        """USD charged (settled calls and known charges)."""
        with self._lock:
            return _usd(self._spent)

    @property
    def reserved(self) -> float:
        """USD reserved for calls in flight."""
        with self._lock:
            return _usd(self._reserved)

    @property
    def available(self) -> float:
        """cap - spent - reserved (never below 0); ``math.inf`` without a cap."""
        with self._lock:
            if self._cap is None:
                return math.inf
            return _usd(max(0, self._cap - self._spent - self._reserved))

    @property
    def n_settled(self) -> int:
        """Calls settled (known charges not included)."""
        with self._lock:
            return self._n_settled

    @property
    def n_known(self) -> int:
        """Charges paid earlier and booked with :meth:`charge_known` (a resume's)."""
        with self._lock:
            return self._n_known

    @property
    def n_refused(self) -> int:
        """Reservations refused because they would have broken the cap."""
        with self._lock:
            return self._n_refused

    @property
    def in_flight(self) -> int:
        """Number of reservations outstanding."""
        with self._lock:
            return len(self._reservations)

    @property
    def overshoot_usd(self) -> float:
        """Total USD charged above reservations (0 when every estimate was an upper bound)."""
        with self._lock:
            return _usd(self._overshoot)

    def charges(self) -> list[tuple[Hashable, float]]:
        """(key, USD) of every charge, settled or known, in the order booked."""
        with self._lock:
            return [(k, _usd(u)) for k, u in self._charges]

    def reservations(self) -> dict[Hashable, float]:
        """Outstanding reservations, key -> USD."""
        with self._lock:
            return {k: _usd(u) for k, u in self._reservations.items()}

    def snapshot(self) -> dict:
        """A consistent view (one lock): cap, spent, reserved, available, counts, overshoot."""
        with self._lock:
            cap = None if self._cap is None else _usd(self._cap)
            avail = math.inf if self._cap is None else _usd(max(0, self._cap - self._spent - self._reserved))
            return {"cap": cap, "spent": _usd(self._spent), "reserved": _usd(self._reserved),
                    "available": avail, "in_flight": len(self._reservations),
                    "n_settled": self._n_settled, "n_known": self._n_known, "n_charges": len(self._charges),
                    "n_refused": self._n_refused, "overshoot_usd": _usd(self._overshoot),
                    "within_cap": self._cap is None or self._spent + self._reserved <= self._cap}

    def __repr__(self) -> str:
        s = self.snapshot()
        return (f"BudgetLedger(cap={s['cap']}, spent={s['spent']:.6g}, reserved={s['reserved']:.6g}, "
                f"in_flight={s['in_flight']})")

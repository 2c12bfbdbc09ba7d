"""The prices a live run charges, kept in its journal: a resume charges what the run charged.

When a run starts, the journal's header records every model's price and every declared judge's
(:func:`price_records`). On ``--resume`` those are the run's prices: the prices the session resolves now
(litellm's price map, which a litellm upgrade changes) are compared with them (:func:`price_changes`),
and a difference is reported and refused, one error naming each model, unless the resume states it with
``--new-prices``; then the new prices are journaled (a ``prices`` record, :func:`journal_price_change`),
are the run's prices from there on, and the report states them. A journal from before prices were
journaled has nothing to compare: its run goes on at the prices resolved now.
"""

from __future__ import annotations

from lm_eval_adaptive.errors import InputError

__all__ = ["price_records", "journaled_prices", "price_changes", "check_resumed_prices", "journal_price_change",
           "PRICES_RECORD"]

#: The journal record type of a price change stated on resume.
PRICES_RECORD = "prices"


def price_records(setup) -> dict:
    """``{"models": name → price record, "judges": judge → price record}`` of a session (``Setup``)."""
    return {"models": {m: p.record() for m, p in setup.prices.items()},
            "judges": {m: p.record() for m, p in setup.judges.prices.items()}}


def journaled_prices(journal) -> dict | None:
    """The run's prices as its journal records them (the header's, or the last change stated on resume);
    None for a journal from before prices were journaled."""
    prices = journal.header.get("prices")
    for rec in journal.records(PRICES_RECORD):
        prices = rec.get("prices")
    return prices if isinstance(prices, dict) else None


def _shown(rec) -> str:
    if not isinstance(rec, dict):
        return "none"
    r = rec.get("reasoning_per_mtok")
    return (f"${rec.get('input_per_mtok'):.6g}/${rec.get('output_per_mtok'):.6g} per M tokens"
            + (f" (reasoning ${r:.6g})" if r is not None else "") + f" ({rec.get('source')})")


def _same(a, b) -> bool:
    keys = ("input_per_mtok", "output_per_mtok", "reasoning_per_mtok")
    return isinstance(a, dict) and isinstance(b, dict) and all(a.get(k) == b.get(k) for k in keys)


def price_changes(journal, setup) -> list[str]:
    """One line per model (or judge) whose price now differs from the journal's; none when they agree,
    or when the journal recorded no prices."""
    recorded = journaled_prices(journal)
    if recorded is None:
        return []
    now = price_records(setup)
    out = []
    for part, label in (("models", ""), ("judges", "judge ")):
        was, is_ = recorded.get(part) or {}, now[part]
        for m in [*was, *(k for k in is_ if k not in was)]:
            if m in is_ and not _same(was.get(m), is_[m]):
                out.append(f"{label}{m}: journal {_shown(was.get(m))}, now {_shown(is_[m])}")
    return out


def check_resumed_prices(journal, setup, *, stated: bool, where) -> list[str]:
    """The price changes of a resumed run (:func:`price_changes`); an :class:`InputError` naming each when
    the resume did not state them (``--new-prices``). Nothing is written here."""
    changes = price_changes(journal, setup)
    if changes and not stated:
        raise InputError("the prices changed since the run started: " + "; ".join(changes) +
                         " (a resumed run charges the prices it started with; resume with --new-prices to go on "
                         "at the new prices, journaled)", path=str(where))
    return changes


def journal_price_change(journal, setup, changes) -> None:
    """Journal the prices a resume stated with ``--new-prices`` (nothing when none changed)."""
    if changes:
        journal.append({"type": PRICES_RECORD, "prices": price_records(setup), "previous": journaled_prices(journal),
                        "changes": list(changes)})

"""A live run resumed from its journal: what an earlier process of the run asked, scored and paid, replayed
into a fresh :class:`~lm_eval_adaptive.live.driver.LiveRun` without calling anything.

Score and failure records are replayed into the fresh ranker, their costs and those of the ``attempt``
records (failed attempts charged before a retry) enter the ledger as known charges, once each, and calls
that were in flight when the process died (a ``request`` record with no outcome) are not made again:
their items are given up for that model and their reserved upper estimate is counted as spent (the
provider may have billed them). The report's counts are the journal's, not this process's: every
attempt the run sent (a call lost in flight counts its first attempt and each retry journaled for it),
the retries, the failed attempts charged as billed, the answers charged their reservation for want of
usage.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["resume_run", "raw_value"]


def raw_value(value):
    """A raw metric value as a number, or (a bank per metric) metric → number."""
    if isinstance(value, Mapping):
        return {str(k): float(v) for k, v in value.items()}
    return float(value)


def resume_run(live, journal) -> dict:
    """Replay ``journal`` into the fresh run ``live`` (its ranker, ledger and counts); what was replayed."""
    stats = journal.replay_into(live.ranker)
    r = live.ranker
    for rec in journal.records("score"):
        live.raw[rec["model"]][r.item_index(rec["item_id"])] = raw_value(rec["raw"])
    for key, usd in journal.costs():
        live.ledger.charge_known(key, usd)
    done = {(r["model"], r["item_id"]) for r in journal.records() if r.get("type") in ("score", "failure")}
    lost = []
    for rec in journal.records():
        if rec.get("type") != "request" or (rec["model"], rec["item_id"]) in done:
            continue
        m, item_id, usd = rec["model"], rec["item_id"], float(rec.get("reserved_usd") or 0.0)
        i = r.item_index(item_id)
        live.ranker.exclude(m, [i])  # never asked again: the provider may have answered (and billed) it
        live.ranker.charge(m, usd)
        live.ledger.charge_known(f"lost:{m}:{item_id}", usd)
        lost.append((m, item_id, usd))
        # its attempts: the first, and one more after each failed attempt journaled before its retry
        live.attempts += 1 + sum(1 for a in journal.records("attempt")
                                 if (a.get("model"), a.get("item_id")) == (m, item_id))
    live.lost_in_flight = lost
    for rec in journal.records("attempt"):  # failed attempts charged before their retry
        if rec.get("model") not in live.judge_spent:
            continue
        live.retries += 1  # each attempt record was followed by a retry
        if rec.get("may_have_been_billed"):
            live.billed_failures += 1
            live.billed_failures_usd += float(rec.get("cost_usd") or 0.0)
        if rec.get("cost_usd"):
            live.ranker.charge(rec["model"], float(rec["cost_usd"]))
    for rec in journal.records():
        if rec.get("type") not in ("score", "failure") or rec.get("model") not in live.judge_spent:
            continue
        live.judge_spent[rec["model"]] += float(rec.get("judge_cost_usd") or 0.0)
        live.attempts += int(rec.get("attempts") or 0)  # the report counts the journal's calls, not this process's
        if rec.get("usage_unknown"):
            live.unknown_usage[rec["model"]] += 1
            live.unknown_usage_usd[rec["model"]] += float(rec.get("cost_usd") or 0.0)
        if rec["type"] == "failure" and rec.get("may_have_been_billed"):
            live.billed_failures += 1
            live.billed_failures_usd += float(rec.get("cost_usd") or 0.0)
        if rec["type"] == "failure" and rec.get("cost_usd"):  # answered, then failed: paid for
            live.ranker.charge(rec["model"], float(rec["cost_usd"]))
    return {"scores": stats.scores, "failures": stats.failures, "lost_in_flight": len(lost),
            "spent_usd": live.ledger.spent}


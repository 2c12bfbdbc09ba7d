"""The live run of one ``rank`` task, made and (on ``--resume``) brought back to where its journal left it:
the same for a banked run (:mod:`lm_eval_adaptive.cli.rank`) and a bank-free one
(:mod:`lm_eval_adaptive.cli.bank_free_rank`), so both report a resume, a changed cap and changed prices alike."""

from __future__ import annotations

from lm_eval_adaptive.cli.live_output import print_cap_change, print_price_change
from lm_eval_adaptive.live.driver import LiveRun, RetryPolicy
from lm_eval_adaptive.live.journal import env_secrets
from lm_eval_adaptive.live.run_prices import journal_price_change
from lm_eval_adaptive.live.session import journal_cap_change

__all__ = ["start_live_run"]


def start_live_run(r, notes, *, lost_in_flight: str) -> LiveRun:
    """The :class:`~lm_eval_adaptive.live.driver.LiveRun` of the prepared run ``r`` (a ``RankRun``); on a
    resume its journal replayed, and the resume, a changed cap and the prices stated with ``--new-prices``
    said on ``notes`` (``lost_in_flight``: what became of calls lost in flight, as the run treats them)."""
    a, setup, journal = r.settings, r.setup, r.journal
    live = LiveRun(r.ranker, setup.scorers, upper_cost=setup.upper_cost, actual_cost=setup.actual_cost,
                   judge_cost=setup.judge_cost, scale=setup.scale, ledger=setup.ledger, journal=journal,
                   retry=RetryPolicy(max_attempts=a.max_attempts, base_s=a.backoff),
                   max_failures=a.max_failures, secrets=env_secrets())
    if r.resumed:
        info = live.resume_from(journal)
        notes.print(f"resumed {r.out_dir}: {info['scores']} scored items replayed, {info['failures']} failures, "
                    f"{info['lost_in_flight']} call(s) lost in flight ({lost_in_flight}), "
                    f"${info['spent_usd']:.4f} already spent")
        print_cap_change(notes, journal_cap_change(journal, a, setup.ledger), setup.ledger)
        print_price_change(notes, r.price_changes)
        journal_price_change(journal, setup, r.price_changes)
    return live

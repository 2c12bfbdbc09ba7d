"""``rank`` on a task with no item bank: the bank-free ranker, live (issue 31; docs/cold-start.md).

:mod:`.rank` hands a task here when it has no bank (none given, none shipped for it), or one calibrated from
too few models to be used (:mod:`~lm_eval_adaptive.engine.anytime.small_bank`): the run is checked,
journaled, resumed, capped and reported as a banked run is, through the same live driver
(:class:`~lm_eval_adaptive.live.driver.LiveRun`); its session is
:class:`~lm_eval_adaptive.live.bank_free_session.BankFreeSetup`. The report says which mode ran and why,
each model's estimate with its anytime-valid interval, and each pair ordered, equivalent, or unresolved
with its cost to settle.
"""

from __future__ import annotations

from pathlib import Path

from lm_eval_adaptive.atomic import atomic_write, write_json
from lm_eval_adaptive.cli.live_output import LiveProgress, note_default_prices
from lm_eval_adaptive.cli.report import plot_ranking
from lm_eval_adaptive.cli.terminal import styled
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness.bank_source import bank_reference, small_bank
from lm_eval_adaptive.harness.binding import DOC_ID
from lm_eval_adaptive.live.bank_free_forecast import forecast_anytime_rank
from lm_eval_adaptive.live.bank_free_session import (
    BANK_FREE,
    BankFreeSetup,
    bank_free_ranker,
    build_bank_free_report,
    parse_score_range,
)
from lm_eval_adaptive.cli.live_start import start_live_run
from lm_eval_adaptive.live.run_prices import price_records
from lm_eval_adaptive.live.journal import JOURNAL_NAME
from lm_eval_adaptive.live.session import (
    PLOT_FILE,
    RANKING_FILE,
    RUN_KEYS,
    LiveSettings,
    check_live_settings,
    cheapest_call_check,
    refuse_existing_run,
    start_run,
)

__all__ = ["check_bank_free_settings", "forecast_anytime", "forecast_anytime_rank", "bank_free_setup",
           "start_bank_free", "run_bank_free"]


def forecast_anytime(a: LiveSettings) -> bool:
    """Whether ``rank --dry-run`` forecasts ``a`` with the anytime-valid ranker (live/bank_free_forecast.py):
    ``--anytime`` with one bank calibrated from enough models to be used (its token counts and response model
    simulate the run)."""
    return bool(a.anytime) and a.bank is not None and not isinstance(a.bank, list) and \
        small_bank(a.bank, what="ranking") is None


def check_bank_free_settings(a: LiveSettings) -> None:
    """The checks of a bank-free ``rank`` before any task is loaded (the banked run's, less the bank's); the
    command line then prices the settings (:func:`~lm_eval_adaptive.live.session.resolved_settings`)."""
    if not a.models or len(a.models) < 2:
        raise InputError("--models needs at least 2 model specs")
    if not a.tasks or "," in a.tasks:
        raise InputError(f"--tasks {a.tasks!r}: rank runs on one task at a time")
    if a.dry_run and not forecast_anytime(a):  # rank --anytime with a bank it uses: forecast from the bank
        why = "has no item bank, so there are no token counts to forecast from" if a.bank is None else \
            "runs without its bank (too few calibration models), so there are no token counts to forecast from"
        raise InputError(f"--dry-run: task {a.tasks!r} {why}; run with a small --budget-usd instead (the cap holds)")
    check_live_settings(a)
    parse_score_range(a.score_range)
    if a.output and not a.resume:
        refuse_existing_run(a.output)


def bank_free_setup(a: LiveSettings, resumed: bool):
    """(session, ranker) of a bank-free run: the task loaded, the metric and its range settled, the
    cheapest first call checked against the cap (a new run)."""
    check_bank_free_settings(a)
    setup = BankFreeSetup(a)
    ranker = bank_free_ranker(setup, a)
    if not resumed:
        cheapest_call_check(setup, a)
    return setup, ranker


def start_bank_free(r):
    """Create the run folder, its run.json and its journal (``bank``: none; the mode in the header)."""
    a, setup = r.settings, r.setup
    settings = {k: getattr(a, k) for k in RUN_KEYS}
    settings["bank"] = bank_reference(a.bank) if isinstance(a.bank, str) else None  # a bank too small to use
    settings["metric"] = setup.metric
    settings["include_path"] = str(Path(a.include_path).resolve()) if a.include_path else None
    # the journal names documents by doc id; --anytime keeps the option as given: it binds the bank's ids on resume
    settings["item_field"] = a.item_field if a.anytime else DOC_ID
    return start_run(r.out_dir, "rank", settings, {"command": "rank", "bank_id": BANK_FREE, "mode": BANK_FREE,
                                                   "models": [s.name for s in setup.specs],
                                                   "task": setup.task_name, "budget_usd": a.budget_usd,
                                                   "score_range": list(setup.score_range), "mode_note": setup.mode_note,
                                                   "prices": price_records(setup)}, BANK_FREE)


def run_bank_free(r, notes, out, print_report, exit_status) -> int:
    """Rank one task with no bank live, write its results and print its report; the exit status."""
    a, setup, out_dir = r.settings, r.setup, r.out_dir
    live = start_live_run(r, notes, lost_in_flight="asked again")
    announce(notes, setup, a)
    with LiveProgress(notes, live, setup, enabled=not a.no_progress) as prog:
        live.on_progress = prog.update
        live.run()
    report = build_bank_free_report(live, setup, a)
    res = live.ranker.result(settle_costs=False)
    rows = [x for x in report["rows"] if x["model"] in res.ranking]
    plot = out_dir / PLOT_FILE
    atomic_write(plot, lambda f: plot_ranking(f, rows, res, title=f"{setup.task_name}: bank-free ranking "
                                                                  f"({setup.metric})"))
    write_json(out_dir / RANKING_FILE, report)
    out.print(styled("mode", "bold", ": " + report["mode_note"]), highlight=False)
    print_report(out, report)
    out.print(f"results: {out_dir / RANKING_FILE}, {plot}; journal {out_dir / JOURNAL_NAME}")
    return 130 if live.interrupted else exit_status(report)


def announce(console, setup: BankFreeSetup, a: LiveSettings) -> None:
    """The plan on stderr: the mode and why first, then the models and their prices."""
    console.print(styled("mode", "bold yellow", ": " + setup.mode_note))
    console.print(styled("lm-eval-adaptive rank", "bold", f": {len(setup.specs)} models on {setup.task_name} "
                  f"({setup.n_docs} documents, in one random order, seed {a.seed}); γ = {a.confidence}"
                  + (" for the whole ranking" if a.family_wise else " per pair") + ", cap "
                  + (f"${a.budget_usd:g}" if a.budget_usd is not None else "none")
                  + (f", at most {a.max_items} items per model" if a.max_items else "")))
    for s in setup.specs:
        p = setup.prices[s.name]
        console.print(f"  {s.name}: {s.type}:{s.model_id}, ${p.input_per_mtok:g}/${p.output_per_mtok:g} per M tokens "
                      f"({p.source})")
    note_default_prices(console, setup.priced_by_default, setup.prices, setup.judges.prices)

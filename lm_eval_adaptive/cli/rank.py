"""``lm-eval-adaptive rank``: rank harness models live, to a stated confidence, under a hard dollar cap.

Each model (``--models TYPE:ARGS …``, or the harness's ``--model``/``--model_args``:
:mod:`.harness_options`) gets its own harness LM and task object
(:mod:`lm_eval_adaptive.harness.scorer`); the engine's multi-model ranker picks items,
:class:`~lm_eval_adaptive.live.driver.LiveRun` runs every model's calls at once, each charged at
litellm's price for the usage the provider returns. With several ``--tasks`` each task is ranked
and reported in turn, with its own bank (``--bank TASK=BANK.json``), cap and run folder
``DIR/TASK``; every task's settings, bank and prices are checked before the first call. A task
given several banks (``--bank A B``, one per metric) is ranked by every metric at once: each
document is generated once and scored by every bank's metric
(:class:`~lm_eval_adaptive.engine.ranking.multi_metric_ranker.MultiMetricRanker`), journaled and resumed
like a single bank's run, and reported with a ranking per metric.

The report goes to stdout (at most 120 columns, names whole, when it is not a terminal); the plan, progress and
notes to stderr.

Files in ``--output DIR`` (``--output_path``), or in ``DIR/TASK`` with several tasks:

* ``run.json``: the run's settings (a copy of the journal header's, which ``--resume DIR`` takes:
  a setting given on the resume's command line that differs, or an edited ``run.json``, is
  refused; ``--budget-usd`` on resume changes the cap, journaled; secrets redacted);
* ``journal.jsonl``: every request, score, failure and stop, fsynced (see :mod:`.journal`);
* ``ranking.json`` and ``ranking.png``: the result (written atomically at the end, also after
  Ctrl-C, with ``stopped_because: "interrupted"``); with a bank per metric, ``ranking.json`` holds
  ``rankings`` (metric → its ranking) and each metric's plot is ``ranking_METRIC.png``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, replace
from pathlib import Path

from lm_eval_adaptive.atomic import atomic_write, write_json
from lm_eval_adaptive.cli.arguments import (
    add_family_wise_argument,
    add_redact_argument,
    add_tie_margin_argument,
    confidence_level,
    nonnegative_float,
    positive_float,
    positive_int,
)
from lm_eval_adaptive.cli.harness_options import (
    add_model_arguments,
    model_specs,
    task_folder,
    task_list,
)
from lm_eval_adaptive.cli.live_start import start_live_run
from lm_eval_adaptive.cli.report import note_on_stderr, plot_ranking, print_inseparable, report_console
from lm_eval_adaptive.data.price_map import priced_by_default
from lm_eval_adaptive.live.run_prices import check_resumed_prices, price_records
from lm_eval_adaptive.live.pair_prose import (answer_paragraph, cost_sentence, pair_lines, rank_range_text, rank_theta_note,
                                              stop_note)
from lm_eval_adaptive.display import shown
from lm_eval_adaptive.engine.cat.person_fit import misfit_note
from lm_eval_adaptive.engine.ranking.ranker import AdaptiveRanker
from lm_eval_adaptive.engine.ranking.pairs.settle_policy import DEFAULT_FULL_RUN_SHARE
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness.bank_source import bank_reference, parse_banks, small_bank
from lm_eval_adaptive.harness.scorer import DEFAULT_TIMEOUT_S
from lm_eval_adaptive.live.cost_forecast import forecast_rank, write_forecast
from lm_eval_adaptive.live.journal import JOURNAL_NAME
from lm_eval_adaptive.live.run_report import build_report
from lm_eval_adaptive.live.stopping_policy import LIVE_MIN_ITEMS
from lm_eval_adaptive.live.session import (
    PLOT_FILE,
    RANKING_FILE,
    RUN_FILE,
    RUN_KEYS,
    LiveSettings,
    Setup,
    check_before_loading,
    check_settings,
    cheapest_call_check,
    open_run,
    rank_ranker,
    refuse_existing_run,
    resumed_settings,
    start_run,
    resolved_settings,
)
from lm_eval_adaptive.cli.terminal import styled
from lm_eval_adaptive.cli.live_output import (
    LiveProgress,
    announce,
    note_default_prices,
    print_forecast,
    print_forecast_written,
)

__all__ = ["add_rank_parser", "add_task_arguments", "add_live_arguments", "cmd_rank", "print_report",
           "print_misfits", "print_dropped", "RankRun", "rank_settings", "prepare_rank", "start_rank", "run_rank",
           "exit_status", "combined_status", "DROPPED", "EXIT_STATUS"]


def add_task_arguments(p: argparse.ArgumentParser) -> None:
    """The harness's task arguments, spelled as ``lm-eval run`` spells them."""
    g = p.add_argument_group("harness task arguments (as in lm-eval run)")
    g.add_argument("--include_path", default=None, metavar="DIR", help="extra folder of task YAMLs")
    g.add_argument("--num_fewshot", type=int, default=None, metavar="N")
    g.add_argument("--apply_chat_template", action="store_true", help="format prompts with the chat template")
    g.add_argument("--fewshot_as_multiturn", action="store_true")
    g.add_argument("--gen_kwargs", default=None, metavar="K=V,…", help="generation kwargs, e.g. max_gen_toks=256")
    g.add_argument("--system_instruction", default=None)
    g.add_argument("--metadata", default=None, metavar="JSON", help="task metadata (JSON), as in lm-eval run")


def add_live_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("live calls")
    add_redact_argument(g)
    add_tie_margin_argument(g)
    add_family_wise_argument(g)
    g.add_argument("--concurrency", type=positive_int, default=1, metavar="K",
                   help="calls in flight per model (default 1: each item chosen after the last score); "
                        "every model is in flight at once")
    g.add_argument("--price", nargs="+", action="extend", default=[], metavar="MODEL=IN,OUT",
                   help="USD per million input,output tokens for MODEL (a list, or repeated); needed for "
                        "models (and judge models) litellm's price map does not know")
    g.add_argument("--new-prices", action="store_true",
                   help="--resume: go on at the prices resolved now (litellm's price map) where they differ from "
                        "those the run started with (refused without it; the change is journaled)")
    g.add_argument("--metric", default=None, help="per-document metric (default: the bank's)")
    g.add_argument("--item-field", default=None, metavar="FIELD",
                   help="document field that holds the bank's item ids (doc_id: the harness doc id; "
                        "default: the field the bank records, else doc ids, refused when that reading is "
                        "ambiguous)")
    g.add_argument("--timeout", type=positive_float, default=None, metavar="SECONDS",
                   help=f"seconds one model or judge call may take before it fails (retried as a timeout; "
                        f"default: the model's timeout= argument, else {DEFAULT_TIMEOUT_S:g})")
    g.add_argument("--max-attempts", type=positive_int, default=6, metavar="N",
                   help="attempts per call for 429/5xx/timeouts/dropped connections (backoff with jitter)")
    g.add_argument("--max-failures", type=positive_int, default=3, metavar="N",
                   help="a model whose calls fail N times in a row is dropped and reported as failed")
    g.add_argument("--backoff", type=nonnegative_float, default=0.5, metavar="S", help="base backoff in seconds")
    g.add_argument("--no-progress", action="store_true", help="no live progress table")
    g.add_argument("--verbose", action="store_true",
                   help="the report's technical detail too: θ̂ ± SE, why the rank and θ̂ may disagree")
    g.add_argument("--dry-run", action="store_true",
                   help="call nothing: forecast the items and dollars per model (typical and worst case) "
                        "beside a full run's cost, from the bank's token counts and the prices")


#: The exit statuses of ``rank`` and ``refresh`` (their ``--help``; docs/live.md).
EXIT_STATUS = (
    "  0    every model ranked (refresh: placed)",
    "  3    the others ranked, but a model was dropped: its calls kept failing (--max-failures in a row);",
    "       a `dropped:` line names it, ranking.json's `failed` holds it",
    "  1    nothing ranked: fewer than two models left (refresh: no new model placed); or a file could not",
    "       be written (a full disk): one `error:` line, every paid call journaled: continue with --resume DIR",
    "  2    bad input: one `error:` line, nothing asked or written (or another process writes the folder)",
    "  130  interrupted: continue with --resume DIR",
)

RANK_EXAMPLES = """\
example:
  lm-eval-adaptive rank --models litellm:model=openai/GPT-4 litellm:model=openai/Aya23 --tasks wmt24_en-de \\
      --include_path task_configs --apply_chat_template --bank bank.json --budget-usd 2 --output runs/rank1
  lm-eval-adaptive rank --resume runs/rank1
  # the harness's spelling; two tasks, each with its bank and a $1 cap, ranked in turn (runs/rank2/TASK)
  lm-eval-adaptive rank --model litellm --model_args model=openai/GPT-4 --model_args model=openai/Aya23 \\
      --tasks wmt24_en-de,wmt24_en-es --bank wmt24_en-de=ende.json wmt24_en-es=enes.json \\
      --include_path task_configs --apply_chat_template --budget-usd 1 --output_path runs/rank2
  # models litellm has no price for: name each (--price NAME=IN,OUT), or one default for the rest
  lm-eval-adaptive rank --models litellm:model=openai/Aya23 litellm:model=openai/Llama3-70B --tasks wmt24_en-de \\
      --include_path task_configs --apply_chat_template --budget-usd 1 --output runs/rank3 \\
      --price openai/Aya23=0.5,1.5 default=1,3

""" + "\n".join(["exit status:", *EXIT_STATUS])


def add_rank_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("rank", help="rank harness models live under a hard dollar cap (ties reported as ties)",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog=RANK_EXAMPLES)
    p.add_argument("--models", nargs="+", action="extend", metavar="SPEC",
                   help="harness models as TYPE:ARGS, e.g. litellm:model=gpt-4o-mini "
                        "(optionally NAME=TYPE:ARGS); or --model/--model_args below")
    p.add_argument("--tasks", nargs="+", action="extend", metavar="TASK",
                   help="harness task(s) to rank on, space- or comma-separated; each is ranked and reported in "
                        "turn, in its own folder DIR/TASK of --output DIR")
    p.add_argument("--bank", nargs="+", action="extend", metavar="[TASK=]BANK",
                   help="item bank per task (lm-eval-adaptive calibrate): TASK=PATH, a bare PATH with one task, "
                        "or a shipped bank's name (wmt24_en-de.bleu); default: the task's shipped bank when "
                        "only one fits the task and --metric. Several banks of one task (one per metric, e.g. "
                        "--bank wmt24_en-de.bleu wmt24_en-de.chrf): one generation per document, scored by every "
                        "bank's metric, a ranking per metric")
    p.add_argument("--confidence", type=confidence_level, default=0.95, help="γ for settling a pair (default 0.95)")
    p.add_argument("--budget-usd", type=positive_float, default=None, metavar="USD",
                   help="hard cap on total spend (reserved before each call, settled with real usage); "
                        "with several tasks, the cap of each task's ranking")
    p.add_argument("--min-items", type=positive_int, default=None,
                   help=f"items every model answers before the run may stop (default {LIVE_MIN_ITEMS}, "
                        "or --max-items when that is fewer)")
    p.add_argument("--max-items", type=positive_int, default=None, help="maximum items per model")
    p.add_argument("--output", "--output_path", dest="output", metavar="DIR",
                   help="folder for run.json, journal.jsonl, ranking.json/png (DIR/TASK with several tasks)")
    p.add_argument("--resume", metavar="DIR", default=None,
                   help="continue the run in DIR (crashed or interrupted): nothing is requested or paid twice; "
                        "a folder of several tasks continues the tasks not finished, in turn")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--score-range", default=None, metavar="LO,HI",
                   help="a task with no bank: the lowest and highest score of one document (default: the metric's "
                        "own, known for bleu, chrf, rouge_l, acc, exact_match ...; docs/cold-start.md)")
    p.add_argument("--settle-share", type=positive_float, default=None, metavar="S",
                   help="stop buying for a pair once settling it would take the run past this share of a full "
                        f"run of every model (default {DEFAULT_FULL_RUN_SHARE:g}; 1: up to a full run, which settles "
                        "every pair; the budget cap still holds)")
    p.add_argument("--anytime", action="store_true",
                   help="with a bank: the anytime-valid ranker (shared random documents; every interval and pair "
                        "decision holds whenever the run stops), the bank only ordering the pairs left open; without "
                        "it a bank runs the adaptive ranker, which settles more pairs per item (docs/cold-start.md)")
    add_model_arguments(p, adds_to="--models")
    add_task_arguments(p)
    add_live_arguments(p)
    p.set_defaults(func=cmd_rank)
    return p


# ----------------------------------------------------------------------------- command
@dataclass
class RankRun:
    """One task's ranking, checked and ready: its settings, run folder, journal and ranker (or, when
    a multi-task run is resumed, the report of a task it had already ranked)."""

    settings: LiveSettings
    out_dir: Path
    journal: object = None
    resumed: bool = False
    setup: Setup | None = None
    ranker: AdaptiveRanker | None = None
    finished: dict | None = None
    price_changes: list | None = None  # resume: the price changes stated with --new-prices


def cmd_rank(args) -> int:
    notes = report_console(stderr=True)  # plan, progress, notes
    out = report_console()  # the report
    runs = []
    try:
        # every task's settings, bank (against the task and metric) and prices are checked
        # before any run folder is created or any call is made
        settings, several = rank_settings(args)
        if settings[0].dry_run:  # expected items and dollars per task; no call made, nothing written but the forecast
            prices = settings[0].prices
            note_default_prices(notes, priced_by_default(prices), prices)
            for a in settings:  # rank --anytime with a bank: the anytime-valid ranker's forecast
                fc = _bank_free().forecast_anytime_rank(a) if runs_bank_free(a) else forecast_rank(a)
                print_forecast(out, fc)  # the report, on stdout; the notes above on stderr
                print_forecast_written(out, write_forecast(fc, a.output))
            return 0
        for a in settings:
            runs.append(prepare_rank(a, skip_finished=several and bool(a.resume)))
        for r in runs:
            if not r.resumed:
                r.journal = start_rank(r)
        status = []
        for k, r in enumerate(runs):
            if r.finished is not None:
                notes.print(f"{r.out_dir}: already ranked (stopped because: {r.finished['stopped_because']})")
                print_report(out, r.finished, verbose=r.settings.verbose)
                status.append(exit_status(r.finished))
                continue
            code = run_rank(r, notes, out)
            if code == 130:
                if runs[k + 1:]:
                    notes.print(f"not ranked yet: {', '.join(str(x.out_dir) for x in runs[k + 1:])}; continue "
                                f"with rank --resume {args.resume or args.output}")
                return 130
            status.append(code)
        return combined_status(status)
    finally:
        for r in runs:
            if r.journal is not None:
                r.journal.close()


def rank_settings(args) -> tuple[list[LiveSettings], bool]:
    """(one :class:`LiveSettings` per task to rank, or per task folder to resume; several tasks?): the run's
    settings resolved once, here at the edge (defaults, the models parsed and priced, each task's bank(s), a
    resume's settings from its journal and its cap change), frozen; the layers below only read them."""
    values = dict(vars(args))
    values["models"] = model_specs(args.models, args.model, args.model_args, device=args.device,
                                   batch_size=args.batch_size)
    values["tasks"] = values["bank"] = None
    if args.resume:  # each run folder's settings from its journal, checked against those given, then priced
        base = LiveSettings.from_mapping(values, given=resume_given(args, values, RUN_KEYS))
        d = Path(args.resume)
        folders = [] if (d / RUN_FILE).is_file() or not d.is_dir() else \
            sorted(x for x in d.iterdir() if (x / RUN_FILE).is_file())
        if not folders:  # one task's run folder (resumed_settings refuses anything else)
            return [resolved_settings(resumed_settings(base))], False
        return [resolved_settings(resumed_settings(replace(base, resume=str(x)))) for x in folders], True
    base = LiveSettings.from_mapping(values)
    tasks = task_list(args.tasks)
    if not tasks:
        raise InputError("--tasks: name the harness task(s) to rank on")
    if len(base.models or []) < 2:  # the command line's own shape before any check of what it names
        raise InputError("--models needs at least 2 model specs")
    if not args.output and not args.dry_run:
        raise InputError("--output DIR is needed (" + ("each task's journal, settings and results go to DIR/TASK)"
                                                      if len(tasks) > 1 else "the journal, settings and results go there)"))
    if args.output:  # an existing run is never overwritten: said before what it names is checked
        for t in tasks:
            refuse_existing_run(args.output if len(tasks) == 1 else task_folder(args.output, t))
    banks = parse_banks(args.bank, tasks, metric=args.metric, command="rank", several=True,
                        note=note_on_stderr, include_path=args.include_path, bank_free=True)
    banks = {t: (v if v is None else v[0] if len(v) == 1 else list(v)) for t, v in banks.items()}
    for t, v in banks.items():
        if isinstance(v, list) and args.metric:
            raise InputError(f"--metric {args.metric}: task {t!r} is given {len(v)} banks (one per metric); each "
                             "bank says its metric, --metric is for a single bank")
        if isinstance(v, list) and args.anytime:
            raise InputError(f"--anytime: task {t!r} is given {len(v)} banks (one per metric); it ranks one: give one")
        if isinstance(v, list) and args.dry_run:
            raise InputError(f"--dry-run: task {t!r} is given {len(v)} banks; the cost forecast of a several-bank "
                             "rank is not available yet (forecast each bank alone for an upper bound)")
    if len(tasks) == 1:
        runs = [replace(base, tasks=tasks[0], bank=banks[tasks[0]])]
    elif not args.output:
        raise InputError("--output DIR is needed (each task's journal, settings and results go to DIR/TASK)")
    else:
        runs = [replace(base, tasks=t, bank=banks[t], output=str(task_folder(args.output, t))) for t in tasks]
    resolved = []
    for a in runs:  # settings, banks, the task's metric, prices and run folders: before any task is loaded
        if runs_bank_free(a):  # no bank, or one too small: the bank-free ranker (docs/cold-start.md)
            _bank_free().check_bank_free_settings(a)
            resolved.append(resolved_settings(a))
            continue
        check_settings(a)
        resolved.append(check_before_loading(a))  # checked and priced
    return resolved, len(tasks) > 1


def runs_bank_free(a: LiveSettings) -> bool:
    """Whether ``rank`` runs ``a`` with the bank-free (anytime-valid) ranker: no bank, one bank calibrated from too
    few models to be used (docs/cold-start.md, *A small history*), or ``--anytime`` (the bank orders the open pairs)."""
    return a.bank is None or a.anytime or small_bank(a.bank, what="ranking") is not None


def _bank_free():
    """:mod:`.bank_free_rank`, imported only when a task has no bank (the bank-free ranker imports scipy.stats,
    which takes about a second to import: not at every ``rank``'s start)."""
    from lm_eval_adaptive.cli import bank_free_rank  # noqa: PLC0415

    return bank_free_rank


def resume_given(args, values: dict, keys) -> dict:
    """The run settings a resume's command line gave explicitly, spelled as the run records them
    (models as specs, tasks and banks as lists), for :func:`~lm_eval_adaptive.live.session.open_run`
    to compare with the journal's."""
    explicit = set(getattr(args, "explicit", ()) or ())
    given = {k: values[k] for k in keys if k in explicit and k in values}
    if "models" in keys and explicit & {"models", "model", "model_args"}:
        given["models"] = values["models"]
    if "tasks" in explicit:
        given["tasks"] = task_list(args.tasks)
    if "bank" in explicit:
        given["bank"] = [str(b) for b in args.bank]
    return given


def prepare_rank(a: LiveSettings, *, skip_finished: bool = False) -> RankRun:
    """Check one task's settings, bank and prices and build its ranker; nothing is called or written.
    ``skip_finished``: a resumed run that had ended is not run again (its report is kept)."""
    out_dir, journal, resumed = open_run(a)
    try:
        finished = finished_report(out_dir) if resumed and skip_finished else None
        if finished is not None:
            journal.close()
            return RankRun(a, out_dir, resumed=True, finished=finished)
        if runs_bank_free(a):  # no bank, or one too small: the bank-free ranker (cli/bank_free_rank.py)
            setup, ranker = _bank_free().bank_free_setup(a, resumed)
            changes = check_resumed_prices(journal, setup, stated=a.new_prices, where=out_dir / JOURNAL_NAME) \
                if journal is not None else None
            return RankRun(a, out_dir, journal, resumed, setup, ranker, price_changes=changes)
        check_settings(a)
        setup = Setup(a, a.bank)
        ranker = rank_ranker(setup, a)
        if not resumed:
            cheapest_call_check(setup, a)
        if journal is not None and journal.header.get("bank_id") != setup.bank_ids:
            raise InputError(f"the bank changed since the run started ({journal.header.get('bank_id')} → "
                             f"{setup.bank_ids})", path=str(out_dir / JOURNAL_NAME))
        changes = check_resumed_prices(journal, setup, stated=a.new_prices, where=out_dir / JOURNAL_NAME) \
            if journal is not None else None
    except BaseException:
        if journal is not None:
            journal.close()
        raise
    return RankRun(a, out_dir, journal, resumed, setup, ranker, price_changes=changes)


def finished_report(out_dir: Path) -> dict | None:
    """The report of a run that ended (not interrupted), else None."""
    try:
        report = json.loads((out_dir / RANKING_FILE).read_text())
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) and report.get("stopped_because") != "interrupted" else None


def start_rank(r: RankRun):
    """Create the run folder, its run.json and its journal."""
    a, setup = r.settings, r.setup
    if runs_bank_free(a):
        return _bank_free().start_bank_free(r)
    settings = {k: getattr(a, k) for k in RUN_KEYS}
    settings["bank"] = [bank_reference(b) for b in a.bank] if isinstance(a.bank, list) else bank_reference(a.bank)
    settings["include_path"] = str(Path(a.include_path).resolve()) if a.include_path else None
    settings["item_field"] = setup.binding.item_field
    return start_run(r.out_dir, "rank", settings, {"command": "rank", "bank_id": setup.bank_ids,
                                                   "models": [s.name for s in setup.specs],
                                                   "task": setup.task_name, "budget_usd": a.budget_usd,
                                                   "prices": price_records(setup)},
                     setup.bank_ids)


def run_rank(r: RankRun, notes, out) -> int:
    """Rank one task live, write its results and print its report; the exit status."""
    a, setup, out_dir = r.settings, r.setup, r.out_dir
    if runs_bank_free(a):
        return _bank_free().run_bank_free(r, notes, out, print_report, exit_status)
    live = start_live_run(r, notes, lost_in_flight="not requested again")
    announce(notes, setup, a)
    with LiveProgress(notes, live, setup, enabled=not a.no_progress) as prog:
        live.on_progress = prog.update
        live.run()
    report = build_report(live, setup, a, command="rank")
    plots = write_outputs(out_dir, report, live, setup)
    print_report(out, report, verbose=a.verbose)
    out.print(f"results: {out_dir / RANKING_FILE}, {', '.join(map(str, plots))}; journal {out_dir / JOURNAL_NAME}")
    if live.interrupted:
        return 130
    return exit_status(report)


#: The exit status of a run that ranked the others but dropped a model that failed every call.
DROPPED = 3


def exit_status(report: dict) -> int:
    """0 ranked, every model with it; 3 ranked, but a model failed every call and was dropped; 1 nothing
    ranked (fewer than two models left)."""
    if not report.get("ranked"):
        return 1
    return DROPPED if report.get("failed") else 0


def combined_status(codes) -> int:
    """The exit status of several tasks' runs: 1 if any ranked nothing, else 3 if any dropped a model, else 0."""
    codes = list(codes)
    if any(c not in (0, DROPPED) for c in codes):
        return 1
    return DROPPED if DROPPED in codes else 0


def plot_file(metric: str | None) -> str:
    """The plot of a run (:data:`PLOT_FILE`), or of one metric of a several-bank run (``ranking_METRIC.png``)."""
    if metric is None:
        return PLOT_FILE
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in metric)
    return f"ranking_{safe}.png"


def write_outputs(out_dir: Path, report: dict, live, setup) -> list[Path]:
    """Write ``ranking.json`` and the plot(s); the plots' paths."""
    res = live.ranker.result()
    plots = []
    per = res.results if setup.joint else {None: res}
    for metric, r in per.items():
        rows = [x for x in (report["rankings"][metric] if metric else report)["rows"] if x["model"] in r.ranking]
        path = out_dir / plot_file(metric)
        atomic_write(path, lambda f, rows=rows, r=r, metric=metric: plot_ranking(
            f, rows, r, title=f"{setup.task_name}: adaptive ranking ({metric or setup.metric})"))
        plots.append(path)
    write_json(out_dir / RANKING_FILE, report)
    return plots


def print_misfits(console, rows) -> None:
    """One line per model the person-fit statistic flags (its scores scatter more than the bank's)."""
    for r in rows:
        note = misfit_note(r.get("person_fit"))
        if note:
            console.print(styled("misfit", "yellow", f": {r['model']}: {note}"))


def print_report(console, report: dict, *, verbose: bool = False) -> None:
    """The report of a run: the answer in plain words, its ranking (one per metric with several banks), then
    what it spent (``verbose``: the θ̂ column and why the rank and θ̂ may disagree)."""
    cost = dict(items=report.get("total_items", 0), full_run=report.get("full_run_cost_usd") or None,
                cap=report.get("budget_usd"))
    if "rankings" in report:  # one answer per metric (each ranking decides its own pairs), the cost once
        for metric, block in report["rankings"].items():
            console.print(f"On {shown(metric)}: " + answer_paragraph(
                [e["model"] for e in block["ranking"]], block.get("pairs"),
                confidence=block.get("confidence", report.get("confidence", 0.95)), spent=None, **cost),
                highlight=False)
        console.print(cost_sentence(report["total_cost_usd"], **cost), highlight=False)
    else:
        console.print(answer_paragraph([e["model"] for e in report["ranking"]], report.get("pairs"),
                                       confidence=report.get("confidence", 0.95), spent=report["total_cost_usd"],
                                       **cost), highlight=False)
    if "rankings" in report:
        for block in report["rankings"].values():
            print_ranking(console, block, judged=report.get("judge_cost_usd", 0.0) > 0, title_metric=True,
                          verbose=verbose)
    else:
        print_ranking(console, report, judged=report.get("judge_cost_usd", 0.0) > 0, verbose=verbose)
    print_dropped(console, report.get("failed") or [])
    print_spend(console, report)


def print_dropped(console, failed) -> None:
    """One line per model dropped because its calls kept failing (``ranking.json``'s ``failed``)."""
    for f in failed:
        calls = f.get("failed_calls")
        after = f" after {calls} failed call(s)" if calls is not None else ""
        console.print(styled("dropped", "red", f": {f['model']}{after}, not ranked: {f['error']}"))


def print_ranking(console, report: dict, *, judged: bool, title_metric: bool = False, verbose: bool = True) -> None:
    """One ranking's table, adjacent confidences, ties, inseparable and equivalent pairs, misfits
    (``title_metric``: the metric in the title, one of a several-bank run's)."""
    from rich.table import Table

    groups = {m: gi + 1 for gi, g in enumerate(report["tie_groups"]) for m in g}
    rows = {r["model"]: r for r in report["rows"]}
    failed = report["failed"]
    failed = [{"model": m, "error": why, "items": rows[m]["items"] if m in rows else 0,
               "cost_usd": rows[m]["cost"] if m in rows else 0.0,
               "judge_cost_usd": rows[m]["judge_cost"] if m in rows else 0.0} for m, why in failed.items()] \
        if isinstance(failed, dict) else failed
    t = Table(title=f"{report['task']}: {report.get('mode', 'adaptive')} ranking" + (f" by {report['metric']}" if title_metric else "")
              + f" (γ = {report['confidence']:.2f})")
    cols = ["rank", "ranks", "model"] + ((["mean ± half" if report.get("mode") == "bank-free" else "θ̂ ± SE"])
                                         if verbose else []) + \
        [f"est. full-task {report['metric']} [95%]", "items", "spent $"]
    cols += ["of it judge $"] if judged else []
    for c in cols + ["full run $", "tie group"]:
        t.add_column(c, justify="left" if c == "model" else "right",
                     overflow="fold" if c == "model" else "ellipsis")
    for i, e in enumerate(report["ranking"]):
        r = rows[e["model"]]
        g = groups.get(e["model"])
        t.add_row(str(i + 1), rank_range_text(e.get("rank_range")), shown(e["model"]),
                  *([f"{r['theta']:+.2f} ± {r['se']:.2f}"] if verbose else []),
                  f"{r['est']:.4f} [{r['est_lo']:.4f}, {r['est_hi']:.4f}]", str(r["items"]),
                  f"{r['cost']:.4f}", *([f"{r['judge_cost']:.4f}"] if judged else []),
                  f"{r['full_cost']:.4f}", f"T{g}" if g else "")
    for f in failed:
        t.add_row("-", "", f"{shown(f['model'])} (failed)", *([""] if verbose else []), "", str(f["items"]),
                  f"{f['cost_usd']:.4f}",
                  *([f"{f.get('judge_cost_usd', 0.0):.4f}"] if judged else []), "", "")
    console.print(t)
    note = rank_theta_note([e["model"] for e in report["ranking"]], {m: r["theta"] for m, r in rows.items()},
                           report["metric"]) if verbose else None
    if note:
        console.print(note, highlight=False)
    if not report.get("ranked", True):
        console.print(styled("no ranking", "red", f": {len(report['ranking'])} model(s) left of "
                             f"{len(report['ranking']) + len(failed)}; {len(failed)} failed"))
    else:
        if report.get("pairs"):  # the metric-scale judgement: three outcomes per pair (P(a > b) in ranking.json)
            for line in pair_lines(report["pairs"], [e["model"] for e in report["ranking"]],
                                   report.get("signature", {}).get("tie_margin")):
                console.print(line, highlight=False)
        else:
            adj = "  ".join(f"P({x['model']} > {y['model']}) = {p:.3f}" for x, y, p in
                            zip(report["ranking"], report["ranking"][1:], report["adjacent_confidence"]))
            console.print(f"adjacent pairs: {adj}")
            console.print("ties (order not settled at γ): " + "; ".join(" ≈ ".join(g) for g in report["tie_groups"])
                          if report["tie_groups"] else "ties: none — every adjacent pair is settled")
            print_inseparable(console, report.get("inseparable"))
            if report.get("equivalent"):
                margin = report.get("signature", {}).get("tie_margin")
                console.print(f"settled as ties (difference confidently within ±{margin:g}): "
                              + "; ".join(" ≈ ".join(p) for p in report["equivalent"]))
    print_misfits(console, report["rows"])


def print_spend(console, report: dict) -> None:
    """Why the run stopped, what it bought and spent, against the cap and a full run."""
    judged = report.get("judge_cost_usd", 0.0) > 0
    full = report["full_run_cost_usd"]
    spent = report["total_cost_usd"]
    cap = report["budget_usd"]
    judge = f" (judge calls ${report['judge_cost_usd']:.4f} of it)" if judged else ""
    bought = (f"generations: {report['generations']} (each scored by {', '.join(report['metrics'])})"
              if "rankings" in report else f"items: {report['total_items']}")
    console.print(f"stopped because: {report['stopped_because']}; {bought}; spent ${spent:.4f}"
                  + judge + (f" of a ${cap:g} cap" if cap is not None else "")
                  + (f"; a full run would cost ${full:.4f} ({100 * spent / full:.1f}% of it)" if full > 0 else "")
                  + f"; retries: {report['calls']['retries']}" + stop_note(report))


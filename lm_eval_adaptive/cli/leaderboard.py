"""``lm-eval-adaptive leaderboard`` (create a leaderboard from full runs), ``leaderboard render`` (its
static HTML page) and ``refresh`` (place new models live).

``refresh`` takes one leaderboard per task (``--leaderboard FILE...``), each refreshed and
reported in turn with the same new models (several leaderboards of one task, one per metric, are
refreshed together: each new model's documents generated once and scored by every board's metric) (``--add TYPE:ARGS...``, or the harness's
``--model``/``--model_args``: :mod:`.harness_options`), each under its own cap and, with
``--output DIR``, in its own run folder ``DIR/TASK``. ``--tasks``, when given, must name
exactly the leaderboards' tasks. Results go to stdout (at most 120 columns, names
whole, when it is not a terminal), the plan and progress to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
from dataclasses import replace
from pathlib import Path

from lm_eval_adaptive.cli.arguments import (
    confidence_level,
    positive_float,
    positive_int,
)
from lm_eval_adaptive.cli.harness_options import (
    add_model_arguments,
    model_specs,
    task_folder,
    task_list,
)
from lm_eval_adaptive.cli.leaderboard_page import write_page, write_plot
from lm_eval_adaptive.cli.rank import EXIT_STATUS, add_live_arguments, add_task_arguments, combined_status, resume_given
from lm_eval_adaptive.cli.report import report_console
from lm_eval_adaptive.data.files import check_outputs
from lm_eval_adaptive.display import shown
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.cli.live_output import print_leaderboard
from lm_eval_adaptive.cli.refresh import refresh
from lm_eval_adaptive.live.leaderboard import REFRESH_KEYS, create_leaderboard, history_beside, load_leaderboard
from lm_eval_adaptive.live.session import LiveSettings, open_run, resumed_settings
from lm_eval_adaptive.live.stopping_policy import LIVE_MIN_ITEMS
from lm_eval_adaptive.writer_lock import board_lock

__all__ = ["add_leaderboard_parsers", "cmd_leaderboard", "cmd_refresh", "cmd_render", "refresh_settings"]


def cmd_refresh(args) -> int:
    notes = report_console(stderr=True)  # plan, progress, notes
    out = report_console()  # the new leaderboard
    # a resume's settings from its journal (resolved once, here); every run folder is checked (a journal
    # there is refused) before the first refresh; each leaderboard, its bank and prices are checked as its
    # refresh starts
    runs = [resumed_settings(settings, REFRESH_KEYS, command="refresh") for settings in refresh_settings(args)]
    opened = [open_run(settings, required=False) for settings in runs]
    status = []
    for k, (settings, (out_dir, journal, resumed)) in enumerate(zip(runs, opened)):
        try:
            with board_locks(settings):  # the boards are read and written back by this refresh alone
                code = refresh(settings, notes, out_dir, journal, resumed, report=out)
        except InputError:
            if k:
                notes.print("refreshed before this error: " + ", ".join(_named(r.leaderboard) for r in runs[:k]))
            raise
        finally:
            if journal is not None:
                journal.close()
        if code == 130:
            if runs[k + 1:]:
                notes.print("not refreshed: " + ", ".join(_named(r.leaderboard) for r in runs[k + 1:]))
            return 130
        status.append(code)
    return combined_status(status)


def board_locks(settings: LiveSettings) -> contextlib.ExitStack:
    """The writer locks of the leaderboards a refresh reads and writes back (none for a dry run, which
    writes none), taken now: another process writing one of them is refused before it is read."""
    stack = contextlib.ExitStack()
    given = settings.leaderboard
    paths = given if isinstance(given, (list, tuple)) else [given] if given else []
    if settings.dry_run:
        return stack
    try:
        for p in dict.fromkeys(Path(x).resolve() for x in paths):
            if p.is_file():  # a missing board is refused as it is read
                stack.enter_context(board_lock(p))
    except BaseException:
        stack.close()
        raise
    return stack


def _named(boards) -> str:
    return " + ".join(map(str, boards)) if isinstance(boards, list) else str(boards)


def refresh_settings(args) -> list[LiveSettings]:
    """One :class:`LiveSettings` per leaderboard to refresh (in ``--tasks`` order when given)."""
    values = dict(vars(args))
    values["add"] = model_specs(args.add, args.model, args.model_args, flag="--add", device=args.device,
                                batch_size=args.batch_size)
    boards = list(args.leaderboard or [])
    values["leaderboard"] = boards[0] if boards else None
    given = None
    if args.resume:
        given = resume_given(args, values, REFRESH_KEYS)
        if explicit_add(args):
            given["add"] = values["add"]
        if "leaderboard" in given:
            given["leaderboard"] = boards
    base = LiveSettings.from_mapping(values, given=given)
    tasks = task_list(args.tasks)
    if args.resume or (len(boards) <= 1 and not tasks):
        return [base]  # one leaderboard (refresh checks it), or a run folder to resume
    if not boards:
        raise InputError("--leaderboard FILE...: the leaderboard of each task to refresh")
    task_of: dict[str, list] = {}  # task -> its leaderboards (several: one per metric, refreshed together)
    for b in boards:
        task_of.setdefault(str(load_leaderboard(b)["task"]), []).append(b)
    if tasks and set(tasks) != set(task_of):
        raise InputError(f"--tasks {','.join(tasks)}: the leaderboards are of task(s) {', '.join(task_of)}; "
                         f"each task needs its own leaderboard (--leaderboard FILE...)")
    order = tasks or list(task_of)

    def boards_of(t):
        return task_of[t][0] if len(task_of[t]) == 1 else list(task_of[t])

    if len(order) == 1:
        return [replace(base, leaderboard=boards_of(order[0]))]
    return [replace(base, leaderboard=boards_of(t),
                    output=str(task_folder(args.output, t)) if args.output else None) for t in order]


def explicit_add(args) -> bool:
    return bool(set(getattr(args, "explicit", ()) or ()) & {"add", "model", "model_args"})


def cmd_leaderboard(args) -> int:
    missing = [f"--{k}" for k in ("task", "metric", "out") if not getattr(args, k)]
    if missing:  # not argparse-required: `leaderboard render` needs none of them
        raise InputError(f"leaderboard: the following arguments are required: {', '.join(missing)}")
    history_out = history_beside(args.out) if args.samples else None  # the scores of --samples, written beside it
    check_outputs([("--out", args.out), ("--out (its history table)", history_out)],
                  inputs=[args.history, *(args.samples or [])])  # before any work
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with board_lock(args.out):  # not while a refresh writes it
        lb = create_leaderboard(args.history, task=args.task, metric=args.metric, models=args.models,
                                item_field=args.item_field, confidence=args.confidence, out=args.out,
                                samples=args.samples)
    print_leaderboard(report_console(), lb, {}, {}, verbose=args.verbose)
    return 0


def cmd_render(args) -> int:
    if not args.html and not args.plot:
        raise InputError("leaderboard render: give --html FILE (the page) and/or --plot FILE.png (its plot)")
    check_outputs([("--html", args.html), ("--plot", args.plot)], inputs=[args.board])  # before the board is read
    if args.html:
        print(f"wrote {shown(write_page(args.board, args.html))}")
    if args.plot:
        print(f"wrote {shown(write_plot(args.board, args.plot))}")
    return 0


def add_leaderboard_parsers(sub) -> None:

    c = sub.add_parser("leaderboard", help="create a leaderboard file from full runs (a response table)",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog="example:\n  " + 'lm-eval-adaptive leaderboard --history wmt24/en-de/bleu --task wmt24_en-de --metric bleu --out board.json'
                               "\n  lm-eval-adaptive leaderboard render board.json --html board.html   # its page")
    c.add_argument("--history", default=None, metavar="TABLE",
                   help="response table of the full runs (file, or a named table such as wmt24/en-de/bleu)")
    c.add_argument("--samples", nargs="+", default=None, metavar="PATH",
                   help="or the harness sample logs of the full runs (run --log_samples); their scores "
                        "are written beside the leaderboard as NAME.history.csv.gz")
    c.add_argument("--task", help="the harness task the scores are of (required)")
    c.add_argument("--metric", help="the per-document metric (required)")
    c.add_argument("--models", nargs="+", default=None, help="entries to take (default: every model)")
    c.add_argument("--item-field", default=None, metavar="FIELD",
                   help="document field holding the table's item ids (default: the named table's field, "
                        "id for wmt24/... and alpaca_eval/...; else the harness doc_id)")
    c.add_argument("--confidence", type=float, default=0.95)
    c.add_argument("--verbose", action="store_true",
                   help="also show each entry's ability θ̂ ± SE and why the rank may disagree with it")
    c.add_argument("--out", help="the leaderboard JSON to write (required)")
    c.set_defaults(func=cmd_leaderboard)
    page = c.add_subparsers(dest="leaderboard_command", metavar="{render}", title="subcommands")
    p = page.add_parser("render", help="write the leaderboard's page: one static HTML file",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        description="One self-contained HTML file (nothing is fetched when it is viewed): the\n"
                                    "ranking with each model's metric and interval, θ̂ ± SE and 95% interval, tie\n"
                                    "group, items and dollars; the tie groups; the bank's id and the board's\n"
                                    "signature; the refreshes; the plot of the intervals.",
                        epilog="example:\n  lm-eval-adaptive leaderboard --history wmt24/en-de/bleu --task wmt24_en-de "
                               "--metric bleu --out board.json\n"
                               "  lm-eval-adaptive leaderboard render board.json --html board.html --plot board.png")
    p.add_argument("board", help="the leaderboard JSON (from `leaderboard` or `refresh`)")
    p.add_argument("--html", default=None, metavar="FILE", help="the page to write")
    p.add_argument("--plot", default=None, metavar="FILE.png",
                   help="also (or only) write the page's plot as a PNG: each model's θ̂ with its 95%% "
                        "interval, one colour per tie group")
    p.set_defaults(func=cmd_render)

    r = sub.add_parser("refresh", help="place new models on a leaderboard adaptively within a dollar cap",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog=REFRESH_EXAMPLES)
    r.add_argument("--leaderboard", nargs="+", action="extend", metavar="FILE",
                   help="the leaderboard to refresh; several (one per task) are refreshed and reported in turn; "
                        "several of one task (one per metric, the same full runs) are refreshed together, each "
                        "document generated once and scored by every board's metric")
    r.add_argument("--add", nargs="+", action="extend", metavar="SPEC",
                   help="new harness models, TYPE:ARGS (or NAME=TYPE:ARGS); or --model/--model_args below")
    r.add_argument("--tasks", nargs="+", action="extend", metavar="TASK",
                   help="the tasks to refresh (space- or comma-separated): exactly the leaderboards' tasks, "
                        "refreshed in this order (default: the leaderboards' order)")
    r.add_argument("--budget-usd", type=positive_float, default=None, metavar="USD",
                   help="hard cap on the refresh's spend (of each leaderboard's, with several)")
    r.add_argument("--confidence", type=confidence_level, default=None, help="γ (default: the leaderboard's)")
    r.add_argument("--settle-share", type=positive_float, default=None, metavar="S",
                   help="stop buying for a pair once settling it would take the run past this share of a full "
                        "run (default 0.1, as rank; the budget cap still holds)")
    r.add_argument("--min-items", type=positive_int, default=None,
                   help=f"items every new model answers before the run may stop (default {LIVE_MIN_ITEMS}, "
                        "or --max-items when that is fewer)")
    r.add_argument("--max-items", type=positive_int, default=None)
    r.add_argument("--output", "--output_path", dest="output", default=None, metavar="DIR",
                   help="keep the run's settings and journal here (then --resume DIR continues a crashed run); "
                        "DIR/TASK with several leaderboards")
    r.add_argument("--resume", default=None, metavar="DIR",
                   help="continue the refresh journaled in DIR (with several leaderboards: DIR/TASK, one at a time)")
    r.add_argument("--seed", type=int, default=0)
    add_model_arguments(r, adds_to="--add")
    add_task_arguments(r)
    add_live_arguments(r)
    r.set_defaults(func=cmd_refresh)


REFRESH_EXAMPLES = """\
example:
  lm-eval-adaptive refresh --leaderboard board.json --add litellm:model=openai/Mistral-Large --budget-usd 0.3 \\
      --include_path task_configs --apply_chat_template
  # the harness's spelling; two leaderboards (one per task), each with a $0.3 cap, refreshed in turn
  lm-eval-adaptive refresh --leaderboard ende.json enes.json --tasks wmt24_en-de,wmt24_en-es \\
      --model litellm --model_args model=openai/Mistral-Large --budget-usd 0.3 \\
      --include_path task_configs --apply_chat_template --output_path runs/refresh1

""" + "\n".join(["exit status:", *EXIT_STATUS])

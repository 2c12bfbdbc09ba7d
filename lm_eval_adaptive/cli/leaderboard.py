"""``lm-eval-adaptive leaderboard`` (create a leaderboard from full runs), ``leaderboard render`` (its page)
and ``refresh`` (place new models live)."""

from __future__ import annotations

import argparse

from lm_eval_adaptive.cli.arguments import (
    confidence_level,
    positive_float,
    positive_int,
)
from lm_eval_adaptive.cli.leaderboard_page import write_page
from lm_eval_adaptive.cli.rank import add_live_arguments, add_task_arguments
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.live.leaderboard import (
    REFRESH_KEYS,
    create_leaderboard,
    print_leaderboard,
    refresh,
)
from lm_eval_adaptive.live.session import LiveSettings, open_run

__all__ = ["cmd_leaderboard", "cmd_refresh", "cmd_render", "add_leaderboard_parsers"]


def cmd_refresh(args) -> int:
    from rich.console import Console

    console = Console(stderr=True)
    settings = LiveSettings.from_mapping(vars(args))
    out_dir, journal, resumed = open_run(settings, REFRESH_KEYS, command="refresh", required=False)
    try:
        return refresh(settings, console, out_dir, journal, resumed)
    finally:
        if journal is not None:
            journal.close()


def cmd_leaderboard(args) -> int:
    from rich.console import Console

    missing = [f"--{k}" for k in ("task", "metric", "out") if not getattr(args, k)]
    if missing:  # not argparse-required: `leaderboard render` needs none of them
        raise InputError(f"leaderboard: the following arguments are required: {', '.join(missing)}")
    lb = create_leaderboard(args.history, task=args.task, metric=args.metric, models=args.models,
                            item_field=args.item_field, confidence=args.confidence, out=args.out,
                            samples=args.samples)
    print_leaderboard(Console(stderr=True), lb, {}, {})
    return 0


def cmd_render(args) -> int:
    print(f"wrote {write_page(args.board, args.html)}")
    return 0


def add_leaderboard_parsers(sub) -> None:

    c = sub.add_parser("leaderboard", help="create a leaderboard file from full runs (a response table)",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog="example:\n  " + 'lm-eval-adaptive leaderboard --history wmt24/en-de/bleu --task wmt24_en-de --metric bleu --item-field id --out board.json'
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
                   help="document field holding the table's item ids (default: the harness doc_id)")
    c.add_argument("--confidence", type=float, default=0.95)
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
                               "--metric bleu --item-field id --out board.json\n"
                               "  lm-eval-adaptive leaderboard render board.json --html board.html")
    p.add_argument("board", help="the leaderboard JSON (from `leaderboard` or `refresh`)")
    p.add_argument("--html", required=True, metavar="FILE", help="the page to write")
    p.set_defaults(func=cmd_render)

    r = sub.add_parser("refresh", help="place new models on a leaderboard adaptively within a dollar cap",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog="example:\n  " + 'lm-eval-adaptive refresh --leaderboard board.json --add litellm:model=openai/Mistral-Large --budget-usd 0.3 \\\n      --include_path task_configs --apply_chat_template')
    r.add_argument("--leaderboard", metavar="FILE")
    r.add_argument("--add", nargs="+", metavar="SPEC", help="new harness models, TYPE:ARGS (or NAME=TYPE:ARGS)")
    r.add_argument("--budget-usd", type=positive_float, default=None, metavar="USD",
                   help="hard cap on the refresh's spend")
    r.add_argument("--confidence", type=confidence_level, default=None, help="γ (default: the leaderboard's)")
    r.add_argument("--min-items", type=positive_int, default=10)
    r.add_argument("--max-items", type=positive_int, default=None)
    r.add_argument("--output", default=None, metavar="DIR",
                   help="keep the run's settings and journal here (then --resume DIR continues a crashed run)")
    r.add_argument("--resume", default=None, metavar="DIR", help="continue the refresh journaled in DIR")
    r.add_argument("--seed", type=int, default=0)
    add_task_arguments(r)
    add_live_arguments(r)
    r.set_defaults(func=cmd_refresh)

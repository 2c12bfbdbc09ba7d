"""``run --adaptive``'s checks that need no task loaded, made before the harness's parser is built.

The full ``run`` path imports lm-eval's task index and ``datasets`` (about a second) and the command
line's other modules (another second) before the first check. :func:`refuse_before_parsing` reads
the few options these checks need (``--tasks``, ``--model``/``--model_args``, ``--include_path``,
``--output_path``, ``--bank``, ``--metric``, ``--price``, ``--device``, ``--plot``, ``--dry-run``) with a parser of
its own, spelled as the harness and :mod:`lm_eval_adaptive.cli.run` spell them, and makes the checks
the full path makes, in its order, with its functions: :func:`check_display_options`,
:func:`check_run_outputs`, then :func:`~lm_eval_adaptive.harness.run_checks.check_before_loading`
(banks, the task's metric, the model's price). A bad input is thus refused with the message the full
path gives, in about a second. Whatever this parser cannot read the same way (``--help``, a
``--config`` file, a command line it cannot parse, no ``--model``) is left to the full path, which
makes every check again.
"""

from __future__ import annotations

import argparse
import sys

from lm_eval_adaptive.cli.arguments import accept_both_spellings
from lm_eval_adaptive.cli.harness_options import refuse_spaced_pairs
from lm_eval_adaptive.data.files import check_output_folder, check_outputs
from lm_eval_adaptive.display import shown
from lm_eval_adaptive.errors import InputError

__all__ = ["refuse_before_parsing", "check_display_options", "check_run_outputs", "refused"]


def check_display_options(adaptive: bool, dry_run: bool, plot) -> None:
    """Refuse ``--dry-run`` or ``--plot`` without ``--adaptive``, and ``--plot`` with ``--dry-run``."""
    if not adaptive:
        if dry_run:
            raise InputError("--dry-run forecasts an adaptive run: add --adaptive")
        if plot:
            raise InputError("--plot draws an adaptive run: add --adaptive")
    elif dry_run and plot:
        raise InputError("--plot draws an adaptive run; --dry-run makes none")


def check_run_outputs(harness: argparse.Namespace, plot=None) -> None:
    """Refuse, before any model is built or called, an ``--output_path`` (a folder, or a results
    ``.json`` file as the harness takes it) or ``--plot`` that cannot be written."""
    out = getattr(harness, "output_path", None)
    if out:
        if str(out).endswith((".json", ".jsonl")):
            check_outputs([("--output_path", out)])
        else:
            check_output_folder(out, "--output_path")
    check_outputs([("--plot", plot)])


class _Unreadable(Exception):
    """The early parser cannot read this command line: the full path will."""


class _EarlyParser(argparse.ArgumentParser):
    def error(self, message):  # never print or exit: leave the command line to the full parser
        raise _Unreadable(message)


def _early_parser() -> argparse.ArgumentParser:
    # the harness's own actions: --tasks and --model_args are read exactly as its `run` reads them
    from lm_eval._cli.utils import MergeDictAction, SplitArgs  # noqa: PLC0415 - tens of ms, no task index

    p = _EarlyParser(add_help=False, allow_abbrev=False)
    p.add_argument("-h", "--help", action="store_true")
    p.add_argument("--config", "-C", default=None)
    p.add_argument("--tasks", "-t", nargs="+", action=SplitArgs, default=None)
    p.add_argument("--model", "-M", default=None)
    p.add_argument("--model_args", "-a", nargs="+", action=MergeDictAction, default=None)
    p.add_argument("--include_path", default=None)
    p.add_argument("--device", default=None)
    p.add_argument("--output_path", "-o", default=None)
    p.add_argument("--adaptive", action="store_true")
    p.add_argument("--bank", nargs="+", default=None)
    p.add_argument("--metric", default=None)
    p.add_argument("--price", nargs="+", action="extend", default=None)
    p.add_argument("--plot", default=None)
    p.add_argument("--dry-run", dest="dry_run", action="store_true")
    return accept_both_spellings(p)


def refuse_before_parsing(run_argv: list) -> None:
    """Make ``run --adaptive``'s checks that need no task loaded on ``run_argv`` (the arguments after
    ``run``); raise the :class:`~lm_eval_adaptive.errors.InputError` the full path would raise first.
    Returns without a word when the command is not an adaptive run or cannot be read here."""
    argv = [str(a) for a in run_argv]
    if "--adaptive" not in argv:
        return
    try:
        args, _ = _early_parser().parse_known_args(argv)
    except _Unreadable:
        return
    if args.help or args.config or not args.model:  # help, a YAML config, the harness's default model
        return
    if isinstance(args.model_args, dict):  # the harness separates them by commas only
        refuse_spaced_pairs("--model_args", ",".join(f"{k}={v}" for k, v in args.model_args.items()),
                            args.model_args.values())
    check_display_options(args.adaptive, args.dry_run, args.plot)
    check_run_outputs(args, args.plot)
    from lm_eval_adaptive.harness.run_checks import check_before_loading  # noqa: PLC0415 - after the cheap checks

    check_before_loading(args.tasks, args.include_path, args.model, args.model_args, banks=args.bank,
                         metric=args.metric, prices=args.price, device=args.device)


def refused(e: InputError) -> int:
    """Print the one ``error:`` line every command gives for bad input (names shown escaped) on stderr;
    return the exit status 2."""
    print(f"error: {shown(e, lines=True)}", file=sys.stderr)
    return 2

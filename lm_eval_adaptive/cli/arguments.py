"""Argument types that refuse bad values while the command line is parsed.

Each is an ``argparse`` ``type=``: a bad value becomes the parser's usual one-line error
(``error: argument --max-attempts: must be an integer >= 1, got '0'``, exit 2) before any
file is read or written.
"""

from __future__ import annotations

import argparse
import math

__all__ = ["accept_both_spellings", "add_redact_argument", "explicit_options", "add_family_wise_argument", "add_tie_margin_argument", "guessing_value", "int_at_least", "positive_int", "nonnegative_int", "positive_float", "nonnegative_float",
           "open_unit_interval", "confidence_level"]


def int_at_least(lo: int):
    """An integer >= ``lo``."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {lo}, got {text!r}") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"must be an integer >= {lo}, got {text!r}")
        return v

    parse.__name__ = f"integer >= {lo}"
    return parse


positive_int = int_at_least(1)
nonnegative_int = int_at_least(0)


def _float(text: str, ok, what: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
    if not (math.isfinite(v) and ok(v)):
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
    return v


def positive_float(text: str) -> float:
    """A finite number > 0."""
    return _float(text, lambda v: v > 0, "a finite number > 0")


def nonnegative_float(text: str) -> float:
    """A finite number >= 0."""
    return _float(text, lambda v: v >= 0, "a finite number >= 0")


def open_unit_interval(text: str) -> float:
    """A number strictly between 0 and 1."""
    return _float(text, lambda v: 0 < v < 1, "a number between 0 and 1 (exclusive)")


def guessing_value(text: str) -> float:
    """A 3PL guessing chance c: a number in [0, 1)."""
    return _float(text, lambda v: 0 <= v < 1, "a guessing chance in [0, 1)")


def confidence_level(text: str) -> float:
    """γ: a number strictly between 0.5 and 1."""
    return _float(text, lambda v: 0.5 < v < 1, "a confidence level between 0.5 and 1 (exclusive)")


def add_tie_margin_argument(parser) -> None:
    """``--tie-margin DELTA`` (a parser or an argument group): the equivalence margin of a ranking."""
    parser.add_argument("--tie-margin", type=positive_float, default=None, metavar="DELTA",
                        help="settle a pair as equivalent once the interval of its difference at --confidence "
                             "lies within ±DELTA (the metric's units, e.g. 0.01 BLEU on a 0-1 scale; "
                             "default: none)")


def add_family_wise_argument(parser) -> None:
    """``--family-wise`` (a parser or an argument group): confidence γ for the whole ranking."""
    parser.add_argument("--family-wise", action="store_true",
                        help="hold the whole ranking at γ, not each pair: the chance that any reported order "
                             "is wrong stays under 1-γ (Holm over every pair of the ranking; costs items)")


def add_redact_argument(parser, dest: str = "redact") -> None:
    """``--redact VALUE`` (repeatable; a parser or an argument group): a value removed from every output.

    The command line is read for it before it is parsed (``lm_eval_adaptive.cli.main``), so the value
    never shows, not even in a parse error; the argument here documents it and keeps the parser from
    refusing it."""
    parser.add_argument("--redact", dest=dest, action="append", default=None, metavar="VALUE",
                        help="a secret to remove from every output (files, stdout, stderr), repeatable; "
                             "also LM_EVAL_ADAPTIVE_REDACT=V1,V2. Keys, tokens and passwords in --model_args, "
                             "model specs, URLs and secret-named environment variables are removed anyway")


def accept_both_spellings(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Let every long option of ``parser`` and its subcommands be spelled with ``-`` or ``_`` between
    words, as lm-eval spells its own (``--se_target`` and ``--se-target`` alike, ``--output_path`` and
    ``--output-path``). An alias is added only where no option owns that spelling already, and not to the
    help (which shows each option once, as defined). Returns ``parser``."""
    def walk(p: argparse.ArgumentParser) -> None:
        known = p._option_string_actions
        for action in p._actions:
            for opt in action.option_strings:
                if opt.startswith("--") and len(opt) > 2:
                    for alt in ("--" + opt[2:].replace("-", "_"), "--" + opt[2:].replace("_", "-")):
                        known.setdefault(alt, action)
            if isinstance(action.choices, dict):  # subcommands
                for sub in action.choices.values():
                    if isinstance(sub, argparse.ArgumentParser):
                        walk(sub)

    walk(parser)
    return parser


def explicit_options(parser: argparse.ArgumentParser, argv) -> set[str]:
    """The destinations ``argv`` sets explicitly (a flag given with its default value included).

    ``argv`` is parsed again by ``parser``, a freshly built parser that this changes: every default
    of it and its subcommands is suppressed, so only what the command line set lands in the namespace.
    """
    def suppress(p: argparse.ArgumentParser) -> None:
        for action in p._actions:
            action.default = argparse.SUPPRESS
            if isinstance(action.choices, dict):  # subcommands
                for sub in action.choices.values():
                    if isinstance(sub, argparse.ArgumentParser):
                        suppress(sub)

    suppress(parser)
    return {k for k, v in vars(parser.parse_args(list(argv))).items() if v is not argparse.SUPPRESS}

"""lm-eval's spellings accepted everywhere: every long option with ``-`` or ``_`` between its words
(issue 30: adaptive flags were hyphenated beside the harness's underscored ones on one command line)."""

from __future__ import annotations

import argparse

import pytest

from lm_eval_adaptive.cli.arguments import accept_both_spellings
from lm_eval_adaptive.cli.main import build_parser


def long_options(parser: argparse.ArgumentParser, path=()):
    """(subcommand path, option string, action) for every long option of ``parser`` and its subcommands."""
    for action in parser._actions:
        for opt in action.option_strings:
            if opt.startswith("--"):
                yield path, opt, action
        if isinstance(action.choices, dict):
            for name, sub in action.choices.items():
                if isinstance(sub, argparse.ArgumentParser):
                    yield from long_options(sub, path + (name,))


@pytest.mark.parametrize("with_run", [False, True])
def test_every_long_option_takes_both_spellings(with_run):
    parser = build_parser(with_run=with_run)
    seen = 0
    for path, opt, action in long_options(parser):
        p = parser
        for name in path:
            p = next(a for a in p._actions if isinstance(a.choices, dict)).choices[name]
        for alt in ("--" + opt[2:].replace("-", "_"), "--" + opt[2:].replace("_", "-")):
            owner = p._option_string_actions.get(alt)
            assert owner is not None, f"{' '.join(path)} {opt}: {alt} is not accepted"
            seen += owner is action
    assert seen > 100  # the check ran over the commands' options (rank, run, backtest, ...)


def test_both_spellings_set_the_same_value():
    parser = build_parser(with_run=True)
    a = parser.parse_args(["run", "--model", "hf", "--tasks", "x", "--adaptive", "--se_target", "0.3",
                           "--max_items", "40", "--budget_usd", "1.5", "--batch_size_adaptive", "2"])
    b = parser.parse_args(["run", "--model", "hf", "--tasks", "x", "--adaptive", "--se-target", "0.3",
                           "--max-items", "40", "--budget-usd", "1.5", "--batch-size-adaptive", "2"])
    assert vars(a) == vars(b)
    assert (a.adaptive_se_target, a.adaptive_max_items, a.adaptive_budget_usd, a.adaptive_batch_size) == (0.3, 40, 1.5, 2)
    r = build_parser().parse_args(["rank", "--models", "a:x", "b:y", "--tasks", "t", "--budget_usd", "2",
                                   "--min_items", "12", "--tie_margin", "0.01"])
    assert (r.budget_usd, r.min_items, r.tie_margin) == (2.0, 12, 0.01)


def test_an_existing_spelling_is_never_taken_over():
    p = argparse.ArgumentParser()
    p.add_argument("--a-b", dest="hyphen")
    p.add_argument("--a_b", dest="underscore")
    accept_both_spellings(p)
    ns = p.parse_args(["--a-b", "1", "--a_b", "2"])
    assert (ns.hyphen, ns.underscore) == ("1", "2")


def test_help_shows_each_option_once():
    p = build_parser()
    rank = next(a for a in p._actions if isinstance(a.choices, dict)).choices["rank"]
    help_text = rank.format_help()
    assert "--budget-usd" in help_text and "--budget_usd" not in help_text

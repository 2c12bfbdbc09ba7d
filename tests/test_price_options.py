"""One --price syntax and one price resolution for run, rank and refresh."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from lm_eval_adaptive.cli.main import build_parser
from lm_eval_adaptive.data.price_map import model_price, parse_prices
from lm_eval_adaptive.errors import InputError

REPO = Path(__file__).resolve().parents[1]


def test_price_values_are_model_in_out():
    p = parse_prices(["org/m=0.5,1.5", "GPT-4=30,60"])
    assert p["org/m"].input_per_mtok == pytest.approx(0.5) and p["org/m"].output_per_mtok == pytest.approx(1.5)
    assert p["GPT-4"].source == "--price"
    for bad in ("gpt=1", "=1,2", "m=1,2,3", "m=-1,2", "m=nan,1", "1,2"):
        with pytest.raises(InputError, match="MODEL=IN,OUT"):
            parse_prices([bad])
    # run's single model may be priced with a bare IN,OUT
    assert parse_prices(["1,3"], bare="openai/X")["openai/X"].output_per_mtok == pytest.approx(3)
    assert set(parse_prices(["1,3", "judge=0.1,0.2"], bare="openai/X")) == {"openai/X", "judge"}


@pytest.mark.parametrize("argv", [
    ["rank", "--price", "a=1,2", "b=3,4"],
    ["rank", "--price", "a=1,2", "--price", "b=3,4"],
    ["refresh", "--price", "a=1,2", "b=3,4"],
])
def test_rank_and_refresh_take_a_list_and_repeats(argv):
    args = build_parser().parse_args(argv)
    assert args.price == ["a=1,2", "b=3,4"]


def test_run_takes_the_same_list():
    args = build_parser(with_run=True).parse_args(["run", "--model", "litellm", "--tasks", "t", "--price", "1,2",
                                                   "j=3,4", "--price", "k=5,6"])
    assert args.adaptive_price == ["1,2", "j=3,4", "k=5,6"]


def test_model_price_order():
    over = parse_prices(["GPT-4=1,2"])
    assert model_price("openai/GPT-4", overrides=over).source == "--price"  # by the id without its prefix
    assert model_price("openai/x", name="GPT-4", overrides=over).source == "--price"  # by the name
    assert model_price("openai/gpt-4o-mini").source == "litellm:gpt-4o-mini"  # litellm, prefix dropped
    assert model_price("gpt-4o-mini").source == "litellm:gpt-4o-mini"
    assert model_price("openai/GPT-4").source == "litellm:gpt-4"  # a known WMT24 system
    assert model_price("openai/x", name="Claude-3.5").source.startswith("litellm:anthropic.claude-3-5")
    with pytest.raises(InputError, match=r"no known price for model 'Nope' \(openai/Nope\).*--price Nope=IN,OUT"):
        model_price("openai/Nope", name="Nope")
    assert model_price("openai/Nope", default=over["GPT-4"]) is over["GPT-4"]


def test_one_price_parser_and_resolver_in_the_package():
    """The live commands price models through data/price_map only (tables keep price_for by system name)."""
    live = ["harness/run.py", "harness/judge_pricing.py", "harness/task_loop.py", "live/session.py",
            "live/leaderboard.py", "cli/rank.py", "cli/leaderboard.py", "cli/run.py"]
    for rel in live:
        tree = ast.parse((REPO / "lm_eval_adaptive" / rel).read_text())
        defs = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        assert not defs & {"parse_prices", "price_of", "_price", "model_price"}, rel
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        assert "price_for" not in names, rel

"""One --price syntax and one price resolution for run, rank and refresh."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from lm_eval_adaptive.cli.main import build_parser
from lm_eval_adaptive.data.price_map import LOCAL_SOURCE, model_price, parse_prices, price_policy, resolve_prices
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


def test_a_local_model_is_free_unless_priced_and_an_api_model_still_refuses():
    """Issue 30 item 3: an in-process model (hf, vllm, ...) buys nothing; an HTTP model (litellm, openai-*,
    local-completions, which may be a paid proxy) needs a price."""
    free = resolve_prices([("tiny", "/m/tiny", "hf"), ("v", "org/v", "vllm")], price_policy(None))
    assert {p.source for p in free.values()} == {LOCAL_SOURCE}
    assert all(p.input_per_token == p.output_per_token == 0 for p in free.values())
    priced = resolve_prices([("tiny", "/m/tiny", "hf")], price_policy(["tiny=1,2", "default=5,5"]))
    assert priced["tiny"].source == "--price" and priced["tiny"].output_per_mtok == pytest.approx(2)
    assert resolve_prices([("tiny", "/m/tiny", "hf")], price_policy(["default=5,5"]))["tiny"].source == LOCAL_SOURCE
    for mtype in ("litellm", "openai-chat-completions", "local-completions", "local-chat-completions"):
        with pytest.raises(InputError, match=r"no known price for model Nope \(openai/Nope\).*--price Nope=IN,OUT"):
            resolve_prices([("tiny", "/m/tiny", "hf"), ("Nope", "openai/Nope", mtype)], price_policy(None))


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


# ------------------------------------------------------------------ one price policy (issue 23 item 1)
FOUR = [("openai/Gemini-1.5-Pro", "openai/Gemini-1.5-Pro"), ("openai/Llama3-70B", "openai/Llama3-70B"),
        ("openai/Aya23", "openai/Aya23"), ("openai/Unbabel-Tower70B", "openai/Unbabel-Tower70B")]


def test_every_unpriced_model_is_named_in_one_error_with_the_price_line_to_add():
    from lm_eval_adaptive.data.price_map import price_policy, resolve_prices

    with pytest.raises(InputError) as e:
        resolve_prices([("GPT-4", "openai/GPT-4"), *FOUR], price_policy([]))
    msg = str(e.value)
    assert "4 models" in msg and "openai/GPT-4" not in msg  # the priced one is not named
    line = "--price " + " ".join(f"{n}=IN,OUT" for n, _ in FOUR)
    assert line in msg  # the exact line to add, every model in it
    assert "--price default=IN,OUT" in msg
    # one model: the same form
    with pytest.raises(InputError, match=r"--price openai/Aya23=IN,OUT"):
        resolve_prices([FOUR[2]], price_policy(["openai/Gemini-1.5-Pro=1,2"]))


def test_an_explicit_default_prices_the_rest_and_says_which():
    from lm_eval_adaptive.data.price_map import DEFAULT_SOURCE, price_policy, priced_by_default, resolve_prices

    policy = price_policy(["default=2,6", "openai/Aya23=0.5,1"])
    assert policy.default.input_per_mtok == pytest.approx(2) and policy.default.source == DEFAULT_SOURCE
    assert "default" not in policy.overrides
    prices = resolve_prices([("GPT-4", "openai/GPT-4"), *FOUR], policy)
    assert prices["GPT-4"].source == "litellm:gpt-4"
    assert prices["openai/Aya23"].source == "--price" and prices["openai/Aya23"].output_per_mtok == pytest.approx(1)
    assert priced_by_default(prices) == ["openai/Gemini-1.5-Pro", "openai/Llama3-70B", "openai/Unbabel-Tower70B"]
    assert prices["openai/Llama3-70B"].output_per_mtok == pytest.approx(6)
    with pytest.raises(InputError, match="MODEL=IN,OUT"):
        price_policy(["default=1"])


def test_litellm_prices_are_read_without_importing_litellm():
    """The price map is litellm's bundled JSON, read directly (importing litellm takes seconds), and it
    gives every id litellm itself gives, at the same price."""
    import subprocess
    import sys

    code = ("import sys; from lm_eval_adaptive.data.price_map import litellm_price as p; "
            "assert p('gpt-4o-mini') is not None and p('openai/Aya23') is None; print('litellm' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**__import__("os").environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "False"

    import litellm

    from lm_eval_adaptive.data.price_map import bundled_price_map

    direct = bundled_price_map()
    assert direct is not None

    def priced(entry):
        return (entry.get("input_cost_per_token"), entry.get("output_cost_per_token"))

    assert {k: priced(v) for k, v in direct.items() if isinstance(v, dict)} == \
        {k: priced(v) for k, v in litellm.model_cost.items() if isinstance(v, dict)}

"""Tests for lm_eval_adaptive.data.prices (fast, offline)."""

from __future__ import annotations

import os

# litellm must read its bundled price map, never the network: set before anything imports it.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from lm_eval_adaptive.data import price_map, prices  # noqa: E402
from lm_eval_adaptive.data.price_map import (  # noqa: E402
    SNAPSHOT_PRICES,
    SNAPSHOT_SOURCE,
    SYSTEM_TO_LITELLM,
    litellm_price,
    load_costs_file,
    model_price,
    price_for,
)
from lm_eval_adaptive.data.prices import DEFAULT_PRICE, Price, uniform_prices  # noqa: E402
from lm_eval_adaptive.errors import InputError  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def model_cost():
    """The price map prices are read from: litellm's bundled map, read without importing litellm
    (tests/test_price_options.py checks it is litellm.model_cost, id for id)."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    from lm_eval_adaptive.data.price_map import bundled_price_map

    return bundled_price_map()


# --------------------------------------------------------------------------- Price


def test_item_costs_hand_computed():
    price = Price.per_million(1.0, 3.0, "test")
    # 1000 input tokens at $1/M + 500 output tokens at $3/M = $0.001 + $0.0015
    got = price.item_costs(np.array([1000.0]), np.array([500.0]))
    assert got.shape == (1,)
    assert got[0] == pytest.approx(0.0025, rel=1e-12)


def test_item_costs_vectorised():
    price = Price(2e-6, 8e-6, "test")
    inp = np.array([0, 10, 1_000_000, 250])
    out = np.array([0, 5, 0, 1000])
    expected = [0.0, 10 * 2e-6 + 5 * 8e-6, 2.0, 250 * 2e-6 + 1000 * 8e-6]
    np.testing.assert_allclose(price.item_costs(inp, out), expected, rtol=1e-12)
    # broadcasting and 2-D input
    grid = price.item_costs(np.ones((2, 3)) * 100, np.zeros((2, 3)))
    assert grid.shape == (2, 3)
    np.testing.assert_allclose(grid, 100 * 2e-6)


def test_item_costs_nan_tokens_count_as_zero():
    price = Price.per_million(1.0, 3.0, "test")
    inp = np.array([np.nan, 1000.0, np.nan])
    out = np.array([500.0, np.nan, np.nan])
    got = price.item_costs(inp, out)
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, [0.0015, 0.001, 0.0], rtol=1e-12)


def test_item_costs_accepts_lists():
    price = Price.per_million(1.0, 3.0, "test")
    np.testing.assert_allclose(price.item_costs([1000, 0], [0, 1000]), [0.001, 0.003])


def test_per_million_and_properties():
    price = Price.per_million(2.5, 10.0, "cli")
    assert price.input_per_token == pytest.approx(2.5e-6)
    assert price.output_per_token == pytest.approx(1e-5)
    assert price.input_per_mtok == pytest.approx(2.5)
    assert price.output_per_mtok == pytest.approx(10.0)
    assert price.source == "cli"


def test_default_price():
    assert DEFAULT_PRICE.input_per_mtok == pytest.approx(1.0)
    assert DEFAULT_PRICE.output_per_mtok == pytest.approx(3.0)
    assert DEFAULT_PRICE.source == "default"


@pytest.mark.parametrize("bad", [-1e-6, float("nan"), float("inf"), None, "1e-6", True])
def test_price_rejects_bad_values(bad):
    with pytest.raises(ValueError):
        Price(bad, 1e-6, "test")
    with pytest.raises(ValueError):
        Price(1e-6, bad, "test")


def test_price_is_frozen():
    with pytest.raises(AttributeError):
        DEFAULT_PRICE.input_per_token = 0.0  # type: ignore[misc]


def test_uniform_prices():
    got = uniform_prices(["a", "b", "c"])
    assert list(got) == ["a", "b", "c"]
    assert all(p is DEFAULT_PRICE for p in got.values())
    custom = Price.per_million(0.5, 0.5, "cli")
    assert uniform_prices(iter(["x"]), custom) == {"x": custom}
    assert uniform_prices([]) == {}


# --------------------------------------------------------------------------- litellm


def test_import_does_not_import_litellm():
    code = (
        "import sys, lm_eval_adaptive.data.prices as c; "
        "assert 'litellm' not in sys.modules, 'litellm imported'; "
        "c.Price.per_million(1, 3, 'x').item_costs([1], [1]); "
        "c.uniform_prices(['a']); "
        "assert 'litellm' not in sys.modules, 'litellm imported'"
    )
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr


def test_litellm_price_sets_local_map_env(monkeypatch):
    monkeypatch.delenv("LITELLM_LOCAL_MODEL_COST_MAP", raising=False)
    litellm_price.cache_clear()
    try:
        assert litellm_price("gpt-4o-mini") is not None
        assert os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP") == "True"
    finally:
        litellm_price.cache_clear()


@pytest.mark.parametrize("model_id", ["gpt-4o-mini", "gpt-4", "gpt-3.5-turbo-1106"])
def test_litellm_price_matches_model_cost(model_cost, model_id):
    price = litellm_price(model_id)
    assert price is not None
    assert price.input_per_token == model_cost[model_id]["input_cost_per_token"]
    assert price.output_per_token == model_cost[model_id]["output_cost_per_token"]
    assert price.source == f"litellm:{model_id}"


def test_litellm_price_known_values():
    # Well-known list prices (USD / 1M tokens) in litellm's map.
    mini = litellm_price("gpt-4o-mini")
    assert (mini.input_per_mtok, mini.output_per_mtok) == pytest.approx((0.15, 0.60))
    gpt4 = litellm_price("gpt-4")
    assert (gpt4.input_per_mtok, gpt4.output_per_mtok) == pytest.approx((30.0, 60.0))


@pytest.mark.parametrize("model_id", ["no-such-model-xyz", "", "sample_spec", "GPT-4"])
def test_litellm_price_unknown_is_none(model_id):
    assert litellm_price(model_id) is None


def test_litellm_price_missing_prices_is_none(model_cost):
    missing = [k for k, v in model_cost.items()
               if isinstance(v, dict) and k != "sample_spec"
               and (v.get("input_cost_per_token") is None or v.get("output_cost_per_token") is None)]
    assert missing, "expected some entries without both prices in litellm's map"
    assert litellm_price(missing[0]) is None


def test_litellm_price_is_cached():
    a = litellm_price("gpt-4o-mini")
    b = litellm_price("gpt-4o-mini")
    assert a is b
    assert litellm_price.cache_info().hits >= 1


@pytest.mark.parametrize("system,model_id", sorted(SYSTEM_TO_LITELLM.items()))
def test_every_mapped_system_has_a_price_whatever_litellm_lists(model_cost, system, model_id):
    # the snapshot covers every mapped id, so a newer litellm that drops a retired product
    # (1.110 dropped azure/command-r-plus) never sends a benchmark system to the default price
    assert model_id in SNAPSHOT_PRICES, f"{system} -> {model_id} has no snapshot price"
    inp, out = SNAPSHOT_PRICES[model_id]
    assert inp > 0 and out > 0  # an API product is never free
    price = price_for(system, default=None)
    listed = litellm_price(model_id)
    if listed is not None:  # the installed litellm lists it: its price is used
        assert price == listed
    else:
        assert price == Price.per_million(inp, out, source=f"{SNAPSHOT_SOURCE}:{model_id}")
    assert model_price(system) == price


def test_a_mapped_id_litellm_dropped_is_priced_from_the_snapshot(model_cost, monkeypatch):
    monkeypatch.delitem(model_cost, "gpt-4")
    litellm_price.cache_clear()
    try:
        got = price_for("GPT-4", default=None)
        assert (got.input_per_mtok, got.output_per_mtok) == pytest.approx((30.0, 60.0))
        assert got.source == "litellm-1.80.0:gpt-4"
        assert model_price("openai/GPT-4").source == "litellm-1.80.0:gpt-4"
    finally:
        litellm_price.cache_clear()


def test_mapping_covers_the_wmt24_api_systems():
    for system in ["GPT-4", "Claude-3.5", "Mistral-Large", "CommandR-plus", "Phi-3-Medium"]:
        assert system in SYSTEM_TO_LITELLM
    for system in ["Gemini-1.5-Pro", "Llama3-70B", "Aya23", "ONLINE-A", "Unbabel-Tower70B"]:
        assert system not in SYSTEM_TO_LITELLM


def test_mapped_names_exist_in_the_data():
    data = Path(os.environ.get("LM_EVAL_ADAPTIVE_DATA", REPO.parent / "shared" / "data"))
    if not data.is_dir():
        pytest.skip(f"no benchmark data at {data}")
    names = {p.stem for p in data.glob("wmt24/*/systems/*.txt")}
    names |= {p.name.removesuffix(".jsonl") for p in data.glob("alpaca_eval/judge/*.jsonl")}
    names |= {p.name.removesuffix(".jsonl.gz") for p in data.glob("alpaca_eval/outputs/*.jsonl.gz")}
    names.add("gpt4_1106_preview")  # generator of alpaca_eval/reference.jsonl
    assert set(SYSTEM_TO_LITELLM) <= names, set(SYSTEM_TO_LITELLM) - names


# --------------------------------------------------------------------------- price_for


def test_price_for_precedence():
    override = Price.per_million(7.0, 7.0, "cli")
    # 1. overrides win, even over a real litellm id and a mapped system
    assert price_for("gpt-4o-mini", overrides={"gpt-4o-mini": override}) is override
    assert price_for("GPT-4", overrides={"GPT-4": override}) is override
    # 2. the name itself as a litellm id
    assert price_for("gpt-4o-mini") == litellm_price("gpt-4o-mini")
    assert price_for("gpt-4o-mini", overrides={"other": override}).source == "litellm:gpt-4o-mini"
    # 3. the system mapping
    got = price_for("Claude-3.5")
    assert got.source == f"litellm:{SYSTEM_TO_LITELLM['Claude-3.5']}"
    assert (got.input_per_mtok, got.output_per_mtok) == pytest.approx((3.0, 15.0))
    # 4. the default
    assert price_for("Unbabel-Tower70B") is DEFAULT_PRICE
    custom = Price.per_million(0.2, 0.4, "default")
    assert price_for("Unbabel-Tower70B", default=custom) is custom


def test_price_for_mapped_id_missing_falls_back_to_default(monkeypatch):
    monkeypatch.setitem(SYSTEM_TO_LITELLM, "Some-System", "no-such-model-xyz")
    assert price_for("Some-System") is DEFAULT_PRICE
    with pytest.raises(InputError):
        price_for("Some-System", default=None)


def test_price_for_refuses_without_default():
    with pytest.raises(InputError) as info:
        price_for("Unbabel-Tower70B", default=None)
    msg = str(info.value)
    assert "no known price for model 'Unbabel-Tower70B'" in msg
    assert "--costs" in msg and "--price" in msg
    # known names still resolve with default=None
    assert price_for("gpt-4", default=None) == litellm_price("gpt-4")


# --------------------------------------------------------------------------- costs files


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_load_json_all_forms(tmp_path):
    path = _write(tmp_path, "costs.json", json.dumps({
        "my-model": {"input_per_mtok": 1.0, "output_per_mtok": 3.0},
        "free-model": {"input_per_mtok": 0, "output_per_mtok": 0},
        "GPT-4": {"litellm": "gpt-4o"},
        "other": "gpt-4o-mini",
    }))
    prices = load_costs_file(path)
    assert set(prices) == {"my-model", "free-model", "GPT-4", "other"}
    assert prices["my-model"].input_per_token == pytest.approx(1e-6)
    assert prices["my-model"].output_per_token == pytest.approx(3e-6)
    assert prices["my-model"].source == f"file:{path}"
    assert prices["free-model"].item_costs([1000], [1000])[0] == 0.0
    assert prices["GPT-4"] == litellm_price("gpt-4o")
    assert prices["other"] == litellm_price("gpt-4o-mini")
    # the result works as overrides for price_for
    assert price_for("my-model", overrides=prices) is prices["my-model"]
    assert price_for("GPT-4", overrides=prices).source == "litellm:gpt-4o"


def test_load_csv(tmp_path):
    path = _write(tmp_path, "costs.csv",
                  "model,input_per_mtok,output_per_mtok\n"
                  "sys-a,1.0,3.0\n"
                  "\n"
                  " sys-b , 0.25 , 1.25 \n")
    prices = load_costs_file(path)
    assert set(prices) == {"sys-a", "sys-b"}
    assert prices["sys-b"].input_per_mtok == pytest.approx(0.25)
    assert prices["sys-b"].output_per_mtok == pytest.approx(1.25)
    assert prices["sys-a"].item_costs([1000], [500])[0] == pytest.approx(0.0025)


def test_load_csv_with_litellm_column_and_bom(tmp_path):
    path = tmp_path / "prices.csv"
    path.write_text("\ufeffmodel,input_per_mtok,output_per_mtok,litellm\n"
                    "a,2,4,\n"
                    "b,,,gpt-4o-mini\n", encoding="utf-8")
    prices = load_costs_file(path)
    assert prices["a"].input_per_mtok == pytest.approx(2.0)
    assert prices["b"] == litellm_price("gpt-4o-mini")


def test_load_sniffs_format_without_suffix(tmp_path):
    js = _write(tmp_path, "costs", '{"m": {"input_per_mtok": 1, "output_per_mtok": 2}}')
    assert load_costs_file(js)["m"].output_per_mtok == pytest.approx(2.0)
    cs = _write(tmp_path, "costs.txt", "model,input_per_mtok,output_per_mtok\nm,1,2\n")
    assert load_costs_file(str(cs))["m"].output_per_mtok == pytest.approx(2.0)


def _error(path) -> str:
    with pytest.raises(InputError) as info:
        load_costs_file(path)
    err = info.value
    msg = str(err)
    assert str(path) in msg, msg  # every error names the file
    assert err.path == str(path)
    return msg


# JSON errors: (file content, parts the message must contain)
JSON_ERRORS = [
    ('{"m": {"litellm": "no-such-model-xyz"}}', ["'m'", "unknown litellm id", "no-such-model-xyz"]),
    ('{"m": "no-such-model-xyz"}', ["'m'", "unknown litellm id"]),
    ('{"m": {"input_per_mtok": -1, "output_per_mtok": 3}}', ["'m'", "input_per_mtok", ">= 0"]),
    ('{"m": {"input_per_mtok": 1, "output_per_mtok": -0.5}}', ["'m'", "output_per_mtok", ">= 0"]),
    ('{"m": {"input_per_mtok": "cheap", "output_per_mtok": 3}}', ["'m'", "input_per_mtok", "not a number"]),
    ('{"m": {"input_per_mtok": true, "output_per_mtok": 3}}', ["'m'", "input_per_mtok", "not a number"]),
    ('{"m": {"input_per_mtok": [1], "output_per_mtok": 3}}', ["'m'", "input_per_mtok", "not a number"]),
    ('{"m": {"input_per_mtok": 1}}', ["'m'", "missing output_per_mtok"]),
    ('{"m": {"inpt_per_mtok": 1, "output_per_mtok": 3}}', ["'m'", "missing input_per_mtok"]),
    ('{"m": {"cost": 1}}', ["'m'", "input_per_mtok", "litellm", "cost"]),
    ('{"m": {"litellm": "gpt-4o", "input_per_mtok": 1, "output_per_mtok": 3}}', ["'m'", "not both"]),
    ('{"m": 3.0}', ["'m'", "expected"]),
    ('{"m": "gpt-4o", "m": "gpt-4"}', ["'m'", "twice"]),
    ('["gpt-4o"]', ["expected a JSON object"]),
    ('{"m": {"input_per_mtok": 1, ', ["not valid JSON", "line 1"]),
    ("{}", ["no model prices"]),
]


@pytest.mark.parametrize("text,parts", JSON_ERRORS)
def test_load_json_errors(tmp_path, text, parts):
    msg = _error(_write(tmp_path, "costs.json", text))
    for part in parts:
        assert part in msg, msg


# CSV errors: (file content, row, parts the message must contain)
CSV_ERRORS = [
    ("model,input_per_mtok\nm,1\n", 1, ["missing column", "output_per_mtok"]),
    ("name,input_per_mtok,output_per_mtok\nm,1,3\n", 1, ["missing column", "model"]),
    ("model,input_per_mtok,output_per_mtok\nok,1,3\nbad,-1,3\n", 3, ["'bad'", "input_per_mtok", ">= 0"]),
    ("model,input_per_mtok,output_per_mtok\nbad,1,free\n", 2, ["'bad'", "output_per_mtok", "not a number"]),
    ("model,input_per_mtok,output_per_mtok\nbad,1,nan\n", 2, ["'bad'", "output_per_mtok", "finite"]),
    ("model,input_per_mtok,output_per_mtok\nbad,1,\n", 2, ["'bad'", "missing output_per_mtok"]),
    ("model,input_per_mtok,output_per_mtok\nbad,1\n", 2, ["'bad'", "missing output_per_mtok"]),
    ("model,input_per_mtok,output_per_mtok\n,1,3\n", 2, ["empty model name"]),
    ("model,input_per_mtok,output_per_mtok\nm,1,3\nm,2,4\n", 3, ["'m'", "twice"]),
    ("model,input_per_mtok,output_per_mtok,litellm\nm,,,no-such-model-xyz\n", 2,
     ["'m'", "unknown litellm id", "no-such-model-xyz"]),
    ("model,input_per_mtok,output_per_mtok,litellm\nm,1,3,gpt-4o\n", 2, ["'m'", "not both"]),
]


@pytest.mark.parametrize("text,row,parts", CSV_ERRORS)
def test_load_csv_errors(tmp_path, text, row, parts):
    path = _write(tmp_path, "costs.csv", text)
    msg = _error(path)
    assert f"row {row}" in msg, msg
    for part in parts:
        assert part in msg, msg
    with pytest.raises(InputError) as info:
        load_costs_file(path)
    assert info.value.row == row


def test_load_csv_header_only_or_empty(tmp_path):
    assert "no model prices" in _error(_write(tmp_path, "a.csv", "model,input_per_mtok,output_per_mtok\n"))
    assert "empty CSV" in _error(_write(tmp_path, "b.csv", ""))


def test_unreadable_files(tmp_path):
    assert "not found" in _error(tmp_path / "missing.json")
    assert "directory" in _error(tmp_path)
    binary = tmp_path / "costs.csv"
    binary.write_bytes(b"model,input_per_mtok\n\xff\xfe\x00bad")
    assert "not UTF-8" in _error(binary)


@pytest.mark.skipif(os.name != "posix" or (hasattr(os, "geteuid") and os.geteuid() == 0),
                    reason="permission bits are not enforced here")
def test_unreadable_permissions(tmp_path):
    path = _write(tmp_path, "costs.json", '{"m": "gpt-4o"}')
    path.chmod(0)
    try:
        assert "cannot read" in _error(path)
    finally:
        path.chmod(0o644)


def test_module_exports():
    for mod in (prices, price_map):
        for name in mod.__all__:
            assert hasattr(mod, name)


def test_reasoning_tokens_are_priced_as_litellms_cost_calculator_prices_them():
    """Every chat model litellm's map prices reasoning tokens apart for (``output_cost_per_reasoning_token``):
    the reservation bounds the call at the dearer output price, and the charge of a usage with reasoning
    tokens equals litellm's own ``cost_per_token`` (issue 28: qwen-plus was costed 3× under it)."""
    import litellm
    from litellm import Usage

    from lm_eval_adaptive.data.price_map import bundled_price_map, litellm_price
    from lm_eval_adaptive.data.prices import actual_cost, upper_estimate

    ids = [m for m, v in bundled_price_map().items()
           if v.get("output_cost_per_reasoning_token") and v.get("mode") == "chat"]
    assert len(ids) >= 10
    usage = {"prompt_tokens": 100, "completion_tokens": 1000, "completion_tokens_details": {"reasoning_tokens": 900}}
    checked = 0
    for m in ids:
        price = litellm_price(m)
        ours = actual_cost(price, usage)
        assert ours <= upper_estimate(price, 100, 1000) * (1 + 1e-12)
        try:
            theirs = sum(litellm.cost_per_token(model=m, usage_object=Usage(**usage)))
        except litellm.exceptions.BadRequestError:  # litellm cannot tell the provider of this id itself
            continue
        assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-15), m
        checked += 1
    assert checked >= 10
    qwen = litellm_price("dashscope/qwen-plus-2025-04-28")
    assert actual_cost(qwen, usage) == pytest.approx(100 * 0.4e-6 + 100 * 1.2e-6 + 900 * 4e-6)

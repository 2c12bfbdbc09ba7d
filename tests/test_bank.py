"""ItemBank: JSON round trip, atomic save, load errors, ids, scaling, compatibility."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from conftest import make_sim_bank

import lm_eval_adaptive.atomic as atomic_mod
from lm_eval_adaptive.engine.irt.bank import BANK_FORMAT, BANK_VERSION, ItemBank
from lm_eval_adaptive.engine.irt.response_model import ContinuousResponseModel
from lm_eval_adaptive.errors import BankError, InputError


def _rich_bank(scaling="global"):
    rng = np.random.default_rng(0)
    n = 25
    lo = 0.0 if scaling == "global" else rng.uniform(-1, 0, n)
    hi = 100.0 if scaling == "global" else rng.uniform(1, 2, n)
    tok_in = rng.integers(10, 500, n).astype(float)
    tok_in[3] = np.nan
    return ItemBank(
        item_ids=np.array([f"seg-{i}" for i in range(n)], dtype=object),
        b=rng.normal(0, 1.5, n), model=ContinuousResponseModel(k=0.0831, likelihood="normal"),
        scaling=scaling, lo=lo, hi=hi, input_tokens=tok_in, output_tokens=rng.uniform(5, 50, n),
        task="wmt24", metric="chrf",
        dropped=[{"id": "seg-gone", "reason": "constant"}, {"id": "seg-neg", "reason": "negative_correlation"}],
        diagnostics={"k": 0.0831, "conformance_r2": 0.9, "abilities": {"m1": 0.1}},
        calibration={"method": "moments", "scaling": scaling},
    )


@pytest.mark.parametrize("scaling", ["global", "per_item"])
def test_save_load_round_trip(tmp_path, scaling):
    bank = _rich_bank(scaling)
    path = bank.save(tmp_path / "sub" / "bank.json")
    assert path.exists()
    d = json.loads(path.read_text())
    assert d["format"] == BANK_FORMAT and d["version"] == BANK_VERSION
    assert d["bank_id"] == bank.bank_id
    back = ItemBank.load(path)
    assert back.bank_id == bank.bank_id
    assert back.item_ids.tolist() == bank.item_ids.tolist()
    np.testing.assert_allclose(back.b, bank.b, atol=1e-9)
    np.testing.assert_array_equal(back.lo, bank.lo)
    np.testing.assert_array_equal(back.hi, bank.hi)
    np.testing.assert_allclose(back.input_tokens, bank.input_tokens, atol=1e-6, equal_nan=True)
    assert np.isnan(back.input_tokens[3])
    np.testing.assert_allclose(back.output_tokens, bank.output_tokens, atol=1e-6)
    assert back.model == bank.model and back.k == pytest.approx(0.0831)
    assert back.scaling == scaling
    assert (back.task, back.metric) == ("wmt24", "chrf")
    assert back.dropped == bank.dropped
    assert back.diagnostics == bank.diagnostics
    assert back.calibration == bank.calibration
    # saving the loaded bank gives the very same file: the id is stable
    again = back.save(tmp_path / "again.json")
    assert again.read_text() == path.read_text()
    assert ItemBank.load(again).bank_id == bank.bank_id


def test_bank_id_depends_on_content():
    a = make_sim_bank(n_items=30, seed=1)
    b = make_sim_bank(n_items=30, seed=1)
    c = make_sim_bank(n_items=30, seed=2)
    assert a.bank_id == b.bank_id
    assert a.bank_id != c.bank_id
    assert a.bank_id.startswith("sha256:")
    d = make_sim_bank(n_items=30, seed=1, k=0.2)
    assert d.bank_id != a.bank_id
    # diagnostics are not content
    a2 = make_sim_bank(n_items=30, seed=1)
    a2.diagnostics = {"note": "x"}
    assert a2.bank_id == a.bank_id


def test_atomic_save(tmp_path, monkeypatch):
    bank = make_sim_bank(n_items=20)
    old = tmp_path / "old.json"
    make_sim_bank(n_items=10, seed=5).save(old)
    original = old.read_text()

    def boom(src, dst):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(atomic_mod.os, "replace", boom)
    new = tmp_path / "new.json"
    with pytest.raises(OSError, match="simulated"):
        bank.save(new)
    assert not new.exists()
    with pytest.raises(OSError):
        bank.save(old)
    assert old.read_text() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.json"]  # no temp file left behind
    monkeypatch.undo()
    bank.save(old)
    assert ItemBank.load(old).bank_id == bank.bank_id


def _saved_dict(tmp_path):
    p = make_sim_bank(n_items=15).save(tmp_path / "good.json")
    return json.loads(p.read_text())


def _write(tmp_path, name, obj):
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return p


def _assert_bank_error(path, match):
    with pytest.raises(BankError, match=match) as ei:
        ItemBank.load(path)
    assert str(path) in str(ei.value)
    assert ei.value.path == str(path)
    assert isinstance(ei.value, InputError) and isinstance(ei.value, ValueError)


def test_load_missing_file(tmp_path):
    _assert_bank_error(tmp_path / "nope.json", "not found")


def test_load_not_json(tmp_path):
    _assert_bank_error(_write(tmp_path, "x.json", "{not json"), "cannot read")
    p = tmp_path / "bin.json"
    p.write_bytes(b"\xff\xfe\x00garbage")
    _assert_bank_error(p, "cannot read")


def test_load_wrong_format(tmp_path):
    _assert_bank_error(_write(tmp_path, "f.json", {"format": "something-else", "version": 1}), "format")
    _assert_bank_error(_write(tmp_path, "l.json", [1, 2, 3]), "format")


def test_load_unsupported_version(tmp_path):
    d = _saved_dict(tmp_path)
    d["version"] = BANK_VERSION + 1
    _assert_bank_error(_write(tmp_path, "v.json", d), "version")


@pytest.mark.parametrize("edit,match", [("no_b", "malformed"), ("short_b", "differ in length"),
                                        ("bad_model", "k must be"), ("no_scaling", "malformed"),
                                        ("b_not_numbers", "malformed"), ("dup_ids", "unique"),
                                        ("nan_b", "finite"), ("items_list", "malformed")])
def test_load_malformed_items(tmp_path, edit, match):
    d = _saved_dict(tmp_path)
    d.pop("bank_id")
    if edit == "no_b":
        del d["items"]["b"]
    elif edit == "short_b":
        d["items"]["b"] = d["items"]["b"][:-1]
    elif edit == "bad_model":
        d["response_model"] = {"kind": "continuous", "k": -1}
    elif edit == "no_scaling":
        del d["scaling"]
    elif edit == "b_not_numbers":
        d["items"]["b"][0] = "hard"
    elif edit == "dup_ids":
        d["items"]["id"][1] = d["items"]["id"][0]
    elif edit == "nan_b":
        d["items"]["b"][0] = None
    elif edit == "items_list":
        d["items"] = [1, 2]
    _assert_bank_error(_write(tmp_path, f"{edit}.json", d), match)


def _per_item_dict(tmp_path):
    p = make_sim_bank(n_items=15, scaling="per_item").save(tmp_path / "per_item.json")
    return json.loads(p.read_text())


@pytest.mark.parametrize("edit,message", [
    ("neg_input_tokens", "items.input_tokens[2] is -40.0: token counts must be finite and >= 0"),
    ("neg_output_tokens", "items.output_tokens[0] is -1.0 (and 1 more): token counts must be finite"),
    ("inf_tokens", "items.input_tokens[1] is inf: token counts must be finite and >= 0"),
    ("inf_b", "items.b[3] is -inf: difficulties must be finite"),
    ("min_eq_max", "scaling.max 0.0 is not above scaling.min 0.0: every item needs a score range"),
    ("inf_max", "scaling.max is inf: score ranges must be finite"),
    ("max_text", "malformed item bank: scaling.max is '1', not a number"),
    ("per_item_min_gt_max", "items.max[4] 0.5 is not above items.min[4] 0.9"),
    ("per_item_short_min", "items.min has 14 values, items.id has 15"),
    ("tokens_not_list", "malformed item bank: items.input_tokens is not an array"),
    ("tokens_text", "malformed item bank: items.output_tokens[5] is 'many', not a number"),
    ("id_number", "malformed item bank: items.id[1] is 7, not a string"),
    ("n_items", "n_items is 99 but items.id holds 15 ids"),
    ("dropped", "malformed item bank: dropped[0] needs a string id and reason"),
    ("k_zero", "response_model: ValueError: noise parameter k must be a positive number, got 0.0"),
    ("no_model", "malformed item bank: missing field response_model"),
    ("diagnostics_list", "malformed item bank: diagnostics is not an object"),
    ("task_number", "malformed item bank: task is not a string"),
])
def test_load_refuses_bad_numbers_naming_the_field(tmp_path, edit, message):
    d = _per_item_dict(tmp_path) if edit.startswith("per_item") else _saved_dict(tmp_path)
    items = d["items"]
    if edit == "neg_input_tokens":
        items["input_tokens"][2] = -40
    elif edit == "neg_output_tokens":
        items["output_tokens"][0] = -1
        items["output_tokens"][7] = -3.5
    elif edit == "inf_tokens":
        items["input_tokens"][1] = "INF"
    elif edit == "inf_b":
        items["b"][3] = "-INF"
    elif edit == "min_eq_max":
        d["scaling"]["max"] = 0.0
    elif edit == "inf_max":
        d["scaling"]["max"] = "INF"
    elif edit == "max_text":
        d["scaling"]["max"] = "1"
    elif edit == "per_item_min_gt_max":
        items["min"][4], items["max"][4] = 0.9, 0.5
    elif edit == "per_item_short_min":
        items["min"] = items["min"][:-1]
    elif edit == "tokens_not_list":
        items["input_tokens"] = 100
    elif edit == "tokens_text":
        items["output_tokens"][5] = "many"
    elif edit == "id_number":
        items["id"][1] = 7
    elif edit == "n_items":
        d["n_items"] = 99
    elif edit == "dropped":
        d["dropped"] = [{"id": "x"}]
    elif edit == "k_zero":
        d["response_model"]["k"] = 0.0
    elif edit == "no_model":
        del d["response_model"]
    elif edit == "diagnostics_list":
        d["diagnostics"] = [1]
    elif edit == "task_number":
        d["task"] = 3
    # JSON's non-standard Infinity, which Python's json module reads
    text = json.dumps(d).replace('"INF"', "Infinity").replace('"-INF"', "-Infinity")
    path = _write(tmp_path, f"{edit}.json", text)
    with pytest.raises(BankError) as ei:
        ItemBank.load(path)
    assert str(ei.value).startswith(f"{path}: {message}")
    assert "\n" not in str(ei.value) and ei.value.path == str(path)


def test_constructor_refuses_negative_tokens():
    bank = make_sim_bank(n_items=15)
    with pytest.raises(BankError, match="items.output_tokens"):
        ItemBank(item_ids=bank.item_ids, b=bank.b, model=bank.model, scaling="global", lo=0.0, hi=1.0,
                 input_tokens=100.0, output_tokens=-50.0)


def test_load_hand_edited(tmp_path):
    d = _saved_dict(tmp_path)
    d["items"]["b"][0] += 0.5
    _assert_bank_error(_write(tmp_path, "edited.json", d), "does not match its id")
    # without a stored id the edited content loads
    d.pop("bank_id")
    assert ItemBank.load(_write(tmp_path, "noid.json", d)).n_items == 15


def test_index_of():
    bank = _rich_bank()
    np.testing.assert_array_equal(bank.index_of(["seg-3", "seg-0", "seg-24"]), [3, 0, 24])
    assert bank.index_of("seg-7").tolist() == [7]
    with pytest.raises(BankError) as ei:
        bank.index_of(["seg-1", "mystery-1", "mystery-2"])
    msg = str(ei.value)
    assert "2 item(s) not in the bank" in msg
    assert "'mystery-1'" in msg and "'mystery-2'" in msg
    assert bank.bank_id in msg
    with pytest.raises(BankError) as ei:
        bank.index_of(["seg-gone", "seg-neg"])
    msg = str(ei.value)
    assert "'seg-gone' (dropped at calibration: constant)" in msg
    assert "'seg-neg' (dropped at calibration: negative_correlation)" in msg


def test_scale_clips_to_unit_interval():
    bank = _rich_bank("global")  # range [0, 100]
    y = bank.scale([0, 1, 2, 3], [-5.0, 0.0, 50.0, 250.0])
    np.testing.assert_allclose(y, [0.0, 0.0, 0.5, 1.0])
    assert np.all((y >= 0) & (y <= 1))
    np.testing.assert_allclose(bank.unscale([2], [0.25]), [25.0])
    pb = _rich_bank("per_item")
    items = np.arange(pb.n_items)
    raw = np.random.default_rng(1).uniform(-5, 5, pb.n_items)
    y = pb.scale(items, raw)
    assert np.all((y >= 0) & (y <= 1))
    assert np.any(y == 0) and np.any(y == 1)
    inside = (raw > pb.lo) & (raw < pb.hi)
    np.testing.assert_allclose(pb.unscale(items[inside], y[inside]), raw[inside])


def test_check_compatible():
    bank = _rich_bank()
    bank.check_compatible(task="wmt24", metric="chrf")
    bank.check_compatible()
    with pytest.raises(BankError, match="task"):
        bank.check_compatible(task="gsm8k")
    with pytest.raises(BankError, match="metric"):
        bank.check_compatible(metric="bleu")
    anon = make_sim_bank(n_items=5)
    anon.task = anon.metric = None
    anon.check_compatible(task="anything", metric="x")  # an unnamed bank fits any task


def test_constructor_validation():
    kw = dict(model=ContinuousResponseModel(k=0.1), scaling="global", lo=0.0, hi=1.0,
              input_tokens=1.0, output_tokens=1.0)
    with pytest.raises(BankError, match="no items"):
        ItemBank(item_ids=np.array([], dtype=object), b=np.array([]), **kw)
    with pytest.raises(BankError, match="unique"):
        ItemBank(item_ids=["a", "a"], b=[0.0, 1.0], **kw)
    with pytest.raises(BankError, match="finite"):
        ItemBank(item_ids=["a", "b"], b=[0.0, np.nan], **kw)
    with pytest.raises(BankError, match="length"):
        ItemBank(item_ids=["a", "b"], b=[0.0], **kw)
    with pytest.raises(BankError, match="scaling"):
        ItemBank(item_ids=["a"], b=[0.0], **(kw | {"scaling": "zscore"}))
    with pytest.raises(BankError, match="max > min"):
        ItemBank(item_ids=["a"], b=[0.0], **(kw | {"lo": 1.0, "hi": 1.0}))
    ok = ItemBank(item_ids=["a", "b", "c"], b=[0.0, 2.0, 1.0], **kw)
    assert ok.n_items == 3 and ok.prior_mean == 1.0 and ok.discrimination == pytest.approx(1 / np.sqrt(0.1))
    assert "unnamed" in ok.describe()


def test_sim_bank_fixture(sim_bank):
    assert sim_bank.n_items == 500 and sim_bank.k == 0.1 and sim_bank.scaling == "global"
    assert np.all(sim_bank.lo == 0) and np.all(sim_bank.hi == 1)
    assert np.all(sim_bank.input_tokens == 100) and np.all(sim_bank.output_tokens == 50)
    assert 1.2 < np.std(sim_bank.b) < 1.8
    assert os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP")

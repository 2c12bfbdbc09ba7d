"""Banks that ship: every shipped task config has its banks in the package, found by name (``--bank
wmt24_en-de.bleu``) or, for a task only one fits, without ``--bank``; banks built from named tables
say which document field their ids are, so nothing needs ``--item-field``.

The end-to-end test (slow) builds the WMT24 en-de BLEU bank with benchmarks/build_banks.py WITHOUT a
dev system, puts it where the shipped bank is looked up, and runs that system with ``run --adaptive
--bank wmt24_en-de.bleu`` and no other adaptive flag through the replay endpoint: its 95% interval must
hold the harness's own full run of the same system. (The documents the CAT picks differ from run to
run: ``run --adaptive`` takes no seed. The same test on the recorded scores, offline, with 200
selection seeds: the interval held 99.5% of the time.)
"""

from __future__ import annotations

import fnmatch
import glob
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from conftest import WMT_LIKE, assert_nested_close, build_banks_module
from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.data import shipped_banks
from lm_eval_adaptive.data.shipped_banks import SHIPPED_BANKS, read_bank_json, shipped_bank, shipped_for_task
from lm_eval_adaptive.data.tables import table_item_field
from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.irt.response_model import ContinuousResponseModel
from lm_eval_adaptive.errors import BankError, InputError
from lm_eval_adaptive.harness.bank_source import bank_reference, load_bank, parse_banks
from lm_eval_adaptive.harness.binding import bind_bank, record_item_field

REPO = Path(__file__).resolve().parents[1]
WMT = "wmt24_en-de"


def _have_data() -> bool:
    from lm_eval_adaptive.data.data_root import data_root

    try:
        data_root()
    except InputError:
        return False
    return True


needs_data = pytest.mark.skipif(not _have_data(), reason="real data (../shared/data) not available")




def small_bank(ids, *, task="t", metric="bleu"):
    return ItemBank(item_ids=np.array([str(i) for i in ids], dtype=object), b=np.zeros(len(ids)),
                    model=ContinuousResponseModel(k=0.1), scaling="global", lo=0.0, hi=1.0, input_tokens=10.0,
                    output_tokens=10.0, task=task, metric=metric)


# ------------------------------------------------------------------------ the shipped files
def _task_config_names() -> set[str]:
    names = set()
    for y in (REPO / "task_configs").rglob("*.yaml"):
        for line in y.read_text().splitlines():
            if line.startswith("task:"):
                names.add(line.split(":", 1)[1].strip())
    return names


def test_every_shipped_bank_is_in_the_package_loads_by_name_and_says_its_id_field():
    tasks = _task_config_names()
    assert {b.task for b in SHIPPED_BANKS} >= {f"wmt24_{p}" for p in ("en-de", "en-es", "en-ja", "en-zh")}
    assert "alpaca_eval_judge" in {b.task for b in SHIPPED_BANKS}
    total = 0
    for spec in SHIPPED_BANKS:
        assert spec.task in tasks, spec  # a task config ships for every bank
        assert spec.name == f"{spec.task}.{spec.metric}"
        assert spec.path.is_file(), f"{spec.path}: run python benchmarks/build_banks.py"
        bank = load_bank(spec.name)  # the content matches its stored id (from_dict checks it)
        assert (bank.task, bank.metric) == (spec.task, spec.metric)
        assert bank.calibration["item_field"] == "id" and bank.calibration["table"] == spec.table
        assert bank.n_items >= 800 and bank.model_error, spec  # calibrated, self-checked
        assert not bank.calibration["source"].startswith("/")  # no machine's path in a shipped file
        total += spec.path.stat().st_size
    assert total < 1_000_000, total  # modest package data


def test_the_package_data_covers_the_shipped_files():
    tomllib = pytest.importorskip("tomllib")
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    patterns = data["lm_eval_adaptive"]
    for spec in SHIPPED_BANKS:
        rel = spec.path.relative_to(REPO / "lm_eval_adaptive").as_posix()
        assert any(fnmatch.fnmatch(rel, p) for p in patterns), rel


# -------------------------------------------------------------------------------- names
def test_names_resolve_to_shipped_banks_and_unknown_names_list_them():
    assert shipped_bank("wmt24_en-de.bleu").table == "wmt24/en-de/bleu"
    assert shipped_bank("wmt24_en-de.bleu.json.gz").name == "wmt24_en-de.bleu"
    assert shipped_bank("nope") is None
    assert [b.name for b in shipped_for_task(WMT)] == ["wmt24_en-de.bleu", "wmt24_en-de.chrf"]
    assert [b.name for b in shipped_for_task(WMT, "chrf")] == ["wmt24_en-de.chrf"]
    with pytest.raises(BankError, match=r"nor a shipped bank's name; did you mean wmt24_en-\w\w\.bleu or .*\? "
                                        r"\(shipped: wmt24_en-de\.bleu, .*alpaca_eval_judge"):
        load_bank("wmt24_en-xx.bleu")
    assert bank_reference("wmt24_en-de.bleu") == "wmt24_en-de.bleu"


def test_the_bank_registry_names_what_it_refuses_and_lists_what_it_has(monkeypatch):
    assert list(shipped_banks.BANK_REGISTRY) == [b.name for b in SHIPPED_BANKS] == shipped_banks.shipped_names()
    assert shipped_banks.get_shipped_bank("alpaca_eval.judge.json.gz").task == "alpaca_eval"
    with pytest.raises(InputError, match=r"unknown shipped bank 'wmt24_en-xx\.bleu'; shipped: wmt24_en-de\.bleu, "
                                         r"wmt24_en-de\.chrf, .*, alpaca_eval\.judge$"):
        shipped_banks.get_shipped_bank("wmt24_en-xx.bleu")
    monkeypatch.setattr(shipped_banks, "BANK_REGISTRY", dict(shipped_banks.BANK_REGISTRY))
    new = shipped_banks.register_banks("wmt25_{pair}.xcomet", table="wmt25/{pair}/xcomet", task="wmt25_{pair}",
                                       metric="xcomet", fields={"pair": ["en-de"]})
    assert [(b.name, b.table, b.task, b.metric) for b in new] == [("wmt25_en-de.xcomet", "wmt25/en-de/xcomet",
                                                                    "wmt25_en-de", "xcomet")]
    assert shipped_bank("wmt25_en-de.xcomet") == new[0] and shipped_for_task("wmt25_en-de") == list(new)
    n = len(shipped_banks.BANK_REGISTRY)
    with pytest.raises(ValueError, match=r"shipped bank 'alpaca_eval\.judge' is already registered"):
        shipped_banks.register_banks("{name}", table="alpaca_eval/judge", task="t", metric="judge",
                                     fields={"name": ["new.judge", "alpaca_eval.judge"]})
    assert shipped_bank("new.judge") is None  # nothing of a refused family is registered
    with pytest.raises(ValueError, match=r"'wmt24/en-xx/bleu' is not a named table; named tables: wmt24/en-de/bleu, "):
        shipped_banks.register_banks("x.bleu", table="wmt24/en-xx/bleu", task="x", metric="bleu")
    with pytest.raises(ValueError, match=r"bank pattern 'x_\{pair\}': fields pair; values given for \(none\)"):
        shipped_banks.register_banks("x_{pair}", table="alpaca_eval/judge", task="x", metric="judge")
    assert len(shipped_banks.BANK_REGISTRY) == n and shipped_bank("wmt24_en-es.chrf").table == "wmt24/en-es/chrf"


def test_a_file_wins_over_a_name_and_gzip_bank_files_load(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    small_bank([1, 2], task=WMT).save(tmp_path / "wmt24_en-de.bleu")
    assert load_bank("wmt24_en-de.bleu").n_items == 2
    assert bank_reference("wmt24_en-de.bleu") == str(tmp_path / "wmt24_en-de.bleu")
    gz = tmp_path / "b.json.gz"
    gz.write_bytes(gzip.compress((tmp_path / "wmt24_en-de.bleu").read_bytes()))
    assert load_bank(gz).bank_id == load_bank("wmt24_en-de.bleu").bank_id
    gz.write_bytes(b"not gzip")
    with pytest.raises(BankError, match="cannot read item bank"):
        load_bank(gz)


def test_parse_banks_takes_the_one_shipped_bank_a_task_has_and_says_so(tmp_path):
    said = []
    x = tmp_path / "x.json"
    small_bank([1, 2], task=WMT).save(x)
    assert parse_banks([], ["alpaca_eval_judge"], note=said.append) == {"alpaca_eval_judge": "alpaca_eval_judge.judge"}
    assert said == ["alpaca_eval_judge: no --bank given; using the shipped bank alpaca_eval_judge.judge (metric judge)"]
    assert parse_banks([], [WMT], metric="chrf", note=said.append) == {WMT: "wmt24_en-de.chrf"}
    # two fit (BLEU and chrF): refused, naming both
    with pytest.raises(InputError, match=r"several shipped banks fit it \(wmt24_en-de\.bleu, wmt24_en-de\.chrf\)"):
        parse_banks([], [WMT])
    # a bare shipped name says its task, so several tasks need no TASK=
    assert parse_banks(["wmt24_en-de.bleu", "wmt24_en-es.chrf"], [WMT, "wmt24_en-es"]) == {
        WMT: "wmt24_en-de.bleu", "wmt24_en-es": "wmt24_en-es.chrf"}
    # mixed: one given, the other's single shipped bank (by --metric) taken
    assert parse_banks([f"wmt24_en-de={x}"], [WMT, "wmt24_en-es"], metric="bleu", note=said.append) == {
        WMT: str(x), "wmt24_en-es": "wmt24_en-es.bleu"}
    # a bank that is neither a file nor a shipped name: refused at once, with the close match
    with pytest.raises(InputError, match=r"--bank 'wmt24_en-de\.bleuu': item bank file not found, nor a shipped "
                                         r"bank's name; did you mean wmt24_en-de\.bleu\?"):
        parse_banks(["wmt24_en-de.bleuu"], [WMT])
    with pytest.raises(InputError, match=r"did you mean wmt24_en-de\.chrf\?"):
        parse_banks(["wmt24_en-de=wmt24_en-de.chfr"], [WMT])
    with pytest.raises(InputError, match="needs an item bank per task"):
        parse_banks([], ["my_task"])
    with pytest.raises(InputError, match="not in --tasks: wmt24_en-es"):
        parse_banks(["wmt24_en-es.bleu"], [WMT, "other"])
    # with one task a bare name is that task's bank; binding then refuses another task's bank
    assert parse_banks(["wmt24_en-es.bleu"], [WMT]) == {WMT: "wmt24_en-es.bleu"}


# ------------------------------------------------------------------------ the id scheme
def test_a_bank_that_records_its_id_field_is_mapped_by_it_without_item_field():
    ids = range(5, 15)  # line numbers: also valid positions, so unrecorded they are ambiguous
    with pytest.raises(BankError, match="ambiguous"):
        bind_bank(small_bank(ids), "t", WMT_LIKE)
    b = record_item_field(small_bank(ids), "id")
    got = bind_bank(b, "t", WMT_LIKE)
    assert got.item_field == "id" and got.doc_of_item.tolist() == list(range(4, 14))
    assert bind_bank(b, "t", WMT_LIKE, item_field="doc_id").doc_of_item.tolist() == list(range(5, 15))  # flag wins
    with pytest.raises(InputError, match=r"the bank's item field 'nope' \(calibration.item_field"):
        bind_bank(record_item_field(small_bank(ids), "nope"), "t", WMT_LIKE)
    bad = small_bank(ids)
    bad.calibration["item_field"] = 3
    with pytest.raises(BankError, match="calibration.item_field is 3"):
        bind_bank(bad, "t", WMT_LIKE)


def test_named_tables_say_their_id_field(tmp_path):
    assert table_item_field("wmt24/en-de/bleu") == "id" == table_item_field("alpaca_eval/judge")
    assert table_item_field("embedded:wmt24-en-de-chrf") == "id"
    assert table_item_field("wmt25/en-de/xcomet") is None  # no task config
    f = tmp_path / "t.csv"
    f.write_text("model,item,score\n")
    assert table_item_field(str(f)) is None  # a file's ids may be anything


def test_calibrate_and_leaderboard_from_a_named_table_record_the_id_field(tmp_path):
    out = tmp_path / "b.json"
    assert main(["calibrate", "embedded:alpaca-eval-judge", "--task", "alpaca_eval_judge", "--metric", "judge",
                 "--no-self-check", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["calibration"]["item_field"] == "id"
    from lm_eval_adaptive.live.leaderboard import create_leaderboard

    lb = create_leaderboard("embedded:wmt24-en-de-chrf", task=WMT, metric="chrf",
                            models=["GPT-4", "Aya23", "CUNI-NL", "ONLINE-B"], out=tmp_path / "lb.json")
    assert lb["item_field"] == "id"


# -------------------------------------------------------------------------- the build
@needs_data
def test_the_build_is_deterministic_and_gives_the_shipped_bank(tmp_path):
    bb = build_banks_module()
    a = bb.write_bank(bb.build_bank("alpaca_eval_judge.judge"), tmp_path / "a.json.gz")
    b = bb.write_bank(bb.build_bank("alpaca_eval_judge.judge"), tmp_path / "b.json.gz")
    assert a.read_bytes() == b.read_bytes()
    assert read_bank_json(a)["bank_id"] == read_bank_json(shipped_bank("alpaca_eval_judge.judge").path)["bank_id"]


@pytest.mark.slow
@needs_data
def test_every_shipped_bank_matches_a_fresh_build(tmp_path):
    # within 1e-9 in every number (the stated tolerance); the bank id hashes parameters rounded to
    # 10 decimals, so it is the same too
    bb = build_banks_module()
    paths = bb.build(out=tmp_path, log=lambda line: None)
    for p in paths:
        # a fresh build on another machine (other numpy/scipy/BLAS builds) may round its sums differently
        assert_nested_close(read_bank_json(shipped_bank(p.name).path), read_bank_json(p), p.name)


# ---------------------------------------------------------------- end to end (replay endpoint)
HELD_OUT = "Mistral-Large"  # a dev system: left out of the bank the run uses


@pytest.fixture(scope="module")
def server(replay_server):
    return replay_server


def _run(system, out, *extra, model_args=""):
    return main(["run", "--model", "litellm", "--model_args", f"model=openai/{system}{model_args}", "--tasks", WMT,
                 "--include_path", str(REPO / "task_configs"), "--apply_chat_template", "--log_samples",
                 "--output_path", str(out), *extra])


def _results(out):
    (res,) = glob.glob(str(Path(out) / "*" / "results_*.json"))
    return json.loads(Path(res).read_text())


@pytest.mark.slow
def test_run_adaptive_with_a_shipped_bank_name_needs_no_other_flag_and_holds_the_full_run(
        server, tmp_path, monkeypatch, capsys):
    bb = build_banks_module()
    banks = tmp_path / "banks"
    bank = bb.build_bank("wmt24_en-de.bleu", exclude=[HELD_OUT])
    bb.write_bank(bank, banks / "wmt24_en-de.bleu.json.gz")
    assert HELD_OUT not in bank.calibration["models"]
    monkeypatch.setattr(shipped_banks, "BANKS_DIR", banks)  # where the shipped bank is looked up
    server.reset_stats()
    assert _run(HELD_OUT, tmp_path / "adaptive", "--adaptive", "--bank", "wmt24_en-de.bleu") == 0
    res = _results(tmp_path / "adaptive")
    a = res["adaptive"][WMT]
    assert a["bank_id"] == bank.bank_id and a["item_field"] == "id"
    assert server.stats()["served"] == a["items"] < 0.1 * 997
    (samples,) = glob.glob(str(tmp_path / "adaptive" / "*" / f"samples_{WMT}_*.jsonl"))
    rows = [json.loads(x) for x in Path(samples).read_text().splitlines()]
    assert rows and all(r["doc"]["id"] == r["adaptive"]["item_id"] for r in rows)  # ids read as the `id` field
    # the harness's own full run of the same system
    assert _run(HELD_OUT, tmp_path / "full", model_args=",num_concurrent=32") == 0
    true = _results(tmp_path / "full")["results"][WMT]["bleu,none"]
    est = a["metric_estimate"]
    print(f"\n{HELD_OUT} BLEU (left out of the bank): estimate {est['estimate']:.4f} "
          f"[{est['lower']:.4f}, {est['upper']:.4f}] from {a['items']} of {a['task_docs']} documents "
          f"(stopped: {a['stopped_because']}); full run {true:.4f}")
    assert est["lower"] <= true <= est["upper"]


@pytest.mark.slow
def test_run_adaptive_without_bank_takes_the_one_shipped_bank_that_fits(server, tmp_path, capsys):
    # WMT24 has two (BLEU, chrF): refused, naming them; --metric picks one, and the run says so
    assert _run(HELD_OUT, tmp_path / "none", "--adaptive", "--dry-run") == 2
    assert "several shipped banks fit it (wmt24_en-de.bleu, wmt24_en-de.chrf)" in capsys.readouterr().err
    server.reset_stats()
    assert _run(HELD_OUT, tmp_path / "chrf", "--adaptive", "--metric", "chrf", "--min-items", "3",
                "--max-items", "3") == 0
    assert "wmt24_en-de: no --bank given; using the shipped bank wmt24_en-de.chrf" in capsys.readouterr().err
    a = _results(tmp_path / "chrf")["adaptive"][WMT]
    assert (a["bank_metric"], a["item_field"], a["items"]) == ("chrf", "id", 3) and server.stats()["served"] == 3


@pytest.mark.slow
def test_rank_and_refresh_take_shipped_and_named_banks_without_item_field(server, tmp_path, capsys):
    models = [f"{s}=litellm:model=openai/{s}" for s in ("GPT-4", "Aya23")]
    common = ["--include_path", str(REPO / "task_configs"), "--apply_chat_template", "--no-progress",
              "--price", "GPT-4=1,3", "Aya23=1,3", "--budget-usd", "0.05", "--dry-run"]
    server.reset_stats()
    assert main(["rank", "--models", *models, "--tasks", WMT, "--bank", "wmt24_en-de.bleu", *common]) == 0
    lb = tmp_path / "lb.json"
    assert main(["leaderboard", "--history", "wmt24/en-de/bleu", "--task", WMT, "--metric", "bleu",
                 "--models", "AIST-AIRC", "Aya23", "CUNI-NL", "ONLINE-B", "--out", str(lb)]) == 0
    assert json.loads(lb.read_text())["item_field"] == "id"
    assert main(["refresh", "--leaderboard", str(lb), "--add", "GPT-4=litellm:model=openai/GPT-4", *common]) == 0
    assert server.stats()["requests"] == 0

"""Resume is exact or refuses; bad inputs of the live commands are refused before anything is written or called.

Every case runs the real CLI (in process) against the replay endpoint, whose served-call
counter shows that a refused command asked the provider nothing. A refusal is exit status 2,
exactly one ``error:`` line on stderr and no traceback; the run folder is not created (a new
run) or left byte for byte as it was (a resume).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from test_harness_cli import make_bank

from lm_eval_adaptive.cli.main import main

REPO = Path(__file__).resolve().parents[1]
TASK = "wmt24_en-de"
MODELS = ["GPT-4=litellm:model=openai/GPT-4", "Aya23=litellm:model=openai/Aya23"]
# the first run stops on this cap after a few items: a resume with a higher cap has work to do
CAP = 0.03


@pytest.fixture(scope="module")
def server(replay_server):
    return replay_server


@pytest.fixture(scope="module")
def bank(tmp_path_factory):
    return make_bank(tmp_path_factory.mktemp("bank") / "bank.json")


def rank_args(bank, out, *extra):
    return ["rank", "--models", *MODELS, "--price", "Aya23=1,3", "--tasks", TASK, "--bank", str(bank),
            "--include_path", str(REPO / "task_configs"), "--apply_chat_template", "--item-field", "doc_id",
            "--min-items", "8", "--no-progress", "--backoff", "0.05", "--output", str(out), *extra]


def refused(capsys, server, rc, *, says):
    """Exit 2, one ``error:`` line naming the problem, no traceback, no call served."""
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert rc == 2, err
    assert len(errors) == 1, err
    assert "Traceback" not in err
    for s in says:
        assert s in errors[0], errors[0]
    assert server.stats()["requests"] == 0
    return errors[0]


def snapshot(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


# ------------------------------------------------------------------------------------ bad inputs
def bad_k_bank(bank, tmp_path):
    d = json.loads(Path(bank).read_text())
    d["response_model"]["k"] = 1e-300
    d.pop("bank_id", None)
    path = tmp_path / "k.json"
    path.write_text(json.dumps(d))
    return path


@pytest.mark.parametrize("case, says", [
    ("max_gen_toks_negative", ["--gen_kwargs", "max_gen_toks", "-5"]),
    ("max_gen_toks_text", ["--gen_kwargs", "max_gen_toks", "'abc'"]),
    ("gen_kwargs_not_key_value", ["--gen_kwargs", "KEY=VALUE"]),
    ("metadata_not_json", ["--metadata", "not valid JSON"]),
    ("metadata_not_object", ["--metadata", "JSON object"]),
    ("cap_below_one_call", ["--budget-usd 0.001", "cheapest first call reserves $"]),
    ("bank_k_tiny", ["k.json", "response_model.k", "1e-300"]),
    # names (issue 28): two that redact alike, a byte that is not UTF-8 in a name or a model id, a
    # secret after a space in a TYPE:ARGS spec
    ("names_redact_alike", ["--models: the model name", "holds a secret"]),
    ("non_utf8_name", ["argument", "the byte 0xff", "not UTF-8"]),
    ("non_utf8_model_id", ["argument", "the byte 0xe9", "not UTF-8"]),
    ("secret_after_a_space", ["--models", "a space before 'key='", "separate the arguments with commas"]),
])
def test_rank_refuses_bad_input_before_writing_or_calling(server, bank, tmp_path, capsys, case, says):
    extra = {
        "max_gen_toks_negative": lambda: ["--gen_kwargs", "max_gen_toks=-5", "--budget-usd", "0.1"],
        "max_gen_toks_text": lambda: ["--gen_kwargs", "max_gen_toks=abc", "--budget-usd", "0.1"],
        "gen_kwargs_not_key_value": lambda: ["--gen_kwargs", "max_gen_toks", "--budget-usd", "0.1"],
        "metadata_not_json": lambda: ["--metadata", "{bad", "--budget-usd", "0.1"],
        "metadata_not_object": lambda: ["--metadata", "[1]", "--budget-usd", "0.1"],
        "cap_below_one_call": lambda: ["--budget-usd", "0.001"],
        "bank_k_tiny": lambda: ["--budget-usd", "0.1"],
        "names_redact_alike": lambda: ["--models", "sk-abcdefghijklmnopqrstuvwx=litellm:model=openai/GPT-4",
                                       "PLANTED-name-77=litellm:model=openai/Aya23", "--redact", "PLANTED-name-77",
                                       "--budget-usd", "0.1"],
        "non_utf8_name": lambda: ["--models", os.fsdecode(b"GPT\xff4=litellm:model=openai/GPT-4"),
                                  "--budget-usd", "0.1"],
        "non_utf8_model_id": lambda: ["--models", os.fsdecode(b"X=litellm:model=openai/caf\xe9"),
                                      "--budget-usd", "0.1"],
        "secret_after_a_space": lambda: ["--models", "X=litellm:model=openai/GPT-4 key=abcd-1234-secret",
                                         "--budget-usd", "0.1"],
    }[case]()
    out = tmp_path / "out"
    server.reset_stats()
    b = bad_k_bank(bank, tmp_path) if case == "bank_k_tiny" else bank
    line = refused(capsys, server, main(rank_args(b, out, *extra)), says=says)
    assert not out.exists()
    assert "abcd-1234-secret" not in line and "PLANTED-name-77" not in line and "sk-abcdefghij" not in line


def run_args(out, *extra, include=True):
    inc = ["--include_path", str(REPO / "task_configs")] if include else []
    return ["run", "--model", "litellm", "--model_args", "model=openai/GPT-4", "--tasks", TASK, *inc,
            "--apply_chat_template", "--adaptive", "--bank", make_bank(out.parent / "run_bank.json"),
            "--item-field", "doc_id", "--min-items", "2", "--max-items", "2", "--no-progress",
            "--output_path", str(out), *extra]


@pytest.mark.parametrize("case, says", [
    ("no_include_path", ["wmt24_en-de", "--include_path task_configs"]),
    ("cap_below_one_call", ["--budget-usd 1e-05", "cheapest first call"]),
    ("max_gen_toks_negative", ["--gen_kwargs", "max_gen_toks"]),
])
def test_adaptive_run_refuses_bad_input_before_writing_or_calling(server, tmp_path, capsys, case, says):
    out = tmp_path / "out"
    args = {"no_include_path": lambda: run_args(out, include=False),
            "cap_below_one_call": lambda: run_args(out, "--budget-usd", "0.00001"),
            "max_gen_toks_negative": lambda: run_args(out, "--gen_kwargs", "max_gen_toks=-5")}[case]()
    server.reset_stats()
    refused(capsys, server, main(args), says=says)
    assert not out.exists()


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    path = tmp_path_factory.mktemp("board") / "lb.json"
    assert main(["leaderboard", "--history", "wmt24/en-de/bleu", "--task", TASK, "--metric", "bleu",
                 "--item-field", "id", "--models", "Aya23", "CUNI-NL", "IKUN", "ONLINE-A", "--out", str(path)]) == 0
    return path


@pytest.mark.parametrize("extra, says", [
    (["--budget-usd", "0.00001"], ["--budget-usd 1e-05", "cheapest first call reserves $"]),
    (["--budget-usd", "0.3", "--gen_kwargs", "max_gen_toks=0"], ["--gen_kwargs", "max_gen_toks"]),
    (["--budget-usd", "0.3", "--metadata", "{bad"], ["--metadata"]),
    (["--budget-usd", "0.3", "--add", os.fsdecode(b"caf\xe9=litellm:model=openai/Aya23")], ["the byte 0xe9"]),
    (["--budget-usd", "0.3", "--add", "New=litellm:model=openai/Aya23 api_key=abcd-1234-secret"],
     ["--add", "a space before 'api_key='"]),
])
def test_refresh_refuses_bad_input_before_writing_or_calling(server, board, tmp_path, capsys, extra, says):
    before = board.read_bytes()
    out = tmp_path / "refresh_run"
    server.reset_stats()
    rc = main(["refresh", "--leaderboard", str(board), "--add", "GPT-4=litellm:model=openai/GPT-4",
               "--include_path", str(REPO / "task_configs"), "--apply_chat_template", "--no-progress",
               "--output", str(out), *extra])
    refused(capsys, server, rc, says=says)
    assert board.read_bytes() == before and not out.exists()


@pytest.mark.parametrize("entry, says", [
    ({"model": "a\ud800b"}, ["entries[0].model", "lone surrogate U+D800"]),
    ({"rank_range": [5]}, ["entries[0].rank_range", "two integers"]),
    ({"rank_range": ["a", "b"]}, ["entries[0].rank_range", "two integers"]),
    ({"rank_range": [1.5, "x"]}, ["entries[0].rank_range", "two integers"]),
])
def test_a_bad_board_is_refused_by_every_command_that_reads_it(server, board, tmp_path, capsys, entry, says):
    bad = json.loads(board.read_text())
    bad["entries"][0].update(entry)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))  # JSON writes a lone surrogate as its \ud800 escape
    before = path.read_bytes()
    server.reset_stats()
    refused(capsys, server, main(["leaderboard", "render", str(path), "--html", str(tmp_path / "p.html"),
                                  "--plot", str(tmp_path / "p.png")]), says=says)
    rc = main(["refresh", "--leaderboard", str(path), "--add", "GPT-4=litellm:model=openai/GPT-4",
               "--include_path", str(REPO / "task_configs"), "--apply_chat_template", "--no-progress",
               "--budget-usd", "0.3", "--output", str(tmp_path / "run")])
    refused(capsys, server, rc, says=says)
    assert path.read_bytes() == before and not (tmp_path / "run").exists()
    assert not (tmp_path / "p.html").exists() and not (tmp_path / "p.png").exists()


# ---------------------------------------------------------------------------------------- resume
@pytest.fixture(scope="module")
def stopped_run(server, bank, tmp_path_factory):
    """A run that stopped on its cap (CAP), with work left for a higher one."""
    out = tmp_path_factory.mktemp("stopped") / "run"
    assert main(rank_args(bank, out, "--budget-usd", str(CAP))) == 0
    report = json.loads((out / "ranking.json").read_text())
    assert report["stopped_because"] == "budget"
    return out, report


def copy_of(stopped_run, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(stopped_run[0], out)
    return out


def test_the_journal_header_records_the_settings(stopped_run):
    out, _ = stopped_run
    header = json.loads((out / "journal.jsonl").read_text().splitlines()[0])
    run = json.loads((out / "run.json").read_text())
    assert header["settings"] == run["settings"]
    assert header["settings"]["budget_usd"] == CAP and header["settings"]["min_items"] == 8


def test_a_changed_setting_on_resume_is_refused_naming_each_difference(server, stopped_run, tmp_path, capsys):
    out = copy_of(stopped_run, tmp_path)
    before = snapshot(out)
    server.reset_stats()
    rc = main(["rank", "--resume", str(out), "--max-items", "3", "--seed", "7", "--no-progress"])
    line = refused(capsys, server, rc, says=["max_items: journal none vs given 3", "seed: journal 0 vs given 7"])
    assert "min_items" not in line
    assert snapshot(out) == before


def test_settings_given_equal_to_the_journals_are_accepted(server, stopped_run, bank, tmp_path, capsys):
    out = copy_of(stopped_run, tmp_path)
    # the first run's whole command line again (its bank path, relative task folder...), cap unchanged
    args = rank_args(bank, out, "--budget-usd", str(CAP))
    args[args.index("--output"):args.index("--output") + 2] = ["--resume", str(out)]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "resumed" in err and "cap changed" not in err
    assert not [r for r in map(json.loads, (out / "journal.jsonl").read_text().splitlines()) if r["type"] == "cap"]


def test_an_edited_run_json_is_refused(server, stopped_run, tmp_path, capsys):
    out = copy_of(stopped_run, tmp_path)
    run = json.loads((out / "run.json").read_text())
    run["settings"]["budget_usd"] = 0.5
    run["settings"]["confidence"] = 0.9
    (out / "run.json").write_text(json.dumps(run))
    before = snapshot(out)
    server.reset_stats()
    rc = main(["rank", "--resume", str(out), "--no-progress"])
    refused(capsys, server, rc, says=["run.json was edited", f"budget_usd: journal {CAP} vs run.json 0.5",
                                      "confidence: journal 0.95 vs run.json 0.9"])
    assert snapshot(out) == before


def test_budget_on_resume_raises_the_cap_and_is_journaled(server, stopped_run, tmp_path, capsys):
    out = copy_of(stopped_run, tmp_path)
    spent_before = stopped_run[1]["total_cost_usd"]
    server.reset_stats()
    assert main(["rank", "--resume", str(out), "--budget-usd", "0.2", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert f"cap changed: ${CAP:g} → $0.2 (journaled)" in err
    recs = [json.loads(x) for x in (out / "journal.jsonl").read_text().splitlines()]
    (cap,) = [r for r in recs if r["type"] == "cap"]
    assert cap["budget_usd"] == 0.2 and cap["previous_usd"] == CAP
    assert cap["spent_usd"] == pytest.approx(spent_before)
    report = json.loads((out / "ranking.json").read_text())
    assert report["budget_usd"] == 0.2
    assert spent_before < report["total_cost_usd"] <= 0.2
    assert server.stats()["served"] > 0  # the higher cap bought more items
    # the new cap is the run's cap from now on: a further resume keeps it without being told
    server.reset_stats()
    assert main(["rank", "--resume", str(out), "--no-progress"]) in (0, 1)
    assert json.loads((out / "ranking.json").read_text())["budget_usd"] == 0.2


def test_budget_on_resume_under_the_spend_is_refused(server, stopped_run, tmp_path, capsys):
    out = copy_of(stopped_run, tmp_path)
    before = snapshot(out)
    spent = stopped_run[1]["total_cost_usd"]
    low = spent / 2
    server.reset_stats()
    rc = main(["rank", "--resume", str(out), "--budget-usd", f"{low:.6g}", "--no-progress"])
    refused(capsys, server, rc, says=["already spent", "a cap under the spend is refused"])
    assert snapshot(out) == before


def test_an_incomplete_journal_line_is_refused_naming_file_and_line(server, stopped_run, tmp_path, capsys):
    out = copy_of(stopped_run, tmp_path)
    lines = (out / "journal.jsonl").read_text().splitlines()
    n = next(k for k, x in enumerate(lines) if json.loads(x)["type"] == "score")
    rec = json.loads(lines[n])
    del rec["raw"]  # valid JSON, but a score without its raw metric value
    lines[n] = json.dumps(rec)
    (out / "journal.jsonl").write_text("\n".join(lines) + "\n")
    before = snapshot(out)
    server.reset_stats()
    rc = main(["rank", "--resume", str(out), "--no-progress"])
    refused(capsys, server, rc, says=[str(out / "journal.jsonl"), f"line {n + 1}", "'raw'"])
    assert snapshot(out) == before

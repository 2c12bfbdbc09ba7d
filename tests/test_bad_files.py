"""Bad input and output files through the real command line: each is one ``error:`` line on
stderr, exit status 2, no traceback, and nothing written (an input given as an output is left
byte for byte as it was). Issue 19, item 5."""

from __future__ import annotations

import gzip
import json
import os
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.data.files import MAX_FILE_MB_ENV, read_bytes
from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.irt.response_model import ContinuousResponseModel
from lm_eval_adaptive.errors import InputError

REPO = Path(__file__).resolve().parents[1]
WMT = "wmt24_en-de"


def refused(capsys, argv, *, says=(), absent=(), unchanged=()) -> str:
    """Run the CLI on ``argv``: exit 2, exactly one stderr line, ``error: ...`` containing each of
    ``says``, no traceback, none of ``absent`` created and each of ``unchanged`` as it was."""
    before = {Path(p): Path(p).read_bytes() for p in unchanged}
    rc = main([str(a) for a in argv])
    cap = capsys.readouterr()
    lines = [x for x in cap.err.splitlines() if x.strip()]
    assert rc == 2, cap.err
    assert len(lines) == 1 and lines[0].startswith("error: "), cap.err
    assert "Traceback" not in cap.err + cap.out
    for text in says:
        assert text in lines[0]
    for p in absent:
        assert not Path(p).exists(), p
    for p, data in before.items():
        assert p.read_bytes() == data, f"{p} was changed"
    return lines[0]


def make_bank(path) -> Path:
    ids = [str(i) for i in range(30)]
    ItemBank(item_ids=np.array(ids, dtype=object), b=np.random.default_rng(0).normal(0, 1, len(ids)),
             model=ContinuousResponseModel(k=0.1), scaling="global", lo=0.0, hi=1.0,
             input_tokens=100.0, output_tokens=100.0, task=WMT, metric="bleu").save(path)
    return Path(path)


def rank_argv(bank, out):
    return ["rank", "--models", "A=litellm:model=openai/A", "B=litellm:model=openai/B", "--tasks", WMT,
            "--bank", bank, "--include_path", REPO / "task_configs", "--budget-usd", "1",
            "--price", "A=1,3", "B=1,3", "--output", out, "--no-progress"]


def write_table(path, n_models=5, n_items=12) -> Path:
    rng = np.random.default_rng(1)
    rows = ["model,item,score"] + [f"m{j},i{i},{rng.uniform():.4f}" for j in range(n_models) for i in range(n_items)]
    Path(path).write_text("\n".join(rows) + "\n")
    return Path(path)


def board(path, **changes) -> Path:
    """A small valid leaderboard file (as ``leaderboard`` writes it), with ``changes`` applied."""
    entries = [{"model": m, "source": "full_run", "metric": {"value": v}, "rank": k + 1, "theta": t, "se": 0.1,
                "theta_ci95": [t - 0.196, t + 0.196], "items": 30, "tie_group": None}
               for k, (m, v, t) in enumerate([("A", 0.3, 1.0), ("B", 0.2, 0.0), ("C", 0.1, -1.0)])]
    lb = {"format": "lm-eval-adaptive/leaderboard", "version": 1, "task": WMT, "metric": "bleu",
          "item_field": "id", "history": "wmt24/en-de/bleu", "confidence": 0.95, "entries": entries,
          "bank_id": "abc", "updated": "2025-01-01T00:00:00+00:00"}
    for key, value in changes.items():
        if key.startswith("entry0_"):
            field = key.removeprefix("entry0_")
            if value is DELETE:
                del entries[0][field]
            else:
                entries[0][field] = value
        elif value is DELETE:
            del lb[key]
        else:
            lb[key] = value
    Path(path).write_text(json.dumps(lb))
    return Path(path)


DELETE = object()


# ------------------------------------------------------------------ corrupt and oversized inputs
def test_a_corrupt_gzip_bank_is_one_error_line_and_nothing_is_written(tmp_path, capsys):
    good = gzip.compress(json.dumps({"items": [1] * 2000}).encode())
    corrupt = tmp_path / "bank.json.gz"
    corrupt.write_bytes(good[:20] + bytes(b ^ 0xFF for b in good[20:60]) + good[60:])  # was: zlib.error
    refused(capsys, rank_argv(corrupt, tmp_path / "run"), says=[str(corrupt), "corrupt gzip"],
            absent=[tmp_path / "run"])
    truncated = tmp_path / "cut.json.gz"
    truncated.write_bytes(good[: len(good) // 2])
    refused(capsys, rank_argv(truncated, tmp_path / "run"), says=[str(truncated)], absent=[tmp_path / "run"])


def _bomb(path, mb: float) -> Path:
    """A gzip file of valid JSON that inflates to ``mb`` MiB (mostly spaces) from a few KiB."""
    with gzip.open(path, "wb") as f:
        f.write(b"{" + b" " * int(mb * (1 << 20)) + b"}")
    return Path(path)


def test_inputs_that_inflate_past_the_limit_are_refused_naming_the_file_and_the_limit(tmp_path, capsys,
                                                                                         monkeypatch):
    monkeypatch.setenv(MAX_FILE_MB_ENV, "0.5")
    bank = _bomb(tmp_path / "bank.json.gz", 2)
    assert bank.stat().st_size < 20_000
    refused(capsys, rank_argv(bank, tmp_path / "run"), says=[str(bank), "0.5 MiB", MAX_FILE_MB_ENV, "decompressed"],
            absent=[tmp_path / "run"])
    # a leaderboard larger than the limit
    big = board(tmp_path / "lb.json", padding=" " * (1 << 20))
    refused(capsys, ["leaderboard", "render", big, "--html", tmp_path / "page.html"],
            says=[str(big), "0.5 MiB", MAX_FILE_MB_ENV], absent=[tmp_path / "page.html"])
    # a response table and a costs file
    with gzip.open(tmp_path / "t.csv.gz", "wt") as f:
        f.write(write_table(tmp_path / "t.csv").read_text() + "\n" * (1 << 20))
    refused(capsys, ["calibrate", tmp_path / "t.csv.gz", "--out", tmp_path / "bank_out.json"],
            says=["t.csv.gz", "0.5 MiB"], absent=[tmp_path / "bank_out.json"])
    costs = tmp_path / "costs.json"
    costs.write_text('{"m0": {"input_per_mtok": 1, "output_per_mtok": 3}' + " " * (1 << 20) + "}")
    refused(capsys, ["backtest", tmp_path / "t.csv", "--costs", costs, "--json", tmp_path / "bt.json",
                     "--folds", "1", "--seeds", "1", "--holdout-size", "2"],
            says=[str(costs), "0.5 MiB"], absent=[tmp_path / "bt.json"])
    # under a larger limit the same bank is read (then refused as not a bank, which it is not)
    monkeypatch.setenv(MAX_FILE_MB_ENV, "4")
    line = refused(capsys, rank_argv(bank, tmp_path / "run"), says=[str(bank)], absent=[tmp_path / "run"])
    assert MAX_FILE_MB_ENV not in line
    monkeypatch.setenv(MAX_FILE_MB_ENV, "lots")
    refused(capsys, rank_argv(bank, tmp_path / "run"), says=[MAX_FILE_MB_ENV, "'lots'"], absent=[tmp_path / "run"])


def test_an_oversized_gzip_is_read_in_chunks_and_never_held_whole(tmp_path, monkeypatch):
    """Reading stops at the limit: memory stays near the limit, not the inflated size."""
    bomb = _bomb(tmp_path / "b.json.gz", 64)  # 64 MiB inflated, ~64 KiB on disk
    monkeypatch.setenv(MAX_FILE_MB_ENV, "2")
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match="larger than 2 MiB once decompressed"):
            read_bytes(bomb, what="item bank")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak  # the limit plus a chunk or two, not 64 MiB


# ------------------------------------------------------------------------------- --ray
def test_backtest_ray_with_a_bad_address_fails_before_any_work(tmp_path, capsys, monkeypatch):
    pytest.importorskip("ray")
    import lm_eval_adaptive.cli.main as cli_main

    monkeypatch.setattr(cli_main, "load_any_table", lambda *a, **k: pytest.fail("a table was loaded"))
    refused(capsys, ["backtest", "wmt24/en-de/bleu", "--ray", "bogus", "--json", tmp_path / "bt.json"],
            says=["--ray", "'bogus'", "not a Ray address"], absent=[tmp_path / "bt.json"])


# ---------------------------------------------------------------------- malformed leaderboards
MALFORMED = {
    "not JSON": lambda p: p.write_text("{not json"),
    "not UTF-8": lambda p: p.write_bytes(b"\xff\xfe\x00garbage"),
    "an array": lambda p: p.write_text("[1, 2]"),
    "no entries": lambda p: board(p, entries=DELETE),
    "entries a string": lambda p: board(p, entries="A, B"),
    "an entry a number": lambda p: board(p, entries=[5]),
    "an entry without model": lambda p: board(p, entry0_model=DELETE),
    "theta a string": lambda p: board(p, entry0_theta="high"),
    "theta_ci95 one number": lambda p: board(p, entry0_theta_ci95=[1.0]),
    "rank missing": lambda p: board(p, entry0_rank=DELETE),
    "rank a float": lambda p: board(p, entry0_rank=1.5),
    "metric a string": lambda p: board(p, metric=3),
    "estimate without interval": lambda p: board(p, entry0_metric={"estimate": 0.3}),
    "refreshes of strings": lambda p: board(p, refreshes=["yesterday"]),
    "budget a string": lambda p: board(p, refreshes=[{"budget_usd": "lots"}]),
    "confidence a string": lambda p: board(p, confidence="high"),
}


@pytest.mark.parametrize("fault", list(MALFORMED))
def test_leaderboard_render_refuses_a_malformed_board_naming_the_file_and_field(tmp_path, capsys, fault):
    good = board(tmp_path / "good.json")
    assert main(["leaderboard", "render", str(good), "--html", str(tmp_path / "good.html")]) == 0
    capsys.readouterr()
    bad = tmp_path / "bad.json"
    MALFORMED[fault](bad)
    line = refused(capsys, ["leaderboard", "render", bad, "--html", tmp_path / "page.html", "--plot",
                            tmp_path / "page.png"], says=["bad.json"],
                   absent=[tmp_path / "page.html", tmp_path / "page.png"])
    field = {"theta a string": "entries[0].theta", "theta_ci95 one number": "entries[0].theta_ci95",
             "rank a float": "entries[0].rank", "metric a string": "field metric",
             "budget a string": "refreshes[0].budget_usd", "an entry without model": "entries[0].model"}.get(fault)
    if field:
        assert field in line


# ------------------------------------------------------------------------- unwritable outputs
def _outputs(tmp_path):
    """(argv, the output path) of every command that writes files, its output under a path whose
    'folder' is a file."""
    table = write_table(tmp_path / "t.csv")
    bank = make_bank(tmp_path / "bank.json")
    lb = board(tmp_path / "lb.json")
    blocked = tmp_path / "afile"
    blocked.write_text("x")
    out = blocked / "out"
    return {
        "calibrate --out": ["calibrate", table, "--out", out],
        "backtest --json": ["backtest", table, "--json", out, "--folds", "1", "--seeds", "1"],
        "backtest --plot": ["backtest", table, "--plot", out],
        "demo --json": ["demo", "--json", out],
        "demo --plot": ["demo", "--plot", out],
        "export-table --out": ["export-table", "wmt24/en-de/bleu", "--out", out],
        "leaderboard --out": ["leaderboard", "--history", table, "--task", WMT, "--metric", "bleu", "--out", out],
        "render --html": ["leaderboard", "render", lb, "--html", out],
        "render --plot": ["leaderboard", "render", lb, "--plot", out],
        "rank --output": rank_argv(bank, out),
        "refresh --output": ["refresh", "--leaderboard", lb, "--add", "litellm:model=openai/A", "--budget-usd",
                             "1", "--include_path", REPO / "task_configs", "--output", out],
        "run --output_path": ["run", "--model", "litellm", "--model_args", "model=openai/A", "--tasks", WMT,
                              "--include_path", REPO / "task_configs", "--adaptive", "--bank", bank,
                              "--output_path", out],
        "run --plot": ["run", "--model", "litellm", "--model_args", "model=openai/A", "--tasks", WMT,
                       "--include_path", REPO / "task_configs", "--adaptive", "--bank", bank, "--plot", out],
    }, out


@pytest.mark.parametrize("command", ["calibrate --out", "backtest --json", "backtest --plot", "demo --json",
                                     "demo --plot", "export-table --out", "leaderboard --out", "render --html",
                                     "render --plot", "rank --output", "refresh --output", "run --output_path",
                                     "run --plot"])
def test_an_output_that_cannot_be_written_is_refused_before_any_work(tmp_path, capsys, monkeypatch, command):
    import lm_eval_adaptive.cli.main as cli_main

    monkeypatch.setattr(cli_main, "run_backtests", lambda *a, **k: pytest.fail("backtest computed"))
    monkeypatch.setattr(cli_main, "calibrate_checked", lambda *a, **k: pytest.fail("calibrated"))
    argv, out = _outputs(tmp_path)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    refused(capsys, argv[command], says=[str(out), "afile is not a folder"])
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_an_output_that_is_a_folder_or_twice_the_same_file_is_refused(tmp_path, capsys):
    table = write_table(tmp_path / "t.csv")
    refused(capsys, ["backtest", table, "--json", tmp_path], says=["--json", "is a folder"])
    refused(capsys, ["backtest", table, "--json", tmp_path / "x.png", "--plot", tmp_path / "x.png"],
            says=["--plot and --json are the same file"], absent=[tmp_path / "x.png"])


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write anywhere")
def test_an_output_in_a_read_only_folder_is_refused(tmp_path, capsys):
    table = write_table(tmp_path / "t.csv")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        refused(capsys, ["calibrate", table, "--out", ro / "bank.json"], says=["not writable"],
                absent=[ro / "bank.json"])
    finally:
        ro.chmod(0o700)


# ------------------------------------------------------------------------ an output equal to an input
def test_render_refuses_to_write_the_page_over_its_own_board(tmp_path, capsys):
    lb = board(tmp_path / "board.json")
    refused(capsys, ["leaderboard", "render", lb, "--html", lb], says=["--html", "is also an input"], unchanged=[lb])
    # the same file by another spelling, or through a link
    (tmp_path / "sub").mkdir()
    refused(capsys, ["leaderboard", "render", lb, "--plot", tmp_path / "sub" / ".." / "board.json"],
            says=["--plot", "is also an input"], unchanged=[lb])
    (tmp_path / "link.json").symlink_to(lb)
    refused(capsys, ["leaderboard", "render", tmp_path / "link.json", "--html", lb], says=["is also an input"],
            unchanged=[lb])


def test_calibrate_and_export_refuse_to_overwrite_their_input(tmp_path, capsys, monkeypatch):
    table = write_table(tmp_path / "t.csv")
    refused(capsys, ["calibrate", table, "--out", table], says=["--out", "is also an input"], unchanged=[table])
    monkeypatch.chdir(tmp_path)
    refused(capsys, ["calibrate", "t.csv", "--out", tmp_path / "t.csv"], says=["is also an input"], unchanged=[table])
    refused(capsys, ["export-table", table, "--out", table], says=["is also an input"], unchanged=[table])
    refused(capsys, ["backtest", table, "--json", table], says=["is also an input"], unchanged=[table])

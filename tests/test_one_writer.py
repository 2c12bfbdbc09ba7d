"""One writer per run folder and per leaderboard, and a full disk: the real CLI against the replay endpoint.

* A run folder is written by one process: a second ``rank`` into a folder another process is writing
  (a fresh run or a resume) is refused with one ``error:`` line before it writes anything, and the
  first run's files are untouched (it can still be resumed).
* A leaderboard is read and written back by one ``refresh`` at a time: a second refresh of a board
  being refreshed is refused, asking nothing, and the board keeps the first's model; run again
  afterwards, it adds its own (the board keeps both).
* A file that cannot be written (``RLIMIT_FSIZE`` in the child: ``EFBIG``, as a full disk gives
  ``ENOSPC``) is one ``error:`` line with no traceback; the journal reads back whole, and a resume
  with room pays nothing twice and, where the journal was complete, ends with the result of a run
  that was never stopped.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_harness_cli import make_bank

from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.live.journal import Journal
from lm_eval_adaptive.live.journal_room import ROOM_PER_CALL

REPO = Path(__file__).resolve().parents[1]
TASK = "wmt24_en-de"
MODELS = ["GPT-4=litellm:model=openai/GPT-4", "Aya23=litellm:model=openai/Aya23"]


@pytest.fixture(scope="module")
def server(replay_server):
    return replay_server


@pytest.fixture(scope="module")
def bank(tmp_path_factory):
    return make_bank(tmp_path_factory.mktemp("bank") / "bank.json")


def rank_args(bank, out, *extra):
    return ["rank", "--models", *MODELS, "--price", "GPT-4=1,3", "Aya23=1,3", "--tasks", TASK, "--bank", str(bank),
            "--include_path", str(REPO / "task_configs"), "--apply_chat_template", "--item-field", "doc_id",
            "--min-items", "4", "--max-items", "12", "--budget-usd", "0.05", "--no-progress", "--backoff", "0.05",
            "--output", str(out), *extra]


def error_lines(err: str) -> list[str]:
    assert "Traceback" not in err, err
    return [ln for ln in err.splitlines() if ln.startswith("error:")]


def _env():
    return dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _child(args, *, fsize: int | None = None) -> subprocess.Popen:
    """The command in a child process; ``fsize``: no file it writes may grow past this many bytes (a
    write past it fails with EFBIG, as a full disk fails with ENOSPC)."""

    def limit():
        if fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of being killed
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.Popen([sys.executable, "-m", "lm_eval_adaptive.cli.main", *args], env=_env(), cwd=str(REPO),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=limit)


def _wait_for(path: Path, marker: bytes, proc, n: int = 1, timeout: float = 180) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if path.exists() and path.read_bytes().count(marker) >= n:
            return
        if proc.poll() is not None:
            raise AssertionError(f"the first command ended early: {proc.stderr.read()[-2000:]}")
        time.sleep(0.05)
    raise AssertionError("no progress")


@pytest.fixture(scope="module")
def clean_run(server, bank, tmp_path_factory):
    """The run never stopped: the result a stopped and resumed one must end with."""
    out = tmp_path_factory.mktemp("clean") / "run"
    assert main(rank_args(bank, out)) == 0
    return json.loads((out / "ranking.json").read_text())


def assert_exact(report: dict, j: Journal, clean: dict) -> None:
    """The resumed run's result is its journal's, every paid answer in it once: its items are the score
    records, its spend every record's charge (no call lost in flight, charged at its reservation), and
    every pair settled both here and in the run never stopped is ordered the same way."""
    assert report["stopped_because"] != "interrupted"
    assert report["total_items"] == len(j.scores()) == sum(e["items"] for e in report["ranking"])
    charged = [x.get("cost_usd") or 0.0 for x in j.records() if x.get("type") in ("score", "failure", "attempt")]
    assert report["total_cost_usd"] == pytest.approx(sum(charged))
    up = 1 - (1 - clean["confidence"]) / 2
    P, Q = report["pairwise"], clean["pairwise"]
    assert not [(a, b) for a in P for b in P[a] if P[a][b] > up and Q[b][a] > up]


def in_flight(j: Journal) -> set:
    """(model, item) of every request without its outcome: calls a resume can only charge, never see."""
    done = {(r["model"], r["item_id"]) for r in j.records() if r["type"] in ("score", "failure")}
    return {(r["model"], r["item_id"]) for r in j.records("request")} - done


# ------------------------------------------------------------------------------------ run folders
def test_a_second_writer_of_a_run_folder_is_refused_and_the_first_finishes(server, bank, tmp_path, capsys):
    out = tmp_path / "run"
    server.latency = 0.5  # the first command still runs while the second is refused
    try:
        first = _child(rank_args(bank, out))
        _wait_for(out / "journal.jsonl", b'"type":"score"', first)
        before = (out / "run.json").read_bytes()
        # a resume of the folder while its run goes on, and a new run into it
        for argv in (["rank", "--resume", str(out), "--no-progress"], rank_args(bank, out)):
            rc = main(argv)
            errors = error_lines(capsys.readouterr().err)
            assert rc == 2 and len(errors) == 1, errors
            assert (out / "run.json").read_bytes() == before
        first.wait(timeout=300)
    finally:
        server.latency = 0.0
    assert first.returncode == 0, first.stderr[-2000:] if isinstance(first.stderr, str) else first.stderr.read()
    assert json.loads((out / "ranking.json").read_text())["stopped_because"] != "interrupted"
    assert (out / "run.json").read_bytes() == before


def test_a_run_folder_locked_by_another_process_is_not_written(server, bank, tmp_path, capsys):
    """Two rank commands into one new folder at once: the one that finds the folder locked writes nothing
    there (run.json is written only under the lock), so the other's run stays resumable."""
    out = tmp_path / "run"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                               "from lm_eval_adaptive.writer_lock import run_folder_lock\n"
                               f"lock = run_folder_lock({str(out)!r}).acquire()\nprint('held', flush=True)\n"
                               "time.sleep(120)"], env=_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        server.reset_stats()
        rc = main(rank_args(bank, out))
        errors = error_lines(capsys.readouterr().err)
        assert rc == 2 and len(errors) == 1 and "another process is writing this run folder" in errors[0], errors
        assert list(out.iterdir()) == [] and server.stats()["requests"] == 0
    finally:
        holder.kill()
        holder.wait()


# ----------------------------------------------------------------------------------- leaderboards
@pytest.fixture
def board(tmp_path):
    path = tmp_path / "lb.json"
    assert main(["leaderboard", "--history", "wmt24/en-de/bleu", "--task", TASK, "--metric", "bleu",
                 "--item-field", "id", "--models", "Aya23", "CUNI-NL", "IKUN", "ONLINE-A", "--out", str(path)]) == 0
    return path


def refresh_args(board, name, system, out):
    return ["refresh", "--leaderboard", str(board), "--add", f"{name}=litellm:model=openai/{system}",
            "--price", f"{name}=1,3", "--budget-usd", "0.05", "--min-items", "3", "--max-items", "5",
            "--include_path", str(REPO / "task_configs"), "--apply_chat_template", "--no-progress",
            "--backoff", "0.05", "--output", str(out)]


def test_two_refreshes_of_one_board_one_at_a_time_and_the_board_keeps_both(server, board, tmp_path, capsys):
    server.latency = 0.5  # the first command still runs while the second is refused
    try:
        first = _child(refresh_args(board, "First", "GPT-4", tmp_path / "r1"))
        _wait_for(tmp_path / "r1" / "journal.jsonl", b'"type":"request"', first)
        served = server.stats()["served"]
        rc = main(refresh_args(board, "Second", "Aya23", tmp_path / "r2"))
        errors = error_lines(capsys.readouterr().err)
        assert rc == 2 and len(errors) == 1 and "another process is writing this leaderboard" in errors[0], errors
        assert not (tmp_path / "r2").exists()
        first.wait(timeout=300)
        assert server.stats()["served"] >= served
    finally:
        server.latency = 0.0
    assert first.returncode == 0, first.stderr.read()[-2000:]
    assert "First" in {e["model"] for e in json.loads(board.read_text())["entries"]}
    assert main(refresh_args(board, "Second", "Aya23", tmp_path / "r2")) == 0
    assert {"First", "Second"} <= {e["model"] for e in json.loads(board.read_text())["entries"]}


# ------------------------------------------------------------------------------------- a full disk
def _journal_ok(out: Path) -> Journal:
    j = Journal.open(out, writable=False)  # every line reads back (a torn last line would be dropped)
    assert j.dropped_tail is None
    return j


def test_a_result_that_cannot_be_written_is_one_error_line_and_the_resume_is_exact(server, bank, clean_run,
                                                                                     tmp_path):
    """The journal is written, the plot cannot be (a folder is in its place): one error line; the resume
    asks nothing and writes the result of the run that never stopped."""
    out = tmp_path / "run"
    (out / "ranking.png").mkdir(parents=True)
    server.reset_stats()
    proc = _child(rank_args(bank, out))
    _, err = proc.communicate(timeout=300)
    errors = error_lines(err)
    assert proc.returncode == 1 and len(errors) == 1, err[-3000:]
    assert "ranking.png" in errors[0] and "--resume" in errors[0], errors
    assert not (out / "ranking.json").exists()
    (out / "ranking.png").rmdir()
    j = _journal_ok(out)
    served = server.stats()["served"]
    assert served == len(j.scores()) > 0 and not in_flight(j)
    assert main(["rank", "--resume", str(out), "--no-progress"]) == 0
    assert server.stats()["served"] == served  # nothing asked again
    assert_exact(json.loads((out / "ranking.json").read_text()), _journal_ok(out), clean_run)


def test_a_full_disk_in_the_journal_keeps_it_whole_and_the_resume_pays_nothing_twice(server, bank, clean_run,
                                                                                      tmp_path):
    out = tmp_path / "run"
    server.reset_stats()
    # room for the first calls' records, not for the run's: the journal cannot grow past it mid-run
    proc = _child(rank_args(bank, out), fsize=3 * ROOM_PER_CALL + 2_500)
    _, err = proc.communicate(timeout=300)
    errors = error_lines(err)
    assert proc.returncode == 1 and len(errors) == 1 and "File too large" in errors[0], err[-3000:]
    j = _journal_ok(out)
    asked = {(r["model"], r["item_id"]) for r in j.records("request")}
    # the full journal refused the next request before its call: every call sent was answered and journaled
    assert server.stats()["served"] == len(asked) == len(j.scores()) >= 1 and not in_flight(j)
    assert main(["rank", "--resume", str(out), "--no-progress"]) == 0
    j = _journal_ok(out)
    requests = [(r["model"], r["item_id"]) for r in j.records("request")]
    assert len(requests) == len(set(requests)) == server.stats()["served"] > len(asked)  # each asked once
    assert_exact(json.loads((out / "ranking.json").read_text()), j, clean_run)
    assert not list(out.glob(".*.tmp")) and (out / "journal.jsonl").read_bytes().endswith(b"}\n")  # no room left

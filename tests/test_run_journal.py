"""`run --adaptive` journaled and resumable: killed with SIGKILL at three points and resumed with
`--resume`, every document is requested from the endpoint once in all, and the results file is the
uninterrupted run's.

Through the real CLI (``main``, in a child process forked for each run, killed ones included), the real
harness, litellm and HTTP to the replay endpoint. The kill points are exact: `LM_EVAL_ADAPTIVE_TEST_KILL_AFTER=batch:N` makes the process
SIGKILL itself right after its journal's N-th batch record (one document a batch here) is written,
`sent:N` right after the N-th requests are journaled as about to be sent (lm_eval_adaptive/live/run_journal.py).
"""

from __future__ import annotations

import glob
import json
import os
import signal
import sys
import traceback
from pathlib import Path

import pytest

from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.live.run_journal import KILL_AFTER_ENV
from lm_eval_adaptive.replay.server import max_answers_per_item

from tests.test_harness_cli import TASK, make_bank, run_args

SYSTEM = "Claude-3.5"
N_DOCS = 8
FOLDER = f"openai__{SYSTEM}"


@pytest.fixture(scope="module")
def server(replay_server):
    return replay_server


@pytest.fixture(scope="module")
def whole(server, tmp_path_factory):
    """The uninterrupted run, in this process (the runs of the tests are forks of it, with everything it
    loaded): (its bank, its output folder, the endpoint's counts)."""
    d = tmp_path_factory.mktemp("whole")
    bank = make_bank(d / "bank.json", ids=range(100, 160))
    server.reset_stats()
    assert main(adaptive_args(bank, d / "out")) == 0
    stats = server.stats()
    assert stats["per_model"] == {SYSTEM: N_DOCS}
    return bank, d / "out", stats


def adaptive_args(bank, out, *extra):
    return run_args(SYSTEM, out, "--adaptive", "--bank", bank, "--item-field", "doc_id", "--min-items", str(N_DOCS),
                    "--max-items", str(N_DOCS), "--budget-usd", "1", "--no-progress", *extra)


def cli(args, log, kill_after=None) -> int:
    """``lm-eval-adaptive ARGS`` in a child process, its stdout and stderr in ``log``; its exit code (``-9``:
    killed by SIGKILL). The child is a fork of this process, which has litellm and the harness loaded
    already: seconds instead of a fresh interpreter's ~20 s on a busy machine."""
    pid = os.fork()
    if pid == 0:  # the child: the command, then out, whatever happens
        code = 99
        try:
            with open(log, "w") as f:
                sys.stdout = sys.stderr = f
                if kill_after is not None:
                    os.environ[KILL_AFTER_ENV] = kill_after
                try:
                    code = main(args)
                except BaseException:
                    traceback.print_exc(file=f)
                    raise
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def journaled_documents(out) -> int:
    path = Path(out) / FOLDER / "journal.jsonl"
    return sum(len(json.loads(x).get("docs", ())) for x in path.read_text().splitlines()[1:]) if path.exists() else 0


def result(out) -> dict:
    (f,) = glob.glob(str(Path(out) / FOLDER / "results_*.json"))
    return json.loads(Path(f).read_text())


def samples(out) -> list:
    (f,) = glob.glob(str(Path(out) / FOLDER / "samples_*.jsonl"))
    return sorted((json.loads(x) for x in Path(f).read_text().splitlines()), key=lambda r: r["doc_id"])


def comparable(block: dict) -> dict:
    """The adaptive block without what differs between two runs of the same command (none of it a figure)."""
    return {k: v for k, v in block.items() if k not in ("task_args",)}


def test_killed_three_times_and_resumed_pays_each_document_once_and_writes_the_same_results(
        server, whole, tmp_path, capsys):
    bank, whole_out, whole_stats = whole
    log = tmp_path / "log.txt"
    # killed after the 1st journaled document, mid-run (the 4th), and after the last one (results not written)
    out = tmp_path / "killed"
    server.reset_stats()
    for resume, kill_after in ((False, 1), (True, 4), (True, N_DOCS)):
        before = journaled_documents(out)
        code = cli(adaptive_args(bank, out, *(["--resume"] if resume else [])), log, kill_after=f"batch:{kill_after}")
        assert code == -signal.SIGKILL, log.read_text()[-3000:]
        assert journaled_documents(out) == kill_after > before
        assert not glob.glob(str(out / FOLDER / "results_*.json"))
        assert server.stats()["per_model"] == {SYSTEM: kill_after}  # nothing journaled was asked again
    # the same command without --resume, or a resume with other settings, is refused before anything is asked
    assert main(adaptive_args(bank, out)) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "--resume" in err, err
    refused_resumes(bank, out, tmp_path, capsys)
    assert server.stats()["per_model"] == {SYSTEM: N_DOCS} and journaled_documents(out) == N_DOCS
    # resumed to the end: the final pass takes every journaled answer from the cache
    assert cli(adaptive_args(bank, out, "--resume"), log) == 0, log.read_text()[-3000:]
    stats = server.stats()
    assert stats["per_model"] == {SYSTEM: N_DOCS} and max_answers_per_item(stats) == 1
    assert stats["per_item"][SYSTEM].keys() == whole_stats["per_item"][SYSTEM].keys()  # the same documents
    a, b = result(whole_out), result(out)
    assert comparable(a["adaptive"]) == comparable(b["adaptive"])  # θ̂, SE, estimate, items, spend, trajectory
    assert a["results"] == b["results"] and a["n-samples"] == b["n-samples"]
    assert [(s["doc_id"], s["resps"], s["bleu"]) for s in samples(whole_out)] == \
        [(s["doc_id"], s["resps"], s["bleu"]) for s in samples(out)]
    # the finished run's journal is kept beside its results, and the folder is free for the next run
    assert not (out / FOLDER / "journal.jsonl").exists()
    (kept,) = glob.glob(str(out / FOLDER / "journal_*.jsonl"))
    assert journaled_documents(out) == 0 and sum(len(json.loads(x).get("docs", ()))
                                                 for x in Path(kept).read_text().splitlines()[1:]) == N_DOCS


def refused_resumes(bank, out, tmp_path, capsys):
    """A resume with another budget, harness seed or bank, or with no journal: one error line each."""
    for change, named in ((["--budget-usd", "2"], "budget_usd"), (["--seed", "0,1234,1234,7"], "seed")):
        args = adaptive_args(bank, out, "--resume")
        if change[0] in args:
            k = args.index(change[0])
            args[k:k + 2] = change
        else:
            args += change
        capsys.readouterr()
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.count("error:") == 1 and named in err and "journal" in err, err
    other = make_bank(tmp_path / "other.json", ids=range(100, 161))
    assert main(adaptive_args(other, out, "--resume")) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "banks" in err, err
    assert main(adaptive_args(bank, tmp_path / "none", "--resume")) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "no journal" in err, err


def test_requests_lost_in_flight_are_charged_on_resume(server, whole, tmp_path):
    """Killed after the 3rd batch's requests were journaled as about to be sent: the resume cannot know
    whether the provider got them, so it charges their worst case, as a failed attempt that was sent,
    and asks again; everything else is the uninterrupted run's."""
    bank, whole_out, _ = whole
    log = tmp_path / "log.txt"
    out = tmp_path / "lost"
    server.reset_stats()
    assert cli(adaptive_args(bank, out), log, kill_after="sent:3") == -signal.SIGKILL, log.read_text()[-3000:]
    journal = [json.loads(x) for x in (out / FOLDER / "journal.jsonl").read_text().splitlines()]
    assert [r["type"] for r in journal[1:]] == ["sent", "batch", "sent", "batch", "sent"]
    reserved = journal[-1]["reserved_usd"]
    assert server.stats()["per_model"] == {SYSTEM: 2}
    assert cli(adaptive_args(bank, out, "--resume"), log) == 0, log.read_text()[-3000:]
    assert server.stats()["per_model"] == {SYSTEM: N_DOCS}  # the kill came before the 3rd was sent
    a, b = result(whole_out)["adaptive"][TASK], result(out)["adaptive"][TASK]
    assert b["calls"]["attempts"] == a["calls"]["attempts"] + 1 == N_DOCS + 1
    assert b["calls"]["billed_failures"] == a["calls"]["billed_failures"] + 1 == 1
    assert b["calls"]["billed_failures_usd"] == pytest.approx(reserved) and reserved > 0
    assert b["cost_usd"] == pytest.approx(a["cost_usd"] + reserved)
    for k in ("theta", "se", "items", "metric_estimate", "administered", "trajectory"):
        assert b[k] == a[k], k


def test_a_resumed_run_asks_the_judge_nothing_it_journaled(server, tmp_path):
    """AlpacaEval with an LLM judge (answered by the endpoint): killed after the 2nd of 3 documents and
    resumed, the model and the judge are each asked once per document in all, the final pass included."""
    from lm_eval_adaptive.harness.llm_judge import clear_judge_cache
    from tests.test_edge import ALPACA, JUDGE, JUDGED, judge_metadata
    from tests.test_edge import make_bank as edge_bank

    bank = edge_bank(tmp_path / "bank.json", task=ALPACA, metric="judge")
    log = tmp_path / "log.txt"

    def args(out, *extra):
        return run_args(JUDGED[0], out, "--adaptive", "--bank", bank, "--min-items", "3", "--max-items", "3",
                        "--price", "1,3", "--no-progress", *judge_metadata(server), *extra, task=ALPACA)

    clear_judge_cache()
    server.reset_stats()
    assert main(args(tmp_path / "whole")) == 0
    judge = JUDGE.split("/")[-1]  # the judge model, as the endpoint counts it
    assert server.stats()["judge"] == 3 and server.stats()["per_model"] == {JUDGED[0]: 3, judge: 3}
    out = tmp_path / "out"
    server.reset_stats()
    clear_judge_cache()  # the forks below start with no judgement memoised
    assert cli(args(out), log, kill_after="batch:2") == -signal.SIGKILL, log.read_text()[-3000:]
    assert server.stats()["judge"] == 2 and server.stats()["per_model"] == {JUDGED[0]: 2, judge: 2}
    assert cli(args(out, "--resume"), log) == 0, log.read_text()[-3000:]
    assert server.stats()["judge"] == 3 and server.stats()["per_model"] == {JUDGED[0]: 3, judge: 3}
    folder = f"openai__{JUDGED[0]}"
    (a,) = glob.glob(str(tmp_path / "whole" / folder / "results_*.json"))
    (b,) = glob.glob(str(out / folder / "results_*.json"))
    a, b = (json.loads(Path(x).read_text())["adaptive"][ALPACA] for x in (a, b))
    assert comparable(a) == comparable(b) and b["judge"]["calls"] == 3


def test_a_bank_per_metric_in_batches_of_two_resumes_exactly(server, tmp_path):
    """One test over two metrics (each document generated once, both scores journaled), two documents a
    batch: killed after the 1st batch and resumed, each document asked once, the same results."""
    log = tmp_path / "log.txt"

    def args(out, *extra):
        return run_args(SYSTEM, out, "--adaptive", "--bank", "wmt24_en-de.bleu", "wmt24_en-de.chrf",
                        "--min-items", "6", "--max-items", "6", "--batch-size-adaptive", "2", "--no-progress",
                        *extra)

    server.reset_stats()
    assert main(args(tmp_path / "whole")) == 0
    assert server.stats()["per_model"] == {SYSTEM: 6}
    out = tmp_path / "out"
    server.reset_stats()
    assert cli(args(out), log, kill_after="batch:1") == -signal.SIGKILL, log.read_text()[-3000:]
    assert journaled_documents(out) == 2 and server.stats()["per_model"] == {SYSTEM: 2}
    assert cli(args(out, "--resume"), log) == 0, log.read_text()[-3000:]
    stats = server.stats()
    assert stats["per_model"] == {SYSTEM: 6} and max_answers_per_item(stats) == 1
    a, b = result(tmp_path / "whole"), result(out)
    assert comparable(a["adaptive"]) == comparable(b["adaptive"]) and a["results"] == b["results"]
    assert set(b["adaptive"][TASK]["metrics"]) == {"bleu", "chrf"}

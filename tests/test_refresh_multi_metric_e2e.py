"""``refresh`` of two leaderboards of one task (BLEU and chrF): one generation per document, each board entered.

The real CLI, harness, litellm and HTTP to the replay endpoint: a new system is placed on a BLEU and a
chrF leaderboard of the same 12 full runs at once; each document it is given is generated once (counted
at the server) and scored by both metrics; each board gets its own entry; a refresh that died mid-run
resumes without asking anything twice.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.live.journal import Journal
from lm_eval_adaptive.replay.server import max_answers_per_item

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
BOARD = ["AIST-AIRC", "Aya23", "CUNI-NL", "Claude-3.5", "CommandR-plus", "CycleL", "Dubformer", "IKUN",
         "IOL-Research", "Llama3-70B", "Mistral-Large", "ONLINE-A"]
METRICS = ("bleu", "chrf")
CAP = 0.25


@pytest.fixture(scope="module")
def boards(tmp_path_factory):
    d = tmp_path_factory.mktemp("boards")
    out = []
    for m in METRICS:
        path = d / f"{m}.json"
        assert main(["leaderboard", "--history", f"wmt24/en-de/{m}", "--task", "wmt24_en-de", "--metric", m,
                     "--item-field", "id", "--models", *BOARD, "--out", str(path)]) == 0
        out.append(path)
    return out


def base(boards):
    return ["refresh", "--leaderboard", *map(str, boards), "--include_path", str(REPO / "task_configs"),
            "--apply_chat_template", "--no-progress", "--backoff", "0.05"]


def test_two_boards_of_one_task_are_refreshed_together(replay_server, boards, tmp_path):
    before = [p.read_bytes() for p in boards]
    run_dir = tmp_path / "run"
    replay_server.reset_stats()
    args = base(boards) + ["--add", "TranssionMT=litellm:model=openai/TranssionMT", "--price", "TranssionMT=1,3",
                           "--budget-usd", str(CAP), "--max-items", "40", "--output", str(run_dir)]
    assert main(args) == 0
    stats = replay_server.stats()
    assert max_answers_per_item(stats) == 1
    j = Journal.open(run_dir, writable=False)
    scores = j.scores()
    assert stats["served"] == len(scores) and 10 <= len(scores) <= 40
    assert all(set(s["raw"]) == set(METRICS) for s in scores)
    for p, m in zip(boards, METRICS):
        d = json.loads(p.read_text())
        assert d["metric"] == m and len(d["entries"]) == len(BOARD) + 1
        (e,) = [x for x in d["entries"] if x["source"] == "adaptive"]
        assert e["model"] == "TranssionMT" and e["metric"]["lower"] < e["metric"]["estimate"] < e["metric"]["upper"]
        assert e["items"] == len(scores)  # every generation scored under both metrics
        (r,) = d["refreshes"]
        assert r["spent_usd"] <= CAP and r["items"] == {"TranssionMT": len(scores)}
    assert json.loads((run_dir / "run.json").read_text())["settings"]["leaderboard"] == [
        str(p.resolve()) for p in boards]

    # a refresh that died after 20 journal records resumes without asking anything twice
    for p, b in zip(boards, before):
        p.write_bytes(b)
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    lines = (run_dir / "journal.jsonl").read_bytes().split(b"\n")
    (crashed / "journal.jsonl").write_bytes(b"\n".join(lines[:21]) + b"\n")
    shutil.copy(run_dir / "run.json", crashed / "run.json")
    asked_before = {(json.loads(x)["model"], json.loads(x)["item_id"]) for x in lines[1:21]
                    if json.loads(x)["type"] == "request"}
    replay_server.reset_stats()
    assert main(["refresh", "--resume", str(crashed), "--no-progress"]) == 0
    asked_after = {(m, k.rsplit("/", 1)[1]) for m, items in replay_server.stats()["per_item"].items() for k in items}
    assert asked_before and not (asked_before & asked_after)
    for p in boards:
        d = json.loads(p.read_text())
        assert [x["model"] for x in d["entries"] if x["source"] == "adaptive"] == ["TranssionMT"]
        assert d["refreshes"][0]["spent_usd"] <= CAP


def test_boards_refreshed_together_must_share_their_full_runs_and_differ_in_metric(replay_server, boards, tmp_path,
                                                                                  capsys):
    other = tmp_path / "other.json"
    assert main(["leaderboard", "--history", "wmt24/en-de/chrf", "--task", "wmt24_en-de", "--metric", "chrf",
                 "--item-field", "id", "--models", *BOARD[:-1], "--out", str(other)]) == 0
    add = ["--add", "TranssionMT=litellm:model=openai/TranssionMT", "--price", "TranssionMT=1,3", "--budget-usd", "0.1"]
    replay_server.reset_stats()
    assert main(base([boards[0], other]) + add) == 2
    assert "share their full runs" in capsys.readouterr().err
    assert main(base([boards[1], other]) + add) == 2
    assert "two leaderboards of metric 'chrf'" in capsys.readouterr().err
    assert main(base(boards) + add + ["--dry-run"]) == 2
    assert replay_server.stats()["requests"] == 0

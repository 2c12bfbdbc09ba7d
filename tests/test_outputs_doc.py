"""docs/outputs.md names every key the real outputs have (run --adaptive, rank, leaderboard, refresh,
backtest --json, demo --json, compare --json), made here offline through the replay endpoint."""

from __future__ import annotations

import glob
import json
import re
from pathlib import Path

import pytest

from lm_eval_adaptive.cli.main import main

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow
HARNESS = ["--include_path", str(REPO / "task_configs"), "--apply_chat_template", "--no-progress"]


def _documented() -> set[str]:
    return set(re.findall(r"`([A-Za-z_][\w-]*)`", (REPO / "docs" / "outputs.md").read_text()))


def _load(path) -> dict:
    return json.loads(Path(path).read_text())


def test_every_key_of_the_real_outputs_is_documented(replay_server, tmp_path):
    out = {}
    assert main(["run", "--model", "litellm", "--model_args", "model=openai/Mistral-Large", "--tasks", "wmt24_en-de",
                 *HARNESS, "--output_path", str(tmp_path / "run"), "--adaptive", "--bank", "wmt24_en-de.bleu",
                 "--max-items", "30"]) == 0
    (res,) = glob.glob(str(tmp_path / "run" / "*" / "results_*.json"))
    out["adaptive block"] = _load(res)["adaptive"]["wmt24_en-de"]
    out["adaptive block administered[]"] = out["adaptive block"]["administered"][0]
    out["adaptive block task_args"] = out["adaptive block"]["task_args"]
    again = tmp_path / "again.json"  # a second run to compare with: the same file elsewhere
    again.write_text(Path(res).read_text())
    assert main(["compare", res, str(again), "--json", str(tmp_path / "compare.json")]) == 0
    out["compare"] = cmp = _load(tmp_path / "compare.json")
    out["compare runs[]"] = cmp["runs"][0]
    out["compare runs[] metric_estimate"] = cmp["runs"][0]["metric_estimate"]
    out["compare pairs[]"] = pair = cmp["pairs"][0]
    for k in ("theta", "metric", "shared"):
        out[f"compare pairs[] {k}"] = pair[k]
    assert main(["run", "--model", "litellm", "--model_args", "model=openai/Mistral-Large", "--tasks", "wmt24_en-de",
                 *HARNESS, "--output_path", str(tmp_path / "multi"), "--adaptive", "--bank", "wmt24_en-de.bleu",
                 "wmt24_en-de.chrf", "--max-items", "5", "--log_samples"]) == 0
    (res,) = glob.glob(str(tmp_path / "multi" / "*" / "results_*.json"))
    out["adaptive block, several banks"] = multi = _load(res)["adaptive"]["wmt24_en-de"]
    out["adaptive block, several banks: metrics[]"] = multi["metrics"]["bleu"]
    (samples,) = glob.glob(str(tmp_path / "multi" / "*" / "samples_wmt24_en-de_*.jsonl"))
    out["sample row adaptive, several banks"] = json.loads(Path(samples).read_text().splitlines()[0])["adaptive"]
    assert main(["rank", "--models", "litellm:model=openai/GPT-4", "litellm:model=openai/Phi-3-Medium",
                 "--tasks", "wmt24_en-de", "--bank", "wmt24_en-de.bleu", "--budget-usd", "0.3", "--max-items", "30",
                 *HARNESS, "--output", str(tmp_path / "rank")]) == 0
    out["ranking.json"] = _load(tmp_path / "rank" / "ranking.json")
    out["ranking.json ranking[]"] = out["ranking.json"]["ranking"][0]
    out["run.json"] = _load(tmp_path / "rank" / "run.json")
    out["run.json settings"] = out["run.json"]["settings"]
    board = tmp_path / "board.json"
    assert main(["leaderboard", "--history", "wmt24/en-de/bleu", "--task", "wmt24_en-de", "--metric", "bleu",
                 "--models", "AIST-AIRC", "Aya23", "CUNI-NL", "ONLINE-B", "--out", str(board)]) == 0
    assert main(["refresh", "--leaderboard", str(board), "--add", "GPT-4=litellm:model=openai/GPT-4",
                 "--budget-usd", "0.1", *HARNESS]) == 0
    out["leaderboard"] = lb = _load(board)
    for e in lb["entries"]:
        out[f"leaderboard entry ({e['source']})"] = e
    out["leaderboard refreshes[]"] = lb["refreshes"][0]
    assert main(["backtest", "embedded:wmt24-en-de-chrf", "--seeds", "1", "--folds", "2", "--no-progress",
                 "--json", str(tmp_path / "bt.json")]) == 0
    out["backtest"] = bt = _load(tmp_path / "bt.json")
    out["backtest folds[]"] = bt["folds"][0]
    assert main(["demo", "--json", str(tmp_path / "demo.json")]) == 0
    out["demo"] = demo = _load(tmp_path / "demo.json")
    out["demo ranking[]"] = demo["ranking"][0]

    documented = _documented()
    missing = {name: sorted(set(d) - documented) for name, d in out.items() if set(d) - documented}
    assert not missing, f"keys missing from docs/outputs.md: {missing}"
    assert {"lm-eval-adaptive/leaderboard", "full_run", "adaptive"} <= documented | {lb["format"]}

"""End to end, offline: the real harness, the real litellm client, real HTTP to the replay endpoint.

For WMT24 en-de (BLEU and chrF) and AlpacaEval (LLM judge):
1. full harness runs (`lm-eval-adaptive run` without --adaptive = `lm-eval run`) of the
   calibration systems with --log_samples;
2. `lm-eval-adaptive calibrate --samples ...` builds a bank from those sample logs;
3. `lm-eval-adaptive run --adaptive` on a system left out of calibration: the server counts
   what it was asked, which must be at most 10% of the task's documents;
4. a full harness run of that system gives the true full-run metric, which must lie in the
   adaptive run's reported 95% interval of the full-task estimate.

Both run on their first documents (the harness's ``--limit``: ``WMT_LIMIT`` of 997,
``ALPACA_LIMIT`` of 805; AlpacaEval as ``alpaca_eval_judge``, the judge alone, no ROUGE-L): the
bank, the adaptive run and the truth are all over those documents, so the whole path runs in a
fraction of the time (the suite's 10-minute budget).
"""

from __future__ import annotations

import glob
import json

import pytest
from scipy.stats import kendalltau

from lm_eval_adaptive.cli.main import main

pytestmark = pytest.mark.slow

WMT_CALIBRATION = ["GPT-4", "Claude-3.5", "Aya23", "Phi-3-Medium", "ONLINE-B", "CUNI-NL", "IKUN-C"]
WMT_HELD_OUT = "Mistral-Large"
ALPACA_CALIBRATION = ["gpt-3.5-turbo-1106", "claude-2", "vicuna-13b", "alpaca-7b", "falcon-7b-instruct",
                      "Qwen-14B-Chat"]  # models with every output and judge record
ALPACA_HELD_OUT = "claude-instant-1.2"
WMT_LIMIT = 500  # of 997
ALPACA_LIMIT = 200  # of 805


@pytest.fixture(scope="module")
def server(replay_server):
    return replay_server


def _run(system, task, out, *extra):
    rc = main(["run", "--model", "litellm", "--model_args", f"model=openai/{system},num_concurrent=32",
               "--tasks", task, "--include_path", "task_configs", "--apply_chat_template",
               "--log_samples", "--output_path", str(out), *extra])
    assert rc == 0
    (res,) = glob.glob(str(out / f"openai__{system}" / "results_*.json"))
    return json.loads(open(res).read())


def _adaptive_flow(server, tmp, task, calibration, held_out, metrics, n_docs, extra=(), limit=(), adaptive_extra=(),
                   min_items=30):
    full = tmp / "full"
    for system in calibration:
        _run(system, task, full, *limit, *extra)
    out = {}
    for metric in metrics:
        bank = tmp / f"bank_{metric}.json"
        assert main(["calibrate", "--samples", str(full), "--task", task, "--metric", metric,
                     "--out", str(bank)]) == 0
        server.reset_stats()
        adaptive = _run(held_out, task, tmp / f"adaptive_{metric}", "--adaptive", "--bank", str(bank),
                        "--use-small-bank",  # a bank from the few calibration systems: the banked path is checked
                        "--se-target", "0.1", "--min-items", str(min_items), "--max-items", str(n_docs // 10),
                        *extra, *adaptive_extra)
        stats = server.stats()
        out[metric] = (adaptive, stats)
    server.reset_stats()
    truth = _run(held_out, task, tmp / "truth", *limit, *extra)
    return out, truth


def _check(out, truth, task, n_docs, metrics, min_items=30):
    for metric in metrics:
        adaptive, stats = out[metric]
        a = adaptive["adaptive"][task]
        # documents generated (requests of the held-out model, counted at the server)
        asked = stats["per_model"]
        generated = sum(v for k, v in asked.items() if k != "judge")
        assert min_items <= generated <= 0.10 * n_docs, stats
        assert a["items"] == adaptive["n-samples"][task]["effective"] <= 0.10 * n_docs
        est = a["metric_estimate"]
        true = truth["results"][task][f"{metric},none"]
        assert est["lower"] <= true <= est["upper"], (metric, est, true)
        # the results JSON is the harness's, over the administered documents
        assert set(adaptive["results"][task]) >= {f"{metric},none", "alias"}


def test_wmt24_bleu_and_chrf_end_to_end(server, tmp_path):
    out, truth = _adaptive_flow(server, tmp_path, "wmt24_en-de", WMT_CALIBRATION, WMT_HELD_OUT,
                                ["bleu", "chrf"], WMT_LIMIT, limit=("--limit", str(WMT_LIMIT)))
    _check(out, truth, "wmt24_en-de", WMT_LIMIT, ["bleu", "chrf"])
    samples = glob.glob(str(tmp_path / "adaptive_bleu" / "*" / "samples_wmt24_en-de_*.jsonl"))
    rows = [json.loads(x) for x in open(samples[0])]
    assert [r["adaptive"]["order"] for r in rows] == list(range(1, len(rows) + 1))
    assert all(r["adaptive"]["information"] > 0 for r in rows)
    # the same full runs as a leaderboard (history from the sample logs), refreshed live
    lb = tmp_path / "board.json"
    assert main(["leaderboard", "--samples", str(tmp_path / "full"), "--task", "wmt24_en-de", "--metric", "bleu",
                 "--out", str(lb)]) == 0
    board = json.loads(lb.read_text())
    assert (tmp_path / "board.history.csv.gz").exists() and board["history"] == "board.history.csv.gz"
    assert sorted(e["model"] for e in board["entries"]) == sorted(f"openai/{s}" for s in WMT_CALIBRATION)
    values = [e["metric"]["value"] for e in board["entries"]]  # best first by θ
    assert kendalltau(values, list(range(len(values), 0, -1))).statistic >= 0.8
    server.reset_stats()
    assert main(["refresh", "--leaderboard", str(lb), "--add", f"litellm:model=openai/{WMT_HELD_OUT}",
                 "--budget-usd", "0.2", "--include_path", "task_configs", "--apply_chat_template",
                 "--no-progress"]) == 0
    board = json.loads(lb.read_text())
    (new,) = [e for e in board["entries"] if e["source"] == "adaptive"]
    assert new["model"] == f"openai/{WMT_HELD_OUT}" and board["refreshes"][0]["spent_usd"] <= 0.2
    assert server.stats()["served"] == new["items"] >= 10
    true = truth["results"]["wmt24_en-de"]["bleu,none"]
    assert new["metric"]["lower"] <= true <= new["metric"]["upper"]


def test_alpaca_eval_judge_end_to_end(server, tmp_path):
    judge = json.dumps({"judge_model": "openai/judge", "judge_api_base": server.url})
    out, truth = _adaptive_flow(server, tmp_path, "alpaca_eval_judge", ALPACA_CALIBRATION, ALPACA_HELD_OUT,
                                ["judge"], ALPACA_LIMIT, extra=("--metadata", judge),
                                limit=("--limit", str(ALPACA_LIMIT)),
                                adaptive_extra=("--price", "openai/judge=1,3"),  # the judge has no litellm price
                                min_items=ALPACA_LIMIT // 10)
    _check(out, truth, "alpaca_eval_judge", ALPACA_LIMIT, ["judge"], min_items=ALPACA_LIMIT // 10)

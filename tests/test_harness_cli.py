"""`lm-eval-adaptive run`: same as `lm-eval run` without --adaptive; bad input with --adaptive.

Every run goes through the real harness and the real litellm client to the replay endpoint.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.irt.response_model import ContinuousResponseModel
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness.sample_logs import table_from_sample_logs

TASK = "wmt24_en-de"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def server(replay_server):
    return replay_server


def make_bank(path, *, ids=range(60), task=TASK, metric="bleu", hi=1.0):
    """A bank whose ids are harness doc ids (runs on it pass --item-field doc_id: in WMT24 every
    document's `id` field is its doc id + 1, so ids that are both are ambiguous)."""
    ids = [str(i) for i in ids]
    rng = np.random.default_rng(0)
    ItemBank(item_ids=np.array(ids, dtype=object), b=rng.normal(0, 1, len(ids)),
             model=ContinuousResponseModel(k=0.1), scaling="global", lo=0.0, hi=hi,
             input_tokens=100.0, output_tokens=100.0, task=task, metric=metric).save(path)
    return str(path)


def run_args(system, out, *extra, task=TASK, include="task_configs"):
    return ["run", "--model", "litellm", "--model_args", f"model=openai/{system},num_concurrent=8",
            "--tasks", task, "--include_path", str(include), "--apply_chat_template",
            "--log_samples", "--output_path", str(out), *extra]


def written(out):
    return glob.glob(str(out / "**" / "*.json*"), recursive=True)


def test_run_without_adaptive_equals_lm_eval_run(server, tmp_path):
    args = run_args("GPT-4", tmp_path / "ours", "--limit", "12")
    assert main(args) == 0
    theirs = [sys.executable, "-m", "lm_eval", *run_args("GPT-4", tmp_path / "theirs", "--limit", "12")]
    subprocess.run(theirs, check=True, env=dict(os.environ), capture_output=True, timeout=600)

    def load(d):
        (f,) = glob.glob(str(d / "openai__GPT-4" / "results_*.json"))
        return json.loads(open(f).read())

    a, b = load(tmp_path / "ours"), load(tmp_path / "theirs")
    assert a["results"] == b["results"]
    assert a["n-samples"] == b["n-samples"] and a["configs"][TASK] == b["configs"][TASK]


def test_adaptive_only_requests_bank_documents_and_logs_them(server, tmp_path, monkeypatch, capsys):
    import lm_eval.evaluator

    bank = make_bank(tmp_path / "bank.json", ids=range(100, 160))
    server.reset_stats()
    env_reports = []
    real = lm_eval.evaluator.add_env_info
    monkeypatch.setattr(lm_eval.evaluator, "add_env_info", lambda res: (env_reports.append(1), real(res)))
    git_asked, real_git = [], lm_eval.evaluator.get_git_commit_hash
    monkeypatch.setattr(lm_eval.evaluator, "get_git_commit_hash", lambda: (git_asked.append(1), real_git())[1])
    assert main(run_args("Claude-3.5", tmp_path / "out", "--adaptive", "--bank", bank, "--item-field",
                         "doc_id", "--min-items", "8", "--max-items", "8", "--batch-size-adaptive", "4")) == 0
    stats = server.stats()
    assert stats["per_model"] == {"Claude-3.5": 8}  # 8 documents generated, the final pass is cached
    printed = capsys.readouterr().out
    (res,) = glob.glob(str(tmp_path / "out" / "openai__Claude-3.5" / "results_*.json"))
    r = json.loads(open(res).read())
    # the harness's environment report (torch's collect_env: ~0.6 s of subprocesses) is collected once, for
    # the results written, not for each batch of the adaptive loop (before: 3 times here, once per evaluation)
    assert len(env_reports) == 1 and r["pretty_env_info"]
    # `git describe` (which prints "fatal: not a git repository" outside one) runs once, as in plain lm-eval
    # (before: once per batch, 31 times in a 30-document run)
    assert len(git_asked) == 1
    a = r["adaptive"][TASK]
    assert a["items"] == 8 and a["stopped_because"] == "max_items"
    assert a["bank_id"] == ItemBank.load(bank).bank_id
    assert a["metric_estimate"]["lower"] <= a["metric_estimate"]["estimate"] <= a["metric_estimate"]["upper"]
    # charged the usage the endpoint returned (through the harness client's concurrent path), not the estimate
    u, p = a["usage"], a["price"]
    assert a["cost_source"] == "provider usage" and u["prompt_tokens"] > 8 and u["completion_tokens"] > 8
    assert a["cost_usd"] == pytest.approx((u["prompt_tokens"] * p["input_per_mtok"]
                                           + u["completion_tokens"] * p["output_per_mtok"]) / 1e6)
    assert a["cost_estimate_usd"] == pytest.approx(8 * 100 * (p["input_per_mtok"] + p["output_per_mtok"]) / 1e6)
    (samples,) = glob.glob(str(tmp_path / "out" / "openai__Claude-3.5" / f"samples_{TASK}_*.jsonl"))
    rows = [json.loads(x) for x in open(samples)]
    assert len(rows) == 8
    assert all(100 <= r["doc_id"] < 160 for r in rows)  # documents absent from the bank are never asked
    assert sorted(r["adaptive"]["order"] for r in rows) == list(range(1, 9))
    # the harness headline is the full-task estimate; the plain mean of the 8 documents says what it is
    row = r["results"][TASK]
    est = a["metric_estimate"]
    assert row["bleu,none"] == pytest.approx(est["estimate"])
    assert row["bleu_stderr,none"] == pytest.approx((est["upper"] - est["lower"]) / (2 * 1.959963984540054))
    assert row["bleu_administered_mean,none"] == pytest.approx(np.mean([x["bleu"] for x in rows]))
    assert row["chrf_administered_mean,none"] == pytest.approx(np.mean([x["chrf"] for x in rows]))
    assert "chrf,none" not in row  # no biased number keeps a metric's own name
    # the harness's table reads as for any run: a numeric Value ± a numeric Stderr (the interval's half-width
    # / 1.96), the interval on its own line below it (before: Value "0.3167 [0.2772, 0.3536]", Stderr blank)
    (cells,) = [[c.strip() for c in line.strip("|").split("|")] for line in printed.splitlines()
                if line.startswith("|") and line.split("|")[5].strip() == "bleu"]
    value, pm, stderr = cells[6:9]
    assert pm == "±" and float(value) == pytest.approx(est["estimate"], abs=6e-5)
    assert float(stderr) == pytest.approx(row["bleu_stderr,none"], abs=6e-5)
    assert f"[{est['lower']:.4f}, {est['upper']:.4f}]" in printed
    # an adaptive run's sample log is no full run: calibration from sample logs skips it, and says so
    full = tmp_path / "full"
    for system in ("GPT-4", "Aya23"):
        assert main(run_args(system, full, "--limit", "12")) == 0
    with caplog_warnings() as seen:
        table = table_from_sample_logs([tmp_path / "out", full], task=TASK, metric="bleu")
    assert sorted(str(m) for m in table.models) == ["openai/Aya23", "openai/GPT-4"] and table.n_items == 12
    assert any("skipped 1 sample log(s) of adaptive runs" in w and "Claude-3.5" in w for w in seen)
    with pytest.raises(InputError, match="no full-run sample log is left"):
        table_from_sample_logs([tmp_path / "out"], task=TASK, metric="bleu")


class caplog_warnings:
    """Collect the package logger's warnings (the harness may reconfigure the root logger)."""

    def __enter__(self):
        import logging

        self.seen, self.logger = [], logging.getLogger("lm_eval_adaptive")
        self.handler = logging.Handler(logging.WARNING)
        self.handler.emit = lambda rec: self.seen.append(rec.getMessage())
        self.logger.addHandler(self.handler)
        return self.seen

    def __exit__(self, *exc):
        self.logger.removeHandler(self.handler)


def test_metric_values_outside_the_bank_range_are_clipped_and_counted(server, tmp_path):
    bank = make_bank(tmp_path / "bank.json", hi=0.01)
    assert main(run_args("GPT-4", tmp_path / "out", "--adaptive", "--bank", bank, "--item-field", "doc_id",
                         "--min-items", "4", "--max-items", "4")) == 0
    (res,) = glob.glob(str(tmp_path / "out" / "*" / "results_*.json"))
    a = json.loads(open(res).read())["adaptive"][TASK]
    assert a["clipped_scores"] >= 1


@pytest.mark.parametrize("case,expect", [
    ("missing_bank", "item bank file not found"),
    ("other_task", "calibrated for task 'wmt24_en-es'"),
    ("other_metric", "calibrated for metric 'bleu', not 'chrf'"),
    ("docs_not_in_task", "document id(s) the task"),
    ("metric_not_in_task", "has no metric 'rouge_l'"),
    ("no_bank", "needs an item bank"),
])
def test_bad_adaptive_input_is_refused_and_nothing_is_written(server, tmp_path, capsys, case, expect):
    b = tmp_path / "b.json"
    extra = {
        "missing_bank": lambda: ["--bank", str(tmp_path / "nope.json")],
        "other_task": lambda: ["--bank", make_bank(b, task="wmt24_en-es")],
        "other_metric": lambda: ["--bank", make_bank(b), "--metric", "chrf"],
        "docs_not_in_task": lambda: ["--bank", make_bank(b, ids=[0, 1, 5000])],
        "metric_not_in_task": lambda: ["--bank", make_bank(b, metric="rouge_l")],
        "no_bank": lambda: [],
    }[case]()
    out = tmp_path / "out"
    assert main(run_args("GPT-4", out, "--adaptive", "--item-field", "doc_id", "--min-items", "2",
                         "--max-items", "2", *extra)) == 2
    assert expect in capsys.readouterr().err
    assert written(out) == []


def test_unknown_model_at_the_endpoint_fails_cleanly(server, tmp_path, capsys):
    bank = make_bank(tmp_path / "b.json")
    out = tmp_path / "out"
    rc = main(run_args("No-Such-System", out, "--adaptive", "--bank", bank, "--item-field", "doc_id",
                       "--min-items", "2", "--max-items", "2", "--price", "1,3",
                       "--model_args", "model=openai/No-Such-System,max_retries=1"))
    err = capsys.readouterr().err
    assert rc == 1
    assert "No-Such-System" in err and "nothing was written" in err
    assert written(out) == []


def test_few_shot_documents_get_the_full_runs_prompts_and_are_generated_once(server, tmp_path):
    """Few-shot examples come from one seeded stream in document order: each chosen document must
    get the prompt (and score) the harness's own run gives it, and the final pass must generate
    nothing again. The bank lists its documents in reverse order, so batches are not in task order."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    shutil.copy(REPO / "task_configs" / "wmt24" / "utils.py", tasks)
    (tasks / "wmt24fs.yaml").write_text(
        f"include: {REPO / 'task_configs' / 'wmt24' / '_wmt24_common_yaml'}\n"
        "task: wmt24fs_en-de\nnum_fewshot: 2\nfewshot_split: test\n"
        "custom_dataset: !function utils.load_wmt24_en_de\n"
        'doc_to_text: "Translate the following English text into German.\\n\\nEnglish: {{source}}\\nGerman:"\n'
        "process_results: !function utils.process_results_en_de\n")
    bank = make_bank(tmp_path / "bank.json", ids=range(159, 99, -1), task="wmt24fs_en-de")
    server.reset_stats()
    assert main(run_args("GPT-4", tmp_path / "adaptive", "--adaptive", "--bank", bank, "--item-field", "doc_id",
                         "--min-items", "8", "--max-items", "8", "--batch-size-adaptive", "4", task="wmt24fs_en-de",
                         include=tasks)) == 0
    assert server.stats()["per_model"] == {"GPT-4": 8}  # the final pass re-used every generation
    # the harness's own run of the first 160 documents (the same few-shot stream as a full run)
    assert main(run_args("GPT-4", tmp_path / "harness", "--limit", "160", task="wmt24fs_en-de",
                         include=tasks)) == 0

    def samples(d):
        (f,) = glob.glob(str(d / "openai__GPT-4" / "samples_wmt24fs_en-de_*.jsonl"))
        return {r["doc_id"]: r for r in map(json.loads, open(f))}

    ours, theirs = samples(tmp_path / "adaptive"), samples(tmp_path / "harness")
    assert len(ours) == 8 and all(100 <= d < 160 for d in ours)
    for d, r in ours.items():
        assert r["arguments"] == theirs[d]["arguments"], d
        assert r["bleu"] == theirs[d]["bleu"] == r["adaptive"]["scaled_score"], d

"""Calibration from harness sample logs (`--log_samples` output), on made-up runs."""

import json

import numpy as np
import pytest

from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness.sample_logs import table_from_sample_logs

TASK = "toy_task"
STAMP = "2026-01-01T00-00-00.000000"


def write_run(root, model, scores, *, metric="bleu", model_args_as_string=False):
    d = root / model.replace("/", "__")
    d.mkdir(parents=True)
    ma = f"model={model},num_concurrent=4" if model_args_as_string else {"model": model}
    (d / f"results_{STAMP}.json").write_text(json.dumps({"config": {"model_args": ma}}))
    with open(d / f"samples_{TASK}_{STAMP}.jsonl", "w") as f:
        for i, s in enumerate(scores):
            row = {"doc_id": i,
                   "arguments": {"gen_args_0": {"arg_0": "p" * 40, "arg_1": {}}},
                   "filtered_resps": ["r" * 20], metric: s}
            f.write(json.dumps(row) + "\n")
    return d


def test_table_from_sample_logs(tmp_path):
    rng = np.random.default_rng(0)
    for j, m in enumerate(["openai/a", "openai/b", "openai/c"]):
        write_run(tmp_path, m, np.clip(rng.normal(0.3 + 0.1 * j, 0.1, 12), 0, 1),
                  model_args_as_string=(j == 2))
    t = table_from_sample_logs([tmp_path], task=TASK, metric="bleu")
    assert sorted(t.models) == ["openai/a", "openai/b", "openai/c"]
    assert t.n_items == 12 and t.n_obs == 36
    in_tok, out_tok = t.item_tokens()
    assert np.allclose(in_tok, 10.0) and np.allclose(out_tok, 5.0)  # characters / 4


def test_calibrate_cli_from_samples_records_task_and_metric(tmp_path, capsys):
    rng = np.random.default_rng(1)
    for j, m in enumerate(["m1", "m2", "m3", "m4"]):
        write_run(tmp_path / "runs", m, np.clip(rng.normal(0.2 + 0.15 * j, 0.1, 20), 0, 1))
    out = tmp_path / "bank.json"
    assert main(["calibrate", "--samples", str(tmp_path / "runs"), "--task", TASK, "--metric", "bleu",
                 "--out", str(out)]) == 0
    bank = ItemBank.load(out)
    assert bank.task == TASK and bank.metric == "bleu"
    assert set(bank.item_ids) <= {str(i) for i in range(20)}


def test_sample_log_errors_name_file_and_line(tmp_path):
    d = write_run(tmp_path, "m1", [0.1, 0.2, 0.3])
    with pytest.raises(InputError, match=r"samples_toy_task_.*row 1: no metric 'chrf'"):
        table_from_sample_logs([tmp_path], task=TASK, metric="chrf")
    f = d / f"samples_{TASK}_{STAMP}.jsonl"
    f.write_text(f.read_text() + "{not json\n")
    with pytest.raises(InputError, match="row 4"):
        table_from_sample_logs([tmp_path], task=TASK, metric="bleu")
    with pytest.raises(InputError, match="no samples_other_"):
        table_from_sample_logs([tmp_path], task="other", metric="bleu")
    with pytest.raises(InputError, match="no such file"):
        table_from_sample_logs([tmp_path / "missing"], task=TASK, metric="bleu")


def test_calibrate_samples_needs_task_and_metric(tmp_path, capsys):
    assert main(["calibrate", "--samples", str(tmp_path), "--out", str(tmp_path / "b.json")]) == 2
    assert "--task" in capsys.readouterr().err
    assert not (tmp_path / "b.json").exists()

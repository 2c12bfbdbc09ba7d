"""A multiple-choice task end to end, offline and with nothing simulated: full harness runs of several tiny
local models (the harness's `hf` model on random-weight GPT-2s made on the spot) log their samples, `calibrate
--samples` builds a 0/1 bank from those logs (3PL, c = 1/4 for the task's four options), and `run --adaptive`
of another tiny model reports `acc` as its headline estimate; checked against that model's own full run:
the interval holds the full run's `acc`, and a full run of the bank's items gives it exactly (width 0).
`--ci-width` stops the run on the interval's width (upper − lower) in accuracy units."""

from __future__ import annotations

import glob
import json
from pathlib import Path

import numpy as np
import pytest
from tiny_hf import save_tiny_model

from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.engine.irt.bank import ItemBank

pytestmark = pytest.mark.slow
TASK_DIR = Path(__file__).parent / "tasks"
DOCS = [json.loads(line) for line in (TASK_DIR / "tiny_mc" / "tiny_mc.jsonl").read_text().splitlines()]
CALIBRATION_MODELS = 5


def _offline(monkeypatch) -> None:
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(var, "1")  # nothing may be fetched


def _run(model_dir: Path, out: Path, *extra: str) -> dict:
    """`run` of the tiny model on tiny_mc (a full harness run, or adaptive with ``extra``); its results JSON."""
    args = ["run", "--model", "hf", "--model_args",
            f"pretrained={model_dir},dtype=float32,parallelize=False,device_map=cpu", "--device", "cpu",
            "--batch_size", "16", "--tasks", "tiny_mc", "--include_path", str(TASK_DIR), "--log_samples",
            "--output_path", str(out), *extra]
    if "--adaptive" in extra:
        args += ["--price", "0,0", "--use-small-bank"]  # a local model: no API price (unpriced models are refused);
        # the bank of CALIBRATION_MODELS models, below run --adaptive's threshold: the banked path is what is checked
    assert main(args) == 0
    (res,) = glob.glob(str(out / "*" / "results_*.json"))
    return json.loads(Path(res).read_text())


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """Full runs of CALIBRATION_MODELS tiny models and of one more (the model under test), and the bank
    `calibrate --samples` builds from the first ones' sample logs."""
    mp = pytest.MonkeyPatch()
    _offline(mp)
    root = tmp_path_factory.mktemp("e2e")
    corpus = [f"Question: {d['question']}\nAnswer: {' '.join(d['choices'])}" for d in DOCS]
    runs = []
    for seed in range(CALIBRATION_MODELS + 1):
        model = save_tiny_model(root / f"tiny-{seed}", corpus, seed=seed)
        runs.append((model, _run(model, root / f"full-{seed}"), root / f"full-{seed}"))
    bank_path = root / "tiny_mc.acc.json"
    assert main(["calibrate", "--samples", *(str(out) for _, _, out in runs[:-1]), "--task", "tiny_mc",
                 "--metric", "acc", "--out", str(bank_path)]) == 0
    yield runs[-1], bank_path
    mp.undo()


def test_calibrated_from_sample_logs_of_several_models(calibrated):
    _, bank_path = calibrated
    bank = ItemBank.load(bank_path)
    assert bank.model.kind == "3pl" and np.allclose(bank.c, 0.25)  # four options: guessing at 1/4
    assert bank.n_items == len(DOCS) and bank.metric == "acc"
    assert len(bank.calibration["models"]) == CALIBRATION_MODELS


def test_adaptive_acc_is_the_headline_and_its_interval_holds_the_full_run(calibrated, tmp_path, monkeypatch,
                                                                          capsys):
    _offline(monkeypatch)
    (model, full, _), bank_path = calibrated
    truth = full["results"]["tiny_mc"]["acc,none"]
    capsys.readouterr()
    res = _run(model, tmp_path / "adaptive", "--adaptive", "--bank", str(bank_path),
               "--min-items", "10", "--max-items", "20", "--no-progress")
    a = res["adaptive"]["tiny_mc"]
    est = a["metric_estimate"]
    assert a["metric"] == "acc" and 10 <= a["items"] <= 20
    assert est["lower"] <= truth <= est["upper"]
    out = capsys.readouterr().out
    assert f"estimated full-task acc = {est['estimate']:.4f} [{est['lower']:.4f}, {est['upper']:.4f}]" in out
    # the documents given, scored by the harness itself: their acc is the full run's on the same documents
    (samples,) = glob.glob(str(tmp_path / "adaptive" / "*" / "samples_tiny_mc_*.jsonl"))
    given = {json.loads(line)["doc"]["id"]: json.loads(line)["acc"] for line in Path(samples).read_text().splitlines()}
    (full_samples,) = glob.glob(str(calibrated[0][2] / "*" / "samples_tiny_mc_*.jsonl"))
    every = {json.loads(line)["doc"]["id"]: json.loads(line)["acc"]
             for line in Path(full_samples).read_text().splitlines()}
    assert given == {k: every[k] for k in given}


def test_a_full_run_of_the_bank_items_gives_the_full_run_acc_exactly(calibrated, tmp_path, monkeypatch):
    _offline(monkeypatch)
    (model, full, _), bank_path = calibrated
    truth = full["results"]["tiny_mc"]["acc,none"]
    res = _run(model, tmp_path / "all", "--adaptive", "--bank", str(bank_path),
               "--se-target", "0", "--min-items", str(len(DOCS)), "--max-items", str(len(DOCS)), "--no-progress")
    a = res["adaptive"]["tiny_mc"]
    est = a["metric_estimate"]
    assert a["items"] == len(DOCS)
    assert est["estimate"] == pytest.approx(truth, abs=1e-12)
    assert est["lower"] == pytest.approx(truth, abs=1e-12) and est["upper"] == pytest.approx(truth, abs=1e-12)
    assert res["results"]["tiny_mc"]["acc,none"] == pytest.approx(truth)


def test_ci_width_stops_on_the_accuracy_interval_width(calibrated, tmp_path, monkeypatch):
    _offline(monkeypatch)
    (model, full, _), bank_path = calibrated
    truth = full["results"]["tiny_mc"]["acc,none"]
    res = _run(model, tmp_path / "ci", "--adaptive", "--bank", str(bank_path),
               "--ci-width", "0.4", "--min-items", "5", "--max-items", str(len(DOCS)), "--no-progress")
    a = res["adaptive"]["tiny_mc"]
    est = a["metric_estimate"]
    assert a["stopped_because"] == "ci_width" and 5 <= a["items"] < len(DOCS)
    assert est["upper"] - est["lower"] <= 0.4  # --ci-width W: at most W wide, as with no bank
    assert est["lower"] <= truth <= est["upper"]
    assert a["settings"]["se_target"] is None  # --ci-width replaces the SE target

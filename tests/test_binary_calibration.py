"""2PL/3PL calibration (engine/binary_calibration.py): parameter recovery by simulation, the default
response model per table type, the CLI flags, and the AlpacaEval win/lose table."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.data.data_root import DATA_ENV, data_root
from lm_eval_adaptive.data.named_tables import load_named
from lm_eval_adaptive.data.responses import ResponseTable
from lm_eval_adaptive.engine.bank import ItemBank
from lm_eval_adaptive.engine.calibration import calibrate, resolve_response_model
from lm_eval_adaptive.engine.response_model import BinaryIRTModel
from lm_eval_adaptive.engine.simulation import draw_scores
from lm_eval_adaptive.errors import InputError


def _simulated(n_models=300, n_items=100, c=0.25, seed=0, a_sd=0.5):
    rng = np.random.default_rng(seed)
    theta, b, a = rng.normal(0, 1, n_models), rng.normal(0, 1, n_items), rng.lognormal(0, a_sd, n_items)
    y = draw_scores(BinaryIRTModel("3pl"), theta[:, None], b[None, :], rng, a=a[None, :], c=c)
    mi, ii = np.meshgrid(np.arange(n_models), np.arange(n_items), indexing="ij")
    table = ResponseTable.from_columns([f"m{j}" for j in mi.ravel()], [f"i{i}" for i in ii.ravel()], y.ravel(),
                                       np.full(y.size, 10.0), np.full(y.size, 1.0), metric="acc")
    return table, theta, b, a


def _aligned(bank, truth_b, truth_a):
    idx = np.array([int(s[1:]) for s in bank.item_ids])
    return truth_b[idx], truth_a[idx]


def test_3pl_with_known_guessing_recovers_the_simulated_parameters():
    table, theta, b, a = _simulated()
    bank = calibrate(table, response_model="3pl", guessing=0.25)
    assert bank.model.kind == "3pl" and np.all(bank.c == 0.25) and bank.scaling == "none"
    tb, ta = _aligned(bank, b, a)
    est = np.array([bank.diagnostics["abilities"][f"m{j}"] for j in range(theta.size)])
    # the scale is the calibration models' (mean 0, SD 1): compare after the same standardisation
    assert np.corrcoef(est, theta)[0, 1] > 0.93
    assert np.corrcoef(bank.b, tb)[0, 1] > 0.93
    assert np.corrcoef(np.log(bank.a), np.log(ta))[0, 1] > 0.75
    s = theta.std()
    assert np.median(bank.a) == pytest.approx(np.median(ta) * s, rel=0.25)
    assert np.mean(est) == pytest.approx(0.0, abs=1e-6) and np.std(est) == pytest.approx(1.0, rel=1e-6)


def test_3pl_estimates_guessing_and_2pl_is_the_default_for_a_binary_table():
    table, _, b, a = _simulated(n_models=200, n_items=50, seed=1)
    free = calibrate(table, response_model="3pl")
    assert free.calibration["guessing"] == "estimated"
    assert np.mean(free.c) == pytest.approx(0.25, abs=0.06)
    assert resolve_response_model(table, None) == "2pl"
    two = calibrate(table)  # default: 2pl for 0/1 scores
    assert two.model.kind == "2pl" and np.all(two.c == 0)
    tb, _ = _aligned(two, b, a)
    assert np.corrcoef(two.b, tb)[0, 1] > 0.85


def test_response_model_choices_and_refusals():
    table, *_ = _simulated(n_models=20, n_items=30, seed=2)
    cont = calibrate(table, response_model="continuous")
    assert cont.model.kind == "continuous"
    with pytest.raises(InputError, match="3pl"):
        calibrate(table, response_model="2pl", guessing=0.25)
    with pytest.raises(InputError, match="3pl"):
        calibrate(table, response_model="continuous", guessing=0.25)
    with pytest.raises(InputError, match="unknown response model"):
        calibrate(table, response_model="4pl")
    rng = np.random.default_rng(0)
    graded = ResponseTable.from_columns(["m0"] * 5 + ["m1"] * 5, [f"i{i}" for i in range(5)] * 2, rng.random(10))
    assert resolve_response_model(graded, None) == "continuous"
    with pytest.raises(InputError, match="0 or 1"):
        calibrate(graded, response_model="2pl")


def test_constant_items_are_dropped_and_every_item_is_accounted_for():
    table, *_ = _simulated(n_models=30, n_items=40, seed=3, c=0.0)
    y = table.score.copy()
    y[table.item_idx == 0] = 0.0  # nobody gets item i0
    table = ResponseTable(models=table.models, items=table.items, model_idx=table.model_idx, item_idx=table.item_idx,
                          score=y, input_tokens=table.input_tokens, output_tokens=table.output_tokens)
    bank = calibrate(table, response_model="2pl")
    reasons = {d["id"]: d["reason"] for d in bank.dropped}
    assert reasons["i0"] == "constant"
    assert bank.n_items + len(bank.dropped) == 40


def test_calibrate_cli_writes_a_3pl_bank(tmp_path, capsys):
    table, *_ = _simulated(n_models=25, n_items=30, seed=4)
    path = table.write(tmp_path / "acc.csv")
    out = tmp_path / "bank.json"
    assert main(["calibrate", str(path), "--response-model", "3pl", "--guessing", "0.25", "--no-self-check",
                 "--out", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["response_model"] == {"kind": "3pl"} and set(d["items"]["c"]) == {0.25}
    assert ItemBank.load(out).bank_id == d["bank_id"]
    assert main(["calibrate", str(path), "--no-self-check", "--out", str(tmp_path / "b2.json")]) == 0
    assert json.loads((tmp_path / "b2.json").read_text())["response_model"] == {"kind": "2pl"}
    with pytest.raises(SystemExit):
        main(["calibrate", str(path), "--guessing", "1.5", "--out", str(tmp_path / "x.json")])


def _has_data() -> bool:
    try:
        data_root()
        return True
    except InputError:
        return False


@pytest.mark.skipif(not _has_data(), reason=f"real data not found (../shared/data, or ${DATA_ENV})")
def test_alpaca_eval_win_is_preference_above_one_and_a_half():
    win, judge = load_named("alpaca_eval/win"), load_named("alpaca_eval/judge")
    assert win.metric == "alpaca_eval/win" and set(np.unique(win.score)) == {0.0, 1.0}
    assert list(win.models) == list(judge.models) and list(win.items) == list(judge.items)
    # judge = preference - 1, so a win is judge > 0.5
    np.testing.assert_array_equal(win.score, (judge.score > 0.5).astype(float))
    assert resolve_response_model(win, None) == "2pl"


def _sample_logs(root, n_options: int, n_models: int = 30, n_docs: int = 25, seed: int = 5) -> None:
    """Harness-style sample logs (one folder per model) of a task with ``n_options`` requests per document."""
    rng = np.random.default_rng(seed)
    b, theta = rng.normal(0, 1, n_docs), rng.normal(0, 1, n_models)
    for j in range(n_models):
        folder = root / f"model{j}"
        folder.mkdir(parents=True)
        acc = draw_scores(BinaryIRTModel("3pl"), theta[j], b, rng, a=1.0, c=0.25)
        rows = [{"doc_id": d, "acc": float(acc[d]),
                 "arguments": {f"gen_args_{o}": {"arg_0": f"Q{d}", "arg_1": f" {o}"} for o in range(n_options)}}
                for d in range(n_docs)]
        (folder / "samples_mc_2026-01-01T00-00-00.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")


@pytest.mark.parametrize(("options", "kind", "c"), [(4, "3pl", 0.25), (1, "2pl", 0.0)])
def test_calibrate_from_sample_logs_of_a_multiple_choice_task_defaults_to_3pl_with_one_over_k(
        tmp_path, options, kind, c):
    _sample_logs(tmp_path / "logs", options)
    out = tmp_path / "bank.json"
    assert main(["calibrate", "--samples", str(tmp_path / "logs"), "--task", "mc", "--metric", "acc",
                 "--no-self-check", "--out", str(out)]) == 0
    bank = ItemBank.load(out)
    assert bank.model.kind == kind and np.all(bank.c == c)
    # asked for, 2pl stays 2pl on a multiple-choice task
    assert main(["calibrate", "--samples", str(tmp_path / "logs"), "--task", "mc", "--metric", "acc",
                 "--response-model", "2pl", "--no-self-check", "--out", str(out)]) == 0
    assert ItemBank.load(out).model.kind == "2pl"

"""2PL/3PL calibration (engine/irt/binary_calibration.py): parameter recovery by simulation, the default
response model per table type, the CLI flags, and the AlpacaEval win/lose table."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.data.data_root import DATA_ENV, data_root
from lm_eval_adaptive.data.named_tables import load_named
from lm_eval_adaptive.data.responses import ResponseTable
from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.irt.calibration import BINARY_BY_CHOICE, calibrate, resolve_response_model
from lm_eval_adaptive.engine.irt.response_model import BinaryIRTModel
from lm_eval_adaptive.engine.evaluation.simulation import draw_scores
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
    assert bank.calibration["method"] == "mml-em"
    tb, ta = _aligned(bank, b, a)
    est = np.array([bank.diagnostics["abilities"][f"m{j}"] for j in range(theta.size)])
    # marginal ML: the population is N(0, 1), the simulated one too, so the scales agree
    assert np.corrcoef(est, theta)[0, 1] > 0.93
    # b where models are (an item that every model gets right has a b the data barely locate)
    inside = np.abs(tb) < 3
    assert np.corrcoef(bank.b[inside], tb[inside])[0, 1] > 0.93
    assert np.corrcoef(np.log(bank.a), np.log(ta))[0, 1] > 0.75
    assert np.median(bank.a) == pytest.approx(np.median(ta), rel=0.25)
    assert abs(np.mean(est)) < 0.15


def test_guessing_and_slopes_are_estimated_and_the_model_is_chosen_by_held_out_likelihood():
    table, _, b, a = _simulated(n_models=1500, n_items=40, seed=2)
    free = calibrate(table, response_model="3pl")
    assert free.calibration["guessing"] == "estimated"
    assert np.mean(free.c) == pytest.approx(0.25, abs=0.05)
    # the prior's mode is estimated from the bank (no assumed chance level)
    assert free.diagnostics["guessing_prior_mode"] == pytest.approx(0.25, abs=0.08)
    assert resolve_response_model(table, None) == BINARY_BY_CHOICE
    chosen = calibrate(table)  # default for 0/1 scores: 2pl or 3pl, by held-out likelihood
    choice = chosen.diagnostics["model_choice"]
    assert chosen.model.kind == "3pl" and choice["3pl"] > choice["2pl"]
    # data without guessing: either the 2pl, or a 3pl whose guessing is next to nothing
    plain, _, b0, a0 = _simulated(n_models=1500, n_items=40, seed=2, c=0.0)
    bank = calibrate(plain)
    assert np.mean(bank.c) < 0.03
    tb, _ = _aligned(bank, b0, a0)
    assert np.corrcoef(bank.b, tb)[0, 1] > 0.95
    # a known chance level centres the prior: with few models it pulls c to it
    few, *_ = _simulated(n_models=60, n_items=40, seed=6)
    assert np.mean(calibrate(few, response_model="3pl", guessing_prior=0.25).c) == pytest.approx(0.25, abs=0.04)


def test_slopes_are_shrunk_toward_the_banks_typical_slope():
    table, _, _, a = _simulated(n_models=40, n_items=80, seed=7, c=0.0)
    loose = calibrate(table, response_model="2pl")
    from lm_eval_adaptive.engine.irt.binary_calibration import calibrate_binary

    tight = calibrate_binary(table, response_model="2pl", log_a_prior_sd=0.1)
    # a tighter prior on log a leaves less spread of the slopes around their centre
    assert np.std(np.log(tight.a)) < 0.5 * np.std(np.log(loose.a))
    assert tight.calibration["priors"]["log_a_sd"] == 0.1


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


def test_every_item_with_scores_is_kept_constant_and_negatively_correlated_ones_too():
    table, theta, *_ = _simulated(n_models=300, n_items=40, seed=3, c=0.0)
    y = table.score.copy()
    y[table.item_idx == 0] = 0.0  # nobody gets item i0
    # item i1 runs against ability: the weaker a model, the likelier it is right
    rng = np.random.default_rng(9)
    on1 = table.item_idx == 1
    y[on1] = (rng.random(int(on1.sum())) < 1 / (1 + np.exp(2.0 * theta[table.model_idx[on1]]))).astype(float)
    table = ResponseTable(models=table.models, items=table.items, model_idx=table.model_idx, item_idx=table.item_idx,
                          score=y, input_tokens=table.input_tokens, output_tokens=table.output_tokens)
    bank = calibrate(table, response_model="2pl")
    assert bank.n_items == 40 and bank.dropped == []
    i0, i1 = bank.index_of(["i0", "i1"])
    # the constant item stays finite and predicts (almost) nobody right
    assert np.isfinite(bank.b[i0]) and float(bank.model.mean(0.0, bank.b[i0], **bank.item_params(i0))) < 0.01
    # the item against ability gets a flat curve (slope at its floor), not a dropped one
    assert bank.a[i1] < 0.1 < np.median(bank.a)
    p_lo, p_hi = (float(bank.model.mean(t, bank.b[i1], **bank.item_params(i1))) for t in (-2.0, 2.0))
    assert abs(p_hi - p_lo) < 0.1


def test_an_item_without_scores_is_dropped():
    table, *_ = _simulated(n_models=30, n_items=20, seed=8)
    keep = table.item_idx != 0
    table = ResponseTable(models=table.models, items=table.items, model_idx=table.model_idx[keep],
                          item_idx=table.item_idx[keep], score=table.score[keep],
                          input_tokens=table.input_tokens[keep], output_tokens=table.output_tokens[keep])
    bank = calibrate(table, response_model="2pl")
    assert [d["reason"] for d in bank.dropped] == ["no_observations"] and bank.n_items == 19


def test_missing_pairs_and_repeated_rows_fit_as_a_dense_table_does():
    from lm_eval_adaptive.engine.irt.binary_calibration import BinaryCounts, fit_mml

    table, *_ = _simulated(n_models=200, n_items=30, seed=10)
    mi, ii, y = np.asarray(table.model_idx), np.asarray(table.item_idx), np.asarray(table.score)
    dense = BinaryCounts.from_long(mi, ii, y, 200, 30, dense=True)
    sparse_ = BinaryCounts.from_long(mi, ii, y, 200, 30, dense=False)
    assert dense.F is None and sparse_.F is not None
    opts = dict(la_sd=0.75, d_sd=5.0, nu=20.0)
    f1, f2 = fit_mml(dense, "2pl", None, None, **opts), fit_mml(sparse_, "2pl", None, None, **opts)
    np.testing.assert_allclose(f1.d, f2.d, atol=1e-8)
    np.testing.assert_allclose(f1.log_a, f2.log_a, atol=1e-8)
    # a repeated row is another Bernoulli observation: twice every row, the same curves, sharper
    twice = BinaryCounts.from_long(np.r_[mi, mi], np.r_[ii, ii], np.r_[y, y], 200, 30)
    f3 = fit_mml(twice, "2pl", None, None, **opts)
    assert twice.F is not None and f3.loglik == pytest.approx(2 * f1.loglik, rel=0.05)
    assert np.corrcoef(f3.d, f1.d)[0, 1] > 0.99


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
    d2 = json.loads((tmp_path / "b2.json").read_text())  # no --response-model, 25 models: too few to choose
    assert d2["response_model"]["kind"] == "2pl" and d2["diagnostics"]["model_choice"]["by"].startswith("fewer than")
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
    assert resolve_response_model(win, None) == BINARY_BY_CHOICE


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


@pytest.mark.parametrize(("options", "kind", "c"), [(4, "3pl", 0.25), (1, None, None)])
def test_calibrate_from_sample_logs_of_a_multiple_choice_task_defaults_to_3pl_with_one_over_k(
        tmp_path, options, kind, c):
    _sample_logs(tmp_path / "logs", options)
    out = tmp_path / "bank.json"
    assert main(["calibrate", "--samples", str(tmp_path / "logs"), "--task", "mc", "--metric", "acc",
                 "--no-self-check", "--out", str(out)]) == 0
    bank = ItemBank.load(out)
    if kind is None:  # not a multiple-choice task, and 30 models: too few to choose by held-out likelihood
        assert bank.model.kind == "2pl" and bank.diagnostics["model_choice"]["by"].startswith("fewer than")
    else:
        assert bank.model.kind == kind and np.all(bank.c == c)
    # asked for, 2pl stays 2pl on a multiple-choice task
    assert main(["calibrate", "--samples", str(tmp_path / "logs"), "--task", "mc", "--metric", "acc",
                 "--response-model", "2pl", "--no-self-check", "--out", str(out)]) == 0
    assert ItemBank.load(out).model.kind == "2pl"

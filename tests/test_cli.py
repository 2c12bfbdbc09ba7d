"""The command line, run in-process: calibrate, demo, backtest, export-table, and bad input."""

from __future__ import annotations

import json
import shlex

import numpy as np
import pandas as pd
import pytest
from conftest import simulate_scores

from lm_eval_adaptive.cli.main import build_parser, main
from lm_eval_adaptive.data.table_files import read_table
from lm_eval_adaptive.data.tables import embedded_path
from lm_eval_adaptive.engine.irt.bank import ItemBank


def _synthetic_csv(path, n_models=6, n_items=40, seed=0, extra_rows=""):
    rng = np.random.default_rng(seed)
    thetas = np.linspace(-1.5, 1.5, n_models)
    b = rng.normal(0, 1.2, n_items)
    rows = []
    for j, t in enumerate(thetas):
        y = simulate_scores(t, b, k=0.1, rng=rng)
        for i in range(n_items):
            rows.append({"model": f"sys{j}", "item": f"seg{i:03d}", "score": round(100 * y[i], 4),
                         "input_tokens": 80 + i, "output_tokens": 40 + (i % 7)})
    pd.DataFrame(rows).to_csv(path, index=False)
    if extra_rows:
        with open(path, "a") as f:
            f.write(extra_rows)
    return path


def test_calibrate_writes_a_loadable_bank(tmp_path, capsys):
    csv = _synthetic_csv(tmp_path / "runs.csv", n_models=12)  # enough models for rank to use (small_bank.py)
    out = tmp_path / "banks" / "bank.json"
    rc = main(["calibrate", str(csv), "--out", str(out), "--task", "toy", "--metric", "chrf"])
    assert rc == 0
    bank = ItemBank.load(out)
    assert bank.task == "toy" and bank.metric == "chrf"
    assert 2 <= bank.n_items <= 40
    assert bank.diagnostics["n_models"] == 12
    assert bank.k is not None and bank.k > 0
    text = capsys.readouterr().out
    assert "noise k" in text and "discrimination" in text
    assert str(bank.n_items) in text
    # one line: the self-check's τ against shared random documents, and whether rank will use the bank
    check = bank.diagnostics["self_check"]
    flat = " ".join(text.split())  # the note may be wrapped at the terminal's width
    assert flat.count("note: self-check τ") == 1
    said = flat[flat.index("note: self-check τ"):]
    assert said.startswith(f"note: self-check τ {check['mean_tau']:.3f} against {check['shared_random_tau']:.3f}")
    assert "rank will use this bank" in said or "rank will not use this bank" in said


def _assert_input_error(capsys, rc, name, out_path, *also):
    cap = capsys.readouterr()
    assert rc == 2
    err = cap.err.strip()
    assert err.startswith("error:")
    assert name in err
    for text in also:
        assert text in err
    assert not out_path.exists()


def test_calibrate_missing_file(tmp_path, capsys):
    out = tmp_path / "bank.json"
    missing = tmp_path / "nope.csv"
    rc = main(["calibrate", str(missing), "--out", str(out)])
    _assert_input_error(capsys, rc, "nope.csv", out)


def test_calibrate_nan_score(tmp_path, capsys):
    csv = _synthetic_csv(tmp_path / "nan.csv", extra_rows="sys0,seg999,nan,10,10\n")
    out = tmp_path / "bank.json"
    rc = main(["calibrate", str(csv), "--out", str(out)])
    _assert_input_error(capsys, rc, "nan.csv", out, "row 242", "NaN")


def test_calibrate_refuses_a_corrupt_score_unless_allowed(tmp_path, capsys):
    # scores are 0-100; one stray value would squash the rest into a sliver of the global range
    csv = _synthetic_csv(tmp_path / "stray.csv", extra_rows="sys3,seg007,-12540,80,40\n")
    out = tmp_path / "bank.json"
    rc = main(["calibrate", str(csv), "--out", str(out)])
    _assert_input_error(capsys, rc, "stray.csv", out, "row 242", "score -12540.0 of model 'sys3' "
                        "on item 'seg007' is far outside", "--allow-outliers")
    for command in (["backtest", str(csv), "--seeds", "1", "--folds", "2", "--holdout-size", "2",
                     "--bootstrap", "10", "--json", str(out)],
                    ["demo", "--table", str(csv), "--models", "sys0", "sys1", "--json", str(out)]):
        rc = main(command)
        _assert_input_error(capsys, rc, "stray.csv", out, "row 242", "-12540")
    rc = main(["calibrate", str(csv), "--out", str(out), "--allow-outliers", "--scaling", "global"])
    assert rc == 0 and ItemBank.load(out).lo[0] == -12540.0  # kept, as asked: the global range starts there


def test_calibrate_one_model(tmp_path, capsys):
    csv = tmp_path / "one.csv"
    csv.write_text("model,item,score\nsolo,a,0.1\nsolo,b,0.5\nsolo,c,0.9\n")
    out = tmp_path / "bank.json"
    rc = main(["calibrate", str(csv), "--out", str(out)])
    _assert_input_error(capsys, rc, "one.csv", out, "2 distinct models")


def test_demo_on_the_embedded_default(tmp_path, capsys):
    js = tmp_path / "out" / "demo.json"
    png = tmp_path / "demo.png"
    rc = main(["demo", "--json", str(js), "--plot", str(png)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "stopped because" in text
    d = json.loads(js.read_text())
    for key in ("ranking", "ties", "pairwise", "total_cost_usd", "full_run_cost_usd"):
        assert key in d
    assert len(d["ranking"]) >= 2
    assert d["total_cost_usd"] <= 0.10 * d["full_run_cost_usd"] * (1 + 1e-9)  # default budget: 10%
    names = [r["model"] for r in d["ranking"]]
    assert set(d["pairwise"]) == set(names)
    assert png.exists() and png.stat().st_size > 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_unknown_model(capsys):
    rc = main(["demo", "--models", "GPT-4", "NoSuchSystem"])
    cap = capsys.readouterr()
    assert rc == 2 and cap.err.startswith("error:") and "NoSuchSystem" in cap.err


def test_backtest_json_keys(tmp_path, capsys):
    csv = _synthetic_csv(tmp_path / "bt.csv", n_models=10, n_items=40, seed=1)
    js = tmp_path / "bt.json"
    rc = main(["backtest", str(csv), "--folds", "2", "--seeds", "2", "--holdout-size", "3",
               "--bootstrap", "500", "--min-items", "5", "--target-items", "10", "--json", str(js)])
    assert rc == 0
    d = json.loads(js.read_text())
    for key in ("n_items", "n_models", "discrimination", "seconds", "confident_accuracy",
                "item_savings_vs_fixed", "cost_savings_vs_fixed", "ties", "adaptive", "random", "shared_random",
                "fixed", "fixed_matched"):
        assert key in d, key
    assert d["n_items"] == 40 and d["n_models"] == 10
    assert set(d["ties"]) >= {"adaptive_pct", "truth_pct", "precision", "recall", "f1"}
    for meth in ("adaptive", "random", "shared_random", "fixed", "fixed_matched"):
        assert set(d[meth]) >= {"tau", "tau_std", "items", "pct_used", "cost"}
        assert -1.0 <= d[meth]["tau"] <= 1.0
        assert 0 < d[meth]["pct_used"] <= 100
    assert d["runs"] == 4
    # fixed-length CAT at matched spend: the adaptive run's items within rounding (half a item per model of 3)
    assert abs(d["fixed_matched"]["items"] - d["adaptive"]["items"]) <= 1.5
    assert d["fixed"]["items"] >= d["fixed_matched"]["items"]
    assert d["discrimination"] > 0
    assert "adaptive" in capsys.readouterr().out.lower()


def test_backtest_too_few_models(tmp_path, capsys):
    csv = _synthetic_csv(tmp_path / "few.csv", n_models=4, n_items=20)
    js = tmp_path / "few.json"
    rc = main(["backtest", str(csv), "--folds", "2", "--holdout-size", "3", "--json", str(js)])
    cap = capsys.readouterr()
    assert rc == 2 and cap.err.startswith("error:") and "models" in cap.err
    assert not js.exists()


def test_backtest_runs_the_complete_hold_out_sets_that_fit(tmp_path, capsys):
    csv = _synthetic_csv(tmp_path / "few.csv", n_models=7, n_items=40)
    js = tmp_path / "few.json"
    rc = main(["backtest", str(csv), "--folds", "3", "--holdout-size", "3", "--seeds", "1", "--json", str(js)])
    assert rc == 0
    d = json.loads(js.read_text())
    assert d["folds_run"] == 2 and len(d["folds"]) == 2  # 7 // 3 complete sets, as the paper's code (issue 32)
    assert "2 of 3 folds" in capsys.readouterr().out


def test_export_table_parquet(tmp_path, capsys):
    out = tmp_path / "wmt.parquet"
    rc = main(["export-table", "embedded:wmt24-en-de-chrf", "--out", str(out)])
    assert rc == 0
    assert "wrote" in capsys.readouterr().out
    back = read_table(out)
    orig = read_table(embedded_path("wmt24-en-de-chrf"))
    assert (back.n_models, back.n_items, back.n_obs) == (orig.n_models, orig.n_items, orig.n_obs)
    assert back.models.tolist() == orig.models.tolist()
    np.testing.assert_array_equal(back.score, orig.score)


def test_export_table_bad_suffix(tmp_path, capsys):
    out = tmp_path / "wmt.xlsx"
    rc = main(["export-table", "embedded:wmt24-en-de-chrf", "--out", str(out)])
    cap = capsys.readouterr()
    assert rc == 2 and cap.err.startswith("error:") and "wmt.xlsx" in cap.err
    assert not out.exists()


def test_unknown_embedded_table(tmp_path, capsys):
    rc = main(["export-table", "embedded:nope", "--out", str(tmp_path / "x.csv")])
    cap = capsys.readouterr()
    assert rc == 2 and "nope" in cap.err


def test_argparse_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as ei:
        main(["calibrate"])
    assert ei.value.code == 2


@pytest.mark.parametrize("command,flag,value,says", [
    ("backtest", "--top-k", "0", "an integer >= 1"),
    ("backtest", "--bootstrap", "0", "an integer >= 1"),
    ("backtest", "--max-items", "0", "an integer >= 1"),
    ("backtest", "--partition-seed", "-1", "an integer >= 0"),
    ("backtest", "--seeds", "0", "an integer >= 1"),
    ("backtest", "--jobs", "0", "an integer >= 1"),
    ("backtest", "--folds", "0", "an integer >= 1"),
    ("backtest", "--holdout-size", "1", "an integer >= 2"),
    ("backtest", "--min-items", "0", "an integer >= 1"),
    ("backtest", "--target-items", "0", "an integer >= 1"),
    ("backtest", "--confidence", "1.5", "a confidence level between 0.5 and 1 (exclusive)"),
    ("backtest", "--seeds", "many", "an integer >= 1"),
    ("demo", "--max-items", "0", "an integer >= 1"),
    ("demo", "--seed", "-5", "an integer >= 0"),
    ("demo", "--min-items", "0", "an integer >= 1"),
    ("demo", "--confidence", "2", "a confidence level between 0.5 and 1 (exclusive)"),
    ("demo", "--confidence", "nan", "a confidence level between 0.5 and 1 (exclusive)"),
    ("demo", "--budget-usd", "-1", "a finite number >= 0"),
    ("demo", "--budget-usd", "inf", "a finite number >= 0"),
])
def test_bad_numbers_are_refused_while_parsing(tmp_path, capsys, command, flag, value, says):
    out = tmp_path / "out.json"
    # a table that does not exist: reading it would be another error, so none is read
    table = str(tmp_path / "never_read.csv")
    argv = ([command, table] if command == "backtest" else [command, "--table", table])
    with pytest.raises(SystemExit) as ei:
        main(argv + [f"{flag}={value}", "--json", str(out)])
    assert ei.value.code == 2
    err = capsys.readouterr().err
    assert f"lm-eval-adaptive {command}: error: argument {flag}: must be {says}, got {value!r}" in err
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_calibrate_stores_and_prints_the_banks_self_check(tmp_path, capsys):
    csv = _synthetic_csv(tmp_path / "t.csv", n_models=10, n_items=60)
    out = tmp_path / "bank.json"
    assert main(["calibrate", str(csv), "--out", str(out)]) == 0
    check = json.loads(out.read_text())["diagnostics"]["self_check"]
    assert check["models"] == 10 and check["holdout_size"] == 4 and check["folds"] == 2
    assert check["tests"] == 2 * 4 * 2 and 0 <= check["full_task_coverage"] <= 1
    assert 0 <= check["share_abs_z_over_1_96"] <= 1
    assert "self-check (models left out)" in capsys.readouterr().out
    small = _synthetic_csv(tmp_path / "s.csv", n_models=3, n_items=30)
    assert main(["calibrate", str(small), "--out", str(tmp_path / "s.json")]) == 0
    assert json.loads((tmp_path / "s.json").read_text())["diagnostics"]["self_check"] is None
    assert "too few models" in capsys.readouterr().out
    assert main(["calibrate", str(csv), "--out", str(tmp_path / "n.json"), "--no-self-check"]) == 0
    assert "self_check" not in json.loads((tmp_path / "n.json").read_text())["diagnostics"]


COMMANDS = ["demo", "calibrate", "backtest", "export-table", "replay-server", "run", "rank", "compare",
            "leaderboard", "refresh"]


def _help(command, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0
    return capsys.readouterr().out


def _examples(text: str, command: str) -> list[list[str]]:
    """The command lines of the help's ``example:`` block (``\\`` continues a line; ``#`` comments)."""
    block = text.split("\nexample:\n", 1)[1].split("\n\n", 1)[0].replace("\\\n", " ")
    lines = [shlex.split(x, comments=True) for x in block.splitlines()]
    return [x for x in lines if x[:2] == ["lm-eval-adaptive", command]]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_commands_help_shows_its_own_usage_and_a_working_example(command, capsys):
    out = _help(command, capsys)
    assert f"usage: lm-eval-adaptive {command}" in out
    assert "usage: lm-eval " not in out and "$ lm-eval run" not in out
    assert f"example:\n  lm-eval-adaptive {command}" in out
    examples = _examples(out, command)
    assert examples
    for argv in examples:  # every example is accepted by the command's parser as written
        args = build_parser(with_run=command == "run").parse_args(argv[1:])
        assert args.command == command
        if command == "run":
            assert args.adaptive


def test_demo_states_which_systems_its_default_price_covers_and_takes_another(tmp_path, capsys):
    """One price policy (issue 23 item 1): the demo prices systems without a known price by its stated
    default (--price default=1,3), names them on its prices line and in --json, and takes --price."""
    models = ["GPT-4", "Aya23", "Llama3-70B"]
    js = tmp_path / "demo.json"
    assert main(["demo", "--models", *models, "--budget-usd", "0.05", "--json", str(js)]) == 0
    out = capsys.readouterr().out
    assert "priced by the default $1/$3 per M tokens (--price default=1,3, the demo's)" in out
    d = json.loads(js.read_text())
    assert d["priced_by_default"] == ["Aya23", "Llama3-70B"]
    assert d["prices"]["Aya23"]["source"] == "--price default" and d["prices"]["GPT-4"]["source"] == "litellm:gpt-4"
    assert main(["demo", "--models", *models, "--budget-usd", "0.05", "--price", "default=2,6", "Aya23=0.5,1",
                 "--json", str(js)]) == 0
    d = json.loads(js.read_text())
    assert d["priced_by_default"] == ["Llama3-70B"]
    assert d["prices"]["Llama3-70B"]["output_per_mtok"] == 6 and d["prices"]["Aya23"]["source"] == "--price"

"""The command line, run in-process: calibrate, demo, backtest, export-table, and bad input."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import simulate_scores

from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.data.responses import read_table
from lm_eval_adaptive.data.tables import embedded_path
from lm_eval_adaptive.engine.bank import ItemBank


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
    csv = _synthetic_csv(tmp_path / "runs.csv")
    out = tmp_path / "banks" / "bank.json"
    rc = main(["calibrate", str(csv), "--out", str(out), "--task", "toy", "--metric", "chrf"])
    assert rc == 0
    bank = ItemBank.load(out)
    assert bank.task == "toy" and bank.metric == "chrf"
    assert 2 <= bank.n_items <= 40
    assert bank.diagnostics["n_models"] == 6
    assert bank.k is not None and bank.k > 0
    text = capsys.readouterr().out
    assert "noise k" in text and "discrimination" in text
    assert str(bank.n_items) in text


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
                "item_savings_vs_fixed", "cost_savings_vs_fixed", "ties", "adaptive", "random", "fixed"):
        assert key in d, key
    assert d["n_items"] == 40 and d["n_models"] == 10
    assert set(d["ties"]) >= {"adaptive_pct", "truth_pct", "precision", "recall", "f1"}
    for meth in ("adaptive", "random", "fixed"):
        assert set(d[meth]) >= {"tau", "tau_std", "items", "pct_used", "cost"}
        assert -1.0 <= d[meth]["tau"] <= 1.0
        assert 0 < d[meth]["pct_used"] <= 100
    assert d["runs"] == 4
    assert d["discrimination"] > 0
    assert "adaptive" in capsys.readouterr().out.lower()


def test_backtest_too_few_models(tmp_path, capsys):
    csv = _synthetic_csv(tmp_path / "few.csv", n_models=5, n_items=20)
    js = tmp_path / "few.json"
    rc = main(["backtest", str(csv), "--folds", "2", "--holdout-size", "3", "--json", str(js)])
    cap = capsys.readouterr()
    assert rc == 2 and cap.err.startswith("error:") and "models" in cap.err
    assert not js.exists()


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

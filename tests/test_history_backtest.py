"""``backtest --history-models`` (issue 31, item 5): the history curve through the command line."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from conftest import simulate_scores

from lm_eval_adaptive.cli.main import main


def _csv(path, n_models=10, n_items=60, seed=0):
    rng = np.random.default_rng(seed)
    b = rng.normal(0, 1.2, n_items)
    rows = []
    for j, t in enumerate(np.linspace(-1.5, 1.5, n_models)):
        y = simulate_scores(t, b, k=0.1, rng=rng)
        rows += [{"model": f"sys{j}", "item": f"seg{i:03d}", "score": round(100 * y[i], 4)} for i in range(n_items)]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_history_curve_bank_free_and_a_small_bank(tmp_path, capsys):
    """N = 3: a bank too small to use (engine/anytime/small_bank.py), so the bank-free ranker's runs, and said;
    N = MIN_BANK_MODELS: the banked ranker."""
    from lm_eval_adaptive.engine.anytime.small_bank import MIN_BANK_MODELS

    n = MIN_BANK_MODELS
    csv = _csv(tmp_path / "h.csv", n_models=n + 3)  # a hold-out set of 3 and n others to calibrate on
    js = tmp_path / "h.json"
    rc = main(["backtest", str(csv), "--history-models", f"0,3,{n}", "--folds", "2", "--seeds", "2", "--holdout-size", "3",
               "--prices", "uniform", "--no-self-check", "--json", str(js)])
    assert rc == 0
    d = json.loads(js.read_text())
    curve = d["tables"][0]["curve"]
    assert set(curve) == {"0", "3", str(n)}
    assert curve["3"]["modes"] == {"bank-free": 4} and curve[str(n)]["modes"] == {"banked": 4}
    assert curve["3"]["tau"] == curve["0"]["tau"] and curve["3"]["covered"] == curve["0"]["covered"]
    for c in curve.values():
        assert c["runs"] == 4 and -1 <= c["tau"] <= 1 and -1 <= c["shared_random_tau"] <= 1
        assert c["models"] == 12 and 0 <= c["coverage"] <= 1
    zero = curve["0"]
    assert zero["stopped_because"].keys() <= {"settled", "budget", "max_items", "exhausted"}
    assert zero["covered"] >= 0.9 * zero["models"]  # anytime-valid intervals at 95% each
    printed = " ".join(capsys.readouterr().out.split())
    assert "shared" in printed
    assert f"N = 3: 4 of 4 runs bank-free: a bank from fewer than {n} models is not used" in printed


def test_history_models_refuses_a_bad_entry(tmp_path, capsys):
    csv = _csv(tmp_path / "h.csv")
    js = tmp_path / "bad.json"
    rc = main(["backtest", str(csv), "--history-models", "0,1", "--json", str(js)])
    cap = capsys.readouterr()
    assert rc == 2 and cap.err.startswith("error:") and "'1'" in cap.err
    assert not js.exists()


def test_history_models_refuses_a_plot(tmp_path, capsys):
    csv = _csv(tmp_path / "h.csv")
    png = tmp_path / "h.png"
    rc = main(["backtest", str(csv), "--history-models", "0", "--plot", str(png)])
    cap = capsys.readouterr()
    assert rc == 2 and cap.err.startswith("error:") and "--plot" in cap.err
    assert not png.exists()


def test_backtest_anytime_through_the_command_line(tmp_path, capsys):
    """``backtest --anytime``: every fold ranked as ``rank --anytime`` ranks (the folds' records say so), its
    full-task intervals anytime-valid (at least 90% of 12 models covered at 95% each)."""
    csv = _csv(tmp_path / "h.csv", n_models=13)
    js = tmp_path / "a.json"
    rc = main(["backtest", str(csv), "--anytime", "--folds", "2", "--seeds", "2", "--holdout-size", "3",
               "--prices", "uniform", "--no-self-check", "--no-progress", "--json", str(js)])
    assert rc == 0
    d = json.loads(js.read_text())
    assert d["folds_fallen_back"] == 2 and "anytime:True" in d["signature"].split("|")
    assert all(f["bank_use_reason"].startswith("anytime") for f in d["folds"])
    assert d["counts"]["covered"] >= 0.9 * d["counts"]["models"]


def test_history_curve_with_anytime(tmp_path, capsys):
    """``backtest --history-models N --anytime``: a fold whose bank is used (N >= MIN_BANK_MODELS) is ranked as
    ``rank --anytime`` ranks it (mode ``anytime``: the bank-free ranker's documents and intervals, the bank ordering
    the open pairs only); N below falls back to the bank-free ranker as without the flag; with a joint multi-metric
    spec, one error line and nothing written."""
    from lm_eval_adaptive.engine.anytime.small_bank import MIN_BANK_MODELS

    n = MIN_BANK_MODELS
    csv = _csv(tmp_path / "h.csv", n_models=n + 3)
    js = tmp_path / "h.json"
    common = ["--folds", "2", "--seeds", "2", "--holdout-size", "3", "--prices", "uniform", "--no-self-check"]
    assert main(["backtest", str(csv), "--history-models", f"0,3,{n}", *common, "--anytime", "--json", str(js)]) == 0
    curve = json.loads(js.read_text())["tables"][0]["curve"]
    assert curve["3"]["modes"] == {"bank-free": 4} and curve[str(n)]["modes"] == {"anytime": 4}
    # the anytime-valid ranker asks what the bank-free one asks: the same items and coverage; the bank moves
    # only the order of the pairs left open
    assert curve[str(n)]["items"] == curve["0"]["items"] and curve[str(n)]["covered"] == curve["0"]["covered"]
    assert curve[str(n)]["confident"] == curve["0"]["confident"]
    capsys.readouterr()
    bad = tmp_path / "b.json"
    rc = main(["backtest", f"{csv}/a,b", "--anytime", "--history-models", "0", "--json", str(bad)])
    cap = capsys.readouterr()
    assert rc == 2 and cap.err.startswith("error:") and "joint multi-metric" in cap.err and not bad.exists()

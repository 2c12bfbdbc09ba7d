"""Backtest sweeps: the same figures, to the bit, whether a backtest's table × fold units run one after
another, in a pool of processes (``--jobs``) or as Ray tasks (``--ray``, the optional extra)."""

from __future__ import annotations

import json
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import simulate_scores

from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.data.table_files import read_table
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig
from lm_eval_adaptive.engine.evaluation.backtest import assemble_backtest, backtest, backtest_fold, plan_backtest
from lm_eval_adaptive.errors import InputError

REAL = "wmt24/en-de/bleu"


def _toy_csv(path, n_models=7, n_items=60, seed=3):
    """Simulated scores of ``n_models`` systems (7 models: room for one hold-out set of 4)."""
    rng = np.random.default_rng(seed)
    b = rng.normal(0, 1.2, n_items)
    rows = [{"model": f"sys{j}", "item": f"seg{i:03d}", "score": round(100 * y, 4),
             "input_tokens": 80 + i, "output_tokens": 40 + i % 7}
            for j, t in enumerate(np.linspace(-1.5, 1.5, n_models))
            for i, y in enumerate(simulate_scores(t, b, k=0.1, rng=rng))]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def _without_seconds(path) -> str:
    """The ``--json`` of a several-table backtest as text, less each table's ``seconds`` (wall time)."""
    d = json.loads(path.read_text())
    for t in d["tables"]:
        t.pop("seconds")
    return json.dumps(d, sort_keys=True)


def _progress_lines(err: str) -> list[str]:
    return [x for x in err.splitlines() if x.startswith("backtest ")]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """A real table (2 folds fit) and a simulated one (1 fold fits), and their backtest run serially."""
    from lm_eval_adaptive.data.named_tables import load_named

    try:
        load_named(REAL)
    except InputError as e:
        pytest.skip(f"real data not available: {e}")
    d = tmp_path_factory.mktemp("sweep")
    args = ["backtest", REAL, str(_toy_csv(d / "toy.csv")), "--seeds", "2", "--folds", "2", "--bootstrap", "300",
            "--prices", "uniform"]
    assert main([*args, "--jobs", "1", "--no-progress", "--json", str(d / "serial.json")]) == 0
    return {"args": args, "dir": d, "serial": _without_seconds(d / "serial.json")}


def test_a_process_pool_gives_the_serial_figures_and_progress(sweep, capsys):
    out = sweep["dir"] / "pool.json"
    capsys.readouterr()
    assert main([*sweep["args"], "--jobs", "2", "--json", str(out)]) == 0
    assert _without_seconds(out) == sweep["serial"]
    # progress still advances a fold at a time, whichever table's fold finishes first: 2×2 + 1×2 runs
    lines = _progress_lines(capsys.readouterr().err)
    assert len(lines) == 3 and "(6/6 runs" in lines[-1], lines
    assert sorted(x.split(" (")[0] for x in lines) == [
        f"backtest 1/2 {REAL}: fold 1 of 2 done", f"backtest 1/2 {REAL}: fold 2 of 2 done",
        "backtest 2/2 toy: fold 1 of 1 done"]


def test_ray_gives_the_serial_figures(sweep, capsys):
    ray = pytest.importorskip("ray", reason="Ray is an optional extra (pip install 'lm-eval-adaptive[ray]')")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        out = sweep["dir"] / "ray.json"
        capsys.readouterr()
        # the Ray instance this process already runs is joined (and left running)
        assert main([*sweep["args"], "--ray", "auto", "--json", str(out)]) == 0
        assert ray.is_initialized()
    finally:
        ray.shutdown()
    assert _without_seconds(out) == sweep["serial"]
    assert "(6/6 runs" in _progress_lines(capsys.readouterr().err)[-1]


def test_ray_missing_names_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as if it were not installed
    js = tmp_path / "bt.json"
    rc = main(["backtest", str(_toy_csv(tmp_path / "toy.csv")), "--seeds", "1", "--prices", "uniform",
               "--ray", "auto", "--json", str(js)])
    err = capsys.readouterr().err
    assert rc == 2 and "lm-eval-adaptive[ray]" in err and not js.exists()
    rc = main(["backtest", str(tmp_path / "toy.csv"), "--jobs", "2", "--ray", "auto"])
    assert rc == 2 and "not both" in capsys.readouterr().err


def test_folds_assemble_in_any_order_to_the_serial_result(tmp_path):
    table = read_table(_toy_csv(tmp_path / "toy.csv", n_models=10))
    config = BacktestConfig(seeds=2, bootstrap=300, self_check=False)
    plan = plan_backtest(table, config)
    assert plan.n_folds == 2 and plan.runs == 4
    outcomes = [backtest_fold(table, plan, f) for f in reversed(range(plan.n_folds))]
    whole = backtest(table, config=config).to_dict()
    parts = assemble_backtest(table, plan, outcomes, seconds=whole["seconds"]).to_dict()
    assert json.dumps(parts, sort_keys=True) == json.dumps(whole, sort_keys=True)
    with pytest.raises(ValueError, match="one outcome of each of the 2 folds"):
        assemble_backtest(table, plan, outcomes[:1], seconds=0.0)


JOINT = "wmt25/en-de/xcomet,metricx"


@pytest.fixture(scope="module")
def joint_sweep(tmp_path_factory):
    """The joint-vs-separate backtest of two real metric tables (2 folds, self-check on), run serially."""
    from lm_eval_adaptive.data.named_tables import load_named

    try:
        load_named("wmt25/en-de/xcomet")
    except InputError as e:
        pytest.skip(f"real data not available: {e}")
    d = tmp_path_factory.mktemp("joint")
    args = ["backtest", JOINT, "--seeds", "1", "--folds", "2", "--bootstrap", "200", "--prices", "uniform"]
    assert main([*args, "--jobs", "1", "--no-progress", "--json", str(d / "serial.json")]) == 0
    return {"args": args, "dir": d, "serial": _joint_without_seconds(d / "serial.json")}


def _joint_without_seconds(path) -> str:
    d = json.loads(path.read_text())
    d.pop("seconds")
    return json.dumps(d, sort_keys=True)


def test_a_joint_backtest_gives_the_serial_figures_in_a_process_pool(joint_sweep, capsys):
    out = joint_sweep["dir"] / "pool.json"
    capsys.readouterr()
    assert main([*joint_sweep["args"], "--jobs", "2", "--json", str(out)]) == 0
    assert _joint_without_seconds(out) == joint_sweep["serial"]
    d = json.loads(out.read_text())
    assert d["folds_run"] == 2 and [f["fold"] for f in d["folds"]] == [0, 1]
    lines = _progress_lines(capsys.readouterr().err)  # a line per fold as it finishes
    assert len(lines) == 2 and "(2/2 runs" in lines[-1], lines


def test_ray_gives_the_joint_backtest_serial_figures(joint_sweep, capsys):
    ray = pytest.importorskip("ray", reason="Ray is an optional extra (pip install 'lm-eval-adaptive[ray]')")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        out = joint_sweep["dir"] / "ray.json"
        assert main([*joint_sweep["args"], "--ray", "auto", "--no-progress", "--json", str(out)]) == 0
    finally:
        ray.shutdown()
    assert _joint_without_seconds(out) == joint_sweep["serial"]


def test_joint_folds_assemble_in_any_order_to_the_serial_result(tmp_path):
    from lm_eval_adaptive.engine.evaluation.multi_backtest import (
        assemble_multi_backtest,
        backtest_multi,
        multi_backtest_fold,
        plan_multi_backtest,
    )
    from lm_eval_adaptive.sweep import run_multi_backtest

    tables = {k: read_table(_toy_csv(tmp_path / f"{k}.csv", n_models=10, seed=s)) for k, s in (("m1", 3), ("m2", 4))}
    config = BacktestConfig(seeds=2, bootstrap=300, self_check=False)
    plan = plan_multi_backtest(tables, config, spends=(1.0, 2.0))
    assert plan.n_folds == 2 and plan.runs == 8
    whole = backtest_multi(tables, config=config, spends=(1.0, 2.0))
    parts = assemble_multi_backtest(tables, plan, [multi_backtest_fold(tables, plan, f) for f in (1, 0)],
                                    seconds=whole["seconds"])
    pooled = run_multi_backtest(tables, config=config, spends=(1.0, 2.0), jobs=2)  # every run, not only the summary
    assert len(whole["runs"]) == 16
    for other in (parts, pooled):
        other["seconds"] = whole["seconds"]
        assert json.dumps(other, sort_keys=True) == json.dumps(whole, sort_keys=True)
    with pytest.raises(ValueError, match="one outcome of each of the 2 folds"):
        assemble_multi_backtest(tables, plan, [], seconds=0.0)

"""``backtest`` of a joint multi-metric run: one table spec naming several metrics of one task.

``lm-eval-adaptive backtest wmt25/en-de/xcomet,metricx`` loads ``wmt25/en-de/xcomet`` and
``wmt25/en-de/metricx`` and compares a joint run (every generation scored by both metrics,
:class:`~lm_eval_adaptive.engine.ranking.multi_metric_ranker.MultiMetricRanker`) with separate
single-metric runs at the same total spend (:func:`~lm_eval_adaptive.engine.evaluation.multi_backtest.backtest_multi`),
its folds run in ``--jobs`` processes or on ``--ray`` as a single table's are
(:func:`~lm_eval_adaptive.sweep.run_multi_backtest`).
"""

from __future__ import annotations

import math
from pathlib import Path

from rich.table import Table

from lm_eval_adaptive.atomic import write_json
from lm_eval_adaptive.cli.progress import BacktestProgress
from lm_eval_adaptive.data.tables import load_any_table
from lm_eval_adaptive.engine.evaluation.multi_backtest import MODES
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.sweep import run_multi_backtest

__all__ = ["metric_table_specs", "backtest_joint", "print_multi_backtest"]


def metric_table_specs(spec: str) -> dict[str, str] | None:
    """``prefix/m1,m2,...`` → {m1: ``prefix/m1``, ...}; None for a spec naming one table (or an existing file)."""
    if Path(spec).exists() or "," not in spec.rsplit("/", 1)[-1]:
        return None
    prefix, _, last = spec.rpartition("/")
    names = [m.strip() for m in last.split(",")]
    if any(not m for m in names) or len(set(names)) != len(names):
        raise InputError(f"a multi-metric table spec names distinct metrics separated by commas, got {spec!r}")
    return {m: f"{prefix}/{m}" if prefix else m for m in names}


def _f(v, digits: int = 3) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def print_multi_backtest(console, spec: str, r: dict) -> None:
    for spend, modes in r["summary"].items():
        t = Table(title=f"Joint vs separate runs, {spec}: total spend {float(spend):g} × the single-metric budget")
        for col in ("mode", "metric", "τ", "conf. acc.", "any wrong", "confident pairs/run", "full-task cover",
                    "generated", "distinct", "cost $"):
            t.add_column(col, justify="left" if col in ("mode", "metric") else "right")
        for mode in MODES:
            x = modes[mode]
            for k, y in x["metrics"].items():
                t.add_row(mode, k, _f(y["tau"]), _f(y["confident_accuracy"]), _f(y["any_wrong_share"]),
                          _f(y["confident_pairs_per_run"], 2), _f(y["coverage"], 2), "", "", "")
            t.add_row(mode, "all", _f(x["tau"]), _f(x["confident_accuracy"]), _f(x["any_wrong_share"]),
                      _f(x["confident_pairs_per_run"], 2),
                      _f(x["coverage"], 2), f"{x['generated']:.1f}", f"{x['generations']:.1f}", f"{x['cost']:.4g}",
                      end_section=True)
        console.print(t)
    s = r["settings"]
    console.print(f"{r['folds_run']} folds × {s['seeds']} seeds, hold-out {s['holdout_size']} models, "
                  f"γ={s['confidence']} {'for the whole ranking (--family-wise)' if s.get('family_wise') else 'per pair'}; "
                  f"any wrong: share of runs with a confident pair in the wrong order (\"all\": in any metric); "
                  f"joint: one run, every generation scored by {len(r['metrics'])} metrics; "
                  f"separate: one run per metric, the spend split evenly; generated: items generated per "
                  f"hold-out set, distinct: distinct (model, item) pairs", highlight=False)


def backtest_joint(spec: str, config, *, prices_for, allow_outliers: bool, console, json_path=None,
                   jobs: int | None = 1, ray_address: str | None = None, progress_console=None,
                   show_progress: bool = False) -> int:
    """Run and print the joint-vs-separate backtest of the metric tables ``spec`` names, its folds in
    ``jobs`` local processes or on the Ray cluster at ``ray_address``
    (:func:`~lm_eval_adaptive.sweep.run_multi_backtest`), progress on ``progress_console``."""
    specs = metric_table_specs(spec)
    if not specs or len(specs) < 2:
        raise InputError(f"{spec!r} does not name several metric tables (e.g. wmt25/en-de/xcomet,metricx)")
    tables = {m: load_any_table(s, allow_outliers=allow_outliers) for m, s in specs.items()}
    models = sorted(set.intersection(*(set(map(str, t.models)) for t in tables.values())))
    with BacktestProgress(progress_console or console, 1, config.folds, config.seeds,
                          enabled=show_progress and progress_console is not None) as prog:
        r = run_multi_backtest(tables, config=config, prices=prices_for(models), jobs=jobs, ray_address=ray_address,
                               progress=prog.table(0, spec))
    print_multi_backtest(console, spec, r)
    if json_path:
        write_json(json_path, {k: v for k, v in r.items() if k != "runs"})
        console.print(f"wrote {json_path}")
    return 0

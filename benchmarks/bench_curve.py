"""The τ-vs-items curve (issue 32 "Must show": adaptive at or above fixed-length CAT and random sampling across
the curve): the backtest of a half of the dev tables at several budgets.

For each budget (``--targets``: items per model at the mean item cost, the backtest's ``target_items``), pooled
over the tables (the mean of the tables' τ): Kendall τ and items per hold-out set of the adaptive ranker,
fixed-length CAT at the adaptive run's spend (``fixed=``: every model round-half-up(adaptive items of the set /
models) items), the paper's fixed-length CAT (every model the busiest model's items), the same random documents
for every model at the adaptive spend (``shared``) and random sampling at that spend (``random``, documents drawn
apart per model); and the tables on which adaptive τ is at or above each.

    python benchmarks/bench_curve.py [--half tuning|report] [--tables NAME ...] [--every N]
        [--targets 10 20 40] [--seeds 1] [--oracle-bank] [--jobs N] [--json out.json]

``--every 2`` runs every other table of the half (the first, the third, ...), to fit a time limit. Uniform
prices, 5 folds of 4 hold-out models, the ranker's defaults; no settle checks (they do not change τ).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_honesty import REPORT, TUNING, done_line  # noqa: E402
from lm_eval_adaptive.data.tables import load_any_table  # noqa: E402
from lm_eval_adaptive.engine.evaluation.backtest import METHODS, pooled  # noqa: E402
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig  # noqa: E402
from lm_eval_adaptive.sweep import run_backtests  # noqa: E402

#: The methods in the order printed, and their short names.
SHOWN = {"adaptive": "adaptive", "fixed_matched": "fixed=", "fixed": "fixed", "shared_random": "shared",
         "random": "random"}


def budget_row(names, results) -> dict:
    """One budget's figures: per method the pooled τ and items per set, and per table each method's τ and items."""
    p = pooled(results)
    per_method = {m: {"tau": p["adaptive_tau"] if m == "adaptive" else p[f"{m}_tau"],
                      "items": p["items"] if m == "adaptive" else p[f"{m}_items"]} for m in SHOWN}
    tables = [{"table": n, **{m: {"tau": r.method(m).tau, "items": r.method(m).items} for m in METHODS}}
              for n, r in zip(names, results)]
    at_or_above = {m: sum(t["adaptive"]["tau"] >= t[m]["tau"] for t in tables) for m in SHOWN if m != "adaptive"}
    return {"pooled": per_method, "at_or_above": at_or_above, "tables": tables,
            "confident_accuracy": p["confident_accuracy"], "metric_full_task_coverage": p["metric_full_task_coverage"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--half", choices=("tuning", "report"), default="tuning")
    ap.add_argument("--tables", nargs="+", default=None, help="these tables instead of a half")
    ap.add_argument("--every", type=int, default=1, help="every N-th table of the half (1: all)")
    ap.add_argument("--targets", type=int, nargs="+", default=[10, 20, 40], help="items per model (budgets)")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--oracle-bank", action="store_true",
                    help="a BOUND, not a product figure: each fold's bank calibrated on every model (in-sample)")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    if a.every < 1 or a.seeds < 1 or min(a.targets) < 1:
        print("error: --every, --seeds and --targets must be at least 1", file=sys.stderr)
        return 2
    names = (a.tables or {"tuning": TUNING, "report": REPORT}[a.half])[::a.every]
    tables = [load_any_table(n) for n in names]
    out = {"settings": {"half": "custom" if a.tables else a.half, "every": a.every, "tables": names,
                        "seeds": a.seeds, "targets": a.targets, "oracle_bank": a.oracle_bank, "prices": "uniform"},
           "budgets": {}}
    t0 = time.perf_counter()
    for target in a.targets:
        config = BacktestConfig(seeds=a.seeds, target_items=target, settle_seeds=0, oracle_bank=a.oracle_bank)
        results = run_backtests(tables, config=config, jobs=a.jobs,
                                progress=[done_line(f"{n} @ {target}", t0) for n in names])
        out["budgets"][str(target)] = budget_row(names, results)
    bound = " — ORACLE BANK (in-sample): a bound, not a product figure" if a.oracle_bank else ""
    print(f"τ vs items: {out['settings']['half']} half, {len(names)} tables"
          f"{f' (every {a.every}th)' if a.every > 1 else ''}, {a.seeds} seed(s){bound}")
    print(f"{'items/model':>11}" + "".join(f"{SHOWN[m] + ' tau':>14}{'items':>8}" for m in SHOWN)
          + "   adaptive tau >= (tables)")
    for target, b in out["budgets"].items():
        p = b["pooled"]
        wins = ", ".join(f"{SHOWN[m]} {k}/{len(names)}" for m, k in b["at_or_above"].items())
        print(f"{target:>11}" + "".join(f"{p[m]['tau']:>14.3f}{p[m]['items']:>8.1f}" for m in SHOWN) + f"   {wins}")
    print(f"\n{time.perf_counter() - t0:.0f} s", file=sys.stderr)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

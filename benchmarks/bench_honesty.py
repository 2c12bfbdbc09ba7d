"""How honest are the numbers? The backtest on every dev table, tuning half and report half apart.

Defaults are chosen on the TUNING half (WMT25 en-de, en-ja, en-zh, en-ko × 5 metrics, the
WMT24 tables, AlpacaEval judge); the REPORT half (WMT25 cs-de, en-ar, en-et, en-it × 5
metrics) is only reported. For each table and pooled per half: mean Kendall τ (adaptive,
random at the same spend, the same random documents for every model at that spend, fixed-length CAT), items per 4-model set, confident-order accuracy,
the share of runs with any wrongly ordered confident pair, equivalence accuracy (equivalent claims
within the tie margin), the share of truly tied pairs (full-task |Δ| < δ, δ = 2% of the range of the
table's full-task means) reported ordered, tie recall under the bootstrap-overlap truth (the earlier
definition, for comparison; its precision is retired), the coverage of the metric-scale 95% interval
(and of the θ-scale full-task interval), the share of |z| > 1.96 (z of θ̂ at the stop against θ̂ on
every bank item), the cost share of a full run, and for the unresolved pairs of the first seed of each
fold the stated cost to settle against the measured one (run on until settled).

    python benchmarks/bench_honesty.py [--seeds 5] [--half tuning|report|both] [--json out.json]
        [--full-run-share S|off] [--budget-share R|off] [--optimism K]
        [--floor-items N|off] [--pair-share S|off] [--random-share S]
        [--tie-margin DELTA | --tie-margin-share SHARE] [--settle-seeds N] [--settle-runs N]
        [--family-wise] [--intervals fixed|anytime|anytime-plain] [--order prediction|point] [--bank-use-margin M|off]
        [--fallback-order bank|pairs] [--anytime]
        [--holdout-size K] [--target-items N] [--tables NAME ...] [--oracle-bank] [--jobs N | --ray ADDRESS]

``fixed tau`` is the paper's fixed-length CAT (every model as many items as the adaptive run's busiest model,
``fixed items`` per set); ``fixed= tau`` is fixed-length CAT at the adaptive run's spend (every model
round-half-up(adaptive items of the set / models) items, ``fixed= items`` per set). ``--oracle-bank`` calibrates
each fold's bank on every model of the table, the hold-out set's included: an in-sample BOUND on what this
response model can buy on the table, never a product figure (its title says so).

Uniform prices (the paper-comparison setting); 5 folds of 4 hold-out models. Every table × fold
runs in --jobs processes (default: the CPUs this process may use) or as Ray tasks (--ray auto);
the figures are the same as one after another (--jobs 1).
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

from lm_eval_adaptive.data.wmt24 import WMT24_METRICS, WMT24_PAIRS  # noqa: E402
from lm_eval_adaptive.data.wmt25 import WMT25_METRICS  # noqa: E402
from lm_eval_adaptive.data.tables import load_any_table  # noqa: E402
from lm_eval_adaptive.engine.evaluation.backtest_config import FALLBACK_ORDERS, INTERVALS, BacktestConfig  # noqa: E402
from lm_eval_adaptive.engine.anytime.small_bank import BANK_USE_MARGIN  # noqa: E402
from lm_eval_adaptive.engine.ranking.paired_design import DESIGNS  # noqa: E402
from lm_eval_adaptive.engine.evaluation.backtest import pooled  # noqa: E402
from lm_eval_adaptive.sweep import run_backtests  # noqa: E402

TUNING = ([f"wmt25/{p}/{m}" for p in ("en-de", "en-ja", "en-zh", "en-ko") for m in WMT25_METRICS]
          + [f"wmt24/{p}/{m}" for p in WMT24_PAIRS for m in WMT24_METRICS] + ["alpaca_eval/judge"])
REPORT = [f"wmt25/{p}/{m}" for p in ("cs-de", "en-ar", "en-et", "en-it") for m in WMT25_METRICS]

COLS = ("adaptive_tau", "random_tau", "shared_random_tau", "fixed_tau", "fixed_matched_tau", "items", "fixed_items",
        "fixed_matched_items", "confident_accuracy", "any_wrong_share",
        "equivalence_accuracy", "tied_pairs_ordered_share", "tie_recall",
        "metric_full_task_coverage", "theta_full_task_coverage", "share_abs_z_over_1_96", "cost_share_of_full_run")
SHORT = {"adaptive_tau": "tau", "random_tau": "random tau", "shared_random_tau": "shared tau", "fixed_tau": "fixed tau",
         "fixed_matched_tau": "fixed= tau", "items": "items", "fixed_items": "fixed items",
         "fixed_matched_items": "fixed= items",
         "confident_accuracy": "conf acc", "any_wrong_share": "any wrong", "equivalence_accuracy": "equiv acc",
         "tied_pairs_ordered_share": "tied ordered", "tie_recall": "tie recall", "metric_full_task_coverage": "coverage",
         "theta_full_task_coverage": "theta cov", "share_abs_z_over_1_96": "|z|>1.96",
         "cost_share_of_full_run": "cost share"}


def row(name, r) -> dict:
    return {"table": name, **pooled([r])}


def show(rows, title):
    print(f"\n{title}")
    print(f"{'table':<26}" + "".join(f"{SHORT[c]:>13}" for c in COLS))
    for x in rows:
        print(f"{x['table']:<26}" + "".join(f"{x[c]:>13.3f}" for c in COLS))
    tables = rows[:-1]
    print("adaptive tau >= " + ", ".join(
        f"{SHORT[c]}: {sum(x['adaptive_tau'] >= x[c] for x in tables)} of {len(tables)} tables"
        for c in ("fixed_matched_tau", "fixed_tau", "shared_random_tau", "random_tau")))
    st = rows[-1].get("settle") or {}
    if st.get("pairs"):
        print(f"cost to settle, {st['pairs']} unresolved pairs run on: mean stated {st['mean_stated']:.0f} items, "
              f"measured {st['mean_measured']:.0f} (median of {st['runs_per_pair']} continuations: "
              f"{st['mean_measured_median']:.0f}); within a factor 2: {st['within_2x']:.2f} of one continuation, "
              f"{st['within_2x_median']:.2f} of the median")
        if "within_range" in st:
            print(f"  stated 80% range (median hi/lo {st['median_range_ratio']:.1f}): holds "
                  f"{st['within_range']:.2f} of the continuations")
    if rows[-1].get("folds_fallen_back"):
        print(f"folds whose bank the bank-use rule rejected (ranked bank-free): {rows[-1]['folds_fallen_back']} of "
              f"{rows[-1]['folds']}")
    worst = min((x for x in rows[:-1] if x["confident_pairs"]), key=lambda x: x["confident_accuracy"], default=None)
    if worst is not None:
        print(f"lowest confident-order accuracy of a table: {worst['confident_accuracy']:.3f} ({worst['table']})")


def done_line(name, t0):
    """A table's progress callable: one line on stderr when its last fold is in."""
    def progress(done, total):
        if done == total:
            print(f"  {name}: done at {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return progress


def _share_or_off(v: str):
    return None if v == "off" else float(v)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--half", choices=("tuning", "report", "both"), default="both")
    ap.add_argument("--tables", nargs="+", default=None, help="only these tables (one half named 'custom')")
    ap.add_argument("--tie-margin", type=float, default=None)
    ap.add_argument("--tie-margin-share", type=float, default=None,
                    help="the tie margin as a share of the range of each table's full-task means")
    ap.add_argument("--full-run-share", type=_share_or_off, default=BacktestConfig.full_run_share,
                    help="the stopping policy's share of a full run (off: none)")
    ap.add_argument("--budget-share", type=_share_or_off, default=BacktestConfig.budget_share,
                    help="the stopping policy's share of the budget left (off: none)")
    ap.add_argument("--optimism", type=float, default=None, help="the stopping policy's optimism (SEs)")
    ap.add_argument("--floor-items", type=_share_or_off, default=BacktestConfig.settle_floor_items,
                    help="the stopping policy's floor in items per model (off: none)")
    ap.add_argument("--pair-share", type=_share_or_off, default=BacktestConfig.pair_share,
                    help="the stopping policy's pair rule: a share of a full run of the pair (off: none)")
    ap.add_argument("--random-share", type=float, default=BacktestConfig.random_share,
                    help="the selector's share of items drawn from one random order shared by the models")
    ap.add_argument("--settle-seeds", type=int, default=1, help="seeds per fold whose unresolved pairs are run on")
    ap.add_argument("--settle-runs", type=int, default=1, help="continuations per pair (the median is reported)")
    ap.add_argument("--family-wise", action="store_true", help="the whole ranking at γ (Holm over every pair)")
    ap.add_argument("--holdout-size", type=int, default=None, help="models ranked per fold (default: the backtest's 4)")
    ap.add_argument("--target-items", type=int, default=None,
                    help="budget: this many items per model at the mean item cost (default: the backtest's 20)")
    ap.add_argument("--design", choices=DESIGNS, default=BacktestConfig.design,
                    help="the ranker's item design (engine/ranking/paired_design.py)")
    ap.add_argument("--intervals", choices=INTERVALS, default="fixed",
                    help="the banked ranker's intervals: today's fixed-time ones, or anytime-valid with the bank "
                         "as control variate (anytime) or without (anytime-plain; engine/anytime/banked_intervals.py)")
    ap.add_argument("--order", choices=("prediction", "point"), default="prediction",
                    help="what the final report orders the pairs it leaves unordered by (point: before stop 31)")
    ap.add_argument("--steer", action="store_true", help="the banked allocation weighs each open pair by its chance "
                    "of being in the wrong order (an experiment of stop 31)")
    ap.add_argument("--bank-use-margin", type=_share_or_off, default=BANK_USE_MARGIN,
                    help="the bank-use rule's m (engine/anytime/small_bank.py): a fold whose bank's self-check τ is "
                         f"below its shared-random τ − m is ranked bank-free (default {BANK_USE_MARGIN}, rank's; "
                         "off: never fall back, as before stop 31)")
    ap.add_argument("--fallback-order", choices=FALLBACK_ORDERS, default="pairs",
                    help="what orders the pairs a fallen-back fold leaves open: the bank-free ranker's paired "
                         "differences (pairs, rank's) or the rejected bank's prediction (bank: an experiment of stop 32)")
    ap.add_argument("--anytime", action="store_true",
                    help="every fold ranked as rank --anytime: the bank-free ranker, the bank ordering open pairs")
    ap.add_argument("--oracle-bank", action="store_true",
                    help="a BOUND, not a product figure: each fold's bank calibrated on every model, the hold-out "
                         "set's included (in-sample)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--jobs", type=int, default=None, help="processes (default: the CPUs this process may use)")
    ap.add_argument("--ray", default=None, metavar="ADDRESS", help="run on a Ray cluster instead (auto, local, HOST:PORT)")
    a = ap.parse_args(argv)
    halves = {"custom": a.tables} if a.tables else {
        k: v for k, v in (("tuning", TUNING), ("report", REPORT)) if a.half in (k, "both")}
    config = BacktestConfig(seeds=a.seeds, tie_margin=a.tie_margin, family_wise=a.family_wise,
                            tie_margin_share=a.tie_margin_share,
                            full_run_share=a.full_run_share, budget_share=a.budget_share,
                            settle_floor_items=a.floor_items, pair_share=a.pair_share,
                            random_share=a.random_share, design=a.design,
                            settle_seeds=a.settle_seeds, settle_runs=a.settle_runs, intervals=a.intervals, order=a.order, steer=a.steer,
                            bank_use_margin=a.bank_use_margin, oracle_bank=a.oracle_bank, anytime=a.anytime,
                            fallback_order=a.fallback_order,
                            **({} if a.optimism is None else {"optimism": a.optimism}),
                            **({} if a.holdout_size is None else {"holdout_size": a.holdout_size}),
                            **({} if a.target_items is None else {"target_items": a.target_items}))
    out = {"settings": {"seeds": a.seeds, "tie_margin": a.tie_margin, "prices": "uniform",
                        "family_wise": a.family_wise, "holdout_size": config.holdout_size,
                        "target_items": config.target_items,
                        "tie_margin_share": config.tie_margin_share, "truth_margin_share": config.truth_margin_share,
                        "full_run_share": config.full_run_share, "budget_share": config.budget_share,
                        "optimism": config.optimism, "settle_floor_items": config.settle_floor_items,
                        "pair_share": config.pair_share, "random_share": config.random_share,
                        "settle_seeds": config.settle_seeds,
                        "settle_runs": config.settle_runs, "design": config.design, "intervals": config.intervals,
                        "order": config.order, "steer": config.steer, "bank_use_margin": config.bank_use_margin,
                        "oracle_bank": config.oracle_bank, "fallback_order": config.fallback_order,
                        "anytime": config.anytime}}
    t0 = time.perf_counter()
    for half, names in halves.items():
        results = run_backtests([load_any_table(n) for n in names], config=config, jobs=a.jobs,
                                ray_address=a.ray, progress=[done_line(n, t0) for n in names])
        rows = [row(name, r) for name, r in zip(names, results)]
        pool = {"table": f"POOLED {half}", **pooled(results)}
        bound = " — ORACLE BANK (calibrated in-sample on every model): a bound, not a product figure" \
            if a.oracle_bank else ""
        show(rows + [pool], f"{half} half ({len(names)} tables, {a.seeds} seeds){bound}")
        out[half] = {"tables": rows, "pooled": pool}
    print(f"\n{time.perf_counter() - t0:.0f} s", file=sys.stderr)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

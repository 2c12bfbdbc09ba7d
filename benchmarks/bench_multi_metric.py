"""Several metrics in one adaptive run: a joint run against separate single-metric runs.

For each WMT25 pair (default: the REPORT half of bench_honesty.py, cs-de, en-ar, en-et,
en-it; the defaults were not tuned on it) and its five metrics, the multi-metric backtest
(engine/evaluation/multi_backtest.py): 5 folds of 4 hold-out models, a bank per metric, for each
total spend S (in units of the single-metric backtest's budget B = 20 items per model):

* joint: one MultiMetricRanker, budget S·B, every generation scored by all five metrics;
* separate: five AdaptiveRanker runs, S·B/5 each (the same total spend).

Prints per mode and spend: generations (items generated; distinct (model, item) pairs),
mean τ over metrics, pooled confident-pair accuracy, confident pairs per metric run and
full-task coverage, then per metric. Uniform prices (every item costs the same).

    python benchmarks/bench_multi_metric.py [--seeds 3] [--pairs cs-de en-ar ...] [--spends 1 5]
        [--weighting normalised|summed] [--dataset wmt25|wmt24] [--json docs/results/multi_metric.json]
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

from lm_eval_adaptive.data.named_tables import load_named  # noqa: E402
from lm_eval_adaptive.data.wmt24 import WMT24_METRICS, WMT24_PAIRS  # noqa: E402
from lm_eval_adaptive.data.wmt25 import WMT25_METRICS  # noqa: E402
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig  # noqa: E402
from lm_eval_adaptive.engine.evaluation.multi_backtest import MODES, backtest_multi  # noqa: E402
from lm_eval_adaptive.engine.ranking.multi_metric_ranker import ITEM_WEIGHTINGS  # noqa: E402

REPORT_PAIRS = ("cs-de", "en-ar", "en-et", "en-it")


def line(label, x) -> str:
    return (f"{label:<26}{x['generated']:>10.1f}{x['generations']:>10.1f}{x['tau']:>8.3f}"
            f"{x['confident_accuracy']:>9.3f}{x['confident_pairs_per_run']:>8.2f}{x['coverage']:>8.3f}")


def pooled(results, spend, mode, metrics) -> dict:
    """Over pairs: mean generations and τ, pooled confident pairs and coverage."""
    xs = [r["summary"][spend][mode] for r in results]
    n = len(xs)
    per = {}
    for k in metrics:
        ys = [x["metrics"][k] for x in xs]
        right, conf = sum(y["right"] for y in ys), sum(y["confident"] for y in ys)
        cov, mod = sum(y["covered"] for y in ys), sum(y["models"] for y in ys)
        per[k] = {"tau": sum(y["tau"] for y in ys) / n, "confident_accuracy": right / conf if conf else float("nan"),
                  "confident_pairs_per_run": sum(y["confident_pairs_per_run"] for y in ys) / n,
                  "coverage": cov / mod, "right": right, "confident": conf}
    right = sum(p["right"] for p in per.values())
    conf = sum(p["confident"] for p in per.values())
    return {"generated": sum(x["generated"] for x in xs) / n, "generations": sum(x["generations"] for x in xs) / n,
            "tau": sum(x["tau"] for x in xs) / n, "confident_accuracy": right / conf if conf else float("nan"),
            "confident_pairs_per_run": sum(x["confident_pairs_per_run"] for x in xs) / n,
            "coverage": sum(x["coverage"] for x in xs) / n, "metrics": per}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--dataset", choices=("wmt25", "wmt24"), default="wmt25",
                    help="wmt24: BLEU and chrF of the four WMT24 pairs (token counts: items cost what they cost)")
    ap.add_argument("--pairs", nargs="+", default=None, help="default: the WMT25 report half, or every WMT24 pair")
    ap.add_argument("--metrics", nargs="+", default=None)
    ap.add_argument("--spends", nargs="+", type=float, default=[1.0, 5.0])
    ap.add_argument("--weighting", choices=ITEM_WEIGHTINGS, default="normalised",
                    help="how the joint run sums an item's information over the metrics")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    if a.pairs is None:
        a.pairs = list(REPORT_PAIRS) if a.dataset == "wmt25" else list(WMT24_PAIRS)
    if a.metrics is None:
        a.metrics = list(WMT25_METRICS) if a.dataset == "wmt25" else list(WMT24_METRICS)
    config = BacktestConfig(seeds=a.seeds)
    t0 = time.perf_counter()
    results = []
    head = f"{'':<26}{'generated':>10}{'distinct':>10}{'tau':>8}{'conf.acc':>9}{'pairs':>8}{'cover':>8}"
    for pair in a.pairs:
        tables = {m: load_named(f"{a.dataset}/{pair}/{m}") for m in a.metrics}
        r = backtest_multi(tables, config=config, spends=a.spends, item_weighting=a.weighting)
        r["pair"] = pair
        results.append(r)
        print(f"\n{a.dataset}/{pair} ({r['n_models']} models, {a.seeds} seeds × {r['folds_run']} folds; {r['seconds']:.0f} s)")
        print(head)
        for s in r["summary"]:
            for mode in MODES:
                print(line(f"S={s} {mode}", r["summary"][s][mode]))
        sys.stdout.flush()
    spends = list(results[0]["summary"])
    pool = {s: {mode: pooled(results, s, mode, a.metrics) for mode in MODES} for s in spends}
    print(f"\nPOOLED over {len(results)} pairs")
    print(head)
    for s in spends:
        for mode in MODES:
            print(line(f"S={s} {mode}", pool[s][mode]))
    print("\nper metric: tau / confident accuracy / confident pairs per run")
    print(f"{'':<20}" + "".join(f"{k:>22}" for k in a.metrics))
    for s in spends:
        for mode in MODES:
            m = pool[s][mode]["metrics"]
            print(f"{f'S={s} {mode}':<20}" + "".join(
                f"{m[k]['tau']:>8.3f}/{m[k]['confident_accuracy']:.3f}/{m[k]['confident_pairs_per_run']:.2f}"
                for k in a.metrics))
    print(f"\n{time.perf_counter() - t0:.0f} s", file=sys.stderr)
    if a.json:
        out = {"settings": {"dataset": a.dataset, "seeds": a.seeds, "weighting": a.weighting, "pairs": a.pairs, "metrics": a.metrics, "spends": a.spends,
                            "prices": "uniform", "config": results[0]["settings"]},
               "pooled": pool,
               "pairs": {r["pair"]: {k: r[k] for k in ("n_models", "n_joint_items", "folds_run", "seconds", "summary")}
                         for r in results}}
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

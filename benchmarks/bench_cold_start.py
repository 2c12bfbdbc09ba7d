"""Cold start on the dev tables (issue 31): the history curve, tuning half and report half apart.

    python benchmarks/bench_cold_start.py --half tuning|report [--history 0[,2,5,all]] [--seeds 3]
        [--tables NAME ...] [--json out.json] [--no-fallback] [--bank-use-margin M]
        [--allocation settle|uncertainty|steer|steer-settle] [--target-items 20] [--anytime]

The halves are benchmarks/bench_honesty.py's; uniform prices, 5 folds of 4 hold-out models, the
backtest's budget (20 items per model). Per N (0: the bank-free ranker; N > 0 a bank from N of the
other models; all: the usual backtest) and per table: τ, random τ and shared-random τ at the same spend,
items, confident-pair accuracy, full-task coverage; pooled per half. A bank from fewer models than
engine/anytime/small_bank.py's MIN_BANK_MODELS is not used (the runs fall back to the bank-free ranker, as
rank does live); --no-fallback ranks with it regardless (the curve before the fallback). --bank-use-margin M
applies the self-check rule too (a bank whose self-check τ is below its shared-random τ − M is not used).
--anytime ranks a fold whose bank is used as rank --anytime does (the bank orders the open pairs only).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from bench_honesty import REPORT, TUNING  # noqa: E402
from lm_eval_adaptive.data.prices import uniform_prices  # noqa: E402
from lm_eval_adaptive.data.tables import load_any_table  # noqa: E402
from lm_eval_adaptive.engine.anytime.pair_worth import ALLOCATIONS, DEFAULT_ALLOCATION  # noqa: E402
from lm_eval_adaptive.engine.anytime.history_backtest import history_backtest, parse_history, pooled_history  # noqa: E402
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig  # noqa: E402
from lm_eval_adaptive.engine.anytime.small_bank import BANK_USE_MARGIN  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--half", choices=("tuning", "report"), required=True)
    ap.add_argument("--history", default="0")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--tables", nargs="*", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--allocation", default=DEFAULT_ALLOCATION, choices=ALLOCATIONS)
    ap.add_argument("--target-items", type=int, default=20, help="the budget: items per model (the backtest's 20)")
    ap.add_argument("--no-fallback", action="store_true", help="rank with a bank from too few models regardless")
    ap.add_argument("--bank-use-margin", type=lambda v: None if v == "off" else float(v), default=BANK_USE_MARGIN,
                    help="the bank-use rule's m (engine/anytime/small_bank.py): a bank whose self-check τ is below "
                         f"its shared-random τ − m is not used (default {BANK_USE_MARGIN}, rank's; off: never)")
    ap.add_argument("--anytime", action="store_true", help="a used bank's folds ranked as rank --anytime ranks")
    a = ap.parse_args()
    names = a.tables or (TUNING if a.half == "tuning" else REPORT)
    history = parse_history(a.history)
    config = BacktestConfig(seeds=a.seeds, bank_use_margin=a.bank_use_margin, target_items=a.target_items,
                            anytime=a.anytime)
    results = []
    print(f"{'table':<28}{'N':>5}{'tau':>8}{'random':>8}{'shared':>8}{'items':>8}{'conf acc':>10}{'pairs':>7}{'coverage':>10}")
    for name in names:
        t = load_any_table(name)
        r = history_backtest(t, config=config, history=history, prices=uniform_prices(t.models),
                            allocation=a.allocation, fallback=not a.no_fallback)
        r["table"] = name
        for c in r["curve"].values():
            c.pop("runs_detail", None)
        results.append(r)
        for n, c in r["curve"].items():
            print(f"{name[:27]:<28}{n:>5}{c['tau']:>8.3f}{c['random_tau']:>8.3f}{c['shared_random_tau']:>8.3f}"
                  f"{c['items']:>8.1f}{c['confident_accuracy']:>10.3f}{c['confident']:>7d}{c['coverage']:>10.3f}",
                  flush=True)
    pooled = pooled_history(results)
    for n, c in pooled.items():
        print(f"{'pooled ' + a.half:<28}{n:>5}{c['tau']:>8.3f}{c['random_tau']:>8.3f}{c['shared_random_tau']:>8.3f}"
              f"{c['items']:>8.1f}{c['confident_accuracy']:>10.3f}{c['confident_pairs']:>7d}{c['coverage']:>10.3f}")
        print(f"  lowest table's confident accuracy: {c['lowest_table_confident_accuracy']}; runs by mode: {c['modes']}")
        gaps = [r["curve"][n]["tau"] - r["curve"][n]["shared_random_tau"] for r in results if n in r["curve"]]
        se = float(np.std(gaps, ddof=1) / np.sqrt(len(gaps))) if len(gaps) > 1 else float("nan")
        print(f"  tau - shared random: {float(np.mean(gaps)):+.4f} (standard error over the tables {se:.4f})")
    if a.json:
        Path(a.json).write_text(json.dumps({"half": a.half, "allocation": a.allocation, "fallback": not a.no_fallback,
                                            "bank_use_margin": a.bank_use_margin, "seeds": a.seeds,
                                            "target_items": a.target_items, "anytime": a.anytime, "history": [str(h) for h in history],
                                            "tables": results, "pooled": pooled}, indent=1))


if __name__ == "__main__":
    main()

"""A backtest sweep one after another against in parallel processes: median wall times, their ratio,
and a check that the figures are identical (every key but ``seconds``).

    python benchmarks/bench_sweep.py [--tables NAME ...] [--seeds 5] [--jobs N] [--repeats 3]

The runs alternate (serial, parallel, serial, ...) so that a shared machine's load falls on both;
the speed-up it can show is bounded by the CPUs this process actually gets.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lm_eval_adaptive.data.tables import load_any_table  # noqa: E402
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig  # noqa: E402
from lm_eval_adaptive.sweep import default_jobs, run_backtests  # noqa: E402

TABLES = ["wmt24/en-de/bleu", "wmt24/en-de/chrf", "wmt24/en-es/bleu", "alpaca_eval/judge"]


def figures(results) -> str:
    out = []
    for r in results:
        d = r.to_dict()
        d.pop("seconds")
        out.append(d)
    return json.dumps(out, sort_keys=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", nargs="+", default=TABLES)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=default_jobs())
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args(argv)
    tables = [load_any_table(t) for t in a.tables]
    config = BacktestConfig(seeds=a.seeds)
    walls = {1: [], a.jobs: []}
    seen = set()
    for _ in range(a.repeats):
        for jobs in (1, a.jobs):
            t0 = time.perf_counter()
            results = run_backtests(tables, config=config, jobs=jobs)
            walls[jobs].append(time.perf_counter() - t0)
            seen.add(figures(results))
            print(f"  --jobs {jobs}: {walls[jobs][-1]:.1f} s", file=sys.stderr, flush=True)
    serial, parallel = statistics.median(walls[1]), statistics.median(walls[a.jobs])
    print(f"{len(tables)} tables × {config.folds} folds × {a.seeds} seeds, {a.repeats} repeats, "
          f"{os.cpu_count()} CPUs (load average {os.getloadavg()[0]:.1f})")
    print(f"median wall: --jobs 1 {serial:.1f} s, --jobs {a.jobs} {parallel:.1f} s, ratio {serial / parallel:.2f}")
    print("figures identical" if len(seen) == 1 else "FIGURES DIFFER")
    return 0 if len(seen) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())

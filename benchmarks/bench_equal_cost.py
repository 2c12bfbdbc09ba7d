"""Where the bank's lead comes from on the costed dev tables: the same backtests with every document at one cost.

On WMT24 and AlpacaEval a document's price follows its token counts, so a ranker that may choose its documents
(the banked ranker) can buy more of them for the same dollars than one that takes them in a uniform random order
(the bank-free ranker). This runs both on those 9 tables of the tuning half as they are and with their token counts
removed (every document one token in and out, as on the WMT25 tables), 5 folds × ``--seeds``, ``--settle-seeds 0``,
uniform prices, and prints pooled τ, items per 4-model set and shared random τ for each.

    python benchmarks/bench_equal_cost.py [--seeds 10] [--jobs 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from bench_honesty import TUNING  # noqa: E402
from lm_eval_adaptive.data.tables import load_any_table  # noqa: E402
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig  # noqa: E402
from lm_eval_adaptive.sweep import run_backtests  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    names = [n for n in TUNING if not n.startswith("wmt25/")]
    out = {"settings": {"seeds": a.seeds, "tables": names}}
    print(f"{'documents':12s} {'ranker':10s} {'tau':>6s} {'items':>7s} {'shared random tau':>18s}")
    for label, equal in (("as priced", False), ("equal cost", True)):
        tables = [load_any_table(n) for n in names]
        if equal:
            tables = [dataclasses.replace(t, input_tokens=None, output_tokens=None) for t in tables]
        for ranker, config in (("banked", BacktestConfig(seeds=a.seeds, settle_seeds=0)),
                               ("bank-free", BacktestConfig(seeds=a.seeds, settle_seeds=0, bank_use_margin=-1.0))):
            results = run_backtests(tables, config=config, jobs=a.jobs)
            rows = {n: {"tau": r.adaptive.tau, "items": r.adaptive.items, "shared_random_tau": r.shared_random.tau}
                    for n, r in zip(names, results)}
            pooled = {k: float(np.mean([v[k] for v in rows.values()])) for k in ("tau", "items", "shared_random_tau")}
            out[f"{label} / {ranker}"] = {"tables": rows, "pooled": pooled}
            print(f"{label:12s} {ranker:10s} {pooled['tau']:6.3f} {pooled['items']:7.1f} {pooled['shared_random_tau']:18.3f}",
                  flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

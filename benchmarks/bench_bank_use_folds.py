"""Does a bank's self-check foresee where the bank loses? (issue 31 item 3; docs/cold-start.md, *The bank-use rule*)

    python benchmarks/bench_bank_use_folds.py [--half tuning|report|both] [--seeds 10] [--self-check-seeds 2]
        [--margins off,0.10,0.05,0.0] [--json out.json]

Two backtests of each half, the same folds and seeds: every fold ranked with its bank (the bank-use rule off) and
every fold ranked bank-free (``bank_use_margin=-1``: the rule rejects every bank). Per fold: the banked τ, the
bank-free τ, the shared-random τ at the banked run's spend, and the fold bank's self-check figures (its adaptive τ
and its shared-random τ on the calibration models' own history, ``--self-check-seeds`` × up to 5 hold-out sets).

Printed per half:
* the correlation, over folds, of the fold's banked − shared-random τ with its self-check's: how well the
  self-check foresees the fold;
* for each m of ``--margins``, the pooled τ the bank-use rule at m gives (a fold whose self-check τ is below its
  shared-random τ − m takes the bank-free run's τ): what ``bench_honesty.py --bank-use-margin m`` measures, from two
  runs instead of one per m (the same per-fold runs: the combination is exact).
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
from lm_eval_adaptive.data.tables import load_any_table  # noqa: E402
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig  # noqa: E402
from lm_eval_adaptive.sweep import run_backtests  # noqa: E402


def fold_rows(names, config: BacktestConfig, jobs: int) -> list[dict]:
    """Per fold of every table: its τ, shared-random τ and its bank's self-check figures."""
    rows = []
    for name, r in zip(names, run_backtests([load_any_table(n) for n in names], config=config, jobs=jobs)):
        for f in r.folds:
            check = f.get("self_check_taus") or {}
            rows.append({"table": name, "fold": f["fold"], "tau": f["adaptive_tau"], "shared": f["shared_random_tau"],
                         "check_tau": check.get("mean_tau"), "check_shared": check.get("shared_random_tau"),
                         "check_runs": check.get("tau_runs")})
    return rows


def rule_tau(banked: list[dict], bank_free: dict, margin: float | None) -> tuple[float, int]:
    """(pooled τ, folds fallen back) of the bank-use rule at ``margin`` (None: never), from the per-fold runs."""
    per_table: dict = {}
    fell = 0
    for r in banked:
        has = r["check_tau"] is not None and r["check_shared"] is not None
        use = margin is None or not has or r["check_tau"] >= r["check_shared"] - margin - 1e-12
        fell += not use
        per_table.setdefault(r["table"], []).append(r["tau"] if use else bank_free[(r["table"], r["fold"])])
    return float(np.mean([np.mean(v) for v in per_table.values()])), fell


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--half", choices=("tuning", "report", "both"), default="both")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--self-check-seeds", type=int, default=BacktestConfig().self_check_seeds)
    ap.add_argument("--margins", default="off,0.10,0.05,0.0")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    margins = [None if m.strip() == "off" else float(m) for m in a.margins.split(",")]
    config = BacktestConfig(seeds=a.seeds, settle_seeds=0, bank_use_margin=None, self_check_seeds=a.self_check_seeds)
    out = {"seeds": a.seeds, "self_check_seeds": a.self_check_seeds, "halves": {}}
    for half, names in (("tuning", TUNING), ("report", REPORT)):
        if a.half not in (half, "both"):
            continue
        banked = fold_rows(names, config, a.jobs)
        free = {(r["table"], r["fold"]): r["tau"]
                for r in fold_rows(names, BacktestConfig(seeds=a.seeds, settle_seeds=0, bank_use_margin=-1.0,
                                                         self_check_seeds=a.self_check_seeds), a.jobs)}
        gaps = np.array([(r["tau"] - r["shared"], r["check_tau"] - r["check_shared"]) for r in banked
                         if r["check_tau"] is not None and r["check_shared"] is not None])
        corr = float(np.corrcoef(gaps[:, 0], gaps[:, 1])[0, 1]) if len(gaps) > 2 else float("nan")
        runs = sorted({r["check_runs"] for r in banked if r["check_runs"]})
        print(f"{half}: {len(banked)} folds, self-check runs per fold {runs}; correlation of a fold's banked − "
              f"shared-random τ with its self-check's: {corr:+.3f}")
        rules = {}
        for m in margins:
            tau, fell = rule_tau(banked, free, m)
            rules["off" if m is None else f"{m:g}"] = {"tau": tau, "folds_fallen_back": fell}
            print(f"  m = {'off' if m is None else f'{m:g}':>5}: pooled τ {tau:.4f}, {fell} of {len(banked)} folds bank-free")
        out["halves"][half] = {"correlation": corr, "rules": rules, "folds": banked,
                               "bank_free_tau": [{"table": t, "fold": f, "tau": v} for (t, f), v in free.items()]}
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

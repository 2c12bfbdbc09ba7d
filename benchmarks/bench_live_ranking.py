"""Live ranking vs the backtest, set for set: the backtest's hold-out sets ranked live.

For each hold-out set of the backtest of a WMT24 table (the reference code's partition:
seed 42, 4 systems per set), a bank is calibrated on the other systems and the 4 systems
are ranked live through the real harness, litellm and HTTP against the replay endpoint,
with litellm prices ($1/$3 per M tokens for systems litellm does not price, as in the
backtest) and a cap of the backtest's budget for the set plus the headroom one call per
model needs under a hard cap (its upper estimate: max_gen_toks output tokens). Optionally
the same under injected faults. Prints per set and run: Kendall τ against the full-data
ranking, confident pairs (correct / settled), items, spend, stop reason, and the backtest's
τ; then the mean τ over the sets of each run. Runs of the same set can differ: which model
is asked next depends on the order in which answers arrive, as in any live run.

    python benchmarks/bench_live_ranking.py [--table wmt24/en-de/bleu] [--fail-rate 0.2] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from lm_eval_adaptive.engine.evaluation.backtest_figures import holdout_sets, kendall_tau  # noqa: E402
from lm_eval_adaptive.cli.main import main  # noqa: E402
from lm_eval_adaptive.data.price_map import price_for  # noqa: E402
from lm_eval_adaptive.data.prices import DEFAULT_PRICE  # noqa: E402
from lm_eval_adaptive.data.named_tables import load_named  # noqa: E402
from lm_eval_adaptive.errors import InputError  # noqa: E402
from lm_eval_adaptive.replay.server import ReplayServer, max_answers_per_item  # noqa: E402

MAX_GEN_TOKS = 1024  # task_configs/wmt24
MAX_PROMPT_TOKENS = 2000


def main_bench() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", default="wmt24/en-de/bleu")
    ap.add_argument("--fail-rate", type=float, default=0.0)
    ap.add_argument("--backtest-json", default=str(REPO / "docs/results/backtest_5x20_litellm.json"))
    ap.add_argument("--json", default=None, help="write the per-set results here")
    ap.add_argument("--repeats", type=int, default=1,
                    help="runs per set: a live run's choices depend on the order answers arrive in")
    a = ap.parse_args()
    pair, metric = a.table.split("/")[1], a.table.split("/")[2]
    task = f"wmt24_{pair}"
    table = load_named(a.table)
    names = [str(m) for m in table.models]
    truth_mean = dict(zip(names, np.nanmean(table.mean_matrix(), axis=1).tolist()))
    bt = json.loads(Path(a.backtest_json).read_text())
    bt_folds = next(t for t in bt["tables"] if t["table"] == a.table)["folds"]
    tmp = Path(tempfile.mkdtemp(prefix="bench-live-rank-"))
    out_rows = []
    with ReplayServer(fail_rate=a.fail_rate) as srv:
        os.environ["OPENAI_API_BASE"] = srv.url
        os.environ["OPENAI_API_KEY"] = "replay"
        for f, hold in enumerate(holdout_sets(names, 4, 5, 42)):
            bank = tmp / f"bank{f}.json"
            assert main(["calibrate", a.table, "--exclude-models", *hold, "--task", task, "--metric", metric,
                         "--out", str(bank)]) == 0
            prices, headroom = [], 0.0
            for m in hold:
                try:
                    p = price_for(m, default=None)
                except InputError:
                    p = DEFAULT_PRICE
                    prices += ["--price", f"{m}={p.input_per_mtok:g},{p.output_per_mtok:g}"]
                headroom += MAX_PROMPT_TOKENS * p.input_per_token + MAX_GEN_TOKS * p.output_per_token
            fold = bt_folds[f]
            cap = fold["budget_usd"] + headroom
            for rep in range(a.repeats):
                srv.reset_stats()
                out = tmp / f"fold{f}_run{rep}"
                rc = main(["rank", "--models", *[f"{m}=litellm:model=openai/{m}" for m in hold], "--tasks", task,
                           "--bank", str(bank), "--include_path", str(REPO / "task_configs"),
                           "--apply_chat_template", "--item-field", "id", "--budget-usd", f"{cap:.6f}",
                           "--output", str(out), "--no-progress", "--backoff", "0.05", *prices])
                assert rc == 0
                r = json.loads((out / "ranking.json").read_text())
                order = [e["model"] for e in r["ranking"]]
                truth = sorted(hold, key=lambda m: -truth_mean[m])
                up = 1 - (1 - r["confidence"]) / 2
                conf = [(x, y) for x in order for y in order if x != y and r["pairwise"][x][y] > up]
                correct = sum(truth_mean[x] > truth_mean[y] for x, y in conf)
                stats = srv.stats()
                row = {"set": f, "run": rep, "systems": hold, "tau": kendall_tau(order, truth),
                       "backtest_tau": fold["adaptive_tau"], "confident": len(conf), "confident_correct": correct,
                       "items": r["total_items"], "spent_usd": r["total_cost_usd"], "cap_usd": cap,
                       "backtest_budget_usd": fold["budget_usd"], "stopped_because": r["stopped_because"],
                       "retries": r["calls"]["retries"], "served": stats["served"],
                       "max_served_per_item": max_answers_per_item(stats), "ranking": order, "truth": truth}
                out_rows.append(row)
                print(f"set {f} run {rep} {hold}: τ {row['tau']:.3f} (backtest {row['backtest_tau']:.3f}); "
                      f"confident pairs {correct}/{len(conf)} correct; {row['items']} items; "
                      f"${row['spent_usd']:.4f} of ${cap:.4f} (backtest budget ${fold['budget_usd']:.4f}); "
                      f"stopped: {row['stopped_because']}; retries {row['retries']}; each item served "
                      f"≤ {row['max_served_per_item']}×", flush=True)
    # per run: the mean τ over the five sets (as the backtest reports a table), then the median over runs
    by_run = [[r for r in out_rows if r["run"] == k] for k in range(a.repeats)]
    run_tau = [float(np.mean([r["tau"] for r in rows])) for rows in by_run]
    n_conf = sum(r["confident"] for r in out_rows)
    n_ok = sum(r["confident_correct"] for r in out_rows)
    over_cap = sum(r["spent_usd"] > r["cap_usd"] for r in out_rows)
    print(f"mean τ per run: {', '.join(f'{t:.3f}' for t in run_tau)}; median {np.median(run_tau):.3f} "
          f"(backtest {np.mean([r['backtest_tau'] for r in by_run[0]]):.3f}); confident pairs {n_ok}/{n_conf} "
          f"correct; median items per run {np.median([sum(r['items'] for r in rows) for rows in by_run]):.0f}; "
          f"median spend per run ${np.median([sum(r['spent_usd'] for r in rows) for rows in by_run]):.4f}; "
          f"runs over their cap: {over_cap} of {len(out_rows)}; most answers per item "
          f"{max(r['max_served_per_item'] for r in out_rows)}; fail rate {a.fail_rate}")
    if a.json:
        Path(a.json).write_text(json.dumps({"table": a.table, "fail_rate": a.fail_rate, "repeats": a.repeats,
                                            "mean_tau_per_run": run_tau, "sets": out_rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main_bench())

"""run --adaptive with a bank from few models (issue 31, item 3): is the banked single-model estimate honest,
and narrower than the bank-free one, at each number N of calibration models?

    python benchmarks/bench_small_bank_run.py --half tuning|report [--history 2,5,8,12,all] [--held 8] [--json out.json]

Per table (the halves of bench_honesty.py): `--held` models drawn at random (seeded) are held out; for each N a
bank is calibrated as `calibrate` does (with its self-check) from N of the other models drawn at random (seeded
by N; `all`: every other one); each held-out model runs as `run --adaptive` runs it (its default stopping rules,
engine/cat via harness/task_loop.adaptive_test), and the bank-free test (engine/anytime/bank_free_test.py) answers
as many documents in random order. Figures per N, pooled over models: coverage of the model's full-task mean (over
the bank's items) by each interval at the stop, mean width of each, documents.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_honesty import REPORT, TUNING  # noqa: E402
from lm_eval_adaptive.data.tables import load_any_table  # noqa: E402
from lm_eval_adaptive.engine.anytime.bank_free_test import BankFreeTest  # noqa: E402
from lm_eval_adaptive.engine.cat.full_task import full_task_estimate  # noqa: E402
from lm_eval_adaptive.engine.evaluation.self_check import calibrate_checked  # noqa: E402
from lm_eval_adaptive.harness.task_loop import AdaptiveRunConfig, adaptive_test  # noqa: E402


def one_table(name: str, history, held_n: int) -> dict:
    table = load_any_table(name)
    models = list(table.models)
    M = table.mean_matrix()
    lo, hi = float(np.nanmin(M)), float(np.nanmax(M))
    cols = {str(i): j for j, i in enumerate(table.items)}
    perm = np.random.default_rng(0).permutation(len(models))
    held, rest = perm[:held_n], perm[held_n:]
    out = {}
    for n in history:
        if n != "all" and n > len(rest):
            continue
        cal = rest if n == "all" else rest[np.sort(np.random.default_rng([1, n]).choice(len(rest), n, replace=False))]
        bank = calibrate_checked(table.select_models([models[i] for i in cal]))
        idx = np.array([cols[str(i)] for i in bank.item_ids])
        rows = []
        for m in held:
            raw = M[m, idx]
            if np.isnan(raw).any():
                continue
            truth = float(np.mean(raw))
            test = adaptive_test(bank, np.zeros(bank.n_items), AdaptiveRunConfig(), str(m))
            while items := test.next_items(1):
                for i in items:
                    test.record(i, float(bank.scale(i, raw[i])))
            e = test.examinee
            est = full_task_estimate(bank, e.items, raw[e.items], e.theta, e.se, misfit=e.misfit)
            bf = BankFreeTest([str(i) for i in range(len(raw))], score_range=(lo, hi), max_items=e.n, seed=int(m))
            while its := bf.next_items(1):
                for i in its:
                    bf.record(i, float(raw[int(i)]))
            r = bf.result()
            rows.append({"items": e.n, "banked": [est["lower"], est["upper"]], "bank_free": [r.lower, r.upper],
                         "truth": truth, "range": hi - lo})
        out[str(n)] = {"calibration_models": len(cal), "runs": rows}
    return out


def pooled(results: dict, key: str) -> dict:
    runs = [r for t in results.values() if key in t for r in t[key]["runs"]]
    if not runs:
        return {}

    def cov(side):
        return float(np.mean([r[side][0] - 1e-9 <= r["truth"] <= r[side][1] + 1e-9 for r in runs]))

    def width(side):  # in shares of the table's score range, so that tables of other scales pool
        return float(np.mean([(r[side][1] - r[side][0]) / r["range"] for r in runs]))

    return {"models": len(runs), "banked_coverage": cov("banked"), "bank_free_coverage": cov("bank_free"),
            "banked_width": width("banked"), "bank_free_width": width("bank_free"),
            "items": float(np.mean([r["items"] for r in runs])),
            "lowest_table_banked_coverage": min(
                (float(np.mean([r["banked"][0] - 1e-9 <= r["truth"] <= r["banked"][1] + 1e-9 for r in t[key]["runs"]])), n)
                for n, t in results.items() if key in t and t[key]["runs"])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--half", choices=("tuning", "report"), required=True)
    ap.add_argument("--history", default="2,5,8,12,all")
    ap.add_argument("--held", type=int, default=8)
    ap.add_argument("--tables", nargs="*", default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    history = [h if h == "all" else int(h) for h in a.history.split(",")]
    names = a.tables or (TUNING if a.half == "tuning" else REPORT)
    results = {}
    for name in names:
        results[name] = one_table(name, history, a.held)
        for n, t in results[name].items():
            p = pooled({name: results[name]}, n)
            print(f"{name:<28}{n:>5} banked cov {p['banked_coverage']:.3f} width {p['banked_width']:.4f} | "
                  f"bank-free cov {p['bank_free_coverage']:.3f} width {p['bank_free_width']:.4f} | items {p['items']:.0f}",
                  flush=True)
    summary = {str(n): pooled(results, str(n)) for n in history}
    for n, p in summary.items():
        if p:
            print(f"pooled {a.half} N={n}: models {p['models']}, banked coverage {p['banked_coverage']:.3f} (lowest table "
                  f"{p['lowest_table_banked_coverage'][0]:.3f} {p['lowest_table_banked_coverage'][1]}), width "
                  f"{p['banked_width']:.4f} of the range; bank-free at the same documents coverage "
                  f"{p['bank_free_coverage']:.3f}, width {p['bank_free_width']:.4f}; documents {p['items']:.0f}")
    if a.json:
        Path(a.json).write_text(json.dumps({"half": a.half, "held": a.held, "history": [str(h) for h in history],
                                            "tables": results, "pooled": summary}, indent=1))


if __name__ == "__main__":
    main()

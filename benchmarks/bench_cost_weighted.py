"""What drawing cheaper documents more often would buy a design with no bank (stop 33; a measurement, not built).

On the dev tables whose documents' prices follow their token counts (WMT24, AlpacaEval; the WMT25 and REALSumm tables
have no token counts, so every document costs the same and this changes nothing there), the 4 models of each
hold-out set answer the same documents until the set's budget (the backtest's: 20 documents per model at the mean
document cost, uniform prices) is spent. The documents are drawn without replacement with probability proportional
to cost^-alpha (Efraimidis-Spirakis keys; alpha = 0: uniform, the ``shared_random`` design) and each model is ranked
by the Hajek-weighted mean (weights cost^alpha, the inverse of the draw probability up to a constant). Prints τ
against the full-data ranking and documents per model for each alpha, per table and pooled. Point estimates only:
no interval is computed; a confidence sequence for unequal-probability draws is what a product version would need.

    python benchmarks/bench_cost_weighted.py [--seeds 50] [--alphas 0,0.25,0.5,0.75,1] [--json out.json]
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

from bench_honesty import TUNING  # noqa: E402
from lm_eval_adaptive.data.tables import load_any_table  # noqa: E402
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig  # noqa: E402
from lm_eval_adaptive.engine.evaluation.backtest_figures import holdout_sets, kendall_tau  # noqa: E402

#: $ per token in and out, as ``--prices uniform`` ($1 / $3 per million): only the ratio matters here
IN_PRICE, OUT_PRICE = 1.0, 3.0


def cell_costs(table) -> np.ndarray:
    """Models × documents: each answer's cost at uniform prices (NaN where the table has no answer)."""
    cost = np.full((len(table.models), len(table.items)), np.nan)
    n = len(table.score)
    tin = np.ones(n) if table.input_tokens is None else np.asarray(table.input_tokens, float)
    tout = np.ones(n) if table.output_tokens is None else np.asarray(table.output_tokens, float)
    cost[table.model_idx, table.item_idx] = tin * IN_PRICE + tout * OUT_PRICE
    return cost


def table_figures(name: str, *, seeds: int, alphas: list[float], per_model: int = 20) -> dict:
    table = load_any_table(name)
    scores, cost = table.mean_matrix(), cell_costs(table)
    models = [str(m) for m in table.models]
    config = BacktestConfig()
    where = {m: i for i, m in enumerate(models)}
    taus = {a: [] for a in alphas}
    docs_taken = {a: [] for a in alphas}
    for fold, held in enumerate(holdout_sets(models, config.holdout_size, config.folds_that_fit(len(models)),
                                             config.partition_seed)):
        rows = [where[m] for m in held]
        docs = np.flatnonzero(~np.isnan(scores[rows]).any(axis=0) & ~np.isnan(cost[rows]).any(axis=0))
        doc_cost = cost[rows][:, docs].sum(axis=0)  # what one document costs the set
        budget = doc_cost.mean() * per_model
        truth = [held[j] for j in np.argsort(-np.nanmean(scores[rows], axis=1), kind="stable")]
        for seed in range(seeds):
            u = np.random.default_rng([fold, seed]).random(len(docs))
            for a in alphas:
                order = np.argsort(-(np.log(u) * doc_cost ** a))  # the largest log(u) / weight first
                taken = order[np.cumsum(doc_cost[order]) <= budget]
                weight = doc_cost[taken] ** a
                est = np.array([(scores[r, docs[taken]] * weight).sum() / weight.sum() for r in rows])
                taus[a].append(kendall_tau([held[j] for j in np.argsort(-est, kind="stable")], truth))
                docs_taken[a].append(len(taken))
    return {"table": name, **{f"tau {a:g}": float(np.mean(taus[a])) for a in alphas},
            **{f"documents {a:g}": float(np.mean(docs_taken[a])) for a in alphas}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--alphas", default="0,0.25,0.5,0.75,1")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    alphas = [float(x) for x in a.alphas.split(",")]
    names = [n for n in TUNING if not n.startswith("wmt25/")]
    rows = [table_figures(n, seeds=a.seeds, alphas=alphas) for n in names]
    pooled = {k: float(np.mean([r[k] for r in rows])) for k in rows[0] if k != "table"}
    print(f"# {a.seeds} seeds; tau (documents per model) for draw probability ~ cost^-alpha, at the same dollars")
    for r in rows + [{"table": "POOLED", **pooled}]:
        print(f"{r['table']:22s} " + "  ".join(f"a={x:g}: {r[f'tau {x:g}']:.3f} ({r[f'documents {x:g}']:.1f})"
                                              for x in alphas))
    if a.json:
        Path(a.json).write_text(json.dumps({"settings": vars(a), "tables": rows, "pooled": pooled}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Why the bank-free ranker ties shared random documents at matched spend (issue 31): a diagnosis.

    python benchmarks/bench_bank_free_diagnose.py --half tuning [--seeds 2] [--allocation settle]
        [--tables NAME ...] [--json out.json]

The runs of bench_cold_start.py at N = 0 (the same folds, seeds, budget, prices, score range), each
ranker instrumented: items per set against the shared-random baseline's at the same spend; how many
pairs are settled and after how many items the first one settles; the share of the items asked while
some pair was already settled (the only items where the allocation can differ from shared random);
the items per model (max/min within a set); the stop reasons; whether the ranker's order equals the
order of the plain means over the documents every model of the set answered; and, as yardsticks, the τ
of shared random at twice the spend and of an *oracle* allocation (documents to the models of the pair
closest in truth, an upper bound on what steering can buy at this spend).
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
from lm_eval_adaptive.engine.anytime.bank_free_ranker import ALLOCATIONS, BankFreeRanker  # noqa: E402
from lm_eval_adaptive.engine.anytime.pair_decisions import UNRESOLVED  # noqa: E402
from lm_eval_adaptive.engine.evaluation.backtest import plan_backtest  # noqa: E402
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig  # noqa: E402
from lm_eval_adaptive.engine.evaluation.backtest_figures import kendall_tau  # noqa: E402
from lm_eval_adaptive.engine.evaluation.baselines import shared_random  # noqa: E402
from lm_eval_adaptive.engine.evaluation.fold_parts import table_item_tokens, table_range  # noqa: E402


def oracle_tau(hold, raw_h, costs, spend, perm, truth_mean, truth) -> float:
    """Documents in ``perm``'s order, each next one to the pair closest in truth (relative to the pair's
    spread of differences), both its models, until the spend is used: an upper bound for steering."""
    j = {m: i for i, m in enumerate(hold)}
    pairs = [(a, b) for i, a in enumerate(hold) for b in hold[i + 1:]]
    # how hard each pair is: |true gap| / sd of its differences (smaller: more documents help more)
    hard = {}
    for a, b in pairs:
        d = raw_h[j[a]] - raw_h[j[b]]
        sd = float(np.nanstd(d)) or 1e-12
        hard[(a, b)] = abs(truth_mean[a] - truth_mean[b]) / sd
    from scipy.stats import norm
    n = {m: 0 for m in hold}
    spent = 0.0
    for m in hold:  # an equal warm start of 5 documents each
        n[m] = 5
        spent += float(np.sum(costs[m][perm[:5]]))

    def loss(nn):  # expected misordered pairs (normal approximation at the true gaps)
        return sum(norm.cdf(-hard[p] * np.sqrt(min(nn[p[0]], nn[p[1]]))) for p in pairs)

    while True:  # greedy: the model, or the two models of a pair, whose next document cuts the loss most per dollar
        base = loss(n)
        moves = [(m,) for m in hold] + list(pairs)
        best, best_val = None, 0.0
        for mv in moves:
            if any(n[m] >= perm.size for m in mv):
                continue
            c = sum(float(costs[m][perm[n[m]]]) for m in mv)
            if spent + c > spend:
                continue
            nn = dict(n)
            for m in mv:
                nn[m] += 1
            val = (base - loss(nn)) / c
            if val > best_val + 1e-15:
                best, best_val = mv, val
        if best is None:  # nothing cuts the loss: spend what is left round robin (as shared random)
            low = min(hold, key=lambda m: n[m])
            c = float(costs[low][perm[n[low]]]) if n[low] < perm.size else np.inf
            if spent + c > spend:
                break
            spent += c
            n[low] += 1
            continue
        for m in best:
            spent += float(costs[m][perm[n[m]]])
            n[m] += 1
    # rank by least squares of pairwise differences on common prefixes (= mean on shared documents)
    s = {m: 0.0 for m in hold}
    K = len(hold)
    A = np.zeros((K, K))
    r = np.zeros(K)
    for a, b in pairs:
        k = min(n[a], n[b])
        docs = perm[:k]
        d = raw_h[j[a], docs] - raw_h[j[b], docs]
        ok = ~np.isnan(d)
        if ok.any():
            w = ok.sum()
            ia, ib = hold.index(a), hold.index(b)
            A[ia, ia] += w
            A[ib, ib] += w
            A[ia, ib] -= w
            A[ib, ia] -= w
            r[ia] += w * np.nanmean(d)
            r[ib] -= w * np.nanmean(d)
    x = np.linalg.lstsq(A + 1.0 / K, r, rcond=None)[0]
    s = dict(zip(hold, x))
    return kendall_tau(sorted(hold, key=lambda m: -s[m]), truth)


def diagnose_table(name: str, seeds: int, allocation: str) -> list[dict]:
    table = load_any_table(name)
    config = BacktestConfig(seeds=seeds)
    plan = plan_backtest(table, config, uniform_prices(table.models))
    raw_all = table.mean_matrix()
    score_range = (float(np.nanmin(raw_all)), float(np.nanmax(raw_all)))
    in_tok, out_tok, _ = table_item_tokens(table)
    out = []
    for f in range(plan.n_folds):
        hold = list(plan.sets[f])
        raw_h = raw_all[[list(plan.models).index(m) for m in hold]]
        costs = {m: plan.price[m].item_costs(in_tok, out_tok) for m in hold}
        budget = float(np.mean([np.mean(costs[m]) for m in hold])) * len(hold) * config.target_items
        means = np.nanmean(raw_h, axis=1)
        truth_mean = dict(zip(hold, means.tolist()))
        truth = [hold[i] for i in np.argsort(-means, kind="stable")]
        missing = {m: np.flatnonzero(np.isnan(raw_h[j])) for j, m in enumerate(hold)}
        margin = config.tie_margin if config.tie_margin_share is None else config.tie_margin_share * table_range(raw_all)
        row = {m: j for j, m in enumerate(hold)}
        for seed in range(seeds):
            rk = BankFreeRanker(hold, [str(i) for i in table.items], score_range=score_range, item_costs=costs,
                                confidence=config.confidence, tie_margin=margin or 0.0, budget=budget,
                                n_max=config.max_items, exclude=missing, seed=[config.partition_seed, f, seed],
                                allocation=allocation)
            asked, after_settle, first_settle = 0, 0, None
            while (req := rk.ask()) is not None:
                open_now = sum(rk.outcome(a, b) == UNRESOLVED for i, a in enumerate(hold) for b in hold[i + 1:])
                if open_now < 6:
                    after_settle += 1
                    if first_settle is None:
                        first_settle = asked
                asked += 1
                rk.tell(req, float(raw_h[row[req.model], req.item]))
            res = rk.result(settle_costs=False)
            settled = sum(p["outcome"] != UNRESOLVED for p in res.pairs)
            n_items = [res.items[m] for m in hold]
            # plain means over the documents every model of the set answered
            told = {m: dict(res.item_log[m]) for m in hold}  # document id -> score
            common = set.intersection(*(set(t) for t in told.values()))
            cm = {m: float(np.mean([told[m][i] for i in common])) if common else -np.inf for m in hold}
            mean_order = sorted(hold, key=lambda m: -cm[m])
            perm = rk.permutation
            sr = shared_random(hold, raw_h, costs, res.total_cost, np.random.default_rng([seed, f, 11]), perm=perm)
            sr2 = shared_random(hold, raw_h, costs, 2 * res.total_cost, np.random.default_rng([seed, f, 11]), perm=perm)
            out.append({"table": name, "fold": f, "seed": seed, "tau": kendall_tau(res.ranking, truth),
                        "shared_tau": kendall_tau(sr["ranking"], truth), "shared2_tau": kendall_tau(sr2["ranking"], truth),
                        "oracle_tau": oracle_tau(hold, raw_h, costs, res.total_cost, perm, truth_mean, truth),
                        "common_mean_tau": kendall_tau(mean_order, truth),
                        "same_as_common_mean": res.ranking == mean_order, "items": res.total_items,
                        "shared_items": sr["items"], "settled": settled, "after_settle": after_settle,
                        "first_settle": first_settle, "items_max": max(n_items), "items_min": min(n_items),
                        "stopped": res.stopped_because})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--half", choices=("tuning", "report"), required=True)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--allocation", default="steer-settle", choices=ALLOCATIONS)
    ap.add_argument("--tables", nargs="*", default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    names = a.tables or (TUNING if a.half == "tuning" else REPORT)
    runs = [r for name in names for r in diagnose_table(name, a.seeds, a.allocation)]
    def mean(k):
        return float(np.mean([float(r[k]) for r in runs]))
    fs = [r["first_settle"] for r in runs if r["first_settle"] is not None]
    stops: dict = {}
    for r in runs:
        stops[r["stopped"]] = stops.get(r["stopped"], 0) + 1
    summary = {
        "half": a.half, "allocation": a.allocation, "runs": len(runs), "tables": len(names),
        "tau": mean("tau"), "shared_random_tau": mean("shared_tau"), "shared_random_2x_tau": mean("shared2_tau"),
        "oracle_tau": mean("oracle_tau"), "common_mean_tau": mean("common_mean_tau"),
        "ranking_equals_common_mean_order": mean("same_as_common_mean"),
        "items": mean("items"), "shared_random_items": mean("shared_items"),
        "pairs_settled_per_run": mean("settled"), "runs_with_a_settled_pair": float(np.mean([r["settled"] > 0 for r in runs])),
        "items_after_first_settle_share": float(np.sum([r["after_settle"] for r in runs]) / np.sum([r["items"] for r in runs])),
        "first_settle_item_median": float(np.median(fs)) if fs else None,
        "items_per_model_max_minus_min": float(np.mean([r["items_max"] - r["items_min"] for r in runs])),
        "stopped_because": stops}
    for k, v in summary.items():
        print(f"{k:<38} {v:.3f}" if isinstance(v, float) else f"{k:<38} {v}")
    if a.json:
        Path(a.json).write_text(json.dumps({"summary": summary, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()

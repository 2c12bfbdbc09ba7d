"""The main job on an embedded default: rank recorded real systems adaptively, offline.

The embedded table holds sentence-level chrF of the WMT24 en-de primary submissions,
computed by this package from the public system outputs (numbers only). The demo
calibrates an item bank on the systems it is not ranking, then ranks the chosen systems
with the adaptive ranker, replaying each requested (system, segment) score as if it had
just been generated and scored, charged at litellm's price for the system's API (the
offline price map bundled with litellm) or the stated default price.
"""

from __future__ import annotations

import numpy as np

from lm_eval_adaptive.atomic import write_json
from lm_eval_adaptive.cli.report import plot_ranking, print_ranking
from lm_eval_adaptive.data.price_map import price_for
from lm_eval_adaptive.data.prices import DEFAULT_PRICE
from lm_eval_adaptive.data.tables import load_any_table
from lm_eval_adaptive.engine.cat import full_task_estimate
from lm_eval_adaptive.engine.estimation import Z95
from lm_eval_adaptive.engine.model_error import describe_correction
from lm_eval_adaptive.engine.ranker import AdaptiveRanker
from lm_eval_adaptive.engine.self_check import calibrate_checked
from lm_eval_adaptive.engine.stopping import pair_rule_for
from lm_eval_adaptive.errors import InputError

#: Systems of WMT24 that are (or wrap) commercial LLM APIs.
DEFAULT_DEMO_SYSTEMS = ("GPT-4", "Claude-3.5", "Gemini-1.5-Pro", "Mistral-Large", "CommandR-plus",
                        "Llama3-70B", "Aya23", "Phi-3-Medium")


def run_demo(args, console) -> int:

    table = load_any_table(args.table, allow_outliers=args.allow_outliers)
    names = [str(m) for m in table.models]
    models = args.models or [m for m in DEFAULT_DEMO_SYSTEMS if m in names]
    unknown = [m for m in models if m not in names]
    if unknown:
        raise InputError(f"model(s) not in the table: {', '.join(unknown)}; it has: {', '.join(names)}",
                         path=table.source)
    if len(models) < 2:
        raise InputError("give at least 2 models to rank (--models)")
    calib = [m for m in names if m not in models]
    if len(calib) < 2:
        raise InputError("keep at least 2 systems out of the ranking to calibrate the bank on")
    bank = calibrate_checked(table.select_models(calib), scaling=args.scaling, method=args.method,
                             likelihood=args.likelihood, metric=table.metric)
    raw = table.mean_matrix()
    tpos = {v: i for i, v in enumerate(np.asarray(table.items, dtype=object).tolist())}
    cols = np.array([tpos[str(x)] for x in bank.item_ids])
    rows = {m: names.index(m) for m in models}
    prices = {m: price_for(m, default=DEFAULT_PRICE) for m in models}
    in_tok, out_tok = table.item_tokens()
    full_cost = {m: float(np.nansum(prices[m].item_costs(in_tok, out_tok)[~np.isnan(raw[rows[m]])]))
                 for m in models}
    item_costs = {m: prices[m].item_costs(bank.input_tokens, bank.output_tokens) for m in models}
    budget = args.budget_usd if args.budget_usd is not None else 0.10 * sum(full_cost.values())
    missing = {m: np.flatnonzero(np.isnan(raw[rows[m], cols])) for m in models}

    console.print(f"[bold]lm-eval-adaptive demo[/]: ranking {len(models)} systems on {table.metric} "
                  f"({table.n_items} segments), bank calibrated on {len(calib)} other systems: "
                  f"{bank.n_items} items, a = {bank.discrimination:.2f}, bank {bank.bank_id}")
    console.print("prices: " + ", ".join(f"{m} {p.input_per_mtok:g}/{p.output_per_mtok:g} $/Mtok ({p.source})"
                                         for m, p in prices.items()))
    ranker = AdaptiveRanker(bank, models, item_costs=item_costs, confidence=args.confidence,
                            n_init=args.min_items, n_max=args.max_items, budget=budget, seed=args.seed,
                            exclude=missing, pair_rule=pair_rule_for(bank, args.confidence, args.tie_margin))

    def replay(m, i):  # the recorded score of system m on bank item i, mapped with the bank's range
        return float(bank.scale(i, raw[rows[m], cols[i]]))

    res = ranker.run(replay)
    out_rows = []
    for m in res.ranking:
        e = ranker.examinees[m]
        obs_raw = raw[rows[m], cols[e.items]]
        est = full_task_estimate(bank, e.items, obs_raw, e.theta, e.se, misfit=e.misfit)
        lo, hi = e.theta - Z95 * e.se, e.theta + Z95 * e.se
        truth = float(np.nanmean(raw[rows[m]]))  # every document of the full run
        out_rows.append({"model": m, "theta": e.theta, "se": e.se, "lo": lo, "hi": hi,
                         "est": est["estimate"], "est_lo": est["lower"], "est_hi": est["upper"],
                         "truth": truth, "items": e.n, "cost": e.spent, "full_cost": full_cost[m],
                         "price_source": prices[m].source})
    print_ranking(console, out_rows, res, metric_name=str(table.metric).split("/")[-1],
                  full_cost=sum(full_cost.values()))
    check = bank.diagnostics.get("self_check")
    if check:
        c = check["correction"]
        console.print(f"bank self-check ({check['tests']} left-out runs): {describe_correction(c)} "
                      f"(uncorrected, full-task intervals held {100 * check['full_task_coverage']:.0f}%)",
                      highlight=False)
    if res.tie_groups and res.stopped_because == "budget":
        console.print(f"next: more budget settles more pairs (--budget-usd, now ${budget:.2f}); "
                      "--tie-margin DELTA reports pairs confidently closer than DELTA as ties", highlight=False)
    if args.plot:
        plot_ranking(args.plot, out_rows, res, title=f"{table.metric}: adaptive ranking")
        console.print(f"wrote {args.plot}")
    if args.json:
        d = res.to_dict()
        for r, row in zip(d["ranking"], out_rows):
            r["metric_estimate"] = {"estimate": row["est"], "lower": row["est_lo"], "upper": row["est_hi"]}
            r["full_run_metric"] = row["truth"]
        d.update({"bank_id": bank.bank_id, "full_run_cost_usd": sum(full_cost.values()),
                  "table": table.metric})
        write_json(args.json, d)
        console.print(f"wrote {args.json}")
    return 0

"""The main job on an embedded default: rank recorded real systems adaptively, offline.

The embedded table holds sentence-level chrF of the WMT24 en-de primary submissions,
computed by this package from the public system outputs (numbers only). The demo
calibrates an item bank on the systems it is not ranking, then ranks the chosen systems
with the adaptive ranker, replaying each requested (system, segment) score as if it had
just been generated and scored, charged at litellm's price for the system's API (the
offline price map bundled with litellm) or, for a system with no known price, the demo's stated
default, ``--price default=1,3`` (the one price policy of every command,
:func:`~lm_eval_adaptive.data.price_map.resolve_prices`; the systems it prices are named).
"""

from __future__ import annotations

import numpy as np

from lm_eval_adaptive.atomic import atomic_write, write_json
from lm_eval_adaptive.cli.report import plot_ranking, print_ranking
from lm_eval_adaptive.data.price_map import price_policy, priced_by_default, resolve_prices
from lm_eval_adaptive.data.tables import load_any_table
from lm_eval_adaptive.engine.cat.estimation import Z95
from lm_eval_adaptive.engine.cat.full_task import full_task_estimate
from lm_eval_adaptive.engine.evaluation.model_error import describe_correction
from lm_eval_adaptive.engine.ranking.pairs.rules import pair_rule_for
from lm_eval_adaptive.engine.ranking.ranker import AdaptiveRanker
from lm_eval_adaptive.engine.evaluation.self_check import calibrate_checked
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.cli.terminal import styled

#: The demo's ``--price`` when none is given: the systems without a known price at $1 / $3 per M tokens
#: (an offline replay: nothing is spent).
DEMO_PRICES = ("default=1,3",)

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
    given = list(getattr(args, "price", None) or [])
    policy = price_policy([*DEMO_PRICES, *given])  # a --price default=... given replaces the demo's
    prices = resolve_prices([(m, m) for m in models], policy)
    defaulted = priced_by_default(prices)
    in_tok, out_tok = table.item_tokens()
    full_cost = {m: float(np.nansum(prices[m].item_costs(in_tok, out_tok)[~np.isnan(raw[rows[m]])]))
                 for m in models}
    item_costs = {m: prices[m].item_costs(bank.input_tokens, bank.output_tokens) for m in models}
    budget = args.budget_usd if args.budget_usd is not None else 0.10 * sum(full_cost.values())
    missing = {m: np.flatnonzero(np.isnan(raw[rows[m], cols])) for m in models}

    console.print(styled("lm-eval-adaptive demo", "bold", f": ranking {len(models)} systems on {table.metric} "
                  f"({table.n_items} segments), bank calibrated on {len(calib)} other systems: "
                  f"{bank.n_items} items, a = {bank.discrimination:.2f}, bank {bank.bank_id}"))
    console.print("prices: " + ", ".join(f"{m} {p.input_per_mtok:g}/{p.output_per_mtok:g} $/Mtok ({p.source})"
                                         for m, p in prices.items()))
    if defaulted:
        d = policy.default
        console.print(f"priced by the default ${d.input_per_mtok:g}/${d.output_per_mtok:g} per M tokens "
                      f"(--price default={d.input_per_mtok:g},{d.output_per_mtok:g}"
                      + (", the demo's" if not any(x.startswith("default=") for x in given) else "")
                      + f"), not a known price: {', '.join(defaulted)}", highlight=False)
    budget_note = ("--budget-usd" if args.budget_usd is not None
                   else f"default: 10% of the ${sum(full_cost.values()):.2f} full run; --budget-usd")
    console.print(f"settings: budget ${budget:.2f} ({budget_note}), γ = {args.confidence:g} (--confidence), "
                  f"{args.min_items} warm-up items per system (--min-items), at most "
                  f"{args.max_items if args.max_items is not None else f'{bank.n_items} (the whole bank)'} items "
                  f"per system (--max-items), "
                  f"tie margin {args.tie_margin if args.tie_margin is not None else 'off'} (--tie-margin), "
                  f"γ for {'the whole ranking' if args.family_wise else 'each pair'} (--family-wise), "
                  f"seed {args.seed}", highlight=False)
    ranker = AdaptiveRanker(bank, models, item_costs=item_costs, confidence=args.confidence,
                            n_init=args.min_items, n_max=args.max_items, budget=budget, seed=args.seed,
                            exclude=missing, pair_rule=pair_rule_for(bank, args.confidence, args.tie_margin,
                                                                     args.family_wise))

    def replay(m, i):  # the recorded score of system m on bank item i, mapped with the bank's range
        return float(bank.scale(i, raw[rows[m], cols[i]]))

    res = ranker.run(replay)
    out_rows = []
    for m in res.ranking:
        e = ranker.examinees[m]
        obs_raw = raw[rows[m], cols[e.items]]
        # the estimate of record (the metric-scale judgement's: what decided the pairs), else the bank's model
        est = res.estimates.get(m) or full_task_estimate(bank, e.items, obs_raw, e.theta, e.se, misfit=e.misfit)
        lo, hi = e.theta - Z95 * e.se, e.theta + Z95 * e.se
        truth = float(np.nanmean(raw[rows[m]]))  # every document of the full run
        out_rows.append({"model": m, "theta": e.theta, "se": e.se, "lo": lo, "hi": hi,
                         "est": est["estimate"], "est_lo": est["lower"], "est_hi": est["upper"],
                         "truth": truth, "items": e.n, "cost": e.spent, "full_cost": full_cost[m],
                         "price_source": prices[m].source})
    verbose = bool(getattr(args, "verbose", False))
    print_ranking(console, out_rows, res, metric_name=str(table.metric).split("/")[-1],
                  full_cost=sum(full_cost.values()), verbose=verbose)
    check = bank.diagnostics.get("self_check")
    if check and verbose:  # technical detail: behind --verbose
        c = check["correction"]
        console.print(f"bank self-check ({check['tests']} left-out runs): {describe_correction(c)} "
                      f"(uncorrected, full-task intervals held {100 * check['full_task_coverage']:.0f}%)",
                      highlight=False)
    if res.tie_groups:
        console.print("a tie group (T1, T2, ...) is a result: its models' order was not settled at γ, so report "
                      "them as equal, not as ranked", highlight=False)
    if args.plot:
        atomic_write(args.plot, lambda f: plot_ranking(f, out_rows, res, title=f"{table.metric}: adaptive ranking"))
        console.print(f"wrote {args.plot}")
    if args.json:
        d = res.to_dict()
        for r, row in zip(d["ranking"], out_rows):
            r["metric_estimate"] = {"estimate": row["est"], "lower": row["est_lo"], "upper": row["est_hi"]}
            r["full_run_metric"] = row["truth"]
        d.update({"bank_id": bank.bank_id, "full_run_cost_usd": sum(full_cost.values()),
                  "table": table.metric, "priced_by_default": defaulted,
                  "prices": {m: {"input_per_mtok": p.input_per_mtok, "output_per_mtok": p.output_per_mtok,
                                 "source": p.source} for m, p in prices.items()}})
        write_json(args.json, d)
        console.print(f"wrote {args.json}")
    console.print("next: " + _next_step(res, budget, models), highlight=False)
    return 0


#: Systems of the embedded table far enough apart for the default demo to order them.
WIDE_GAP_SYSTEMS = ("GPT-4", "Llama3-70B", "Phi-3-Medium")


def _next_step(res, budget: float, models) -> str:
    """The command to try after this demo, chosen by how it ended."""
    wider = "lm-eval-adaptive demo --models " + " ".join(WIDE_GAP_SYSTEMS)
    if not res.tie_groups:
        return ("rank a model through the harness and the offline replay endpoint: README, "
                "\"First adaptive run in five minutes\"")
    if res.stopped_because == "budget":
        return (f"more budget settles more pairs: lm-eval-adaptive demo --budget-usd {2 * budget:.2f} "
                f"(now ${budget:.2f}); or --tie-margin DELTA to settle confidently close pairs as ties")
    if res.inseparable:
        lead = ("these systems are closer than this bank can separate (more items will not order the "
                "'inseparable' pairs)" if len(res.tie_groups) == 1 and len(res.tie_groups[0]) == len(models)
                else "the 'inseparable' pairs are closer than this bank can separate")
        return (f"{lead}; rank systems further apart ({wider}), use a bank with a wider score spread "
                "(--table), or settle close pairs as ties with --tie-margin DELTA (e.g. 0.01)")
    return (f"more items settle more pairs (--max-items, --budget-usd), or --tie-margin DELTA settles "
            f"confidently close pairs as ties; or rank systems further apart: {wider}")

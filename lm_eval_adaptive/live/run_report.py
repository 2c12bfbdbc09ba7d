"""What a ``rank`` or ``refresh`` run reports: each model's row (θ̂ ± SE, the full-task estimate of
record, items, dollars, person fit) and the ``ranking.json`` the terminal report shows, built from the
finished live run and its session (:mod:`lm_eval_adaptive.live.session`).
"""

from __future__ import annotations

from lm_eval_adaptive.engine.cat.estimation import Z95
from lm_eval_adaptive.engine.cat.full_task import full_task_estimate
from lm_eval_adaptive.live.session import LiveSettings
from lm_eval_adaptive.live.stopping_policy import largest_reservation, mark_cap_to_buy
from lm_eval_adaptive.redaction import redact as redact_all

__all__ = ["model_rows", "build_report"]


def model_rows(live, setup, models, metric: str | None = None, estimates=None) -> list[dict]:
    """Per model: θ̂ ± SE, the full-task estimate of the metric with its interval, items, dollars, person
    fit; with a bank per metric, under ``metric`` (its items: the generations it scored). ``estimates``:
    the result's estimates of record (model → ``estimate``, ``lower``, ``upper``: the metric-scale
    judgement's, which decided the pairs); a model without one gets the bank's model-based estimate."""
    r = live.ranker
    z = Z95
    rows = []
    for m in models:
        e = r.metric_examinees(metric)[m] if metric is not None else r.examinees[m]
        bank = setup.banks[metric] if metric is not None else setup.bank
        items, raw = live.raw_scores(m, metric)
        est = (estimates or {}).get(m) or full_task_estimate(bank, items, raw, e.theta, e.se, misfit=e.misfit)
        fit = e.person_fit
        rows.append({"model": m, "theta": e.theta, "se": e.se, "lo": e.theta - z * e.se, "hi": e.theta + z * e.se,
                     "est": est["estimate"], "est_lo": est["lower"], "est_hi": est["upper"], "items": e.n,
                     "cost": r.examinees[m].spent, "judge_cost": live.judge_spent.get(m, 0.0),
                     "full_cost": setup.full_cost[m], "person_fit": fit.to_dict()})
    return rows


def _ranking_block(res, rows, failed_rows, setup, metric: str, bank) -> dict:
    """One metric's ranking as the report writes it: the result's fields, each entry with its interval,
    full-task estimate, judge cost, person fit, full-run cost and price."""
    d = res.to_dict()
    by = {r["model"]: r for r in rows}
    for entry in d["ranking"]:
        r = by[entry["model"]]
        entry["theta_ci95"] = [r["lo"], r["hi"]]
        entry["metric_estimate"] = {"estimate": r["est"], "lower": r["est_lo"], "upper": r["est_hi"],
                                    "level": 0.95, "metric": metric}
        entry["judge_cost_usd"] = r["judge_cost"]
        entry["person_fit"] = r["person_fit"]
        entry["full_run_cost_usd"] = r["full_cost"]
        entry["price"] = setup.prices[entry["model"]].record()  # the price the run charged (a resume: the journal's)
    d.update({"metric": metric, "bank_id": bank.bank_id, "rows": rows + failed_rows, "ranked": len(d["ranking"]) >= 2})
    return d


def build_report(live, setup, a: LiveSettings, *, command: str) -> dict:
    """What ``ranking.json`` holds and the terminal report shows. With a bank per metric: ``metrics``, and
    ``rankings`` (metric → that metric's ranking, as a single bank's report writes it) beside the run's
    spend, calls and settings; ``generations`` are the documents generated (each scored by every metric)."""
    res = live.ranker.result()
    snap = setup.ledger.snapshot()
    failed = res.results[setup.metrics[0]].failed if setup.joint else res.failed
    if setup.joint:
        blocks = {}
        for k, r in res.results.items():
            rows = model_rows(live, setup, r.ranking, metric=k, estimates=r.estimates)
            failed_rows = model_rows(live, setup, list(r.failed), metric=k) if r.failed else []
            blocks[k] = _ranking_block(r, rows, failed_rows, setup, k, setup.banks[k])
        first = blocks[setup.metrics[0]]
        d = {"metrics": list(setup.metrics), "rankings": blocks, "generations": res.generations,
             "items": dict(res.items), "confidence": res.results[setup.metrics[0]].confidence,
             "stopped_because": res.stopped_because, "ranked": first["ranked"], "total_items": res.generations,
             "bank_ids": {k: b.bank_id for k, b in setup.banks.items()}}
        ranked = first["ranked"]
        items = dict(res.items)
    else:
        rows = model_rows(live, setup, res.ranking, estimates=res.estimates)
        failed_rows = model_rows(live, setup, list(res.failed)) if res.failed else []
        d = _ranking_block(res, rows, failed_rows, setup, setup.metric, setup.bank)
        ranked = d["ranked"]
        items = res.items
    stopped = d["stopped_because"]
    if live.interrupted:
        stopped = "interrupted"
    elif not ranked:
        stopped = "failed"  # fewer than two models left: nothing was ranked
    d.update({
        "command": command,
        "task": setup.task_name, "metric": setup.metric_label, "task_docs": setup.n_docs,
        "bank_id": setup.bank_ids,
        "stopped_because": stopped, "ranked": ranked,
        "total_cost_usd": snap["spent"], "budget_usd": a.budget_usd,
        "judge_cost_usd": float(sum(live.judge_spent.values())),
        "judge_prices": {m: p.record() for m, p in setup.judges.prices.items()},
        "priced_by_default": setup.priced_by_default,
        "full_run_cost_usd": float(sum(setup.full_cost[m] for m in live.ranker.models)),
        "failed": [{"model": m, "error": why, "failed_calls": int(live.failed_calls[m]), "items": items[m],
                    "cost_usd": live.ranker.examinees[m].spent, "judge_cost_usd": live.judge_spent.get(m, 0.0)}
                   for m, why in failed.items()],
        "calls": {"attempts": live.attempts, "retries": live.retries,
                  "billed_failures": live.billed_failures, "billed_failures_usd": live.billed_failures_usd,
                  "failed_items": int(sum(live.failed_calls.values())),
                  "usage_unknown": {m: {"items": n, "charged_usd": live.unknown_usage_usd[m]}
                                    for m, n in live.unknown_usage.items() if n},
                  "lost_in_flight": [{"model": m, "item_id": i, "charged_usd": u} for m, i, u in live.lost_in_flight]},
        "ledger": {**{k: snap[k] for k in ("spent", "reserved", "n_refused", "overshoot_usd")},
                   "n_settled": snap["n_settled"] + snap["n_known"]},  # charges of earlier processes of the run too
        "settings": {"confidence": a.confidence, "min_items": a.min_items, "max_items": a.max_items,
                     "concurrency": a.concurrency, "seed": a.seed,
                     "timeout_s": {m: sc.timeout for m, sc in setup.scorers.items()},
                     "max_attempts": a.max_attempts, "backoff_s": a.backoff,
                     "item_field": setup.binding.item_field},
    })
    if setup.joint:
        for k, block in d["rankings"].items():
            block.update({"task": setup.task_name, "stopped_because": stopped, "ranked": block["ranked"],
                          "budget_usd": a.budget_usd, "total_cost_usd": snap["spent"]})
    reservation = largest_reservation(setup)  # the cap that buys each pair the cap left is short of (issue 32)
    for block in d["rankings"].values() if setup.joint else (d,):
        mark_cap_to_buy(block.get("pairs") or [], spent=snap["spent"], cap=a.budget_usd, reservation=reservation)
    return redact_all(d, by_key=False)  # model names are keys here: only secrets by value and shape

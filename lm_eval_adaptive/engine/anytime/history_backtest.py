"""The history curve (issue 31, item 5): the backtest's hold-out sets ranked with a bank calibrated from
only N of the other models, for each N asked; N = 0: no bank at all, the bank-free ranker.

For each table, fold (the backtest's hold-out sets: :func:`~lm_eval_adaptive.engine.evaluation.backtest.plan_backtest`)
and seed, with the backtest's budget (``target_items`` items per model at the mean item cost):

* N = 0: :class:`~lm_eval_adaptive.engine.anytime.bank_free_ranker.BankFreeRanker` on the table's raw
  scores, the score range the table's own (every model's lowest and highest score: the metric's range
  as the table shows it), seeded by (partition seed, fold, seed);
* N > 0 (or ``"all"``: every other model, the usual backtest): the banked ranker of
  :func:`~lm_eval_adaptive.engine.evaluation.backtest.backtest_fold` on the table cut to the hold-out set and N of
  the other models drawn at random (seeded by partition seed, fold and N), with the backtest's settings;
  when that bank would come from fewer than :data:`~lm_eval_adaptive.engine.anytime.small_bank.MIN_BANK_MODELS`
  models, the runs fall back to the bank-free ranker (the N = 0 runs, as ``rank`` falls back live) unless
  ``fallback=False`` (the banked ranker on the small bank regardless: the curve before the fallback). With
  ``config.bank_use_margin`` set, a fold whose bank's self-check ranks below shared random by more than that is
  ranked bank-free inside ``backtest_fold`` (mode ``"bank-free (self-check)"``; engine/anytime/small_bank.py).
  With ``config.anytime`` a fold whose bank is used is ranked as ``rank --anytime`` ranks it (mode ``"anytime"``:
  the bank-free ranker, the bank's prediction ordering only the pairs it leaves open).

Each run's figures: Kendall τ against the full-task ranking, random sampling at the fold's mean spend
(the backtest's ``random``), ``shared_random`` (every hold-out model answering the same random documents
at that spend, ranked by its mean: the design of the bank-free ranker without its allocation or its
intervals), items and dollars, the pairs reported ordered and how many are in the true order, and whether
each model's interval holds its full-task mean.
"""

from __future__ import annotations

import dataclasses

import time
from dataclasses import replace
from typing import Mapping, Sequence

import numpy as np

from lm_eval_adaptive.data.prices import Price
from lm_eval_adaptive.engine.anytime.pair_worth import DEFAULT_ALLOCATION
from lm_eval_adaptive.engine.anytime.bank_free_fold import bank_free_rankings, covered_models
from lm_eval_adaptive.engine.anytime.small_bank import bank_use
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig
from lm_eval_adaptive.engine.evaluation.backtest import BacktestPlan, backtest_fold, plan_backtest
from lm_eval_adaptive.engine.evaluation.backtest_figures import confident_counts, kendall_tau
from lm_eval_adaptive.engine.evaluation.fold_parts import table_item_tokens, table_range
from lm_eval_adaptive.engine.evaluation.baselines import random_sampling, shared_random
from lm_eval_adaptive.errors import InputError

__all__ = ["parse_history", "history_backtest", "cold_start_fold", "shared_random", "pooled_history"]


def parse_history(text: str) -> list:
    """``"0,2,5,all"`` → [0, 2, 5, "all"]; an InputError naming a bad entry."""
    out: list = []
    for part in str(text).split(","):
        part = part.strip().lower()
        if part == "all":
            out.append("all")
            continue
        try:
            n = int(part)
        except ValueError:
            n = -1
        if n < 0 or (0 < n < 2):
            raise InputError(f"--history-models takes numbers of models (0, or at least 2) or 'all', got {part!r}")
        out.append(n)
    if not out:
        raise InputError("--history-models needs at least one number of models")
    return out


def _truth(raw_h: np.ndarray, hold: Sequence[str]) -> tuple[list, dict]:
    means = np.nanmean(raw_h, axis=1)
    order = np.argsort(-means, kind="stable")
    return [hold[i] for i in order], dict(zip(hold, means.tolist()))


def cold_start_fold(table, plan: BacktestPlan, f: int, *, score_range: tuple[float, float],
                    allocation: str = DEFAULT_ALLOCATION) -> list[dict]:
    """Fold ``f`` of ``plan`` ranked by the bank-free ranker, one run per seed (see the module docstring)."""
    config = plan.config
    hold = list(plan.sets[f])
    models = list(plan.models)
    raw_all = table.mean_matrix()
    raw_h = raw_all[[models.index(m) for m in hold]]
    in_tok, out_tok, _ = table_item_tokens(table)
    costs = {m: plan.price[m].item_costs(in_tok, out_tok) for m in hold}
    budget = float(np.mean([np.mean(costs[m]) for m in hold])) * len(hold) * config.target_items
    truth, truth_mean = _truth(raw_h, hold)
    margin = config.tie_margin if config.tie_margin_share is None else config.tie_margin_share * table_range(raw_all)
    runs, perms = [], []
    for seed, (ranker, res) in enumerate(bank_free_rankings(hold, table.items, raw_h, costs, config, f,
                                                            score_range=score_range, budget=budget, margin=margin,
                                                            allocation=allocation)):
        perms.append(ranker.permutation)
        ties = {frozenset(p) for p in res.ties}
        right, confident = confident_counts(res.ranking, truth, ties)
        runs.append({"fold": f, "seed": seed, "tau": kendall_tau(res.ranking, truth), "items": res.total_items,
                     "cost": res.total_cost, "confident": (right, confident), "covered": covered_models(res, truth_mean),
                     "stopped_because": res.stopped_because})
    _baselines(runs, hold, raw_h, costs, truth, f, perms)
    return runs


def _baselines(runs: list, hold, raw_h, costs, truth, f: int, perms=None) -> None:
    """Random sampling and shared random documents at the fold's mean spend, one draw per run; the shared
    documents in ``perms``' order (each run's own: the bank-free ranker's, common random numbers) when
    given, else in one drawn."""
    matched = float(np.mean([r["cost"] for r in runs]))
    available = {m: np.flatnonzero(~np.isnan(raw_h[j])) for j, m in enumerate(hold)}
    row = {m: j for j, m in enumerate(hold)}
    for k, r in enumerate(runs):
        rb = random_sampling(hold, available, lambda m, items: raw_h[row[m], items], costs, matched,
                             np.random.default_rng([r["seed"], f, 7]))
        r["random_tau"] = kendall_tau(rb.ranking, truth)
        sr = shared_random(hold, raw_h, costs, matched, np.random.default_rng([r["seed"], f, 11]),
                           perm=None if perms is None else perms[k])
        r["shared_random_tau"] = kendall_tau(sr["ranking"], truth)
        r["shared_random_items"] = sr["items"]


def banked_fold(table, plan: BacktestPlan, f: int, n_history, *, fallback: bool = True,
                score_range: tuple[float, float] | None = None, allocation: str = DEFAULT_ALLOCATION) -> list[dict]:
    """Fold ``f`` ranked by the banked ranker with a bank from ``n_history`` of the other models
    (``"all"``: every one), through :func:`~lm_eval_adaptive.engine.evaluation.backtest.backtest_fold`;
    with ``fallback``, by the bank-free ranker (:func:`cold_start_fold`, ``score_range``) when the bank's
    models are too few to be used (:func:`~lm_eval_adaptive.engine.anytime.small_bank.bank_use`) or its self-check
    rejects it (the backtest's own rule, ``bank_use_margin``); without it, neither rule applies."""
    hold = list(plan.sets[f])
    others = [m for m in plan.models if m not in hold]
    if n_history != "all" and n_history < len(others):
        pick = np.random.default_rng([plan.config.partition_seed, f, int(n_history)]).choice(
            len(others), int(n_history), replace=False)
        others = [others[i] for i in sorted(pick)]
    if fallback and not bank_use(len(others)).use_bank:
        runs = cold_start_fold(table, plan, f, score_range=score_range, allocation=allocation)
        return [r | {"calibration_models": len(others), "mode": "bank-free"} for r in runs]
    sub = table.select_models(hold + others)
    # without the fallback no rule moves a fold off its bank: the model count's nor the self-check's
    config = plan.config if fallback else dataclasses.replace(plan.config, bank_use_margin=None)
    sub_plan = BacktestPlan(config=config, models=tuple(str(m) for m in sub.models),
                            price={m: plan.price[m] for m in hold + others}, sets=plan.sets)
    outcome = backtest_fold(sub, sub_plan, f)
    raw_all = table.mean_matrix()
    models = list(plan.models)
    raw_h = raw_all[[models.index(m) for m in hold]]
    in_tok, out_tok, _ = table_item_tokens(table)
    costs = {m: plan.price[m].item_costs(in_tok, out_tok) for m in hold}
    truth, _ = _truth(raw_h, hold)
    mode = "anytime" if plan.config.anytime else \
        "banked" if outcome.summary.get("bank_used", True) else "bank-free (self-check)"
    runs = [{"fold": f, "seed": r.seed, "tau": r.adaptive_tau, "items": r.adaptive_items, "cost": r.adaptive_cost,
             "confident": tuple(r.confident), "covered": list(r.covered), "stopped_because": r.stopped_because,
             "calibration_models": len(others), "mode": mode} for r in outcome.runs]
    _baselines(runs, hold, raw_h, costs, truth, f)
    return runs


def history_backtest(table, *, config: BacktestConfig = BacktestConfig(), history: Sequence = (0,),
                     prices: Mapping[str, Price] | None = None, progress=None, allocation: str = DEFAULT_ALLOCATION,
                     fallback: bool = True) -> dict:
    """The history curve of one table: for each N of ``history``, every fold × seed run and its summary
    (:func:`summarise`). ``progress(done, total)`` after each fold. ``fallback``: a bank from too few models
    is not used (:func:`banked_fold`); False: the banked ranker on it regardless."""
    t0 = time.perf_counter()
    plan = plan_backtest(table, replace(config, settle_seeds=0), prices)
    raw_all = table.mean_matrix()
    score_range = (float(np.nanmin(raw_all)), float(np.nanmax(raw_all)))
    out = {"table": str(getattr(table, "metric", None) or getattr(table, "source", "table")),
           "n_items": int(table.n_items), "n_models": len(plan.models), "score_range": list(score_range),
           "folds": plan.n_folds, "seeds": config.seeds, "allocation": allocation, "fallback": fallback, "curve": {}}
    total, done = plan.n_folds * len(history), 0
    for n in history:
        runs = []
        for f in range(plan.n_folds):
            runs += (cold_start_fold(table, plan, f, score_range=score_range, allocation=allocation) if n == 0
                     else banked_fold(table, plan, f, n, fallback=fallback, score_range=score_range,
                                      allocation=allocation))
            done += 1
            if progress:
                progress(done, total)
        out["curve"][str(n)] = summarise(runs) | {"runs_detail": runs}
    out["seconds"] = time.perf_counter() - t0
    return out


def summarise(runs: list) -> dict:
    """Means of τ (adaptive, random, shared random), items and cost; counts for pooling."""
    right = sum(r["confident"][0] for r in runs)
    conf = sum(r["confident"][1] for r in runs)
    cov = [c for r in runs for c in r["covered"]]
    stops: dict = {}
    modes: dict = {}
    for r in runs:
        stops[r["stopped_because"]] = stops.get(r["stopped_because"], 0) + 1
        mode = r.get("mode", "bank-free")
        modes[mode] = modes.get(mode, 0) + 1
    return {"runs": len(runs), "tau": _mean(r["tau"] for r in runs), "random_tau": _mean(r["random_tau"] for r in runs),
            "shared_random_tau": _mean(r["shared_random_tau"] for r in runs),
            "items": _mean(r["items"] for r in runs), "cost": _mean(r["cost"] for r in runs),
            "confident_right": right, "confident": conf, "confident_accuracy": right / conf if conf else float("nan"),
            "covered": int(sum(cov)), "models": len(cov), "coverage": float(np.mean(cov)) if cov else float("nan"),
            "stopped_because": stops, "modes": modes}


def pooled_history(results: Sequence[dict]) -> dict:
    """Per N over several tables' curves: τ figures as the mean of the tables', shares from summed counts,
    and the lowest table's confident-order accuracy."""
    keys = sorted({k for r in results for k in r["curve"]}, key=lambda k: (k == "all", int(k) if k != "all" else 0))
    out = {}
    for k in keys:
        rows = [r["curve"][k] for r in results if k in r["curve"]]
        right = sum(x["confident_right"] for x in rows)
        conf = sum(x["confident"] for x in rows)
        per_table = [(r["table"], r["curve"][k]["confident_accuracy"]) for r in results
                     if k in r["curve"] and r["curve"][k]["confident"]]
        out[k] = {"tables": len(rows), "tau": _mean(x["tau"] for x in rows),
                  "random_tau": _mean(x["random_tau"] for x in rows),
                  "shared_random_tau": _mean(x["shared_random_tau"] for x in rows),
                  "items": _mean(x["items"] for x in rows),
                  "confident_accuracy": right / conf if conf else float("nan"), "confident_pairs": conf,
                  "lowest_table_confident_accuracy": min(per_table, key=lambda t: t[1]) if per_table else None,
                  "modes": _summed(x.get("modes", {}) for x in rows),
                  "coverage": sum(x["covered"] for x in rows) / max(1, sum(x["models"] for x in rows))}
    return out


def _summed(dicts) -> dict:
    out: dict = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v
    return out


def _mean(vals) -> float:
    a = np.asarray(list(vals), dtype=float)
    return float(np.nanmean(a)) if a.size else float("nan")

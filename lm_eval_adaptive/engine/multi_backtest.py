"""Backtest of a joint multi-metric run against separate single-metric runs at the same total spend.

The protocol of :mod:`lm_eval_adaptive.engine.backtest` (hold-out folds × seeds, a bank per
metric calibrated on the other models, τ against each metric's full-data ranking, confident
pairs, full-task interval coverage), for several metric tables of one task (the same models
and items, one score per metric):

* ``joint``: one :class:`~lm_eval_adaptive.engine.multi_metric_ranker.MultiMetricRanker` with
  total budget S·B; each generation is scored by every metric;
* ``separate``: one :class:`~lm_eval_adaptive.engine.ranker.AdaptiveRanker` per metric, each
  with budget S·B / K (K metrics): the same total spend, each run generating its own items,

for each total spend S in ``spends`` (B is the single-metric backtest's budget: the mean item
cost × hold-out models × ``target_items``). Generations are the distinct (model, item) pairs a
mode generated (separate runs that happen to pick the same item for a model count it once;
their spend counts it once per run: ``generated`` counts every run's items, what separate
runs that each generate their own items make).
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Mapping, Sequence

import numpy as np

from lm_eval_adaptive.data.prices import DEFAULT_PRICE, Price
from lm_eval_adaptive.engine.backtest import (
    BacktestConfig,
    confident_counts,
    ground_truth,
    holdout_sets,
    kendall_tau,
    self_check_correction,
)
from lm_eval_adaptive.engine.bank import joint_item_ids
from lm_eval_adaptive.engine.calibration import calibrate
from lm_eval_adaptive.engine.full_task import full_task_estimate
from lm_eval_adaptive.engine.multi_metric_ranker import MultiMetricRanker
from lm_eval_adaptive.engine.pair_rules import pair_rule_for
from lm_eval_adaptive.engine.ranker import AdaptiveRanker
from lm_eval_adaptive.engine.selection import default_selector
from lm_eval_adaptive.engine.signature import versions
from lm_eval_adaptive.errors import InputError

__all__ = ["backtest_multi", "MODES"]

#: The two ways of ranking by every metric.
MODES = ("joint", "separate")


def _positions(table) -> dict:
    return {str(v): i for i, v in enumerate(np.asarray(table.items, dtype=object).tolist())}


def _metric_figures(ranker, res, bank, raw_bank, row, truth, truth_mean) -> dict:
    """τ, confident pairs (right, all), any of them wrong, coverage (covered, models) of one metric's ranking."""
    pred_ties = {frozenset(p) for p in res.ties}
    right, conf = confident_counts(res.ranking, truth["ranking"], pred_ties)
    covered = 0
    for m in res.ranking:
        e = ranker.examinees[m]
        items = np.asarray(e.items, dtype=np.int64)
        est = full_task_estimate(bank, items, raw_bank[row[m], items], res.theta[m], res.se[m], misfit=e.misfit)
        covered += bool(est["lower"] <= truth_mean[m] <= est["upper"])
    return {"tau": kendall_tau(res.ranking, truth["ranking"]), "right": right, "confident": conf,
            "any_wrong": right < conf, "covered": covered, "models": len(res.ranking), "ties": len(pred_ties)}


def backtest_multi(tables: Mapping[str, object], *, config: BacktestConfig = BacktestConfig(),
                   spends: Sequence[float] = (1.0,), prices: Mapping[str, Price] | None = None,
                   item_weighting: str = "normalised", progress=None) -> dict:
    """Joint against separate runs on ``tables`` (metric name → response table of one task).

    Returns a dict: ``settings``, ``n_models``, ``n_items`` (joint), ``folds_run``, ``seconds``
    and ``summary[spend][mode]`` with, per metric, mean τ, confident accuracy (pooled right /
    confident pairs), confident pairs per run, full-task coverage, and per mode the mean
    generations (distinct (model, item) pairs) and spend per run; ``runs`` lists every
    (fold, seed, spend, mode) run's figures.
    """
    t0 = time.perf_counter()
    metrics = [str(k) for k in tables]
    if not metrics:
        raise InputError("a multi-metric backtest needs at least one metric table")
    model_sets = [set(map(str, t.models)) for t in tables.values()]
    models = sorted(set.intersection(*model_sets))
    config.validate(len(models))
    K = len(metrics)
    prices = dict(prices or {})
    price = {m: prices.get(m, DEFAULT_PRICE) for m in models}
    first = next(iter(tables.values()))
    in_tok, out_tok = first.item_tokens()
    no_tokens = bool(np.all(np.isnan(in_tok)) and np.all(np.isnan(out_tok)))
    if no_tokens:  # as backtest(): every item costs one input and one output token, budgets count items
        in_tok, out_tok = np.ones(first.n_items), np.ones(first.n_items)
    first_pos = _positions(first)
    H = config.holdout_size
    n_folds = config.folds_that_fit(len(models))
    sets = holdout_sets(models, H, n_folds, config.partition_seed)
    raw_all = {k: (t.mean_matrix(), [str(m) for m in t.models], _positions(t)) for k, t in tables.items()}
    runs = []
    total = n_folds * config.seeds * len(spends)
    n_joint_items = []
    for f, hold in enumerate(sets):
        calib = [m for m in models if m not in hold]
        banks, raw_bank, scaled, truth, truth_mean, missing, rules = {}, {}, {}, {}, {}, {}, {}
        for k, t in tables.items():
            history = t.select_models(calib)
            bank = calibrate(history, scaling=config.scaling, method=config.method, likelihood=config.likelihood,
                             metric=getattr(t, "metric", None))
            if config.self_check:
                bank.set_model_error(self_check_correction(history, config))
            banks[k] = bank
            raw, tmodels, tpos = raw_all[k]
            raw_h = raw[[tmodels.index(m) for m in hold]]
            raw_bank[k] = raw_h[:, [tpos[str(i)] for i in bank.item_ids.tolist()]]
            scaled[k] = bank.scale(np.arange(bank.n_items)[None, :], raw_bank[k])
            truth[k] = ground_truth(raw_h, hold, n_resamples=config.bootstrap, confidence=config.confidence,
                                    rng=np.random.default_rng([config.partition_seed, f]))
            truth_mean[k] = {m: float(np.nanmean(raw_h[j])) for j, m in enumerate(hold)}
            missing[k] = {m: np.flatnonzero(np.isnan(raw_bank[k][j])) for j, m in enumerate(hold)}
            rules[k] = pair_rule_for(bank, config.confidence, config.tie_margin, config.family_wise)
        row = {m: j for j, m in enumerate(hold)}
        ids = joint_item_ids(banks)
        n_joint_items.append(len(ids))
        jpos = np.array([first_pos[i] for i in ids], dtype=np.int64)
        bidx = {k: banks[k].index_of(ids) for k in metrics}
        # a joint item a metric has no score for (for that model) is never given to the model
        joint_missing = {m: np.flatnonzero(np.any([np.isnan(raw_bank[k][row[m], bidx[k]]) for k in metrics], axis=0))
                         for m in hold}
        full_costs = {m: price[m].item_costs(in_tok, out_tok) for m in hold}
        unit = float(np.mean([np.mean(full_costs[m]) for m in hold])) * H * config.target_items
        joint_costs = {m: full_costs[m][jpos] for m in hold}
        bank_costs = {k: {m: full_costs[m][[first_pos[str(i)] for i in banks[k].item_ids.tolist()]] for m in hold}
                      for k in metrics}

        def joint_score(m, j, _s=scaled, _b=bidx, _r=row):
            return {k: float(_s[k][_r[m], _b[k][j]]) for k in metrics}

        for seed in range(config.seeds):
            for spend in spends:
                budget = unit * float(spend)
                # joint
                multi = MultiMetricRanker(banks, hold, item_costs=joint_costs, confidence=config.confidence,
                                          n_init=config.min_items, n_max=config.max_items, budget=budget,
                                          seed=[config.partition_seed, f, seed], pair_rules=rules,
                                          futility=config.futility, exclude=joint_missing,
                                          item_weighting=item_weighting)
                res = multi.run(joint_score)
                per = {k: _metric_figures(multi.rankers[k], res.results[k], banks[k], raw_bank[k], row, truth[k],
                                          truth_mean[k]) for k in metrics}
                runs.append({"fold": f, "seed": seed, "spend": spend, "mode": "joint", "generations": res.generations,
                             "generated": res.generations,
                             "cost": res.total_cost, "budget": budget, "stopped_because": res.stopped_because,
                             "metrics": per})
                # separate: one run per metric at budget / K each
                per, gens, generated, cost, stops = {}, set(), 0, 0.0, {}
                for k in metrics:
                    bank = banks[k]
                    selector = default_selector(bank.b, top_k=config.top_k, seed=[config.partition_seed, f, seed])
                    ranker = AdaptiveRanker(bank, hold, item_costs=bank_costs[k], confidence=config.confidence,
                                            n_init=config.min_items, n_max=config.max_items, budget=budget / K,
                                            top_k=config.top_k, seed=seed, selector=selector, exclude=missing[k],
                                            pair_rule=rules[k], futility=config.futility)
                    r = ranker.run(lambda m, i, _s=scaled[k]: float(_s[row[m], i]))
                    per[k] = _metric_figures(ranker, r, bank, raw_bank[k], row, truth[k], truth_mean[k])
                    gens |= {(m, str(i)) for m in hold for i, _ in r.item_log[m]}
                    generated += r.total_items
                    cost += r.total_cost
                    stops[k] = r.stopped_because
                runs.append({"fold": f, "seed": seed, "spend": spend, "mode": "separate", "generations": len(gens),
                             "generated": generated,
                             "cost": cost, "budget": budget, "stopped_because": stops, "metrics": per})
                if progress:
                    progress(len(runs) // 2, total)
    summary = {}
    for spend in spends:
        summary[str(spend)] = {mode: _summarise([r for r in runs if r["spend"] == spend and r["mode"] == mode],
                                                metrics) for mode in MODES}
    return {"metrics": metrics, "n_models": len(models), "n_joint_items": n_joint_items, "folds_run": n_folds,
            "settings": asdict(config) | {"spends": list(spends), "item_weighting": item_weighting, "prices": sorted({p.source for p in price.values()})},
            "versions": versions(), "seconds": time.perf_counter() - t0, "summary": summary, "runs": runs}


def _summarise(runs: list, metrics: list) -> dict:
    per = {}
    for k in metrics:
        xs = [r["metrics"][k] for r in runs]
        right, conf = sum(x["right"] for x in xs), sum(x["confident"] for x in xs)
        cov, n = sum(x["covered"] for x in xs), sum(x["models"] for x in xs)
        per[k] = {"tau": float(np.mean([x["tau"] for x in xs])), "right": right, "confident": conf,
                  "confident_accuracy": right / conf if conf else float("nan"),
                  "any_wrong_share": float(np.mean([x["any_wrong"] for x in xs])) if xs else float("nan"),
                  "confident_pairs_per_run": conf / len(xs), "covered": cov, "models": n,
                  "coverage": cov / n if n else float("nan")}
    return {"runs": len(runs), "generations": float(np.mean([r["generations"] for r in runs])),
            "generated": float(np.mean([r["generated"] for r in runs])),
            "cost": float(np.mean([r["cost"] for r in runs])),
            "tau": float(np.mean([per[k]["tau"] for k in metrics])),
            "confident_accuracy": (sum(per[k]["right"] for k in metrics) / max(1, sum(per[k]["confident"] for k in metrics))),
            "confident_pairs_per_run": float(np.mean([per[k]["confident_pairs_per_run"] for k in metrics])),
            "coverage": sum(per[k]["covered"] for k in metrics) / max(1, sum(per[k]["models"] for k in metrics)),
            # the share of runs in which some metric's ranking reports a wrong order
            "any_wrong_share": float(np.mean([any(r["metrics"][k]["any_wrong"] for k in metrics) for r in runs]))
            if runs else float("nan"),
            "metrics": per}

"""Backtest of a joint multi-metric run against separate single-metric runs at the same total spend.

The protocol of :mod:`lm_eval_adaptive.engine.evaluation.backtest` (hold-out folds × seeds, a bank per
metric calibrated on the other models, τ against each metric's full-data ranking, confident
pairs, full-task interval coverage), for several metric tables of one task (the same models
and items, one score per metric):

* ``joint``: one :class:`~lm_eval_adaptive.engine.ranking.multi_metric_ranker.MultiMetricRanker` with
  total budget S·B; each generation is scored by every metric;
* ``separate``: one :class:`~lm_eval_adaptive.engine.ranking.ranker.AdaptiveRanker` per metric, each
  with budget S·B / K (K metrics): the same total spend, each run generating its own items,

for each total spend S in ``spends`` (B is the single-metric backtest's budget: the mean item
cost × hold-out models × ``target_items``). Generations are the distinct (model, item) pairs a
mode generated (separate runs that happen to pick the same item for a model count it once;
their spend counts it once per run: ``generated`` counts every run's items, what separate
runs that each generate their own items make).

The backtest's plan/fold/assemble split carries over: :func:`plan_multi_backtest` fixes the
models (those every table has) and the hold-out sets (the backtest's own
:func:`~lm_eval_adaptive.engine.evaluation.backtest.plan_for_models`); :func:`multi_backtest_fold` runs one
fold, a pure function of the tables, the plan and the fold (its banks calibrated with every
calibration setting of the config by the backtest's
:func:`~lm_eval_adaptive.engine.evaluation.backtest.fold_bank`, its random streams seeded from the partition
seed, the fold and the seed), so folds may run in other processes or on a Ray cluster
(:mod:`lm_eval_adaptive.sweep`); :func:`assemble_multi_backtest` gives the same figures as
:func:`backtest_multi` from the folds' outcomes in any order.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Mapping, Sequence

import numpy as np

from lm_eval_adaptive.data.prices import Price
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig
from lm_eval_adaptive.engine.evaluation.backtest import BacktestPlan, FoldOutcome, fold_bank, plan_for_models
from lm_eval_adaptive.engine.evaluation.backtest_figures import confident_counts, kendall_tau
from lm_eval_adaptive.engine.evaluation.fold_parts import (
    fold_bank_costs,
    fold_ground_truth,
    fold_ranker,
    judgement_for,
    table_item_tokens,
)
from lm_eval_adaptive.engine.irt.bank import joint_item_ids
from lm_eval_adaptive.engine.cat.full_task import full_task_estimate
from lm_eval_adaptive.engine.ranking.multi_metric_ranker import ITEM_WEIGHTINGS, MultiMetricRanker
from lm_eval_adaptive.engine.ranking.pairs.rules import pair_rule_for
from lm_eval_adaptive.engine.signature import versions
from lm_eval_adaptive.engine.evaluation.simulation import drive
from lm_eval_adaptive.errors import InputError

__all__ = ["backtest_multi", "MODES", "MultiBacktestPlan", "plan_multi_backtest", "multi_backtest_fold",
           "assemble_multi_backtest"]

#: The two ways of ranking by every metric.
MODES = ("joint", "separate")


def _positions(table) -> dict:
    return {str(v): i for i, v in enumerate(np.asarray(table.items, dtype=object).tolist())}


def _metric_figures(examinees, res, bank, raw_bank, row, truth, truth_mean) -> dict:
    """τ, confident pairs (right, all), any of them wrong, coverage (covered, models) of one metric's ranking
    (``examinees``: model → its examinee on that metric's bank)."""
    pred_ties = {frozenset(p) for p in res.ties}
    right, conf = confident_counts(res.ranking, truth["ranking"], pred_ties)
    covered = 0
    for m in res.ranking:
        e = examinees[m]
        items = np.asarray(e.items, dtype=np.int64)
        est = full_task_estimate(bank, items, raw_bank[row[m], items], res.theta[m], res.se[m], misfit=e.misfit)
        covered += bool(est["lower"] <= truth_mean[m] <= est["upper"])
    return {"tau": kendall_tau(res.ranking, truth["ranking"]), "right": right, "confident": conf,
            "any_wrong": right < conf, "covered": covered, "models": len(res.ranking), "ties": len(pred_ties)}


@dataclass(frozen=True)
class MultiBacktestPlan:
    """What a joint-vs-separate backtest runs, fixed before any fold does: the backtest's plan over
    the models every metric table has (settings, prices, hold-out sets), the metrics, the total
    spends and the joint run's item weighting (:func:`plan_multi_backtest`)."""

    base: BacktestPlan
    metrics: tuple
    spends: tuple
    item_weighting: str = "normalised"

    @property
    def config(self) -> BacktestConfig:
        return self.base.config

    @property
    def n_folds(self) -> int:
        return self.base.n_folds

    @property
    def runs(self) -> int:
        """(fold, seed, spend) runs of the whole backtest, each a joint and a separate one: a progress display's total."""
        return self.n_folds * self.config.seeds * len(self.spends)


def plan_multi_backtest(tables: Mapping[str, object], config: BacktestConfig = BacktestConfig(), *,
                        spends: Sequence[float] = (1.0,), prices: Mapping[str, Price] | None = None,
                        item_weighting: str = "normalised") -> MultiBacktestPlan:
    """Check the settings against ``tables`` (metric name → response table of one task) and fix the
    folds' hold-out sets (see :class:`MultiBacktestPlan`)."""
    metrics = tuple(str(k) for k in tables)
    if not metrics:
        raise InputError("a multi-metric backtest needs at least one metric table")
    if item_weighting not in ITEM_WEIGHTINGS:
        raise InputError(f"item weighting must be one of {', '.join(ITEM_WEIGHTINGS)}, got {item_weighting!r}")
    spends = tuple(spends)
    if not spends or any(not float(x) > 0 for x in spends):
        raise InputError(f"total spends must be positive multiples of the budget, got {list(spends)}")
    models = sorted(set.intersection(*(set(map(str, t.models)) for t in tables.values())))
    return MultiBacktestPlan(base=plan_for_models(models, config, prices), metrics=metrics, spends=spends,
                             item_weighting=item_weighting)


def backtest_multi(tables: Mapping[str, object], *, config: BacktestConfig = BacktestConfig(),
                   spends: Sequence[float] = (1.0,), prices: Mapping[str, Price] | None = None,
                   item_weighting: str = "normalised", progress=None) -> dict:
    """Joint against separate runs on ``tables`` (metric name → response table of one task).

    Returns a dict: ``settings``, ``n_models``, ``n_joint_items`` (joint, per fold), ``folds``
    (per fold: hold-out set, joint items, each metric's bank), ``folds_run``, ``seconds``
    and ``summary[spend][mode]`` with, per metric, mean τ, confident accuracy (pooled right /
    confident pairs), confident pairs per run, full-task coverage, and per mode the mean
    generations (distinct (model, item) pairs) and spend per run; ``runs`` lists every
    (fold, seed, spend, mode) run's figures. ``progress(done, total)`` is called for each
    (seed, spend) of a fold when the fold is done. The folds run here one after another; to
    run them elsewhere see :func:`lm_eval_adaptive.sweep.run_multi_backtest`.
    """
    t0 = time.perf_counter()
    plan = plan_multi_backtest(tables, config, spends=spends, prices=prices, item_weighting=item_weighting)
    outcomes = []
    for f in range(plan.n_folds):
        outcomes.append(multi_backtest_fold(tables, plan, f))
        if progress:
            per_fold = plan.runs // plan.n_folds
            for k in range(f * per_fold, (f + 1) * per_fold):
                progress(k + 1, plan.runs)
    return assemble_multi_backtest(tables, plan, outcomes, seconds=time.perf_counter() - t0)


def multi_backtest_fold(tables: Mapping[str, object], plan: MultiBacktestPlan, f: int) -> FoldOutcome:
    """Fold ``f`` of ``plan``: a bank per metric calibrated on the other models (as the single-metric
    backtest's fold, every calibration setting and the self-check), then for each seed and total
    spend a joint run and separate runs on the hold-out set."""
    t0 = time.perf_counter()
    config = plan.config
    metrics = list(plan.metrics)
    K = len(metrics)
    models = list(plan.base.models)
    price = plan.base.price
    hold = list(plan.base.sets[f])
    calib = [m for m in models if m not in hold]
    first = tables[metrics[0]]
    in_tok, out_tok, no_tokens = table_item_tokens(first)
    first_pos = _positions(first)
    full_costs = {m: price[m].item_costs(in_tok, out_tok) for m in hold}
    unit = float(np.mean([np.mean(full_costs[m]) for m in hold])) * config.holdout_size * config.target_items
    banks, raw_bank, scaled, truth, truth_mean, missing, rules, bank_costs = {}, {}, {}, {}, {}, {}, {}, {}
    for k in metrics:
        t = tables[k]
        bank = banks[k] = fold_bank(t, config, calib)
        tmodels, tpos = [str(m) for m in t.models], _positions(t)
        raw_h = t.mean_matrix()[[tmodels.index(m) for m in hold]]
        raw_bank[k] = raw_h[:, [tpos[str(i)] for i in bank.item_ids.tolist()]]
        scaled[k] = bank.scale(np.arange(bank.n_items)[None, :], raw_bank[k])
        truth[k] = fold_ground_truth(raw_h, hold, config, f)
        truth_mean[k] = {m: float(np.nanmean(raw_h[j])) for j, m in enumerate(hold)}
        missing[k] = {m: np.flatnonzero(np.isnan(raw_bank[k][j])) for j, m in enumerate(hold)}
        rules[k] = pair_rule_for(bank, config.confidence, config.tie_margin, config.family_wise)
        bank_costs[k] = fold_bank_costs(bank, price, full_costs,
                                        np.array([first_pos[str(i)] for i in bank.item_ids.tolist()], dtype=np.int64),
                                        no_tokens)
    row = {m: j for j, m in enumerate(hold)}
    ids = joint_item_ids(banks)
    jpos = np.array([first_pos[i] for i in ids], dtype=np.int64)
    bidx = {k: banks[k].index_of(ids) for k in metrics}
    # a joint item a metric has no score for (for that model) is never given to the model
    joint_missing = {m: np.flatnonzero(np.any([np.isnan(raw_bank[k][row[m], bidx[k]]) for k in metrics], axis=0))
                     for m in hold}
    joint_costs = {m: full_costs[m][jpos] for m in hold}

    def joint_score(m, j):
        return {k: float(scaled[k][row[m], bidx[k][j]]) for k in metrics}

    def joint_raw(m, j):
        return {k: float(raw_bank[k][row[m], bidx[k][j]]) for k in metrics}

    runs = []
    for seed in range(config.seeds):
        for spend in plan.spends:
            budget = unit * float(spend)
            multi = MultiMetricRanker(banks, hold, item_costs=joint_costs, confidence=config.confidence,
                                      n_init=config.min_items, n_max=config.max_items, budget=budget,
                                      seed=[config.partition_seed, f, seed], pair_rules=rules,
                                      exclude=joint_missing,
                                      item_weighting=plan.item_weighting, judgement=judgement_for(config))
            res = drive(multi, joint_score, raw=joint_raw)  # told with the raw values (the metric scale's)
            per = {k: _metric_figures(multi.metric_examinees(k), res.results[k], banks[k], raw_bank[k], row, truth[k],
                                      truth_mean[k]) for k in metrics}
            runs.append({"fold": f, "seed": seed, "spend": spend, "mode": "joint", "generations": res.generations,
                         "generated": res.generations,
                         "cost": res.total_cost, "budget": budget, "stopped_because": res.stopped_because,
                         "metrics": per})
            # separate: one run per metric at budget / K each, each the single-metric backtest's ranker
            per, gens, generated, cost, stops = {}, set(), 0, 0.0, {}
            for k in metrics:
                ranker = fold_ranker(banks[k], hold, config, f, seed, item_costs=bank_costs[k], budget=budget / K,
                                     exclude=missing[k], pair_rule=rules[k])
                r = drive(ranker, lambda m, i, k=k: float(scaled[k][row[m], i]),
                          raw=lambda m, i, k=k: float(raw_bank[k][row[m], i]))
                per[k] = _metric_figures(ranker.examinees, r, banks[k], raw_bank[k], row, truth[k], truth_mean[k])
                gens |= {(m, str(i)) for m in hold for i, _ in r.item_log[m]}
                generated += r.total_items
                cost += r.total_cost
                stops[k] = r.stopped_because
            runs.append({"fold": f, "seed": seed, "spend": spend, "mode": "separate", "generations": len(gens),
                         "generated": generated,
                         "cost": cost, "budget": budget, "stopped_because": stops, "metrics": per})
    summary = {"fold": f, "holdout": hold, "calibration_models": len(calib), "n_joint_items": len(ids),
               "banks": {k: {"bank_items": banks[k].n_items, "response_model": banks[k].model.kind}
                         for k in metrics}}
    return FoldOutcome(fold=f, runs=runs, summary=summary, seconds=time.perf_counter() - t0)


def assemble_multi_backtest(tables: Mapping[str, object], plan: MultiBacktestPlan, outcomes, *,
                            seconds: float) -> dict:
    """The result of :func:`backtest_multi` from ``plan``'s folds' outcomes (in any order)."""
    outcomes = sorted(outcomes, key=lambda o: o.fold)
    if [o.fold for o in outcomes] != list(range(plan.n_folds)):
        raise ValueError(f"need one outcome of each of the {plan.n_folds} folds, "
                         f"got folds {[o.fold for o in outcomes]}")
    metrics = list(plan.metrics)
    runs = [r for o in outcomes for r in o.runs]
    summary = {}
    for spend in plan.spends:
        summary[str(spend)] = {mode: _summarise([r for r in runs if r["spend"] == spend and r["mode"] == mode],
                                                metrics) for mode in MODES}
    prices = sorted({p.source for p in plan.base.price.values()})
    return {"metrics": metrics, "n_models": len(plan.base.models),
            "n_joint_items": [o.summary["n_joint_items"] for o in outcomes], "folds_run": plan.n_folds,
            "folds": [o.summary for o in outcomes],
            "settings": asdict(plan.config) | {"spends": list(plan.spends), "item_weighting": plan.item_weighting,
                                               "prices": prices},
            "versions": versions(), "seconds": seconds, "summary": summary, "runs": runs}


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

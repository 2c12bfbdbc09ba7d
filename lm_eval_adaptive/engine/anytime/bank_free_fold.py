"""A backtest fold's hold-out set ranked by the bank-free ranker: the history curve's N = 0 runs
(:func:`~lm_eval_adaptive.engine.anytime.history_backtest.cold_start_fold`) and, in the backtest, a fold whose
bank the bank-use rule rejects (:mod:`~lm_eval_adaptive.engine.anytime.small_bank`; ``BacktestConfig.bank_use_margin``),
ranked as ``rank`` would then rank it (:func:`fallback_runs`).

Each seed's run: :class:`~lm_eval_adaptive.engine.anytime.bank_free_ranker.BankFreeRanker` on the hold-out
models' raw scores over every document of the table, the score range the table's own, the backtest's budget,
seeded by (partition seed, fold, seed).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from lm_eval_adaptive.engine.anytime.pair_worth import DEFAULT_ALLOCATION
from lm_eval_adaptive.engine.anytime.bank_free_ranker import BankFreeRanker
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig
from lm_eval_adaptive.engine.evaluation.backtest_figures import confident_counts, kendall_tau, tie_metrics
from lm_eval_adaptive.engine.evaluation.fold_run import FoldRun
from lm_eval_adaptive.engine.evaluation.run_records import pair_claims

__all__ = ["bank_free_rankings", "covered_models", "fallback_runs"]


def bank_free_rankings(hold: Sequence[str], item_ids: Sequence[str], raw_h: np.ndarray,
                       costs: Mapping[str, np.ndarray], config: BacktestConfig, f: int, *,
                       score_range: tuple[float, float], budget: float, margin: float,
                       allocation: str = DEFAULT_ALLOCATION, order_key=None) -> list:
    """Per seed of ``config``, (the ranker, its result without the cost-to-settle simulation) of the bank-free
    ranker on ``hold`` (rows of ``raw_h``: raw scores per table document, NaN = no score) in fold ``f``;
    ``order_key``: the ranker's (what orders the pairs left open; None: its own fit)."""
    hold = list(hold)
    row = {m: j for j, m in enumerate(hold)}
    missing = {m: np.flatnonzero(np.isnan(raw_h[j])) for j, m in enumerate(hold)}
    out = []
    for seed in range(config.seeds):
        ranker = BankFreeRanker(hold, [str(i) for i in item_ids], score_range=score_range, item_costs=costs,
                                confidence=config.confidence, tie_margin=margin or 0.0,
                                family_wise=config.family_wise, budget=budget, n_max=config.max_items,
                                exclude=missing, seed=[config.partition_seed, f, seed], allocation=allocation,
                                order_key=order_key)
        while (req := ranker.ask()) is not None:
            ranker.tell(req, float(raw_h[row[req.model], req.item]))
        out.append((ranker, ranker.result(settle_costs=False)))
    return out


def covered_models(res, truth_mean: Mapping[str, float]) -> list:
    """Per ranked model: does its (anytime-valid) interval hold its full-task mean."""
    return [bool(res.estimates[m]["lower"] - 1e-9 <= truth_mean[m] <= res.estimates[m]["upper"] + 1e-9)
            for m in res.ranking]


def fallback_runs(hold: Sequence[str], item_ids: Sequence[str], raw_h: np.ndarray, costs: Mapping[str, np.ndarray],
                  config: BacktestConfig, f: int, *, gt: dict, score_range: tuple[float, float], budget: float,
                  margin: float, delta: float, truth_mean: Mapping[str, float], full_run_cost: float,
                  order_key=None) -> list:
    """The :class:`FoldRun` of each seed of fold ``f`` ranked bank-free (the fold's bank rejected): the
    bank-free ranker's τ, items, dollars, confident pairs, ties and coverage in the "adaptive" fields (its
    interval is every coverage figure's: it has no θ scale); fixed-length CAT and the random baselines are
    filled in by the backtest as for any fold. ``gt``: the fold's ground truth (its ranking and ties);
    ``truth_mean``: each model's full-task mean; ``full_run_cost``: a full run of the hold-out set, in dollars (the
    fold's own figures); ``order_key``: what orders the pairs left open (the rejected bank's prediction; None: the
    ranker's own fit)."""
    truth = gt["ranking"]
    runs = []
    for seed, (_, res) in enumerate(bank_free_rankings(hold, item_ids, raw_h, costs, config, f,
                                                       score_range=score_range, budget=budget, margin=margin,
                                                       order_key=order_key)):
        pred_ties = {frozenset(p) for p in res.ties}
        prec, rec, f1 = tie_metrics(pred_ties, gt["ties"])
        right, confident = confident_counts(res.ranking, truth, pred_ties)
        claims = pair_claims(res, truth_mean, margin or 0.0, delta)
        covered = covered_models(res, truth_mean)
        runs.append(FoldRun(
            fold=f, seed=seed, adaptive_tau=kendall_tau(res.ranking, truth), adaptive_items=res.total_items,
            adaptive_cost=res.total_cost, adaptive_ties=len(pred_ties), stopped_because=res.stopped_because,
            fixed_tau=float("nan"), fixed_items=0, fixed_cost=0.0,
            confident_accuracy=right / confident if confident else None, truth_ties=len(gt["ties"]),
            tie_precision=prec, tie_recall=rec, tie_f1=f1,
            cost_share=res.total_cost / full_run_cost if full_run_cost > 0 else float("nan"),
            confident=(right, confident),
            tie_counts=(len(pred_ties & gt["ties"]), len(pred_ties - gt["ties"]), len(gt["ties"] - pred_ties)),
            covered=covered, covered_metric=list(covered), covered_theta=list(covered),
            equivalent=claims["equivalent"], tied=claims["tied"], busiest_items=max(res.items.values())))
    return runs

"""One backtest fold's parts, shared by the backtest and the several-metric backtest (the fold's bank,
which may run a self-check backtest, is :func:`~lm_eval_adaptive.engine.evaluation.backtest.fold_bank`):
the table's item tokens, the bank's item costs, the fold's ground truth, its ranker and judgement, the
table's range and the positions of the bank's items in the table."""

from __future__ import annotations

import functools
from typing import Mapping

import numpy as np

from lm_eval_adaptive.data.prices import Price
from lm_eval_adaptive.engine.ranking.ranker import AdaptiveRanker
from lm_eval_adaptive.engine.ranking.pairs.metric_judgement import MetricScaleJudgement
from lm_eval_adaptive.engine.anytime.banked_intervals import BankedAnytimeIntervals
from lm_eval_adaptive.engine.cat.selection import DEFAULT_RANDOM_SHARE, RandomShareSelector, default_selector
from lm_eval_adaptive.engine.ranking.pairs.settle_policy import SettlePolicy

from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig
from lm_eval_adaptive.engine.evaluation.backtest_figures import ground_truth

__all__ = ["table_item_tokens", "fold_bank_costs", "fold_ground_truth", "fold_ranker", "fold_selector", "judgement_for",
           "table_range", "table_positions"]


def table_item_tokens(table) -> tuple[np.ndarray, np.ndarray, bool]:
    """(input tokens, output tokens, no_tokens) of ``table``'s items: a table without token counts
    (e.g. WMT25) has every item cost the same, one input and one output token at the model's
    price, so budgets count items."""
    in_tok, out_tok = table.item_tokens()
    no_tokens = bool(np.all(np.isnan(in_tok)) and np.all(np.isnan(out_tok)))
    if no_tokens:
        in_tok, out_tok = np.ones(table.n_items), np.ones(table.n_items)
    return in_tok, out_tok, no_tokens


def fold_bank_costs(bank, price: Mapping[str, Price], all_costs: Mapping[str, np.ndarray], tpos: np.ndarray,
                    no_tokens: bool) -> dict:
    """Per hold-out model, the cost of each bank item: its table items' costs (``all_costs`` at the
    bank's table positions ``tpos``) for a table without token counts, else priced from the bank's tokens."""
    if no_tokens:
        return {m: c[tpos] for m, c in all_costs.items()}
    return {m: price[m].item_costs(bank.input_tokens, bank.output_tokens) for m in all_costs}


def fold_ground_truth(raw_h: np.ndarray, hold: list, config: BacktestConfig, f: int) -> dict:
    """:func:`ground_truth` of fold ``f``'s hold-out scores ``raw_h``, its bootstrap seeded by (partition seed, fold)."""
    return ground_truth(raw_h, hold, n_resamples=config.bootstrap, confidence=config.confidence,
                        rng=np.random.default_rng([config.partition_seed, f]))


def fold_ranker(bank, hold: list, config: BacktestConfig, f: int, seed: int, *, score_range=None,
                **kwargs) -> AdaptiveRanker:
    """The adaptive ranker of seed ``seed`` in fold ``f``: ``config``'s settings (its judgement's
    stopping policy and intervals, its item design), the default selector with the bank's selection information,
    seeded by (partition seed, fold, seed); ``kwargs`` (item costs, budget, exclude, pair rule) go to
    :class:`AdaptiveRanker`; ``score_range``: the bounds of the raw scores, which anytime-valid intervals need
    (``config.intervals``)."""
    return AdaptiveRanker(bank, hold, confidence=config.confidence, n_init=config.min_items,
                          n_max=config.max_items, top_k=config.top_k, seed=seed,
                          selector=fold_selector(bank, config, f, seed),
                          judgement=judgement_for(config, score_range), design=config.design, **kwargs)


def fold_selector(bank, config: BacktestConfig, f: int, seed: int):
    """The item selector of seed ``seed`` in fold ``f`` (:func:`fold_ranker`'s): the default one with the bank's
    selection information, or ``config``'s random share, seeded by (partition seed, fold, seed)."""
    seed_ = [config.partition_seed, f, seed]
    if config.random_share == DEFAULT_RANDOM_SHARE:
        return default_selector(bank.b, top_k=config.top_k, seed=seed_, information=bank.selection_information)
    return RandomShareSelector(bank.b, config.top_k, share=config.random_share, seed=seed_,
                               information=bank.selection_information)


def judgement_for(config: BacktestConfig, score_range=None):
    """The ranker's judgement factory for ``config``: the one judgement, the full-task metric's scale
    (:class:`MetricScaleJudgement`), with ``config``'s stopping policy, final order and intervals (anytime-valid ones need
    ``score_range``, the bounds every raw score lies in)."""
    policy = SettlePolicy(config.full_run_share, config.budget_share, config.optimism, config.settle_floor_items,
                          config.pair_share)
    if config.intervals != "fixed":
        if score_range is None:
            raise ValueError("anytime-valid intervals need the score range")
        return functools.partial(MetricScaleJudgement, policy=policy, order=config.order, steer=config.steer,
                                 intervals=BankedAnytimeIntervals.factory(
                                     score_range, control_variate=config.intervals == "anytime"))
    return functools.partial(MetricScaleJudgement, policy=policy, order=config.order, steer=config.steer)


def table_range(raw_all: np.ndarray) -> float:
    """The range of the table's full-task means (every model's mean raw score): the unit δ is stated in."""
    means = np.nanmean(raw_all, axis=1)
    return float(np.nanmax(means) - np.nanmin(means))


def table_positions(table, bank) -> np.ndarray:
    """Table item index of each bank item."""
    pos = {v: i for i, v in enumerate(np.asarray(table.items, dtype=object).tolist())}
    return np.array([pos[str(x)] for x in bank.item_ids], dtype=np.int64)

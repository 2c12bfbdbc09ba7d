"""``rank --anytime --dry-run``: what the anytime-valid ranker with a bank is expected to spend, before any call.

The run is set up as a banked run's forecast sets it up (:class:`~lm_eval_adaptive.live.session.Setup`: the bank bound
to the task, every price resolved, every prompt built, each bank item's expected and upper cost), and simulated by
:func:`~lm_eval_adaptive.live.cost_forecast.forecast_ranking` with the ranker the run would use: the bank-free ranker
(:class:`~lm_eval_adaptive.engine.anytime.driven_ranker.DrivenBankFreeRanker`) with the run's γ, tie margin,
family-wise rule, item cap, seed, concurrency and the live stopping policy on the cost to settle
(:func:`~lm_eval_adaptive.live.stopping_policy.live_policy`: ``--settle-share``, and the pair rule with
``--budget-usd``). Each simulated run gives every model an ability drawn from the bank's calibration models and a
score for every bank item from the bank's response model, mapped to the metric's units (the bank's own range per item)
and kept inside the run's score range, as the live ranker is told them.

One approximation, stated in the forecast's settings (``documents``): the simulated run draws from the documents the
bank covers, where the live run draws from every document of the task (a bank bound to a task covers its documents,
or a share of them that the bind reports).
"""

from __future__ import annotations

import numpy as np

from lm_eval_adaptive.engine.anytime.driven_ranker import DrivenBankFreeRanker
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness.bank_free_run import score_range_for
from lm_eval_adaptive.live.cost_forecast import CostForecast, forecast_ranking, live_arrays, live_settings
from lm_eval_adaptive.live.session import LiveSettings, Setup
from lm_eval_adaptive.live.stopping_policy import live_policy

__all__ = ["ANYTIME_DRAWS", "forecast_anytime_rank"]

#: Simulated runs behind the forecast: each projects its open pairs' costs to settle, as the live run's stopping
#: policy does, and costs several times a banked run's simulation (``rank``'s banked forecast makes 100).
ANYTIME_DRAWS = 50


def forecast_anytime_rank(a: LiveSettings) -> CostForecast:
    """``rank --anytime --dry-run`` (``a``: the settings the command line checked and resolved): the forecast of the
    module docstring."""
    if a.resume:
        raise InputError("--dry-run forecasts a new run; it does not go with --resume")
    setup = Setup(a, a.bank)
    names = [s.name for s in setup.specs]
    cost, upper, full = live_arrays(setup, names)
    bank = setup.bank
    ids = [str(x) for x in bank.item_ids]
    lo, hi = score_range_for(setup.binding.metric, a.score_range)
    cols = np.arange(len(ids))

    def new_ranker() -> DrivenBankFreeRanker:
        return DrivenBankFreeRanker(names, ids, score_range=(lo, hi), item_costs=cost, confidence=a.confidence,
                                    tie_margin=a.tie_margin or 0.0, family_wise=a.family_wise, n_max=a.max_items,
                                    seed=a.seed, max_in_flight=a.concurrency,
                                    settle_policy=live_policy(a.settle_share, a.budget_usd, bank_free=True))

    def to_metric(y: np.ndarray) -> np.ndarray:
        return np.clip(bank.unscale(cols, y), lo, hi)

    settings = live_settings(a) | {"anytime": True, "score_range": [lo, hi], "documents": len(ids),
                                   "task_documents": int(setup.n_docs)}
    return forecast_ranking(new_ranker, names, prices=setup.prices, cost=cost, upper=upper, full_run=full,
                            cap=a.budget_usd, task=setup.task_name, command="rank", seed=a.seed, settings=settings,
                            draws=ANYTIME_DRAWS, bank=bank, n_max=a.max_items or len(ids), to_metric=to_metric)

"""The prices of the LLM judges a task calls, and what their calls cost (``run --adaptive``, ``rank``,
``refresh``)."""

from __future__ import annotations

import logging

from lm_eval_adaptive.data.price_map import model_price
from lm_eval_adaptive.data.prices import DEFAULT_PRICE, actual_cost

__all__ = ["JudgePricing", "judge_prices"]

log = logging.getLogger("lm_eval_adaptive")


class JudgePricing:
    """Prices of the LLM judges a task calls, and what their calls cost.

    A judge the task declares while it is loaded is priced before any call (``--price``
    overrides, litellm's map; refused when unknown and ``required``); a judge seen only when
    it is called is priced then, at the default price when unknown (with a warning).
    """

    def __init__(self, overrides: dict, *, required: bool):
        self.overrides = overrides
        self.required = required
        self.prices: dict = {}

    def declare(self, models) -> None:
        for m in models:
            if m not in self.prices:
                self.prices[m] = model_price(m, overrides=self.overrides,
                                             default=None if self.required else DEFAULT_PRICE)

    def price(self, model: str):
        if model not in self.prices:
            p = model_price(model, overrides=self.overrides, default=DEFAULT_PRICE)
            if p is DEFAULT_PRICE:
                log.warning("judge model %s has no known price; its calls are charged at the default %s "
                            "(give one with --price %s=IN,OUT)", model, p, model)
            self.prices[model] = p
        return self.prices[model]

    def cost(self, calls) -> float:
        """USD of judge calls (:class:`~lm_eval_adaptive.harness.metrics.JudgeCall`); ValueError when
        a call reported no usage."""
        return float(sum(actual_cost(self.price(c.model), c.usage) for c in calls))


def judge_prices(judges: JudgePricing) -> dict:
    """The judges' prices, as the outputs record them."""
    return {m: {"input_per_mtok": p.input_per_mtok, "output_per_mtok": p.output_per_mtok, "source": p.source}
            for m, p in judges.prices.items()}

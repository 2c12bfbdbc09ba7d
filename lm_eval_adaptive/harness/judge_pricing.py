"""The prices of the LLM judges a task calls, and what their calls cost (``run --adaptive``, ``rank``,
``refresh``)."""

from __future__ import annotations

import logging

from lm_eval_adaptive.data.price_map import PricePolicy, priced_by_default, resolve_prices
from lm_eval_adaptive.data.prices import DEFAULT_PRICE, actual_cost

__all__ = ["JudgePricing", "judge_prices"]

log = logging.getLogger("lm_eval_adaptive")


class JudgePricing:
    """Prices of the LLM judges a task calls, and what their calls cost, under the command's price policy.

    A judge the task declares while it is loaded is priced before any call, as every model is
    (:func:`~lm_eval_adaptive.data.price_map.resolve_prices`: ``--price``, litellm's map, else
    ``--price default``; the judges with no price named in one error). A judge seen only when it is
    called is priced then: at ``--price default`` when given, else at the stated
    :data:`~lm_eval_adaptive.data.prices.DEFAULT_PRICE` with a warning (the call was already made).
    """

    def __init__(self, policy: PricePolicy):
        self.policy = policy
        self.prices: dict = {}

    def declare(self, models) -> None:
        new = [m for m in dict.fromkeys(models) if m not in self.prices]
        self.prices.update(resolve_prices([(m, m) for m in new], self.policy))

    def price(self, model: str):
        if model not in self.prices:
            p = self.policy.known(model)
            if p is None:
                p = DEFAULT_PRICE
                log.warning("judge model %s has no known price; its calls are charged at the default %s "
                            "(give one with --price %s=IN,OUT)", model, p, model)
            self.prices[model] = p
        return self.prices[model]

    @property
    def priced_by_default(self) -> list[str]:
        """The judges priced by ``--price default`` (or, seen only when called, the stated default)."""
        return priced_by_default(self.prices) + [m for m, p in self.prices.items() if p is DEFAULT_PRICE]

    def cost(self, calls) -> float:
        """USD of judge calls (:class:`~lm_eval_adaptive.harness.metrics.JudgeCall`); ValueError when
        a call reported no usage."""
        return float(sum(actual_cost(self.price(c.model), c.usage) for c in calls))


def judge_prices(judges: JudgePricing) -> dict:
    """The judges' prices, as the outputs record them."""
    return {m: {"input_per_mtok": p.input_per_mtok, "output_per_mtok": p.output_per_mtok, "source": p.source}
            for m, p in judges.prices.items()}

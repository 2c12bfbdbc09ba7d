"""Per-token prices and what a call or an item costs.

A :class:`Price` holds USD per input token and per output token, with the place the
numbers came from (``source``). :func:`upper_estimate` is the most a call can cost before
it is made; :func:`actual_cost` is what it cost, from the usage the provider returned.
Where prices come from (litellm's price map, costs files, ``--price``) is
:mod:`lm_eval_adaptive.data.price_map`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Price", "DEFAULT_PRICE", "uniform_prices", "upper_estimate", "actual_cost", "nonnegative_amount"]

_PER_MILLION = 1_000_000.0


@dataclass(frozen=True)
class Price:
    """USD per input token and per output token, and where the numbers came from; for a model whose
    reasoning tokens have a price of their own (litellm's ``output_cost_per_reasoning_token``), that
    price too (None: reasoning tokens cost what other output tokens cost)."""

    input_per_token: float
    output_per_token: float
    source: str  # e.g. "litellm:gpt-4o-mini", "default", "file:costs.json", "cli"
    reasoning_per_token: float | None = None

    def __post_init__(self) -> None:
        for field in ("input_per_token", "output_per_token", "reasoning_per_token"):
            value = getattr(self, field)
            if value is None and field == "reasoning_per_token":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
                raise ValueError(f"{field} must be a number, got {value!r}")
            value = float(value)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{field} must be a finite number >= 0, got {value!r}")
            object.__setattr__(self, field, value)

    @classmethod
    def per_million(cls, input_usd: float, output_usd: float, source: str) -> Price:
        """A price given in USD per million input and output tokens."""
        return cls(float(input_usd) / _PER_MILLION, float(output_usd) / _PER_MILLION, source)

    @property
    def output_bound_per_token(self) -> float:
        """The most one output token can cost: the output price, or the reasoning price when it is higher
        (any output token may be a reasoning token)."""
        return max(self.output_per_token, self.reasoning_per_token or 0.0)

    @property
    def input_per_mtok(self) -> float:
        """USD per million input tokens."""
        return self.input_per_token * _PER_MILLION

    @property
    def output_per_mtok(self) -> float:
        """USD per million output tokens."""
        return self.output_per_token * _PER_MILLION

    def item_costs(self, input_tokens: np.ndarray, output_tokens: np.ndarray) -> np.ndarray:
        """USD per item, vectorised (arrays broadcast); NaN token counts count as 0."""
        inp = np.asarray(input_tokens, dtype=float)
        out = np.asarray(output_tokens, dtype=float)
        inp = np.where(np.isnan(inp), 0.0, inp)
        out = np.where(np.isnan(out), 0.0, out)
        return inp * self.input_per_token + out * self.output_per_token

    def record(self) -> dict:
        """The price as a run records it (USD per million tokens, and where it came from)."""
        out = {"input_per_mtok": self.input_per_mtok, "output_per_mtok": self.output_per_mtok, "source": self.source}
        if self.reasoning_per_token is not None:
            out["reasoning_per_mtok"] = self.reasoning_per_token * _PER_MILLION
        return out

    @classmethod
    def from_record(cls, rec: Mapping) -> Price:
        """The price :meth:`record` wrote (ValueError when it is not one)."""
        try:
            r = rec.get("reasoning_per_mtok")
            return cls(float(rec["input_per_mtok"]) / _PER_MILLION, float(rec["output_per_mtok"]) / _PER_MILLION,
                       str(rec["source"]), None if r is None else float(r) / _PER_MILLION)
        except (AttributeError, KeyError, TypeError) as e:
            raise ValueError(f"not a price record: {rec!r}") from e

    def __str__(self) -> str:
        reasoning = "" if self.reasoning_per_token is None else \
            f" (reasoning ${self.reasoning_per_token * _PER_MILLION:.4g}/1M)"
        return (
            f"${self.input_per_mtok:.4g}/1M in, ${self.output_per_mtok:.4g}/1M out{reasoning} "
            f"({self.source})"
        )


DEFAULT_PRICE: Price = Price.per_million(1.00, 3.00, "default")
"""Stated default for systems with no API price: $1.00 / 1M input, $3.00 / 1M output tokens."""


def uniform_prices(models: Iterable[str], price: Price = DEFAULT_PRICE) -> dict[str, Price]:
    """The same price for every model (backtest setting "same price for every system")."""
    return {m: price for m in models}


def nonnegative_amount(value: Any, what: str) -> float:
    """``value`` as a float: a finite number >= 0 (token counts, dollars); ValueError naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{what} must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{what} must be a finite number >= 0, got {value!r}")
    return v


def _tokens(value: Any, what: str) -> float:
    if value is None:
        raise ValueError(f"{what} is missing")
    return nonnegative_amount(value, what)


def upper_estimate(price: Price, input_tokens: float, max_output_tokens: float, *,
                   margin: float = 1.0) -> float:
    """USD a call can cost at most: input tokens at the input price + ``max_output_tokens``
    (the limit sent with the call) at the dearest output price (the reasoning price where it is higher:
    :attr:`Price.output_bound_per_token`), times ``margin`` (>= 1; use > 1 when the input was counted
    with another tokenizer than the provider's).
    """
    if margin < 1 or not math.isfinite(margin):
        raise ValueError(f"margin must be a finite number >= 1, got {margin!r}")
    if max_output_tokens is None:
        raise ValueError("an upper estimate needs max_output_tokens (the call's max_tokens)")
    inp = _tokens(input_tokens, "input_tokens")
    out = _tokens(max_output_tokens, "max_output_tokens")
    return (inp * price.input_per_token + out * price.output_bound_per_token) * float(margin)


def _usage_field(usage: Any, *names: str) -> Any:
    for name in names:
        value = usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name, None)
        if value is not None:
            return value
    return None


def actual_cost(price: Price, usage: Mapping | Any) -> float:
    """USD of a finished call from its OpenAI-style usage ``{"prompt_tokens", "completion_tokens"}``.

    An object with those attributes (litellm's ``Usage``) works too, and Anthropic-style
    ``input_tokens``/``output_tokens`` are accepted. Every prompt token is priced at the
    input price (provider discounts for cached input are not applied: the figure errs high).
    With a reasoning price, the completion's reasoning tokens
    (``completion_tokens_details.reasoning_tokens``, counted within ``completion_tokens``) are priced at
    it, as litellm's own cost calculator prices them.
    """
    if usage is None:
        raise ValueError("no usage in the response: the call's cost is unknown")
    prompt = _usage_field(usage, "prompt_tokens", "input_tokens")
    completion = _usage_field(usage, "completion_tokens", "output_tokens")
    if prompt is None or completion is None:
        raise ValueError(f"usage needs prompt_tokens and completion_tokens, got {usage!r}")
    completion = _tokens(completion, "completion_tokens")
    reasoning = 0.0
    if price.reasoning_per_token is not None:
        details = _usage_field(usage, "completion_tokens_details", "output_tokens_details")
        r = None if details is None else _usage_field(details, "reasoning_tokens")
        reasoning = min(completion, _tokens(r, "reasoning_tokens")) if r is not None else 0.0
    return (_tokens(prompt, "prompt_tokens") * price.input_per_token
            + (completion - reasoning) * price.output_per_token
            + reasoning * (price.reasoning_per_token or 0.0))

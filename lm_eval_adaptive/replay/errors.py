"""The replay endpoint's errors (each carries its HTTP status and OpenAI error type) and its
answer record."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ReplayAnswer", "ReplayBadRequest", "ReplayError", "ReplayNotFound"]


class ReplayError(Exception):
    """A request the replay server cannot answer; carries the HTTP status and error type."""

    status = 400
    type = "invalid_request_error"

    def __init__(self, message: str, *, model: str | None = None):
        super().__init__(message)
        self.message = message
        self.model = model

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": None,
                          "code": self.type}}


class ReplayNotFound(ReplayError):
    """Unknown model, unrecognised prompt or no recorded output (HTTP 404)."""

    status = 404
    type = "not_found"


class ReplayBadRequest(ReplayError):
    """A request the server does not support or cannot resolve (HTTP 400)."""

    status = 400
    type = "invalid_request_error"


@dataclass(frozen=True)
class ReplayAnswer:
    """One answer: the text, the item key (e.g. ``wmt24/en-de/17``) and what produced it."""

    text: str
    item: str
    source: str  # resolved model, e.g. "wmt24/en-de/GPT-4", "alpaca_eval/claude-2", "judge"
    judged: tuple[str, ...] = ()  # judge requests: the models whose answer matched
    shared: bool = False  # the prompt's text stands on several recorded lines; answered as the first

"""The LLM judge: a judge model called through litellm, its ``Score: X`` reply normalised to [0, 1].

:func:`llm_judge` sends the judge prompt of :mod:`lm_eval_adaptive.data.judge_format` (the wire format
the replay endpoint reads too) and memoises each judgement in-process. The calls it makes can be
recorded (:func:`judge_calls`: model and usage of each, so a caller can charge them), and a task can
say in advance which judge it will call (:func:`declare_judge`, collected by
:func:`declared_judges`), so the judge is priced before any call. The per-document metric ``judge``
of :mod:`lm_eval_adaptive.harness.metrics` is this judge; litellm is imported only when a judge is
called.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from lm_eval_adaptive.data.judge_format import (
    DEFAULT_RUBRIC,
    build_judge_prompt,
    check_scale,
    parse_judge_score,
)

__all__ = ["DEFAULT_JUDGE_TIMEOUT_S", "JUDGE_MODEL_ENV", "JUDGE_API_BASE_ENV", "JUDGE_API_KEY_ENV", "JudgeCall", "llm_judge",
           "judge_calls", "declare_judge", "declared_judges", "clear_judge_cache", "judgements",
           "remember_judgements"]

#: Environment variables read when the judge's model / endpoint / key are not given.
JUDGE_MODEL_ENV = "LM_EVAL_ADAPTIVE_JUDGE_MODEL"
JUDGE_API_BASE_ENV = "LM_EVAL_ADAPTIVE_JUDGE_API_BASE"
JUDGE_API_KEY_ENV = "LM_EVAL_ADAPTIVE_JUDGE_API_KEY"

_judge_lock = threading.Lock()
_judge_cache: dict[tuple[str, str | None, str], float] = {}


def clear_judge_cache() -> None:
    """Forget the memoised judgements of :func:`llm_judge`."""
    with _judge_lock:
        _judge_cache.clear()


def judgements() -> dict:
    """The memoised judgements of :func:`llm_judge`: ``(model, api_base, prompt)`` → the judge's raw score."""
    with _judge_lock:
        return dict(_judge_cache)


def remember_judgements(entries) -> None:
    """Memoise judgements given as ``(model, api_base, prompt, raw score)`` (what a resumed run's journal
    holds): they are never requested again."""
    with _judge_lock:
        for model, api_base, prompt, raw in entries:
            _judge_cache[(str(model), api_base, str(prompt))] = float(raw)


@dataclass(frozen=True)
class JudgeCall:
    """One judge request that was answered: the litellm model id and the usage it reported."""

    model: str
    usage: dict | None


_judge_tls = threading.local()


@contextlib.contextmanager
def judge_calls(*, timeout: float | None = None) -> Iterator[list[JudgeCall]]:
    """Record, in a list, every judge request answered in this thread meanwhile.

    Each entry is a :class:`JudgeCall` (model and the provider's usage), so the caller can
    charge the judge's calls; memoised judgements make no request and record nothing.
    ``timeout`` (seconds) applies to the judge requests that set none themselves.
    """
    saved = getattr(_judge_tls, "calls", None), getattr(_judge_tls, "timeout", None)
    calls: list[JudgeCall] = []
    _judge_tls.calls, _judge_tls.timeout = calls, timeout
    try:
        yield calls
    finally:
        _judge_tls.calls, _judge_tls.timeout = saved


def declare_judge(model: str | None) -> None:
    """Say that a task will call the judge ``model`` (task code calls it when it sets the
    judge up, e.g. while its dataset is loaded), so callers can price the judge before any
    call is made (see :func:`declared_judges`)."""
    found = getattr(_judge_tls, "declared", None)
    if found is not None and model and model not in found:
        found.append(model)


@contextlib.contextmanager
def declared_judges() -> Iterator[list[str]]:
    """Collect the judge models that :func:`declare_judge` names in this thread meanwhile."""
    saved = getattr(_judge_tls, "declared", None)
    _judge_tls.declared = found = []
    try:
        yield found
    finally:
        _judge_tls.declared = saved


def _usage_dict(usage: Any) -> dict | None:
    if usage is None:
        return None
    if isinstance(usage, dict):
        return dict(usage)
    return {"prompt_tokens": getattr(usage, "prompt_tokens", None),
            "completion_tokens": getattr(usage, "completion_tokens", None)}


#: Seconds a judge request waits for its reply when no caller set a timeout.
DEFAULT_JUDGE_TIMEOUT_S = 120.0


def _judge_request(model: str, api_base: str | None, api_key: str | None, prompt: str,
                   timeout: float | None) -> str | None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    kwargs: dict[str, Any] = {}
    if api_base:
        kwargs["api_base"] = api_base
    if api_key:
        kwargs["api_key"] = api_key
    elif api_base and model.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
        # A local OpenAI-compatible server usually wants no key, but the OpenAI client
        # refuses to run without one.
        kwargs["api_key"] = "EMPTY"
    if timeout is None:
        timeout = getattr(_judge_tls, "timeout", None)
    # a judge call outside a live run (a plain harness run) waits at most DEFAULT_JUDGE_TIMEOUT_S, not
    # litellm's 10 minutes: a stalled judge server fails the document instead of hanging the run
    kwargs["timeout"] = DEFAULT_JUDGE_TIMEOUT_S if timeout is None else timeout
    # no retry behind the caller's back: litellm's own (num_retries) and the provider SDK's
    # (max_retries, 2 by default in the OpenAI client) are off; each retry is the caller's,
    # reserved, charged and counted (live/driver.py)
    response = litellm.completion(
        model=model,
        messages=[{"role": "user", "content": prompt}],
        temperature=0,
        num_retries=0,
        max_retries=0,
        **kwargs,
    )
    calls = getattr(_judge_tls, "calls", None)
    if calls is not None:
        calls.append(JudgeCall(model=model, usage=_usage_dict(getattr(response, "usage", None))))
    return response.choices[0].message.content


def llm_judge(
    instruction: str,
    answer: str,
    *,
    model: str | None = None,
    api_base: str | None = None,
    api_key: str | None = None,
    reference: str | None = None,
    rubric: str = DEFAULT_RUBRIC,
    scale: Sequence[float] = (0, 1),
    timeout: float | None = None,
) -> float:
    """An LLM judge's score of ``answer`` to ``instruction``, normalised to [0, 1].

    Sends :func:`build_judge_prompt` as one user message through ``litellm.completion``
    (temperature 0), parses the first ``Score: X`` of the reply and returns
    ``(X - lo) / (hi - lo)`` clipped to [0, 1], where ``scale = (lo, hi)``.

    The judge is ``model`` (a litellm model id, e.g. ``"gpt-4o-mini"`` or
    ``"openai/<name>"`` for an OpenAI-compatible server at ``api_base``); when not
    given, the environment variables ``LM_EVAL_ADAPTIVE_JUDGE_MODEL``,
    ``LM_EVAL_ADAPTIVE_JUDGE_API_BASE`` and ``LM_EVAL_ADAPTIVE_JUDGE_API_KEY`` are read
    (otherwise litellm's usual provider variables such as ``OPENAI_API_KEY`` apply;
    for an ``openai/...`` model at an ``api_base`` with no key anywhere, the
    placeholder key ``EMPTY`` is sent, as local servers expect).
    Judgements are memoised in-process per ``(model, api_base, prompt)``: the same
    judgement is never requested twice.  litellm's price map is read offline.

    Raises:
        ValueError: no judge model; bad ``scale``; a reply without a parsable
            ``Score: <number>`` (the message quotes the reply, truncated).
    """
    model = model or os.environ.get(JUDGE_MODEL_ENV) or None
    if not model:
        raise ValueError(
            f"no judge model: pass model=... or set {JUDGE_MODEL_ENV} "
            "(a litellm model id, e.g. 'gpt-4o-mini' or 'openai/<name>' with an api_base)"
        )
    api_base = api_base or os.environ.get(JUDGE_API_BASE_ENV) or None
    api_key = api_key or os.environ.get(JUDGE_API_KEY_ENV) or None
    lo, hi = check_scale(scale)
    prompt = build_judge_prompt(
        instruction, answer, reference=reference, rubric=rubric, scale=(lo, hi)
    )
    key = (model, api_base, prompt)
    with _judge_lock:
        raw = _judge_cache.get(key)
    if raw is None:
        reply = _judge_request(model, api_base, api_key, prompt, timeout)
        raw = parse_judge_score(reply)
        with _judge_lock:
            _judge_cache[key] = raw
    return min(1.0, max(0.0, (raw - lo) / (hi - lo)))

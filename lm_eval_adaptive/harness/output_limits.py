"""The worst case of a request as it is sent: the most output tokens the provider may bill for it.

The harness's API models build a request's payload from its generation kwargs (``max_tokens`` if the
kwargs carry it, else ``max_gen_toks``, else the model's default, becomes the payload's ``max_tokens`` or
``max_completion_tokens``) and send every other kwarg along as it is: a ``max_completion_tokens``, a
provider's own limit (``max_output_tokens``, ``max_new_tokens``, ...) and ``n`` (choices per request,
each billed) reach the provider unchanged. A provider may honour whichever limit it reads, so the worst
case of one request (:func:`request_output_bound`) is the largest output limit it carries, times the
number of choices it asks for; a task's ``repeats`` send the request that many times.

A request that carries no output limit at all has no worst case: it is refused before anything is sent
(:class:`~lm_eval_adaptive.errors.InputError` naming ``--gen_kwargs max_gen_toks=N``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from lm_eval_adaptive.errors import InputError

__all__ = ["OUTPUT_LIMIT_KEYS", "CHOICE_KEYS", "request_output_bound", "FLAG"]

#: Output limits a provider may read from a request (the OpenAI names, and providers' own), besides the
#: harness's ``max_gen_toks``.
OUTPUT_LIMIT_KEYS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "max_new_tokens",
                     "max_tokens_to_sample", "maxOutputTokens", "num_predict")
#: Keys that ask for several completions of one request (each billed).
CHOICE_KEYS = ("n", "best_of", "num_return_sequences")
#: What to set so that a request has a worst case.
FLAG = "--gen_kwargs max_gen_toks=N"


def _count(key: str, value, where: str) -> int | None:
    """``value`` as a whole number >= 1 (None: not carried)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 1 or value != int(value):
        if isinstance(value, str) and value.strip().isdigit() and int(value) >= 1:
            return int(value)
        raise InputError(f"{where}: {key}={value!r} is not a whole number >= 1 (set {FLAG})")
    return int(value)


def request_output_bound(gen_kwargs: Mapping | None, default_max_gen_toks, *, where: str = "--gen_kwargs") -> int:
    """The most output tokens one request with generation kwargs ``gen_kwargs`` may be billed: the largest
    output limit it carries (the payload's ``max_tokens`` as the harness sets it: ``max_tokens``, else
    ``max_gen_toks``, else ``default_max_gen_toks``; and every other limit of :data:`OUTPUT_LIMIT_KEYS`
    sent along), times the completions it asks for (``n``, ``best_of``). :class:`InputError` when a limit
    or a count is not a whole number >= 1, or when the request carries no output limit at all."""
    gk = dict(gen_kwargs or {})
    sent = gk["max_tokens"] if "max_tokens" in gk else gk.get("max_gen_toks", default_max_gen_toks)
    limits = [_count("max_tokens" if "max_tokens" in gk else "max_gen_toks", sent, where)]
    limits += [_count(k, gk.get(k), where) for k in OUTPUT_LIMIT_KEYS if k != "max_tokens"]
    honoured = [x for x in limits if x is not None]
    if not honoured:
        raise InputError(f"{where}: the request carries no output limit (max_tokens is "
                         f"{gk.get('max_tokens')!r}), so its cost has no worst case to reserve; set {FLAG}")
    if "max_gen_toks" in gk:  # sent along too when max_tokens is given
        extra = _count("max_gen_toks", gk["max_gen_toks"], where)
        if extra is not None:
            honoured.append(extra)
    choices = [_count(k, gk.get(k), where) for k in CHOICE_KEYS]
    return max(honoured) * max([1] + [c for c in choices if c is not None])

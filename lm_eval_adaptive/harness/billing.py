"""Which failed calls the provider may have billed: the classification every paid call uses.

A provider bills a request it finished, even when the client gave up on it before the answer
arrived (a read timeout) or lost the connection while reading it. Such a failure is charged
its worst case (its reservation) by ``rank``/``refresh`` (:mod:`lm_eval_adaptive.live.driver`)
and by ``run --adaptive`` (:mod:`lm_eval_adaptive.harness.attempts`). A request that never left this
machine (connection refused, connect timeout) or that the provider answered with an error
status (4xx, 429, 5xx) is not billed. An answer the provider sent with a success status that the
client could not read (cut-off JSON, an event stream nobody asked for, a usage that is no count;
:func:`answered_unreadable`) was billed: it is charged its reservation too.

The retry policy every paid call shares lives here too (:class:`RetryPolicy`, :func:`is_retryable`:
exponential backoff with full jitter, tenacity), so that ``run --adaptive`` (harness layer) retries
the way ``rank`` does; :mod:`lm_eval_adaptive.live.driver` re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

__all__ = ["may_have_been_billed", "answered_unreadable", "is_retryable", "RetryPolicy", "ModelFailed"]

#: Errors raised before a request left this machine (the provider never saw it): nothing billed.
_NOT_SENT = {"ConnectTimeout", "ConnectError", "ConnectionRefusedError", "NewConnectionError",
             "NameResolutionError", "gaierror", "ProxyError", "SSLError", "InvalidURL", "LocationParseError",
             "PoolTimeout", "ClientConnectorError"}
_NOT_SENT_TEXT = ("connection refused", "failed to establish a new connection", "name or service not known",
                  "nodename nor servname", "temporary failure in name resolution")
#: Errors raised after the request was sent and before its answer was read whole: the provider
#: may have finished the call, and bills what it finished even when the client gave up.
_MAY_BE_BILLED = {"Timeout", "TimeoutError", "APITimeoutError", "ReadTimeout", "ReadTimeoutError", "WriteTimeout",
                  "ServerTimeoutError", "timeout", "RemoteDisconnected", "ServerDisconnectedError",
                  "RemoteProtocolError", "ReadError", "ConnectionResetError", "BrokenPipeError",
                  "ConnectionAbortedError", "IncompleteRead", "ChunkedEncodingError", "ProtocolError",
                  "ClientPayloadError", "ContentLengthError"}
_MAY_BE_BILLED_TEXT = ("timed out", "connection aborted", "connection reset", "remote end closed",
                       "server disconnected", "incomplete read", "connection broken")


#: Errors raised while reading an answer the provider sent with a success status (an HTTP 200 whose body
#: the client cannot parse: cut-off JSON, an event stream nobody asked for, usage that is not a count).
#: The provider finished and billed the call.
_ANSWERED_UNREADABLE = {"JSONDecodeError", "APIResponseValidationError", "ContentTypeError"}
_ANSWERED_UNREADABLE_TEXT = ("received response - <apiresponse [200", "invalid response object",
                             "empty or invalid response from llm endpoint", "could not parse the response")
#: Errors carrying an error status the provider answered with (4xx, 429, 5xx): not billed.
_ERROR_STATUS = {"HTTPStatusError", "HTTPError", "ClientResponseError"}


def _error_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and every error it wraps (``__cause__``, ``__context__``, exceptions among its
    ``args``, a ``reason``): SDKs wrap the transport's error in their own, often several deep."""
    seen: list[BaseException] = []
    todo = [exc]
    while todo and len(seen) < 32:
        e = todo.pop(0)
        if not isinstance(e, BaseException) or any(e is s for s in seen):
            continue
        seen.append(e)
        todo += [e.__cause__, e.__context__, getattr(e, "reason", None),
                 *(a for a in getattr(e, "args", ()) if isinstance(a, BaseException))]
    return seen


def may_have_been_billed(exc: BaseException) -> bool:
    """Whether the provider may have billed the call that failed with ``exc``.

    True when the request was sent and its answer was never read whole: a read timeout, a
    connection the server dropped or reset, an incomplete read (litellm's ``Timeout``,
    ``openai.APITimeoutError``, ``requests.ReadTimeout``, ``httpx.RemoteProtocolError``,
    ``RemoteDisconnected``, ``ConnectionResetError``, ... however deep the SDK wraps them). The
    provider may have finished the call and bills what it finished even when the client gave
    up, so such an attempt is charged its worst case. False when the request never left
    (connection refused, a connect timeout, a name that does not resolve), when the provider
    answered with an error status (4xx, 429, 5xx: not billed), and for any other error (the
    caller's own). An error carrying ``paid`` and ``cause`` (the model answered, then scoring
    failed) is classified by its cause (e.g. the judge's call timed out).
    """
    cause = getattr(exc, "cause", None)
    if getattr(exc, "paid", None) is not None and isinstance(cause, BaseException):
        return may_have_been_billed(cause)
    chain = _error_chain(exc)
    names = {c.__name__ for e in chain for c in type(e).__mro__}
    texts = [str(e).lower() for e in chain]
    if names & _NOT_SENT or any(t in x for x in texts for t in _NOT_SENT_TEXT):
        return False
    if answered_unreadable(exc):
        return True
    return bool(names & _MAY_BE_BILLED) or any(t in x for x in texts for t in _MAY_BE_BILLED_TEXT)


def answered_unreadable(exc: BaseException) -> bool:
    """Whether ``exc`` says the provider answered with a success status and the client could not read
    the answer: litellm raises such a 200 as a 500 (``InternalServerError``: "Invalid response object",
    "Empty or invalid response", a ``JSONDecodeError`` or pydantic ``ValidationError`` underneath), the
    harness's own HTTP models as a ``JSONDecodeError``. The provider bills it (it finished the call); an
    error the provider answered with an error status (an ``HTTPStatusError`` underneath) is not one."""
    cause = getattr(exc, "cause", None)
    if getattr(exc, "paid", None) is not None and isinstance(cause, BaseException):
        return answered_unreadable(cause)
    chain = _error_chain(exc)
    names = {c.__name__ for e in chain for c in type(e).__mro__}
    if names & _ERROR_STATUS:
        return False
    texts = [str(e).lower() for e in chain]
    return bool(names & _ANSWERED_UNREADABLE) or any(t in x for x in texts for t in _ANSWERED_UNREADABLE_TEXT)


# ------------------------------------------------------------------ retries (rank, refresh, run --adaptive)
class ModelFailed(RuntimeError):
    """A call failed for good (retries exhausted, or an error no retry can fix)."""


_RETRY_STATUS = {408, 409, 425, 429}


def _status_of(exc: BaseException) -> int | None:
    for obj in (exc, getattr(exc, "response", None)):
        for name in ("status_code", "status", "http_status"):
            v = getattr(obj, name, None)
            if isinstance(v, int):
                return v
    return None


#: Client-side faults some SDKs report with a 5xx status (litellm raises a missing API key as
#: ``InternalServerError``, 500): no retry can fix them.
_NEVER_RETRY_TEXT = ("missing credentials", "api key not found", "no api key", "invalid api key",
                     "incorrect api key", "api_key client option must be set")


def is_retryable(exc: BaseException) -> bool:
    """429, 408/409/425, any 5xx, timeouts and connection errors: worth another attempt.

    Errors that are the caller's own (a missing or invalid API key), however they are
    reported, are not. An error carrying ``paid`` and ``cause`` (the model answered, then
    scoring failed) is retried when its cause is (a retry re-uses the answers).
    """
    if isinstance(exc, ModelFailed):  # given up already (e.g. a retry the cap refused)
        return False
    cause = getattr(exc, "cause", None)
    if getattr(exc, "paid", None) is not None and isinstance(cause, BaseException):
        return is_retryable(cause)
    text = str(exc).lower()
    if any(s in text for s in _NEVER_RETRY_TEXT):
        return False
    status = _status_of(exc)
    if status is not None:
        return status in _RETRY_STATUS or status >= 500
    names = {c.__name__ for c in type(exc).__mro__}
    if names & {"Timeout", "TimeoutError", "APITimeoutError", "ReadTimeout", "ConnectTimeout",
                "ConnectionError", "APIConnectionError", "ServerDisconnectedError", "RemoteDisconnected",
                "ChunkedEncodingError", "ProtocolError", "ServiceUnavailableError", "InternalServerError",
                "RateLimitError", "BadGatewayError", "ConnectionResetError", "IncompleteRead"}:
        return True
    return any(s in text for s in ("connection aborted", "connection reset", "remote end closed",
                                   "server disconnected", "timed out", "rate limit"))


@dataclass
class RetryPolicy:
    """Exponential backoff with full jitter (tenacity): after attempt k fails, wait
    uniform(0, min(cap, base·2^(k-1))) seconds; at most ``max_attempts`` attempts; only
    errors :func:`is_retryable` accepts are retried."""

    max_attempts: int = 6
    base_s: float = 0.5
    cap_s: float = 30.0

    def __post_init__(self):
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        if not (self.base_s >= 0 and self.cap_s >= 0):
            raise ValueError("backoff times must be >= 0")

    def wait_strategy(self):
        """The tenacity wait: full jitter over the capped exponential."""
        return wait_random_exponential(multiplier=self.base_s, max=self.cap_s)

    def retrying(self, *, sleep: Callable[[float], None], before_sleep=None) -> Retrying:
        """A tenacity ``Retrying`` that sleeps with ``sleep`` (which may raise to stop waiting)."""
        return Retrying(stop=stop_after_attempt(self.max_attempts), wait=self.wait_strategy(),
                        retry=retry_if_exception(is_retryable), sleep=sleep, before_sleep=before_sleep,
                        reraise=True)

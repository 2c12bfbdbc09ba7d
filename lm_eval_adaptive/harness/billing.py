"""Which failed calls the provider may have billed: the classification every paid call uses.

A provider bills a request it finished, even when the client gave up on it before the answer
arrived (a read timeout) or lost the connection while reading it. Such a failure is charged
its worst case (its reservation) by ``rank``/``refresh`` (:mod:`lm_eval_adaptive.live.driver`)
and by ``run --adaptive`` (:mod:`lm_eval_adaptive.harness.run`). A request that never left this
machine (connection refused, connect timeout) or that the provider answered with an error
status (4xx, 429, 5xx) is not billed.
"""

from __future__ import annotations

__all__ = ["may_have_been_billed"]

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
    return bool(names & _MAY_BE_BILLED) or any(t in x for x in texts for t in _MAY_BE_BILLED_TEXT)

"""The replay endpoint over HTTP: an OpenAI-compatible server on recorded real outputs, with
injected latency and faults, and its statistics.

The replay server lets the real lm-evaluation-harness and the real litellm client
run offline: each request names a recorded system (the ``model`` field) and its
prompt contains the text of a recorded item; the answer is that system's recorded
output for that item (:class:`~lm_eval_adaptive.replay.store.ReplayStore`, which finds
the item with :mod:`lm_eval_adaptive.replay.matching`).  Nothing is ever invented: an
unknown model, an unrecognised prompt or a missing output gives HTTP 404 with an
OpenAI-style error body.  The command ``lm-eval-adaptive replay-server`` is
:mod:`lm_eval_adaptive.cli.replay_server`.

Responses
    OpenAI shape (``id``, ``object``, ``created``, ``model``, ``choices``,
    ``usage``); token counts are estimates, ``ceil(len(text) / 4)`` characters,
    for the prompt text and the answer.  ``stop``, ``max_tokens`` and sampling
    parameters are ignored: the recorded output is returned whole.  A recorded
    empty output (a few WMT24 lines) is returned as ``""``.  ``n`` other than 1,
    ``stream: true``, ``logprobs`` / ``echo`` and token-id prompts are refused
    with 400.  A completions request may carry a list of prompts (one choice
    each, as OpenAI does).

Fault injection (:class:`ReplayServer` options)
    ``latency`` seconds (+ uniform ``[0, latency_jitter]``) are added to every
    completion call; with probability ``fail_rate`` a call fails with one of
    ``fail_kinds`` -- ``"429"`` (rate limit), ``"500"`` (server error) or
    ``"drop"`` (the connection is closed without a response) -- drawn from a
    ``random.Random(seed)`` in order of arrival, so a sequential run is
    reproducible.  Failed calls are counted under ``failed`` and never as served.

Statistics
    ``GET /stats`` returns ``requests`` (completion calls received),
    ``served`` (calls answered), ``answers`` (choices returned),
    ``per_model`` and ``per_item`` (answers by model as requested, and by
    model then item key such as ``wmt24/en-de/17``, ``alpaca_eval/5`` or
    ``judge/alpaca_eval/5``), ``shared_items`` (served item keys whose source text
    stands on several lines of a WMT24 pair: all are answered and counted as the first
    such line), ``judge``, ``not_found`` and
    ``not_found_per_model`` (404s), ``bad_request`` (400s), ``failed`` and
    ``failed_by_kind`` (injected faults).  ``POST /stats/reset`` zeroes them and
    re-seeds the fault generator.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import socket
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.replay.errors import (
    ReplayAnswer,
    ReplayBadRequest,
    ReplayError,
    ReplayNotFound,
)
from lm_eval_adaptive.replay.matching import strip_provider
from lm_eval_adaptive.replay.store import ReplayStore

__all__ = ["FAIL_KINDS", "ReplayServer", "estimate_tokens", "max_answers_per_item"]

logger = logging.getLogger(__name__)

#: Fault kinds the server can inject.
FAIL_KINDS: tuple[str, ...] = ("429", "500", "drop")


def estimate_tokens(text: str) -> int:
    """The token count reported in ``usage``: ``ceil(len(text) / 4)``."""
    return math.ceil(len(text) / 4)


# --------------------------------------------------------------------------- #
# Statistics
# --------------------------------------------------------------------------- #


class _Stats:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.requests = 0
        self.served = 0
        self.answers = 0
        self.judge = 0
        self.not_found = 0
        self.bad_request = 0
        self.failed = 0
        self.failed_by_kind: dict[str, int] = {k: 0 for k in FAIL_KINDS}
        self.per_model: dict[str, int] = {}
        self.per_item: dict[str, dict[str, int]] = {}
        self.shared_items: set[str] = set()
        self.not_found_per_model: dict[str, int] = {}

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "served": self.served,
            "answers": self.answers,
            "judge": self.judge,
            "not_found": self.not_found,
            "bad_request": self.bad_request,
            "failed": self.failed,
            "failed_by_kind": dict(self.failed_by_kind),
            "per_model": dict(self.per_model),
            "per_item": {m: dict(v) for m, v in self.per_item.items()},
            "shared_items": sorted(self.shared_items),
            "not_found_per_model": dict(self.not_found_per_model),
        }


# --------------------------------------------------------------------------- #
# The HTTP server
# --------------------------------------------------------------------------- #

_DROP = object()


def max_answers_per_item(stats: dict[str, Any]) -> int:
    """The most answers one model got for one item in ``stats`` (0 when none), leaving out
    ``shared_items``: a source text on several lines is counted once per line asked for."""
    shared = set(stats.get("shared_items", ()))
    return max((v for per in stats["per_item"].values() for k, v in per.items() if k not in shared),
               default=0)


def _prompt_of_messages(messages: Any) -> str:
    if not isinstance(messages, list) or not messages:
        raise ReplayBadRequest("'messages' must be a non-empty list of messages")
    parts = []
    for msg in messages:
        if not isinstance(msg, dict):
            raise ReplayBadRequest("each message must be an object with 'role' and 'content'")
        content = msg.get("content")
        if content is None:
            continue
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            for piece in content:
                if isinstance(piece, dict) and isinstance(piece.get("text"), str):
                    parts.append(piece["text"])
                elif isinstance(piece, str):
                    parts.append(piece)
        else:
            raise ReplayBadRequest("message 'content' must be a string or a list of parts")
    return "\n".join(parts)


def _prompts_of(body: dict[str, Any]) -> list[str]:
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return [prompt]
    if isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
        return list(prompt)
    if isinstance(prompt, list) and prompt and all(
            isinstance(p, int) or (isinstance(p, list) and all(isinstance(x, int) for x in p))
            for p in prompt):
        raise ReplayBadRequest("token-id prompts are not supported by the replay server; send "
                               "text (lm-eval: tokenized_requests=False)")
    raise ReplayBadRequest("'prompt' must be a string or a non-empty list of strings")


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128  # the default 5 makes bursts of connections wait for SYN retries
    replay: ReplayServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that gave up (its timeout ran out during injected latency) is no server error
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "lm-eval-adaptive-replay"
    timeout = 60  # seconds an idle keep-alive connection is kept
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one debug line per request is logged by _reply instead

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                size_line = self.rfile.readline()
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _route(self) -> str:
        path = urlsplit(self.path).path.rstrip("/") or "/"
        return path[3:] if path.startswith("/v1/") else path

    def do_GET(self) -> None:
        route = self._route()
        rs = self.server.replay
        if route == "/models":
            data = [{"id": n, "object": "model", "created": 0, "owned_by": "lm-eval-adaptive-replay"}
                    for n in rs.store.model_names()]
            self._send_json(200, {"object": "list", "data": data})
        elif route == "/stats":
            self._send_json(200, rs.stats())
        elif route in ("/", "/health"):
            self._send_json(200, {"status": "ok", "url": rs.url})
        else:
            self._send_json(404, ReplayNotFound(f"no such endpoint: GET {self.path}").body())
        logger.debug("GET %s", self.path)

    def do_POST(self) -> None:
        route = self._route()
        rs = self.server.replay
        try:
            raw = self._read_body()
        except (ValueError, OSError):
            self.close_connection = True
            self._send_json(400, ReplayBadRequest("cannot read the request body").body())
            return
        if route == "/stats/reset":
            rs.reset_stats()
            self._send_json(200, {"reset": True})
            return
        if route not in ("/chat/completions", "/completions"):
            self._send_json(404, ReplayNotFound(f"no such endpoint: POST {self.path}").body())
            return
        status, payload, headers = rs.handle(route.lstrip("/").replace("/", "."), raw)
        if payload is _DROP:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        self._send_json(status, payload, headers)


class ReplayServer:
    """The replay endpoint on a background thread (or in the foreground, :meth:`serve_forever`).

    Args:
        store: the recorded data (default: a new :class:`ReplayStore` on ``root``).
        root: data directory when no store is given.
        host, port: where to listen (port 0 picks a free port).
        latency: seconds added to every completion call.
        latency_jitter: plus a uniform random ``[0, latency_jitter]`` seconds.
        fail_rate: probability in [0, 1] that a completion call fails.
        fail_kinds: kinds of failure, drawn uniformly: ``"429"``, ``"500"``, ``"drop"``.
        seed: seed of the generator of failures (and jitter).
        retry_after: when set, 429/500 responses carry ``Retry-After`` and ``retry-after-ms``
            headers with this many seconds (clients back off that long).

    Raises:
        InputError: for an invalid option.
    """

    def __init__(
        self,
        store: ReplayStore | None = None,
        *,
        root: str | os.PathLike[str] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        latency: float = 0.0,
        latency_jitter: float = 0.0,
        fail_rate: float = 0.0,
        fail_kinds: Sequence[str] | str = FAIL_KINDS,
        seed: int = 0,
        retry_after: float | None = None,
    ):
        if isinstance(fail_kinds, str):
            fail_kinds = [k for k in (s.strip() for s in fail_kinds.split(",")) if k]
        kinds = tuple(str(k) for k in fail_kinds)
        bad = [k for k in kinds if k not in FAIL_KINDS]
        if bad or not kinds:
            raise InputError(f"fail kinds must be a non-empty subset of {', '.join(FAIL_KINDS)}; "
                             f"got {', '.join(kinds) or 'none'}")
        if not (isinstance(fail_rate, (int, float)) and 0.0 <= fail_rate <= 1.0):
            raise InputError(f"fail rate must be in [0, 1], got {fail_rate!r}")
        for label, value in (("latency", latency), ("latency jitter", latency_jitter)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise InputError(f"{label} must be a finite number >= 0, got {value!r}")
        if retry_after is not None and not (math.isfinite(retry_after) and retry_after >= 0):
            raise InputError(f"retry-after must be a finite number >= 0, got {retry_after!r}")
        if not (isinstance(port, int) and 0 <= port <= 65535):
            raise InputError(f"port must be in 0..65535, got {port!r}")
        self.store = store if store is not None else ReplayStore(root)
        self.host = host
        self.port = port
        self.latency = float(latency)
        self.latency_jitter = float(latency_jitter)
        self.fail_rate = float(fail_rate)
        self.fail_kinds = kinds
        self.seed = int(seed)
        self.retry_after = retry_after
        self._lock = threading.Lock()
        self._stats = _Stats()
        self._seed_rngs()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---------------------------------------------------------------- lifecycle
    def bind(self) -> _HTTPServer:
        """Open the listening socket (once; port 0 is then resolved to the port picked)."""
        if self._httpd is None:
            try:
                httpd = _HTTPServer((self.host, self.port), _Handler)
            except OSError as exc:
                raise InputError(f"cannot listen on {self.host}:{self.port}: {exc}") from exc
            httpd.replay = self
            self._httpd = httpd
            self.port = httpd.server_address[1]
        return self._httpd

    def start(self) -> ReplayServer:
        """Listen and serve on a background thread; returns self."""
        if self._thread is not None:
            return self
        httpd = self.bind()
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name=f"replay-server-{self.port}", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted (KeyboardInterrupt propagates)."""
        httpd = self.bind()
        try:
            httpd.serve_forever(poll_interval=0.2)
        finally:
            httpd.server_close()
            self._httpd = None

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        httpd, thread = self._httpd, self._thread
        self._httpd, self._thread = None, None
        if httpd is not None:
            if thread is not None:
                httpd.shutdown()
                thread.join(timeout=5)
            httpd.server_close()

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` (no ``/v1``)."""
        if self._httpd is None:
            raise RuntimeError("the replay server is not started")
        host = self.host if self.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    @property
    def url(self) -> str:
        """``http://HOST:PORT/v1``: the ``api_base`` / ``base_url`` for OpenAI clients."""
        return self.base_url + "/v1"

    # ---------------------------------------------------------------- statistics
    def _seed_rngs(self) -> None:
        self._fail_rng = random.Random(self.seed)
        self._jitter_rng = random.Random(f"{self.seed}/latency")

    def stats(self) -> dict[str, Any]:
        """The counters served at ``GET /stats``."""
        with self._lock:
            return self._stats.as_dict()

    def reset_stats(self) -> None:
        """Zero the counters and re-seed the fault generator."""
        with self._lock:
            self._stats.reset()
            self._seed_rngs()

    # ---------------------------------------------------------------- requests
    def handle(self, kind: str, raw: bytes) -> tuple[int, Any, dict[str, str]]:
        """Answer one completion call (``kind`` ``"chat.completions"`` or ``"completions"``):
        ``(status, JSON payload or the drop sentinel, headers)``."""
        t0 = time.perf_counter()
        with self._lock:
            self._stats.requests += 1
            fault = None
            if self.fail_rate > 0 and self._fail_rng.random() < self.fail_rate:
                fault = self.fail_kinds[self._fail_rng.randrange(len(self.fail_kinds))]
            delay = self.latency
            if self.latency_jitter > 0:
                delay += self._jitter_rng.uniform(0.0, self.latency_jitter)
        if delay > 0:
            time.sleep(delay)
        model = "?"
        if fault is not None:
            with self._lock:
                self._stats.failed += 1
                self._stats.failed_by_kind[fault] += 1
            logger.debug("POST /v1/%s -> injected %s", kind.replace(".", "/"), fault)
            return self._fault_response(fault)
        try:
            try:
                body = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ReplayBadRequest(f"the request body is not JSON: {exc}") from None
            if not isinstance(body, dict):
                raise ReplayBadRequest("the request body must be a JSON object")
            model = body.get("model")
            if not isinstance(model, str) or not model.strip():
                model = "?"
                raise ReplayBadRequest("'model' is required")
            model = strip_provider(model)
            if body.get("stream"):
                raise ReplayBadRequest("streaming is not supported by the replay server; "
                                       "send stream=false")
            n = body.get("n")
            if n is not None and n != 1:
                raise ReplayBadRequest(f"only n=1 is supported by the replay server, got n={n!r}")
            if body.get("echo") or body.get("logprobs") or body.get("top_logprobs"):
                raise ReplayBadRequest("logprobs/echo are not supported by the replay server "
                                       "(it replays recorded text only)")
            if kind == "chat.completions":
                prompts = [_prompt_of_messages(body.get("messages"))]
            else:
                prompts = _prompts_of(body)
            answers = [self.store.answer(model, p) for p in prompts]
        except ReplayError as err:
            with self._lock:
                if err.status == 404:
                    self._stats.not_found += 1
                    self._stats.not_found_per_model[model] = (
                        self._stats.not_found_per_model.get(model, 0) + 1)
                else:
                    self._stats.bad_request += 1
            logger.debug("POST /v1/%s model=%s -> %d %s", kind.replace(".", "/"), model,
                         err.status, err.message)
            return err.status, err.body(), {}
        with self._lock:
            s = self._stats
            s.served += 1
            s.answers += len(answers)
            for a in answers:
                s.per_model[model] = s.per_model.get(model, 0) + 1
                items = s.per_item.setdefault(model, {})
                items[a.item] = items.get(a.item, 0) + 1
                if a.shared:
                    s.shared_items.add(a.item)
                if a.source == "judge":
                    s.judge += 1
        logger.debug("POST /v1/%s model=%s -> 200 %s (%.1f ms)", kind.replace(".", "/"), model,
                     ",".join(a.item for a in answers), 1000 * (time.perf_counter() - t0))
        return 200, self._response(kind, model, prompts, answers), {}

    def _fault_response(self, fault: str) -> tuple[int, Any, dict[str, str]]:
        if fault == "drop":
            return 0, _DROP, {}
        headers: dict[str, str] = {}
        if self.retry_after is not None:
            headers["Retry-After"] = str(max(0, math.ceil(self.retry_after)))
            headers["retry-after-ms"] = str(round(self.retry_after * 1000))
        if fault == "429":
            return 429, {"error": {"message": "rate limit exceeded (injected by the replay server)",
                                   "type": "rate_limit_error", "param": None,
                                   "code": "rate_limit_exceeded"}}, headers
        return 500, {"error": {"message": "internal server error (injected by the replay server)",
                               "type": "server_error", "param": None,
                               "code": "server_error"}}, headers

    @staticmethod
    def _response(kind: str, model: str, prompts: list[str],
                  answers: list[ReplayAnswer]) -> dict[str, Any]:
        prompt_tokens = sum(estimate_tokens(p) for p in prompts)
        completion_tokens = sum(estimate_tokens(a.text) for a in answers)
        if kind == "chat.completions":
            choices = [{"index": i, "message": {"role": "assistant", "content": a.text},
                        "finish_reason": "stop", "logprobs": None}
                       for i, a in enumerate(answers)]
            obj, prefix = "chat.completion", "chatcmpl-replay-"
        else:
            choices = [{"index": i, "text": a.text, "finish_reason": "stop", "logprobs": None}
                       for i, a in enumerate(answers)]
            obj, prefix = "text_completion", "cmpl-replay-"
        return {
            "id": prefix + uuid.uuid4().hex[:24],
            "object": obj,
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": None,
            "choices": choices,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }

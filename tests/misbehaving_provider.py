"""A test helper (not product): an OpenAI-compatible chat endpoint that misbehaves the way a provider
may, and keeps the provider's bill.

Every answer it serves (HTTP 200) is billed what it really generated: the prompt's tokens
(``ceil(characters / 4)``, the replay endpoint's rule) at the input price and every generated token at
the output price (the reasoning share at the reasoning price), whatever ``usage`` it reports. What it
does, per call (``mode``; with ``rate`` < 1, a seeded share of the calls, the others answered honestly):

``honest``        a short answer (``words`` tokens), true usage
``until_limit``   writes until the largest output limit the request carries (``max_tokens``,
                  ``max_completion_tokens``, ``max_gen_toks``, ``max_new_tokens``, ``max_output_tokens``),
                  in every one of the ``n`` choices asked for
``truncated``     a 200 whose JSON body is cut in half
``event_stream``  a 200 ``text/event-stream`` body (streaming was not asked for)
``usage_abc``     usage ``"abc"``;  ``usage_huge``: usage 1e30;  ``no_usage``: no usage at all;
``zero_usage``    usage 0/0 for a non-empty answer
``http_500``      a 500 with an error body (not billed);  ``http_429``: a 429 (not billed)
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LIMIT_KEYS = ("max_tokens", "max_completion_tokens", "max_gen_toks", "max_new_tokens", "max_output_tokens")
MODES = ("honest", "until_limit", "truncated", "event_stream", "usage_abc", "usage_huge", "no_usage", "zero_usage",
         "http_500", "http_429")


def tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


class MisbehavingProvider:
    def __init__(self, mode: str = "honest", *, rate: float = 1.0, price=(1.0, 3.0), reasoning_price=None,
                 reasoning_share: float = 0.0, words: int = 8, seed: int = 0):
        assert mode in MODES, mode
        self.mode, self.rate, self.words = mode, float(rate), int(words)
        self.in_price, self.out_price = price[0] / 1e6, price[1] / 1e6
        self.reasoning_price = None if reasoning_price is None else reasoning_price / 1e6
        self.reasoning_share = float(reasoning_share)
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.requests = self.served = self.billed_calls = 0
        self.bill_usd = 0.0
        self.bodies: list[dict] = []
        self._httpd = None

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self):
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, ctype, data = provider.answer(json.loads(raw or b"{}"))
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._httpd = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    # ------------------------------------------------------------------ answers
    def _bill(self, prompt_tokens: int, completion_tokens: int, reasoning: int) -> None:
        rp = self.out_price if self.reasoning_price is None else self.reasoning_price
        self.bill_usd += (prompt_tokens * self.in_price + (completion_tokens - reasoning) * self.out_price
                          + reasoning * rp)
        self.billed_calls += 1

    def answer(self, body: dict):
        with self._lock:
            self.requests += 1
            self.bodies.append(body)
            mode = self.mode if self._rng.random() < self.rate else "honest"
            if mode in ("http_500", "http_429"):
                err = {"error": {"message": "injected", "type": "server_error", "code": mode[-3:]}}
                return int(mode[-3:]), "application/json", json.dumps(err).encode()
            prompt = "\n".join(str(m.get("content") or "") for m in body.get("messages") or [])
            p_tok = tokens(prompt)
            n = max(int(body.get("n") or 1), 1)
            if mode == "until_limit":
                limits = [int(body[k]) for k in LIMIT_KEYS if isinstance(body.get(k), (int, float))]
                per = max(limits) if limits else 100_000
            else:
                per = self.words
            text = ("word " * per)[: 4 * per].rstrip() or "w"
            per = tokens(text)
            c_tok = n * per
            reasoning = int(c_tok * self.reasoning_share)
            self.served += 1
            self._bill(p_tok, c_tok, reasoning)
        usage = {"prompt_tokens": p_tok, "completion_tokens": c_tok, "total_tokens": p_tok + c_tok}
        if reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        if mode == "usage_abc":
            usage = {"prompt_tokens": "abc", "completion_tokens": "abc", "total_tokens": "abc"}
        elif mode == "usage_huge":
            usage = {"prompt_tokens": 1e30, "completion_tokens": 1e30, "total_tokens": 2e30}
        elif mode == "zero_usage":
            usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        resp = {"id": "chatcmpl-x", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", "?"),
                "choices": [{"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
                            for i in range(n)]}
        if mode != "no_usage":
            resp["usage"] = usage
        data = json.dumps(resp).encode()
        if mode == "truncated":
            return 200, "application/json", data[: len(data) // 2]
        if mode == "event_stream":
            chunk = {**resp, "object": "chat.completion.chunk"}
            return 200, "text/event-stream", f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
        return 200, "application/json", data

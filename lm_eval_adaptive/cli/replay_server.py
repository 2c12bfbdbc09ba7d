"""``lm-eval-adaptive replay-server``: its arguments, and serving until Ctrl-C or SIGTERM.

The endpoint itself is :mod:`lm_eval_adaptive.replay.server`.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from typing import Any

from lm_eval_adaptive.replay.server import FAIL_KINDS, ReplayServer
from lm_eval_adaptive.replay.store import ReplayStore

__all__ = ["add_arguments", "serve"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``lm-eval-adaptive replay-server``."""
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default: 127.0.0.1, this machine only)")
    parser.add_argument("--port", type=int, default=8123, help="port (0 picks a free one; default 8123)")
    parser.add_argument("--data", default=None,
                        help="data directory (default: $LM_EVAL_ADAPTIVE_DATA or ../shared/data)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every call")
    parser.add_argument("--latency-jitter", type=float, default=0.0,
                        help="plus uniform random [0, this] seconds")
    parser.add_argument("--fail-rate", type=float, default=0.0,
                        help="probability in [0, 1] that a call fails (default 0)")
    parser.add_argument("--fail-kinds", default=",".join(FAIL_KINDS),
                        help="comma-separated failure kinds: 429, 500, drop (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the failure generator")
    parser.add_argument("--retry-after", type=float, default=None,
                        help="seconds to put in Retry-After headers of 429/500 responses")
    parser.add_argument("--verbose", "-v", action="store_true", help="log one line per request")


def serve(args: argparse.Namespace) -> int:
    """Run the replay server until Ctrl-C or SIGTERM (``lm-eval-adaptive replay-server``)."""
    if getattr(args, "verbose", False):
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
        logging.getLogger(ReplayServer.__module__).setLevel(logging.DEBUG)  # one line per request
    store = ReplayStore(args.data)
    server = ReplayServer(
        store,
        host=args.host,
        port=args.port,
        latency=args.latency,
        latency_jitter=getattr(args, "latency_jitter", 0.0),
        fail_rate=args.fail_rate,
        fail_kinds=args.fail_kinds,
        seed=args.seed,
        retry_after=getattr(args, "retry_after", None),
    )
    server.bind()
    n_wmt = sum(len(store.wmt_systems(p)) for p in store.wmt_pairs)
    print(f"replay server on {server.url} (data: {store.root}; {n_wmt} WMT24 systems in "
          f"{len(store.wmt_pairs)} pairs, {len(store.alpaca_models)} AlpacaEval models, "
          f"{len(store.judge_models)} with judge records); Ctrl-C to stop", flush=True)
    previous = None
    if threading.current_thread() is threading.main_thread():
        def _on_term(signum: int, frame: Any) -> None:  # SIGTERM stops like Ctrl-C
            raise KeyboardInterrupt

        previous = signal.signal(signal.SIGTERM, _on_term)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("replay server stopped", flush=True)
    finally:
        server.stop()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0

"""Wall-clock of a live ranking: do models wait on each other?

Ranks 4 WMT24 en-de systems live (the real harness, litellm and HTTP) against the replay
endpoint with LATENCY seconds added to every call, and compares the live phase's wall time
(first request to the stop record, from the journal's timestamps) with the time the busiest
model's items take called one after another at its concurrency:

    ideal = items(busiest model) × LATENCY / concurrency

Target (the live-ranking issue): wall ≤ 2 × ideal. Prints the medians over --repeats runs.

    python benchmarks/bench_live_wallclock.py [--latency 1] [--concurrency 1 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from lm_eval_adaptive.cli.main import main  # noqa: E402
from lm_eval_adaptive.replay.server import ReplayServer  # noqa: E402

SYSTEMS = ["GPT-4", "NVIDIA-NeMo", "AIST-AIRC", "TranssionMT"]
PRICES = ["--price", "NVIDIA-NeMo=1,3", "--price", "AIST-AIRC=1,3", "--price", "TranssionMT=1,3"]


def one_run(bank: Path, out: Path, concurrency: int, max_items: int) -> dict:
    specs = [f"{s}=litellm:model=openai/{s}" for s in SYSTEMS]
    t0 = time.monotonic()
    rc = main(["rank", "--models", *specs, "--tasks", "wmt24_en-de", "--bank", str(bank),
               "--include_path", str(REPO / "task_configs"), "--apply_chat_template", "--item-field", "id",
               "--budget-usd", "5", "--min-items", "5", "--max-items", str(max_items),
               "--concurrency", str(concurrency), "--output", str(out), "--no-progress", *PRICES])
    total = time.monotonic() - t0
    assert rc == 0
    recs = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
    first = min(r["ts"] for r in recs if r.get("type") == "request")
    stop = next(r["ts"] for r in recs if r.get("type") == "stop")
    report = json.loads((out / "ranking.json").read_text())
    items = {e["model"]: e["items"] for e in report["ranking"]}
    return {"live_s": stop - first, "total_s": total, "items": items, "busiest": max(items.values())}


def main_bench() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-items", type=int, default=16)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-live-"))
    bank = tmp / "bank.json"
    assert main(["calibrate", "wmt24/en-de/bleu", "--exclude-models", *SYSTEMS, "--task", "wmt24_en-de",
                 "--metric", "bleu", "--out", str(bank)]) == 0
    rows = []
    with ReplayServer(latency=a.latency) as srv:
        os.environ["OPENAI_API_BASE"] = srv.url
        os.environ["OPENAI_API_KEY"] = "replay"
        for c in a.concurrency:
            runs = [one_run(bank, tmp / f"c{c}_{k}", c, a.max_items) for k in range(a.repeats)]
            ratios = [r["live_s"] / (r["busiest"] * a.latency / c) for r in runs]
            rows.append((c, runs, ratios))
            print(f"concurrency {c}: items per model {runs[0]['items']}; "
                  f"live phase median {statistics.median(r['live_s'] for r in runs):.2f} s, "
                  f"ideal (busiest model's items × {a.latency:g} s / {c}) median "
                  f"{statistics.median(r['busiest'] * a.latency / c for r in runs):.2f} s, "
                  f"ratio median {statistics.median(ratios):.2f} (max {max(ratios):.2f}; target ≤ 2); "
                  f"whole command median {statistics.median(r['total_s'] for r in runs):.2f} s", flush=True)
    worst = max(max(r) for _, _, r in rows)
    print(f"worst ratio {worst:.2f}: {'OK' if worst <= 2 else 'ABOVE TARGET'}")
    return 0 if worst <= 2 else 1


if __name__ == "__main__":
    sys.exit(main_bench())

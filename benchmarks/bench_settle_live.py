"""Issue 32's live cases: does a live run spend its cap where a pair settles, and give every model 15 items?

Offline, through the real harness, litellm and HTTP against the replay endpoint (recorded WMT24 en-de outputs),
as a new user would run them:

* ``rank``: four systems (GPT-4, Aya23, Claude-3.5, Llama3-70B) on the shipped bank ``wmt24_en-de.bleu`` under a
  $1 cap, ``--price default=1,3`` for the systems litellm does not price;
* ``refresh``: GPT-4 and TSU-HITs placed on a 15-system leaderboard of wmt24/en-de/bleu under a $0.30 cap
  (docs/live.md's example);
* ``free``: three systems priced at nothing (``--price M=0,0``, as a local model is free) on the same bank, no cap.

Per case: spend (and the cap), the stop reason, items per model, the pairs settled (ordered or equivalent) and
the open ones with their stated cost to settle. Run it from any checkout (``PYTHONPATH`` picks the code: the
"before" figures in docs/live.md are this script with ``PYTHONPATH`` at the commit before the change)::

    python benchmarks/bench_settle_live.py [--cases rank refresh free] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from lm_eval_adaptive.cli.main import main as cli  # noqa: E402
from lm_eval_adaptive.replay.server import ReplayServer  # noqa: E402

RANK_SYSTEMS = ["GPT-4", "Aya23", "Claude-3.5", "Llama3-70B"]
FREE_SYSTEMS = ["Aya23", "Claude-3.5", "Llama3-70B"]
BOARD = ["AIST-AIRC", "Aya23", "CUNI-NL", "Claude-3.5", "CommandR-plus", "CycleL", "Dubformer", "Gemini-1.5-Pro",
         "IKUN", "IOL-Research", "Llama3-70B", "MSLC", "Mistral-Large", "NVIDIA-NeMo", "ONLINE-A"]
COMMON = ["--include_path", str(REPO / "task_configs"), "--apply_chat_template", "--no-progress"]


def specs(systems):
    return [f"{s}=litellm:model=openai/{s}" for s in systems]


def summary(report: dict, cap: float | None) -> dict:
    pairs = report.get("pairs") or []
    return {"spent_usd": report["total_cost_usd"], "cap_usd": cap, "stopped_because": report["stopped_because"],
            "items": {e["model"]: e["items"] for e in report["ranking"]},
            "settled": sum(p["outcome"] != "unresolved" for p in pairs), "pairs": len(pairs),
            "open": [{k: p.get(k) for k in ("a", "b", "items_to_settle", "cost_to_settle_usd", "beyond_policy",
                                            "settle_share_to_buy", "budget_usd_to_buy")}
                     for p in pairs if p["outcome"] == "unresolved"]}


def run_rank(tmp: Path, systems, cap: float | None, prices) -> dict:
    out = tmp / f"rank-{len(list(tmp.iterdir()))}"
    assert cli(["rank", "--models", *specs(systems), "--tasks", "wmt24_en-de", "--bank", "wmt24_en-de.bleu",
                "--item-field", "id", "--output", str(out), *COMMON, *prices,
                *([] if cap is None else ["--budget-usd", str(cap)])]) == 0
    return summary(json.loads((out / "ranking.json").read_text()), cap)


def run_refresh(tmp: Path, cap: float) -> dict:
    lb = tmp / "lb.json"
    assert cli(["leaderboard", "--history", "wmt24/en-de/bleu", "--task", "wmt24_en-de", "--metric", "bleu",
                "--item-field", "id", "--models", *BOARD, "--out", str(lb)]) == 0
    out = tmp / "refresh"
    assert cli(["refresh", "--leaderboard", str(lb), "--add", *specs(["GPT-4", "TSU-HITs"]),
                "--price", "TSU-HITs=0.5,1.5", "--budget-usd", str(cap), "--output", str(out), *COMMON]) == 0
    d = json.loads(lb.read_text())
    (r,) = d["refreshes"]
    mine = set(r["added"])
    pairs = [p for p in d.get("pairs") or [] if mine & {p.get("a"), p.get("b")}]
    return {"spent_usd": r["spent_usd"], "cap_usd": cap, "stopped_because": r.get("stopped_because"),
            "items": r["items"], "settled": sum(p.get("outcome") != "unresolved" for p in pairs), "pairs": len(pairs),
            "open": [{k: p.get(k) for k in ("a", "b", "items_to_settle", "cost_to_settle_usd", "beyond_policy")}
                     for p in pairs if p.get("outcome") == "unresolved"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=["rank", "refresh", "free"], choices=["rank", "refresh", "free"])
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-settle-live-") as tmp, ReplayServer() as srv:
        os.environ["OPENAI_API_BASE"] = srv.url
        os.environ["OPENAI_API_KEY"] = "replay"
        for case in a.cases:
            sub = Path(tmp) / case
            sub.mkdir()
            if case == "rank":
                results[case] = run_rank(sub, RANK_SYSTEMS, 1.0, ["--price", "default=1,3"])
            elif case == "refresh":
                results[case] = run_refresh(sub, 0.3)
            else:
                results[case] = run_rank(sub, FREE_SYSTEMS, None, [x for s in FREE_SYSTEMS for x in
                                                                   ("--price", f"{s}=0,0")])
    for case, r in results.items():
        cap = "no cap" if r.get("cap_usd") is None else \
            f"cap ${r['cap_usd']:g}, ${r['cap_usd'] - r['spent_usd']:.4f} left"
        print(f"== {case}: spent ${r['spent_usd']:.4f} ({cap}); stopped: {r['stopped_because']}; "
              f"items per model: {', '.join(f'{m} {n}' for m, n in r['items'].items())}")
        if "pairs" in r:
            print(f"   pairs settled: {r['settled']} of {r['pairs']}")
        for p in r["open"]:
            print(f"   open: {p}")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

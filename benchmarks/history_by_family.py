"""The history curve by table family: where a bank helps the ranker and where it does not (issues 31 and 32).

Reads ``bench_cold_start.py --json`` files (the history curve: each table ranked with no bank, N = 0, and with banks
from N of the other models) and prints, per family of tables (WMT25; WMT24 with AlpacaEval) and per language pair,
the τ at each N minus the τ with no bank, and the items ratio. The 95% interval resamples whole language pairs (the 5
metrics of a pair share their systems and documents, so their tables are not independent), 10,000 times.

    python benchmarks/history_by_family.py docs/results/stop32_curve10_tuning.json docs/results/stop32_curve10_report.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def family(table: str) -> str:
    return "WMT25" if table.startswith("wmt25/") else "WMT24 + AlpacaEval"


def cluster(table: str) -> str:
    return "/".join(table.split("/")[:2])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("curves", nargs="+", type=Path)
    ap.add_argument("--resamples", type=int, default=10_000)
    a = ap.parse_args(argv)
    tables = [t for p in a.curves for t in json.loads(p.read_text())["tables"]]
    levels = [n for n in tables[0]["curve"] if n != "0"]
    rng = np.random.default_rng(0)
    for fam in ("WMT25", "WMT24 + AlpacaEval"):
        mine = [t for t in tables if family(t["table"]) == fam]
        pairs = sorted({cluster(t["table"]) for t in mine})
        print(f"{fam}: {len(mine)} tables, {len(pairs)} language pairs (or tasks)")
        for n in levels:
            gain = {p: [t["curve"][n]["tau"] - t["curve"]["0"]["tau"] for t in mine if cluster(t["table"]) == p]
                    for p in pairs}
            ratio = np.mean([t["curve"][n]["items"] / t["curve"]["0"]["items"] for t in mine])
            flat = [g for p in pairs for g in gain[p]]
            boot = [np.mean([g for i in rng.integers(0, len(pairs), len(pairs)) for g in gain[pairs[i]]])
                    for _ in range(a.resamples)]
            lo, hi = np.percentile(boot, [2.5, 97.5])
            print(f"  N = {n:>3s}: tau - tau(no bank) {np.mean(flat):+.3f} [{lo:+.3f}, {hi:+.3f}], items x{ratio:.3f}; "
                  + ", ".join(f"{p} {np.mean(gain[p]):+.3f}" for p in pairs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

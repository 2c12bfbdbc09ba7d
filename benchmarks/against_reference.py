"""Our saved backtests against the reference code's saved run on the same hold-out sets (issue 32, must-show 3).

Reads the per-table τ and items of one or more ``bench_honesty.py --json`` files (ours) and of a
``bench_reference.py --json`` file (the paper's reference code on the same folds; ``docs/results/stop30_reference.json``
by default, 1 seed) and prints, per group of tables (tuning half, report half, REALSumm) and over every table both
cover: our τ, the reference's, the difference, items per 4-model set of each and their ratio, and the tables where
ours is at or above the reference. No backtest is run.

    python benchmarks/against_reference.py OURS.json [OURS.json ...] [--reference docs/results/stop30_reference.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

REPORT_PAIRS = ("cs-de", "en-ar", "en-et", "en-it")


def table_key(name: str) -> str:
    """A table as the reference run names it: REALSumm files as ``realsumm/<metric>``."""
    if name.endswith(".csv.gz"):
        return "realsumm/" + Path(name).name[:-len(".csv.gz")].split(".")[-1]
    return name


def group_of(key: str) -> str:
    if key.startswith("realsumm/"):
        return "REALSumm"
    return "report half" if any(f"/{p}/" in key for p in REPORT_PAIRS) else "tuning half"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ours", nargs="+", type=Path, help="bench_honesty.py --json files")
    ap.add_argument("--reference", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "results" /
                    "stop30_reference.json")
    a = ap.parse_args(argv)
    ref = {r["table"]: r for r in json.loads(a.reference.read_text())["tables"]}
    ours = {}
    for path in a.ours:
        for part, body in json.loads(path.read_text()).items():
            if part != "settings":
                ours.update({table_key(r["table"]): r for r in body["tables"]})
    groups: dict[str, list] = {}
    for key, r in ref.items():
        if key in ours:
            o = ours[key]
            groups.setdefault(group_of(key), []).append((o["adaptive_tau"], r["ref_tau"], o["items"], r["ref_items"]))
    rows = [(g, v) for g, v in groups.items()] + [("every table", [x for v in groups.values() for x in v])]
    print(f"{'tables':14s} {'n':>3s} {'ours tau':>9s} {'ref tau':>8s} {'diff':>7s} {'items ours / ref':>17s} "
          f"{'ratio':>6s} {'ours >= ref':>11s}")
    for g, v in rows:
        x = np.array(v)
        print(f"{g:14s} {len(v):3d} {x[:, 0].mean():9.3f} {x[:, 1].mean():8.3f} {x[:, 0].mean() - x[:, 1].mean():+7.3f} "
              f"{x[:, 2].mean():8.1f} / {x[:, 3].mean():6.1f} {x[:, 2].mean() / x[:, 3].mean():5.3f}x "
              f"{int((x[:, 0] >= x[:, 1] - 1e-9).sum()):6d} of {len(v)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Before → after per table of two ``bench_honesty.py --json`` outputs (e.g. ``--design individual`` against
``--design paired``): τ, shared_random τ, their difference, fixed-length CAT τ, items, confident-pair accuracy
and coverage, and how many tables have adaptive τ ≥ fixed-length CAT τ.

    python benchmarks/compare_honesty.py tuning=before.json:after.json report=before.json:after.json
    (a run with --tables has its half named ``custom``)
"""

from __future__ import annotations

import json
import sys


def _f(x) -> str:
    return "  nan" if x is None or x != x else f"{x:5.3f}"


def compare(half: str, before: dict, after: dict) -> list[str]:
    out = [f"{half} half: before -> after",
           f"{'table':30} {'tau':>12} {'shared tau':>12} {'tau - shared':>15} {'fixed tau':>12} {'items':>15} "
           f"{'conf acc':>12} {'coverage':>12}"]
    rows = list(zip(before["tables"], after["tables"])) + [(before["pooled"], after["pooled"])]
    for rb, ra in rows:
        name = rb["table"].rsplit("/realsumm/", 1)[-1].replace(".csv.gz", "")
        out.append(f"{name:30} {_f(rb['adaptive_tau'])}->{_f(ra['adaptive_tau'])} "
                   f"{_f(rb['shared_random_tau'])}->{_f(ra['shared_random_tau'])} "
                   f"{rb['adaptive_tau'] - rb['shared_random_tau']:+6.3f}->{ra['adaptive_tau'] - ra['shared_random_tau']:+6.3f} "
                   f"{_f(rb['fixed_tau'])}->{_f(ra['fixed_tau'])} {rb['items']:6.1f}->{ra['items']:6.1f} "
                   f"{_f(rb['confident_accuracy'])}->{_f(ra['confident_accuracy'])} "
                   f"{_f(rb['metric_full_task_coverage'])}->{_f(ra['metric_full_task_coverage'])}")
    n = len(before["tables"])
    wins = [sum(r["adaptive_tau"] >= r["fixed_tau"] for r in h["tables"]) for h in (before, after)]
    out.append(f"adaptive tau >= fixed-length CAT tau: {wins[0]}/{n} -> {wins[1]}/{n} tables")
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    for arg in argv:
        half, _, files = arg.partition("=")
        b, _, a = files.partition(":")
        before, after = json.load(open(b)), json.load(open(a))
        key = half if half in before else "custom"
        print("\n".join(compare(half, before[key], after[key])) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

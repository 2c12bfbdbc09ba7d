"""Family-wise vs per-pair control of a ranking on the dev tables (docs/honesty.md, "Family-wise").

Runs ``bench_honesty.py`` on one half (default: the REPORT half, 5 seeds) with the per-pair rule
and with ``--family-wise``, at the backtest's hold-out size (4 models), with 8 models per
hold-out set, and with a larger budget (60 items per model at the mean item cost, where runs
end by settling more often than by the budget); then writes the pooled and per-table figures
of both rules side by side: the share of runs with any wrongly ordered confident pair, items
per hold-out set, confident pairs, Kendall τ, tie recall / precision.

    python benchmarks/bench_family_wise.py [--half report] [--seeds 5] [--work DIR] [--reuse]
        [--out docs/results/family_wise]

``--reuse`` assembles the per-setting JSON files already in ``--work`` (each written by the
``bench_honesty.py`` command printed for it) instead of running them again.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SETTINGS = {  # name: extra bench_honesty.py arguments
    "4 models per set": [],
    "8 models per set": ["--holdout-size", "8"],
    "4 models, budget 60 items/model": ["--target-items", "60"],
}
KEYS = ("any_wrong_share", "runs", "items", "confident_pairs", "confident_accuracy", "adaptive_tau",
        "tie_recall", "tie_precision", "full_task_coverage", "share_abs_z_over_1_96")


def _file(work: Path, name: str, rule: str) -> Path:
    tag = {"4 models per set": "h4", "8 models per set": "h8", "4 models, budget 60 items/model": "t60"}[name]
    return work / f"{tag}_{rule}.json"


def command(half: str, seeds: int, extra: list, rule: str, out: Path) -> list:
    return ([sys.executable, str(HERE / "bench_honesty.py"), "--half", half, "--seeds", str(seeds)] + extra
            + (["--family-wise"] if rule == "family_wise" else []) + ["--json", str(out)])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--half", choices=("tuning", "report"), default="report")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--work", default="family_wise_runs")
    ap.add_argument("--reuse", action="store_true")
    ap.add_argument("--out", default=str(HERE.parent / "docs" / "results" / "family_wise"))
    a = ap.parse_args(argv)
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    result = {"half": a.half, "seeds": a.seeds, "gamma": 0.95, "settings": {}}
    lines = [f"Family-wise (Holm over every pair) vs per-pair rule, {a.half} half, {a.seeds} seeds, γ = 0.95",
             ("any wrong: share of backtest runs with at least one confident pair in the wrong order "
              "(family-wise target: <= 0.05)"), ""]
    for name, extra in SETTINGS.items():
        block = {}
        for rule in ("per_pair", "family_wise"):
            path = _file(work, name, rule)
            cmd = command(a.half, a.seeds, extra, rule, path)
            block[f"{rule}_command"] = " ".join(["python", "benchmarks/bench_honesty.py"] + cmd[2:-2] + ["--json", path.name])
            if not a.reuse:
                subprocess.run(cmd, check=True)
            block[rule] = json.loads(path.read_text())[a.half]
        result["settings"][name] = block
        pp, fw = block["per_pair"]["pooled"], block["family_wise"]["pooled"]
        extra_items = fw["items"] - pp["items"]
        block["extra_items_per_set"] = extra_items
        block["extra_items_pct"] = 100 * extra_items / pp["items"]
        lines.append(f"{name}: pooled over {len(block['per_pair']['tables'])} tables")
        lines.append(f"  {'':<22}{'per pair':>12}{'family-wise':>14}")
        for k in KEYS:
            lines.append(f"  {k:<22}{pp[k]:>12.4g}{fw[k]:>14.4g}")
        lines.append(f"  extra items per set: {extra_items:+.2f} ({block['extra_items_pct']:+.1f}%)")
        worst = max(block["family_wise"]["tables"], key=lambda r: r["any_wrong_share"])
        worst_pp = max(block["per_pair"]["tables"], key=lambda r: r["any_wrong_share"])
        lines.append(f"  highest any-wrong share of a table: per pair {worst_pp['any_wrong_share']:.3f} "
                     f"({worst_pp['table']}), family-wise {worst['any_wrong_share']:.3f} ({worst['table']})")
        lines.append(f"  commands: {block['per_pair_command']}")
        lines.append(f"            {block['family_wise_command']}")
        lines.append("")
        lines.append(f"  per table ({name}): any wrong per pair / family-wise, items per pair / family-wise")
        for r_pp, r_fw in zip(block["per_pair"]["tables"], block["family_wise"]["tables"]):
            lines.append(f"    {r_pp['table']:<26}{r_pp['any_wrong_share']:>7.3f}{r_fw['any_wrong_share']:>7.3f}"
                         f"{r_pp['items']:>9.1f}{r_fw['items']:>9.1f}")
        lines.append("")
    out = Path(a.out)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    out.with_suffix(".txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Should ``rank``'s default with a bank be the anytime-valid ranker? The live cost of a ranking's decisions.

Stop 35, rule 1 (docs/results/stop35_rules.txt): two live cases through the real harness, the real litellm client
and the replay endpoint (``bench_near_tie.py``: default settings, a cap of 1.5 × a full run), each ranked with the
banked default and with ``--anytime``, rank seeds 0, 1, 2:

* ``benchmarks/near_tie_case.json``: GPT-4, Claude-3.5, Llama3-70B, NVIDIA-NeMo on WMT24 en-de BLEU (a near tie);
* ``benchmarks/separated_case.json``: GPT-4, Mistral-Large, Llama3-70B, Phi-3-Medium on WMT24 en-es BLEU (none).

Prints, per case and mode, each seed's spend (share of a full run) and pairs ordered (and how many of them right),
then the medians and criterion (e): the switch needs, on both cases, the anytime design's median spend at most
1.25 × the banked default's and its median count of pairs ordered right at least the banked default's, with no
wrong ordered pair in either mode.

    python benchmarks/bench_default_switch.py [--seeds 0 1 2] [--out DIR]

``--out``: keep each run's ``bench_near_tie.py --json`` file there (``CASE_MODE.json``); an existing file is read,
not run again. About 1 minute per case, mode and seed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES = {"near_tie": REPO / "benchmarks" / "near_tie_case.json",
         "separated": REPO / "benchmarks" / "separated_case.json"}
MODES = ("banked", "anytime")
#: Criterion (e): the anytime design's median spend may be at most this multiple of the banked default's.
SPEND_RATIO = 1.25


def runs_of(case: str, mode: str, seeds: list[int], out: Path) -> list[dict]:
    """The ``bench_near_tie.py`` runs of ``case`` in ``mode`` (read from ``out`` when already there)."""
    path = out / f"{case}_{mode}.json"
    if not path.is_file():
        cmd = [sys.executable, str(REPO / "benchmarks" / "bench_near_tie.py"), "--case", str(CASES[case]),
               "--json", str(path), "--seed", *map(str, seeds)] + (["--anytime"] if mode == "anytime" else [])
        done = subprocess.run(cmd, capture_output=True, text=True)  # the runs' own report and notes: in the JSON
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    data = json.loads(path.read_text())
    return data["runs"] if "runs" in data else [data]


def decisions(run: dict) -> tuple[int, int]:
    """(pairs ordered, of them right) in one run."""
    conf = run["verdict"]["confident_pairs"]
    return len(conf), sum(bool(c["right"]) for c in conf)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--out", default=None, help="keep (and reuse) each run's JSON here")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-default-switch-") as tmp:
        out = Path(a.out) if a.out else Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        medians, passes = {}, []
        for case in CASES:
            for mode in MODES:
                runs = runs_of(case, mode, a.seeds, out)
                shares = [r["verdict"]["spend_share"] for r in runs]
                dec = [decisions(r) for r in runs]
                wrong = sum(n - ok for n, ok in dec)
                medians[case, mode] = (statistics.median(shares), statistics.median(ok for _, ok in dec), wrong)
                seeds = "; ".join(f"seed {r['seed']}: {100 * s:.1f}%, {n} ordered ({ok} right)"
                                  for r, s, (n, ok) in zip(runs, shares, dec))
                print(f"{case:10s} {mode:8s} {seeds}")
            (sb, db, wb), (sa, da, wa) = medians[case, "banked"], medians[case, "anytime"]
            ok = sa <= SPEND_RATIO * sb and da >= db and wa == 0 and wb == 0
            passes.append(ok)
            print(f"{case:10s} medians: banked {100 * sb:.1f}% and {db:g} pairs right; anytime {100 * sa:.1f}% "
                  f"({sa / sb:.2f}x) and {da:g} right; wrong ordered pairs {wb} / {wa}: "
                  f"{'PASS' if ok else 'FAIL'}")
        print(f"criterion (e), switch rank's default with a bank to --anytime: {'PASS' if all(passes) else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

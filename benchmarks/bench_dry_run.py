"""Wall time of the dry runs of issue 30 item 7, as a user types them (the console script, a fresh process
each): ``rank --dry-run`` of the newcomer path's four models and README's ``run --adaptive --dry-run``.
Prints the median of ``--repeats`` runs of each (no call is made; the shipped BLEU bank, real task).

usage: python benchmarks/bench_dry_run.py [--repeats N]   (needs LM_EVAL_ADAPTIVE_DATA or ../shared/data)
Compare two checkouts by PYTHONPATH (before → after).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TASKS = str(REPO / "task_configs")
FOUR = ["Gemini-1.5-Pro", "Llama3-70B", "Aya23", "Unbabel-Tower70B"]
COMMANDS = {
    "rank --dry-run (4 models, $0.05)": [
        "rank", "--models", *(f"litellm:model=openai/{m}" for m in FOUR), "--tasks", "wmt24_en-de",
        "--include_path", TASKS, "--apply_chat_template", "--bank", "wmt24_en-de.bleu", "--budget-usd", "0.05",
        "--no-progress", "--price", "default=1,3", "--dry-run"],
    "run --adaptive --dry-run (README)": [
        "run", "--model", "litellm", "--model_args", "model=openai/Mistral-Large", "--tasks", "wmt24_en-de",
        "--include_path", TASKS, "--apply_chat_template", "--adaptive", "--bank", "wmt24_en-de.bleu", "--dry-run"],
}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    for name, argv in COMMANDS.items():
        times = []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as d:
                t = time.perf_counter()
                r = subprocess.run([sys.executable, "-m", "lm_eval_adaptive.cli", *argv], cwd=d, env=env,
                                   capture_output=True, text=True, timeout=600)
                times.append(time.perf_counter() - t)
            if r.returncode != 0:
                sys.exit(f"{name}: exit {r.returncode}\n{r.stderr[-2000:]}")
        print(f"{name}: median {statistics.median(times):.1f} s of {len(times)} ({', '.join(f'{x:.1f}' for x in times)}); "
              f"stdout {len(r.stdout.splitlines())} lines")


if __name__ == "__main__":
    main()

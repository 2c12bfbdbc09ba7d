"""What does `run --adaptive` cost in wall time beyond the documents it generates?

Against the replay endpoint (recorded WMT24 outputs, no network): a plain harness run of N documents
(`run --limit N`) and an adaptive run of N items on the shipped bank `wmt24_en-de.bleu`
(`--min-items N --max-items N`), each `--repeats` times, medians printed. The adaptive run evaluates
its documents in batches through the harness's own `simple_evaluate`; `--with-env-info` restores the
harness's environment report on every batch (torch's collect_env: a dozen subprocesses, about 0.6 s a
call), as it was before the adaptive loop skipped it, to show the difference.

    python benchmarks/bench_run_adaptive_overhead.py [--items 30] [--repeats 3] [--with-env-info]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lm_eval_adaptive.cli.main import main as cli  # noqa: E402
from lm_eval_adaptive.harness import lm_eval_compat  # noqa: E402
from lm_eval_adaptive.replay.server import ReplayServer  # noqa: E402

SYSTEM = "Mistral-Large"


def run(argv) -> float:
    t = time.perf_counter()
    rc = cli(argv)
    if rc != 0:
        raise SystemExit(f"{argv[:2]} exited {rc}")
    return time.perf_counter() - t


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--items", type=int, default=30)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--with-env-info", action="store_true",
                   help="collect the harness's environment report on every batch (the behaviour before)")
    a = p.parse_args(argv)
    if a.with_env_info:
        lm_eval_compat.without_env_info = contextlib.nullcontext
    os.chdir(REPO)
    base = ["run", "--model", "litellm", "--model_args", f"model=openai/{SYSTEM},num_concurrent=8",
            "--tasks", "wmt24_en-de", "--include_path", "task_configs", "--apply_chat_template"]
    full, adaptive = [], []
    with ReplayServer() as srv, tempfile.TemporaryDirectory() as tmp:
        os.environ["OPENAI_API_BASE"], os.environ["OPENAI_API_KEY"] = srv.url, "replay"
        run(base + ["--limit", "2", "--output_path", f"{tmp}/warm"])  # imports and the dataset, once
        for k in range(a.repeats):
            full.append(run(base + ["--limit", str(a.items), "--output_path", f"{tmp}/full{k}"]))
            adaptive.append(run(base + ["--output_path", f"{tmp}/ad{k}", "--adaptive", "--bank", "wmt24_en-de.bleu",
                                        "--price", "default=1,3", "--min-items", str(a.items),
                                        "--max-items", str(a.items), "--no-progress"]))
    f, d = statistics.median(full), statistics.median(adaptive)
    print(f"{a.items} documents, median of {a.repeats}"
          f"{' (environment report on every batch)' if a.with_env_info else ''}:")
    print(f"  run --limit {a.items}:        {f:6.2f} s")
    print(f"  run --adaptive, {a.items} items: {d:6.2f} s  ({d / a.items:.3f} s per item)")
    print(f"  adaptive / plain: {d / f:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Scale benchmark: calibration of leaderboard-sized tables simulated with known parameters.

Usage (from the repository root)::

    python benchmarks/bench_scale.py                                  # 1,000 x 10,000 (x3) and 5,000 x 30,000 (x1)
    python benchmarks/bench_scale.py --sizes 1000x10000 --repeats 3 --missing 0.3 --noise beta
    python benchmarks/bench_scale.py --sizes 1000x10000 --long        # the same through a long-format ResponseTable

Each size: abilities θ ~ N(0, 1) (centred), difficulties b ~ N(0, 1.5), scores
y ~ N(μ, k·μ(1-μ)) with μ = logistic(θ - b), clipped to [0, 1] (``--noise normal``, the model of
METHOD.md §1 with scores kept in the range real scores live in), or y ~ Beta with the same mean
and variance (``--noise beta``, no clipping: the model's moments exactly); ``--missing p`` blanks
each cell with probability p. The table is built block by block straight into a float32
:class:`~lm_eval_adaptive.data.response_matrix.ResponseMatrix` (``--long``: a long-format
ResponseTable, the only form the calibration took before). Then ``calibrate(table,
scaling=...)`` (default method: joint). Printed per size:

- table build time (simulation + constructing the table object), calibration wall time;
- peak resident memory of the process while calibrating (table included; Linux VmHWM, reset
  before the call), and the table's own size;
- recovery: correlation and RMSE of b and θ against the truth (both on the calibration's scale,
  mean ability 0, no fitted alignment), k against the truth.

Repeated figures are medians (``--repeats``); each repeat simulates afresh with its own seed.
The machine is shared: the 1-minute load average (``os.getloadavg``) is printed with every timing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from lm_eval_adaptive.data.responses import ResponseTable  # noqa: E402
from lm_eval_adaptive.engine.irt.calibration import calibrate  # noqa: E402
from lm_eval_adaptive.engine.irt.response_model import ContinuousResponseModel  # noqa: E402
from lm_eval_adaptive.engine.evaluation.simulation import draw_scores  # noqa: E402

BLOCK_CELLS = 1 << 22


def reset_peak_rss() -> None:
    """Reset the kernel's peak-RSS mark of this process (Linux; no-op elsewhere)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_rss_bytes() -> int:
    """Peak resident memory since the last reset (VmHWM), else since the start (ru_maxrss)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def simulate(M: int, N: int, *, k: float, noise: str, missing: float, seed: int):
    """(scores float32 (M, N) with NaN for missing cells, θ, b)."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0.0, 1.0, M)
    theta -= theta.mean()
    b = rng.normal(0.0, 1.5, N)
    scores = np.empty((M, N), dtype=np.float32)
    model = ContinuousResponseModel(k=k)
    step = max(1, BLOCK_CELLS // N)
    for start in range(0, M, step):
        rows = slice(start, min(M, start + step))
        y = draw_scores(model, theta[rows, None], b[None, :], rng, distribution=noise)
        if missing > 0:
            y[rng.random(y.shape) < missing] = np.nan
        scores[rows] = y
    return scores, theta, b


def build_table(scores: np.ndarray, long: bool):
    M, N = scores.shape
    models = [f"m{j}" for j in range(M)]
    items = [f"i{i}" for i in range(N)]
    if not long:
        from lm_eval_adaptive.data.response_matrix import ResponseMatrix

        return ResponseMatrix(models=models, items=items, scores=scores, source="simulated")
    mi, ii = np.nonzero(~np.isnan(scores))
    return ResponseTable(models=np.array(models, dtype=object), items=np.array(items, dtype=object),
                         model_idx=mi, item_idx=ii, score=scores[mi, ii].astype(np.float64),
                         input_tokens=None, output_tokens=None, source="simulated")


def table_bytes(table) -> int:
    names = ("scores",) if hasattr(table, "scores") else (
        "model_idx", "item_idx", "score", "input_tokens", "output_tokens")
    return sum(getattr(table, n).nbytes for n in names)


def recovery(bank, theta: np.ndarray, b: np.ndarray, k: float) -> dict:
    idx = np.array([int(s[1:]) for s in bank.item_ids])
    b_hat, b_true = np.asarray(bank.b), b[idx]
    abil = bank.diagnostics["abilities"]
    th_hat = np.array([abil[f"m{j}"] for j in range(theta.size)])
    return {
        "items_kept": int(idx.size),
        "b_corr": float(np.corrcoef(b_hat, b_true)[0, 1]),
        "b_rmse": float(np.sqrt(np.mean((b_hat - b_true) ** 2))),
        "theta_corr": float(np.corrcoef(th_hat, theta)[0, 1]),
        "theta_rmse": float(np.sqrt(np.mean((th_hat - theta) ** 2))),
        "k_hat": float(bank.model.k),
        "k_true": k,
    }


def run_size(M: int, N: int, args, seed: int) -> dict:
    t0 = time.perf_counter()
    scores, theta, b = simulate(M, N, k=args.k, noise=args.noise, missing=args.missing, seed=seed)
    t_sim = time.perf_counter() - t0
    t0 = time.perf_counter()
    table = build_table(scores, args.long)
    t_table = time.perf_counter() - t0
    if args.long:
        del scores
    load_before = os.getloadavg()[0]
    reset_peak_rss()
    t0 = time.perf_counter()
    bank = calibrate(table, scaling=args.scaling, method=args.method)
    t_cal = time.perf_counter() - t0
    peak = peak_rss_bytes()
    out = {"models": M, "items": N, "cells": M * N, "observations": int(table.n_obs), "seed": seed,
           "simulate_s": t_sim, "table_s": t_table, "calibrate_s": t_cal,
           "peak_rss_gib": peak / 2 ** 30, "table_gib": table_bytes(table) / 2 ** 30,
           "load_1min_before": load_before, "load_1min_after": os.getloadavg()[0],
           **recovery(bank, theta, b, args.k)}
    if "conformance_sample" in bank.diagnostics:
        out["conformance_sample"] = bank.diagnostics["conformance_sample"]
    out["conformance_r2"] = bank.diagnostics["conformance_r2"]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000x10000,5000x30000", help="MODELSxITEMS, comma-separated")
    ap.add_argument("--repeats", default="3,1", help="repeats per size (one number, or one per size)")
    ap.add_argument("--k", type=float, default=0.1)
    ap.add_argument("--noise", choices=("normal", "beta"), default="normal")
    ap.add_argument("--missing", type=float, default=0.0)
    ap.add_argument("--scaling", choices=("global", "per_item"), default="global")
    ap.add_argument("--method", choices=("joint", "moments"), default="joint")
    ap.add_argument("--long", action="store_true", help="build a long-format ResponseTable instead")
    ap.add_argument("--json", type=Path, help="write every run's figures here")
    args = ap.parse_args(argv)
    sizes = [tuple(int(x) for x in s.lower().split("x")) for s in args.sizes.split(",")]
    reps = [int(r) for r in args.repeats.split(",")]
    reps = (reps * len(sizes))[:len(sizes)] if len(reps) == 1 else reps
    print(f"# {platform.node()} {os.cpu_count()} CPUs, numpy {np.__version__}; noise={args.noise} "
          f"k={args.k} missing={args.missing} scaling={args.scaling} method={args.method} "
          f"table={'long ResponseTable' if args.long else 'float32 ResponseMatrix'}")
    keys = ("simulate_s", "table_s", "calibrate_s", "peak_rss_gib", "table_gib", "b_corr", "b_rmse",
            "theta_corr", "theta_rmse", "k_hat", "conformance_r2")
    runs = []
    for (M, N), n_rep in zip(sizes, reps):
        mine = []
        for r in range(n_rep):
            res = run_size(M, N, args, seed=r)
            mine.append(res)
            print(f"{M}x{N} seed {r}: " + ", ".join(
                f"{key} {res[key]:.4g}" for key in keys + ("load_1min_before", "load_1min_after")), flush=True)
        med = {key: statistics.median(x[key] for x in mine) for key in keys}
        print(f"MEDIAN {M} models x {N} items ({n_rep} run{'s' if n_rep > 1 else ''}, "
              f"{mine[0]['observations']:,} observations): build {med['simulate_s']:.1f} s simulate + "
              f"{med['table_s']:.2f} s table; calibrate {med['calibrate_s']:.1f} s; peak RSS "
              f"{med['peak_rss_gib']:.2f} GiB (table {med['table_gib']:.2f} GiB); b corr "
              f"{med['b_corr']:.4f} RMSE {med['b_rmse']:.4f}; theta corr {med['theta_corr']:.4f} RMSE "
              f"{med['theta_rmse']:.4f}; k {med['k_hat']:.4f} (true {args.k})", flush=True)
        runs.extend(mine)
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "runs": runs},
                                        indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

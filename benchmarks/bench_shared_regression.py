"""What a bank can add once every model answers the same random documents (issue 32's ``shared_random``).

For each hold-out set of 4 models (the backtest's partition) and each seed, the 4 models answer the same n
documents drawn at random (only documents every model of the table scored). Each model's full-task mean is then
estimated two ways, and the 4 are ranked by it:

- ``mean``: the mean over the n shared documents (``shared_random``'s estimator);
- ``reg k``: the regression (GREG / difference) estimator on a history basis of rank k: the model's scores on the
  n documents regressed (ridge ``--ridge`` on the slopes) on the documents' mean score over the calibration models
  and, for k > 0, their first k principal components (the SVD of the calibration models' centred scores); the
  estimate is the mean prediction over every document plus the mean residual over the n drawn. Design-unbiased
  up to the fit's own O(1/n) term, whatever the basis.

The basis is calibrated on the fold's other models (the bank a user would have) or, with ``--oracle``, on every
model of the table, the four ranked included: an in-sample bound, never a product figure. Printed per table and
pooled: mean Kendall τ against the full-data ranking, and the mean squared error of a model's mean and of a pair's
difference, each as a ratio to ``mean``'s (below 1: the basis removes that share of the error).

    python benchmarks/bench_shared_regression.py [--half tuning|report|realsumm|all] [--items 20] [--seeds 10]
        [--ranks 0,1,2,4] [--ridge 1.0] [--oracle] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from itertools import combinations
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from bench_honesty import REPORT, TUNING  # noqa: E402
from lm_eval_adaptive.data.data_root import data_root  # noqa: E402
from lm_eval_adaptive.data.tables import load_any_table, table_stem  # noqa: E402
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig  # noqa: E402
from lm_eval_adaptive.engine.evaluation.backtest_figures import holdout_sets, kendall_tau  # noqa: E402


def realsumm_tables() -> list[str]:
    return [str(data_root() / "realsumm" / f"realsumm.{m}.csv.gz") for m in ("rouge1", "rouge2", "rougeL")]


def history_basis(calib: np.ndarray, rank: int) -> np.ndarray:
    """Documents × (1 + rank): the calibration models' mean score per document, then the first ``rank``
    principal directions of their centred scores (scaled by their singular values)."""
    mu = calib.mean(axis=0)
    if rank == 0:
        return mu[:, None]
    resid = calib - mu
    resid = resid - resid.mean(axis=1, keepdims=True)
    _, s, vt = np.linalg.svd(resid, full_matrices=False)
    k = min(rank, len(s))
    return np.column_stack([mu, vt[:k].T * s[:k] / np.sqrt(len(calib))])


def regression_estimate(y: np.ndarray, basis: np.ndarray, drawn: np.ndarray, ridge: float) -> float:
    """The difference estimator: mean prediction over every document + mean residual over the drawn ones. The
    basis columns are standardised over the documents, so ``ridge`` is in pseudo-observations for every column."""
    spread = basis.std(axis=0)
    z = np.column_stack([np.ones(len(basis)), (basis - basis.mean(axis=0)) / np.where(spread > 0, spread, 1.0)])
    zs = z[drawn]
    penalty = ridge * np.eye(z.shape[1])
    penalty[0, 0] = 0.0
    beta = np.linalg.solve(zs.T @ zs + penalty, zs.T @ y[drawn])
    fit = z @ beta
    return float(fit.mean() + (y[drawn] - fit[drawn]).mean())


def table_figures(name: str, *, items: int, seeds: int, ranks: list[int], ridge: float, oracle: bool) -> dict:
    table = load_any_table(name)
    matrix = table.mean_matrix()
    models = [str(m) for m in table.models]
    config = BacktestConfig()
    sets = holdout_sets(models, config.holdout_size, config.folds_that_fit(len(models)), config.partition_seed)
    where = {m: i for i, m in enumerate(models)}
    keys = ["mean"] + [f"reg {k}" for k in ranks]
    taus = {k: [] for k in keys}
    err_mean = {k: [] for k in keys}
    err_diff = {k: [] for k in keys}
    complete = ~np.isnan(matrix).any(axis=0)
    scores = matrix[:, complete]
    for fold, held in enumerate(sets):
        rows = [where[m] for m in held]
        calib = scores if oracle else np.delete(scores, rows, axis=0)
        bases = {k: history_basis(calib, k) for k in ranks}
        truth_mean = np.nanmean(matrix[rows], axis=1)
        truth = [held[j] for j in np.argsort(-truth_mean, kind="stable")]
        for seed in range(seeds):
            drawn = np.random.default_rng([fold, seed]).permutation(scores.shape[1])[:items]
            est = {"mean": np.array([scores[r, drawn].mean() for r in rows])}
            for k in ranks:
                est[f"reg {k}"] = np.array([regression_estimate(scores[r], bases[k], drawn, ridge) for r in rows])
            for key, e in est.items():
                taus[key].append(kendall_tau([held[j] for j in np.argsort(-e, kind="stable")], truth))
                err_mean[key].extend((e - truth_mean) ** 2)
                err_diff[key].extend(((e[a] - e[b]) - (truth_mean[a] - truth_mean[b])) ** 2
                                     for a, b in combinations(range(len(rows)), 2))
    base_m, base_d = np.mean(err_mean["mean"]), np.mean(err_diff["mean"])
    return {"table": name, "documents": int(complete.sum()), "folds": len(sets),
            **{f"{k} tau": float(np.mean(taus[k])) for k in keys},
            **{f"{k} mse mean": float(np.mean(err_mean[k]) / base_m) for k in keys if k != "mean"},
            **{f"{k} mse diff": float(np.mean(err_diff[k]) / base_d) for k in keys if k != "mean"}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--half", choices=("tuning", "report", "realsumm", "all"), default="all")
    ap.add_argument("--items", type=int, default=20, help="shared documents per model (default 20)")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--ranks", default="0,1,2,4", help="ranks of the history basis (0: the documents' means only)")
    ap.add_argument("--ridge", type=float, default=1.0, help="ridge on the standardised slopes (pseudo-observations)")
    ap.add_argument("--oracle", action="store_true", help="the basis from every model, the ranked ones included")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    ranks = [int(x) for x in a.ranks.split(",")]
    halves = {"tuning": TUNING, "report": REPORT, "realsumm": realsumm_tables()}
    chosen = list(halves) if a.half == "all" else [a.half]
    out = {"settings": {**vars(a), "ranks": ranks}}
    keys = ["mean"] + [f"reg {k}" for k in ranks]
    print(f"# shared documents: {a.items} per model, {a.seeds} seeds, basis from "
          f"{'EVERY model (oracle, in-sample)' if a.oracle else 'the fold calibration models'}; "
          "tau, then MSE ratios to the plain mean (model mean / pair difference)")
    for half in chosen:
        rows = [table_figures(t, items=a.items, seeds=a.seeds, ranks=ranks, ridge=a.ridge, oracle=a.oracle)
                for t in halves[half]]
        pooled = {c: float(np.mean([r[c] for r in rows])) for c in rows[0] if c not in ("table", "documents", "folds")}
        out[half] = {"tables": rows, "pooled": pooled}
        for r in rows + [{"table": f"POOLED {half}", **pooled}]:
            label = table_stem(Path(r["table"])) if r["table"].endswith(".gz") else r["table"]
            print(f"{label:32s} " + " ".join(f"{k}={r[k + ' tau']:.3f}" for k in keys) + "  | "
                  + " ".join(f"{k}={r[k + ' mse mean']:.2f}/{r[k + ' mse diff']:.2f}" for k in keys[1:]))
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How much can steering the bank-free ranker's documents buy at all? A model-based ceiling (issue 31).

    python benchmarks/bench_bank_free_ceiling.py tuning|report

For each hold-out set of the backtest's 5 folds (4 models), each pair's true gap over the spread of its
paired differences, z = |mean(d)| / sd(d) over the whole table. With n common documents the chance the
pair's paired mean puts it in the wrong order is about Φ(−z·√n / √(1 − n/N)) (normal approximation with
the finite-population correction; 0 once n = N), so the expected Kendall τ of a set is
1 − 2·Σ_pairs Φ(...)/6. In the shared order a pair's common documents are min(n_a, n_b), n_m the
documents of model m. For 20, 50, 100 and 200 items per model (80..800 per set) it prints the expected τ
of equal allocation (shared random documents) and of the best allocation of the same items (every split
of 80 grid units over the 4 models, searched exhaustively, with the true gaps known: an oracle no ranker
has), pooled over the sets.
"""
import itertools
import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from scipy.stats import norm  # noqa: E402

from bench_honesty import REPORT, TUNING  # noqa: E402
from lm_eval_adaptive.data.prices import uniform_prices  # noqa: E402
from lm_eval_adaptive.data.tables import load_any_table  # noqa: E402
from lm_eval_adaptive.engine.evaluation.backtest import plan_backtest  # noqa: E402
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig  # noqa: E402

UNITS = 80  # grid units per set of 4 models
PAIRS = [(i, j) for i in range(4) for j in range(i + 1, 4)]


def pair_gaps(names) -> list[list[tuple[float, int]]]:
    """Per hold-out set: each pair's (|mean difference| / sd of differences, common documents)."""
    out = []
    for name in names:
        table = load_any_table(name)
        plan = plan_backtest(table, BacktestConfig(seeds=1), uniform_prices(table.models))
        raw, models = table.mean_matrix(), list(plan.models)
        for f in range(plan.n_folds):
            rh = raw[[models.index(m) for m in plan.sets[f]]]
            out.append([(abs(np.nanmean(rh[i] - rh[j])) / np.nanstd(rh[i] - rh[j]),
                         int(np.sum(~np.isnan(rh[i] - rh[j])))) for i, j in PAIRS])
    return out


def main() -> None:
    sets = pair_gaps(TUNING if sys.argv[1] == "tuning" else REPORT)
    grid = np.array([c for c in itertools.product(range(1, UNITS), repeat=3) if sum(c) < UNITS])
    grid = np.column_stack([grid, UNITS - grid.sum(1)])  # every split of the units over the 4 models
    equal = np.all(grid == UNITS // 4, axis=1)
    for per_model in (20, 50, 100, 200):
        scale = 4 * per_model / UNITS
        eq, opt = [], []
        for zs in sets:
            loss = np.zeros(len(grid))  # expected misordered pairs of each split
            for (z, n_pop), (i, j) in zip(zs, PAIRS):
                n = np.minimum(grid[:, i], grid[:, j]) * scale
                fpc = np.sqrt(np.clip(1 - n / n_pop, 1e-9, 1))
                loss += np.where(n >= n_pop, 0.0, norm.cdf(-z * np.sqrt(n) / fpc))
            eq.append(loss[equal][0])
            opt.append(loss.min())
        print(f"{per_model:4d} items/model: equal tau {1 - 2 * np.mean(eq) / 6:.3f}, "
              f"best allocation (oracle) {1 - 2 * np.mean(opt) / 6:.3f}")


if __name__ == "__main__":
    main()

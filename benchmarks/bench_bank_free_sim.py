"""Anytime validity of the bank-free ranker itself, by simulation (issue 31), under its allocation.

    python benchmarks/bench_bank_free_sim.py [--runs 1000] [--docs 100] [--allocation steer|settle|uncertainty]

Three models on ``--docs`` documents, scores in [0, 1]: A's scores skewed (Beta(2, 5)); B's are A's on
other documents (a permutation of them: the full-task means are exactly equal, a true tie), or A's less
a gap; C's are A's less 0.15 (clipped), so the allocation has a pair to steer away from. Each run draws its
own population and the ranker's own shared order (seeded by the run), is looked at after every score
and is stopped at the first look where the **tied/close pair A–B** is claimed (``ordered`` or
``equivalent``; the last document at the latest). At that stop it counts: a wrong order claim of any
pair (an ``ordered`` pair whose interval lies on the wrong side of 0), and models whose interval misses
their full-task mean. Also at the first look where *any* pair is claimed (the ``first claim`` stop).
Bounds: 1 − γ = 0.05 for both.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from lm_eval_adaptive.engine.anytime.bank_free_ranker import BankFreeRanker  # noqa: E402
from lm_eval_adaptive.engine.anytime.pair_decisions import ORDERED, UNRESOLVED  # noqa: E402
from lm_eval_adaptive.engine.anytime.pair_worth import ALLOCATIONS  # noqa: E402

MODELS = ("A", "B", "C")


def population(rng: np.random.Generator, n: int, gap: float) -> np.ndarray:
    a = rng.beta(2.0, 5.0, size=n)
    b = rng.permutation(a) if gap == 0.0 else np.clip(a - gap, 0.0, 1.0)
    c = np.clip(a - 0.15, 0.0, 1.0)
    return np.stack([a, b, c])


def check(rk: BankFreeRanker, means: np.ndarray) -> tuple[bool, int]:
    """(any wrong order claim, models whose interval misses the full-task mean) now."""
    wrong = False
    for i, a in enumerate(MODELS):
        for j in range(i + 1, len(MODELS)):
            b = MODELS[j]
            if rk.outcome(a, b) == ORDERED:
                lo, hi = rk.pair_interval(a, b)
                true = means[i] - means[j]
                wrong |= (lo > 0 and true <= 1e-12) or (hi < 0 and true >= -1e-12)
    miss = sum(not (rk.interval(m)[0] - 1e-9 <= means[k] <= rk.interval(m)[1] + 1e-9) for k, m in enumerate(MODELS))
    return wrong, int(miss)


def one_run(seed: int, n: int, gap: float, allocation: str) -> dict:
    rng = np.random.default_rng([seed, 31])
    pop = population(rng, n, gap)
    means = pop.mean(axis=1)
    rk = BankFreeRanker(list(MODELS), [str(i) for i in range(n)], score_range=(0.0, 1.0), seed=[seed, 7],
                        allocation=allocation)
    first = None
    told = 0
    while (req := rk.ask()) is not None:
        rk.tell(req, float(pop[MODELS.index(req.model), req.item]))
        told += 1
        claimed = [rk.outcome(a, b) != UNRESOLVED for a, b in (("A", "B"), ("A", "C"), ("B", "C"))]
        if first is None and any(claimed):
            first = check(rk, means)
        if claimed[0]:
            break
    wrong, miss = check(rk, means)
    return {"wrong": wrong, "miss": miss, "first_wrong": first[0] if first else wrong,
            "first_miss": first[1] if first else miss, "told": told,
            "ab_ordered": rk.outcome("A", "B") == ORDERED, "items": [rk.items(m) for m in MODELS]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--docs", type=int, default=100)
    ap.add_argument("--allocation", default="steer-settle", choices=ALLOCATIONS)
    a = ap.parse_args()
    print(f"allocation {a.allocation}, {a.runs} runs, {a.docs} documents, 3 models, gamma 0.95 (bounds 0.05)")
    for gap in (0.0, 0.02):
        rs = [one_run(s, a.docs, gap, a.allocation) for s in range(a.runs)]
        items = np.mean([r["items"] for r in rs], axis=0)
        print(f"A - B = {gap:.2f}: stopped at the first claim on A-B (or the end): wrong order claims "
              f"{np.mean([r['wrong'] for r in rs]):.3f}, runs with an interval missing "
              f"{np.mean([r['miss'] > 0 for r in rs]):.3f} (intervals {np.sum([r['miss'] for r in rs]) / (3 * a.runs):.4f}); "
              f"A-B ordered {np.mean([r['ab_ordered'] for r in rs]):.3f}, scores told {np.mean([r['told'] for r in rs]):.1f}, "
              f"items A/B/C {items[0]:.1f}/{items[1]:.1f}/{items[2]:.1f}")
        print(f"   stopped at the first claim of any pair: wrong order claims {np.mean([r['first_wrong'] for r in rs]):.3f}, "
              f"runs with an interval missing {np.mean([r['first_miss'] > 0 for r in rs]):.3f}")


if __name__ == "__main__":
    main()

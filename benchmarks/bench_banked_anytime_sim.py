"""Anytime validity of the banked ranker's anytime-valid intervals, by simulation (issue 31, item 2).

Each run is a real :class:`~lm_eval_adaptive.engine.ranking.ranker.AdaptiveRanker` (maximum information
with a random half, its default selector) with ``MetricScaleJudgement(intervals=BankedAnytimeIntervals...)``
ranking two models on a bank that is **wrong**: the scores come from item difficulties unrelated to the
bank's for half of the items, and one model's curve is not the bank's. The run looks after every document
(every score told) and stops at the first look that claims anything about the pair (ordered or
equivalent), or at a full run. Counted: wrong order claims (a true tie ordered, or a pair ordered the
wrong way) and the runs in which either model's interval at the stopping time misses its full-task mean.

    python benchmarks/bench_banked_anytime_sim.py [--runs 1000] [--items 60] [--seed 0] [--plain]

Prints one line per scenario (a true tie: equal full-task means exactly; a gap of about 0.1).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from lm_eval_adaptive.engine.anytime.banked_intervals import BankedAnytimeIntervals  # noqa: E402
from lm_eval_adaptive.engine.cat.selection import RandomShareSelector  # noqa: E402
from lm_eval_adaptive.engine.evaluation.simulation import draw_scores  # noqa: E402
from lm_eval_adaptive.engine.irt.bank import ItemBank  # noqa: E402
from lm_eval_adaptive.engine.irt.response_model import ContinuousResponseModel  # noqa: E402
from lm_eval_adaptive.engine.ranking.pairs.metric_judgement import MetricScaleJudgement  # noqa: E402
from lm_eval_adaptive.engine.ranking.pairs.outcomes import ORDERED, UNRESOLVED  # noqa: E402
from lm_eval_adaptive.engine.ranking.pairs.settle_policy import SettlePolicy  # noqa: E402
from lm_eval_adaptive.engine.ranking.ranker import AdaptiveRanker  # noqa: E402

#: The simulation's grid (coarser than the engine's default 1,001: a valid sequence either way).
SIM_GRID = 201


def scenario(n: int, gap: float, rng: np.random.Generator) -> tuple[ItemBank, np.ndarray]:
    """(a bank, the two models' raw scores (2, n) in [0, 1]): the bank's difficulties are the truth's for half
    the items and unrelated for the rest; model B's scores are model A's on other items (gap 0: equal full-task
    means exactly) or a noisier, lower curve (gap > 0: A − B about ``gap``)."""
    true_b = rng.normal(0.0, 1.5, n)
    bank_b = true_b.copy()
    wrong = rng.random(n) < 0.5
    bank_b[wrong] = rng.normal(0.0, 1.5, int(wrong.sum()))
    bank = ItemBank(item_ids=np.array([f"d{i:04d}" for i in range(n)], dtype=object), b=bank_b,
                    model=ContinuousResponseModel(k=0.1), scaling="global", lo=0.0, hi=1.0,
                    input_tokens=100.0, output_tokens=50.0, task="sim", metric="sim")
    a = draw_scores(ContinuousResponseModel(k=0.1), 0.3, true_b, rng)
    if gap == 0.0:
        b = rng.permutation(a)
    else:
        b = np.clip(draw_scores(ContinuousResponseModel(k=0.2), 0.3, true_b, rng) - gap
                    + rng.normal(0.0, 0.05, n), 0.0, 1.0)
    return bank, np.stack([a, b])


def one_run(bank: ItemBank, y: np.ndarray, seed: int, *, control_variate: bool = True, confidence: float = 0.95):
    """One ranker run looked at after every score, stopped at the first claim: (claimed, wrong order claim,
    an interval missing its full-task mean at the stop, scores told)."""
    parts = []

    def factory(*args):
        parts.append(BankedAnytimeIntervals(*args[:4], (0.0, 1.0), *args[4:], control_variate=control_variate,
                                            grid=SIM_GRID))
        return parts[-1]

    models = ["A", "B"]
    selector = RandomShareSelector(bank.b, 1, seed=seed)
    ranker = AdaptiveRanker(bank, models, confidence=confidence, seed=seed, selector=selector,
                            judgement=functools.partial(MetricScaleJudgement, intervals=factory,
                                                        policy=SettlePolicy(None, None)))
    judge = ranker.judgements[0]
    iv = parts[0]
    truth = y.mean(axis=1)
    told = 0
    while (req := ranker.ask()) is not None:
        j = models.index(req.model)
        ranker.tell(req, float(y[j, req.item]), raw=float(y[j, req.item]))
        told += 1
        judge.open_pairs(models)  # look: every changed model's intervals brought up to date
        outcome, above = iv.pair_outcome(0, 1)
        if outcome != UNRESOLVED:
            break
    else:  # the run ended (a full run, or the stopping policy) without a claim: that is its stopping time
        outcome, above = iv.pair_outcome(0, 1)
    wrong = outcome == ORDERED and (truth[0] == truth[1] or above != (truth[0] > truth[1]))
    missed = any(not (iv.model_interval(k)[0] - 1e-12 <= truth[k] <= iv.model_interval(k)[1] + 1e-12)
                 for k in range(2))
    return outcome != UNRESOLVED, bool(wrong), bool(missed), told


def simulate(runs: int, n: int, gap: float, seed: int = 0, *, control_variate: bool = True) -> dict:
    """``runs`` runs on one scenario (one bank, one population: the sampling is the runs' random orders)."""
    rng = np.random.default_rng([seed, int(gap * 1000)])
    bank, y = scenario(n, gap, rng)
    out = np.array([one_run(bank, y, seed * 100_003 + r, control_variate=control_variate) for r in range(runs)])
    return {"runs": runs, "gap": float(y[0].mean() - y[1].mean()), "claimed": float(out[:, 0].mean()),
            "wrong": float(out[:, 1].mean()), "missed": float(out[:, 2].mean()), "told": float(out[:, 3].mean())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--items", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plain", action="store_true", help="no control variate")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    for gap in (0.0, 0.1):
        r = simulate(a.runs, a.items, gap, a.seed, control_variate=not a.plain)
        print(f"{'true tie' if gap == 0 else 'gap':>8} (full-task A − B = {r['gap']:+.4f}), {r['runs']} runs of "
              f"{a.items} documents per model, looked at after every score: claimed {r['claimed']:.3f}, wrong order "
              f"claims {r['wrong']:.3f} (bound 0.05), intervals missing at the stop {r['missed']:.3f} (bound 0.05), "
              f"scores told {r['told']:.1f}")
    print(f"{time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

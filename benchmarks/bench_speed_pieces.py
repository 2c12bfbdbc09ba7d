"""Where an administration's time goes: bench_speed.py's 4-model ranking on the 1,000-item bank
(n_init = n_max = 20, 80 administrations), timed piece by piece in CPU time.

Pass 1 times, per ranking, the ranker's construction, every ``ask``, every ``tell`` and
``result()``. Pass 2 wraps three pieces inside them and sums each over a ranking: the grid
posterior's update (``DispersionPosterior.update``), its summary (the θ̂ reads: a read after an
update summarises the posterior, the others are cached) and the selector
(``RandomShareSelector.select``, its θ̂ read excluded). Each figure is the median over
``--repeats`` rankings (after one warm-up) divided by the 80 administrations. The clock reads
(``time.process_time_ns``, about 0.1–0.3 µs each) are inside the figures: compare pieces
between versions, not with bench_speed.py's totals.

    python benchmarks/bench_speed_pieces.py [--repeats 100]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_speed as bs  # noqa: E402
from lm_eval_adaptive.engine.cat import estimation, selection  # noqa: E402
from lm_eval_adaptive.engine.ranking.ranker import AdaptiveRanker  # noqa: E402

CLOCK = time.process_time_ns


def one_ranking(bank, names, scores) -> dict:
    t0 = CLOCK()
    ranker = AdaptiveRanker(bank, names, n_init=bs.N_INIT, n_max=bs.N_MAX, seed=0)
    t_new = CLOCK() - t0
    t_ask = t_tell = 0
    while True:
        t = CLOCK()
        req = ranker.ask()
        t_ask += CLOCK() - t
        if req is None:
            break
        y = float(scores[names.index(req.model), req.item])
        t = CLOCK()
        ranker.tell(req, y)
        t_tell += CLOCK() - t
    t = CLOCK()
    ranker.result()
    return {"construction": t_new, "ask": t_ask, "tell": t_tell, "result": CLOCK() - t}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=100)
    args = ap.parse_args(argv)
    bank = bs.make_bank(1000)
    names = [f"m{i}" for i in range(4)]
    scores = bs.simulate_scores(bank, bs.model_thetas(4))
    n_admin = 4 * bs.N_MAX
    out: dict[str, list[float]] = {}

    for k in range(args.repeats + 1):
        row = one_ranking(bank, names, scores)
        if k:
            for key, ns in row.items():
                out.setdefault(key, []).append(ns / n_admin / 1000)

    acc: dict[str, int] = {}

    def timed(f, key):
        def wrapper(*a, **kw):
            t = CLOCK()
            r = f(*a, **kw)
            acc[key] = acc.get(key, 0) + CLOCK() - t
            return r
        return wrapper

    update, select = estimation.DispersionPosterior.update, selection.RandomShareSelector.select
    theta = estimation.GridPosterior.theta
    try:
        estimation.DispersionPosterior.update = timed(update, "grid update")
        estimation.GridPosterior.theta = property(timed(theta.fget, "grid summary"))
        selection.RandomShareSelector.select = timed(select, "selection")  # θ̂ is read before the call
        for k in range(args.repeats + 1):
            acc.clear()
            one_ranking(bank, names, scores)
            if k:
                for key, ns in acc.items():
                    out.setdefault(key, []).append(ns / n_admin / 1000)
    finally:
        estimation.DispersionPosterior.update = update
        estimation.GridPosterior.theta = theta
        selection.RandomShareSelector.select = select

    print(f"us per administration (CPU time, median of {args.repeats} rankings; 4 models, 1k items, 80 administrations)")
    for key, vals in out.items():
        print(f"  {key:14s} {statistics.median(vals):6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

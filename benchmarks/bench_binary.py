"""Speed of the binary (2PL/3PL) paths next to the continuous one.

1. One adaptive test of 100 items on banks of 1k, 10k and 100k items: a continuous bank (the
   window selector: nearest b) against a 3PL bank (per-item a and c: every pick ranks the
   whole bank by information, one vectorised pass). Median ms per test and µs per item given.
2. The 2PL/3PL calibration (engine/irt/binary_calibration.py) on a simulated 0/1 table, and on
   the AlpacaEval win/lose table when the real data are there.
3. The Open LLM Leaderboard tables (``ollb/<name>``, when the data are there): calibration of each
   whole table (2PL or 3PL chosen by held-out likelihood: three EM fits), seconds per million
   scores; and ``calibrate``'s whole job on ``ollb/bbh_shuffled_objects_5`` (4027 models × 250
   items): the bank and its self-check (``calibrate_checked``), against the 10 min 21 s the
   joint-MAP fit took (issue 22).

    python benchmarks/bench_binary.py [--repeats 5] [--ollb-repeats 1] [--skip-ollb]

Every figure is the median of ``--repeats`` runs (``--ollb-repeats`` for section 3) after one
untimed warm-up (none in section 3: a warm-up there would double a minute-long job).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lm_eval_adaptive.data.responses import ResponseTable  # noqa: E402
from lm_eval_adaptive.engine.irt.bank import ItemBank  # noqa: E402
from lm_eval_adaptive.engine.irt.calibration import calibrate  # noqa: E402
from lm_eval_adaptive.engine.cat.adaptive_test import AdaptiveTest  # noqa: E402
from lm_eval_adaptive.engine.irt.response_model import (  # noqa: E402
    BinaryIRTModel,
    ContinuousResponseModel,
)
from lm_eval_adaptive.engine.evaluation.simulation import bank_scores, draw_scores, drive  # noqa: E402
from lm_eval_adaptive.errors import InputError  # noqa: E402


def timed(job, repeats: int) -> float:
    job()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        job()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bank(n: int, binary: bool) -> ItemBank:
    rng = np.random.default_rng(0)
    common = dict(item_ids=np.array([f"i{i}" for i in range(n)], dtype=object), b=rng.normal(0, 1.5, n),
                  lo=0.0, hi=1.0, input_tokens=100.0, output_tokens=10.0)
    if binary:
        return ItemBank(model=BinaryIRTModel("3pl"), scaling="none", a=rng.lognormal(0, 0.4, n),
                        c=np.full(n, 0.25), **common)
    return ItemBank(model=ContinuousResponseModel(k=0.1), scaling="global", **common)


def cat_job(b: ItemBank, binary: bool):
    rng = np.random.default_rng(1)

    def score(i):
        return float(bank_scores(b, 0.3, rng, i))

    def job():
        drive(AdaptiveTest(b, se_target=None, max_items=100, seed=0), score)
    return job


def simulated_table(n_models: int, n_items: int) -> ResponseTable:
    rng = np.random.default_rng(2)
    theta, b, a = rng.normal(0, 1, n_models), rng.normal(0, 1, n_items), rng.lognormal(0, 0.4, n_items)
    y = draw_scores(BinaryIRTModel("3pl"), theta[:, None], b[None, :], rng, a=a[None, :], c=0.25)
    mi, ii = np.meshgrid(np.arange(n_models), np.arange(n_items), indexing="ij")
    return ResponseTable.from_columns([f"m{j}" for j in mi.ravel()], [f"i{i}" for i in ii.ravel()], y.ravel())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--ollb-repeats", type=int, default=1)
    ap.add_argument("--skip-ollb", action="store_true")
    args = ap.parse_args(argv)
    print("1. adaptive test of 100 items (median ms; µs per item)")
    print(f"   {'items':>7}  {'continuous':>12}  {'3pl':>12}  {'ratio':>6}")
    for n in (1_000, 10_000, 100_000):
        cont = timed(cat_job(bank(n, False), False), args.repeats)
        bin_ = timed(cat_job(bank(n, True), True), args.repeats)
        print(f"   {n:>7}  {1e3 * cont:8.1f} ms  {1e3 * bin_:8.1f} ms  {bin_ / cont:6.2f}"
              f"   ({1e4 * cont:.0f} / {1e4 * bin_:.0f} µs per item)")
    print("2. calibration (median s)")
    for kind, guessing in (("2pl", None), ("3pl", 0.25), ("3pl", None)):
        t = simulated_table(100, 800)
        s = timed(lambda t=t, k=kind, g=guessing: calibrate(t, response_model=k, guessing=g), args.repeats)
        print(f"   simulated 100 models x 800 items, {kind}{'' if guessing is None else f' c={guessing}'}"
              f"{' c estimated' if kind == '3pl' and guessing is None else ''}: {s:.2f} s")
    try:
        from lm_eval_adaptive.data.named_tables import load_named

        win = load_named("alpaca_eval/win")
        s = timed(lambda: calibrate(win), args.repeats)
        print(f"   alpaca_eval/win ({win.n_models} models x {win.n_items} items, 2pl or 3pl by held-out likelihood):"
              f" {s:.2f} s")
    except InputError as e:
        print(f"   alpaca_eval/win: skipped ({e})")
    if not args.skip_ollb:
        ollb(args.ollb_repeats)
    return 0


def median_time(job, repeats: int) -> float:
    times = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        job()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def ollb(repeats: int) -> None:
    from lm_eval_adaptive.data.named_tables import load_named
    from lm_eval_adaptive.data.ollb import OLLB_NAMES
    from lm_eval_adaptive.engine.evaluation.self_check import calibrate_checked

    print("3. Open LLM Leaderboard tables: calibration of the whole table (median s; s per million scores)")
    try:
        tables = {n: load_named(f"ollb/{n}") for n in OLLB_NAMES}
    except InputError as e:
        print(f"   skipped ({e})")
        return
    for name, t in tables.items():
        banks = []
        s = median_time(lambda t=t: banks.append(calibrate(t)), repeats)
        b = banks[-1]
        print(f"   {name:<24} {t.n_models:>5} x {t.n_items:<5} {s:6.1f} s  ({s / (t.n_obs / 1e6):5.1f} s per M)"
              f"  {b.model.kind}, {b.diagnostics['em_iterations']} EM iterations")
    t = tables["bbh_shuffled_objects_5"]
    s = median_time(lambda: calibrate_checked(t), repeats)
    print(f"   calibrate + self-check, bbh_shuffled_objects_5 (4027 x 250): {s:.1f} s "
          f"(issue 22 reports 621 s for the joint-MAP fit it replaced)")


if __name__ == "__main__":
    raise SystemExit(main())

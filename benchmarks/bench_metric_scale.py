"""The full-task metric as the quantity of record (issue 21): is its interval honest, and is the
stated cost to settle a pair right? On every dev table, tuning half and report half apart.

For each table, fold (a bank calibrated on the other models, as the backtest's folds: 4 hold-out
models each) and seed, every hold-out model takes items the way the ranker gives them (the default
selector: every second item from one seeded random permutation, the others maximum information;
``AdaptiveTest`` with the fold's bank) until it has answered every bank item it has a score for.
Along that path:

* **coverage and width** of the 95% full-task interval (engine/ranking/pairs/metric_scale.py) at 20 items and at
  10%, 50%, 90% and 100% of the model's items, against its true mean over those items (widths in
  units of the SD of all the table's models' full-task means, so that tables compare); the same for
  the difference of every pair of hold-out models (at the same share of items), and the median ratio
  of the paired SE to the unpaired one (√(SE_a² + SE_b²));
* **cost to settle**: at 20 items per model, each pair that is neither ordered nor equivalent gets
  its stated items to settle (engine/ranking/pairs/outcomes.py); then both models keep taking items, one
  each per step, until the pair is settled (or both have answered everything), and the items that
  took are the measured cost. Reported: the share of pairs whose stated cost is within a factor 2
  of the measured one (target: 80%), the median ratio, and whether the claim made at the settle
  point is right (``ordered``: the true order; ``equivalent``: |true Δ| ≤ δ).

    python benchmarks/bench_metric_scale.py [--half tuning|report|both] [--seeds 2] [--jobs 2]
        [--tie-margin DELTA] [--start 20] [--tables NAME ...] [--json out.json] [--timing]

Uniform prices (every item of a table costs the same: items are dollars). ``--timing`` prints the
per-call cost of MetricScale + judge_pairs instead.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig  # noqa: E402
from lm_eval_adaptive.engine.evaluation.backtest import fold_bank, plan_backtest  # noqa: E402
from lm_eval_adaptive.engine.cat.adaptive_test import AdaptiveTest  # noqa: E402
from lm_eval_adaptive.engine.ranking.pairs.metric_scale import MetricScale  # noqa: E402
from lm_eval_adaptive.engine.ranking.pairs.outcomes import EQUIVALENT, ORDERED, UNRESOLVED, judge_pairs  # noqa: E402
from lm_eval_adaptive.engine.cat.selection import RandomShareSelector, default_selector  # noqa: E402

POINTS = ("20 items", "10%", "50%", "90%", "100%")
LEVEL = 0.95


SHARE = None  # the random share of the selector (None: the engine's default selector)


def _path(bank, hold, raw_h, scaled, f, seed, partition_seed):
    """Each hold-out model's items in the order the default selector gives them (to the end of the
    bank), the random-slot flag of each, and θ̂ and SE after each."""
    out = []
    for j, m in enumerate(hold):
        missing = np.flatnonzero(np.isnan(raw_h[j]))
        if SHARE is None:
            sel = default_selector(bank.b, top_k=1, seed=[partition_seed, f, seed],
                                   information=bank.selection_information)
        else:
            sel = RandomShareSelector(bank.b, 1, share=SHARE, seed=[partition_seed, f, seed],
                                      information=bank.selection_information)
        t = AdaptiveTest(bank, se_target=None, max_items=bank.n_items, min_items=0, selector=sel, name=m)
        if missing.size:
            t.exclude(missing)
        e = t.examinee
        thetas, ses = [], []
        while (i := t.next_item()) is not None:
            t.record(i, float(scaled[j, i]))
            thetas.append(e.theta)
            ses.append(e.se)
        items = np.asarray(e.items, dtype=np.int64)
        flags = np.array([sel.is_random_slot(missing.size + k) for k in range(items.size)], dtype=bool)
        out.append({"items": items, "random": flags, "theta": np.array(thetas), "se": np.array(ses),
                    "population": ~np.isnan(raw_h[j])})
    return out


def _scale(bank, raw_h, paths, counts, rows=None):
    """The MetricScale of the models ``rows`` (default all) with model j at ``counts[j]`` items of its path."""
    rows = range(len(paths)) if rows is None else rows
    K, N = len(rows), bank.n_items
    raw = np.full((K, N), np.nan)
    rnd = np.zeros((K, N), dtype=bool)
    theta = np.zeros(K)
    se = np.zeros(K)
    pop = np.zeros((K, N), dtype=bool)
    for r, j in enumerate(rows):
        p, n = paths[j], int(counts[j])
        it = p["items"][:n]
        raw[r, it] = raw_h[j, it]
        rnd[r, it[p["random"][:n]]] = True
        theta[r] = p["theta"][n - 1] if n else np.nan
        se[r] = p["se"][n - 1] if n else np.inf
        pop[r] = p["population"]
    return MetricScale(bank, raw, rnd, theta, se_theta=se, population=pop, level=LEVEL)


def _model_free_se(sc, a: int, b: int) -> float:
    """SE of the difference estimated without the bank: the mean of y_a − y_b over the items both
    drew at random, with its finite-population correction, for comparison with the paired SE."""
    both = sc.drawn_mask[a] & sc.drawn_mask[b]
    n = int(both.sum())
    if n < 3:
        return float("nan")
    d = sc.raw[a, both] - sc.raw[b, both]
    pop = int((~np.isnan(sc.raw[a]) | sc.unseen_mask[a]).sum())
    return float(np.std(d, ddof=1) / np.sqrt(n) * np.sqrt(max(0.0, 1 - n / pop)))


def unit(name: str, f: int, seeds: int, margin_share: float, start: int, floor: float | None = None,
         share: float | None = None) -> dict | None:
    global SHARE
    SHARE = share
    if floor is not None:
        MetricScale.model_floor = floor
    from lm_eval_adaptive.data.tables import load_any_table
    table = load_any_table(name)
    config = BacktestConfig(self_check=False, seeds=seeds)
    plan = plan_backtest(table, config)
    if f >= plan.n_folds:
        return None
    models = list(plan.models)
    hold = list(plan.sets[f])
    bank = fold_bank(table, config, [m for m in models if m not in hold])
    pos = {v: i for i, v in enumerate(np.asarray(table.items, dtype=object).tolist())}
    tpos = np.array([pos[str(x)] for x in bank.item_ids], dtype=np.int64)
    raw_h = table.mean_matrix()[[models.index(m) for m in hold]][:, tpos]
    scaled = bank.scale(np.arange(bank.n_items)[None, :], raw_h)
    truth = np.nanmean(raw_h, axis=1)
    margin = margin_share * float(np.mean(bank.hi - bank.lo))  # δ as a share of the metric's range per item
    # the unit widths are shown in: the SD of every model's full-task mean over the bank's items
    spread = float(np.std(np.nanmean(table.mean_matrix()[:, tpos], axis=1)))
    H = len(hold)
    res = {p: {"covered": [], "width": [], "pair_covered": [], "pair_ratio": [], "pair_width": [], "model_gain": []}
           for p in POINTS}
    settle = []
    for seed in range(seeds):
        paths = _path(bank, hold, raw_h, scaled, f, seed, config.partition_seed)
        total = np.array([p["items"].size for p in paths])
        for point in POINTS:
            if point == "20 items":
                counts = np.minimum(20, total)
            else:
                share = float(point.rstrip("%")) / 100
                counts = np.maximum(2, np.round(share * total).astype(int))
            sc = _scale(bank, raw_h, paths, counts)
            lo, hi = sc.interval()
            tol = 1e-9 * np.maximum(1.0, np.abs(truth))  # a full run's zero-width interval: float rounding only
            res[point]["covered"] += [bool(a - e <= t <= b + e) for a, t, b, e in zip(lo, truth, hi, tol)]
            res[point]["width"] += ((hi - lo) / spread).tolist()
            D, S, DF = sc.differences()
            q = sc.quantile(DF, 0.5 + LEVEL / 2)
            for a in range(H):
                for b in range(a + 1, H):
                    d_true = truth[a] - truth[b]
                    h = 0.0 if S[a, b] == 0 else q[a, b] * S[a, b]
                    res[point]["pair_covered"].append(bool(abs(D[a, b] - d_true) <= h + 1e-9))
                    res[point]["pair_width"].append(2 * h / spread)
                    unpaired = np.hypot(sc.se[a], sc.se[b])
                    if unpaired > 0:
                        res[point]["pair_ratio"].append(float(S[a, b] / unpaired))
                    free = _model_free_se(sc, a, b)
                    if np.isfinite(free) and free > 0 and S[a, b] > 0:
                        res[point]["model_gain"].append(float(S[a, b] / free))
        # the cost to settle: stated at `start` items per model, measured by buying on
        counts0 = np.minimum(start, total)
        sc0 = _scale(bank, raw_h, paths, counts0)
        judged = judge_pairs(sc0, confidence=LEVEL, tie_margin=margin,
                             **({} if SHARE is None else {"random_share": SHARE}))
        for a, b, o, n_stated, d_hat, s_hat in zip(judged.a, judged.b, judged.outcome, judged.items_to_settle,
                                                   judged.difference, judged.se):
            if o != UNRESOLVED:
                continue
            rows = [int(a), int(b)]
            step = 0
            while True:
                step += 1
                c = np.minimum(counts0 + step, total)
                jp = judge_pairs(_scale(bank, raw_h, paths, c, rows=rows), confidence=LEVEL, tie_margin=margin,
                                 settle_cost=False)
                if jp.outcome[0] != UNRESOLVED or np.all(c == total):
                    break
            measured = int((c - counts0)[rows].sum())
            hi_row = rows[int(jp.a[0])]
            lo_row = rows[int(jp.b[0])]
            d_true = truth[hi_row] - truth[lo_row]
            right = (d_true > 0) if jp.outcome[0] == ORDERED else (abs(d_true) <= margin)
            settle.append({"stated": int(n_stated), "measured": measured, "outcome": str(jp.outcome[0]),
                           "right": bool(right), "rest": int((total - counts0)[rows].sum()),
                           "true_gap": float(abs(truth[a] - truth[b])), "d_hat": float(d_hat), "se": float(s_hat),
                           "state": {k: [float(getattr(sc0, k)[int(a)]), float(getattr(sc0, k)[int(b)])]
                                     for k in ("var", "df", "n_unseen", "n_random", "n_total")}})
    return {"table": name, "fold": f, "points": res, "settle": settle}


def summarise(units: list[dict]) -> dict:
    out = {}
    for p in POINTS:
        cov = [c for u in units for c in u["points"][p]["covered"]]
        wid = [w for u in units for w in u["points"][p]["width"]]
        pc = [c for u in units for c in u["points"][p]["pair_covered"]]
        pw = [w for u in units for w in u["points"][p]["pair_width"]]
        pr = [w for u in units for w in u["points"][p]["pair_ratio"]]
        out[p] = {"coverage": float(np.mean(cov)) if cov else float("nan"), "n": len(cov),
                  "median_width": float(np.median(wid)) if wid else float("nan"),
                  "pair_coverage": float(np.mean(pc)) if pc else float("nan"), "pairs": len(pc),
                  "median_pair_width": float(np.median(pw)) if pw else float("nan"),
                  "median_paired_over_unpaired_se": float(np.median(pr)) if pr else float("nan"),
                  "median_se_over_model_free_paired_se": _median(
                      [w for u in units for w in u["points"][p]["model_gain"]])}
    st = [s for u in units for s in u["settle"]]
    if st:
        stated = np.array([s["stated"] for s in st], dtype=float)
        measured = np.array([s["measured"] for s in st], dtype=float)
        ratio = np.maximum(stated, 1) / np.maximum(measured, 1)
        out["settle"] = {"pairs": len(st), "within_2x": float(np.mean((ratio <= 2) & (ratio >= 0.5))),
                         "median_ratio": float(np.median(ratio)),
                         "stated_over_measured_q10_q90": [float(np.quantile(ratio, 0.1)),
                                                          float(np.quantile(ratio, 0.9))],
                         "median_stated": float(np.median(stated)), "median_measured": float(np.median(measured)),
                         "settled_ordered": int(sum(s["outcome"] == ORDERED for s in st)),
                         "settled_equivalent": int(sum(s["outcome"] == EQUIVALENT for s in st)),
                         "ordered_right": _share([s["right"] for s in st if s["outcome"] == ORDERED]),
                         "equivalent_right": _share([s["right"] for s in st if s["outcome"] == EQUIVALENT]),
                         "ran_to_full_run": float(np.mean([s["measured"] >= s["rest"] for s in st]))}
    else:
        out["settle"] = {"pairs": 0}
    out["settle_records"] = st
    return out


def _median(x) -> float:
    return float(np.median(x)) if len(x) else float("nan")


def _share(x) -> float:
    return float(np.mean(x)) if len(x) else float("nan")


def show(title: str, rows: dict) -> None:
    print(f"\n{title}")
    print(f"{'table':<26}" + "".join(f"{'cov ' + p:>13}" for p in POINTS) + "".join(
        f"{'width ' + p:>14}" for p in POINTS)
          + f"{'pair cov 20':>13}{'pair cov 50%':>13}{'paired/unp':>11}{'se/free':>9}"
        f"{'settle n':>9}{'within 2x':>10}{'med ratio':>10}{'ord right':>10}{'eq right':>9}")
    for name, s in rows.items():
        st = s["settle"]
        print(f"{name:<26}" + "".join(f"{s[p]['coverage']:>13.3f}" for p in POINTS)
              + "".join(f"{s[p]['median_width']:>14.4f}" for p in POINTS)
              + f"{s['20 items']['pair_coverage']:>13.3f}{s['50%']['pair_coverage']:>13.3f}"
              f"{s['20 items']['median_paired_over_unpaired_se']:>11.2f}"
              f"{s['20 items']['median_se_over_model_free_paired_se']:>9.2f}"
              f"{st['pairs']:>9}{st.get('within_2x', float('nan')):>10.2f}{st.get('median_ratio', float('nan')):>10.2f}"
              f"{st.get('ordered_right', float('nan')):>10.3f}{st.get('equivalent_right', float('nan')):>9.3f}")


def timing() -> None:
    """Per-call cost of MetricScale + judge_pairs (the ranker would call them after each score)."""
    from lm_eval_adaptive.data.tables import load_any_table
    from lm_eval_adaptive.engine.irt.calibration import calibrate
    bank = calibrate(load_any_table("wmt24/en-de/bleu"))
    rng = np.random.default_rng(0)
    N = bank.n_items
    for K, n in ((4, 20), (4, 200), (20, 200), (20, N)):
        raw = np.full((K, N), np.nan)
        rnd = np.zeros((K, N), dtype=bool)
        for k in range(K):
            it = rng.choice(N, n, replace=False)
            raw[k, it] = rng.random(n)
            rnd[k, it[::2]] = True
        theta = rng.normal(0, 1, K)
        reps = 200
        t0 = time.perf_counter()
        for _ in range(reps):
            judge_pairs(MetricScale(bank, raw, rnd, theta, se_theta=np.full(K, 0.3)), tie_margin=0.01)
        dt = (time.perf_counter() - t0) / reps
        print(f"K={K:>2} models, N={N} items, {n} seen each: MetricScale + judge_pairs {1e6 * dt:8.0f} µs per call")


def oracle(reps: int = 4000, z: float = 1.959963984540054) -> None:
    """How close can any stated cost come to a measured one? A pair whose true gap Δ and per-item SD
    are known exactly, its z-statistic followed item by item (information time, Brownian motion with
    drift) from a start where it is not settled until it first is: the oracle states the items at
    which the expected z reaches the threshold, t* = (z·s/Δ)²; the best constant multiple of it is
    also tried. Reported: the share within a factor 2 of the measured first crossing."""
    rng = np.random.default_rng(0)
    print("start (share of t*)  pairs  within 2x (oracle t*)  within 2x (best multiple)  median measured/t*")
    for start in (0.05, 0.2, 0.5):
        meas = []
        for _ in range(reps):
            t_star = z * z
            t = np.arange(start * t_star, 20 * t_star, t_star / 400)
            w = np.cumsum(rng.normal(0, np.sqrt(np.r_[t[0], np.diff(t)])))
            zt = (t + w) / np.sqrt(t)
            if abs(zt[0]) > z:
                continue
            hit = int(np.argmax(np.abs(zt) > z))
            meas.append((t[hit] - t[0]) / (t_star - t[0]) if abs(zt[hit]) > z else 20.0)
        m = np.asarray(meas)
        best = max(float(np.mean((m >= c / 2) & (m <= 2 * c))) for c in np.exp(np.linspace(-3, 2, 200)))
        print(f"{start:>20.2f}  {m.size:>5}  {np.mean((m >= 0.5) & (m <= 2)):>21.2f}  {best:>25.2f}  "
              f"{np.median(m):>18.2f}")


def main(argv=None) -> int:
    from bench_honesty import REPORT, TUNING
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--half", choices=("tuning", "report", "both"), default="both")
    ap.add_argument("--tables", nargs="+", default=None)
    ap.add_argument("--tie-margin", type=float, default=0.0,
                    help="δ as a share of the metric's range (the bank's mean per-item max − min)")
    ap.add_argument("--start", type=int, default=20, help="items per model when the cost to settle is stated")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument("--timing", action="store_true")
    ap.add_argument("--oracle", action="store_true", help="the first-crossing simulation with known Δ and SD")
    ap.add_argument("--floor", type=float, default=None, help="MetricScale.model_floor (default: the engine's)")
    ap.add_argument("--share", type=float, default=None, help="the selector's random share (default: the engine's)")
    a = ap.parse_args(argv)
    if a.timing:
        timing()
        return 0
    if a.oracle:
        oracle()
        return 0
    halves = {"custom": a.tables} if a.tables else {
        k: v for k, v in (("tuning", TUNING), ("report", REPORT)) if a.half in (k, "both")}
    t0 = time.perf_counter()
    out = {"settings": {"seeds": a.seeds, "tie_margin": a.tie_margin, "start": a.start, "level": LEVEL,
                        "model_floor": MetricScale.model_floor if a.floor is None else a.floor,
                        "random_share": a.share}}
    ctx = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=a.jobs, mp_context=ctx, initializer=_one_thread) as pool:
        for half, names in halves.items():
            futs = [pool.submit(unit, n, f, a.seeds, a.tie_margin, a.start, a.floor, a.share)
                    for n in names for f in range(5)]
            units = [u for u in (x.result() for x in futs) if u is not None]
            rows = {n: summarise([u for u in units if u["table"] == n]) for n in names}
            rows[f"POOLED {half}"] = summarise(units)
            show(f"{half} half ({len(names)} tables, {a.seeds} seeds, tie margin {a.tie_margin:g})", rows)
            out[half] = rows
            print(f"  ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


def _one_thread() -> None:
    from threadpoolctl import threadpool_limits
    threadpool_limits(1)


if __name__ == "__main__":
    sys.exit(main())

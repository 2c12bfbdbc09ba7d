"""Full-benchmark accuracy from a few items: every estimator on the same folds and items (issue 22 item 2).

Per ollb dev table (tuning half: mmlu_pro_math_7b, tiny_gsm8k, tiny_hellaswag; report half:
bbh_shuffled_objects_5, tiny_truthfulqa), with bench_binary_honesty.py's seeded order of the models:

* the bank is calibrated on the first ``--calib`` models (default 300) and corrected by its own
  self-check (engine/evaluation/backtest.py ``fold_bank``), once with its factor model (the estimate of record
  of a 0/1 bank, ``factor``) and once without (``p-irt``'s interval and model error, as the engine
  gave them before the factor model); the 2PL/3PL parameters are the same, so are the items;
* the next ``--holdout`` models after the ranking subsample's 320 (models no bank saw) answer the
  items of each **design** (their recorded 0/1 answers):
  ``adaptive`` (the engine's default test: maximum information, every second item at random),
  ``adaptive-cs`` (with ``--common-slope``: the same with information at one common slope,
  engine/cat/binary_selection.py), ``random`` (every item at random), ``anchor`` (tinyBenchmarks'
  anchor points of the calibration answers: K-means on the items' answer vectors, weighted),
  ``anchor-irt`` (the same clustered on the items' IRT parameters, slope and intercept),
  ``info`` (metabench-style: the items most informative over the calibration abilities) and
  ``stop`` (the default test to ``run --adaptive``'s default stop: SE ≤ 0.2 after ≥ 30 items);
  ``--ci-width W`` adds ``ci-stop``, the default test to a full-task half-width of W
  (:class:`~lm_eval_adaptive.engine.cat.stopping.CIWidth`, checked after every item: optional stopping);
* after 20, 30 and 100 items (capped at the bank's size: on a 100-item tiny table 100 is a full
  run) each design's items are scored by every **estimator** that applies
  (engine/evaluation/accuracy_estimators.py): ``irt`` (mean prediction at θ̂), ``p-irt``, ``gp-irt``
  (λ chosen per design and length on validation models: a bank on the first 240 models, the next 60
  as validation, λ on a grid of 0.05 minimising their squared error, as tinyBenchmarks' optimal
  lambdas), ``design`` (MetricScale's difference estimator with the random share),
  ``factor``, ``sample-mean`` (the items seen plus the mean of the random ones for the rest: the
  plain mean of a random sample for ``random``) and ``anchor`` (the weighted anchors).

Printed per table and pooled per half: mean absolute error against the model's accuracy over every
bank item, bias, and for the estimators with an interval its 95% coverage and mean width.

    python benchmarks/bench_binary_estimators.py [--half tuning|report|both] [--calib 300] [--holdout 200]
        [--lengths 20 30 100] [--jobs 2] [--common-slope] [--ci-width W ...] [--json out.json]
        [--tables NAME ...] [--factors D]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_binary_honesty import REPORT, SUBSAMPLE_SEED, TUNING, model_order  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from lm_eval_adaptive.data.named_tables import load_named  # noqa: E402
from lm_eval_adaptive.engine.irt import factor_model  # noqa: E402
from lm_eval_adaptive.engine.evaluation.accuracy_estimators import (  # noqa: E402
    anchor_estimate,
    anchor_points,
    design_estimate,
    factor_estimate,
    information_subset,
    irt_prediction,
    p_irt,
    sample_mean,
)
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig  # noqa: E402
from lm_eval_adaptive.engine.evaluation.backtest import fold_bank  # noqa: E402
from lm_eval_adaptive.engine.irt.binary_calibration import calibrate_binary  # noqa: E402
from lm_eval_adaptive.engine.cat.binary_selection import ShrunkSlopeSelector  # noqa: E402
from lm_eval_adaptive.engine.cat.adaptive_test import AdaptiveTest  # noqa: E402
from lm_eval_adaptive.engine.cat.examinee import Examinee  # noqa: E402
from lm_eval_adaptive.engine.ranking.pairs.metric_scale import random_share_mask  # noqa: E402
from lm_eval_adaptive.engine.cat.selection import RandomShareSelector, shared_default_selector  # noqa: E402
from lm_eval_adaptive.engine.cat.stopping import CIWidth  # noqa: E402

ESTIMATORS = ("irt", "p-irt", "gp-irt", "design", "factor", "sample-mean", "anchor")
LAMBDAS = np.round(np.arange(0.0, 1.0001, 0.05), 2)
VALID_CALIB = 240  # the gp-IRT validation bank's models; the next 60 of the first `calib` validate


def _runs(bank, y, lengths, designs, k, anchors, info_sets, ci_widths=()):
    """Every design's item sets for one model with answers ``y`` (bank order): a list of
    (design, length label, items in order, random-slot mask, examinee)."""
    N = bank.n_items
    caps = {min(int(n), N): int(n) for n in sorted(lengths)}
    out = []
    seq = [("adaptive", None), ("random", RandomShareSelector(bank.b, share=1.0, seed=[SUBSAMPLE_SEED, k],
                                                            information=bank.selection_information))]
    if "adaptive-cs" in designs:
        seq.append(("adaptive-cs", ShrunkSlopeSelector(bank, seed=k)))
    for design, selector in seq:
        test = AdaptiveTest(bank, se_target=None, min_items=0, max_items=max(caps), seed=k, selector=selector)
        e = test.examinee
        while (item := test.next_item()) is not None:
            test.record(item, float(y[item]))
            if e.n in caps:
                items = np.asarray(e.items, dtype=np.int64)
                rnd = random_share_mask(e.selector, items, N)
                out.append((design, caps[e.n], items, rnd, _snapshot(e)))
    stops = [("stop", dict(se_target=0.2, min_items=30, max_items=500))]
    stops += [(f"ci-stop {w:g}", dict(se_target=None, min_items=0, max_items=500, rules=(CIWidth(w),)))
              for w in ci_widths]
    for design, kw in stops:
        test = AdaptiveTest(bank, seed=k, **kw)
        e = test.examinee
        while (item := test.next_item()) is not None:
            test.record(item, float(y[item]))
        items = np.asarray(e.items, dtype=np.int64)
        out.append((design, "stop", items, random_share_mask(e.selector, items, N), _snapshot(e)))
    for design, sets in (("anchor", anchors["correct"]), ("anchor-irt", anchors["irt"]), ("info", info_sets)):
        for n, items in sets.items():
            e = Examinee(bank, shared_default_selector(bank, seed=0))
            e.record_many(items, y[items])
            out.append((design, n, np.asarray(items), np.zeros(N, dtype=bool), _snapshot(e)))
    return out


def _snapshot(e) -> dict:
    return {"theta": e.theta, "se_m": e.measurement_se, "flagged": bool(e.person_fit.flagged)}


def _estimates(bank, bank_irt, y, design, n, items, rnd, s, anchors, lam) -> dict:
    """Every estimator that applies to one item set: name -> (estimate, lower, upper) (NaN: no interval)."""
    raw = y[items]
    N = bank.n_items
    theta = s["theta"]
    se_irt = float(np.hypot(s["se_m"], bank_irt.ability_error_sd(s["flagged"]) if bank_irt.model_error else 0.0))
    out = {"irt": irt_prediction(bank, theta)}
    out["p-irt"] = p_irt(bank_irt, items, raw, theta, se_irt, misfit=s["flagged"] and bool(bank_irt.model_error))
    if bank.factors is not None:
        out["factor"] = factor_estimate(bank, items, raw, misfit=s["flagged"] and bool(bank.model_error))
    naive = None
    if design.startswith("anchor"):
        naive = anchor_estimate(raw, anchors["irt" if design == "anchor-irt" else "correct"][n][1])
        out["anchor"] = naive
    elif rnd.any():
        naive, _ = sample_mean(N, raw, y[rnd])
        out["sample-mean"] = naive
        if rnd.sum() >= 2:
            out["design"] = design_estimate(bank, items, raw, np.flatnonzero(rnd), theta, s["se_m"])
    res = {k: (v.estimate, v.lower, v.upper) for k, v in out.items()}
    if naive is not None and np.isfinite(naive.estimate):
        res["_naive"] = (naive.estimate, np.nan, np.nan)
        lam_k = lam.get((design, n))
        if lam_k is not None:
            res["gp-irt"] = (lam_k * naive.estimate + (1 - lam_k) * out["p-irt"].estimate, np.nan, np.nan)
    return res


def _records(bank, bank_irt, Y, truth, lengths, designs, anchors, info_sets, lam, seed0, ci_widths=()):
    recs = []
    for k in range(Y.shape[0]):
        sets = {kind: {n: a[0] for n, a in by_n.items()} for kind, by_n in anchors.items()}
        for design, n, items, rnd, s in _runs(bank, Y[k], lengths, designs, seed0 + k, sets, info_sets, ci_widths):
            est = _estimates(bank, bank_irt, Y[k], design, n, items, rnd, s, anchors, lam)
            recs.append({"model": k, "design": design, "n": n, "given": int(items.size), "truth": float(truth[k]),
                         "est": {m: [float(x) for x in v] for m, v in est.items()}})
    return recs


def _anchor_sets(bank, C, lengths) -> dict:
    """tinyBenchmarks' anchors of each length: clustered on the items' answer vectors (``correct``) and on
    their IRT embedding (``irt``: each item's slope and intercept, a and −a·b, as tinyBenchmarks clusters
    its IRT model's item parameters)."""
    emb = np.vstack([bank.a, -bank.a * bank.b])  # (2, items): anchor_points clusters the columns
    return {"correct": {n: anchor_points(C, n, seed=n) for n in lengths if n < bank.n_items},
            "irt": {n: anchor_points(emb, n, seed=n) for n in lengths if n < bank.n_items}}


def _lambdas(recs) -> dict:
    """gp-IRT's λ per (design, length): the grid value minimising the squared error on ``recs``."""
    out = {}
    keys = {(r["design"], r["n"]) for r in recs}
    for key in keys:
        rs = [r for r in recs if (r["design"], r["n"]) == key and "_naive" in r["est"]]
        if not rs:
            continue
        naive = np.array([r["est"]["_naive"][0] for r in rs])
        pirt = np.array([r["est"]["p-irt"][0] for r in rs])
        truth = np.array([r["truth"] for r in rs])
        mse = [float(np.mean((lam * naive + (1 - lam) * pirt - truth) ** 2)) for lam in LAMBDAS]
        out[key] = float(LAMBDAS[int(np.argmin(mse))])
    return out


def table_unit(name: str, calib: int, holdout: int, lengths: tuple, designs: tuple, factors: int | None,
               ci_widths: tuple = ()) -> dict:
    """One table: banks, validation λ, then every design × estimator on the hold-out models."""
    with threadpool_limits(1):
        t0 = time.perf_counter()
        if factors is not None:
            factor_model.DEFAULT_FACTORS = int(factors)
        table = load_named(name)
        order = model_order(table)
        raw_all = table.mean_matrix()
        row = {str(m): j for j, m in enumerate(table.models)}
        col = {str(v): i for i, v in enumerate(table.items)}
        config = BacktestConfig()
        bank = fold_bank(table, config, order[:calib])
        keep = factor_model.DEFAULT_FACTORS
        factor_model.DEFAULT_FACTORS = 0  # the same bank without a factor model, with its own self-check
        bank_irt = fold_bank(table, config, order[:calib])
        factor_model.DEFAULT_FACTORS = keep
        t_banks = time.perf_counter() - t0
        tpos = np.array([col[str(x)] for x in bank.item_ids])
        C = raw_all[[row[m] for m in order[:calib]]][:, tpos]
        anchors = _anchor_sets(bank, C, lengths)
        abil = list(bank.diagnostics.get("abilities", {}).values())
        info_sets = {n: information_subset(bank, n, abil) for n in lengths if n < bank.n_items}
        # gp-IRT's λ on validation models with a bank that did not see them
        vbank = calibrate_binary(table.select_models(order[:VALID_CALIB]), response_model=bank.model.kind)
        vpos = np.array([col[str(x)] for x in vbank.item_ids])
        V = raw_all[[row[m] for m in order[VALID_CALIB:calib]]][:, vpos]
        Cv = raw_all[[row[m] for m in order[:VALID_CALIB]]][:, vpos]
        v_anchors = _anchor_sets(vbank, Cv, lengths)
        v_abil = list(vbank.diagnostics.get("abilities", {}).values())
        v_info = {n: information_subset(vbank, n, v_abil) for n in lengths if n < vbank.n_items}
        vrecs = _records(vbank, vbank, V, np.nanmean(V, axis=1), lengths, designs, v_anchors, v_info, {}, 10_000)
        lam = _lambdas(vrecs)
        start = calib + config.holdout_size * config.folds
        hold = order[start:start + holdout]
        H = raw_all[[row[m] for m in hold]][:, tpos]
        recs = _records(bank, bank_irt, H, np.nanmean(H, axis=1), lengths, designs, anchors, info_sets, lam, 0,
                        ci_widths)
        return {"table": name, "bank_items": bank.n_items, "factors": 0 if bank.factors is None else
                bank.factors.n_factors, "model_error": dict(bank.model_error),
                "model_error_irt": dict(bank_irt.model_error), "lambdas": {f"{d}@{n}": v for (d, n), v in lam.items()},
                "bank_seconds": t_banks, "seconds": time.perf_counter() - t0, "records": recs}


def summary(recs) -> dict:
    """(design, length, estimator) -> MAE, bias, coverage, width, models, mean items given."""
    out = {}
    groups: dict = {}
    for r in recs:
        for m, v in r["est"].items():
            if not m.startswith("_"):
                groups.setdefault((r["design"], r["n"], m), []).append((v, r["truth"], r["given"]))
    for (d, n, m), vs in groups.items():
        est = np.array([v[0][0] for v in vs])
        lo = np.array([v[0][1] for v in vs])
        hi = np.array([v[0][2] for v in vs])
        truth = np.array([v[1] for v in vs])
        err = est - truth
        has = np.isfinite(lo) & np.isfinite(hi)
        out[f"{d}|{n}|{m}"] = {
            "mae": float(np.mean(np.abs(err))), "bias": float(np.mean(err)),
            "coverage": float(np.mean((lo <= truth + 1e-12) & (truth <= hi + 1e-12))) if has.all() else None,
            "width": float(np.mean(hi - lo)) if has.all() else None,
            "models": len(vs), "items": float(np.mean([v[2] for v in vs]))}
    return out


def _key_order(k: str):
    d, n, m = k.split("|")
    designs = ["adaptive", "adaptive-cs", "random", "anchor", "anchor-irt", "info", "stop"]
    return (designs.index(d) if d in designs else len(designs), d, 10_000 if n == "stop" else int(n),
            ESTIMATORS.index(m) if m in ESTIMATORS else 99)


def show(name: str, s: dict) -> None:
    print(f"\n  {name}")
    print(f"    {'design':<12}{'items':>6} {'estimator':<12}{'MAE':>8}{'bias':>9}{'coverage':>10}{'width':>8}")
    for k in sorted(s, key=_key_order):
        d, n, m = k.split("|")
        v = s[k]
        cov = f"{v['coverage']:.3f}" if v["coverage"] is not None else "-"
        wid = f"{v['width']:.4f}" if v["width"] is not None else "-"
        items = f"{v['items']:.0f}" if n == "stop" else n
        print(f"    {d:<12}{items:>6} {m:<12}{v['mae']:>8.4f}{v['bias']:>+9.4f}{cov:>10}{wid:>8}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--half", choices=("tuning", "report", "both"), default="both")
    ap.add_argument("--tables", nargs="+", default=None, help="only these tables (one half named 'custom')")
    ap.add_argument("--calib", type=int, default=300)
    ap.add_argument("--holdout", type=int, default=200)
    ap.add_argument("--lengths", type=int, nargs="+", default=[20, 30, 100])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--common-slope", action="store_true", help="add the common-slope adaptive design")
    ap.add_argument("--ci-width", type=float, nargs="+", default=[], help="add the CIWidth stop at these half-widths")
    ap.add_argument("--factors", type=int, default=None, help="factors of the banks' factor model (default: the engine's)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--details", default=None, help="also write every record here")
    a = ap.parse_args(argv)
    halves = {"custom": a.tables} if a.tables else {
        k: v for k, v in (("tuning", TUNING), ("report", REPORT)) if a.half in (k, "both")}
    designs = ("adaptive", "random") + (("adaptive-cs",) if a.common_slope else ())
    out = {"settings": {"calib": a.calib, "holdout": a.holdout, "lengths": a.lengths, "designs": designs,
                        "factors": a.factors, "ci_width": a.ci_width, "subsample_seed": SUBSAMPLE_SEED}}
    details = {}
    t0 = time.perf_counter()
    for half, names in halves.items():
        with ProcessPoolExecutor(max_workers=max(1, a.jobs)) as ex:
            units = list(ex.map(table_unit, names, [a.calib] * len(names), [a.holdout] * len(names),
                                [tuple(a.lengths)] * len(names), [designs] * len(names), [a.factors] * len(names),
                                [tuple(a.ci_width)] * len(names)))
        print(f"\n{half} half: full-task accuracy (MAE / bias / 95% coverage / width)")
        out[half] = {}
        every = []
        for u in units:
            s = summary(u["records"])
            show(u["table"], s)
            out[half][u["table"]] = {"summary": s, **{k: u[k] for k in ("bank_items", "factors", "model_error",
                                                                        "model_error_irt", "lambdas",
                                                                        "bank_seconds", "seconds")}}
            every += u["records"]
        pool = summary(every)
        show(f"POOLED {half}", pool)
        out[half]["POOLED"] = {"summary": pool}
        details[half] = {u["table"]: u["records"] for u in units}
        print(f"  [{time.perf_counter() - t0:.0f} s]", file=sys.stderr, flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    if a.details:
        Path(a.details).write_text(json.dumps(details) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

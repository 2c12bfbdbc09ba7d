"""How honest and how accurate is the binary (2PL/3PL) path? The Open LLM Leaderboard dev tables, per half.

Tuning half: ollb/mmlu_pro_math_7b, ollb/tiny_gsm8k, ollb/tiny_hellaswag (defaults are chosen
here); report half: ollb/bbh_shuffled_objects_5, ollb/tiny_truthfulqa (only reported). Per table
and pooled per half:

1. **Ranking backtest** (engine/evaluation/backtest.py, the protocol of bench_honesty.py: 5 folds of 4
   hold-out models, uniform prices, 20 items per model, each fold's bank corrected by its own
   self-check): mean Kendall τ (adaptive, random at the same spend), items per 4-model set,
   confident-pair accuracy, the share of runs with any wrong confident pair, full-task 95%
   coverage and the share of |z| > 1.96.
2. **Single model**: hold-out models tested alone for 20, 30 and 100 items (capped at the bank's
   size: a row says the length asked for, ``given`` in the details the items given) with the
   engine's default test (``adaptive``: maximum information with the random half) and with every
   item drawn at random (``random``), each scored by the full-task estimator of the engine
   (engine/cat/full_task.py); and the plain mean of as many items drawn at random from the whole
   table, with the normal interval of a sample mean and the finite-population correction
   (``random-mean``). Figures: mean absolute error of the estimated full-benchmark accuracy, its
   bias, the coverage of the 95% interval and its mean width, against the model's accuracy on
   every item of the table.

Which models (the tables have thousands; a seeded rule, the same for every estimator): one
permutation of the table's sorted model names by ``numpy.random.default_rng(SUBSAMPLE_SEED)``.
The ranking backtest runs on its first ``calib + 20`` models (default 320: each fold's bank is
calibrated on the 316 not held out). The single-model bank is calibrated on the first ``calib``
models (default 300) and corrected by its own self-check on them, and tested on the next
``holdout`` models after the ranking subsample (default 200, fewer where the table has fewer):
models no bank of the bench saw.

    python benchmarks/bench_binary_honesty.py [--half tuning|report|both] [--seeds 5]
        [--calib 300] [--holdout 200] [--lengths 20 30 100] [--jobs 2] [--json out.json]
        [--details details.json] [--pairs pairs.json] [--tables NAME ...] [--skip-ranking] [--skip-single]
        [--full-run-share S|off] [--floor-items N|off] [--model-floor F (with --jobs 1)] [--settle-runs N]

Each table's confident pairs in the wrong order are printed below its ranking row (fold, seed, the two
models, D̂ ± SE, p_order, the true gap, each model's items, comparable random items, whether its
residual variance was at the floor, person-fit flag); ``--pairs`` writes every confident pair so
(engine/evaluation/run_records.py ``confident_pair_records``).

``--full-run-share`` and ``--floor-items`` set the ranking's stopping policy (engine/ranking/pairs/settle_policy.py;
default: the engine's); each table's row says why its runs stopped. The unresolved pairs of each fold's
first seed are run on until settled (``--settle-runs`` continuations each): the stated cost to settle
against the measured one, and the share of continuations inside the stated 80% range.
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

from threadpoolctl import threadpool_limits  # noqa: E402

from lm_eval_adaptive.data.named_tables import load_named  # noqa: E402
from lm_eval_adaptive.data.ollb import OLLB_REPORT, OLLB_TUNING  # noqa: E402
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig  # noqa: E402
from lm_eval_adaptive.engine.evaluation.backtest import fold_bank, pooled  # noqa: E402
from lm_eval_adaptive.engine.cat.adaptive_test import AdaptiveTest  # noqa: E402
from lm_eval_adaptive.engine.cat.estimation import DEFAULT_PRIOR_SD, Z95, GridPosterior  # noqa: E402
from lm_eval_adaptive.engine.cat.full_task import full_task_estimate  # noqa: E402
from lm_eval_adaptive.engine.ranking.pairs.metric_scale import MetricScale  # noqa: E402
from lm_eval_adaptive.engine.cat.selection import RandomShareSelector  # noqa: E402
from lm_eval_adaptive.sweep import run_backtests  # noqa: E402

TUNING = [f"ollb/{n}" for n in OLLB_TUNING]
REPORT = [f"ollb/{n}" for n in OLLB_REPORT]
#: The seed of the one permutation of each table's models that picks every subsample.
SUBSAMPLE_SEED = 20260
RANK_COLS = ("adaptive_tau", "random_tau", "items", "confident_accuracy", "confident_pairs", "any_wrong_share",
             "full_task_coverage", "share_abs_z_over_1_96", "tie_recall", "cost_share_of_full_run")
METHODS = ("adaptive", "random", "random-mean")


def model_order(table) -> list[str]:
    """The table's models in the bench's one seeded order (every subsample is a slice of it)."""
    names = sorted(str(m) for m in table.models)
    return [names[i] for i in np.random.default_rng(SUBSAMPLE_SEED).permutation(len(names))]


def ranking_subtable(table, calib: int, config: BacktestConfig):
    order = model_order(table)
    return table.select_models(order[:calib + config.holdout_size * config.folds])


def single_model_unit(name: str, calib: int, holdout: int, lengths: tuple, config: BacktestConfig) -> dict:
    """One table's single-model runs: a bank on the first ``calib`` models of the order (with its
    self-check correction), then each hold-out model tested alone by each method."""
    with threadpool_limits(1):
        t0 = time.perf_counter()
        table = load_named(name)
        order = model_order(table)
        start = calib + config.holdout_size * config.folds
        hold = order[start:start + holdout]
        bank = fold_bank(table, config, order[:calib])
        t_bank = time.perf_counter() - t0
        raw_all = table.mean_matrix()
        row = {str(m): j for j, m in enumerate(table.models)}
        tpos = np.array([{str(v): i for i, v in enumerate(table.items)}[str(x)] for x in bank.item_ids])
        N = bank.n_items
        caps = {min(int(n), N): int(n) for n in sorted(lengths)}  # items given -> the length asked for
        n_table = table.n_items
        records = []
        for k, m in enumerate(hold):
            raw_row = raw_all[row[m]]
            truth = float(np.nanmean(raw_row))
            raw_bank = raw_row[tpos]
            scaled = bank.scale(np.arange(N), raw_bank)
            post = GridPosterior(bank.prior_mean, DEFAULT_PRIOR_SD)
            post.update_many(bank.model, bank.b, scaled, **bank.item_params())
            theta_all, se_all = post.mean, post.sd
            for method in ("adaptive", "random"):
                selector = None if method == "adaptive" else RandomShareSelector(
                    bank.b, share=1.0, seed=[SUBSAMPLE_SEED, k], information=bank.selection_information)
                test = AdaptiveTest(bank, se_target=None, min_items=0, max_items=max(caps), seed=k, selector=selector)
                e = test.examinee
                while (item := test.next_item()) is not None:
                    test.record(item, float(scaled[item]))
                    if e.n in caps:
                        items = np.asarray(e.items, dtype=np.int64)
                        est = full_task_estimate(bank, items, raw_bank[items], e.theta, e.se, misfit=e.misfit)
                        records.append({"model": k, "method": method, "n": caps[e.n], "given": e.n, "truth": truth,
                                        "est": est["estimate"], "lo": est["lower"], "hi": est["upper"],
                                        "theta": e.theta, "se": e.se, "se_m": e.measurement_se,
                                        "misfit": bool(e.misfit), "theta_all": theta_all, "se_all": se_all})
            # the plain mean of n of the table's items drawn at random (every item, not the bank's alone)
            draw = np.random.default_rng([SUBSAMPLE_SEED, k, 1]).permutation(n_table)
            for n in sorted(lengths):
                m_n = min(int(n), n_table)
                records.append(random_mean_record(k, int(n), truth, raw_row[draw[:m_n]], n_table))
        return {"table": name, "bank_items": N, "calibration_models": calib, "holdout_models": len(hold),
                "model_error": dict(bank.model_error), "dropped": bank.diagnostics.get("dropped_by_reason", {}),
                "bank_seconds": t_bank, "seconds": time.perf_counter() - t0, "records": records}


def random_mean_record(k: int, n: int, truth: float, y: np.ndarray, n_total: int) -> dict:
    """The mean of ``n`` items drawn at random without replacement from ``n_total``, with the normal
    interval of a sample mean and the finite-population correction."""
    p = float(np.mean(y))
    m = y.size
    var = np.var(y, ddof=1) / m if m > 1 else 0.25
    half = Z95 * float(np.sqrt(max(var, 1e-12) * max(0.0, 1.0 - m / n_total)))
    return {"model": k, "method": "random-mean", "n": n, "given": int(y.size), "truth": truth, "est": p,
            "lo": p - half, "hi": p + half}


def single_summary(records) -> dict:
    """Per method and length: MAE, bias, coverage and mean width of the 95% intervals, models."""
    out = {}
    for method in METHODS:
        for n in sorted({r["n"] for r in records if r["method"] == method}):
            rs = [r for r in records if r["method"] == method and r["n"] == n]
            err = np.array([r["est"] - r["truth"] for r in rs])
            cov = np.array([r["lo"] <= r["truth"] <= r["hi"] for r in rs])
            width = np.array([r["hi"] - r["lo"] for r in rs])
            out[f"{method}@{n}"] = {"mae": float(np.mean(np.abs(err))), "bias": float(np.mean(err)),
                                    "coverage": float(np.mean(cov)), "width": float(np.mean(width)), "models": len(rs)}
    return out


def show_ranking(rows, title):
    print(f"\n{title}: ranking backtest")
    print(f"{'table':<32}" + "".join(f"{c[:12]:>13}" for c in RANK_COLS))
    for x in rows:
        print(f"{x['table']:<32}" + "".join(f"{x[c]:>13.3f}" for c in RANK_COLS))
    for x in rows:
        if x.get("floored_stops") is not None and x.get("runs"):
            print(f"  {x['table']}: residual variance at its floor in {x['floored_stops']} of {x['models_ranked']} "
                  f"model stops; metric-scale coverage there {x['floored_coverage']:.3f}, elsewhere "
                  f"{x['unfloored_coverage']:.3f}")
    for x in rows:
        if x.get("stopped_because"):
            print(f"  {x['table']} stopped because: "
                  + ", ".join(f"{k} {v}" for k, v in sorted(x["stopped_because"].items())))
    st = rows[-1].get("settle") or {}
    if st.get("pairs") and "within_range" in st:
        print(f"  cost to settle, {st['pairs']} unresolved pairs run on ({st['runs_per_pair']} continuations each): "
              f"the stated 80% range holds {st['within_range']:.2f} of the continuations (median hi/lo "
              f"{st['median_range_ratio']:.1f}); the stated point within 2x of one continuation {st['within_2x']:.2f}")


def show_single(summaries, title):
    print(f"\n{title}: single model (MAE / bias / coverage / width of the full-task accuracy)")
    for name, s in summaries:
        print(f"  {name}")
        for key, v in s.items():
            print(f"    {key:<18} MAE {v['mae']:.4f}  bias {v['bias']:+.4f}  coverage {v['coverage']:.3f}"
                  f"  width {v['width']:.4f}  ({v['models']} models)")


def show_wrong_pairs(results, names) -> None:
    """Each table's confident pairs in the wrong order, one line each (the model ranked above first)."""
    for name, r in zip(names, results):
        for p in r.confident_pairs:
            if p["right"]:
                continue
            ma, mb = (p["models"][m] for m in (p["a"], p["b"]))
            print(f"  {name} wrong: fold {p['fold']} seed {p['seed']} D̂ {p['difference']:+.3f} ± {p['se']:.3f} "
                  f"p_order {p['p_order']:.3f}, true gap {p['true_gap']:+.3f} (bank's items {p['true_gap_bank']:+.3f})")
            for m, st in ((p["a"], ma), (p["b"], mb)):
                print(f"    {m}: estimate {st['estimate']:.3f} (truth {st['truth']:.3f}), {st['items']} items, "
                      f"{st['comparable_random_items']} comparable random, s² {st['s2_residuals']:.3f}"
                      f"{' floored to ' + format(st['s2_used'], '.3f') if st['floored'] else ''}, "
                      f"θ̂ {st['theta']:.2f} ± {st['theta_se']:.2f}{', person-fit flagged' if st['misfit'] else ''}")


def _share_or_off(v: str):
    return None if v == "off" else float(v)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--half", choices=("tuning", "report", "both"), default="both")
    ap.add_argument("--tables", nargs="+", default=None, help="only these tables (one half named 'custom')")
    ap.add_argument("--seeds", type=int, default=5, help="seeds of the ranking backtest")
    ap.add_argument("--calib", type=int, default=300, help="calibration models (see the module docstring)")
    ap.add_argument("--holdout", type=int, default=200, help="hold-out models of the single-model part")
    ap.add_argument("--lengths", type=int, nargs="+", default=[20, 30, 100])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--skip-ranking", action="store_true")
    ap.add_argument("--skip-single", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--details", default=None, help="also write every single-model run here")
    ap.add_argument("--pairs", default=None, help="also write every confident pair of the ranking here")
    ap.add_argument("--model-floor", type=float, default=None,
                    help="MetricScale.model_floor for this run (an experiment; needs --jobs 1: set in this process)")
    ap.add_argument("--full-run-share", type=_share_or_off, default=BacktestConfig.full_run_share,
                    help="the stopping policy's share of a full run (off: none)")
    ap.add_argument("--pair-share", type=_share_or_off, default=BacktestConfig.pair_share,
                    help="the stopping policy's pair rule: a share of a full run of the pair (off: none)")
    ap.add_argument("--floor-items", type=_share_or_off, default=BacktestConfig.settle_floor_items,
                    help="the stopping policy's floor in items per model (off: none)")
    ap.add_argument("--settle-runs", type=int, default=BacktestConfig.settle_runs,
                    help="continuations per unresolved pair when the cost to settle is measured")
    a = ap.parse_args(argv)
    if a.model_floor is not None:
        if a.jobs != 1:
            ap.error("--model-floor is set in this process: run it with --jobs 1")
        MetricScale.model_floor = a.model_floor
    halves = {"custom": a.tables} if a.tables else {
        k: v for k, v in (("tuning", TUNING), ("report", REPORT)) if a.half in (k, "both")}
    config = BacktestConfig(seeds=a.seeds, full_run_share=a.full_run_share, settle_floor_items=a.floor_items,
                            settle_runs=a.settle_runs, pair_share=a.pair_share)
    out = {"settings": {"model_floor": MetricScale.model_floor, "seeds": a.seeds, "calib": a.calib,
                        "holdout": a.holdout, "lengths": a.lengths,
                        "full_run_share": config.full_run_share, "settle_floor_items": config.settle_floor_items,
                        "pair_share": config.pair_share,
                        "settle_runs": config.settle_runs,
                        "subsample_seed": SUBSAMPLE_SEED, "prices": "uniform", "holdout_size": config.holdout_size,
                        "folds": config.folds, "target_items": config.target_items}}
    details, pairs = {}, {}
    t0 = time.perf_counter()
    for half, names in halves.items():
        out[half] = {}
        if not a.skip_ranking:
            tables = [ranking_subtable(load_named(n), a.calib, config) for n in names]
            results = run_backtests(tables, config=config, jobs=a.jobs)
            rows = [{"table": n, **pooled([r]), "bank_items": float(np.mean([f["bank_items"] for f in r.folds])),
                     "discrimination": r.discrimination, "seconds": r.seconds, "stopped_because": r.stopped_because}
                    for n, r in zip(names, results)]
            stops = {}
            for r in results:
                for k, v in r.stopped_because.items():
                    stops[k] = stops.get(k, 0) + v
            pool = {"table": f"POOLED {half}", **pooled(results), "stopped_because": stops}
            show_ranking(rows + [pool], f"{half} half ({len(names)} tables, {a.seeds} seeds, "
                                        f"{tables[0].n_models} models per table)")
            show_wrong_pairs(results, names)
            pairs[half] = {n: r.confident_pairs for n, r in zip(names, results)}
            out[half]["ranking"] = {"tables": rows, "pooled": pool}
            print(f"  [{time.perf_counter() - t0:.0f} s]", file=sys.stderr, flush=True)
        if not a.skip_single:
            with ProcessPoolExecutor(max_workers=max(1, a.jobs)) as ex:
                units = list(ex.map(single_model_unit, names, [a.calib] * len(names), [a.holdout] * len(names),
                                    [tuple(a.lengths)] * len(names), [config] * len(names)))
            summaries = [(u["table"], single_summary(u["records"])) for u in units]
            every = [r | {"table": u["table"]} for u in units for r in u["records"]]
            summaries.append((f"POOLED {half}", single_summary(every)))
            show_single(summaries, f"{half} half")
            out[half]["single"] = {name: s for name, s in summaries}
            out[half]["single_banks"] = {u["table"]: {k: u[k] for k in ("bank_items", "calibration_models",
                                                                       "holdout_models", "model_error", "dropped",
                                                                       "bank_seconds", "seconds")} for u in units}
            details[half] = every
            print(f"  [{time.perf_counter() - t0:.0f} s]", file=sys.stderr, flush=True)
    print(f"\n{time.perf_counter() - t0:.0f} s", file=sys.stderr)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    if a.details:
        Path(a.details).write_text(json.dumps(details) + "\n")
    if a.pairs:
        Path(a.pairs).write_text(json.dumps(pairs, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

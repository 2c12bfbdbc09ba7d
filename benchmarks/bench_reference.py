"""Ours against the paper's reference code (trismik/continuous-cat) on the same hold-out sets (issue 32).

The reference code is not part of this repository: fetch it yourself (``git clone
https://github.com/trismik/continuous-cat``) and pass its checkout as ``--reference PATH``; this script
imports its ``src/`` (calibration, the ranker) and its experiment's budget rule, and runs its protocol
(``experiments/experiment.py::run_adaptive_phase``) on our dev tables instead of its bundled data:

* hold-out sets: ours, which are the reference's partition (``RandomState(42)`` shuffle of the sorted
  names, consecutive sets of 4, as many complete sets as fit, at most 5); each fold's set is taken from
  our backtest's fold summary, so both rank exactly the same models with the same calibration models;
* calibration: the reference's ``calibrate`` on the other models' scores (one observation per model and
  item here: the tables have one temperature), its global min/max, its negative-discrimination filter;
* budget: the reference's ``compute_budget`` (mean item cost × 4 × 20 items) with the same price for every
  model ($1 / $3 per 1M tokens, as our ``--prices uniform``) and the table's token counts (one token in
  and out per item where a table has none, as our backtest);
* the ranked scores: the hold-out models' scores min-max normalised over the set (the reference's
  ``get_all_scores_normalized``), 0.5 for a missing score (its callback's default); ``rank_models`` with
  γ = 0.95, 10 warm-up items, relative costs 1, ``np.random.seed(seed)``;
* τ: Kendall τ of each side's ranking against the same truth, our fold's full-data ranking; items: all
  items given to the set's 4 models.

Ours is ``backtest`` with the same settings (1 seed by default, no settle checks). Prints per-table and
pooled τ and items of both; ``--json`` writes them.

    python benchmarks/bench_reference.py --reference /tmp/continuous-cat --half all --seeds 1 --jobs 1
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lm_eval_adaptive.data.tables import load_any_table  # noqa: E402
from lm_eval_adaptive.engine.evaluation.backtest import backtest  # noqa: E402
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig  # noqa: E402
from lm_eval_adaptive.engine.evaluation.backtest_figures import kendall_tau  # noqa: E402
from lm_eval_adaptive.engine.evaluation.fold_parts import table_item_tokens  # noqa: E402
from lm_eval_adaptive.engine.ranking.paired_design import DESIGNS  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_honesty import REPORT, TUNING  # noqa: E402

REALSUMM = [f"realsumm/{m}" for m in ("rouge1", "rouge2", "rougeL")]
PRICE = {"input": 1.0, "output": 3.0}  # $ per 1M tokens, every model (our DEFAULT_PRICE, --prices uniform)


def load_reference(path: Path):
    """The reference's modules: (calibrate, Item, rank_models, compute_budget)."""
    for sub in ("src", "experiments"):
        p = str(path / sub)
        if p not in sys.path:
            sys.path.insert(0, p)
    calib = importlib.import_module("calibration.difficulty")
    cat = importlib.import_module("continuous_cat.cat")
    ranker = importlib.import_module("continuous_cat.ranker")
    experiment = importlib.import_module("experiment")
    return calib.calibrate, cat.Item, ranker.rank_models, experiment.compute_budget


def reference_fold(ref, raw: np.ndarray, models: list, hold: list, tokens: dict, seed: int) -> dict:
    """The reference's ``run_adaptive_phase`` on one hold-out set of a table: its ranking and items."""
    calibrate, Item, rank_models, compute_budget = ref
    row = {m: i for i, m in enumerate(models)}
    held_in = [m for m in models if m not in hold]
    cal_scores, observations, values = {}, {}, []
    for m in held_in:
        r = raw[row[m]]
        ok = np.flatnonzero(~np.isnan(r))
        cal_scores[m] = {int(i): float(r[i]) for i in ok}
        observations[m] = {int(i): [float(r[i])] for i in ok}
        values.append(r[ok])
    values = np.concatenate(values)
    cal = calibrate(cal_scores, estimate_k=True, filter_negative=True, global_min_score=float(values.min()),
                    global_max_score=float(values.max()), all_observations=observations)
    items = [Item(id=i, difficulty=d, discrimination=cal.discrimination, input_tokens=tokens[i]["input_tokens"],
                  output_tokens=tokens[i]["output_tokens"]) for i, d in cal.difficulties.items() if i in tokens]
    costs = {m: dict(PRICE) for m in hold}
    budget = compute_budget(tokens, costs, hold, 20)
    h = raw[[row[m] for m in hold]]
    lo, hi = float(np.nanmin(h)), float(np.nanmax(h))
    span = hi - lo

    def callback(m):
        r = raw[row[m]]

        def score(i: int) -> float:
            v = r[i]
            if np.isnan(v):
                return 0.5
            return 0.5 if span < 1e-9 else float((v - lo) / span)
        return score

    np.random.seed(seed)
    res = rank_models(items=items, model_callbacks={m: callback(m) for m in hold}, model_costs=costs,
                      confidence_threshold=0.95, min_items=10, total_budget=budget, max_items_per_model=None,
                      relative_costs={m: 1.0 for m in hold})
    return {"ranking": list(res.ranking), "items": int(res.total_items), "discrimination": float(cal.discrimination)}


def table_tokens(table) -> dict:
    """item index → the reference's token record (one token in and out where the table has none)."""
    in_tok, out_tok, _ = table_item_tokens(table)
    return {i: {"input_tokens": int(round(a)), "output_tokens": int(round(b))}
            for i, (a, b) in enumerate(zip(np.nan_to_num(in_tok, nan=1.0), np.nan_to_num(out_tok, nan=1.0)))}


def compare(name: str, ref, config: BacktestConfig) -> dict:
    table = load_any_table(name)
    t0 = time.perf_counter()
    ours = backtest(table, config=config)
    t_ours = time.perf_counter() - t0
    raw = table.mean_matrix()
    models = [str(m) for m in table.models]
    tokens = table_tokens(table)
    taus, items = [], []
    t0 = time.perf_counter()
    for fold in ours.folds:
        for seed in range(config.seeds):
            r = reference_fold(ref, raw, models, list(fold["holdout"]), tokens, seed)
            taus.append(kendall_tau(r["ranking"], list(fold["truth_ranking"])))
            items.append(r["items"])
    t_ref = time.perf_counter() - t0
    a = ours.method("adaptive")
    return {"table": name, "sets": len(ours.folds), "ours_tau": float(a.tau), "ours_items": float(a.items),
            "ref_tau": float(np.mean(taus)), "ref_items": float(np.mean(items)),
            "ours_seconds": round(t_ours, 1), "ref_seconds": round(t_ref, 1)}


def pooled(rows: list) -> dict:
    """Mean over tables of both sides' τ and items per set."""
    return {k: float(np.mean([r[k] for r in rows])) for k in ("ours_tau", "ref_tau", "ours_items", "ref_items")}


def pool_lines(rows: list) -> list[str]:
    """The pooled lines: every table, then each group of tables (tuning half, report half, REALSumm) present."""
    out = []
    groups = [("all", rows)] + [(g, [r for r in rows if r["table"] in names])
                                for g, names in (("tuning", TUNING), ("report", REPORT), ("realsumm", REALSUMM))]
    for g, rs in groups:
        if not rs or (g != "all" and len(rs) == len(rows)):
            continue
        p = pooled(rs)
        out.append(f"{'POOLED ' + g + f' ({len(rs)} tables)':33} {p['ours_tau']:9.3f} {p['ref_tau']:8.3f} "
                   f"{p['ours_items']:10.1f} {p['ref_items']:9.1f}   ours - reference tau "
                   f"{p['ours_tau'] - p['ref_tau']:+.3f}, items ours / reference {p['ours_items'] / p['ref_items']:.2f}x")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", type=Path, default=None, help="a checkout of trismik/continuous-cat")
    ap.add_argument("--half", choices=("tuning", "report", "realsumm", "all"), default="all")
    ap.add_argument("--tables", nargs="+", default=None, help="only these tables")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--design", choices=DESIGNS, default=BacktestConfig.design, help="our ranker's item design")
    ap.add_argument("--json", default=None)
    ap.add_argument("--show", type=Path, default=None, help="print the pooled lines of a saved --json run and stop")
    a = ap.parse_args(argv)
    if a.show is not None:
        print("\n".join(pool_lines(json.loads(a.show.read_text())["tables"])))
        return 0
    if a.reference is None:
        print("error: --reference PATH is required (a checkout of trismik/continuous-cat)", file=sys.stderr)
        return 2
    if not (a.reference / "src" / "continuous_cat" / "ranker.py").is_file():
        print(f"error: --reference {a.reference}: no src/continuous_cat/ranker.py there "
              "(a checkout of trismik/continuous-cat)", file=sys.stderr)
        return 2
    ref = load_reference(a.reference)
    names = a.tables or {"tuning": TUNING, "report": REPORT, "realsumm": REALSUMM,
                         "all": TUNING + REPORT + REALSUMM}[a.half]
    config = BacktestConfig(seeds=a.seeds, settle_seeds=0, design=a.design)
    rows = []
    print(f"{'table':28} {'sets':>4} {'ours tau':>9} {'ref tau':>8} {'ours items':>10} {'ref items':>9}")
    for name in names:
        r = compare(name, ref, config)
        rows.append(r)
        print(f"{name:28} {r['sets']:4d} {r['ours_tau']:9.3f} {r['ref_tau']:8.3f} {r['ours_items']:10.1f} "
              f"{r['ref_items']:9.1f}", flush=True)
    pool = pooled(rows)
    print("\n".join(pool_lines(rows)))
    if a.json:
        Path(a.json).write_text(json.dumps({"settings": {"seeds": a.seeds, "design": a.design,
                                                         "reference": "trismik/continuous-cat"},
                                            "tables": rows, "pooled": pool}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

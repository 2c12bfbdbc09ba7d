"""Figures of a backtest summed over its runs or pooled over several tables' results: the stated against the
measured cost to settle (:func:`settle_summary`), shares and ratios of counts, the SE-calibration z summary and
:func:`pooled` (the pooled figures over tables, from the summed counts)."""

from __future__ import annotations

import numpy as np

from lm_eval_adaptive.engine.cat.estimation import Z95

__all__ = ["pooled", "settle_summary", "ratio", "share_of", "z_summary"]


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def settle_summary(records: list) -> dict:
    """The stated cost to settle of the unresolved pairs run on against the measured one: pairs, the
    mean stated and measured items (one continuation: the run's own), the share within a factor 2 of the
    one continuation and of the median of several (``median``), and the median ratio."""
    if not records:
        return {"pairs": 0}
    st = np.array([max(r["stated"], 1) for r in records], dtype=float)
    one = np.array([max(r["measured"], 1) for r in records], dtype=float)
    med = np.array([max(r["median"], 1) for r in records], dtype=float)

    def within(x):
        ratio = st / x
        return float(np.mean((ratio <= 2) & (ratio >= 0.5)))

    out = {"pairs": len(records), "mean_stated": float(st.mean()), "mean_measured": float(one.mean()),
           "mean_measured_median": float(med.mean()), "within_2x": within(one), "within_2x_median": within(med),
           "median_ratio": float(np.median(st / one)), "median_ratio_median": float(np.median(st / med)),
           "runs_per_pair": int(max(len(r["runs"]) for r in records))}
    ranges = [r.get("range") for r in records]
    if all(r is not None for r in ranges):  # the stated 80% range: the share of continuations inside it
        inside = [lo <= m <= hi for r, (lo, hi) in zip(records, ranges) for m in r["runs"]]
        out["within_range"] = float(np.mean(inside))
        out["range_level"] = 0.8
        out["median_range_ratio"] = float(np.median([max(hi, 1) / max(lo, 1) for lo, hi in ranges]))
    oracle = [r.get("oracle") for r in records]
    if all(o is not None for o in oracle):  # the same projection at the true gap: what D̂'s noise costs
        orc = np.maximum(np.array(oracle, dtype=float), 1)
        out["oracle_within_2x"] = float(np.mean((orc / one <= 2) & (orc / one >= 0.5)))
        out["oracle_within_2x_median"] = float(np.mean((orc / med <= 2) & (orc / med >= 0.5)))
        out["mean_oracle"] = float(orc.mean())
    return out


def share_of(flags) -> float:
    a = np.asarray(list(flags), dtype=float)
    return float(a.mean()) if a.size else float("nan")


def z_summary(zs) -> dict:
    z = np.asarray(zs, dtype=float)
    if not z.size:
        return {"share_abs_z_over_1_96": float("nan"), "mean_z": float("nan"), "sd_z": float("nan"), "n": 0}
    return {"share_abs_z_over_1_96": float(np.mean(np.abs(z) > Z95)), "mean_z": float(z.mean()),
            "sd_z": float(z.std()), "n": int(z.size)}


def pooled(results) -> dict:
    """Figures pooled over several tables' results: shares from the summed counts, means of τ and items."""
    c = {k: sum(r.counts.get(k, 0) for r in results) for k in
         ("confident_right", "confident", "ties_tp", "ties_fp", "ties_fn", "covered", "models", "z_over_1_96", "z",
          "runs_any_wrong", "runs")}

    def share(a, b):
        return c[a] / c[b] if c[b] else float("nan")

    tp, fp, fn = c["ties_tp"], c["ties_fp"], c["ties_fn"]
    extra = {k: sum(r.counts.get(k, 0) for r in results) for k in
             ("covered_theta", "covered_metric", "equivalent_right", "equivalent", "tied_ordered", "tied",
              "floored", "floored_covered")}
    settle = settle_summary([x for r in results for x in r.settle_records])
    return {"tables": len(results), "folds": sum(r.folds_run for r in results),
            "folds_fallen_back": sum(r.folds_fallen_back for r in results),
            "adaptive_tau": float(np.mean([r.adaptive.tau for r in results])),
            "random_tau": float(np.mean([r.random.tau for r in results])),
            "shared_random_tau": float(np.mean([r.method("shared_random").tau for r in results])),
            "fixed_tau": float(np.mean([r.fixed.tau for r in results])),
            "fixed_matched_tau": float(np.mean([r.method("fixed_matched").tau for r in results])),
            "items": float(np.mean([r.adaptive.items for r in results])),
            "fixed_items": float(np.mean([r.fixed.items for r in results])),
            "fixed_matched_items": float(np.mean([r.method("fixed_matched").items for r in results])),
            "shared_random_items": float(np.mean([r.method("shared_random").items for r in results])),
            "random_items": float(np.mean([r.random.items for r in results])),
            "confident_accuracy": share("confident_right", "confident"), "confident_pairs": c["confident"],
            "any_wrong_share": share("runs_any_wrong", "runs"), "runs": c["runs"],
            "tie_precision": tp / (tp + fp) if tp + fp else float("nan"),
            "tie_recall": tp / (tp + fn) if tp + fn else float("nan"),
            "full_task_coverage": share("covered", "models"),
            "theta_full_task_coverage": ratio(extra["covered_theta"], c["models"]),
            "metric_full_task_coverage": ratio(extra["covered_metric"], c["models"]),
            # the metric-scale interval where the residual variance was at its floor, and elsewhere
            "models_ranked": c["models"], "floored_stops": extra["floored"],
            "floored_coverage": ratio(extra["floored_covered"], extra["floored"]),
            "unfloored_coverage": ratio(extra["covered_metric"] - extra["floored_covered"],
                                         c["models"] - extra["floored"]),
            "share_abs_z_over_1_96": share("z_over_1_96", "z"),
            "equivalence_accuracy": ratio(extra["equivalent_right"], extra["equivalent"]),
            "equivalent_claims": extra["equivalent"],
            "tied_pairs_ordered_share": ratio(extra["tied_ordered"], extra["tied"]), "tied_pairs": extra["tied"],
            "settle": settle,
            "cost_share_of_full_run": float(np.mean([r.cost_share_of_full_run for r in results]))}

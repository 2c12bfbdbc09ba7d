"""The model error a bank's self-check measures, and the correction the engine then applies.

The response model is an approximation: on models it never saw, θ̂ misses the ability the
same bank gives on every item by more than the posterior SE says, and full-task estimates
miss the true mean by more than their interval allows (item × model interaction, models
whose curve differs). Most of that miss is a bias of the model's curve against the bank's,
which does not shrink as items are added. Leave-models-out cross-validation on the
calibration history (:mod:`lm_eval_adaptive.engine.evaluation.self_check`, and nested inside every
backtest fold) yields, per held-out model run, the miss ``d = θ̂ − θ̂_all`` against its stated
variance ``s2 = SE² − SE_all²``, the full-task miss ``err = T − T̂`` against the interval's
half-widths (at SE and at 2·SE, so the part that grows with SE is known), and whether the run
was flagged by the person-fit statistic.

:func:`correction_from_records` turns them into two *additive* model-error SDs, each measured
separately for runs that fit and runs the person-fit statistic flagged (a flagged model gets
its own, wider, correction). Both are the smallest values that cover 95% of the held-out runs
(the stated level, no tuned constant):

* ``ability_sd`` (τ): every ability SE becomes √(SE² + τ²); τ² is the 95% quantile of
  d²/1.96² − s2, so 95% of the held-out |z| = |d| / √(s2 + τ²) are within 1.96;
* ``full_task_sd`` (σ, metric units): full-task intervals (at the corrected SE) are widened by
  1.96·σ in quadrature; σ² is the 95% quantile of (err² − h²)/1.96², h the interval's
  half-width on the side of the miss, so 95% of the held-out misses fall inside.

Keys: ``ability_sd``, ``full_task_sd`` (runs that fit), ``ability_sd_misfit``,
``full_task_sd_misfit`` (flagged runs; the pooled value when fewer than
:data:`MIN_CLASS_RUNS` were flagged), ``runs``, ``misfit_runs``.

**Single-model leg** (:func:`single_model_check`, used for 2PL/3PL banks). The ranker's runs
measure the miss at the ranker's budget (about 20 items per model) on a few held-out models. On
0/1 data the miss grows with the test's length under maximum-information selection (the items a
test picks are those whose estimated slope is highest, so their information is overstated:
docs/binary.md), so a correction measured at 20 items leaves longer tests over-confident. The
single-model leg holds out more models (folds of the calibration history, each bank calibrated
on the rest), tests each alone with the engine's default test and records the same miss after
:data:`SINGLE_MODEL_LENGTHS` items; its records join the ranker's, so the correction covers
95% of runs at every length measured.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from lm_eval_adaptive.engine.cat.adaptive_test import AdaptiveTest
from lm_eval_adaptive.engine.cat.estimation import DEFAULT_PRIOR_SD, Z95, GridPosterior
from lm_eval_adaptive.engine.cat.full_task import full_task_estimate

__all__ = ["correction_from_records", "corrected_figures", "describe_correction", "single_model_records",
           "single_model_check", "MIN_CLASS_RUNS", "SINGLE_MODEL_LENGTHS", "SINGLE_MODEL_FOLDS",
           "SINGLE_MODEL_PER_FOLD", "Z95"]

#: Test lengths at which the single-model leg records the miss (capped at the bank's size): up to 400
#: items, so that a test stopped on its full-task interval (``--ci-width``: 200-400 items on a
#: 1,351-item bank at ±0.02-0.03) stops where the correction was measured.
SINGLE_MODEL_LENGTHS = (20, 30, 50, 100, 200, 400)
#: Folds of the single-model leg, and the most models each holds out (a tenth of the models at most).
SINGLE_MODEL_FOLDS = 5
SINGLE_MODEL_PER_FOLD = 40

#: Fewest runs a person-fit class needs for its own constants (else the pooled ones): a 95%
#: quantile of fewer runs is little more than their maximum.
MIN_CLASS_RUNS = 20


def _arrays(recs) -> dict:
    err = np.array([r["err"] for r in recs], dtype=float)
    up = err > 0
    return {"d": np.array([r["d"] for r in recs], dtype=float),
            "s2": np.array([r["s2"] for r in recs], dtype=float),
            "se": np.array([r.get("se", np.nan) for r in recs], dtype=float),
            "err": err,
            "h1": np.where(up, [r["hi"] for r in recs], [r["lo"] for r in recs]),
            "h2": np.where(up, [r["hi2"] for r in recs], [r["lo2"] for r in recs]),
            "misfit": np.array([bool(r.get("misfit", False)) for r in recs]),
            # what the full-task model error is multiplied by in that run's interval (the factor estimate's
            # unseen share; 1 for the response model's estimate, and for records that do not say)
            "u": np.array([float(r.get("u", 1.0)) for r in recs], dtype=float),
            # the single-model leg's test length (0: a ranker's run): the runs are covered length by length
            "group": np.array([int(r.get("n", 0)) if r.get("leg") == "single" else 0 for r in recs])}


def _widened(a: dict, tau: np.ndarray) -> np.ndarray:
    """The full-task half-widths with √(SE² + τ²) in place of SE: the ability part of the interval
    grows about linearly in the SE (h at SE, h2 at 2·SE)."""
    se = a["se"]
    ok = np.isfinite(se) & (se > 0)
    factor = np.where(ok, np.sqrt(np.where(ok, se, 1.0) ** 2 + tau ** 2) / np.where(ok, se, 1.0), 1.0)
    return a["h1"] + (factor - 1.0) * np.maximum(a["h2"] - a["h1"], 0.0)


def _constants(a: dict, sel: np.ndarray, level: float) -> tuple[float, float]:
    """(τ, σ) from the runs ``sel``: the smallest values with which ``level`` of them are covered, and
    ``level`` of each group's (the ranker's runs; the single-model leg's at each length) where a group
    has at least :data:`MIN_CLASS_RUNS` runs: the correction holds at every length measured, not on
    the pooled runs alone."""
    if not sel.any():
        return 0.0, 0.0
    groups = [sel & (a["group"] == g) for g in np.unique(a["group"][sel])]
    groups = [g for g in groups if g.sum() >= MIN_CLASS_RUNS]
    if len(groups) < 2:
        return _pooled_constants(a, sel, level)
    tau = max(_pooled_constants(a, g, level)[0] for g in [sel, *groups])
    sig = max(_sigma(a, g, tau, level) for g in [sel, *groups])
    return tau, sig


def _sigma(a: dict, sel: np.ndarray, tau: float, level: float) -> float:
    h = _widened({k: v[sel] for k, v in a.items()}, np.full(int(sel.sum()), tau))
    u = a["u"][sel]
    with np.errstate(invalid="ignore", divide="ignore"):  # σ² that brings each miss inside (a full run: none)
        need_sig2 = np.where(u > 0, (a["err"][sel] ** 2 - h ** 2) / (Z95 * np.where(u > 0, u, 1.0)) ** 2, 0.0)
    return float(np.sqrt(max(float(np.quantile(need_sig2, level)), 0.0)))


def _pooled_constants(a: dict, sel: np.ndarray, level: float) -> tuple[float, float]:
    """(τ, σ) from the runs ``sel`` taken together."""
    need_tau2 = a["d"][sel] ** 2 / Z95 ** 2 - a["s2"][sel]  # τ² that brings each |z| to 1.96
    tau = float(np.sqrt(max(float(np.quantile(need_tau2, level)), 0.0)))
    return tau, _sigma(a, sel, tau, level)


def correction_from_records(records, *, level: float = 0.95) -> dict:
    """The correction (see the module docstring) from self-check records; {} without records."""
    recs = list(records)
    if not recs:
        return {}
    a = _arrays(recs)
    every = np.ones(len(recs), dtype=bool)
    tau, sig = _constants(a, every, level)
    mis = a["misfit"]
    tau_f, sig_f = _constants(a, ~mis, level) if (~mis).sum() >= MIN_CLASS_RUNS else (tau, sig)
    tau_m, sig_m = _constants(a, mis, level) if mis.sum() >= MIN_CLASS_RUNS else (tau, sig)
    return {"ability_sd": round(tau_f, 6), "full_task_sd": round(sig_f, 8),
            "ability_sd_misfit": round(tau_m, 6), "full_task_sd_misfit": round(sig_m, 8),
            "runs": len(recs), "misfit_runs": int(mis.sum())}


def corrected_figures(records, correction: dict) -> tuple[float, float]:
    """(full-task coverage, share of |z| > 1.96) of the corrected intervals on the same records."""
    recs = list(records)
    if not recs:
        return float("nan"), float("nan")
    a = _arrays(recs)
    mis = a["misfit"]
    tau = np.where(mis, correction.get("ability_sd_misfit", 0.0), correction.get("ability_sd", 0.0))
    sig = np.where(mis, correction.get("full_task_sd_misfit", 0.0), correction.get("full_task_sd", 0.0))
    ok = a["s2"] + tau ** 2 > 0
    z = np.abs(a["d"][ok]) / np.sqrt(a["s2"][ok] + tau[ok] ** 2)
    h = np.hypot(_widened(a, tau), Z95 * sig * a["u"])
    return float(np.mean(np.abs(a["err"]) <= h)), float(np.mean(z > Z95)) if z.size else float("nan")


def describe_correction(c: dict) -> str:
    """The correction on one line, for reports."""
    if not c:
        return "no model-error correction"
    tau, tau_m = c.get("ability_sd", 0.0), c.get("ability_sd_misfit", 0.0)
    sig, sig_m = c.get("full_task_sd", 0.0), c.get("full_task_sd_misfit", 0.0)
    ability = (f"every ability SE widened to √(SE² + τ²), model error τ = {tau:.3g} (τ = {tau_m:.3g} for a model "
               f"the person-fit statistic flags: measured on the flagged runs alone)")
    if sig == 0 and sig_m == 0:
        return ability + "; full-task intervals not widened (the held-out misses fell inside them)"
    return (ability + f"; full-task intervals widened in quadrature by 1.96 × σ, σ = {sig:.4g} "
            f"({sig_m:.4g} for a flagged model, measured the same way)")


def single_model_records(bank, scaled: np.ndarray, raw: np.ndarray, truth: np.ndarray, *,
                         lengths: Sequence[int] = SINGLE_MODEL_LENGTHS, seed=0) -> list[dict]:
    """Self-check records of held-out models tested alone on ``bank``: row j of ``scaled`` and ``raw``
    is model j's scaled and raw score on each bank item (NaN: none), ``truth[j]`` its mean over the
    whole task. Each model takes the engine's default test (seeded by ``seed`` and j) and gives one
    record after each of ``lengths`` items, as the backtest's ranker runs do."""
    records = []
    for j in range(scaled.shape[0]):
        have = np.flatnonzero(~np.isnan(scaled[j]))
        if have.size < 2:
            continue
        post = GridPosterior(bank.prior_mean, DEFAULT_PRIOR_SD)
        post.update_many(bank.model, bank.b[have], scaled[j, have], **bank.item_params(have))
        t_all, s_all = post.mean, post.sd
        caps = sorted({min(int(n), int(have.size)) for n in lengths})
        seed_j = [*np.atleast_1d(seed).tolist(), j]
        test = AdaptiveTest(bank, se_target=None, min_items=0, max_items=caps[-1], seed=seed_j)
        missing = np.setdiff1d(np.arange(bank.n_items), have)
        if missing.size:
            test.exclude(missing)
        e = test.examinee
        while (item := test.next_item()) is not None:
            test.record(item, float(scaled[j, item]))
            if e.n not in caps:
                continue
            items = np.asarray(e.items, dtype=np.int64)
            theta, se = e.theta, e.se
            est = full_task_estimate(bank, items, raw[j, items], theta, se, misfit=e.misfit)
            wide = full_task_estimate(bank, items, raw[j, items], theta, 2 * se, misfit=e.misfit)
            records.append({"d": theta - t_all, "s2": se * se - s_all * s_all, "se": se,
                            "misfit": bool(e.person_fit.flagged), "err": float(truth[j]) - est["estimate"],
                            "lo": est["estimate"] - est["lower"], "hi": est["upper"] - est["estimate"],
                            "lo2": wide["estimate"] - wide["lower"], "hi2": wide["upper"] - wide["estimate"],
                            "u": est.get("error_scale", 1.0), "n": int(e.n), "leg": "single"})
    return records


def single_model_check(table, calibrate_bank: Callable, *, folds: int = SINGLE_MODEL_FOLDS,
                       per_fold: int = SINGLE_MODEL_PER_FOLD, lengths: Sequence[int] = SINGLE_MODEL_LENGTHS,
                       seed: int = 0) -> list[dict]:
    """The single-model leg of a bank's self-check on its calibration history ``table`` (see the
    module docstring): ``folds`` disjoint sets of up to ``per_fold`` models (a tenth of the models at
    most, one seeded permutation of the sorted names), each held out from a bank
    ``calibrate_bank(history)`` calibrated on the others and tested alone by
    :func:`single_model_records`. [] when the table has fewer than 10 models."""
    names = sorted(str(m) for m in table.models)
    size = min(int(per_fold), len(names) // 10)
    if size < 1:
        return []
    order = [names[i] for i in np.random.default_rng(seed).permutation(len(names))]
    raw_all = table.mean_matrix()
    row = {str(m): j for j, m in enumerate(table.models)}
    col = {str(v): i for i, v in enumerate(np.asarray(table.items, dtype=object).tolist())}
    records = []
    for f in range(min(int(folds), len(names) // size)):
        hold = order[f * size:(f + 1) * size]
        held = set(hold)
        bank = calibrate_bank(table.select_models([m for m in names if m not in held]))
        tpos = np.array([col[str(x)] for x in bank.item_ids], dtype=np.int64)
        rows = raw_all[[row[m] for m in hold]]
        raw = rows[:, tpos]
        scaled = bank.scale(np.arange(bank.n_items)[None, :], raw)
        truth = np.nanmean(rows, axis=1)
        records += single_model_records(bank, scaled, raw, truth, lengths=lengths, seed=[seed, f])
    return records

"""What one backtest run records beyond its τ: each model's honesty (θ̂ against its ability on every
item, the full-task intervals' coverage, person fit), the pair claims against the truth, the stated
against the measured cost to settle (the settle checks), and every confident pair with both models'
state."""

from __future__ import annotations


import numpy as np

from lm_eval_adaptive.engine.cat.estimation import DEFAULT_PRIOR_SD, GridPosterior
from lm_eval_adaptive.engine.cat.full_task import full_task_estimate
from lm_eval_adaptive.engine.ranking.pairs.metric_scale import model_part
from lm_eval_adaptive.engine.ranking.pairs.outcomes import UNRESOLVED, settle_items, t_quantile
from lm_eval_adaptive.engine.evaluation.settle_check import run_on_to_settle

from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig

__all__ = ["ability_on_every_item", "honesty_record", "pair_claims", "settle_check_records", "floored_stop",
           "model_state", "confident_pair_records"]


def ability_on_every_item(bank, scaled_row: np.ndarray) -> tuple[float, float]:
    """(θ̂, SE) of one model from every bank item it has a score for (the reference for z)."""
    have = np.flatnonzero(~np.isnan(scaled_row))
    post = GridPosterior(bank.prior_mean, DEFAULT_PRIOR_SD)
    post.update_many(bank.model, bank.b[have], scaled_row[have], **bank.item_params(have))
    return post.mean, post.sd


def honesty_record(ranker, res, bank, raw_bank, row, truth_mean, se_all, bank_mean) -> dict:
    """For each ranked model at the stop: does its metric-scale 95% interval hold its true mean over the
    bank's items (``bank_mean``), and does the θ-scale full-task interval hold its full-task mean
    (``truth_mean``); the SE-calibration z = (θ̂_stop - θ̂_all) / √(SE_stop² - SE_all²); is it flagged as
    misfitting."""
    covered_metric, covered_theta, zs, misfit, records, floored = [], [], [], [], [], []
    for m in res.ranking:
        e = ranker.examinees[m]
        items = np.asarray(e.items, dtype=np.int64)
        theta, se = res.theta[m], res.se[m]
        raw = raw_bank[row[m], items]
        part = model_part(bank, e.raw, e.random_mask, e.theta, population=e.population, se_theta=e.se)
        half = 0.0 if part.var == 0 else t_quantile(part.df, 0.975) * float(np.sqrt(part.var))
        tol = 1e-9 * max(1.0, abs(bank_mean[m]))  # a full run's zero-width interval: float rounding only
        anytime = (res.estimates or {}).get(m, {})
        if anytime.get("anytime_valid"):  # the run's anytime-valid interval (engine/anytime/banked_intervals.py)
            covered_metric.append(bool(anytime["lower"] - tol <= bank_mean[m] <= anytime["upper"] + tol))
        else:
            covered_metric.append(bool(part.estimate - half - tol <= bank_mean[m] <= part.estimate + half + tol))
        floored.append(floored_stop(part)[0])
        est = full_task_estimate(bank, items, raw, theta, se, misfit=e.misfit)
        covered_theta.append(bool(est["lower"] <= truth_mean[m] <= est["upper"]))
        t_all, s_all = se_all[m]
        if se * se > s_all * s_all:
            zs.append(float((theta - t_all) / np.sqrt(se * se - s_all * s_all)))
        flagged = e.person_fit.flagged
        misfit.append(flagged)
        wide = full_task_estimate(bank, items, raw, theta, 2 * se, misfit=e.misfit)  # the ability part grows about linearly in SE
        records.append({"d": theta - t_all, "s2": se * se - s_all * s_all, "se": se, "misfit": flagged,
                        "err": truth_mean[m] - est["estimate"],
                        "lo": est["estimate"] - est["lower"], "hi": est["upper"] - est["estimate"],
                        "lo2": wide["estimate"] - wide["lower"], "hi2": wide["upper"] - wide["estimate"]})
    return {"covered_metric": covered_metric, "covered_theta": covered_theta, "z": zs, "misfit": misfit,
            "floored": floored,
            "records": records}


def pair_claims(res, truth_mean: dict, margin: float, delta: float) -> dict:
    """(right, all) equivalent claims (within ``margin``) and (ordered, all) truly tied pairs (|Δ| < ``delta``)."""
    eq = {frozenset(p) for p in res.equivalent}
    ties = {frozenset(p) for p in res.ties}
    eq_right = sum(abs(truth_mean[a] - truth_mean[b]) <= margin for a, b in (tuple(p) for p in eq))
    tied = ordered = 0
    ms = list(res.ranking)
    for i, a in enumerate(ms):
        for b in ms[i + 1:]:
            if abs(truth_mean[a] - truth_mean[b]) < delta:
                tied += 1
                ordered += frozenset((a, b)) not in ties
    return {"equivalent": (int(eq_right), len(eq)), "tied": (ordered, tied)}


def settle_check_records(ranker, res, score_of, config: BacktestConfig, margin: float, seed_base, bank_mean) -> list:
    """For each unresolved pair of ``res``: its stated items to settle, what the same projection states at
    the pair's true gap (``bank_mean``: an oracle that knows the gap), and the items it took run on
    (``config.settle_runs`` continuations: the run's own, then fresh permutations). No continuation
    (``settle_runs`` 0) measures nothing: no record, as with ``settle_seeds`` 0."""
    out = []
    if config.settle_runs < 1:
        return out
    ex = ranker.examinees
    judge = ranker.judgements[0]
    scale = judge.scale(ranker.active) if hasattr(judge, "scale") else None
    for rec in res.pairs:
        if rec["outcome"] != UNRESOLVED or rec.get("items_to_settle") is None:
            continue
        a, b = rec["a"], rec["b"]
        ia, ib = ranker.models.index(a), ranker.models.index(b)
        oracle = None
        if scale is not None:
            ka, kb = scale.names.index(a), scale.names.index(b)
            va, vb = float(scale.var[ka]), float(scale.var[kb])
            oracle = settle_items(abs(bank_mean[a] - bank_mean[b]), float(rec["se"]) ** 2,
                                  va / (va + vb) if va + vb > 0 else 0.5, int(scale.n_unseen[ka]),
                                  int(scale.n_random[ka]), scale.method[ka] == "design", int(scale.n_unseen[kb]),
                                  int(scale.n_random[kb]), scale.method[kb] == "design", config.confidence, margin,
                                  judge.random_share)
        measured = []
        for k in range(config.settle_runs):
            run = run_on_to_settle((ex[a], ex[b]), lambda j, i, ab=(a, b): score_of(ab[j], i),
                                   confidence=config.confidence, margin=margin,
                                   seed=None if k == 0 else [*seed_base, ia, ib, k])
            measured.append(run.items)
        out.append({"stated": int(rec["items_to_settle"]), "measured": int(measured[0]),
                    "median": float(np.median(measured)), "runs": measured, "beyond_policy": bool(rec["beyond_policy"]),
                    "oracle": oracle, "range": rec.get("items_to_settle_range")})
    return out


def floored_stop(part) -> tuple[bool, float]:
    """(was the residual variance raised to its floor, the variance used) of a metric-scale part."""
    if part.method != "design" or not part.n_random:
        return False, float("nan")
    return bool(part.s2 > part.s2_design), float(part.s2)


def model_state(bank, e, truth: float, bank_truth: float) -> dict:
    """What one ranked model's metric-scale part rested on at the stop (for :func:`confident_pair_records`)."""
    part = model_part(bank, e.raw, e.random_mask, e.theta, population=e.population, se_theta=e.se)
    floored, s2 = floored_stop(part)
    return {"estimate": part.estimate, "se": float(np.sqrt(part.var)), "df": part.df, "method": part.method,
            "truth": truth, "bank_truth": bank_truth, "items": int(part.n_seen), "random_items": int(part.n_drawn),
            "comparable_random_items": int(part.n_random), "s2_residuals": part.s2_design, "s2_used": s2,
            "floored": floored,
            "theta": float(e.theta), "theta_se": float(e.se), "misfit": bool(e.person_fit.flagged)}


def confident_pair_records(ranker, res, bank, truth: list, ties: set, truth_mean: dict, bank_mean: dict) -> list:
    """Every pair ``res`` reports ordered (not in ``ties``), as :func:`confident_counts` counts it: the one
    ranked above (``a``), below (``b``), whether the truth (``truth``: the order of the full-task means,
    ``truth_mean`` over every table item) agrees, the pair's D̂ = T̂_a − T̂_b, SE, p_order, the true gaps over
    the table's items and the bank's (``bank_mean``), and each model's state (:func:`model_state`)."""
    pos = {m: i for i, m in enumerate(res.ranking)}
    tpos = {m: i for i, m in enumerate(truth)}
    recs = {frozenset((r["a"], r["b"])): r for r in res.pairs}
    states: dict = {}  # each model's state, made once (a model is in several pairs)

    def state(m):
        if m not in states:
            states[m] = model_state(bank, ranker.examinees[m], truth_mean[m], bank_mean[m])
        return states[m]

    out = []
    for i, a in enumerate(res.ranking):
        for b in res.ranking[i + 1:]:
            key = frozenset((a, b))
            if key in ties:
                continue
            rec = recs.get(key, {})
            sign = 1.0 if rec.get("a", a) == a else -1.0
            out.append({"a": a, "b": b, "right": (pos[a] < pos[b]) == (tpos[a] < tpos[b]),
                        "difference": sign * float(rec.get("difference", float("nan"))),
                        "se": float(rec.get("se", float("nan"))), "p_order": float(rec.get("p_order", float("nan"))),
                        "true_gap": truth_mean[a] - truth_mean[b], "true_gap_bank": bank_mean[a] - bank_mean[b],
                        "models": {m: state(m) for m in (a, b)}})
    return out

"""Research harness: the backtest protocol with per-test and per-pair records.

For every table and fold (engine.backtest protocol: 5 disjoint hold-out sets of 4 models,
partition seed 42, calibrate on the rest), it produces:

* CAT records (measurements a, b): every hold-out model gets an adaptive test of 40 items
  (snapshots at 20, 30, 40); for each estimator variant: θ̂ and SE at the stop, θ̂ and SE on
  every bank item, z, and full-task mean intervals of several kinds against the true full-task
  mean (mean raw score over every table item).
* Ranker records (c, d, e): the ranker (engine or prototype configuration) on the 4 hold-out
  models at γ = 0.95, n_init 10, budget = 20 items per model at the mean item cost, uniform
  prices; every pair's status against the bootstrap ground truth; Kendall τ; items; random
  sampling at the same spend (engine baseline function).

Nothing from the data files is written: only numbers computed from them.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

sys.path.insert(0, str(Path(__file__).parent))

from lm_eval_adaptive.data.prices import DEFAULT_PRICE  # noqa: E402
from lm_eval_adaptive.engine.backtest import ground_truth, holdout_sets, kendall_tau  # noqa: E402
from lm_eval_adaptive.engine.baselines import random_sampling  # noqa: E402

from proto.bankview import make_view  # noqa: E402
from proto.decisions import ft_design, ft_engine, ft_model, task_mean_pred, task_slope  # noqa: E402
from proto.estimators import make_estimator  # noqa: E402
from proto.personfit import person_fit_lz  # noqa: E402
from proto.ranker import ProtoRanker  # noqa: E402
from proto.state import ModelState  # noqa: E402
import wmt25  # noqa: E402

RESULTS = Path(__file__).parent / "results"
CACHE = Path(__file__).parent / "cache"
H, FOLDS, PSEED, TARGET_ITEMS, N_INIT = 4, 5, 42, 20, 10
LENGTHS = (20, 30, 40)

_TABLES = {}


def table(name):
    if name not in _TABLES:
        _TABLES[name] = wmt25.load(name)
    return _TABLES[name]


def half_of(name):
    return "tuning" if name in wmt25.TUNING else "report"


def fold_setup(name):
    """Per fold: hold-out names, calibration names, raw matrix of the hold-out, costs, budget, truth."""
    CACHE.mkdir(exist_ok=True)
    f = CACHE / (name.replace("/", "__") + ".gt.pkl")
    t = table(name)
    models = [str(m) for m in t.models]
    sets = holdout_sets(models, H, FOLDS, PSEED)
    raw_all = t.mean_matrix()
    in_tok, out_tok = t.item_tokens()
    costs_item = DEFAULT_PRICE.item_costs(in_tok, out_tok)
    if f.exists():
        gts = pickle.loads(f.read_bytes())
        if "ties_paired" not in gts[0]:
            for k, hold in enumerate(sets):
                hidx = [models.index(m) for m in hold]
                gts[k]["ties_paired"] = paired_ties(raw_all[hidx], hold, k)
            f.write_bytes(pickle.dumps(gts))
    else:
        gts = []
        for k, hold in enumerate(sets):
            hidx = [models.index(m) for m in hold]
            gt = ground_truth(raw_all[hidx], hold, n_resamples=10_000, confidence=0.95,
                              rng=np.random.default_rng([PSEED, k]))
            gts.append({"ranking": gt["ranking"], "ties": gt["ties"], "means": gt["means"], "ci": gt["ci"],
                        "ties_paired": paired_ties(raw_all[hidx], hold, k)})
        f.write_bytes(pickle.dumps(gts))
    out = []
    for k, hold in enumerate(sets):
        hidx = [models.index(m) for m in hold]
        calib = [m for m in models if m not in hold]
        raw_h = raw_all[hidx]
        budget = float(np.mean(costs_item)) * H * TARGET_ITEMS
        out.append({"fold": k, "hold": hold, "calib": calib, "raw": raw_h,
                    "costs": np.tile(costs_item, (H, 1)), "budget": budget, "gt": gts[k],
                    "truth": np.nanmean(raw_h, axis=1)})
    return out


def paired_ties(raw_h, hold, k):
    """Pairs whose paired-bootstrap 95% CI of the full-data mean difference (common items) holds 0."""
    from lm_eval_adaptive.engine.backtest import bootstrap_mean_ci
    rows, pairs = [], []
    for a in range(len(hold)):
        for b in range(a + 1, len(hold)):
            rows.append(raw_h[a] - raw_h[b])  # NaN where either is missing
            pairs.append(frozenset((hold[a], hold[b])))
    lo, hi = bootstrap_mean_ci(np.array(rows), n_resamples=10_000, confidence=0.95,
                               rng=np.random.default_rng([PSEED, k, 2]))
    return {p for p, l, h in zip(pairs, lo, hi) if l <= 0 <= h}


_VIEWS = {}


def view(name, fold, calib, cal):
    key = (name, fold, json.dumps(cal, sort_keys=True))
    if key not in _VIEWS:
        if len(_VIEWS) > 64:
            _VIEWS.clear()
        _VIEWS[key] = make_view(table(name), calib, method=cal.get("method", "joint"),
                                scaling=cal.get("scaling", "global"), slopes=cal.get("slopes"))
    return _VIEWS[key]


# ---------------------------------------------------------------------- CAT tests
def cat_sequence(bv, raw_row, costs_row, *, driver: dict, rho: float, random_first: int, perm, n_max: int):
    """Run one adaptive test of n_max paid items; returns the ModelState (order of items)."""
    st = ModelState("m", bv, make_estimator(bv, driver), raw_row, costs_row, perm=perm, rho=rho,
                    random_first=random_first)
    for _ in range(n_max):
        t, kind = st.peek()
        if t < 0:
            break
        st.record(t, kind)
    return st


def replay(bv, st_src: ModelState, n: int, spec: dict) -> ModelState:
    """A state with estimator ``spec`` fed the first n paid items of ``st_src`` (same design)."""
    st = ModelState("m", bv, make_estimator(bv, spec), st_src.raw, st_src.costs, perm=st_src.perm,
                    rho=st_src.rho, random_first=st_src.random_first)
    for t, kind in zip(st_src.order[:n], st_src.kinds[:n]):
        st.record(t, kind)
    return st


def all_items_estimate(bv, raw_row, spec):
    est = make_estimator(bv, spec)
    ok = ~np.isnan(raw_row[bv.tpos])
    it = np.flatnonzero(ok)
    est.update_many(it, bv.scale(it, raw_row[bv.tpos][ok]))
    return est


def test_model(bv, raw_row, costs_row, variants: dict, *, rho=0.0, random_first=0, seed=0, perm_key=(),
               lengths=LENGTHS, extra: dict | None = None, alls=None):
    """Rows for one model: a 40-item test (snapshots at ``lengths``), every estimator variant
    replayed on the same item sequence (driven by the plain estimator's θ̂)."""
    extra = extra or {}
    T_true = float(np.nanmean(raw_row))
    if alls is None:
        alls = {v: all_items_estimate(bv, raw_row, spec) for v, spec in variants.items()}
    perm = np.random.default_rng([seed, *perm_key, 777]).permutation(bv.n_task) \
        if (rho > 0 or random_first > 0) else None
    src = cat_sequence(bv, raw_row, costs_row, driver=extra.get("driver", {"kind": "plain"}), rho=rho,
                       random_first=random_first, perm=perm, n_max=max(lengths))
    rows = []
    for n in lengths:
        for v, spec in variants.items():
            st = replay(bv, src, n, spec)
            e, ea = st.est, alls[v]
            den2 = e.sd ** 2 - ea.sd ** 2
            den = np.sqrt(den2) if den2 > 0 else e.sd
            slope = task_slope(bv, st, e.mean)
            row = {"seed": seed, "n": n, "variant": v,
                   "theta": e.mean, "sd": e.sd, "model_sd": e.model_sd, "phi": e.phi, "df": e.df,
                   "theta_all": ea.mean, "sd_all": ea.sd, "z": (e.mean - ea.mean) / den,
                   "T_true": T_true, "n_random": len(st.sample()), "n_bank_items": bv.n_items,
                   "slope": slope}
            if v == "plain":
                row["ft_engine"] = ft_engine(bv, st)
                row["lz"] = person_fit_lz(e)
            row["ft_model"] = ft_model(bv, st)
            if extra.get("sigma_T") is not None:
                row["ft_model_cv"] = ft_model(bv, st, extra_sd=extra["sigma_T"].get(v, 0.0))
            if extra.get("tau_theta") is not None:
                tt = extra["tau_theta"].get(v, 0.0)
                sdh = float(np.sqrt(e.sd ** 2 + tt ** 2))
                row["sd_cv"] = sdh
                row["z_cv"] = (e.mean - ea.mean) / np.sqrt(max(sdh ** 2 - ea.sd ** 2, 1e-12))
                # remedy 7: constants of the model's person-fit class (l_z of the plain fit)
                lz = person_fit_lz(replay(bv, src, n, {"kind": "plain"}).est) if v != "plain" else row["lz"]
                cls = "misfit" if lz < extra.get("lz_thr", -1.645) else "fit"
                row["pf_class"] = cls
                tt = extra["tau_theta"].get(f"{v}|{cls}", tt)
                sdh = float(np.sqrt(e.sd ** 2 + tt ** 2))
                row["z_pf"] = (e.mean - ea.mean) / np.sqrt(max(sdh ** 2 - ea.sd ** 2, 1e-12))
                row["ft_model_pf"] = ft_model(bv, st, extra_sd=extra["sigma_T"].get(f"{v}|{cls}", 0.0))
            if perm is not None:
                row["ft_design"] = ft_design(bv, st)
            rows.append(row)
    return rows


def cat_records(name, cal: dict, variants: dict, *, rho=0.0, random_first=0, seeds=(0,),
                extra_by_fold: dict | None = None, lengths=LENGTHS):
    """CAT records of one table (outer hold-out models of every fold)."""
    rows = []
    for fd in fold_setup(name):
        bv = view(name, fd["fold"], fd["calib"], cal)
        extra = (extra_by_fold or {}).get(fd["fold"], {})
        for j, m in enumerate(fd["hold"]):
            alls = {v: all_items_estimate(bv, fd["raw"][j], spec) for v, spec in variants.items()}
            for seed in seeds:
                for r in test_model(bv, fd["raw"][j], fd["costs"][j], variants, rho=rho, random_first=random_first,
                                    seed=seed, perm_key=(fd["fold"], j), lengths=lengths, extra=extra, alls=alls):
                    r.update({"table": name, "half": half_of(name), "family": wmt25.family(name),
                              "fold": fd["fold"], "model": m})
                    rows.append(r)
    return rows


# ---------------------------------------------------------------------- ranker
def load_consts(label, which="tuning"):
    """Self-check constants {(table, fold): {"tau_theta": {variant: τ}, "sigma_T": {...}}} of a run_cv run."""
    jf = RESULTS / f"cv_{label}_{which}_consts.json"
    if jf.exists():
        d = json.loads(jf.read_text())
        return {(k.rsplit("|", 1)[0], int(k.rsplit("|", 1)[1])): v for k, v in d.items()}
    p = pd.read_parquet(RESULTS / f"cv_{label}_{which}_pred.parquet")
    out = {}
    for (t, f), g in p.groupby(["table", "fold"]):
        out[(t, int(f))] = {"tau_theta": dict(zip(g["variant"], g["tau_theta"])),
                            "sigma_T": dict(zip(g["variant"], g["sigma_T"]))}
    return out


def ranker_records(name, cal: dict, config: dict, *, seeds=range(5), engine=False, label=None, consts=None):
    rows = []
    config = dict(config)
    if "delta_frac" in config:
        config["delta"] = config.pop("delta_frac") * wmt25.scale_range(name)
    for fd in fold_setup(name):
        bv = view(name, fd["fold"], fd["calib"], cal)
        if consts is not None:
            bv.extra.update(consts[(name, fd["fold"])])
        gt = fd["gt"]
        truth = gt["ranking"]
        means = gt["means"]
        runs = []
        need_perm = config.get("rho", 0) > 0 or config.get("random_first", 0) > 0
        for seed in seeds:
            if runs and not need_perm:
                runs.append(runs[0])  # deterministic (top-1 selection, no random items): same run
                continue
            if engine:
                res = run_engine(bv, fd, seed)
            else:
                perm = np.random.default_rng([seed, fd["fold"], 4242]).permutation(bv.n_task) if need_perm else None
                rk = ProtoRanker(bv, fd["hold"], fd["raw"], fd["costs"], budget=fd["budget"], perm=perm,
                                 n_init=N_INIT, **config)
                res = rk.run()
            runs.append(res)
        matched = float(np.mean([r["spent"] for r in runs]))
        available = {m: np.flatnonzero(~np.isnan(fd["raw"][j])) for j, m in enumerate(fd["hold"])}
        row_of = {m: j for j, m in enumerate(fd["hold"])}
        all_costs = {m: fd["costs"][j] for j, m in enumerate(fd["hold"])}
        for seed, res in zip(seeds, runs):
            rb = random_sampling(fd["hold"], available, lambda m, it: fd["raw"][row_of[m], it], all_costs,
                                 matched, np.random.default_rng([seed, fd["fold"], 7]))
            base = {"table": name, "half": half_of(name), "family": wmt25.family(name), "fold": fd["fold"],
                    "seed": seed, "config": label, "tau": kendall_tau(res["ranking"], truth),
                    "items": int(sum(res["items"].values())), "spent": res["spent"], "stopped": res["stopped"],
                    "random_tau": kendall_tau(rb.ranking, truth), "random_items": rb.total_items,
                    "random_spent": rb.total_cost, "budget": fd["budget"], "R": wmt25.scale_range(name)}
            for (a, b), (st, d, se, dm, sm) in res["pairs"].items():
                true_diff = means[a] - means[b]
                row = dict(base)
                row.update({"a": a, "b": b, "status": st, "d": d, "se": se, "d_metric": dm, "se_metric": sm,
                            "true_diff": true_diff, "truth_tie": frozenset((a, b)) in gt["ties"],
                            "truth_tie_paired": frozenset((a, b)) in gt["ties_paired"]})
                rows.append(row)
    return rows


def run_engine(bv, fd, seed):
    """Today's engine AdaptiveRanker on the fold, as the backtest runs it."""
    from lm_eval_adaptive.engine.ranker import AdaptiveRanker
    bank = bv.bank
    hold = fd["hold"]
    scaled = bank.scale(np.arange(bank.n_items)[None, :], fd["raw"][:, bv.tpos])
    missing = {m: np.flatnonzero(np.isnan(fd["raw"][j, bv.tpos])) for j, m in enumerate(hold)}
    bank_costs = {m: fd["costs"][j, bv.tpos] for j, m in enumerate(hold)}
    rk = AdaptiveRanker(bank, hold, item_costs=bank_costs, confidence=0.95, n_init=N_INIT, budget=fd["budget"],
                        seed=seed, exclude=missing)
    row = {m: j for j, m in enumerate(hold)}
    res = rk.run(lambda m, i: float(scaled[row[m], i]))
    P = res.pairwise
    pairs = {}
    for x in range(len(res.ranking)):
        for y in range(x + 1, len(res.ranking)):
            a, b = res.ranking[x], res.ranking[y]
            p = P[x, y]
            st = None if 0.025 <= p <= 0.975 else ("order" if p > 0.975 else "order_rev")
            d = res.theta[a] - res.theta[b]
            pairs[(a, b)] = (st, d, float(np.hypot(res.se[a], res.se[b])), np.nan, np.nan)
    return {"ranking": res.ranking, "items": res.items, "spent": res.total_cost, "stopped": res.stopped_because,
            "pairs": pairs, "theta": res.theta, "sd": res.se}


def save(rows, fname):
    RESULTS.mkdir(exist_ok=True)
    df = pd.DataFrame(rows)
    for c in df.columns:
        if c.startswith("ft_"):
            v = df[c].apply(lambda x: x if isinstance(x, tuple) else (np.nan, np.nan, np.nan))
            df[c + "_est"] = [x[0] for x in v]
            df[c + "_lo"] = [x[1] for x in v]
            df[c + "_hi"] = [x[2] for x in v]
            df = df.drop(columns=c)
    df.to_parquet(RESULTS / fname)
    return df

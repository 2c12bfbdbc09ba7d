"""Calibrate-time self-check: leave-models-out cross-validation on the calibration history.

Given the calibration models of a bank, split them into K inner folds; for each, calibrate a
bank on the others and give every inner left-out model the same adaptive test as a new model
would get (lengths 20/30/40). From these records:

* predicted |z| > 1.96 share and predicted coverage of every interval kind (what the bank
  can say about itself before anybody uses it);
* misfit constants for remedy 8: τ_θ² = mean[(θ̂ - θ̂_all)² - (SE² - SE_all²)]⁺ (an ability
  "model error" variance added to SE²) and σ_T² = mean[(T - T̂)² - v_pred]⁺ (the same for the
  full-task mean), both per estimator variant;
* a nested (leave-one-inner-fold-out) prediction of the coverage of the intervals that use
  those constants, so the self-check is not evaluated on the data that set the constants.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from .bankview import make_view

Z = 1.959963984540054


def inner_records(table, calib_models, cal: dict, variants: dict, test_fn, *, K: int = 4, seed: int = 0,
                  design: dict | None = None):
    """CAT records of the calibration models, each tested by a bank calibrated without it.

    ``test_fn(bv, raw_row, costs_row, variants, **design)`` is harness.test_model.
    """
    from lm_eval_adaptive.data.prices import DEFAULT_PRICE
    design = design or {}
    models = list(calib_models)
    rng = np.random.default_rng([seed, len(models), 99])
    order = rng.permutation(len(models))
    folds = [order[f::K] for f in range(K)]
    names = [str(m) for m in table.models]
    raw_all = table.mean_matrix()
    in_tok, out_tok = table.item_tokens()
    costs = DEFAULT_PRICE.item_costs(in_tok, out_tok)
    rows = []
    for f, idx in enumerate(folds):
        inner_hold = [models[i] for i in idx]
        inner_cal = [m for m in models if m not in inner_hold]
        bv = make_view(table, inner_cal, method=cal.get("method", "joint"), scaling=cal.get("scaling", "global"),
                       slopes=cal.get("slopes"))
        for m in inner_hold:
            raw_row = raw_all[names.index(m)]
            for r in test_fn(bv, raw_row, costs, variants, perm_key=(f, names.index(m), 5), **design):
                r["inner_fold"] = f
                r["model"] = m
                rows.append(r)
    return pd.DataFrame(rows)


def _consts(g):
    d2 = (g["theta"] - g["theta_all"]) ** 2
    v_pred = np.maximum(g["sd"] ** 2 - g["sd_all"] ** 2, 0)
    tau = float(np.sqrt(max(float(np.mean(d2 - v_pred)), 0.0))) if len(g) else 0.0
    q = stats.norm.ppf(0.975)
    vT = ((g["ft_model_hi"] - g["ft_model_lo"]) / 2 / q) ** 2
    sig = float(np.sqrt(max(float(np.mean((g["T_true"] - g["ft_model_est"]) ** 2 - vT)), 0.0))) if len(g) else 0.0
    return tau, sig


LZ_THRESHOLD = -1.645


def misfit_constants(df: pd.DataFrame, lz_thr: float = LZ_THRESHOLD) -> dict:
    """τ_θ and σ_T per variant from inner records (see module docstring); also per person-fit
    class (remedy 7: l_z < lz_thr = "misfit", else "fit"), keyed "<variant>|fit" / "<variant>|misfit"."""
    out = {"tau_theta": {}, "sigma_T": {}, "lz_thr": lz_thr}
    lz = df[df["variant"] == "plain"].set_index(["inner_fold", "model", "n", "seed"])["lz"] if "lz" in df else None
    for v, g in df.groupby("variant"):
        tau, sig = _consts(g)
        out["tau_theta"][v], out["sigma_T"][v] = tau, sig
        if lz is not None:
            l = lz.reindex(pd.MultiIndex.from_frame(g[["inner_fold", "model", "n", "seed"]])).to_numpy()
            mis = l < lz_thr
            for lab, m in (("fit", ~mis), ("misfit", mis)):
                tau_c, sig_c = _consts(g[m]) if m.sum() >= 5 else (tau, sig)
                out["tau_theta"][f"{v}|{lab}"], out["sigma_T"][f"{v}|{lab}"] = tau_c, sig_c
    return out


def predicted(df: pd.DataFrame, kinds=("ft_engine", "ft_model", "ft_design")) -> dict:
    """Predicted z share and coverage of each interval kind, per variant, from inner records;
    plus nested predictions for the constant-using intervals (sd_cv / ft_model_cv)."""
    out = {}
    q = stats.norm.ppf(0.975)
    for v, g in df.groupby("variant"):
        r = {"z_share": float(np.mean(np.abs(g["z"]) > Z)), "n": int(len(g))}
        for k in kinds:
            if k + "_lo" in g and g[k + "_lo"].notna().any():
                gg = g[g[k + "_lo"].notna()]
                r[k] = float(np.mean((gg[k + "_lo"] <= gg["T_true"]) & (gg["T_true"] <= gg[k + "_hi"])))
        # nested: constants from the other inner folds
        zc, cc = [], []
        for f, gf in g.groupby("inner_fold"):
            rest = g[g["inner_fold"] != f]
            d2 = (rest["theta"] - rest["theta_all"]) ** 2
            vp = np.maximum(rest["sd"] ** 2 - rest["sd_all"] ** 2, 0)
            tt2 = max(float(np.mean(d2 - vp)), 0.0)
            half = (rest["ft_model_hi"] - rest["ft_model_lo"]) / 2
            s2 = max(float(np.mean((rest["T_true"] - rest["ft_model_est"]) ** 2 - (half / q) ** 2)), 0.0)
            den = np.sqrt(np.maximum(gf["sd"] ** 2 + tt2 - gf["sd_all"] ** 2, 1e-12))
            zc.append(np.abs((gf["theta"] - gf["theta_all"]) / den) > Z)
            hf = (gf["ft_model_hi"] - gf["ft_model_lo"]) / 2
            w = q * np.sqrt((hf / q) ** 2 + s2)
            cc.append(np.abs(gf["T_true"] - gf["ft_model_est"]) <= w)
        r["z_share_cv"] = float(np.mean(np.concatenate(zc)))
        r["ft_model_cv"] = float(np.mean(np.concatenate(cc)))
        if "lz" in df:
            lzv = df[df["variant"] == "plain"].set_index(["inner_fold", "model", "n", "seed"])["lz"]
            gg = g.copy()
            gg["mis"] = lzv.reindex(pd.MultiIndex.from_frame(g[["inner_fold", "model", "n", "seed"]])).to_numpy() < LZ_THRESHOLD
            zc, cc = [], []
            for f, gf in gg.groupby("inner_fold"):
                rest = gg[gg["inner_fold"] != f]
                for mis in (False, True):
                    rr = rest[rest["mis"] == mis]
                    if len(rr) < 5:
                        rr = rest
                    tt2 = _consts(rr)[0] ** 2
                    s2 = _consts(rr)[1] ** 2
                    gm = gf[gf["mis"] == mis]
                    den = np.sqrt(np.maximum(gm["sd"] ** 2 + tt2 - gm["sd_all"] ** 2, 1e-12))
                    zc.append(np.abs((gm["theta"] - gm["theta_all"]) / den) > Z)
                    hf = (gm["ft_model_hi"] - gm["ft_model_lo"]) / 2
                    cc.append(np.abs(gm["T_true"] - gm["ft_model_est"]) <= q * np.sqrt((hf / q) ** 2 + s2))
            r["z_share_pf"] = float(np.mean(np.concatenate(zc)))
            r["ft_model_pf"] = float(np.mean(np.concatenate(cc)))
        out[v] = r
    return out

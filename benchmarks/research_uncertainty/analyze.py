"""Aggregation of harness records into the target metrics (pooled and per table)."""
from __future__ import annotations

import numpy as np
import pandas as pd

Z = 1.959963984540054


def cat_summary(df: pd.DataFrame, by=("variant",), ft=("ft_engine", "ft_model", "ft_model_cv", "ft_design")):
    out = []
    for key, g in df.groupby(list(by), dropna=False):
        r = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        r["n_tests"] = len(g)
        r["z_share"] = float(np.mean(np.abs(g["z"]) > Z))
        r["rms_z"] = float(np.sqrt(np.mean(g["z"] ** 2)))
        for f in ft:
            if f + "_lo" in g:
                ok = g[f + "_lo"].notna()
                if ok.sum() == 0:
                    continue
                gg = g[ok]
                cov = (gg[f + "_lo"] <= gg["T_true"]) & (gg["T_true"] <= gg[f + "_hi"])
                r[f + "_cov"] = float(cov.mean())
                r[f + "_width"] = float((gg[f + "_hi"] - gg[f + "_lo"]).mean())
                r[f + "_abserr"] = float((gg[f + "_est"] - gg["T_true"]).abs().mean())
        out.append(r)
    return pd.DataFrame(out)


def min_table_cov(df, f, by=("variant",)):
    """Lowest per-table coverage of interval f."""
    res = {}
    for key, g in df.groupby(list(by)):
        ok = g[f + "_lo"].notna()
        g = g[ok]
        if not len(g):
            continue
        c = ((g[f + "_lo"] <= g["T_true"]) & (g["T_true"] <= g[f + "_hi"])).groupby(g["table"]).mean()
        res[key] = (float(c.min()), c.idxmin())
    return res


def pair_flags(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    df["confident"] = df["status"].isin(["order", "order_rev"])
    pred_sign = np.where(df["status"] == "order_rev", -1, 1)
    df["correct"] = df["confident"] & (np.sign(df["true_diff"]) == pred_sign)
    df["rep_tie"] = ~df["confident"]
    df["settled_tie"] = df["status"] == "tie"
    return df


def ranker_summary(df: pd.DataFrame, by=("config",), min_conf=10):
    df = pair_flags(df)
    out = []
    for key, g in df.groupby(list(by), dropna=False):
        r = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        runs = g.drop_duplicates(["table", "fold", "seed"])
        nc = int(g["confident"].sum())
        r["conf_pairs"] = nc
        r["conf_acc"] = float(g["correct"].sum() / nc) if nc else np.nan
        tt = g["truth_tie"]
        r["truth_ties"] = int(tt.sum())
        r["tie_recall"] = float((g["rep_tie"] & tt).sum() / tt.sum()) if tt.sum() else np.nan
        r["tie_prec"] = float((g["rep_tie"] & tt).sum() / g["rep_tie"].sum()) if g["rep_tie"].sum() else np.nan
        r["rep_tie_share"] = float(g["rep_tie"].mean())
        r["settled_tie_share"] = float(g["settled_tie"].mean())
        r["tau"] = float(runs["tau"].mean())
        r["random_tau"] = float(runs["random_tau"].mean())
        r["items"] = float(runs["items"].mean())
        r["stop_settled"] = float((runs["stopped"] == "settled").mean())
        # per-table worst confident accuracy among tables with >= min_conf confident pairs
        pt = g.groupby("table").agg(nc=("confident", "sum"), ok=("correct", "sum"))
        pt = pt[pt["nc"] >= min_conf]
        if len(pt):
            acc = pt["ok"] / pt["nc"]
            r["worst_table_acc"] = float(acc.min())
            r["worst_table"] = acc.idxmin()
            r["tables_below_0.90"] = int((acc < 0.90).sum())
        out.append(r)
    return pd.DataFrame(out)


def per_table_ranker(df, config):
    d = pair_flags(df[df["config"] == config])
    rows = []
    for t, g in d.groupby("table", sort=False):
        runs = g.drop_duplicates(["fold", "seed"])
        nc = int(g["confident"].sum())
        tt = g["truth_tie"]
        rows.append({"table": t, "tau": runs["tau"].mean(), "random_tau": runs["random_tau"].mean(),
                     "items": runs["items"].mean(), "conf_pairs": nc,
                     "conf_acc": g["correct"].sum() / nc if nc else np.nan,
                     "tie_recall": (g["rep_tie"] & tt).sum() / tt.sum() if tt.sum() else np.nan,
                     "tie_prec": (g["rep_tie"] & tt).sum() / g["rep_tie"].sum() if g["rep_tie"].sum() else np.nan,
                     "truth_tie_share": tt.mean()})
    return pd.DataFrame(rows)

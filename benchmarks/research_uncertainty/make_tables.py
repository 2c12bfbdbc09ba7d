"""Build the markdown tables of REPORT.md from results/*.parquet (python make_tables.py > tables.md)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
import analyze as A  # noqa: E402

R = Path(__file__).parent / "results"
Z = 1.959963984540054


def rd(name):
    return pd.read_parquet(R / f"{name}.parquet")


def fmt(df, floatfmt=".3f"):
    return df.to_markdown(index=False, floatfmt=floatfmt)


def cov(g, f):
    return (g[f + "_lo"] <= g["T_true"]) & (g["T_true"] <= g[f + "_hi"])


# ------------------------------------------------------------------ single-model (a, b)
def today_width(before):
    b = before[before["variant"] == "plain"].copy()
    b["w0"] = b["ft_engine_hi"] - b["ft_engine_lo"]
    return b.set_index(["table", "fold", "model", "n"])["w0"]


W0 = None


def single_row(df, label, zcol, ftcol, half=None):
    g = df if half is None else df[df["half"] == half]
    g = g[g[ftcol + "_lo"].notna()]
    c = cov(g, ftcol)
    pt = c.groupby(g["table"]).mean()
    w = g[ftcol + "_hi"] - g[ftcol + "_lo"]
    w0 = W0.reindex(pd.MultiIndex.from_frame(g[["table", "fold", "model", "n"]])).to_numpy()
    return {"candidate": label, "tests": len(g), "|z|>1.96": float(np.mean(np.abs(g[zcol]) > Z)),
            "FT cov": float(c.mean()), "min table cov": float(pt.min()),
            "tables cov<0.85": int((pt < 0.85).sum()),
            "width / today": float(np.nanmedian(w.to_numpy() / w0))}


def single_tables():
    global W0
    before = rd("before_cat")
    W0 = today_width(before)
    cal = rd("calib_tuning_cat")
    rows = []
    b = before[before["half"] == "tuning"]
    rows.append(single_row(b[b.variant == "plain"], "today: joint/global, plain posterior, engine full_task_estimate", "z", "ft_engine"))
    rows.append(single_row(b[b.variant == "plain"], "today + normal-quadrature FT interval (ft_model)", "z", "ft_model"))
    for v, lab in (("disp_nu10", "1 dispersion φ_m (ν0=10)"), ("disp_nu5", "1 dispersion φ_m (ν0=5)"),
                   ("sandwich", "2 sandwich (floored at model SE)"), ("sandwich_nofloor", "2 sandwich (no floor)")):
        rows.append(single_row(b[b.variant == v], lab, "z", "ft_model"))
    for c_, lab in (("2pl_t03", "3 2PL slopes, prior sd(log a)=0.3"), ("2pl_t06", "3 2PL slopes, prior sd(log a)=0.6"),
                    ("moments_global", "6 moments/global"), ("moments_per_item", "6 moments/per_item"),
                    ("joint_per_item", "6 joint/per_item")):
        g = cal[(cal.cal == c_) & (cal.variant == "plain")]
        rows.append(single_row(g, lab + " (engine FT)", "z", "ft_engine"))
    jg = rd("cv_jg_tuning_outer")
    rows.append(single_row(jg[jg.variant == "plain"], "8 CV misfit τ_θ, σ_T (joint/global)", "z_cv", "ft_model_cv"))
    for lab_, name in (("ρ=0", "pi"), ("ρ=0.25", "pi_r25"), ("ρ=0.5", "pi_r50")):
        o = rd(f"cv_{name}_tuning_outer")
        p = o[o.variant == "plain"]
        rows.append(single_row(p, f"per_item, {lab_}: plain, engine FT", "z", "ft_engine"))
        if "ft_design_lo" in o and name != "pi":
            rows.append(single_row(p, f"4 per_item, {lab_}: design-based difference estimator", "z", "ft_design"))
        rows.append(single_row(p, f"per_item, {lab_}: + 8 CV misfit", "z_cv", "ft_model_cv"))
        rows.append(single_row(p, f"per_item, {lab_}: + 8 CV misfit by 7 person-fit class", "z_pf", "ft_model_pf"))
        d = o[o.variant == "disp_nu10"]
        rows.append(single_row(d, f"per_item, {lab_}: + 1 dispersion + 8 by 7 class", "z_pf", "ft_model_pf"))
    return pd.DataFrame(rows)


def halves_single():
    global W0
    before = rd("before_cat")
    W0 = today_width(before)
    rows = []
    for half in ("tuning", "report"):
        b = before[(before.half == half) & (before.variant == "plain")]
        r = single_row(b, "today", "z", "ft_engine")
        r["half"] = half
        rows.append(r)
        f = R / f"cv_pi_r50_{half}_outer.parquet"
        if f.exists():
            o = pd.read_parquet(f)
            r = single_row(o[o.variant == "disp_nu10"], "recommended", "z_pf", "ft_model_pf")
            r["half"] = half
            rows.append(r)
            r = single_row(o[o.variant == "plain"], "recommended, design-based FT interval", "z_pf", "ft_design")
            r["half"] = half
            rows.append(r)
        f = R / f"seeds5_pi_r50_{half}_outer.parquet"
        if f.exists():
            o = pd.read_parquet(f)
            r = single_row(o[o.variant == "disp_nu10"], "recommended, 5 draws of the random half", "z_pf", "ft_model_pf")
            r["half"] = half
            rows.append(r)
            r = single_row(o[o.variant == "plain"], "design-based FT interval, 5 draws", "z", "ft_design")
            r["half"] = half
            rows.append(r)
        f = R / f"cv_pi_r50_k8_{half}_outer.parquet"
        if f.exists():
            o = pd.read_parquet(f)
            r = single_row(o[o.variant == "disp_nu10"], "recommended, constants from 8 inner folds", "z_pf", "ft_model_pf")
            r["half"] = half
            rows.append(r)
    d = pd.DataFrame(rows)
    return d[["half"] + [c for c in d.columns if c != "half"]]


def family_single():
    rows = []
    before = rd("before_cat")
    for half in ("tuning", "report"):
        b = before[(before.half == half) & (before.variant == "plain")]
        f = R / f"seeds5_pi_r50_{half}_outer.parquet"
        o = pd.read_parquet(f) if f.exists() else None
        for fam, g in b.groupby("family"):
            r = {"half": half, "family": fam, "today |z|>1.96": float(np.mean(np.abs(g.z) > Z)),
                 "today FT cov": float(cov(g, "ft_engine").mean())}
            if o is not None:
                h = o[(o.variant == "disp_nu10") & (o.family == fam)]
                r["rec |z|>1.96"] = float(np.mean(np.abs(h.z_pf) > Z))
                r["rec FT cov"] = float(cov(h, "ft_model_pf").mean())
            rows.append(r)
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ self-check
def selfcheck_table():
    rows = []
    for half, lab in (("tuning", "pi_r50"), ("report", "pi_r50"), ("tuning", "pi_r50_k8"), ("report", "pi_r50_k8")):
        f = R / f"cv_{lab}_{half}_outer.parquet"
        if not f.exists():
            continue
        o = pd.read_parquet(f)
        p = pd.read_parquet(R / f"cv_{lab}_{half}_pred.parquet")
        for v in ("disp_nu10",):
            g = o[o.variant == v]
            pp = p[p.variant == v]
            meas = g.groupby("table").apply(lambda x: pd.Series({"cov": cov(x, "ft_model_pf").mean(),
                                                                  "z": float(np.mean(np.abs(x.z_pf) > Z)),
                                                                  "family": x.family.iloc[0]}))
            pred = pp.groupby("table")[["ft_model_pf", "z_share_pf"]].mean()
            j = meas.join(pred)
            for fam, jj in list(j.groupby("family")) + [("pooled", j)]:
                rows.append({"half": half, "K": 8 if "k8" in lab else 4, "tables": fam, "predicted FT cov": jj.ft_model_pf.mean(),
                             "measured FT cov": jj["cov"].mean(),
                             "predicted |z|>1.96": jj.z_share_pf.mean(), "measured |z|>1.96": jj.z.mean(),
                             "per-table |pred-meas| cov, mean": (jj.ft_model_pf - jj["cov"]).abs().mean(),
                             "max": (jj.ft_model_pf - jj["cov"]).abs().max()})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ person fit
def personfit_table():
    rows = []
    for name in ("cv_pi_r50_tuning_outer", "cv_pi_tuning_outer"):
        o = rd(name)
        g = o[o.variant == "plain"]
        miss = ~cov(g, "ft_model_cv")
        bigz = np.abs(g.z) > Z
        for thr in (-1.645, -2.326, -3.0):
            f = g.lz < thr
            rows.append({"design": "ρ=0.5" if "r50" in name else "ρ=0", "l_z threshold": thr,
                         "flagged": f.mean(), "|z|>1.96 | flagged": bigz[f].mean(),
                         "|z|>1.96 | not": bigz[~f].mean(), "FT miss | flagged": miss[f].mean(),
                         "FT miss | not": miss[~f].mean()})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ ranker
def rank_summary(df, half=None, margin=0.02):
    g = A.pair_flags(df if half is None else df[df.half == half])
    runs = g.drop_duplicates(["table", "fold", "seed"])
    nc = int(g.confident.sum())
    pt = g.groupby("table").agg(nc=("confident", "sum"), ok=("correct", "sum"))
    pt = pt[pt.nc >= 10]
    acc = pt.ok / pt.nc
    tt = g.truth_tie
    tp = g.truth_tie_paired if "truth_tie_paired" in g else None
    out = {"conf. pairs": nc, "conf. acc": g.correct.sum() / nc if nc else np.nan,
           "worst table acc": acc.min() if len(acc) else np.nan, "tables <0.90": int((acc < 0.90).sum()),
           "tie recall": (g.rep_tie & tt).sum() / tt.sum(), "tie prec": (g.rep_tie & tt).sum() / g.rep_tie.sum(),
           "reported ties": g.rep_tie.mean(), "settled ties": g.settled_tie.mean(),
           "τ": runs.tau.mean(), "random τ": runs.random_tau.mean(), "items": runs["items"].mean()}
    if tp is not None:
        out["recall (paired GT)"] = (g.rep_tie & tp).sum() / tp.sum()
        out["prec (paired GT)"] = (g.rep_tie & tp).sum() / g.rep_tie.sum()
    mt = g.true_diff.abs() < margin * g.R if "R" in g else None
    if mt is not None:
        out[f"recall (|Δ|<{margin}R)"] = (g.rep_tie & mt).sum() / mt.sum()
        out[f"prec (|Δ|<{margin}R)"] = (g.rep_tie & mt).sum() / g.rep_tie.sum()
    return out


def add_R(df):
    import wmt25
    if "R" not in df:
        df = df.copy()
        df["R"] = df.table.map(wmt25.scale_range)
    if "truth_tie_paired" not in df:
        import harness as H
        tp = {}
        for t in df.table.unique():
            for fd in H.fold_setup(t):
                tp[(t, fd["fold"])] = fd["gt"]["ties_paired"]
        df = df.copy()
        df["truth_tie_paired"] = [frozenset((a, b)) in tp[(t, f)] for t, f, a, b in
                                  zip(df.table, df.fold, df.a, df.b)]
    return df


LABELS = {
    "engine": "today (engine AdaptiveRanker, joint/global)",
    "jg|disp": "1 dispersion φ_m (ν0=10)", "jg|sandwich": "2 sandwich",
    "jg|misfit": "8 CV misfit τ_θ", "jg|misfit_paired": "8 + 5 paired θ (cross-sandwich)",
    "jg|r50_design": "4+5 ρ=0.5, design-based paired difference rule",
    "jg|misfit_d0.03": "8 + 5 TOST δ=0.03R",
    "2pl_t03|plain": "3 2PL (sd log a 0.3)", "2pl_t06|plain": "3 2PL (sd log a 0.6)",
    "moments_global|plain": "6 moments/global", "moments_per_item|plain": "6 moments/per_item",
    "joint_per_item|plain": "6 joint/per_item", "joint_global|plain": "joint/global (= today)",
    "pi|plain": "per_item, plain", "pi|disp": "per_item + 1", "pi|sandwich": "per_item + 2",
    "pi|misfit": "per_item + 8", "pi|misfit_disp": "per_item + 1 + 8", "pi|misfit_paired": "per_item + 8 + paired θ",
    "pi|r50_design": "per_item + ρ=0.5 + design paired rule", "pi|r50_misfit_d0": "per_item + ρ=0.5 + 8",
    "pi|r25_misfit": "per_item + ρ=0.25 + 8", "pi|r25_misfit_pf": "per_item + ρ=0.25 + 8 by 7",
    "pi|r0_misfit_pf": "per_item + ρ=0 + 8 by 7",
    "pi|r50_misfit_pf": "per_item + ρ=0.5 + 8 by 7", "pi|r50_misfitdisp_pf": "A = per_item + ρ=0.5 + 1 + 8 by 7",
    "pi|r50_misfitdisp_pf_d0.03": "A + TOST δ=0.03R",
    "pi|misfit_d0.01": "per_item + 8 + TOST δ=0.01R", "pi|misfit_d0.02": "per_item + 8 + TOST δ=0.02R",
    "pi|misfit_d0.03": "per_item + 8 + TOST δ=0.03R", "pi|misfit_d0.05": "per_item + 8 + TOST δ=0.05R",
    "mpi|r50_misfit": "moments/per_item + ρ=0.5 + 8",
    "pi|r50_misfit_pf_d0.03": "per_item + ρ=0.5 + 8 by 7 + TOST δ=0.03R",
    "mpi|r50_misfit_pf": "moments/per_item + ρ=0.5 + 8 by 7",
    "pi|r50_misfitdisp_pf_fut": "A + futility stop (factor 1)",
    "pi|r50_misfitdisp_pf_fut0.7": "A + futility stop (factor 0.7)",
    "pi|r50_misfitdisp_pf_fut0.5": "RECOMMENDED = A + futility stop (factor 0.5)",
    "pi|r50_misfitdisp_pf_fut0.5_d0.03": "RECOMMENDED + TOST δ=0.03R",
    "pi2pl|r50_misfitdisp_pf": "A with 2PL slopes (sd log a 0.3)",
    "pi2pl|plain": "per_item 2PL, plain",
    "pi|r50_misfitdisp_pf_fut_d0.03": "A + futility (1) + TOST δ=0.03R",
    "pi|r50_misfitdisp_pf_k8": "A, constants from 8 inner folds",
    "pi|r50_misfitdisp_pf_fut_k8": "A + futility (1), 8 inner folds",
    "pi|r50_misfit_d0.01": "per_item + ρ=0.5 + 8 + TOST δ=0.01R",
    "pi|r50_misfit_d0.02": "per_item + ρ=0.5 + 8 + TOST δ=0.02R",
    "pi|r50_misfit_d0.03": "per_item + ρ=0.5 + 8 + TOST δ=0.03R",
    "pi|r50_misfit_d0.05": "per_item + ρ=0.5 + 8 + TOST δ=0.05R",
}


def ranker_candidates():
    parts = [rd("before_rank")]
    for n in ("calib_tuning_rank", "rank_g1_tuning", "rank_r1_tuning", "rank_d1_tuning", "rank_r2_tuning"):
        if (R / f"{n}.parquet").exists():
            d = rd(n)
            if n == "calib_tuning_rank":
                d = d[d.config != "joint_global|plain"]
            parts.append(d)
    df = pd.concat([add_R(p[p.half == "tuning"]) for p in parts])
    rows = []
    seen = set()
    for c, g in df.groupby("config", sort=False):
        if c in seen or c in ("pi|r50_misfit",):  # r1's r50_misfit used the ρ=0 constants; d1's _d0 is the right one
            continue
        seen.add(c)
        r = {"candidate": LABELS.get(c, c), "config": c}
        r.update(rank_summary(g))
        rows.append(r)
    return pd.DataFrame(rows)


REC = "pi|r50_misfitdisp_pf_fut0.5"


def halves_ranker(configs=("pi|plain", "pi|r50_misfitdisp_pf", "pi|r50_misfitdisp_pf_d0.03", "pi|r50_misfitdisp_pf_fut",
                           "pi|r50_misfitdisp_pf_fut0.7", REC, "pi|r50_misfitdisp_pf_fut0.5_d0.03",
                           "pi|r50_misfitdisp_pf_k8", "pi2pl|r50_misfitdisp_pf")):
    rows = []
    b = add_R(rd("before_rank"))
    for half in ("tuning", "report"):
        r = {"half": half, "config": "today"}
        r.update(rank_summary(b, half))
        rows.append(r)
        fs = [R / f"rank_{x}_{half}.parquet" for x in ("final", "fut", "k8", "futf", "futd", "2pl")]
        fs = [f for f in fs if f.exists()]
        if fs:
            d = add_R(pd.concat([pd.read_parquet(f) for f in fs]))
            for c in configs:
                g = d[d.config == c]
                if len(g):
                    r = {"half": half, "config": LABELS.get(c, c)}
                    r.update(rank_summary(g, half))
                    rows.append(r)
    return pd.DataFrame(rows)


def judge_table(config=REC):
    rows = []
    b = rd("before_rank")
    for half in ("tuning", "report"):
        fs = [R / f"rank_{x}_{half}.parquet" for x in ("final", "futf")]
        d = pd.concat([pd.read_parquet(f) for f in fs if f.exists()]) if any(f.exists() for f in fs) else None
        bb = b[(b.half == half) & (b.family == "judge")].drop_duplicates(["table", "fold", "seed"])
        for t, g in bb.groupby("table", sort=False):
            r = {"table": t, "today τ": g.tau.mean(), "today random τ": g.random_tau.mean(), "today items": g["items"].mean()}
            if d is not None:
                h = d[(d.config == config) & (d.table == t)].drop_duplicates(["fold", "seed"])
                r.update({"rec τ": h.tau.mean(), "rec random τ": h.random_tau.mean(), "rec items": h["items"].mean()})
            rows.append(r)
    return pd.DataFrame(rows)


def per_table_final(half, config=REC):
    b = rd("before_rank")
    bc = rd("before_cat")
    f = R / f"rank_futf_{half}.parquet"
    o = R / f"seeds5_pi_r50_{half}_outer.parquet"
    if not o.exists():
        o = R / f"cv_pi_r50_{half}_outer.parquet"
    rows = []
    d = pd.read_parquet(f) if f.exists() else None
    oo = pd.read_parquet(o) if o.exists() else None
    for t in b[b.half == half].table.unique():
        g0 = A.pair_flags(b[b.table == t])
        c0 = bc[(bc.table == t) & (bc.variant == "plain")]
        r = {"table": t, "z today": float(np.mean(np.abs(c0.z) > Z)), "cov today": cov(c0, "ft_engine").mean(),
             "acc today": g0.correct.sum() / max(g0.confident.sum(), 1),
             "τ today": g0.drop_duplicates(["fold", "seed"]).tau.mean()}
        if oo is not None:
            c1 = oo[(oo.table == t) & (oo.variant == "disp_nu10")]
            r.update({"z rec": float(np.mean(np.abs(c1.z_pf) > Z)), "cov rec": cov(c1, "ft_model_pf").mean()})
        if d is not None:
            g1 = A.pair_flags(d[(d.table == t) & (d.config == config)])
            r.update({"acc rec": g1.correct.sum() / max(g1.confident.sum(), 1), "conf pairs rec": int(g1.confident.sum()),
                      "τ rec": g1.drop_duplicates(["fold", "seed"]).tau.mean(),
                      "items today": g0.drop_duplicates(["fold", "seed"])["items"].mean(),
                      "items rec": g1.drop_duplicates(["fold", "seed"])["items"].mean()})
        rows.append(r)
    return pd.DataFrame(rows)


if __name__ == "__main__":
    pd.set_option("display.width", 250)
    what = sys.argv[1:] or ["all"]
    out = []
    if "all" in what or "single" in what:
        out += ["## single-model candidates (tuning half)", fmt(single_tables())]
        out += ["## single-model: today vs recommended, both halves", fmt(halves_single())]
        out += ["## single-model by family", fmt(family_single())]
        out += ["## self-check", fmt(selfcheck_table())]
        out += ["## person fit", fmt(personfit_table())]
    if "all" in what or "rank" in what:
        out += ["## ranker candidates (tuning half)", fmt(ranker_candidates().drop(columns=["config"]))]
        out += ["## ranker: today vs recommended, both halves", fmt(halves_ranker())]
        out += ["## judge tables", fmt(judge_table())]
    if "all" in what or "pertable" in what:
        for h in ("tuning", "report"):
            out += [f"## per table ({h})", fmt(per_table_final(h))]
    print("\n\n".join(out))

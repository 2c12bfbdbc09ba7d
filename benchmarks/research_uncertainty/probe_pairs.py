"""Probe: how many common random items would a paired design-based test need per pair?"""
import sys
sys.path.insert(0, '.')
import numpy as np, pandas as pd, harness as H, wmt25
from proto.bankview import make_view
rows = []
for name in wmt25.TUNING:
    for fd in H.fold_setup(name):
        bv = H.view(name, fd["fold"], fd["calib"], {})
        X = fd["raw"]
        th = [H.all_items_estimate(bv, X[j], {"kind": "plain"}).mean for j in range(4)]
        pred = np.array([bv.predict_task_raw(t) for t in th])
        E = X - pred
        for a in range(4):
            for b in range(a + 1, 4):
                ok = ~np.isnan(X[a]) & ~np.isnan(X[b])
                delta = np.nanmean(X[a]) - np.nanmean(X[b])
                sd_raw = np.std(X[a, ok] - X[b, ok], ddof=1)
                sd_res = np.std(E[a, ok] - E[b, ok], ddof=1)
                sd_unp = np.sqrt(np.nanvar(X[a]) + np.nanvar(X[b]))
                rows.append(dict(table=name, fam=wmt25.family(name), delta=abs(delta), sd_raw=sd_raw, sd_res=sd_res,
                                 sd_unp=sd_unp, tie=frozenset((fd["hold"][a], fd["hold"][b])) in fd["gt"]["ties"]))
d = pd.DataFrame(rows)
for c in ["sd_raw", "sd_res", "sd_unp"]:
    d["n_" + c] = (1.96 * d[c] / d["delta"]) ** 2
pd.set_option('display.width', 200)
print(d.groupby("table", sort=False)[["delta", "sd_unp", "sd_raw", "sd_res"]].median().round(4).to_string())
nt = d[~d.tie]
print("non-tie pairs: median n needed unpaired/paired raw/paired residual:",
      nt[["n_sd_unp", "n_sd_raw", "n_sd_res"]].median().round(1).to_dict())
print("share non-tie pairs settleable with <=10 common items:", (nt[["n_sd_unp", "n_sd_raw", "n_sd_res"]] <= 10).mean().round(3).to_dict())
print("share with <=20:", (nt[["n_sd_unp", "n_sd_raw", "n_sd_res"]] <= 20).mean().round(3).to_dict())

# Oracle bound: a paired test on n common random items (the 4 models share one random set)
from scipy.stats import norm
for n in (20, 30, 40, 80):
    p_set = norm.cdf(d["delta"] * np.sqrt(n) / d["sd_raw"] - 1.96)  # chance a pair is resolved
    unres = 1 - p_set
    tie = d["tie"]
    rec = (unres * tie).sum() / tie.sum()
    prec = (unres * tie).sum() / unres.sum()
    print(f"oracle paired, n={n} common items/pair: expected tie recall {rec:.3f}, precision {prec:.3f}, "
          f"reported-tie share {unres.mean():.3f} (truth {tie.mean():.3f})")

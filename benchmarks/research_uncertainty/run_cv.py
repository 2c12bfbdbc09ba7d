"""Inner leave-models-out CV (self-check) + outer CAT records using the CV constants.

python run_cv.py LABEL TABLESET CAL_JSON DESIGN_JSON
  CAL_JSON: e.g. '{}' or '{"scaling":"per_item"}';  DESIGN_JSON: '{"rho":0.5}' etc.
Writes results/cv_<LABEL>_<set>_{outer,inner,pred}.parquet
"""
import sys, time, json
sys.path.insert(0, '.')
import numpy as np, pandas as pd
import harness as H, wmt25
from proto.selfcheck import inner_records, misfit_constants, predicted

VARIANTS = {"plain": {"kind": "plain"}, "disp_nu10": {"kind": "dispersion", "nu0": 10}}


def main(label, which, cal_json="{}", design_json="{}", K=4):
    K = int(K)
    cal = json.loads(cal_json)
    design = json.loads(design_json)
    tabs = {"tuning": wmt25.TUNING, "report": wmt25.REPORT, "all": wmt25.TUNING + wmt25.REPORT}[which]
    outer, inner, preds = [], [], []
    all_consts = {}
    t0 = time.time()
    for name in tabs:
        t = H.table(name)
        extra_by_fold = {}
        for fd in H.fold_setup(name):
            d = inner_records(t, fd["calib"], cal, VARIANTS, H.test_model, K=K, seed=fd["fold"], design=design)
            d["table"] = name
            d["fold"] = fd["fold"]
            d = H.save_frame(d) if hasattr(H, "save_frame") else d
            inner.append(d)
            consts = misfit_constants(_flat(d))
            extra_by_fold[fd["fold"]] = consts
            all_consts[f"{name}|{fd['fold']}"] = consts
            for v, p in predicted(_flat(d)).items():
                preds.append({"table": name, "fold": fd["fold"], "variant": v, **p,
                              **{"tau_theta": consts["tau_theta"][v], "sigma_T": consts["sigma_T"][v]}})
        outer += H.cat_records(name, cal, VARIANTS, extra_by_fold=extra_by_fold, **design)
        print(name, round(time.time() - t0), flush=True)
    H.save(outer, f"cv_{label}_{which}_outer.parquet")
    pd.concat([_flat(d) for d in inner]).to_parquet(H.RESULTS / f"cv_{label}_{which}_inner.parquet")
    pd.DataFrame(preds).to_parquet(H.RESULTS / f"cv_{label}_{which}_pred.parquet")
    (H.RESULTS / f"cv_{label}_{which}_consts.json").write_text(json.dumps(all_consts, indent=0))


def _flat(d):
    d = d.copy()
    for c in [c for c in d.columns if c.startswith("ft_") and not c.endswith(("_est", "_lo", "_hi"))]:
        v = d[c].apply(lambda x: x if isinstance(x, tuple) else (np.nan, np.nan, np.nan))
        d[c + "_est"] = [x[0] for x in v]
        d[c + "_lo"] = [x[1] for x in v]
        d[c + "_hi"] = [x[2] for x in v]
        d = d.drop(columns=c)
    return d


if __name__ == "__main__":
    main(*sys.argv[1:])

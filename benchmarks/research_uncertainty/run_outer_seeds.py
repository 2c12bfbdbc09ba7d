"""Outer CAT records of the recommended configuration with 5 seeds (random part redrawn per seed),
using the self-check constants already computed by run_cv.py (python run_outer_seeds.py HALF [LABEL])."""
import sys, time, json
sys.path.insert(0, '.')
import harness as H, wmt25

VARIANTS = {"plain": {"kind": "plain"}, "disp_nu10": {"kind": "dispersion", "nu0": 10}}


def main(which, label="pi_r50"):
    tabs = {"tuning": wmt25.TUNING, "report": wmt25.REPORT}[which]
    consts = H.load_consts(label, which)
    rows = []
    t0 = time.time()
    for name in tabs:
        ebf = {f: consts[(name, f)] for f in range(H.FOLDS)}
        rows += H.cat_records(name, {"scaling": "per_item"}, VARIANTS, rho=0.5, seeds=range(5), extra_by_fold=ebf)
        print(name, round(time.time() - t0), flush=True)
    H.save(rows, f"seeds5_{label}_{which}_outer.parquet")


if __name__ == "__main__":
    main(*sys.argv[1:])

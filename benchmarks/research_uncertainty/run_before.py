"""Before row: today's engine (joint/global calibration, AdaptiveRanker) on every table,
plus first estimator variants on the same CAT sequences.

    python run_before.py [SUFFIX]    # results/before_{cat,rank}SUFFIX.parquet (`_recheck`: the re-run on a later HEAD)
"""
import sys, time
sys.path.insert(0, '.')
import harness as H, wmt25

VARIANTS = {
    "plain": {"kind": "plain"},
    "disp_nu10": {"kind": "dispersion", "nu0": 10, "phi0": 1.0},
    "disp_nu5": {"kind": "dispersion", "nu0": 5, "phi0": 1.0},
    "sandwich": {"kind": "sandwich"},
    "sandwich_nofloor": {"kind": "sandwich", "floor_model": False},
}
suffix = sys.argv[1] if len(sys.argv) > 1 else ""
tabs = wmt25.TUNING + wmt25.REPORT
t0 = time.time()
cat, rk = [], []
for name in tabs:
    cat += H.cat_records(name, {}, VARIANTS)
    rk += H.ranker_records(name, {}, {}, engine=True, label="engine")
    print(name, round(time.time() - t0), flush=True)
H.save(cat, f"before_cat{suffix}.parquet")
H.save(rk, f"before_rank{suffix}.parquet")

"""Generic experiment runner: python run_exp.py EXPERIMENT [tables-set] ; see EXPERIMENTS."""
import sys, time, json
sys.path.insert(0, '.')
import harness as H, wmt25

BASE_VARIANTS = {"plain": {"kind": "plain"}, "disp_nu10": {"kind": "dispersion", "nu0": 10},
                 "sandwich": {"kind": "sandwich"}}

EXPERIMENTS = {
    # remedy 6: calibration choice; remedy 3: item slopes (2PL)
    "calib": {"cals": {"joint_global": {}, "moments_global": {"method": "moments"},
                       "joint_per_item": {"scaling": "per_item"},
                       "moments_per_item": {"method": "moments", "scaling": "per_item"},
                       "2pl_t03": {"slopes": {"tau": 0.3}}, "2pl_t06": {"slopes": {"tau": 0.6}}},
              "cat": True, "rank": {"plain": {}}},
}

def main(exp, which="tuning"):
    E = EXPERIMENTS[exp]
    tabs = {"tuning": wmt25.TUNING, "report": wmt25.REPORT, "all": wmt25.TUNING + wmt25.REPORT}[which]
    t0 = time.time()
    cat, rk = [], []
    for name in tabs:
        for cname, cal in E["cals"].items():
            if E.get("cat"):
                rows = H.cat_records(name, cal, E.get("variants", BASE_VARIANTS), rho=E.get("rho", 0.0),
                                     random_first=E.get("random_first", 0), seeds=E.get("cat_seeds", (0,)))
                for r in rows:
                    r["cal"] = cname
                cat += rows
            for rname, cfg in E.get("rank", {}).items():
                rows = H.ranker_records(name, cal, cfg, seeds=E.get("seeds", range(5)), label=f"{cname}|{rname}")
                rk += rows
        print(name, round(time.time() - t0), flush=True)
    if cat:
        H.save(cat, f"{exp}_{which}_cat.parquet")
    if rk:
        H.save(rk, f"{exp}_{which}_rank.parquet")

if __name__ == "__main__":
    main(*sys.argv[1:])

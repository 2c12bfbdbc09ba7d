"""Ranker experiments: python run_rank.py BATCH TABLESET  (see BATCHES)."""
import sys, time
sys.path.insert(0, '.')
import harness as H, wmt25

PI = {"scaling": "per_item"}
MF = {"kind": "misfit"}
MFP = {"kind": "misfit", "person_fit": True}
MFDP = {"kind": "misfit", "inner": "dispersion", "nu0": 10, "person_fit": True}
MPI = {"scaling": "per_item", "method": "moments"}
BATCHES = {
    "r2": [
        ("pi|r50_misfit_pf", PI, "pi_r50", {"est": MFP, "rho": 0.5}),
        ("pi|r50_misfitdisp_pf", PI, "pi_r50", {"est": MFDP, "rho": 0.5}),
        ("pi|r50_misfit_pf_d0.03", PI, "pi_r50", {"est": MFP, "rho": 0.5, "delta_frac": 0.03}),
        ("pi|r25_misfit", PI, "pi_r25", {"est": MF, "rho": 0.25}),
        ("pi|r25_misfit_pf", PI, "pi_r25", {"est": MFP, "rho": 0.25}),
        ("pi|r0_misfit_pf", PI, "pi", {"est": MFP}),
        ("mpi|r50_misfit", MPI, "mpi_r50", {"est": MF, "rho": 0.5}),
        ("mpi|r50_misfit_pf", MPI, "mpi_r50", {"est": MFP, "rho": 0.5}),
    ],
    "d1": [(f"pi|misfit_d{f}", PI, "pi", {"est": {"kind": "misfit"}, "delta_frac": f}) for f in (0.01, 0.02, 0.03, 0.05)]
          + [(f"pi|r50_misfit_d{f}", PI, "pi_r50", {"est": {"kind": "misfit"}, "rho": 0.5, "delta_frac": f})
             for f in (0.01, 0.02, 0.03, 0.05)]
          + [("pi|r50_misfit_d0", PI, "pi_r50", {"est": {"kind": "misfit"}, "rho": 0.5})],
    "r1": [
        ("pi|plain", PI, None, {}),
        ("pi|disp", PI, None, {"est": {"kind": "dispersion", "nu0": 10}}),
        ("pi|sandwich", PI, None, {"est": {"kind": "sandwich"}}),
        ("pi|misfit", PI, "pi", {"est": {"kind": "misfit"}}),
        ("pi|misfit_disp", PI, "pi", {"est": {"kind": "misfit", "inner": "dispersion", "nu0": 10}}),
        ("pi|misfit_paired", PI, "pi", {"est": {"kind": "misfit"}, "rule": "theta_paired"}),
        ("pi|r50_design", PI, "pi", {"est": {"kind": "plain"}, "rho": 0.5, "rule": "design_paired"}),
        ("pi|r50_misfit", PI, "pi", {"est": {"kind": "misfit"}, "rho": 0.5}),
    ],
    "g1": [
        ("jg|disp", {}, None, {"est": {"kind": "dispersion", "nu0": 10}}),
        ("jg|sandwich", {}, None, {"est": {"kind": "sandwich"}}),
        ("jg|misfit", {}, "jg", {"est": {"kind": "misfit"}}),
        ("jg|misfit_paired", {}, "jg", {"est": {"kind": "misfit"}, "rule": "theta_paired"}),
        ("jg|r50_design", {}, None, {"rho": 0.5, "rule": "design_paired"}),
        ("jg|misfit_d0.03", {}, "jg", {"est": {"kind": "misfit"}, "delta_frac": 0.03}),
    ],
    "fut": [
        ("pi|r50_misfitdisp_pf_fut", PI, "pi_r50", {"est": MFDP, "rho": 0.5, "futility": True}),
        ("pi|r50_misfitdisp_pf_fut_d0.03", PI, "pi_r50", {"est": MFDP, "rho": 0.5, "futility": True, "delta_frac": 0.03}),
    ],
    "k8": [
        ("pi|r50_misfitdisp_pf_k8", PI, "pi_r50_k8", {"est": MFDP, "rho": 0.5}),
        ("pi|r50_misfitdisp_pf_fut_k8", PI, "pi_r50_k8", {"est": MFDP, "rho": 0.5, "futility": True}),
    ],
    "2pl": [
        ("pi2pl|r50_misfitdisp_pf", {"scaling": "per_item", "slopes": {"tau": 0.3}}, "pi2pl_r50", {"est": MFDP, "rho": 0.5}),
        ("pi2pl|plain", {"scaling": "per_item", "slopes": {"tau": 0.3}}, None, {}),
    ],
    "futf": [
        (f"pi|r50_misfitdisp_pf_fut{f}", PI, "pi_r50", {"est": MFDP, "rho": 0.5, "futility": f}) for f in (0.5, 0.7)
    ],
    "futd": [
        ("pi|r50_misfitdisp_pf_fut0.5_d0.03", PI, "pi_r50", {"est": MFDP, "rho": 0.5, "futility": 0.5, "delta_frac": 0.03}),
    ],
    "final": [
        ("pi|plain", PI, None, {}),
        ("pi|r50_misfitdisp_pf", PI, "pi_r50", {"est": MFDP, "rho": 0.5}),
        ("pi|r50_misfitdisp_pf_d0.03", PI, "pi_r50", {"est": MFDP, "rho": 0.5, "delta_frac": 0.03}),
        ("pi|r50_misfit_pf", PI, "pi_r50", {"est": MFP, "rho": 0.5}),
        ("pi|r50_misfit", PI, "pi_r50", {"est": MF, "rho": 0.5}),
    ],
}


def main(batch, which="tuning", only=None):
    tabs = {"tuning": wmt25.TUNING, "report": wmt25.REPORT, "all": wmt25.TUNING + wmt25.REPORT}[which]
    cfgs = BATCHES[batch]
    consts = {lab: H.load_consts(lab, which) for lab in {c[2] for c in cfgs if c[2]}}
    rows = []
    t0 = time.time()
    for name in tabs:
        for label, cal, clab, cfg in cfgs:
            rows += H.ranker_records(name, cal, cfg, label=label, consts=consts.get(clab))
        print(name, round(time.time() - t0), flush=True)
    H.save(rows, f"rank_{batch}_{which}.parquet")


if __name__ == "__main__":
    main(*sys.argv[1:])

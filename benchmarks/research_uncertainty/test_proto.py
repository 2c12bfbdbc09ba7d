"""Sanity checks of the prototype parts on synthetic data (python test_proto.py).

1. Data drawn from the bank's own model: plain z share ≈ 5%, φ̂ ≈ 1, sandwich SE ≈ model SE,
   l_z ≈ N(0, 1)-ish (mean ≈ 0).
2. Data with model-specific misfit (each model's curve has its own slope): plain z share
   well above 5%; the design-based difference estimator still covers the full-task mean ≈ 95%.
"""
import sys
from pathlib import Path

import numpy as np
from scipy.special import expit

sys.path.insert(0, str(Path(__file__).parent))

from lm_eval_adaptive.engine.bank import ItemBank  # noqa: E402
from lm_eval_adaptive.engine.response_model import ContinuousResponseModel  # noqa: E402

from proto.bankview import BankView  # noqa: E402
from proto.decisions import ft_design  # noqa: E402
from proto.estimators import make_estimator  # noqa: E402
from proto.personfit import person_fit_lz  # noqa: E402
from proto.state import ModelState  # noqa: E402


def synthetic_view(N=400, k=0.05, seed=0):
    rng = np.random.default_rng(seed)
    b = rng.normal(0, 1.5, N)
    bank = ItemBank(item_ids=np.array([f"i{i}" for i in range(N)], dtype=object), b=b,
                    model=ContinuousResponseModel(k=k), scaling="global", lo=np.zeros(N), hi=np.ones(N),
                    input_tokens=np.ones(N), output_tokens=np.ones(N))
    return BankView(bank=bank, b=b, a=np.ones(N), k=k, lo=np.zeros(N), hi=np.ones(N), tpos=np.arange(N),
                    n_task=N, task_pred_other=np.full(N, 0.5), bank_of_task=np.arange(N),
                    theta_cal=np.zeros(3))


def draw(bv, theta, rng, slope=1.0):
    mu = expit(slope * (theta - bv.b))
    y = mu + rng.normal(0, 1, bv.n_items) * np.sqrt(bv.k * mu * (1 - mu))
    return np.clip(y, 0, 1)


def run(slope_sd, n=30, reps=300, rho=0.0, seed=1):
    rng = np.random.default_rng(seed)
    bv = synthetic_view()
    out = {"z": [], "phi": [], "sw_ratio": [], "lz": [], "cov_design": []}
    for r in range(reps):
        theta = rng.normal(0, 1)
        slope = float(np.exp(rng.normal(0, slope_sd)))
        raw = draw(bv, theta, rng, slope)
        perm = rng.permutation(bv.n_task) if rho > 0 else None
        st = ModelState("m", bv, make_estimator(bv, {"kind": "plain"}), raw, np.ones(bv.n_task), perm=perm, rho=rho)
        for _ in range(n):
            st.record(*st.peek())
        allest = make_estimator(bv, {"kind": "plain"})
        allest.update_many(np.arange(bv.n_items), raw)
        e = st.est
        out["z"].append((e.mean - allest.mean) / np.sqrt(max(e.sd ** 2 - allest.sd ** 2, 1e-12)))
        d = make_estimator(bv, {"kind": "dispersion", "nu0": 0, "floor": None})
        s = make_estimator(bv, {"kind": "sandwich", "floor_model": False})
        for i, y in zip(e.items, e.ys):
            d.update(i, y)
            s.update(i, y)
        out["phi"].append(d.phi)
        out["sw_ratio"].append(s.sd / s.model_sd)
        out["lz"].append(person_fit_lz(e))
        if rho > 0:
            T, lo, hi = ft_design(bv, st)
            out["cov_design"].append(lo <= raw.mean() <= hi)
    return {k: (np.asarray(v, dtype=float)) for k, v in out.items()}


if __name__ == "__main__":
    r = run(0.0)
    zs = float(np.mean(np.abs(r["z"]) > 1.96))
    print(f"model true : z share {zs:.3f}, mean φ̂ {np.mean(r['phi']):.3f}, "
          f"sandwich/model SE {np.median(r['sw_ratio']):.3f}, mean l_z {np.mean(r['lz']):.2f}")
    assert 0.01 <= zs <= 0.10
    assert 0.8 <= np.mean(r["phi"]) <= 1.2
    r = run(0.5, rho=0.5)
    zs = float(np.mean(np.abs(r["z"]) > 1.96))
    cov = float(np.mean(r["cov_design"]))
    print(f"misfit (slope sd 0.5), half random: plain z share {zs:.3f}, design coverage {cov:.3f}")
    assert cov >= 0.90
    r = run(0.5, rho=0.0)
    print(f"misfit (slope sd 0.5), all adaptive: plain z share {np.mean(np.abs(r['z']) > 1.96):.3f}")
    print("ok")

"""Does maximum-information selection make a 2PL/3PL SE over-confident? A probe on one ollb table.

A bank is calibrated on the first 300 models of bench_binary_honesty.py's seeded order (its
default calibration, or with ``--log-a-sd`` the slope prior's SD given); the next ``--holdout``
models after the ranking subsample's 320 are tested alone for 100 items by three selectors, each
with the engine's estimator and the bank's own slopes:

* ``default``: the engine's (maximum information, every second item at random);
* ``common-slope info``: the same, but information computed with one slope for every item (the
  geometric mean of the bank's), so the choice cannot favour items whose slope is overestimated;
* ``all random``: every item drawn at random.

Printed per length (20, 30, 100): the SD of z = (θ̂ₙ − θ̂_all)/√(SEₙ² − SE_all²) (measurement SE;
θ̂_all the bank's estimate on every item) and the share of |z| > 1.96 (honest: SD 1, 5%).

    python benchmarks/bench_binary_selection.py [--table mmlu_pro_math_7b] [--holdout 100] [--log-a-sd SD]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_binary_honesty import model_order  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from lm_eval_adaptive.data.named_tables import load_named  # noqa: E402
from lm_eval_adaptive.engine.irt.binary_calibration import LOG_A_PRIOR_SD, calibrate_binary  # noqa: E402
from lm_eval_adaptive.engine.cat.adaptive_test import AdaptiveTest  # noqa: E402
from lm_eval_adaptive.engine.cat.estimation import DEFAULT_PRIOR_SD, Z95, GridPosterior  # noqa: E402
from lm_eval_adaptive.engine.cat.selection import RandomShareSelector  # noqa: E402

LENGTHS = (20, 30, 100)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", default="mmlu_pro_math_7b")
    ap.add_argument("--holdout", type=int, default=100)
    ap.add_argument("--log-a-sd", type=float, default=LOG_A_PRIOR_SD)
    a = ap.parse_args(argv)
    with threadpool_limits(1):
        t = load_named(f"ollb/{a.table}")
        order = model_order(t)
        bank = calibrate_binary(t.select_models(order[:300]), response_model=None, log_a_prior_sd=a.log_a_sd)
        print(f"{a.table}: {bank.model.kind}, slope quantiles 5/50/95% "
              f"{np.round(np.quantile(bank.a, [0.05, 0.5, 0.95]), 2).tolist()}")
        raw = t.mean_matrix()
        row = {str(m): j for j, m in enumerate(t.models)}
        col = {str(v): i for i, v in enumerate(t.items)}
        tpos = np.array([col[str(x)] for x in bank.item_ids])
        a_common = np.full(bank.n_items, float(np.exp(np.mean(np.log(bank.a)))))

        def common_slope_information(theta, items=slice(None)):
            return bank.model.information(theta, bank.b[items], a=a_common[items], c=bank.c[items])

        selectors = {
            "default": None,
            "common-slope info": RandomShareSelector(bank.b, share=0.5, seed=0, information=common_slope_information),
            "all random": RandomShareSelector(bank.b, share=1.0, seed=0, information=bank.selection_information),
        }
        for label, selector in selectors.items():
            zs = {n: [] for n in LENGTHS}
            for k, m in enumerate(order[320:320 + a.holdout]):
                y = raw[row[m]][tpos]
                post = GridPosterior(bank.prior_mean, DEFAULT_PRIOR_SD)
                post.update_many(bank.model, bank.b, y, **bank.item_params())
                t_all, s_all = post.mean, post.sd
                test = AdaptiveTest(bank, se_target=None, min_items=0, max_items=max(LENGTHS), seed=k,
                                    selector=selector)
                e = test.examinee
                while (item := test.next_item()) is not None:
                    test.record(item, float(y[item]))
                    if e.n in zs and e.measurement_se > s_all:
                        zs[e.n].append((e.theta - t_all) / np.sqrt(e.measurement_se ** 2 - s_all ** 2))
            print(f"  {label:<18}" + "  ".join(
                f"n={n}: SD(z) {np.std(v):.2f}, |z|>1.96 {np.mean(np.abs(v) > Z95):.3f}" for n, v in zs.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Seeded runs whose items and estimates tests/test_pinned_runs.py pins (tests/fixtures/pinned_runs.json).

The figures were computed before the hot path was made faster (issue 13 item 5), and again when θ̂
before any score became the prior's centre exactly (issue 19: no scenario's item order may hang on a
float tie), and must not move: the same items in the same order, the same θ̂ and SE up to
floating-point rounding. Issue 21 made the full-task metric's scale the rankers' default judgement:
the ranking scenarios were written again with it (their items, stops and pairs change by design).
Issue 29 removed the θ-scale judgement and with it the ``theta_*`` scenarios that pinned it.
Regenerate (only when a result is meant to change) with
``python tests/pinned_runs.py tests/fixtures/pinned_runs.json``.
"""

from __future__ import annotations

import json
import sys

import numpy as np

from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.cat.adaptive_test import AdaptiveTest
from lm_eval_adaptive.engine.cat.estimation import GridEAP
from lm_eval_adaptive.engine.ranking.ranker import AdaptiveRanker
from lm_eval_adaptive.engine.irt.response_model import BernoulliResponseModel, ContinuousResponseModel
from lm_eval_adaptive.engine.evaluation.simulation import bank_scores, drive

MODEL_ERROR = {"ability_sd": 0.08, "full_task_sd": 0.004, "ability_sd_misfit": 0.2, "full_task_sd_misfit": 0.01,
               "runs": 100, "misfit_runs": 30}


def _bank(n: int, model, seed: int, model_error: bool) -> ItemBank:
    rng = np.random.default_rng([seed, n])
    bank = ItemBank(item_ids=np.array([f"i{j:05d}" for j in range(n)], dtype=object),
                    b=rng.normal(0.0, 1.5, n), model=model, scaling="global", lo=0.0, hi=1.0,
                    input_tokens=np.full(n, 100.0), output_tokens=np.full(n, 50.0), task="pin", metric="pin")
    if model_error:
        bank.set_model_error(MODEL_ERROR)
    return bank


def _scores(bank: ItemBank, thetas, noise, seed: int) -> np.ndarray:
    """(models, items) scaled scores drawn from the bank's response model; ``noise`` scales each
    model's scatter (> 1: misfit)."""
    rng = np.random.default_rng([seed, bank.n_items, len(thetas)])
    return bank_scores(bank, np.asarray(thetas, dtype=float)[:, None], rng,
                       noise=np.asarray(noise, dtype=float)[:, None])


def _ranking(bank, thetas, noise, seed, **kw) -> dict:
    names = [f"m{j}" for j in range(len(thetas))]
    y = _scores(bank, thetas, noise, seed)
    costs = kw.pop("costs", None)
    item_costs = None
    if costs is not None:
        item_costs = {m: np.full(bank.n_items, c) * (1 + 0.5 * np.sin(np.arange(bank.n_items) + j))
                      for j, (m, c) in enumerate(zip(names, costs))}
    r = AdaptiveRanker(bank, names, item_costs=item_costs, seed=seed, **kw)
    res = drive(r, lambda m, i: float(y[names.index(m), i]))
    ex = r.examinees
    out = {"ranking": res.ranking, "stopped_because": res.stopped_because,
           "theta": res.theta, "se": res.se, "total_cost": res.total_cost,
           "items": {m: [iid for iid, _ in res.item_log[m]] for m in names},
           "info": {m: ex[m].info_at_selection for m in names},
           "measurement_se": {m: ex[m].measurement_se for m in names},
           "misfit": {m: ex[m].misfit for m in names},
           "adjacent_confidence": res.adjacent_confidence,
           "ties": [list(p) for p in res.ties], "inseparable": [list(p) for p in res.inseparable]}
    # the metric scale's figures: each model's estimate of record, every pair
    out["estimates"] = {m: {k: res.estimates[m][k] for k in ("estimate", "center", "se", "lower", "upper")}
                        for m in res.ranking}
    out["pairs"] = [{k: p[k] for k in ("a", "b", "outcome", "p_order", "items_to_settle", "beyond_policy")}
                    for p in res.pairs]
    out["rank_range"] = res.rank_range
    return out


def _test(bank, theta, seed, **kw) -> dict:
    y = _scores(bank, [theta], [1.0], seed)[0]
    t = AdaptiveTest(bank, seed=seed, **kw)
    res = drive(t, lambda i: float(y[i]))
    return {"items": [int(i) for i in res.items], "theta": res.theta, "se": res.se,
            "stopped_because": res.stopped_because, "info": t.examinee.info_at_selection}


def pinned_runs() -> dict:
    cont = ContinuousResponseModel(k=0.25)
    bank1k = _bank(1000, cont, 0, True)
    rankings = {
        # the defaults: random half, DispersionEAP, model error, person fit, the judgement; one model misfits
        "default_1k": lambda: _ranking(bank1k, [-0.6, -0.1, 0.0, 0.7], [1.0, 1.0, 2.5, 1.0], 1, n_init=10,
                                           n_max=60),
        # no model error, warm-up only (the speed benchmark's shape)
        "warmup_only": lambda: _ranking(_bank(2000, cont, 1, False), [-1.0, -0.3, 0.3, 1.0], [1.0] * 4, 2,
                                            n_init=20, n_max=20),
        # randomesque selection (the ranker's random stream), costs and a budget, 8 models
        "topk_budget": lambda: _ranking(_bank(800, ContinuousResponseModel(k=0.1), 2, True),
                                            list(np.linspace(-1, 1, 8)), [1.0] * 8, 3, n_init=8, n_max=80, top_k=3,
                                            costs=[1.0, 2.0, 1.0, 3.0, 1.0, 1.0, 2.0, 1.5], budget=400.0),
        # the plain grid EAP with the normal likelihood
        "grid_eap_normal": lambda: _ranking(_bank(500, ContinuousResponseModel(k=0.2, likelihood="normal"), 3,
                                                      False), [-0.5, 0.0, 0.4, 0.5, 1.2], [1.0] * 5, 4, n_init=5,
                                                n_max=50, estimator=GridEAP()),
        # binary scores
        "bernoulli": lambda: _ranking(_bank(600, BernoulliResponseModel(a=1.3), 4, True), [-0.8, 0.0, 0.9],
                                          [1.0] * 3, 5, n_init=10, n_max=80),
    }
    out = {}
    for name, run in rankings.items():
        out[name] = run()  # the one judgement: the full-task metric's scale
    # one model's adaptive test
    out["adaptive_test"] = _test(bank1k, 0.4, 6, se_target=0.25, min_items=10, max_items=200)
    return out


def main(path: str) -> None:
    with open(path, "w") as fh:
        json.dump(pinned_runs(), fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])

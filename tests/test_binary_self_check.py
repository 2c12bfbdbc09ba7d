"""The self-check of a 2PL/3PL bank: its single-model leg (engine/evaluation/model_error.py, single_model_check)
measures the miss of held-out models tested alone at several lengths, beside the ranker's runs."""

from __future__ import annotations

import numpy as np
import pytest

from lm_eval_adaptive.data.responses import ResponseTable
from lm_eval_adaptive.engine.irt.calibration import calibrate
from lm_eval_adaptive.engine.evaluation.model_error import (
    corrected_figures,
    correction_from_records,
    single_model_check,
)
from lm_eval_adaptive.engine.irt.response_model import BinaryIRTModel, ContinuousResponseModel
from lm_eval_adaptive.engine.evaluation.self_check import self_check
from lm_eval_adaptive.engine.evaluation.simulation import draw_scores


def _table(n_models, n_items, seed, *, interaction=0.0, binary=True):
    """2PL answers; ``interaction``: the loading SD of a second ability the 2PL does not know (a model ×
    item effect on the logit shared across items: what a model family's own strengths look like)."""
    rng = np.random.default_rng(seed)
    theta, b, a = rng.normal(0, 1, n_models), rng.normal(0, 1, n_items), rng.lognormal(0.2, 0.4, n_items)
    # the second ability moves each model's logit on each item: a(θ - b) + e = a(θ - (b - e/a))
    shift = interaction * np.outer(rng.normal(size=n_models), rng.normal(size=n_items))
    b_eff = b[None, :] - shift / a[None, :]
    if binary:
        y = draw_scores(BinaryIRTModel("2pl"), theta[:, None], b_eff, rng, a=a[None, :])
    else:  # continuous scores (the continuous response model, a little noise)
        y = draw_scores(ContinuousResponseModel(0.05), theta[:, None], b_eff, rng)
    mi, ii = np.meshgrid(np.arange(n_models), np.arange(n_items), indexing="ij")
    return ResponseTable.from_columns([f"m{j:04d}" for j in mi.ravel()], [f"i{i}" for i in ii.ravel()], y.ravel(),
                                      metric="acc")


def test_single_model_leg_records_every_length_of_every_held_out_model():
    table = _table(200, 60, 0)
    recs = single_model_check(table, lambda h: calibrate(h, response_model="2pl"), folds=3, per_fold=8,
                              lengths=(10, 30, 100))
    # 3 folds of 8 models, each recorded after 10, 30 and (capped at the bank's 60 items) 60 items
    assert len(recs) == 3 * 8 * 3
    assert sorted({r["n"] for r in recs}) == [10, 30, 60]
    assert {r["leg"] for r in recs} == {"single"}
    full = [r for r in recs if r["n"] == 60]  # every item seen: θ̂ is θ̂ on every item, the full task is known
    assert all(abs(r["d"]) < 1e-9 and abs(r["err"]) < 1e-9 for r in full)
    # the correction covers 95% of the runs it is measured on (its definition; the |z| share counts
    # the runs that have a z, which the full-length ones do not, so it may pass 5% by a run or two)
    c = correction_from_records(recs)
    cover, z_share = corrected_figures(recs, c)
    assert cover >= 0.95 and z_share <= 0.05 + 2 / 48


def test_the_leg_needs_a_correction_only_where_the_model_is_wrong():
    fits = _table(600, 80, 1)
    misfit = _table(600, 80, 1, interaction=1.5)

    def correction(table):
        recs = single_model_check(table, lambda h: calibrate(h, response_model="2pl"), folds=2, per_fold=30,
                                  lengths=(20, 40))
        return correction_from_records(recs)

    # answers the 2PL describes: the stated uncertainty holds (no model error measured); answers with
    # a second ability: θ̂ and the full-task estimate miss by more than stated, and the leg measures it
    ok, wrong = correction(fits), correction(misfit)
    assert ok["ability_sd"] < 0.03 and ok["full_task_sd"] < 0.01
    assert wrong["ability_sd"] > 0.05 and wrong["full_task_sd"] > 0.03


def test_self_check_of_a_binary_bank_adds_the_leg_and_of_a_continuous_one_does_not():
    binary = self_check(_table(120, 40, 2), scaling="per_item", method="joint", response_model="2pl", seeds=1)
    assert binary.single_model_tests > 0 and 0.0 <= binary.single_model_coverage <= 1.0
    assert binary.correction["runs"] == binary.tests + binary.single_model_tests
    cont = self_check(_table(30, 40, 3, binary=False), scaling="per_item", method="joint", seeds=1)
    assert cont.single_model_tests == 0 and cont.single_model_coverage is None
    assert cont.correction["runs"] == cont.tests


@pytest.mark.parametrize("n_models", [5, 9])
def test_too_few_models_for_the_leg(n_models):
    assert single_model_check(_table(n_models, 20, 4), lambda h: calibrate(h, response_model="2pl")) == []


def test_the_correction_covers_every_length_not_only_the_pooled_runs():
    rng = np.random.default_rng(11)

    def recs(n, scale, k):
        d = scale * rng.normal(size=k)  # the miss of θ̂, whose stated variance is 0.01
        err = scale * 0.05 * rng.normal(size=k)
        return [{"d": float(x), "s2": 0.01, "se": 0.1, "err": float(e), "lo": 0.005, "hi": 0.005, "lo2": 0.01,
                 "hi2": 0.01, "misfit": False, "n": n, "leg": "single"} for x, e in zip(d, err)]

    # 300 short tests that miss as stated, 60 long ones that miss by three times more
    records = recs(20, 0.1, 300) + recs(100, 0.3, 60)
    c = correction_from_records(records)
    for n in (20, 100):
        part = [r for r in records if r["n"] == n]
        cover, z_share = corrected_figures(part, c)
        assert cover >= 0.95 and z_share <= 0.05 + 1e-9
    # pooled alone (no lengths), the long tests would be left short
    pooled = correction_from_records([{k: v for k, v in r.items() if k != "leg"} for r in records])
    assert pooled["ability_sd"] < c["ability_sd"]
    assert corrected_figures([r for r in records if r["n"] == 100], pooled)[1] > 0.05

"""Person fit: the dispersion statistic against simulations with known noise."""

from __future__ import annotations

import numpy as np
import pytest

from lm_eval_adaptive.engine.cat.person_fit import FLAG_Z, dispersion_fit
from lm_eval_adaptive.engine.evaluation.simulation import bank_scores


def test_a_model_that_fits_is_flagged_about_one_time_in_a_hundred(sim_bank):
    rng = np.random.default_rng(1)
    flags, ratios = [], []
    for _ in range(400):
        theta = rng.normal(0, 1)
        items = rng.choice(sim_bank.n_items, 40, replace=False)
        fit = dispersion_fit(sim_bank, items, bank_scores(sim_bank, theta, rng, items), theta)
        flags.append(fit.flagged)
        ratios.append(fit.dispersion)
    assert 0.8 < np.mean(ratios) < 1.05  # clipping at 0 and 1 trims some scatter
    assert np.mean(flags) < 0.03


def test_a_model_with_four_times_the_noise_is_flagged(sim_bank):
    rng = np.random.default_rng(2)
    flagged = []
    for _ in range(100):
        theta = rng.normal(0, 1)
        items = rng.choice(sim_bank.n_items, 40, replace=False)
        fit = dispersion_fit(sim_bank, items, bank_scores(sim_bank, theta, rng, items, noise=2.0), theta)
        flagged.append(fit.flagged)
        assert fit.n == 40 and fit.z == pytest.approx(fit.z)
    assert np.mean(flagged) > 0.9


def test_no_items_is_not_flagged(sim_bank):
    fit = dispersion_fit(sim_bank, [], [], 0.0)
    assert fit.n == 0 and not fit.flagged and np.isnan(fit.z)
    assert FLAG_Z == pytest.approx(1.645, abs=1e-3)  # one-sided 5%


def test_only_a_flagged_model_gets_a_misfit_note():
    from lm_eval_adaptive.engine.cat.person_fit import PersonFit, misfit_note

    assert misfit_note(PersonFit(40, 1.0, 0.1, False).to_dict()) is None and misfit_note(None) is None
    note = misfit_note(PersonFit(40, 3.2, 6.5, True).to_dict())
    assert "3.20× the bank's noise" in note and "z = 6.5" in note and "40 items" in note

"""The paired item design (engine/ranking/paired_design.py, issue 32 item 0): the adaptive slots of a model in
an open pair take documents its partner answers too, chosen for the information about their difference."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from conftest import make_sim_bank

from lm_eval_adaptive.engine.evaluation.backtest import backtest_signature
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig
from lm_eval_adaptive.engine.evaluation.fold_parts import fold_ranker
from lm_eval_adaptive.engine.ranking.paired_design import difference_information
from lm_eval_adaptive.engine.ranking.pairs.metric_judgement import MetricScaleJudgement
from lm_eval_adaptive.engine.ranking.pairs.settle_policy import SettlePolicy
from lm_eval_adaptive.engine.ranking.ranker import AdaptiveRanker
from lm_eval_adaptive.errors import InputError

NO_POLICY = functools.partial(MetricScaleJudgement, policy=SettlePolicy(None, None))


@pytest.fixture(scope="module")
def bank():
    return make_sim_bank(n_items=400, seed=3)


def _run(bank, simulate, design: str, n_max: int = 40):
    """Two close models (a near tie stays open) ranked to n_max items each; the ranker when done."""
    thetas = {"a": 0.05, "b": 0.0}
    rng = np.random.default_rng(5)
    ys = {m: simulate(t, bank.b, k=bank.k, rng=rng) for m, t in thetas.items()}
    r = AdaptiveRanker(bank, list(thetas), n_init=10, n_max=n_max, seed=0, judgement=NO_POLICY, design=design)
    while (req := r.ask()) is not None:
        r.tell(req, float(ys[req.model][req.item]))
    return r


def _shared_adaptive_share(r) -> float:
    """Of the items the models took in adaptive slots after the warm-up, the share both answered."""
    ea, eb = r.examinees["a"], r.examinees["b"]
    both = ~np.isnan(ea.raw) & ~np.isnan(eb.raw)
    late = [(e, i) for e in (ea, eb) for i in e.items[10:] if not e.random_mask[i]]
    return sum(bool(both[i]) for _, i in late) / len(late)


def test_difference_information_is_the_harmonic_half_of_the_two_informations():
    h = difference_information(np.array([1.0, 2.0, 0.0, 0.0]), np.array([1.0, 6.0, 3.0, 0.0]))
    assert h.tolist() == [0.5, 1.5, 0.0, 0.0]  # I_m·I_p/(I_m + I_p); 0 where either is 0


def test_a_close_pair_answers_the_same_documents_under_the_paired_design(bank, simulate):
    paired = _run(bank, simulate, "paired")
    individual = _run(bank, simulate, "individual")
    assert paired.stopped_because == individual.stopped_because == "max_items"
    share = _shared_adaptive_share(paired)
    assert share >= 0.9
    assert share > _shared_adaptive_share(individual)
    # the random slots still draw the shared random order: the same first random documents for both
    ra = [i for i in paired.examinees["a"].items if paired.examinees["a"].random_mask[i]]
    rb = [i for i in paired.examinees["b"].items if paired.examinees["b"].random_mask[i]]
    assert ra[:5] == rb[:5]
    assert paired.signature()["design"] == "paired" and "design" not in individual.signature()


def test_a_design_that_is_not_known_is_refused(bank):
    with pytest.raises(ValueError, match="design must be one of"):
        AdaptiveRanker(bank, ["a", "b"], design="pairs")
    with pytest.raises(InputError, match="the design is one of individual, paired, got 'pairs'"):
        BacktestConfig(design="pairs").validate(10)


def test_the_backtest_config_gives_its_design_to_the_fold_ranker(bank):
    config = BacktestConfig(design="paired")
    r = fold_ranker(bank, ["a", "b", "c", "d"], config, 0, 0)
    assert r.signature()["design"] == "paired"
    assert "design=paired" in backtest_signature(config, []).replace(":", "=")
    assert "design" not in backtest_signature(BacktestConfig(), [])

"""The engine's simulation module (engine/evaluation/simulation.py): scores drawn from response models against
their closed-form moments, abilities drawn from a population, one driver for every ask/tell object,
and the rule that no score is simulated anywhere else."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import make_sim_bank

from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.cat.adaptive_test import AdaptiveTest
from lm_eval_adaptive.engine.ranking.multi_metric_ranker import MultiMetricRanker
from lm_eval_adaptive.engine.cat.multi_metric_test import MultiMetricTest
from lm_eval_adaptive.engine.ranking.ranker import AdaptiveRanker
from lm_eval_adaptive.engine.irt.response_model import (
    BernoulliResponseModel,
    BinaryIRTModel,
    ContinuousResponseModel,
)
from lm_eval_adaptive.engine.evaluation.simulation import AbilityPopulation, bank_scores, draw_scores, drive, joint_abilities

REPO = Path(__file__).resolve().parents[1]
N = 200_000


@pytest.mark.parametrize("theta, b", [(0.0, 0.0), (1.2, -0.3), (-1.0, 0.8)])
def test_continuous_scores_have_the_models_mean_and_variance(theta, b):
    k = 0.1
    m = ContinuousResponseModel(k=k)
    mu = float(m.mean(theta, b))
    y = draw_scores(m, np.full(N, theta), b, np.random.default_rng(0), clip=False)
    se = np.sqrt(k * mu * (1 - mu) / N)
    assert abs(y.mean() - mu) < 4 * se
    assert y.var() == pytest.approx(k * mu * (1 - mu), rel=0.02)
    clipped = draw_scores(m, np.full(N, theta), b, np.random.default_rng(0))
    assert clipped.min() >= 0.0 and clipped.max() <= 1.0 and np.array_equal(clipped, np.clip(y, 0, 1))
    wide = draw_scores(m, np.full(N, theta), b, np.random.default_rng(0), clip=False, noise=2.0)
    assert wide.var() == pytest.approx(4 * k * mu * (1 - mu), rel=0.02)


def test_beta_scores_have_the_models_moments_inside_zero_one():
    k, theta, b = 0.1, 0.7, 0.0
    m = ContinuousResponseModel(k=k)
    mu = float(m.mean(theta, b))
    y = draw_scores(m, np.full(N, theta), b, np.random.default_rng(1), distribution="beta")
    assert 0 < y.min() and y.max() < 1
    assert y.mean() == pytest.approx(mu, abs=4 * np.sqrt(k * mu * (1 - mu) / N))
    assert y.var() == pytest.approx(k * mu * (1 - mu), rel=0.02)
    with pytest.raises(ValueError, match="distribution"):
        draw_scores(m, 0.0, 0.0, np.random.default_rng(), distribution="gamma")


@pytest.mark.parametrize("model, params", [
    (BernoulliResponseModel(a=1.3), {}),
    (BinaryIRTModel("3pl"), {"a": 0.8, "c": 0.25}),
])
def test_binary_scores_are_bernoulli_of_the_mean(model, params):
    theta, b = 0.4, -0.2
    p = float(model.mean(theta, b, **params))
    y = draw_scores(model, np.full(N, theta), b, np.random.default_rng(2), **params)
    assert set(np.unique(y)) == {0.0, 1.0}
    assert y.mean() == pytest.approx(p, abs=4 * np.sqrt(p * (1 - p) / N))


def test_bank_scores_use_the_banks_items_and_their_parameters():
    n = 50
    rng = np.random.default_rng(3)
    bank = ItemBank(item_ids=np.array([f"q{i}" for i in range(n)], dtype=object), b=rng.normal(0, 1, n),
                    model=BinaryIRTModel("3pl"), scaling="global", lo=0.0, hi=1.0, input_tokens=10.0,
                    output_tokens=1.0, a=rng.lognormal(0, 0.4, n), c=np.full(n, 0.2))
    y = bank_scores(bank, np.zeros((20_000, 1)), np.random.default_rng(4))
    assert y.shape == (20_000, n)
    np.testing.assert_allclose(y.mean(axis=0), bank.model.mean(0.0, bank.b, **bank.item_params()), atol=0.015)
    one = bank_scores(bank, 0.3, np.random.default_rng(5), items=[3, 7])
    assert one.shape == (2,)


def test_the_population_is_the_calibration_models_smoothed():
    bank = make_sim_bank(n_items=20)
    pool = np.random.default_rng(6).normal(0.5, 1.0, 40)
    bank.diagnostics["abilities"] = {f"m{j}": float(v) for j, v in enumerate(pool)}
    pop = AbilityPopulation.of_bank(bank)
    assert np.array_equal(np.sort(pop.values), np.sort(pool)) and "40 calibration models" in pop.source
    q75, q25 = np.quantile(pool, [0.75, 0.25])
    h = 0.9 * min(np.std(pool, ddof=1), (q75 - q25) / 1.34) * 40 ** -0.2  # Silverman's rule of thumb
    assert pop.bandwidth == pytest.approx(h)
    draws = pop.draw(50_000, np.random.default_rng(7))
    assert draws.mean() == pytest.approx(pool.mean(), abs=0.02)
    assert draws.var() == pytest.approx(pool.var() + h ** 2, rel=0.03)  # a bootstrap value plus N(0, h²)
    few = pop.draw(10, np.random.default_rng(8))  # fewer than the pool: no calibration model twice
    assert len({int(np.argmin(np.abs(pool - x))) for x in few}) >= 8


def test_joint_abilities_keep_one_model_good_on_every_metric():
    banks = {m: make_sim_bank(n_items=20, seed=s) for s, m in enumerate(("bleu", "chrf"))}
    rng = np.random.default_rng(9)
    ability = rng.normal(0, 1, 30)
    for j, (m, bank) in enumerate(banks.items()):
        bank.diagnostics["abilities"] = {f"m{i}": float(v + 0.3 * j) for i, v in enumerate(ability)}
    draw, how = joint_abilities(banks)
    pairs = np.array([[d["bleu"], d["chrf"]] for d in (draw(rng) for _ in range(2000))])
    assert "30 calibration models" in how and np.corrcoef(pairs.T)[0, 1] > 0.8
    banks["chrf"].diagnostics["abilities"] = {f"other{i}": float(v) for i, v in enumerate(ability)}
    draw, how = joint_abilities(banks)
    pairs = np.array([[d["bleu"], d["chrf"]] for d in (draw(rng) for _ in range(2000))])
    assert "share no calibration model" in how and np.corrcoef(pairs.T)[0, 1] > 0.8


def _scores(bank, thetas, seed=10):
    return {m: bank_scores(bank, t, np.random.default_rng([seed, j])) for j, (m, t) in enumerate(thetas.items())}


def test_drive_runs_a_ranker_as_its_own_loop_does():
    bank = make_sim_bank(n_items=300, seed=1)
    thetas = {"a": -0.5, "b": 0.0, "c": 0.6}
    y = _scores(bank, thetas)
    models = list(thetas)
    mine = drive(AdaptiveRanker(bank, models, n_init=5, n_max=40, seed=3), lambda m, i: float(y[m][i]))
    theirs = AdaptiveRanker(bank, models, n_init=5, n_max=40, seed=3).run(lambda m, i: float(y[m][i]))
    assert mine.item_log == theirs.item_log and mine.theta == theirs.theta and mine.ranking == theirs.ranking
    charged = AdaptiveRanker(bank, models, n_init=5, n_max=40, seed=3)
    res = drive(charged, lambda m, i: float(y[m][i]), cost=lambda m, i: 0.5)
    assert res.total_cost == pytest.approx(0.5 * res.total_items)


def test_drive_runs_a_test_as_its_own_loop_does_and_in_batches():
    bank = make_sim_bank(n_items=300, seed=2)
    y = _scores(bank, {"m": 0.3})["m"]
    mine = drive(AdaptiveTest(bank, se_target=0.3, min_items=10, max_items=80, seed=1), lambda i: float(y[i]))
    theirs = AdaptiveTest(bank, se_target=0.3, min_items=10, max_items=80, seed=1).run(lambda i: float(y[i]))
    assert list(mine.items) == list(theirs.items) and mine.theta == theirs.theta
    batched = AdaptiveTest(bank, se_target=None, max_items=30, seed=1)
    res = drive(batched, lambda i: float(y[i]), cost=lambda i: 2.0, batch_size=4)
    assert res.n_items == 30 and res.spent == pytest.approx(60.0) and res.stopped_because == "max_items"


def test_drive_runs_the_several_metric_ranker_and_test():
    banks = {m: make_sim_bank(n_items=200, seed=s) for s, m in enumerate(("bleu", "chrf"))}
    thetas = {"a": -0.6, "b": 0.0, "c": 0.7}
    y = {metric: _scores(bank, thetas, seed=11 + j) for j, (metric, bank) in enumerate(banks.items())}
    ranker = MultiMetricRanker(banks, list(thetas), n_init=5, n_max=30, seed=0)
    res = drive(ranker, lambda m, i: {k: float(y[k][m][ranker.bank_item(k, i)]) for k in banks})
    assert set(res.results) == set(banks) and res.generations == sum(res.items.values()) >= 15
    assert res.stopped_because == ranker.stopped_because is not None
    test = MultiMetricTest(banks, se_target=0.3, min_items=5, max_items=40, seed=0)
    out = drive(test, lambda i: {k: float(y[k]["b"][test.bank_item(k, i)]) for k in banks}, cost=lambda i: 1.0)
    assert set(out) == set(banks) and 5 <= test.n <= 40 and test.spent == pytest.approx(test.n)
    assert test.stopped_because is not None


# ------------------------------------------------------------------ no score simulator elsewhere
#: A statement that draws random numbers and names a response model's mean simulates scores.
DRAWS = {"normal", "standard_normal", "beta", "binomial", "random", "uniform"}
MEANS = {"mu", "p", "prob", "probs", "expit", "logistic", "sigmoid"}


def _score_simulators(path: Path, root: Path = REPO) -> list[str]:
    """``file:line`` of each statement of ``path`` that draws random numbers (a generator's
    ``normal``, ``beta``, ``random``, ...) and names a response model's mean (``mu``, ``p``, ``expit``,
    a ``.mean(θ, b)`` call) in the same statement."""
    found, text = [], path.read_text()
    if not re.search(r"\.(" + "|".join(DRAWS) + r")\(", text):  # nothing drawn here
        return found
    for stmt in ast.walk(ast.parse(text, filename=str(path))):
        if not isinstance(stmt, ast.stmt):
            continue
        nodes = _own_nodes(stmt)
        draws = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in DRAWS
                    for n in nodes)
        means = any((isinstance(n, ast.Name) and n.id in MEANS)
                    or (isinstance(n, ast.Attribute) and n.attr in MEANS - {"p"})
                    or (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "mean"
                        and len(n.args) >= 2)
                    for n in nodes)
        if draws and means:
            found.append(f"{path.relative_to(root)}:{stmt.lineno}")
    return found


def _own_nodes(stmt: ast.stmt) -> list:
    """The nodes of ``stmt`` itself: its expressions (an ``if``'s test, a ``for``'s iterable, ...), not
    the statements of its body, which are statements of their own."""
    out, todo = [], [c for c in ast.iter_child_nodes(stmt) if not isinstance(c, ast.stmt)]
    while todo:
        n = todo.pop()
        out.append(n)
        todo += [c for c in ast.iter_child_nodes(n) if not isinstance(c, ast.stmt)]
    return out


def test_no_score_is_simulated_outside_the_engines_simulation_module():
    home = REPO / "lm_eval_adaptive" / "engine" / "evaluation" / "simulation.py"
    files = [f for f in (REPO / "lm_eval_adaptive").rglob("*.py") if f != home]
    files += [*(REPO / "tests").glob("*.py"), *(REPO / "benchmarks").rglob("*.py")]
    bad = [b for f in files for b in _score_simulators(f)]
    assert not bad, ("scores simulated outside lm_eval_adaptive/engine/evaluation/simulation.py (use draw_scores or "
                     "bank_scores):\n" + "\n".join(bad))
    assert _score_simulators(home, REPO)  # the check sees the module's own draws


def test_the_simulator_check_sees_one(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("import numpy as np\n"
                 "def sim(rng, bank, theta):\n"
                 "    mu = bank.model.mean(theta, bank.b)\n"
                 "    y = np.clip(rng.normal(mu, 0.1), 0, 1)\n"
                 "    hit = rng.random(len(mu)) < mu\n"
                 "    b = rng.normal(0.0, 1.5, 100)\n"  # difficulties: not scores
                 "    keep = rng.random(10) >= 0.3\n"  # a missingness mask: not scores
                 "    y2 = theta + 0.5 * rng.standard_normal(bank.model.mean(theta, bank.b).shape)\n"
                 "    if rng.random() < p:\n"
                 "        pass\n")
    assert sorted(_score_simulators(f, tmp_path)) == ["x.py:4", "x.py:5", "x.py:8", "x.py:9"]

"""The banked ranker's anytime-valid intervals (issue 31, item 2; engine/anytime/banked_intervals.py,
docs/cold-start.md *What each mode guarantees*): the bank as a control variate keeps the guarantee whatever
the bank, the prefix of the selector's random permutation is what the intervals rest on, a full run is exact,
and whole ranker runs looked at after every score and stopped at the first claim stay within the bounds."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from lm_eval_adaptive.data.tables import load_any_table
from lm_eval_adaptive.engine.anytime.banked_intervals import BankedAnytimeIntervals, prefix_ability
from lm_eval_adaptive.engine.anytime.confidence_sequence import WorBettingCS
from lm_eval_adaptive.engine.cat.selection import RandomShareSelector
from lm_eval_adaptive.engine.evaluation.backtest import backtest
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig
from lm_eval_adaptive.engine.evaluation.simulation import draw_scores
from lm_eval_adaptive.engine.irt.response_model import ContinuousResponseModel
from lm_eval_adaptive.engine.ranking.pairs.metric_judgement import MetricScaleJudgement
from lm_eval_adaptive.engine.ranking.pairs.settle_policy import SettlePolicy
from lm_eval_adaptive.engine.ranking.ranker import AdaptiveRanker
from lm_eval_adaptive.errors import InputError
from conftest import make_sim_bank


def _bench():
    """benchmarks/bench_banked_anytime_sim.py as a module (the simulation behind the 1,000-run figures)."""
    spec = importlib.util.spec_from_file_location(
        "bench_banked_anytime_sim", Path(__file__).resolve().parents[1] / "benchmarks" / "bench_banked_anytime_sim.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _control_variate_runs(pop, pred, runs, rng, grid=201):
    """(ever missed, width at half the documents) of ``runs`` random orders of ``pop``, each score taken with
    the fixed predictions ``pred`` as control variate (None: the plain sequence)."""
    n = pop.size
    order = np.argsort(rng.random((runs, n)), axis=1)
    x = pop[order]
    cs = WorBettingCS(n, 0.0, 1.0, 0.05, shape=(runs,), grid=grid)
    if pred is not None:
        p = pred[order]
        rev = p[:, ::-1]
        c = (np.cumsum(rev, axis=1)[:, ::-1]) / (n - np.arange(n))  # mean over the documents not yet drawn
        top = np.maximum.accumulate(rev, axis=1)[:, ::-1]
        bottom = np.minimum.accumulate(rev, axis=1)[:, ::-1]
    ever = np.zeros(runs, dtype=bool)
    width = None
    for j in range(n):
        if pred is None:
            cs.update(x[:, j])
        else:
            cs.update(x[:, j], shift=p[:, j] - c[:, j], spread=(top[:, j] - c[:, j], c[:, j] - bottom[:, j]))
        ever |= (cs.lower > pop.mean() + 1e-12) | (cs.upper < pop.mean() - 1e-12)
        if j == n // 2:
            width = float(np.mean(cs.upper - cs.lower))
    assert np.all(cs.upper - cs.lower < 1e-12)  # exact at the full run, with or without a control variate
    return float(ever.mean()), width


def test_a_control_variate_keeps_the_guarantee_whatever_the_bank_and_a_good_one_narrows():
    """1,000 random orders of one population looked at after every score: with a bank that predicts the
    scores, one that predicts them backwards, and none, the share of runs whose interval EVER misses the
    full-task mean is at most 5%; the good bank's interval at half the documents is narrower than none's."""
    rng = np.random.default_rng(7)
    n = 120
    effect = rng.beta(0.6, 0.6, n)  # the documents' difficulty: most of the scores' spread
    pop = np.clip(effect + rng.normal(0, 0.05, n), 0, 1)
    out = {}
    for name, pred in (("none", None), ("good", effect), ("backwards", 1.0 - effect)):
        out[name] = _control_variate_runs(pop, pred, 1000, np.random.default_rng(1))
    print({k: (round(a, 3), round(w, 3)) for k, (a, w) in out.items()})
    for name, (ever, _) in out.items():
        assert ever <= 0.05, (name, ever)
    assert out["good"][1] < 0.9 * out["none"][1]  # 0.165 against 0.194 here; a backwards bank costs width (0.366)


def _ranker(bank, models, seed, score_range=(0.0, 1.0), **kwargs):
    parts = []

    def factory(*args):
        parts.append(BankedAnytimeIntervals.factory(score_range, grid=201)(*args))
        return parts[-1]

    sel = RandomShareSelector(bank.b, 1, seed=seed)
    ranker = AdaptiveRanker(bank, models, seed=seed, selector=sel, judgement=functools.partial(
        MetricScaleJudgement, intervals=factory, policy=SettlePolicy(None, None)), **kwargs)
    return ranker, parts[0]


def test_a_full_run_is_exact_and_the_intervals_rest_on_the_random_prefix():
    bank = make_sim_bank(n_items=30, seed=3)
    rng = np.random.default_rng(4)
    y = draw_scores(ContinuousResponseModel(k=0.1), np.array([[0.5], [-0.2]]), bank.b[None, :], rng)
    models = ["A", "B"]
    ranker, iv = _ranker(bank, models, seed=5)
    perm = ranker.selector.order[ranker.selector.perm_pos]
    for _ in range(24):  # part of the way: the prefix is the permutation's, every item of it seen
        req = ranker.ask()
        j = models.index(req.model)
        ranker.tell(req, float(y[j, req.item]), raw=float(y[j, req.item]))
    ranker.judgements[0].open_pairs(models)
    for k, m in enumerate(models):
        e = ranker.examinees[m]
        n_pre = iv.model_prefix(k)
        assert n_pre >= int(np.count_nonzero(e.random_mask))  # every random pick lies in the prefix
        assert np.all(~np.isnan(e.raw[perm[:n_pre]])) and (n_pre == bank.n_items or np.isnan(e.raw[perm[n_pre]]))
        lo, hi = iv.model_interval(k)
        assert 0.0 <= lo <= y[k].mean() <= hi <= 1.0
    ranker.run(lambda m, i: float(y[models.index(m), i]))  # until the pair is settled
    for k, m in enumerate(models):  # then the rest of a full run
        rest = np.flatnonzero(np.isnan(ranker.examinees[m].raw))
        ranker.record_many(m, rest, y[k, rest], raws=y[k, rest])
    res = ranker.result()
    for k, m in enumerate(models):
        assert iv.model_interval(k) == pytest.approx((y[k].mean(),) * 2, abs=1e-12)
        est = res.estimates[m]
        assert est["anytime_valid"] and est["lower"] == est["upper"] == pytest.approx(y[k].mean())
    lo, hi = iv.pair_interval(0, 1)
    assert lo == pytest.approx(hi) == pytest.approx(y[0].mean() - y[1].mean())
    assert res.signature["intervals"] == "anytime" and res.signature["control_variate"] is True


def test_a_score_outside_the_stated_range_is_refused():
    bank = make_sim_bank(n_items=20, seed=1)
    ranker, _ = _ranker(bank, ["A", "B"], seed=0, score_range=(0.0, 0.5))
    with pytest.raises(ValueError, match="outside the stated score range"):
        ranker.run(lambda m, i: 0.9)


def test_the_prefix_ability_matches_the_mean():
    bank = make_sim_bank(n_items=50, seed=2)
    items = np.arange(10)
    target = 0.42
    theta = prefix_ability(bank, items, np.full(10, target))
    mu = bank.model.mean(theta, bank.b[items])
    assert float(np.mean(mu)) == pytest.approx(target, abs=2e-3)
    assert prefix_ability(bank, [], []) == 0.0


def test_whole_ranker_runs_stopped_at_the_first_claim_stay_within_the_bounds():
    """Real ranker runs on a wrong bank, looked at after every score, stopped at the first claim (the
    1,000-run figures: benchmarks/bench_banked_anytime_sim.py, docs/results/stop30_banked_anytime_sim.txt).
    Each bound is 0.05; with 20 runs a share above 0.25 (6 runs) has probability under 0.003 at 0.05."""
    sim = _bench()
    for gap in (0.0, 0.1):
        r = sim.simulate(20, 30, gap, seed=3)
        print(r)
        assert r["wrong"] <= 0.25 and r["missed"] <= 0.25, r
    assert r["claimed"] > 0  # the gap is claimed (ordered) within the runs


def test_backtest_with_anytime_intervals_on_a_real_table():
    table = load_any_table("wmt24/en-de/bleu")
    cfg = BacktestConfig(seeds=1, folds=1, settle_seeds=0, self_check=False, intervals="anytime")
    r = backtest(table, config=cfg)
    assert "intervals:anytime" in r.signature
    assert r.metric_full_task_coverage >= 0.75  # 3 of the 4 models at least (the intervals are the run's own)


def test_the_intervals_setting_is_checked():
    with pytest.raises(InputError, match="intervals"):
        BacktestConfig(intervals="sometimes").validate(10)
    BacktestConfig(intervals="anytime").validate(10)  # one judgement (the metric scale): any intervals go with it

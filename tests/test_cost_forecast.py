"""The cost forecast of ``--dry-run`` (live/cost_forecast.py), on simulated banks: no harness, no HTTP.

The forecast end to end (``rank``, ``refresh`` and ``run --adaptive`` with ``--dry-run`` against
the replay endpoint, then the real runs) is tests/test_dry_run_e2e.py.
"""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest
from conftest import make_sim_bank

from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.data.prices import Price
from lm_eval_adaptive.engine.cat.adaptive_test import AdaptiveTest
from lm_eval_adaptive.engine.ranking.ranker import AdaptiveRanker
from lm_eval_adaptive.engine.ranking.pairs.metric_judgement import MetricScaleJudgement
from lm_eval_adaptive.engine.ranking.pairs.settle_policy import SettlePolicy
from lm_eval_adaptive.engine.evaluation.simulation import AbilityPopulation, bank_scores
from lm_eval_adaptive.harness.lm_eval_compat import prompt_text
from lm_eval_adaptive.live.cost_forecast import (
    RANKING_DRAWS,
    TOLERANCE,
    Spread,
    forecast_ranking,
    forecast_test,
    most_likely_within,
    simulated_live_run,
    spreads,
)
from lm_eval_adaptive.live.session import expected_item_costs

PRICE = Price.per_million(1.0, 3.0, "test")
DEAR = Price.per_million(30.0, 60.0, "test")


def _bank(abilities=True):
    bank = make_sim_bank(n_items=300, seed=3)
    if abilities:
        rng = np.random.default_rng(1)
        bank.diagnostics["abilities"] = {f"m{i}": float(v) for i, v in enumerate(rng.normal(0, 1, 12))}
    return bank


def test_expected_costs_take_the_longer_of_the_banks_input_and_the_prompt():
    bank = _bank()  # 100 input, 50 output tokens per item
    chars = np.full(bank.n_items, 200.0)
    chars[:10] = 1000.0  # 250 tokens: longer than the bank's 100
    c = expected_item_costs(PRICE, bank, chars)
    assert c[0] == pytest.approx((250 + 3 * 50) / 1e6)
    assert c[10] == pytest.approx((100 + 3 * 50) / 1e6)


def test_ability_population_is_the_calibration_models_or_a_stated_fallback():
    pop = AbilityPopulation.of_bank(_bank())
    assert pop.values.size == 12 and "12 calibration models" in pop.source
    pop = AbilityPopulation.of_bank(_bank(abilities=False))
    assert pop.values.size > 100 and "no calibration abilities" in pop.source
    draws = AbilityPopulation(np.array([0.0, 1.0, 2.0]), "three").draw(3, np.random.default_rng(0))
    assert draws.shape == (3,) and np.all(np.abs(draws - np.round(draws)) < 1.0)


def test_the_simulated_run_keeps_the_cap_against_upper_estimates_as_the_live_driver_does():
    bank = _bank()
    models = ["a", "b", "c"]
    cost = {m: PRICE.item_costs(bank.input_tokens, bank.output_tokens) for m in models}
    upper = {m: np.full(bank.n_items, 10 * cost[m][0]) for m in models}  # reserve 10x the real charge
    cap = 100 * cost["a"][0]
    # no stopping policy (it would give the close pairs up first): the cap ends the run
    ranker = AdaptiveRanker(bank, models, item_costs=cost, budget=cap, n_init=5,
                            judgement=functools.partial(MetricScaleJudgement, policy=SettlePolicy(None)))
    theta = {"a": 0.2, "b": 0.1, "c": 0.0}  # close: the cap ends the run
    rng = np.random.default_rng(0)
    y = {m: bank_scores(bank, t, rng) for m, t in theta.items()}
    r = simulated_live_run(ranker, lambda m, i: float(y[m][i]), cost, upper, cap)
    spent = sum(r["usd"].values())
    assert r["stopped_because"] == "budget"
    # the ledger refuses a call once spent + the upper estimates in flight would pass the cap: the
    # run stops with about one round of upper estimates (3 models x 10 charges) unspent
    assert cap - 3 * upper["a"][0] - 1e-12 <= spent <= cap
    assert sum(r["items"].values()) == pytest.approx(spent / cost["a"][0])



def _cheap_and_dear():
    """A simulated bank, a cheap and a dear model, their item costs and upper estimates (1,024 output tokens)."""
    bank = _bank()
    models = ["cheap", "dear"]
    prices = {"cheap": PRICE, "dear": DEAR}
    cost = {m: prices[m].item_costs(bank.input_tokens, bank.output_tokens) for m in models}
    upper = {m: prices[m].item_costs(bank.input_tokens, np.full(bank.n_items, 1024.0)) for m in models}
    return bank, models, prices, cost, upper

def test_forecast_ranking_typical_within_worst_within_cap():
    bank, models, prices, cost, upper = _cheap_and_dear()
    cap = 0.05

    def new_ranker():
        return AdaptiveRanker(bank, models, item_costs=cost, budget=cap, n_init=5, n_max=80)

    fc = forecast_ranking(new_ranker, models, prices=prices, cost=cost, upper=upper,
                          full_run={m: float(np.sum(cost[m])) for m in models}, cap=cap, task="sim-task",
                          command="rank", draws=8)
    assert [r.model for r in fc.rows] == models
    for r in fc.rows:
        assert r.items.low <= r.items.typical <= r.items.high <= r.worst_items == 80
        assert r.usd.low <= r.usd.typical <= r.usd.high <= r.worst_usd <= min(cap, r.full_run_usd)
        # worst case: the 80 dearest items at their expected cost; the bound: at their upper estimates
        assert r.worst_usd == pytest.approx(min(cap, float(np.sort(cost[r.model])[::-1][:80].sum())))
        assert r.bound_usd == pytest.approx(min(cap, float(np.sort(upper[r.model])[::-1][:80].sum())))
    assert fc.usd.typical <= fc.worst_usd <= cap and fc.bound_usd == cap
    assert fc.full_run_usd == pytest.approx(sum(float(np.sum(cost[m])) for m in models))
    assert sum(fc.stopped_because.values()) == 8
    d = json.loads(json.dumps(fc.to_dict()))
    assert d["calls_made"] == 0 and d["total"]["cost_usd"]["typical"] == fc.usd.typical
    # the same settings and seed give the same forecast
    again = forecast_ranking(new_ranker, models, prices=prices, cost=cost, upper=upper,
                             full_run={m: 0.0 for m in models}, cap=cap, task="sim-task", command="rank", draws=8)
    assert again.usd == fc.usd and again.items == fc.items


def test_forecast_test_stops_where_the_adaptive_test_does():
    bank = _bank()
    cost = PRICE.item_costs(bank.input_tokens, bank.output_tokens)
    upper = PRICE.item_costs(bank.input_tokens, np.full(bank.n_items, 1024.0))

    def new_test():
        return AdaptiveTest(bank, se_target=0.3, min_items=10, max_items=60, item_costs=cost)

    row, runs = forecast_test(new_test, model="m", task="sim-task", price=PRICE, cost=cost, upper=upper,
                              full_run=float(np.sum(cost)), budget=None, draws=10)
    assert len(runs) == 10 and all(10 <= r["items"] <= 60 for r in runs)
    assert row.usd.typical == pytest.approx(row.items.typical * cost[0])  # every item costs the same here
    assert row.worst_items == 60 and row.worst_usd == pytest.approx(60 * cost[0])
    assert row.bound_usd == pytest.approx(60 * upper[0])
    # with a budget: the worst case is the budget (items charged at the estimates the budget rule checks),
    # the bound the budget plus one item's excess of its upper estimate over that estimate
    row, _ = forecast_test(new_test, model="m", task="sim-task", price=PRICE, cost=cost, upper=upper,
                           full_run=float(np.sum(cost)), budget=10 * cost[0], draws=2)
    assert row.worst_usd == pytest.approx(10 * cost[0])
    assert row.bound_usd == pytest.approx(10 * cost[0] + upper[0] - cost[0])


def test_spread_is_the_figure_most_runs_are_near_and_deciles():
    s = Spread.of(range(11))
    assert (s.low, s.high) == (1.0, 9.0)
    # 7.5 is within 25% of 6..10 (0.8·7.5 = 6, 7.5/0.75 = 10: 5 values); no other point is within 25% of as many
    assert s.typical == pytest.approx(7.5) and s.share_within == pytest.approx(5 / 11)
    assert Spread.of([5.0] * 4).typical == 5.0  # the median when it is as well covered as any point
    d = s.to_dict()
    assert set(d) == {"typical", "p10", "p90", "share_within_25pct"} and TOLERANCE == 0.25


def test_most_likely_within_takes_the_point_between_two_modes_that_covers_both():
    # a ranking's bimodal spend: the dear model's stop (0.145) and a cheap pair's (0.197), 45% / 55%
    v = [0.145] * 45 + [0.197] * 55
    f, share = most_likely_within(v)
    assert share == 1.0 and 0.75 * 0.197 <= f <= 1.25 * 0.145  # within 25% of both modes
    assert f == pytest.approx(1.25 * 0.145)  # of the points covering both, the nearest to the median 0.197
    # modes too far apart for one point: the heavier one, at its own value
    f, share = most_likely_within([0.05] * 40 + [0.2] * 60)
    assert f == pytest.approx(0.2) and share == pytest.approx(0.6)
    # a long tail does not pull the figure, as it pulls a mean
    f, share = most_likely_within([0.05] * 70 + list(np.linspace(0.1, 0.3, 30)))
    assert f == pytest.approx(0.05) and share == pytest.approx(0.7)
    # scale-free, and a constant is its own figure
    assert most_likely_within(3.0 * np.array(v))[0] == pytest.approx(3.0 * most_likely_within(v)[0])
    assert most_likely_within([0.0, 0.0]) == (0.0, 1.0)


def test_forecast_ranking_draws_ranking_draws_by_default():
    bank, models, prices, cost, upper = _cheap_and_dear()
    fc = forecast_ranking(lambda: AdaptiveRanker(bank, models, item_costs=cost, n_init=3, n_max=8, seed=0),
                          models, prices=prices, cost=cost, upper=upper, full_run={m: 0.0 for m in models},
                          cap=None, task="sim-task", command="rank")
    assert fc.draws == RANKING_DRAWS and sum(fc.stopped_because.values()) == RANKING_DRAWS
    assert fc.to_dict()["method"]["draws"] == RANKING_DRAWS
    assert 0 < fc.usd.share_within <= 1


def test_prompt_text_of_a_chat_request_is_its_messages_text():
    class JsonChatStr:  # the shape of lm-eval's chat-templated API request context
        prompt = json.dumps([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi\nthere"}])

    assert prompt_text(JsonChatStr()) == "Be brief.\nHi\nthere"
    assert prompt_text("plain prompt") == "plain prompt"


@pytest.mark.parametrize("argv", [
    ["rank", "--resume", "somewhere", "--dry-run"],
    ["refresh", "--resume", "somewhere", "--dry-run"],
])
def test_dry_run_does_not_go_with_resume(argv, capsys):
    assert main(argv) == 2
    assert "--dry-run" in capsys.readouterr().err


def test_run_dry_run_needs_adaptive(capsys):
    assert main(["run", "--model", "dummy", "--tasks", "x", "--dry-run"]) == 2
    assert "--adaptive" in capsys.readouterr().err


# ----------------------------------------------------------------- a table consistent by construction
# (issue 23: "293 typical items at $0.0013 for a model whose full run is $0.0805"; "34 [30, 30]"; a worst
# case of $7.04 for a task whose full run is $0.91): each test below fails on the code before it.
def test_a_typical_figure_lies_inside_its_own_range():
    # 28 runs stop at 30 items, two go on: the figure most runs come within 25% of was 31.5, outside [30, 30]
    s = Spread.of([30.0] * 28 + [40.0, 42.0])
    assert (s.low, s.high) == (30.0, 30.0) and s.typical == 30.0 and s.share_within == pytest.approx(29 / 30)
    v = np.random.default_rng(0).lognormal(0, 1, 200)
    s = Spread.of(v)
    assert s.low <= s.typical <= s.high


def _uneven_costs(seed):
    """A simulated bank, three models whose items cost 1x or 20x at random (the dear ones uneven)."""
    bank = _bank()
    rng = np.random.default_rng(seed)
    models = ["a", "b", "c"]
    cost = {m: PRICE.item_costs(bank.input_tokens, bank.output_tokens) * rng.choice([1.0, 20.0], bank.n_items)
            for m in models}
    return bank, models, cost


def test_a_rows_items_and_dollars_come_from_the_same_simulated_runs():
    bank, models, cost = _uneven_costs(seed=2)
    fc = forecast_ranking(lambda: AdaptiveRanker(bank, models, item_costs=cost, n_init=5, n_max=60, seed=0), models,
                          prices={m: PRICE for m in models}, cost=cost, upper={m: 3 * cost[m] for m in models},
                          full_run={m: float(np.sum(cost[m])) for m in models}, cap=None, task="sim-task",
                          command="rank", seed=2, draws=15)
    for r in fc.rows:
        c = cost[r.model]
        # n items cost between n cheapest and n dearest item costs: so do the typical runs' medians
        # (before: 6 typical items at $0.12, where 6 items cost at most $0.03)
        assert r.items.typical * c.min() <= r.usd.typical * (1 + 1e-9)
        assert r.usd.typical <= r.items.typical * c.max() * (1 + 1e-9)
        assert r.items.low <= r.items.typical <= r.items.high and r.usd.low <= r.usd.typical <= r.usd.high
    assert fc.items.low <= fc.items.typical <= fc.items.high and fc.usd.low <= fc.usd.typical <= fc.usd.high


def test_spreads_take_every_column_from_the_runs_near_the_typical_total():
    totals = [1.0] * 6 + [2.0] * 4  # the typical total is 1.0: its runs are the first six
    usd, cols = spreads(totals, {"x": [10.0] * 6 + [90.0] * 4})
    assert usd.typical == 1.0 and cols["x"].typical == 10.0 and cols["x"].share_within == pytest.approx(0.6)


def test_the_typical_total_is_never_below_a_rows_typical_dollars():
    """Issue 30 item 7: the total ($0.3922) was below one model's own row ($0.4283): the total was the figure
    most runs come within 25% of, the rows the medians of the runs near it. Now every typical figure is the
    median of those runs; a run's total is at least each part, so the medians keep that order."""
    rng = np.random.default_rng(1)  # 20 runs; before: the total 1.103, model a's row 1.180
    a, b = rng.lognormal(0, 0.5, 20), rng.uniform(0, 0.05, 20)
    usd, cols = spreads(a + b, {"a": a, "b": b})
    assert usd.typical >= cols["a"].typical and usd.typical >= cols["b"].typical
    assert usd.low <= usd.typical <= usd.high
    bank, models, cost = _uneven_costs(seed=5)
    fc = forecast_ranking(lambda: AdaptiveRanker(bank, models, item_costs=cost, n_init=5, n_max=60, seed=0), models,
                          prices={m: PRICE for m in models}, cost=cost, upper={m: 3 * cost[m] for m in models},
                          full_run={m: float(np.sum(cost[m])) for m in models}, cap=None, task="sim-task",
                          command="rank", seed=5, draws=15)
    assert all(fc.usd.typical >= r.usd.typical and fc.items.typical >= r.items.typical for r in fc.rows)


def test_the_worst_case_is_never_above_the_cap_or_a_full_run():
    bank, models, prices, cost, upper = _cheap_and_dear()
    # a full run (the bank's 300 items at their expected cost) is below 80 items at their upper estimates
    full = {m: float(np.sum(cost[m])) for m in models}
    assert all(full[m] < float(np.sort(upper[m])[::-1][:80].sum()) for m in models)
    for cap in (None, 0.05):
        fc = forecast_ranking(lambda: AdaptiveRanker(bank, models, item_costs=cost, budget=cap, n_init=5, n_max=80),
                              models, prices=prices, cost=cost, upper=upper, full_run=full, cap=cap, task="sim-task",
                              command="rank", draws=4)
        for r in fc.rows:
            assert r.usd.high <= r.worst_usd <= min(cap or np.inf, r.full_run_usd)
            assert r.worst_usd <= r.bound_usd  # the hard bound (upper estimates) is reported beside it
        assert fc.worst_usd <= min(cap or np.inf, fc.full_run_usd) and fc.usd.high <= fc.worst_usd
    cost1, upper1 = cost["cheap"], upper["cheap"]
    row, _ = forecast_test(lambda: AdaptiveTest(bank, se_target=None, max_items=60, item_costs=cost1), model="m",
                           task="sim-task", price=PRICE, cost=cost1, upper=upper1, full_run=float(np.sum(cost1)),
                           budget=None, draws=2)
    assert row.worst_usd <= row.full_run_usd < 60 * upper1[0] == pytest.approx(row.bound_usd)


@pytest.mark.parametrize("extra, stop", [([], "se_target=0.2"), (["--ci-width", "0.02"], "ci_width=0.02")])
def test_run_dry_run_states_the_stopping_rule_it_simulated(extra, stop, tmp_path, capsys):
    """Before: `run --adaptive --ci-width W --dry-run` wrote settings.se_target 0.2 (and no ci_width) while its
    simulated tests stopped on the interval's half-width; the settings now name the rule the runs stopped by, in the
    printed settings line and in cost_forecast.json."""
    from pathlib import Path

    from lm_eval_adaptive.data.data_root import data_root
    from lm_eval_adaptive.errors import InputError

    try:
        data_root()
    except InputError as e:
        pytest.skip(f"real data not available: {e}")
    tasks = str(Path(__file__).resolve().parents[1] / "task_configs")
    out = tmp_path / "dry"
    assert main(["run", "--model", "litellm", "--model_args", "model=openai/Mistral-Large", "--tasks", "wmt24_en-de",
                 "--include_path", tasks, "--apply_chat_template", "--output_path", str(out), "--adaptive",
                 "--bank", "wmt24_en-de.bleu", "--max-items", "60", *extra, "--dry-run", "--no-progress"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert f"settings per task: stop at {stop}, min_items=30, max_items=60," in printed
    fc = json.loads((out / "cost_forecast.json").read_text())
    rule = dict([stop.split("=")])
    assert fc["settings"]["ci_width"] == (0.02 if "ci_width" in rule else None)
    assert fc["settings"]["se_target"] == (0.2 if "se_target" in rule else None)
    assert set(fc["simulated_stops"]) <= {next(iter(rule)), "max_items"}


def test_the_simulated_runs_are_the_same_in_worker_processes_and_in_turn(monkeypatch):
    """Issue 30 item 7: the ranking forecast's runs go to forked worker processes where the platform forks;
    their scores are drawn beforehand, in order, so the forecast is the same as one run after another."""
    import multiprocessing

    bank, models, cost = _uneven_costs(seed=2)
    kw = dict(prices={m: PRICE for m in models}, cost=cost, upper={m: 3 * cost[m] for m in models},
              full_run={m: float(np.sum(cost[m])) for m in models}, cap=None, task="sim-task", command="rank", seed=2,
              draws=12)

    def ranker():
        return AdaptiveRanker(bank, models, item_costs=cost, n_init=5, n_max=60, seed=0)

    forked = forecast_ranking(ranker, models, **kw).to_dict()
    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])  # no fork: in turn
    assert forecast_ranking(ranker, models, **kw).to_dict() == forked

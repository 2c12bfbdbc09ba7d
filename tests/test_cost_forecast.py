"""The cost forecast of ``--dry-run`` (live/cost_forecast.py), on simulated banks: no harness, no HTTP.

The forecast end to end (``rank``, ``refresh`` and ``run --adaptive`` with ``--dry-run`` against
the replay endpoint, then the real runs) is tests/test_dry_run_e2e.py.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import make_sim_bank

from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.data.prices import Price
from lm_eval_adaptive.engine.cat import AdaptiveTest
from lm_eval_adaptive.engine.ranker import AdaptiveRanker
from lm_eval_adaptive.engine.simulation import AbilityPopulation, bank_scores
from lm_eval_adaptive.harness.lm_eval_compat import prompt_text
from lm_eval_adaptive.live.cost_forecast import (
    RANKING_DRAWS,
    TOLERANCE,
    Spread,
    forecast_ranking,
    forecast_test,
    most_likely_within,
    expected_costs,
    simulated_live_run,
)

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
    c = expected_costs(PRICE, bank, chars)
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
    ranker = AdaptiveRanker(bank, models, item_costs=cost, budget=cap, n_init=5)
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
        assert r.usd.typical <= r.worst_usd <= cap
        assert r.worst_usd == pytest.approx(min(cap, float(np.sort(upper[r.model])[::-1][:80].sum())))
    assert fc.usd.typical <= fc.worst_usd <= cap
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
    assert row.worst_items == 60 and row.worst_usd == pytest.approx(60 * upper[0])
    # with a budget the worst case is the budget plus one item's excess over its estimate
    row, _ = forecast_test(new_test, model="m", task="sim-task", price=PRICE, cost=cost, upper=upper,
                           full_run=0.0, budget=10 * cost[0], draws=2)
    assert row.worst_usd == pytest.approx(10 * cost[0] + upper[0] - cost[0])


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


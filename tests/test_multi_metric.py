"""MultiMetricRanker (one generation, every metric scored) and the joint-vs-separate backtest."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_sim_bank, simulate_scores

from lm_eval_adaptive.engine.irt.bank import ItemBank, joint_item_ids
from lm_eval_adaptive.engine.ranking.multi_metric_ranker import MultiMetricRanker
from lm_eval_adaptive.engine.ranking.ranker import AdaptiveRanker
from lm_eval_adaptive.engine.evaluation.simulation import bank_scores
from lm_eval_adaptive.errors import InputError

THETAS = {"low": -1.5, "mid": 0.0, "high": 1.5}


@pytest.fixture(scope="module")
def banks():
    # two metrics of the same items: different difficulties and noise
    a = make_sim_bank(n_items=200, k=0.1, seed=1)
    b = make_sim_bank(n_items=200, k=0.2, seed=2)
    return {"m1": a, "m2": b}


def scorer(banks, thetas, seed=0):
    """score(model, joint item) -> {metric: y}: one fixed simulated realisation per model and metric
    (the joint items are the banks' common items, here every item in the same order)."""
    rng = np.random.default_rng(seed)
    ys = {k: {m: simulate_scores(t, bank.b, k=bank.k, rng=rng) for m, t in thetas.items()} for k, bank in banks.items()}
    return lambda m, j: {k: float(ys[k][m][j]) for k in banks}


def test_one_generation_is_told_to_every_metric_and_each_ranks_in_order(banks):
    r = MultiMetricRanker(banks, list(THETAS), n_init=10, seed=0)
    res = r.run(scorer(banks, THETAS, 1))
    assert res.stopped_because == "settled"
    for k in banks:
        assert res.results[k].ranking == ["high", "mid", "low"]
        assert res.results[k].ties == []
    # the same items for every metric: each generation scored by both
    logs = {k: {m: [i for i, _ in res.results[k].item_log[m]] for m in THETAS} for k in banks}
    assert logs["m1"] == logs["m2"]
    assert res.generations == sum(len(v) for v in logs["m1"].values()) == sum(res.items.values())
    sig = res.results["m1"].signature
    assert sig["joint_metrics"] == "m1+m2" and sig["item_weighting"] == "normalised" and sig["bank"] == banks["m1"].bank_id
    # the metrics' scores differ (two realisations), so the estimates do too
    assert res.results["m1"].theta["mid"] != res.results["m2"].theta["mid"]


def test_the_random_half_walks_one_permutation_and_no_item_is_given_twice(banks):
    r = MultiMetricRanker(banks, list(THETAS), n_init=6, n_max=30, seed=3)
    score = scorer(banks, THETAS, 2)
    given = {m: [] for m in THETAS}
    while (req := r.ask()) is not None:
        given[req.model].append(req.item)
        r.tell(req, score(req.model, req.item))
    perm = np.random.default_rng(3).permutation(200)
    for m, items in given.items():
        assert len(set(items)) == len(items)
        rand = items[1::2]  # slots 1, 3, 5, ... are the random half (share 0.5)
        taken = set()
        for slot, item in enumerate(items):
            if slot % 2 == 1:
                assert item == next(int(i) for i in perm if int(i) not in taken)
            taken.add(item)
        assert rand


def test_budget_caps_total_spend_counted_once_per_generation(banks):
    costs = {m: np.full(200, 0.01) for m in THETAS}
    close = {"a": 0.0, "b": 0.05, "c": 0.1}  # too close to settle in 25 items
    r = MultiMetricRanker(banks, list(close), item_costs={m: costs["low"] for m in close}, budget=0.25, seed=0)
    res = r.run(scorer(banks, close, 0))
    assert res.stopped_because == "budget"
    assert res.generations == 25 and res.total_cost == pytest.approx(0.25)
    # every metric's result carries the same generations' cost (not the sum over metrics)
    for k in banks:
        assert res.results[k].total_cost == pytest.approx(0.25)


def test_a_missing_metric_score_excludes_the_item_for_that_metric_only(banks):
    r = MultiMetricRanker(banks, ["a", "b"], n_init=2, seed=0)
    req = r.ask()
    r.tell(req, {"m1": 0.4, "m2": float("nan")})
    assert r.metric_examinees("m1")[req.model].n == 1
    assert r.metric_examinees("m2")[req.model].n == 0
    assert r.metric_examinees("m2")[req.model].is_excluded(r.bank_item("m2", req.item))
    req2 = r.ask()
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        r.tell(req2, {"m1": 1.5, "m2": 0.3})
    with pytest.raises(ValueError, match="unknown metrics"):
        r.tell(req2, {"m3": 0.3})
    with pytest.raises(ValueError, match="not one of the joint items"):
        r.exclude("a", ["nope"])
    with pytest.raises(ValueError, match="outside the joint items"):
        r.exclude("a", [10_000])
    assert r.metric_examinees("m1")[req2.model].n == (1 if req2.model == req.model else 0)  # nothing recorded


def bank_with(ids, b, template):
    return ItemBank(item_ids=np.asarray(ids, dtype=object), b=np.asarray(b, dtype=float), model=template.model,
                    scaling="global", lo=0.0, hi=1.0, input_tokens=100.0, output_tokens=50.0)


def test_items_are_joined_by_id():
    a = make_sim_bank(n_items=20, seed=1)
    b = make_sim_bank(n_items=20, seed=2)
    keep = np.arange(5, 20)[::-1]  # another order, and only some of a's items
    b2 = bank_with(b.item_ids[keep], b.b[keep], b)
    ids = joint_item_ids({"x": a, "y": b2})
    assert ids == [f"item{i:04d}" for i in range(5, 20)]
    r = MultiMetricRanker({"x": a, "y": b2}, ["p", "q"], seed=0)
    assert r.item_ids == ids
    assert [str(b2.item_ids[r.bank_item("y", j)]) for j in range(len(ids))] == ids
    with pytest.raises(ValueError, match="share no item"):
        c = bank_with([f"z{i}" for i in range(20)], b.b, b)
        MultiMetricRanker({"x": a, "z": c}, ["p", "q"])


def test_open_adjacent_pairs_are_the_unsettled_ones(banks):
    bank = banks["m1"]
    y = simulate_scores(0.3, bank.b, k=bank.k, rng=np.random.default_rng(0))
    # a and b the same scores; c far below: the open pairs are every unresolved one (not only adjacent)
    # the stopping policy still buys for, the one ranked above first
    r = AdaptiveRanker(bank, ["a", "b", "c"], n_init=5, n_max=5, seed=0)
    res = r.run(lambda m, i: float(y[i]) if m != "c" else 0.0)
    assert res.ranking[-1] == "c"
    assert any(set(p) == {"a", "b"} for p in res.open_pairs)
    unresolved = [(p["a"], p["b"]) for p in res.pairs if p["outcome"] == "unresolved" and not p["beyond_policy"]]
    assert {frozenset(p) for p in res.open_pairs} == {frozenset(p) for p in unresolved}
    assert all(res.ranking.index(a) < res.ranking.index(b) for a, b in res.open_pairs)


def test_joint_backtest_on_real_wmt25_pair():
    from lm_eval_adaptive.data.named_tables import load_named
    from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig
    from lm_eval_adaptive.engine.evaluation.multi_backtest import backtest_multi

    try:
        tables = {k: load_named(f"wmt25/en-it/{k}") for k in ("xcomet", "metricx")}
    except InputError as e:
        pytest.skip(f"real data not available: {e}")
    cfg = BacktestConfig(folds=1, seeds=1, bootstrap=200, self_check=False)
    r = backtest_multi(tables, config=cfg, spends=(1.0,))
    joint, sep = r["summary"]["1.0"]["joint"], r["summary"]["1.0"]["separate"]
    # the same total spend; the joint run's generations are all distinct, the separate runs' sum to it
    budget = r["runs"][0]["budget"]
    assert joint["cost"] <= budget * (1 + 1e-9) and sep["cost"] <= budget * (1 + 1e-9)
    assert joint["generations"] == joint["generated"] == 80  # 4 models × 20 items: the budget
    assert sep["generated"] == 80 and sep["generations"] <= 80
    # every metric has its own τ and confident pairs; joint gets at least as many settled pairs
    assert set(joint["metrics"]) == {"xcomet", "metricx"}
    assert joint["confident_pairs_per_run"] >= sep["confident_pairs_per_run"]
    for x in (joint, sep):
        assert -1 <= x["tau"] <= 1 and 0 <= x["coverage"] <= 1


def test_joint_backtest_takes_the_family_wise_rule():
    """--family-wise reaches every metric's ranker in both modes: Holm over every pair settles fewer
    pairs on the same hold-out sets, and each run's 'any wrong order' is counted per metric and overall."""
    from lm_eval_adaptive.data.named_tables import load_named
    from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig
    from lm_eval_adaptive.engine.evaluation.multi_backtest import backtest_multi

    try:
        tables = {k: load_named(f"wmt25/en-it/{k}") for k in ("xcomet", "metricx")}
    except InputError as e:
        pytest.skip(f"real data not available: {e}")
    out = {}
    for fw in (False, True):
        cfg = BacktestConfig(folds=2, seeds=2, bootstrap=200, self_check=False, family_wise=fw, holdout_size=8)
        out[fw] = backtest_multi(tables, config=cfg, spends=(1.0,))
        assert out[fw]["settings"]["family_wise"] is fw
    for mode in ("joint", "separate"):
        per_pair, family = out[False]["summary"]["1.0"][mode], out[True]["summary"]["1.0"][mode]
        assert family["confident_pairs_per_run"] < per_pair["confident_pairs_per_run"]
        for x in (per_pair, family):
            assert 0 <= x["any_wrong_share"] <= 1
            assert x["any_wrong_share"] >= max(y["any_wrong_share"] for y in x["metrics"].values())


def test_a_table_spec_names_several_metrics_of_one_task(tmp_path):
    from lm_eval_adaptive.cli.multi_metric import metric_table_specs

    assert metric_table_specs("wmt25/en-de/xcomet,metricx") == {"xcomet": "wmt25/en-de/xcomet",
                                                               "metricx": "wmt25/en-de/metricx"}
    assert metric_table_specs("wmt25/en-de/xcomet") is None
    f = tmp_path / "a,b.csv"
    f.write_text("x")
    assert metric_table_specs(str(f)) is None  # an existing file is a file
    with pytest.raises(InputError, match="distinct metrics"):
        metric_table_specs("wmt25/en-de/xcomet,,metricx")


def test_cli_backtest_runs_a_joint_multi_metric_backtest(tmp_path, capsys):
    import json

    from lm_eval_adaptive.cli.main import main
    from lm_eval_adaptive.data.named_tables import load_named

    try:
        load_named("wmt25/en-it/xcomet")
    except InputError as e:
        pytest.skip(f"real data not available: {e}")
    out = tmp_path / "multi.json"
    rc = main(["backtest", "wmt25/en-it/xcomet,cometkiwi", "--folds", "1", "--seeds", "1", "--bootstrap", "200",
               "--no-self-check", "--prices", "uniform", "--no-progress", "--family-wise", "--json", str(out)])
    assert rc == 0
    text = " ".join(capsys.readouterr().out.split())  # (prose is wrapped at 120 columns when not a terminal)
    assert "Joint vs separate" in text and "cometkiwi" in text and "whole ranking (--family-wise)" in text
    d = json.loads(out.read_text())
    assert d["metrics"] == ["xcomet", "cometkiwi"]
    assert set(d["summary"]["1.0"]) == {"joint", "separate"}
    assert d["summary"]["1.0"]["joint"]["generated"] == 80
    assert d["settings"]["family_wise"] is True and "any_wrong_share" in d["summary"]["1.0"]["joint"]


def test_item_weighting_is_one_of_the_named_ones_and_changes_only_the_informative_slots(banks):
    with pytest.raises(ValueError, match="item_weighting"):
        MultiMetricRanker(banks, ["a", "b"], item_weighting="max")
    logs = {}
    for w in ("normalised", "summed"):
        r = MultiMetricRanker(banks, list(THETAS), n_init=10, n_max=40, seed=0, item_weighting=w)
        r.run(scorer(banks, THETAS, 4))
        logs[w] = {m: [i for i, _ in r.result().results["m1"].item_log[m]] for m in THETAS}
    # the first item is the same (one metric-free start: equal SEs, equal weights); random slots come from the
    # same permutation, so both runs give every model the same first random item
    for m in THETAS:
        assert logs["normalised"][m][1] == logs["summed"][m][1]


def test_the_rankers_open_pairs_are_those_its_result_leaves_open(banks):
    """AdaptiveRanker.open_pairs() (read at every step of a run) = the open adjacent pairs of result()."""
    bank = banks["m1"]
    thetas = {"a": 0.0, "b": 0.05, "c": 0.6, "d": 2.0}
    score = scorer({"m1": bank}, thetas, 5)
    r = AdaptiveRanker(bank, list(thetas), n_init=5, n_max=60, seed=0)
    seen = set()
    while (req := r.ask()) is not None:
        r.tell(req, score(req.model, req.item)["m1"])
        pairs = r.open_pairs()
        assert pairs == r.result().open_pairs
        seen.add(len(pairs))
    assert len(seen) > 1  # the set of open pairs changed during the run
    assert r.open_pairs() == [] or r.stopped_because != "settled"


def _two_pl_bank(n: int, seed: int) -> ItemBank:
    from lm_eval_adaptive.engine.irt.response_model import BinaryIRTModel

    rng = np.random.default_rng(seed)
    return ItemBank(item_ids=np.array([f"item{i:04d}" for i in range(n)], dtype=object),
                    b=rng.normal(0.0, 1.2, n), model=BinaryIRTModel("2pl"), scaling="global", lo=0.0, hi=1.0,
                    input_tokens=50.0, output_tokens=1.0, task="sim-task", metric=f"acc{seed}",
                    a=rng.lognormal(0.0, 0.5, n), c=np.zeros(n))


def test_two_2pl_banks_rank_jointly_by_their_items_discriminations():
    # MultiMetricRanker picked by information(θ, b) without the items' a: two 2PL banks raised TypeError
    from lm_eval_adaptive.engine.cat.selection import JointInformationSelector

    banks = {"a1": _two_pl_bank(300, 1), "a2": _two_pl_bank(300, 2)}
    thetas = {"low": -2.0, "mid": 0.0, "high": 2.0}
    rng = np.random.default_rng(5)
    ys = {k: {m: bank_scores(bank, t, rng) for m, t in thetas.items()} for k, bank in banks.items()}
    r = MultiMetricRanker(banks, list(thetas), n_init=10, n_max=120, seed=0)
    res = r.run(lambda m, j: {k: float(ys[k][m][j]) for k in banks})
    for k in banks:
        assert res.results[k].ranking == ["high", "mid", "low"]
    # an informative slot's item maximises the summed information with each item's own a
    e = {k: r.metric_examinees(k)["mid"] for k in banks}
    taken = np.zeros(300, dtype=bool)
    taken[:5] = True
    joint = JointInformationSelector(banks, [str(i) for i in banks["a1"].item_ids], weighting="summed", seed=0)
    n_used = next(n for n in range(5, 50) if not joint.is_random_slot(n))
    got = joint.select(r.examinees["mid"].ability(), taken, n_used)
    value = sum(banks[k].model.information(e[k].theta, banks[k].b, a=banks[k].a, c=banks[k].c) for k in banks)
    value[taken] = -np.inf
    assert got == int(np.argmax(value))
    assert got != int(np.argmax(np.where(taken, -np.inf, sum(
        banks[k].model.information(e[k].theta, banks[k].b, a=np.ones(300), c=np.zeros(300)) for k in banks))))


def _binary_csv(path, b, a, thetas, rng):
    """0/1 scores of the models ``thetas`` under a 2PL model with items' difficulties ``b`` and discriminations ``a``."""
    import pandas as pd

    rows = [{"model": m, "item": f"q{i:03d}", "score": int(y)}
            for m, t in thetas.items()
            for i, y in enumerate(rng.random(b.size) < 1.0 / (1.0 + np.exp(-a * (t - b))))]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_the_joint_backtest_calibrates_as_told_and_runs_on_2pl_and_3pl_banks(tmp_path):
    """A 0/1 two-metric table: the banks are 2PL by default (the MultiMetricRanker picks by their items'
    discriminations), 3PL with the guessing asked for, continuous when asked: --response-model and
    --guessing reach every fold's calibration (the joint backtest used to calibrate by the table alone)."""
    import json

    from lm_eval_adaptive.cli.main import main

    rng = np.random.default_rng(11)
    n = 120
    thetas = {f"sys{j}": t for j, t in enumerate(np.linspace(-2.0, 2.0, 10))}
    for metric in ("acc", "em"):
        _binary_csv(tmp_path / f"{metric}.csv", rng.normal(0, 1.0, n), rng.lognormal(0.3, 0.3, n), thetas, rng)
    spec = f"{tmp_path}/acc.csv,em.csv"
    kinds = {}
    for name, extra in (("default", []), ("3pl", ["--response-model", "3pl", "--guessing", "0.2"]),
                        ("continuous", ["--response-model", "continuous"])):
        out = tmp_path / f"{name}.json"
        rc = main(["backtest", spec, "--folds", "1", "--seeds", "2", "--bootstrap", "200", "--no-self-check",
                   "--prices", "uniform", "--no-progress", "--jobs", "1", *extra, "--json", str(out)])
        assert rc == 0
        d = json.loads(out.read_text())
        kinds[name] = {k: b["response_model"] for k, b in d["folds"][0]["banks"].items()}
        assert d["settings"]["response_model"] == (None if name == "default" else name)
        for mode in ("joint", "separate"):
            x = d["summary"]["1.0"][mode]
            assert x["runs"] == 2 and x["generated"] > 0 and -1 <= x["tau"] <= 1
    assert kinds == {"default": {"acc.csv": "2pl", "em.csv": "2pl"}, "3pl": {"acc.csv": "3pl", "em.csv": "3pl"},
                     "continuous": {"acc.csv": "continuous", "em.csv": "continuous"}}


def test_the_backtests_rankers_pick_by_the_banks_own_information():
    """The single-metric backtest's ranker (the joint backtest's separate runs use the same one): a
    2PL bank's selector ranks items by the bank's information (its items' a), a continuous one's by |θ - b|."""
    from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig
    from lm_eval_adaptive.engine.evaluation.fold_parts import fold_ranker

    two_pl = _two_pl_bank(200, 3)
    r = fold_ranker(two_pl, ["a", "b"], BacktestConfig(top_k=1), 0, 0)
    assert r.selector.information is not None
    theta = 0.3
    assert np.array_equal(r.selector.information(theta), two_pl.information(theta, np.arange(two_pl.n_items)))
    assert fold_ranker(make_sim_bank(50), ["a", "b"], BacktestConfig(), 0, 0).selector.information is None


def test_the_joint_examinee_keeps_the_ledger_every_examinee_keeps(banks):
    """One account of items and money (issue 29): an examinee of several metrics is the one examinee class,
    its ledger over the joint items — a random slot's reservation, a bulk record undoing it, the spend counted
    once per generation and every charge passed to each metric's part (a one-metric examinee)."""
    from lm_eval_adaptive.engine.cat.examinee import Examinee
    from lm_eval_adaptive.engine.cat.item_ledger import ItemLedger
    from lm_eval_adaptive.engine.cat.selection import JointInformationSelector

    sel = JointInformationSelector(banks, joint_item_ids(banks), seed=0)
    je = Examinee(banks, sel, "m", item_costs=np.full(len(sel.item_ids), 0.01))
    assert isinstance(je, ItemLedger) and all(type(p) is Examinee and p.parts == {p.metrics[0]: p}
                                              for p in je.parts.values())
    slot = next(k for k in range(je.n_items) if sel.is_random_slot(k))
    for _ in range(slot):  # fill the slots before the first random one
        je.record(je.next_item(), {"m1": 0.5, "m2": 0.5})
    item = je.next_item()
    je.reserve(item)
    assert je.random_mask[item] and je.random_mask.sum() == 1
    je.record_many([item], {"m1": [0.25], "m2": [0.75]})  # recorded in bulk: not a random slot's any more
    assert not je.random_mask.any() and je.is_scored(item) and je.n_taken == slot + 1
    assert je.spent == pytest.approx(0.01 * (slot + 1))
    je.charge(0.5)
    assert je.spent == pytest.approx(0.01 * (slot + 1) + 0.5)
    assert all(p.spent == pytest.approx(je.spent) for p in je.parts.values())
    with pytest.raises(ValueError, match="already scored"):
        je.unreserve(item)
    with pytest.raises(ValueError, match="already scored"):
        je.record(item, {"m1": 0.5, "m2": 0.5})


def test_one_examinee_class_one_bank_is_the_case_of_one_metric(banks):
    """One examinee class (issue 29): an examinee of one bank is the case of one metric (its one part is
    itself), and an examinee of several metrics given a single bank measures exactly what the one-bank
    examinee measures from the same scores; what only one bank has (θ̂, SE, raw values) is refused on an
    examinee of several metrics with the way to read it, and a selector not over its banks is refused."""
    from lm_eval_adaptive.engine.cat.examinee import Examinee
    from lm_eval_adaptive.engine.cat.selection import JointInformationSelector, shared_default_selector

    bank = banks["m1"]
    one = Examinee(bank, shared_default_selector(bank, seed=0), "solo")
    assert list(one.parts) == one.metrics and one.parts[one.metrics[0]] is one
    assert one.bank_item(one.metrics[0], 7) == 7
    sel = JointInformationSelector({"m1": bank}, joint_item_ids({"m1": bank}), seed=0)
    joint = Examinee({"m1": bank}, sel, "solo")
    rng = np.random.default_rng(3)
    items = [int(i) for i in rng.permutation(bank.n_items)[:40]]
    ys = rng.uniform(size=len(items))
    for i, y in zip(items[:30], ys[:30]):
        one.record(i, float(y))
        joint.record(joint.item_ids.index(bank.item_ids[i]), {"m1": float(y)})
    rest = [joint.item_ids.index(bank.item_ids[i]) for i in items[30:]]
    one.record_many(items[30:], ys[30:])
    joint.record_many(rest, {"m1": ys[30:]})
    part = joint.parts["m1"]
    assert part.items == one.items and part.scores == one.scores and joint.n == one.n == 40
    assert (part.theta, part.se, joint.measurement_se) == (one.theta, one.se, one.measurement_se)
    assert np.array_equal(part.raw, one.raw, equal_nan=True)
    assert joint.scores[0] == {"m1": float(ys[0])}
    with pytest.raises(AttributeError, match=r"joint items of the metrics.*parts\[metric\]"):
        joint.theta
    with pytest.raises(ValueError, match="JointInformationSelector over its banks"):
        Examinee({"m1": bank}, shared_default_selector(bank, seed=0), "solo")
    with pytest.raises(ValueError, match="JointInformationSelector over its banks"):
        Examinee(banks, sel, "solo")

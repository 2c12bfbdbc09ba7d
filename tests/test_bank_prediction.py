"""The bank's full-task estimate as the order of a bank-free ranking's open pairs (engine/cat/bank_prediction.py;
issue 31 item 1: item parameters used "for prediction only where a measurement shows they help")."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from lm_eval_adaptive.data.prices import uniform_prices
from lm_eval_adaptive.data.tables import load_any_table
from lm_eval_adaptive.engine.anytime.bank_free_ranker import BankFreeRanker
from lm_eval_adaptive.engine.anytime.pair_decisions import ORDERED
from lm_eval_adaptive.engine.cat.bank_prediction import BankPrediction, bank_full_task_mean
from lm_eval_adaptive.engine.evaluation.backtest import backtest, backtest_signature
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig
from lm_eval_adaptive.engine.irt.calibration import calibrate
from lm_eval_adaptive.errors import InputError

TABLE = "wmt24/en-zh/chrf"


@pytest.fixture(scope="module")
def table_and_bank():
    t = load_any_table(TABLE)
    models = list(t.models)
    bank = calibrate(t.select_models(models[4:]), metric=getattr(t, "metric", None))
    return t, models[:4], bank


def _log(t, model, docs):
    raw = t.mean_matrix()[list(t.models).index(model)]
    ids = np.asarray(t.items, dtype=object)
    return [(str(ids[i]), float(raw[i])) for i in docs if np.isfinite(raw[i])]


def test_a_full_run_is_its_own_mean_and_a_partial_run_is_predicted(table_and_bank):
    """Every bank item answered: the estimate is the observed mean (plus the calibration means of the items
    calibration dropped, which no run scores): no prediction is left. Half answered: the observed scores plus
    a prediction that stays inside the metric's range and moves with the answers (a model's answers raised
    everywhere by a constant raise its estimate)."""
    t, hold, bank = table_and_bank
    m = hold[0]
    pos = {str(v): i for i, v in enumerate(np.asarray(t.items, dtype=object).tolist())}
    in_bank = [pos[str(i)] for i in bank.item_ids.tolist()]
    full = _log(t, m, in_bank)
    dropped = [d["mean_raw"] for d in bank.dropped if "mean_raw" in d]
    want = (sum(s for _, s in full) + sum(dropped)) / (len(full) + len(dropped))
    assert bank_full_task_mean(bank, full) == pytest.approx(want, abs=1e-12)
    half = full[::2]
    est = bank_full_task_mean(bank, half)
    assert float(bank.lo.min()) <= est <= float(bank.hi.max())
    higher = [(i, s + 0.05 * float(np.mean(bank.hi - bank.lo))) for i, s in half]
    assert bank_full_task_mean(bank, higher) > est


def test_document_ids_are_translated_to_the_bank_and_unknown_ones_left_out(table_and_bank):
    """A harness run names documents by doc id: the id map translates them; a document the bank does not
    hold is left out, not an error."""
    t, hold, bank = table_and_bank
    log = _log(t, hold[1], range(0, 40))
    renamed = [(f"doc{k}", s) for k, (_, s) in enumerate(log)]
    ids = {f"doc{k}": i for k, (i, _) in enumerate(log)}
    assert BankPrediction(bank, ids=ids)(hold[1], renamed) == pytest.approx(bank_full_task_mean(bank, log), abs=1e-12)
    assert bank_full_task_mean(bank, log + [("not-a-document", 0.5)]) == pytest.approx(bank_full_task_mean(bank, log))
    assert "bank prediction" in BankPrediction(bank).name


def _run(t, hold, key, seed=3, budget=None):
    raw = t.mean_matrix()[[list(t.models).index(m) for m in hold]]
    lo, hi = float(np.nanmin(t.mean_matrix())), float(np.nanmax(t.mean_matrix()))
    r = BankFreeRanker(hold, [str(i) for i in t.items], score_range=(lo, hi), seed=seed, budget=budget,
                       exclude={m: np.flatnonzero(np.isnan(raw[j])) for j, m in enumerate(hold)}, order_key=key)
    row = {m: j for j, m in enumerate(hold)}
    while (req := r.ask()) is not None:
        r.tell(req, float(raw[row[req.model], req.item]))
    return r, r.result(settle_costs=False)


def test_the_key_orders_only_the_open_pairs_and_decides_nothing(table_and_bank):
    """Same seed, with and without the key: the same documents, intervals and pair outcomes; the ordered pairs
    keep their order whatever the key (the bank's prediction, or its reverse); with every pair open the ranking
    is the key's order; the signature names what ordered the open pairs."""
    t, hold, bank = table_and_bank
    pred = BankPrediction(bank)

    def reverse(m, log):
        return -pred(m, log)

    for budget in (40.0, 400.0):
        _, plain = _run(t, hold, None, budget=budget)
        _, keyed = _run(t, hold, pred, budget=budget)
        _, backwards = _run(t, hold, reverse, budget=budget)
        assert plain.items == keyed.items == backwards.items and plain.item_log == keyed.item_log
        for m in hold:
            assert (plain.estimates[m]["lower"], plain.estimates[m]["upper"]) == \
                (keyed.estimates[m]["lower"], keyed.estimates[m]["upper"])
        outcome = {frozenset((p["a"], p["b"])): p["outcome"] for p in plain.pairs}
        assert outcome == {frozenset((p["a"], p["b"])): p["outcome"] for p in keyed.pairs}
        key = {m: keyed.estimates[m]["order_key"] for m in hold}
        ordered = [p for p in plain.pairs if p["outcome"] == ORDERED]
        if not ordered:  # every pair open: the key's order, either way round
            assert keyed.ranking == sorted(hold, key=lambda m: -key[m])
            assert backwards.ranking == sorted(hold, key=lambda m: key[m])
        for res in (keyed, backwards):
            pos = {m: i for i, m in enumerate(res.ranking)}
            for p in ordered:
                hi_m, lo_m = (p["a"], p["b"]) if p["difference"] > 0 else (p["b"], p["a"])
                assert pos[hi_m] < pos[lo_m]
        assert plain.signature["open_pair_order"] == "paired differences"
        assert keyed.signature["open_pair_order"].startswith("bank prediction")
    assert ordered, "the larger budget must settle a pair for this test"


def test_the_backtest_orders_a_fallen_back_folds_open_pairs_by_its_bank():
    """m = −1 rejects every fold's bank: under ``fallback_order="bank"`` and ``"pairs"`` the runs are the same
    bank-free runs (items, confident pairs, coverage), only the open pairs' order may differ; the signature
    names the order; an unknown order is one error naming it."""
    t = load_any_table(TABLE)
    prices = uniform_prices(t.models)
    config = BacktestConfig(seeds=1, settle_seeds=0, folds=2, bank_use_margin=-1.0)
    assert config.fallback_order == "pairs"  # rank's: the rule of docs/cold-start.md did not adopt "bank"
    by_pairs = backtest(t, config=config, prices=prices)
    by_bank = backtest(t, config=replace(config, fallback_order="bank"), prices=prices)
    assert by_bank.folds_fallen_back == by_pairs.folds_fallen_back == 2
    assert by_bank.adaptive.items == by_pairs.adaptive.items
    assert by_bank.counts["covered"] == by_pairs.counts["covered"]
    assert "fallback_order:bank" in by_bank.signature and "fallback_order:pairs" in by_pairs.signature
    with pytest.raises(InputError, match="fallback order"):
        replace(config, fallback_order="sideways").validate(len(t.models))


def test_backtest_anytime_ranks_every_fold_as_rank_anytime_does():
    """``BacktestConfig(anytime=True)`` (``backtest --anytime``): every fold ranked by the bank-free ranker with its
    bank's prediction ordering the open pairs, whatever the bank-use rule says; the very runs of a fold whose bank
    the rule rejected under ``fallback_order="bank"`` (same τ, items, coverage), the reason in each fold's record
    and the setting in the signature; the default backtest is untouched (no ``anytime`` in its signature)."""
    t = load_any_table(TABLE)
    prices = uniform_prices(t.models)
    config = BacktestConfig(seeds=1, settle_seeds=0, folds=2)
    anytime = backtest(t, config=replace(config, anytime=True), prices=prices)
    rejected = backtest(t, config=replace(config, bank_use_margin=-1.0, fallback_order="bank"), prices=prices)
    assert anytime.folds_fallen_back == 2
    assert anytime.adaptive.tau == rejected.adaptive.tau and anytime.adaptive.items == rejected.adaptive.items
    assert anytime.counts["covered"] == rejected.counts["covered"]
    assert all(f["bank_use_reason"].startswith("anytime") for f in anytime.folds)
    assert "anytime:True" in anytime.signature.split("|")
    assert not any(part.startswith("anytime:") for part in backtest_signature(config, prices).split("|"))

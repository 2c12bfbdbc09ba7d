"""The bank-free ranker as the live driver drives it (engine/anytime/driven_ranker.py): a journal's outcomes
replayed into a fresh ranker give the run it was, a blocked model is not asked, money without a score is
counted, the banked driver's stop names are understood. On a recorded table's scores (wmt24/en-de/bleu)."""

from __future__ import annotations

import numpy as np
import pytest

from lm_eval_adaptive.engine.anytime.driven_ranker import DrivenBankFreeRanker
from lm_eval_adaptive.engine.ranking.replay import ReplayEvent


@pytest.fixture(scope="module")
def table():
    from lm_eval_adaptive.data.named_tables import load_named

    try:
        t = load_named("wmt24/en-de/bleu")
    except Exception as e:  # noqa: BLE001 - the real data is not here
        pytest.skip(f"real data not available: {e}")
    models = ["CycleL", "NVIDIA-NeMo", "TranssionMT"]
    Y = t.mean_matrix()
    rows = [list(map(str, t.models)).index(m) for m in models]
    return models, [str(i) for i in t.items], np.nan_to_num(Y[rows], nan=0.0)


def ranker(models, ids, **kw):
    return DrivenBankFreeRanker(models, ids, score_range=(0.0, 1.0), n_max=40, seed=3, **kw)


def test_a_replayed_journal_gives_the_run_it_was(table):
    models, ids, Y = table
    live = ranker(models, ids)
    events = []
    while (req := live.ask()) is not None:
        y = float(Y[models.index(req.model), req.item])
        live.tell(req, y, cost=0.01)
        events.append(ReplayEvent.score(req.model, req.item_id, y, 0.01))
    a = live.result(settle_costs=False)
    fresh = ranker(models, ids)
    counts = fresh.replay(events)
    assert counts.scores == len(events) > 0
    b = fresh.result(settle_costs=False)
    assert a.ranking == b.ranking and a.estimates == b.estimates
    assert [p["outcome"] for p in a.pairs] == [p["outcome"] for p in b.pairs]
    assert fresh.spent == pytest.approx(live.spent) and fresh.examinees["CycleL"].n == live.examinees["CycleL"].n
    # the rest of the run goes on from there exactly as it would have
    assert fresh.ask() is None and fresh.stopped_because == live.stopped_because


def test_block_charge_and_the_banked_stop_names(table):
    models, ids, _ = table
    r = ranker(models, ids)
    for m in models[:-1]:
        r.block(m)
    req = r.ask()
    assert req is not None and req.model == models[-1]  # only the unblocked model is asked
    assert r.is_pending(req) and r.in_flight(req.model) == 1
    r.release(req)
    assert not r.is_pending(req)
    r.unblock_all()
    r.charge("CycleL", 0.5)
    assert r.spent == 0.5 and r.examinees["CycleL"].spent == 0.5 and r.examinees["CycleL"].n == 0
    r.stop("bank_exhausted")  # the banked driver's name for "nothing left to ask"
    assert r.stopped_because == "exhausted"
    with pytest.raises(ValueError, match="event 0"):
        ranker(models, ids).replay([ReplayEvent.score("Nobody", ids[0], 0.5, 0.0)])


def test_costs_are_rescaled_by_what_answers_cost(table):
    models, ids, Y = table
    r = ranker(models, ids, item_costs={m: np.full(len(ids), 0.001) for m in models})
    req = r.ask()
    r.tell(req, float(Y[models.index(req.model), req.item]), cost=0.004)  # four times the plan
    assert r.expected_cost(req.model) == pytest.approx(np.full(len(ids), 0.004))
    other = next(m for m in models if m != req.model)
    assert r.expected_cost(other) == pytest.approx(np.full(len(ids), 0.001))

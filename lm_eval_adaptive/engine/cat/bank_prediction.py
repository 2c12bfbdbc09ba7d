"""A bank's estimate of a model's full-task mean from documents some other design chose: the key by which a
bank-free ranking orders the pairs it leaves open when a bank exists (issue 31, item 1: "item parameters ...
used for prediction only where a measurement shows they help"; docs/cold-start.md, *The open pairs' order*).

The bank-free ranker (engine/anytime/bank_free_ranker.py) decides pairs from its shared random documents alone;
the pairs it cannot decide it still has to put in some order. With a bank, each model's answers give θ̂ (the
bank's estimator on the answered documents the bank holds) and the full-task estimate of record of a banked
run (:func:`~lm_eval_adaptive.engine.cat.full_task.full_task_estimate`: the observed scores plus the bank's
prediction of every document not answered). :class:`BankPrediction` is that estimate as a callable of a model's
item log, so that the bank-free ranker, which knows nothing of banks, can be handed it. It decides nothing: no
interval, no pair outcome reads it.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from lm_eval_adaptive.engine.cat.examinee import Examinee
from lm_eval_adaptive.engine.cat.full_task import full_task_estimate
from lm_eval_adaptive.engine.cat.selection import shared_default_selector
from lm_eval_adaptive.engine.irt.bank import ItemBank

__all__ = ["BankPrediction", "bank_full_task_mean"]


def bank_full_task_mean(bank: ItemBank, item_log: Sequence[tuple[str, float]],
                        ids: Mapping[str, str] | None = None) -> float:
    """The bank's full-task estimate of a model whose answers are ``item_log`` ((document id, raw score) pairs,
    in any order): θ̂ from the answered documents the bank holds, then the observed raw scores plus the bank's
    prediction of every other bank item (and the calibration means of the items calibration dropped). Documents
    the bank does not hold are left out; with none answered it is the bank's prediction at the prior. ``ids``:
    document id → the bank's item id, where the two differ (a harness run names documents by doc id)."""
    answered = [(str(doc) if ids is None else ids.get(str(doc)), float(raw)) for doc, raw in item_log]
    answered = [(doc, raw) for doc, raw in answered if doc is not None and np.isfinite(raw)]
    seen: dict[int, float] = {}
    for i, (_, raw) in zip(bank.positions([doc for doc, _ in answered]), answered):
        if i >= 0:
            seen[int(i)] = raw
    items = np.fromiter(seen.keys(), dtype=np.int64, count=len(seen))
    raws = np.fromiter(seen.values(), dtype=float, count=len(seen))
    examinee = Examinee(bank, shared_default_selector(bank, seed=0))
    if items.size:
        examinee.record_many(items, bank.scale(items, raws), raws=raws)
    return float(full_task_estimate(bank, items, raws, examinee.theta, examinee.se)["estimate"])


class BankPrediction:
    """``(model, item_log) → the bank's full-task estimate`` (:func:`bank_full_task_mean`) for one bank; the
    ``order_key`` a :class:`~lm_eval_adaptive.engine.anytime.bank_free_ranker.BankFreeRanker` takes
    (``ids``: document id → bank item id, as :func:`bank_full_task_mean`). ``name`` says in the ranker's
    signature what ordered the open pairs."""

    def __init__(self, bank: ItemBank, ids: Mapping[str, str] | None = None) -> None:
        self.bank = bank
        self.ids = None if ids is None else {str(k): str(v) for k, v in ids.items()}
        self.name = f"bank prediction ({bank.describe()})"

    def __call__(self, model: str, item_log: Sequence[tuple[str, float]]) -> float:
        return bank_full_task_mean(self.bank, item_log, self.ids)

"""bind_bank: one check of a bank against a harness task and metric, and one rule mapping its ids to documents.

A stand-in task object (the two things bind_bank reads: ``eval_docs`` and ``aggregation()``)
keeps these fast; the harness itself is exercised in tests/test_edge.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import WMT_LIKE, HarnessTaskStub
from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.irt.response_model import ContinuousResponseModel
from lm_eval_adaptive.errors import BankError, InputError
from lm_eval_adaptive.harness.binding import DOC_ID, SAMPLE_LOGS_SOURCE, bind_bank


# like AlpacaEval: `id` equals the position
ALPACA_LIKE = HarnessTaskStub([{"id": str(k), "instruction": f"do {k}"} for k in range(50)], metrics=("judge", "rouge_l"))


def bank(ids, *, task="t", metric="bleu", source=None):
    b = ItemBank(item_ids=np.array([str(i) for i in ids], dtype=object), b=np.zeros(len(ids)),
                 model=ContinuousResponseModel(k=0.1), scaling="global", lo=0.0, hi=1.0, input_tokens=10.0,
                 output_tokens=10.0, task=task, metric=metric)
    if source is not None:
        b.calibration = {"source": source}
    return b


def test_ids_read_as_doc_ids_when_that_is_the_only_reading():
    # "0" is no `id` value: the ids cannot be field values, so they are doc ids
    got = bind_bank(bank(range(0, 10)), "t", WMT_LIKE)
    assert got.doc_of_item.tolist() == list(range(10)) and got.item_field == DOC_ID and got.metric == "bleu"
    # where the field and the position agree there is nothing to choose
    got = bind_bank(bank(range(5, 15), metric="judge"), "t", ALPACA_LIKE)
    assert got.doc_of_item.tolist() == list(range(5, 15))


def test_ambiguous_ids_are_refused_naming_both_readings():
    with pytest.raises(BankError, match=r"ambiguous.*field 'id'.*--item-field id.*--item-field doc_id"):
        bind_bank(bank(range(5, 15)), "t", WMT_LIKE)
    # saying which reading is meant settles it
    assert bind_bank(bank(range(5, 15)), "t", WMT_LIKE, item_field="id").doc_of_item.tolist() == list(range(4, 14))
    assert bind_bank(bank(range(5, 15)), "t", WMT_LIKE, item_field=DOC_ID).doc_of_item.tolist() == list(range(5, 15))


def test_banks_from_harness_sample_logs_are_doc_ids():
    b = bank(range(5, 15), source=f"{SAMPLE_LOGS_SOURCE}: runs/")
    assert bind_bank(b, "t", WMT_LIKE).doc_of_item.tolist() == list(range(5, 15))


def test_ids_that_are_no_doc_ids_are_refused_with_the_field_that_holds_them():
    # line numbers 1..50: 50 is past the last position
    with pytest.raises(BankError, match=r"document id\(s\) the task 't' does not have.*pass --item-field id"):
        bind_bank(bank(range(1, 51)), "t", WMT_LIKE)
    with pytest.raises(BankError, match="document id"):
        bind_bank(bank(["a", "b"]), "t", WMT_LIKE)
    with pytest.raises(BankError, match="match no document .* by field 'id'"):
        bind_bank(bank([1, 2, 99]), "t", WMT_LIKE, item_field="id")
    with pytest.raises(InputError, match="no such field"):
        bind_bank(bank([1, 2]), "t", WMT_LIKE, item_field="nope")


def test_a_field_that_does_not_identify_documents_is_refused():
    docs = HarnessTaskStub([{"id": str(k // 2)} for k in range(10)])
    with pytest.raises(InputError, match="does not identify documents"):
        bind_bank(bank([0, 1]), "t", docs, item_field="id")


def test_task_and_metric_are_checked_before_anything_else(tmp_path):
    with pytest.raises(BankError, match="calibrated for task 'other', not 't'"):
        bind_bank(bank([0], task="other"), "t", WMT_LIKE)
    with pytest.raises(BankError, match="calibrated for metric 'chrf', not 'bleu'"):
        bind_bank(bank([0], metric="chrf"), "t", WMT_LIKE, metric="bleu")
    with pytest.raises(BankError, match="has no metric 'rouge_l'"):
        bind_bank(bank([0], metric="rouge_l"), "t", WMT_LIKE)
    with pytest.raises(BankError, match="item bank file not found"):
        bind_bank(tmp_path / "none.json", "t", WMT_LIKE)
    path = tmp_path / "b.json"
    bank([0, 1]).save(path)
    assert bind_bank(path, "t", WMT_LIKE).bank.n_items == 2

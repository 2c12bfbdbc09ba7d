"""An item bank bound to a harness task: checked against the task and metric, its items mapped to documents.

:func:`bind_bank` is the one place where ``run --adaptive``, ``rank`` and ``refresh`` turn a
bank into something a harness task can be evaluated on, before any model call is made:

1. the bank is loaded (a path or a shipped bank's name:
   :func:`~lm_eval_adaptive.harness.bank_source.load_bank`) and checked against the task and the metric
   (:meth:`ItemBank.check_compatible`): a bank calibrated for another task or another
   metric is refused, and so is a metric the task does not give;
2. every bank item id is mapped to a harness document (its ``doc_id``, the position in the
   task's evaluation split), by the rule below, or the binding is refused.

The mapping rule (also in docs/harness.md):

* ``item_field=FIELD``: the ids are values of the document field ``FIELD``; every id must be
  the value of exactly one document (the field's values must be unique).
* ``item_field="doc_id"``: the ids are harness doc ids; each must be an integer in
  ``0 .. n_docs - 1``.
* no ``item_field``: a bank that records its id scheme (``calibration.item_field``: a bank
  calibrated from a named table such as ``wmt24/en-de/bleu``, and every shipped bank, holds
  ``"id"``) is read by that field, as if ``item_field`` had named it. Banks calibrated from
  harness sample logs (``calibrate --samples``) record that their ids are doc ids and are
  read so. Any other bank's ids are read as doc
  ids only when that reading is the only one: the binding is refused when an id is not a
  doc id of the task, and also when some document field (unique values, e.g. ``id``) holds
  every one of the bank's ids but names other documents by them than the positions do.
  Such a bank (a table exported from recorded data, whose ids are line numbers, is one) is
  ambiguous; ``item_field`` must say which reading is meant.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.errors import BankError, InputError
from lm_eval_adaptive.harness.bank_source import check_task_metric, load_bank

__all__ = ["DOC_ID", "SAMPLE_LOGS_SOURCE", "ITEM_FIELD_KEY", "BankBinding", "bind_bank", "bind_banks", "check_banks",
           "check_metric_bindings", "task_metrics", "record_item_field", "recorded_item_field"]

#: ``item_field`` value meaning "the ids are harness doc ids (positions in the evaluation split)".
DOC_ID = "doc_id"
#: How ``table_from_sample_logs`` names its source; a bank calibrated from it has doc-id items.
SAMPLE_LOGS_SOURCE = "harness sample logs"
#: The key of a bank's ``calibration`` block that names the document field holding its item ids.
ITEM_FIELD_KEY = "item_field"

_MAX_ID_CHARS = 200  # longer field values (texts) are never ids


@dataclass(frozen=True)
class BankBinding:
    """A bank checked against a task and metric, with each bank item's harness doc id."""

    bank: ItemBank
    task: str
    metric: str
    n_docs: int
    item_field: str  # DOC_ID or the document field holding the ids
    doc_of_item: np.ndarray  # bank index -> doc id

    def doc_id(self, item_id) -> int:
        return int(self.doc_of_item[int(self.bank.index_of([item_id])[0])])

    @property
    def doc_of(self) -> dict[str, int]:
        return {str(i): int(d) for i, d in zip(self.bank.item_ids, self.doc_of_item)}


def task_metrics(task_obj) -> list[str]:
    """The per-document metrics the harness task reports (its metric list)."""
    try:
        return [str(m) for m in (task_obj.aggregation() or {})]
    except Exception:  # noqa: BLE001 - a task that cannot say: not checked here
        return []


def bind_bank(bank, task_name: str, task_obj, *, metric: str | None = None,
              item_field: str | None = None) -> BankBinding:
    """Load (a path) and check ``bank`` against the harness task and ``metric``; map its items.

    Raises :class:`BankError` (or :class:`InputError`) naming the bank and the fault: another
    task or metric, a metric the task does not give, ids that name no document, or ids that
    name documents two ways (see the module docstring).
    """
    bank = load_bank(bank)
    bank.check_compatible(task=task_name, metric=metric)
    metric = metric or bank.metric
    if not metric:
        raise BankError(f"bank {bank.describe()} names no metric; pass --metric")
    given = task_metrics(task_obj)
    if given and metric not in given:
        raise BankError(f"task {task_name!r} has no metric {metric!r} (its metrics: {', '.join(given)}); use a "
                        "bank calibrated on one of them")
    docs = list(task_obj.eval_docs)
    field = item_field or recorded_item_field(bank)
    how = (f"--item-field {field!r}" if item_field else
           f"the bank's item field {field!r} (calibration.{ITEM_FIELD_KEY}; --item-field overrides it)")
    if not field and str((bank.calibration or {}).get("source", "")).startswith(SAMPLE_LOGS_SOURCE):
        field = DOC_ID
    doc_of_item = _map_items(bank, docs, field, task_name, how)
    return BankBinding(bank=bank, task=task_name, metric=metric, n_docs=len(docs),
                       item_field=field or DOC_ID, doc_of_item=doc_of_item)


def check_banks(banks: dict, *, metric: str | None = None, include_path=None) -> None:
    """The checks of :func:`bind_bank` that need no task loaded, for task → its bank specs: each bank
    is found (a file or a shipped name) and read, made for this task, and for ``--metric``; the metric
    (``--metric``, else the bank's) is one the task's YAML under ``include_path`` lists (a task not
    found there is checked when it is loaded). Raises :class:`BankError` or :class:`InputError`."""
    for task, specs in banks.items():
        if metric:
            check_task_metric(task, metric, include_path)
        for spec in specs:
            bank = load_bank(spec)
            bank.check_compatible(task=task, metric=metric)
            if not metric and bank.metric:
                check_task_metric(task, bank.metric, include_path, what=f"bank {bank.describe()}")


def bind_banks(banks, task_name: str, task_obj, *, metric: str | None = None,
               item_field: str | None = None) -> list[BankBinding]:
    """Bind a task's banks: one (:func:`bind_bank`), or several, one per metric (a several-metric run: each
    document generated once and scored by every bank's metric), each checked as :func:`bind_bank` checks
    it and together by :func:`check_metric_bindings`. ``metric`` names a single bank's metric only."""
    banks = list(banks) if isinstance(banks, (list, tuple)) else [banks]
    if len(banks) > 1 and metric:
        raise InputError(f"task {task_name!r} is given {len(banks)} banks (one per metric): each bank says its "
                         "metric; --metric is for a single bank")
    bindings = [bind_bank(b, task_name, task_obj, metric=metric, item_field=item_field) for b in banks]
    return check_metric_bindings(task_name, bindings) if len(bindings) > 1 else bindings


def check_metric_bindings(task: str, bindings: list) -> list:
    """The bindings of a task's several banks: one per metric, the ids they share naming the same documents."""
    metrics = [b.metric for b in bindings]
    dup = sorted({m for m in metrics if metrics.count(m) > 1})
    if dup:
        raise InputError(f"task {task!r}: several banks for the metric(s) {', '.join(dup)}; a multi-metric run "
                         "takes one bank per metric")
    first = bindings[0].doc_of
    for b in bindings[1:]:
        other = b.doc_of
        shared = [i for i in other if i in first]
        if not shared:
            raise InputError(f"task {task!r}: the banks {bindings[0].bank.describe()} and {b.bank.describe()} "
                             "share no item id; a multi-metric run gives the items every bank has")
        clash = [i for i in shared if other[i] != first[i]]
        if clash:
            raise InputError(f"task {task!r}: item {clash[0]!r} is document {first[clash[0]]} in "
                             f"{bindings[0].bank.describe()} but {other[clash[0]]} in {b.bank.describe()}")
    return bindings


def record_item_field(bank: ItemBank, field: str | None) -> ItemBank:
    """Record in ``bank`` (its ``calibration`` block, which is not part of the bank's id) that its
    item ids are values of the document field ``field`` (``doc_id``: harness doc ids); None
    records nothing."""
    if field is not None:
        if not isinstance(field, str) or not field.strip():
            raise BankError(f"calibration.{ITEM_FIELD_KEY} must be a document field name, not {field!r}")
        bank.calibration[ITEM_FIELD_KEY] = field
    return bank


def recorded_item_field(bank: ItemBank) -> str | None:
    """The document field ``bank`` says holds its item ids (``calibration.item_field``), or None."""
    field = (bank.calibration or {}).get(ITEM_FIELD_KEY)
    if field is None:
        return None
    if not isinstance(field, str) or not field.strip():
        raise BankError(f"bank {bank.describe()}: calibration.{ITEM_FIELD_KEY} is {field!r}, not a document "
                        "field name")
    return field


def _id_fields(docs) -> dict[str, dict[str, int]]:
    """Document fields whose values are unique short scalars: field -> {value: doc id}."""
    if not docs or not isinstance(docs[0], dict):
        return {}
    out = {}
    for f in docs[0]:
        index: dict[str, int] = {}
        for d, doc in enumerate(docs):
            v = doc.get(f) if isinstance(doc, dict) else None
            if isinstance(v, bool) or not isinstance(v, (str, int)):
                break
            v = str(v)
            if len(v) > _MAX_ID_CHARS or v in index:
                break
            index[v] = d
        else:
            out[str(f)] = index
    return out


def _map_items(bank: ItemBank, docs, field: str | None, task_name: str, how: str = "") -> np.ndarray:
    ids = [str(x) for x in bank.item_ids]
    n = len(docs)
    if field and field != DOC_ID:
        if docs and not all(isinstance(doc, dict) and field in doc for doc in docs):
            have = ", ".join(map(str, docs[0])) if isinstance(docs[0], dict) else "none"
            raise InputError(f"{how}: task {task_name!r} documents have no such field "
                             f"(fields: {have})")
        index: dict[str, int] = {}
        for d, doc in enumerate(docs):
            v = str(doc[field])
            if v in index:
                raise InputError(f"{how}: the value {v!r} names documents {index[v]} and {d} "
                                 f"of task {task_name!r}; the field does not identify documents")
            index[v] = d
        missing = [i for i in ids if i not in index]
        if missing:
            raise BankError(f"bank {bank.describe()} holds {len(missing)} item(s) that match no document of "
                            f"task {task_name!r} by field {field!r}, e.g. {missing[:5]}")
        return np.array([index[i] for i in ids], dtype=np.int64)

    def position(i: str) -> int | None:
        try:
            k = int(i)
        except ValueError:
            return None
        return k if 0 <= k < n and str(k) == i.strip() else None

    pos = [position(i) for i in ids]
    bad = [i for i, k in zip(ids, pos) if k is None]
    fields = _id_fields(docs) if (bad or field is None) else {}
    covering = {f: index for f, index in fields.items() if all(i in index for i in ids)}
    if bad:
        hint = (f"; the documents' field {next(iter(covering))!r} holds every one of them: pass --item-field "
                f"{next(iter(covering))}" if covering else "")
        raise BankError(f"bank {bank.describe()} holds {len(bad)} document id(s) the task {task_name!r} does not "
                        f"have (it has {n} documents, doc_id 0..{n - 1}), e.g. {bad[:5]}{hint}")
    if field is None:
        for f, index in covering.items():
            differ = [(i, index[i]) for i, k in zip(ids, pos) if index[i] != k]
            if differ:
                i, d = differ[0]
                raise BankError(
                    f"bank {bank.describe()}: its item ids are ambiguous for task {task_name!r}: read as harness "
                    f"doc ids or as values of the document field {f!r} they name different documents (item {i!r} "
                    f"is doc_id {i}, but {f}={i!r} is doc_id {d}; {len(differ)} item(s) differ). Say which: "
                    f"--item-field {f} (ids are {f} values) or --item-field {DOC_ID} (ids are harness doc ids)")
    return np.array(pos, dtype=np.int64)

"""What ``run --adaptive`` journals of each batch, and how a resumed run replays it (:class:`BatchJournal`).

Every batch the harness generated and scored is journaled before its test is told a score
(:meth:`BatchJournal.scored`): its items and documents, each document's metric values, the USD
charged per document, the task's tallies so far (provider usage, attempts, judge calls), the model's answers (under the keys the harness's ``CachingLM`` files them by) and the
LLM judge's new judgements (:func:`~lm_eval_adaptive.harness.llm_judge.judgements`).
A failed attempt charged to the test is journaled as it is charged (:meth:`BatchJournal.failed`), and
requests about to be sent with their worst case (:meth:`BatchJournal.sent`): a resume charges the worst
case of requests the journal says were sent and nothing says came back (lost in flight when the process
died: the provider may have billed them), as an attempt that failed after sending.

A resumed run fills the harness's cache with every journaled answer (:meth:`BatchJournal.answers`) and
the judge's memo with every journaled judgement (:meth:`BatchJournal.judgements`), then drives each task's test as the first run did: the test picks its next batch, and while the
journal has a record of that task the batch must be the journaled one (else the journal is of
another run: an :class:`~lm_eval_adaptive.errors.InputError`), its failed attempts are charged
again, and its scores come from the journal, asking no model. The test, its random stream, its
spend and the run's tallies then stand where the first run's stood, and the run goes on from
there; its final pass finds every journaled answer in the cache. The same seed, bank and answers
give the same documents, so the results file is the one an uninterrupted run writes.

The journal file itself (append-only, fsynced, its settings checked on resume) is the caller's
(:class:`RunJournal`; ``lm-eval-adaptive run`` gives :class:`lm_eval_adaptive.live.run_journal.AdaptiveRunJournal`).
"""

from __future__ import annotations

import math
from collections import deque
from pathlib import Path
from typing import Protocol

import numpy as np

from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness.llm_judge import judgements

__all__ = ["RunJournal", "BatchJournal"]


class RunJournal(Protocol):
    """The journal file of one ``run --adaptive`` (see :class:`lm_eval_adaptive.live.run_journal.AdaptiveRunJournal`)."""

    def start(self, folder: Path, settings: dict) -> None:
        """Begin the journal in ``folder``, or (on resume) open it there and refuse other ``settings``."""

    def records(self) -> list[dict]:
        """The journaled records (the header left out), in the order they were written."""

    def append(self, record: dict) -> None:
        """Write ``record``; it counts once this returns (it is on disk)."""

    def finish(self, results_file: Path | None) -> None:
        """The results are written: keep the journal as the record of what the run paid for."""

    def discard(self) -> None:
        """The run failed having paid for nothing: remove the journal this run created, if it did."""


def _number(v) -> float | str:
    """A metric value as JSON holds it (a non-finite one as its text, which ``float`` reads back)."""
    v = float(v)
    return v if math.isfinite(v) else str(v)


class BatchJournal:
    """The journaling and the replay of one ``run --adaptive`` (module docstring); without a ``journal``
    it records nothing and replays nothing."""

    def __init__(self, journal: RunJournal | None = None):
        self.journal = journal
        self._todo: dict[str, deque] = {}
        self._answers: list = []  # answers the model gave since the last record
        self._judged: set = set()  # judgements journaled (the first record takes every other one memoised)
        self.documents = 0  # documents journaled (replayed or written) in this run
        self.paid = False  # whether the journal holds anything paid for (a batch, a charged attempt)
        for n, rec in enumerate(journal.records() if journal is not None else [], start=2):
            if rec.get("type") in ("batch", "failed_attempt", "sent"):
                self._todo.setdefault(str(rec.get("task")), deque()).append((n, rec))
        self._judged.update(j[:3] for j in self.judgements())

    @property
    def enabled(self) -> bool:
        return self.journal is not None

    def answers(self) -> list:
        """Every journaled answer, ``(request type, cache key, answer)``, for the harness's cache."""
        return [tuple(a) for rec in (self.journal.records() if self.journal is not None else [])
                for a in rec.get("answers", ())]

    def judgements(self) -> list:
        """Every journaled judgement, ``(model, api_base, prompt, raw score)``, for the judge's memo."""
        return [tuple(j) for rec in (self.journal.records() if self.journal is not None else [])
                for j in rec.get("judgements", ())]

    def capture(self, kind: str, key: str, answer) -> None:
        """An answer the model gave (journaled with the next record)."""
        if self.journal is not None:
            self._answers.append([kind, key, answer])

    # ------------------------------------------------------------------ writing
    @staticmethod
    def _tallies(usage: dict, judge: dict) -> dict:
        """The task's tallies as they stand (a replay sets them so: the same numbers, not sums of parts)."""
        return {"usage": dict(usage), "judge": {k: v for k, v in judge.items() if k != "prices"}}

    def _append(self, record: dict) -> None:
        record["answers"], self._answers = self._answers, []
        new = {k: v for k, v in judgements().items() if k not in self._judged}
        if new:
            record["judgements"] = [[*k, v] for k, v in new.items()]
        self.journal.append(record)
        self._judged.update(new)

    def sent(self, tname: str, items, reserved_usd: float) -> None:
        """Requests of the batch ``items`` whose worst case is ``reserved_usd`` are about to be sent."""
        if self.journal is not None:
            self.journal.append({"type": "sent", "task": tname, "items": [int(i) for i in items],
                                 "reserved_usd": float(reserved_usd)})

    def failed(self, tname: str, items, usd: float, usage: dict, judge: dict) -> None:
        """A failed attempt at the batch ``items`` was charged ``usd`` (``usage``, ``judge``: the task's
        tallies now)."""
        if self.journal is not None:
            self._append({"type": "failed_attempt", "task": tname, "items": [int(i) for i in items],
                          "charged_usd": float(usd), **self._tallies(usage, judge)})
            self.paid = self.paid or usd > 0

    def scored(self, tname: str, items, docs, charged, by_doc: dict, metrics, usage: dict, judge: dict) -> None:
        """The batch ``items`` (``docs``) was generated and scored: written before its test is told."""
        if self.journal is None:
            return
        values = []
        for d in docs:
            sample = by_doc.get(d) or {}
            values.append({m: _number(sample[m]) for m in metrics
                           if isinstance(sample.get(m), (int, float)) and not isinstance(sample.get(m), bool)})
        self._append({"type": "batch", "task": tname, "items": [int(i) for i in items],
                      "docs": [int(d) for d in docs], "values": values,
                      "charged_usd": [float(c) for c in charged], **self._tallies(usage, judge)})
        self.documents += len(docs)
        self.paid = True

    # ------------------------------------------------------------------- replay
    def _refuse(self, line: int, why: str) -> InputError:
        return InputError(f"line {line}: {why}: the journal is not of this run; resume it with the "
                          "settings it was started with, or choose another --output_path",
                          path=str(getattr(self.journal, "path", "journal")))

    @staticmethod
    def _restore(rec: dict, usage: dict, judge: dict) -> None:
        usage.update(rec.get("usage") or {})
        judge.update(rec.get("judge") or {})

    def _lost(self, rec: dict, test, usage: dict, judge: dict) -> None:
        usd = float(rec["reserved_usd"])
        if usd > 0:
            test.charge(usd)
        for k, v in (("attempts", 1), ("billed_failures", 1), ("billed_failures_usd", usd)):
            usage[k] = usage.get(k, 0) + v

    def replay(self, tname: str, items, docs, test, usage: dict, judge: dict):
        """The journaled outcome of the batch ``items`` the test just picked: its failed attempts charged
        to ``test`` again, then ``(USD charged per document, each document's metric values)`` when the
        journal has the batch scored; None when it has not (the batch is to be generated)."""
        todo = self._todo.get(tname)
        items = [int(i) for i in items]
        self.paid = self.paid or bool(todo)
        while todo:
            n, rec = todo[0]
            if rec.get("items") != items:
                raise self._refuse(n, f"task {tname!r}: the test picked items {items}, the journal has "
                                      f"{rec.get('items')}")
            todo.popleft()
            if rec["type"] == "sent":
                if not todo:  # nothing came back: lost in flight, charged as a failed attempt that was sent
                    self._lost(rec, test, usage, judge)
                continue
            self._restore(rec, usage, judge)
            if rec["type"] == "failed_attempt":
                if rec["charged_usd"] > 0:
                    test.charge(float(rec["charged_usd"]))
                continue
            if rec.get("docs") != [int(d) for d in docs]:
                raise self._refuse(n, f"task {tname!r}: items {items} are documents {docs} in this run, "
                                      f"{rec.get('docs')} in the journal")
            self.documents += len(docs)
            by_doc = {int(d): {m: float(v) for m, v in vals.items()} for d, vals in zip(rec["docs"], rec["values"])}
            return np.asarray(rec["charged_usd"], dtype=float), by_doc
        return None

    def discard_unpaid(self) -> None:
        """The run failed: a journal that holds nothing paid for (requests refused, as a model the provider
        does not know) is not kept, so that the same command may run again without ``--resume``."""
        if self.journal is not None and not self.paid:
            self.journal.discard()

    def check_replayed(self, tname: str) -> None:
        """The task's test has stopped: every journaled record of it must have been replayed."""
        todo = self._todo.get(tname)
        if todo and todo[0][1]["type"] == "batch":
            raise self._refuse(todo[0][0], f"task {tname!r}: its test stopped before the journal's items "
                                           f"{todo[0][1].get('items')}")

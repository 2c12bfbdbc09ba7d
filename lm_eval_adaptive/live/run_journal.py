"""The journal file of ``run --adaptive`` (:class:`AdaptiveRunJournal`): the live runs'
:class:`~lm_eval_adaptive.live.journal.Journal` (append-only JSON Lines, each record fsynced before it
counts, a torn last line dropped, secrets redacted, one writer at a time) in the run's results folder.

``run --adaptive --output_path OUT`` journals into the folder the harness writes the model's results
into (``OUT/<model>/journal.jsonl``; beside the file for an ``OUT`` ending in ``.json``). The header
holds the run's settings (:func:`lm_eval_adaptive.harness.run.journal_settings`); the records are the
batches of :mod:`lm_eval_adaptive.harness.batch_journal`. The file is created with the first record,
and a run that fails having paid for nothing (its calls refused) removes it, so it leaves none. Once the results are written it is
renamed ``journal_<date>.jsonl`` beside ``results_<date>.json``: the record of what the run paid for,
and the folder is free for the next run.

A run killed before its results were written leaves ``journal.jsonl``: the same command with
``--resume`` replays it and goes on (its settings must be the journal's: any difference is refused,
naming each); the same command without ``--resume`` is refused rather than paying again.

For tests only: with ``LM_EVAL_ADAPTIVE_TEST_KILL_AFTER=TYPE:N`` in the environment the process kills
itself with SIGKILL right after the journal's ``N``-th record of type ``TYPE`` is written (``batch:4``:
once the 4th batch is journaled, before its test is told; ``sent:3``: once the 3rd requests are
journaled as about to be sent, before they are): a kill -9 at a point that does not depend on timing.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.live.journal import JOURNAL_NAME, Journal, redact

__all__ = ["AdaptiveRunJournal", "KILL_AFTER_ENV"]

#: tests only: ``TYPE:N``, SIGKILL the process right after the journal's N-th record of type TYPE
KILL_AFTER_ENV = "LM_EVAL_ADAPTIVE_TEST_KILL_AFTER"

COMMAND = "run --adaptive"


def _differences(journaled, now, where: str = "") -> list[str]:
    """Each setting that differs, as ``name: journal X, now Y``."""
    if isinstance(journaled, dict) and isinstance(now, dict):
        out = []
        for k in sorted(set(journaled) | set(now)):
            out += _differences(journaled.get(k), now.get(k), f"{where}.{k}" if where else k)
        return out
    return [] if journaled == now else [f"{where}: journal {journaled!r}, now {now!r}"]


class AdaptiveRunJournal:
    """The journal of one ``run --adaptive`` (module docstring); ``resume``: the command's ``--resume``."""

    def __init__(self, *, resume: bool = False):
        self.resume = bool(resume)
        self.path: Path | None = None
        self._journal: Journal | None = None
        self._settings: dict | None = None
        self._created = False  # this run created the journal (it resumes none)
        self._counts: dict[str, int] = {}  # records of each type in the journal
        kind, _, n = (os.environ.get(KILL_AFTER_ENV) or "").partition(":")
        self._kill_after = (kind, int(n)) if n.strip().isdigit() else None

    def start(self, folder: Path, settings: dict) -> None:
        """Refuse a run whose folder holds an unfinished journal (without ``--resume``), or a resume with
        no journal or other settings; open the journal to resume."""
        folder = Path(folder)
        self.path = folder / JOURNAL_NAME
        shown = os.fspath(self.path)
        self._settings = redact(settings)
        if not self.resume:
            if self.path.exists():
                raise InputError("an interrupted adaptive run's journal is here: add --resume to go on from it "
                                 "(nothing it paid for is asked again), or choose another --output_path", path=shown)
            return
        if not self.path.exists():
            raise InputError("--resume: no journal of an interrupted adaptive run here (a finished run renames "
                             "it journal_<date>.jsonl); run without --resume", path=shown)
        journal = Journal.open(folder)
        try:
            header = journal.header
            if header.get("command") != COMMAND:
                raise InputError(f"--resume: not the journal of a `{COMMAND}` (it is of "
                                 f"{header.get('command') or 'a live ranking'})", path=shown)
            diff = _differences(header.get("settings"), self._settings)
            if diff:
                raise InputError("--resume: this command's settings are not the journal's (" + "; ".join(diff)
                                 + "); give the command the journal was started with", path=shown)
        except BaseException:
            journal.close()
            raise
        self._journal = journal
        for r in self.records():
            self._counts[r["type"]] = self._counts.get(r["type"], 0) + 1

    def records(self) -> list[dict]:
        if self._journal is None:
            return []
        return [r for r in self._journal.records() if r.get("type") != "header"]

    def append(self, record: dict) -> None:
        if self._journal is None:  # the first record creates the file
            self._journal = Journal.create(self.path.parent, {"command": COMMAND, "settings": self._settings})
            self._created = True
        self._journal.append(record)
        kind = record.get("type")
        self._counts[kind] = self._counts.get(kind, 0) + 1
        if self._kill_after == (kind, self._counts[kind]):
            os.kill(os.getpid(), signal.SIGKILL)

    def discard(self) -> None:
        """Remove the journal this run created (it failed having paid for nothing)."""
        if self._journal is not None and self._created:
            self._journal.close()
            self._journal = None
            self.path.unlink(missing_ok=True)

    def finish(self, results_file: Path | None) -> None:
        """Rename the journal beside ``results_file`` (``results_<date>.json`` → ``journal_<date>.jsonl``)."""
        if self._journal is None:
            return
        self._journal.close()
        self._journal = None
        if results_file is not None:
            f = Path(results_file)
            stem = "journal" + f.stem[len("results"):] if f.stem.startswith("results") else f"{f.stem}.journal"
            os.replace(self.path, f.with_name(stem + ".jsonl"))

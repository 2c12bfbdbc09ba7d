"""Append-only journal of a live run (``journal.jsonl``): nothing paid for is lost, nothing is paid twice.

The file is JSON Lines. Line 1 is the header ``{"type": "header", "version": 1, ...}``; every
later line is one record, written by :meth:`Journal.append`, which returns only after the
line was written and ``os.fsync``-ed: a record *counts* once ``append`` has returned. Record
types used by the live ranking::

    {"type": "score", "model", "item_id", "raw", "scaled", "cost_usd", "usage", "ts"}
        (with a bank per metric, ``raw`` and ``scaled`` are objects metric → value: one generation,
        every metric's score; null where a metric could not score it)
    {"type": "failure", "model", "item_id", "error", "cost_usd", "ts", ...}
    {"type": "request", "model", "item_id", "reserved_usd", "ts", ...}
    {"type": "model_failed", "model", "error", "ts"}
    {"type": "attempt", "model", "item_id", "attempt", "error", "cost_usd", "may_have_been_billed",
     "retry_reserved_usd", "ts", ...}     (a failed attempt, written before its retry is sent)
    {"type": "stop", "reason", "ts", ...}
    {"type": "cap", "budget_usd", "previous_usd", "spent_usd", "ts"}   # the cap changed on resume

A record's ``cost_usd`` is what the attempt it records was charged; an item's cost is the sum
over its records.

The header records the run's settings (``settings``), which a resume takes. Each record type's
required fields are checked when a record is written and when the journal is read
(:data:`RECORD_FIELDS`); a line that is valid JSON but lacks one is an InputError naming the
file and the line.

A process killed in the middle of ``append`` can leave a torn last line. :meth:`Journal.open`
drops it with a warning (and, when opened for writing, cuts it off the file so the next
record starts on a fresh line); a last line that is complete JSON but lost only its newline
is kept. Anything else malformed is an :class:`~lm_eval_adaptive.errors.InputError` naming
the file and the line.

Secrets never reach the disk: before a record is written it passes through :func:`redact`, the
redaction of :mod:`lm_eval_adaptive.redaction` (secrets by value and by shape in every string;
values under secret-named keys such as ``api_key``, ``authorization``, ``token`` or ``secret``, at
any depth, become ``"***"``).

One process writes a journal at a time: opening for writing takes an exclusive ``flock``
(on systems that have it), so two resumes of the same run cannot both pay for the same items.
A full disk stops a run before a call, never after it: before a request is written the file is
given room for the outcomes of every call in flight (:mod:`lm_eval_adaptive.live.journal_room`).

Resume: :meth:`Journal.replay_into` feeds the score and failure records back into a fresh
:class:`~lm_eval_adaptive.engine.ranking.ranker.AdaptiveRanker` or
:class:`~lm_eval_adaptive.engine.ranking.multi_metric_ranker.MultiMetricRanker` (through their public
:meth:`~lm_eval_adaptive.engine.ranking.ranker.AdaptiveRanker.replay`); :meth:`Journal.completed_keys` says which
(model, item) pairs are done; :meth:`Journal.costs` lists what was paid, for
:meth:`BudgetLedger.charge_known <lm_eval_adaptive.live.ledger.BudgetLedger.charge_known>`.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from lm_eval_adaptive.display import SHOWN_LOG_FILTER
from lm_eval_adaptive.engine.ranking.replay import ReplayError, ReplayEvent, ReplayStats
from lm_eval_adaptive import redaction
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.live.journal_room import ROOM_PER_CALL, Room, is_room, write_all
from lm_eval_adaptive.redaction import REDACTED, is_secret_key, redact_text

try:  # POSIX advisory locks; without them (Windows) the journal is not locked
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None

__all__ = ["Journal", "JOURNAL_NAME", "JOURNAL_VERSION", "RECORD_FIELDS", "ReplayStats", "redact", "REDACTED"]

log = logging.getLogger(__name__)
log.addFilter(SHOWN_LOG_FILTER)  # names in messages shown escaped

JOURNAL_NAME = "journal.jsonl"
JOURNAL_VERSION = 1

def _raw_of(rec: dict):
    """A score record's raw metric value (a number, or metric → number), None when it has none: the
    ranker then maps the scaled score back (older journals)."""
    raw = rec.get("raw")
    if isinstance(raw, dict):
        return {str(k): float(v) for k, v in raw.items() if isinstance(v, (int, float)) and math.isfinite(v)}
    return float(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) and math.isfinite(raw) else None


# ------------------------------------------------------------------ redaction

def env_secrets() -> list[str]:
    """The environment's secrets by value (:func:`lm_eval_adaptive.redaction.env_secrets`)."""
    return redaction.env_secrets()


def _clean(obj: Any, secrets: list[str], where: str) -> Any:
    """A JSON-ready deep copy of ``obj`` with secrets redacted (numpy values become Python)."""
    if obj is None or isinstance(obj, bool):
        return obj
    if isinstance(obj, str):
        return redact_text(obj, secrets)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        if not math.isfinite(obj):
            raise ValueError(f"{where}: {obj!r} cannot be written as JSON (use null)")
        return float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, Mapping):
        out = {}
        for k, v in obj.items():
            if not isinstance(k, str):
                if isinstance(k, (int, np.integer)) and not isinstance(k, bool):
                    k = str(int(k))
                else:
                    raise ValueError(f"{where}: dict keys must be strings, got {k!r}")
            if is_secret_key(k) and v is not None and not isinstance(v, bool) and v != "":
                out[redact_text(k, secrets)] = REDACTED
            else:
                out[redact_text(k, secrets)] = _clean(v, secrets, f"{where}.{k}")
        return out
    if isinstance(obj, np.ndarray):
        return _clean(obj.tolist(), secrets, where)
    if isinstance(obj, (list, tuple)):
        return [_clean(v, secrets, f"{where}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, os.PathLike):
        return redact_text(os.fspath(obj), secrets)
    raise ValueError(f"{where}: {type(obj).__name__} cannot be written as JSON")


def redact(obj: Any, secrets: Iterable[str] = ()) -> Any:
    """A deep copy of ``obj`` ready for JSON (numpy values become Python ones; a non-finite number or
    an object JSON cannot hold is a ValueError), with every secret redacted as
    :func:`lm_eval_adaptive.redaction.redact` does it: known secret values (``secrets``, the
    command's, the environment's) and secret shapes (API keys, ``Bearer`` tokens, URL user info,
    secret query parameters, ``api_key=...``-style assignments) in every string become ``***``, and
    so does every value under a secret-named key.
    """
    return _clean(obj, redaction.known_secrets(secrets), "record")


# ------------------------------------------------------------------ records

def _finite_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _text(v: Any) -> bool:
    return isinstance(v, str) and bool(v)


def _usd_or_null(v: Any) -> bool:
    return v is None or (_finite_number(v) and v >= 0)


def _score_value(v: Any) -> bool:
    """A score record's ``raw`` or ``scaled``: a finite number, or (a run with a bank per metric) an object
    metric → a finite number, or null where the metric could not score the generation."""
    if isinstance(v, dict):
        return bool(v) and all(_text(k) and (x is None or _finite_number(x)) for k, x in v.items())
    return _finite_number(v)


#: the fields each record type needs, and what each must be: (field, test, what)
RECORD_FIELDS: dict[str, tuple[tuple[str, Callable[[Any], bool], str], ...]] = {
    "request": (("model", _text, "a non-empty string"), ("item_id", _text, "a non-empty string"),
                ("reserved_usd", _usd_or_null, "a number >= 0 or null")),
    "score": (("model", _text, "a non-empty string"), ("item_id", _text, "a non-empty string"),
              ("raw", _score_value, "a finite number, or metric → a finite number or null"),
              ("scaled", _score_value, "a finite number, or metric → a finite number or null")),
    "failure": (("model", _text, "a non-empty string"), ("item_id", _text, "a non-empty string")),
    "attempt": (("model", _text, "a non-empty string"), ("item_id", _text, "a non-empty string"),
                ("attempt", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "an integer >= 1")),
    "model_failed": (("model", _text, "a non-empty string"),),
    "stop": (("reason", _text, "a non-empty string"),),
    "cap": (("budget_usd", lambda v: v is None or (_finite_number(v) and v > 0), "a number > 0 or null"),),
}


def _check_record(rec: Any) -> str | None:
    """Why ``rec`` is not a valid body record (None when it is): every record type's required
    fields (:data:`RECORD_FIELDS`) are present and of the right type."""
    if not isinstance(rec, dict):
        return f"a record must be a JSON object, got {type(rec).__name__}"
    t = rec.get("type")
    if not isinstance(t, str) or not t:
        return "a record needs a 'type' (non-empty string)"
    if t == "header":
        return "a second header (the header is line 1 only)"
    if "cost_usd" in rec and not _usd_or_null(rec["cost_usd"]):
        return f"cost_usd must be a number >= 0 or null, got {rec['cost_usd']!r}"
    for key, ok, what in RECORD_FIELDS.get(t, ()):
        if key not in rec or not ok(rec[key]):
            got = f"got {rec[key]!r}" if key in rec else "it is missing"
            return f"a {t} record needs '{key}' ({what}), {got}"
    return None


class Journal:
    """The journal of one run (``journal.jsonl``); see the module docstring.

    ``Journal(path)`` opens an existing journal file (or the ``journal.jsonl`` in a directory)
    like :meth:`open`. ``writable=False`` reads it without locking or repairing it.
    ``secrets``: more strings never to write (API keys known to the caller).
    """

    def __init__(self, path: str | os.PathLike, *, writable: bool = True, secrets: Iterable[str] = ()):
        path = Path(path)
        if path.is_dir():
            path = path / JOURNAL_NAME
        self.path = path
        self.writable = bool(writable)
        self._secrets = [s for s in secrets if s]
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._broken: str | None = None
        self._records: list[dict] = []
        self._lines: list[int] = []  # file line of each record
        self._score_keys: dict[tuple[str, str], int] = {}
        self.dropped_tail: bytes | None = None  # the torn last line dropped at open, if any
        shown = os.fspath(path)
        try:
            fd = os.open(path, os.O_RDWR if writable else os.O_RDONLY)  # records go at the end of the last
        except FileNotFoundError:
            raise InputError("no journal here (start a new run instead of resuming)", path=shown) from None
        except IsADirectoryError:
            raise InputError("journal path is a directory", path=shown) from None
        except OSError as e:
            raise InputError(f"cannot open journal: {e.strerror or e}", path=shown) from None
        try:
            if writable and fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise InputError("journal is in use by another process (a run is writing it)",
                                     path=shown) from None
            self._load(fd)
        except BaseException:
            os.close(fd)
            raise
        if writable:
            self._fd = fd
        else:
            os.close(fd)

    # -------------------------------------------------------------- creation
    @classmethod
    def create(cls, directory: str | os.PathLike, header: Mapping, *, secrets: Iterable[str] = ()) -> Journal:
        """Start the journal of a new run in ``directory`` (created if needed).

        Writes ``{"type": "header", "version": 1, **header}`` (redacted) as line 1. The file
        appears complete or not at all; InputError if the directory already has a journal.
        """
        directory = Path(directory)
        path = directory / JOURNAL_NAME
        if not isinstance(header, Mapping):
            raise ValueError(f"header must be a mapping, got {type(header).__name__}")
        clash = {"type", "version"} & set(header)
        if clash:
            raise ValueError(f"header must not set {sorted(clash)} (the journal writes them)")
        rec = redact({"type": "header", "version": JOURNAL_VERSION, **header, "ts": header.get("ts", time.time())},
                     secrets)
        data = (json.dumps(rec, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n").encode()
        directory.mkdir(parents=True, exist_ok=True)
        if path.exists():
            raise InputError("a journal already exists here; resume it or choose another directory",
                             path=os.fspath(path))
        tmp = directory / f".{JOURNAL_NAME}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            try:
                write_all(fd, data, 0)
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, path)  # atomic, and fails if a journal appeared meanwhile
            except FileExistsError:
                raise InputError("a journal already exists here; resume it or choose another directory",
                                 path=os.fspath(path)) from None
        finally:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        _fsync_dir(directory)
        return cls(path, secrets=secrets)

    @classmethod
    def open(cls, directory: str | os.PathLike, *, writable: bool = True, secrets: Iterable[str] = ()) -> Journal:
        """Open the journal in ``directory`` (or the journal file itself) to resume a run."""
        return cls(directory, writable=writable, secrets=secrets)

    # --------------------------------------------------------------- reading
    def _error(self, line: int, message: str) -> InputError:
        err = InputError(f"line {line}: {message}", path=os.fspath(self.path))
        err.row = line
        return err

    def _load(self, fd: int) -> None:
        chunks = []
        while chunk := os.pread(fd, 1 << 20, sum(map(len, chunks))):
            chunks.append(chunk)
        data = b"".join(chunks)
        lines = data.split(b"\n")
        complete, tail = lines[:-1], lines[-1]  # tail: bytes after the last newline
        good_end = len(data) - len(tail)  # end of the last complete line
        add_newline = False
        if is_room(tail):  # the room a writer kept for the outcomes of its calls in flight (journal_room)
            pass
        elif tail:
            # Lines start with "{", so a torn line never parses: JSON that parses is complete
            # and lost only its newline; it is kept (and checked like any other line).
            if not isinstance(_parse(tail), _ParseError):
                complete.append(tail)
                good_end = len(data)
                add_newline = True
            else:
                self.dropped_tail = tail
                log.warning("%s, line %d: dropped an incomplete last line (%d bytes; a crash "
                            "interrupted its writing, so it never counted)",
                            self.path, len(complete) + 1, len(tail))
        if not complete:
            raise self._error(1, "the journal has no complete header line (its creation was "
                                 "interrupted: nothing was recorded; delete it to start again)")
        for n, raw in enumerate(complete, start=1):
            rec = _parse(raw)
            if isinstance(rec, _ParseError):
                raise self._error(n, f"not valid JSON ({rec})")
            if n == 1:
                if not _is_header(rec):
                    raise self._error(1, "not a journal header (expected {\"type\": \"header\", ...})")
                version = rec.get("version")
                if version != JOURNAL_VERSION:
                    raise self._error(1, f"journal version {version!r} is not supported "
                                         f"(this version reads {JOURNAL_VERSION})")
            else:
                why = _check_record(rec)
                if why is not None:
                    raise self._error(n, why)
                self._index_score(rec, n, error=lambda msg, n=n: self._error(n, msg))
            self._records.append(rec)
            self._lines.append(n)
        if self.writable and (add_newline or good_end < len(data)):
            if add_newline:
                write_all(fd, b"\n", len(data))
            else:
                os.ftruncate(fd, good_end)
            os.fsync(fd)
        self._room = Room(fd, good_end + (1 if add_newline else 0))
        self._open = set()  # (model, item_id) of every request without its score or failure: calls in flight
        for rec in self._records:
            self._track(rec)

    def _track(self, rec: dict) -> None:
        key = (rec.get("model"), rec.get("item_id"))
        if rec.get("type") == "request":
            self._open.add(key)
        elif rec.get("type") in ("score", "failure"):
            self._open.discard(key)

    def _index_score(self, rec: dict, line: int, error: Callable[[str], Exception]) -> None:
        if rec["type"] != "score":
            return
        key = (rec["model"], rec["item_id"])
        first = self._score_keys.get(key)
        if first is not None:
            raise error(f"a second score for model {key[0]!r}, item {key[1]!r} (first on line {first})")
        self._score_keys[key] = line

    @property
    def header(self) -> dict:
        return self._records[0]

    def __len__(self) -> int:
        """Number of records, the header included."""
        with self._lock:
            return len(self._records)

    def records(self, type: str | None = None) -> Iterator[dict]:
        """The records in file order (the header first), or only those of one ``type``.

        The dicts are the journal's own: read them, do not modify them.
        """
        with self._lock:
            snapshot = list(self._records)
        return (r for r in snapshot if type is None or r.get("type") == type)

    def _numbered(self) -> list[tuple[int, dict]]:
        with self._lock:
            return list(zip(self._lines, self._records))

    def scores(self) -> list[dict]:
        """The score records, in the order they were written."""
        return list(self.records("score"))

    def completed_keys(self) -> set[tuple[str, str]]:
        """(model, item_id) of every score record: the work that must not be bought again."""
        with self._lock:
            return set(self._score_keys)

    def costs(self) -> list[tuple[str, float]]:
        """(key, USD) of every record with a ``cost_usd`` (scores, and failures that were billed).

        Keys are ``"journal:<line>"``, stable across resumes, for
        :meth:`BudgetLedger.charge_known <lm_eval_adaptive.live.ledger.BudgetLedger.charge_known>`.
        """
        return [(f"journal:{n}", float(r["cost_usd"])) for n, r in self._numbered()
                if r.get("type") != "header" and r.get("cost_usd") is not None]

    def spent_usd(self) -> float:
        """What the run paid, as a resume books it: every ``cost_usd`` plus the reservation of each
        request that has no score or failure (lost in flight: the provider may have billed it)."""
        done = {(r["model"], r["item_id"]) for r in self.records() if r["type"] in ("score", "failure")}
        lost = sum(float(r.get("reserved_usd") or 0.0) for r in self.records("request")
                   if (r["model"], r["item_id"]) not in done)
        return float(sum(usd for _, usd in self.costs())) + lost

    # --------------------------------------------------------------- writing
    def append(self, record: Mapping) -> dict:
        """Write one record (redacted) as one line, flush it to disk, and return it as written.

        Returns only after ``os.fsync``; a ``ts`` (Unix time) is added when missing. ValueError,
        with nothing written, for an invalid record (no ``type``, a score without ``model``,
        ``item_id`` or a finite ``scaled``, NaN anywhere, ...) or a second score for the
        same (model, item_id). Safe to call from many threads.
        """
        if not isinstance(record, Mapping):
            raise ValueError(f"a record must be a mapping, got {type(record).__name__}")
        rec = dict(record)
        rec.setdefault("ts", time.time())
        rec = redact(rec, self._secrets)
        why = _check_record(rec)
        if why is not None:
            raise ValueError(why)
        line = (json.dumps(rec, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n").encode()
        rec = json.loads(line)  # exactly what a later open() will read
        with self._lock, _ctrl_c_after():
            if not self.writable or self._fd is None:
                raise ValueError(f"journal {self.path} is not open for writing")
            if self._broken:
                raise OSError(f"journal {self.path} cannot be written any more: {self._broken}")
            if rec["type"] == "request":  # room for the outcomes of every call in flight, this one's and the
                # run's last records, or OSError now: a full disk stops the run before the call, not after it
                self._room.ensure(len(line) + ROOM_PER_CALL * (len(self._open) + 2))
            n = len(self._records) + 1
            self._index_score(rec, n, error=ValueError)
            try:
                self._room.write(line)
            except BaseException:
                self._unindex(rec)
                if self._room.broken:
                    self._broken = f"a failed write could not be undone ({self._room.broken})"
                raise
            try:
                os.fsync(self._fd)
            except BaseException as e:
                # after a failed fsync the kernel may have dropped the data: stop writing
                self._unindex(rec)
                self._broken = f"fsync failed ({e})"
                raise
            self._records.append(rec)
            self._lines.append(n)
            self._track(rec)
        return rec

    def _unindex(self, rec: dict) -> None:
        if rec.get("type") == "score":
            self._score_keys.pop((rec["model"], rec["item_id"]), None)

    def hold(self, lock) -> Journal:
        """Keep ``lock`` (the run folder's :class:`~lm_eval_adaptive.writer_lock.WriterLock`) until
        :meth:`close`."""
        self._held = lock
        return self

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                try:
                    self._room.cut()  # the file ends with its last record
                except OSError:  # the room stays: readers take it as room
                    pass
                os.close(self._fd)  # also releases the flock
                self._fd = None
            held, self._held = getattr(self, "_held", None), None
        if held is not None:
            held.release()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # pragma: no cover - best effort
        try:
            self.close()
        except (OSError, AttributeError):
            pass

    # ---------------------------------------------------------------- resume
    def replay_into(self, ranker, scaled_of: Callable[[dict], float] = lambda rec: rec["scaled"], *,
                    failures: bool = True) -> ReplayStats:
        """Feed this journal's records into a fresh ranker, in journal order, asking no model.

        A thin adapter over :meth:`AdaptiveRanker.replay <lm_eval_adaptive.engine.ranking.ranker.AdaptiveRanker.replay>`
        (which says how a replay reproduces the live run): each score record becomes a score
        event (model, item id, ``scaled_of(record)``, ``cost_usd``) and, with ``failures``,
        each failure record naming ``model`` and ``item_id`` a failure event. ``stop`` and
        other records are skipped. ``ranker`` must be built as the original run's was and
        have no request in flight (ValueError). A record that does not fit the ranker (an
        unknown model or item, a bad score, an item already given or excluded) is an
        :class:`~lm_eval_adaptive.errors.InputError` naming the journal line. Returns counts
        of each path taken.
        """
        lines: list[int] = []

        def events():
            for n, rec in self._numbered():
                kind = rec.get("type")
                if kind == "score":
                    lines.append(n)
                    yield ReplayEvent.score(rec["model"], rec["item_id"], scaled_of(rec), rec.get("cost_usd"),
                                            _raw_of(rec))
                elif (kind == "failure" and failures and isinstance(rec.get("model"), str)
                      and isinstance(rec.get("item_id"), str)):
                    lines.append(n)
                    yield ReplayEvent.failure(rec["model"], rec["item_id"])

        try:
            return ranker.replay(events())
        except ReplayError as e:
            raise self._error(lines[e.index], e.reason) from None


# ------------------------------------------------------------------ helpers

class _ParseError(str):
    pass


def _parse(raw: bytes) -> Any:
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        return _ParseError(f"not UTF-8: {e.reason}")
    except json.JSONDecodeError as e:
        return _ParseError(f"{e.msg} at column {e.colno}")


def _is_header(rec: Any) -> bool:
    return isinstance(rec, dict) and rec.get("type") == "header"


@contextmanager
def _ctrl_c_after():
    """Hold a Ctrl-C (SIGINT) that arrives inside the block until the block has finished.

    A record is written and fsynced whole or not at all: an interrupt in the middle would
    leave the journal unable to take the records of the calls still in flight, which were
    paid for. Only in the main thread and only over Python's default SIGINT handler;
    anywhere else the block runs as it is.
    """
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    held = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if held:
        raise KeyboardInterrupt


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)

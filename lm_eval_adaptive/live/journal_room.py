"""The room a journal keeps on disk ahead of its records, so that a full disk stops a run before a call, never after.

A call's outcome (its score, failure or retry records) must be journaled once the provider has answered
and billed it; if the disk is full by then the answer is lost, and a resume can only charge it and
never ask it again. So before a request is journaled (and its call sent) the journal makes sure the
file already holds room for the outcomes of every call then in flight: :data:`ROOM_PER_CALL` bytes
each, written as spaces after the last record. Records are then written *into* that room (``pwrite``
at the end of the last record): they need no new space. Making room is the write that fails on a full
disk (``ENOSPC``) or past a file size limit (``EFBIG``), and it fails before the request is recorded
or sent.

The room is spaces with no newline, so it is never read as a record: a reader takes a tail of spaces
for room (:func:`is_room`), a writer cuts it off when it opens the journal and when it closes it.
"""

from __future__ import annotations

import os

__all__ = ["ROOM_PER_CALL", "Room", "is_room", "write_all"]

#: Bytes of room kept for the outcome records of each call in flight (a score with its usage, or
#: failed attempts with their one-line errors: well under this), and once more for the run's last
#: records (the stop).
ROOM_PER_CALL = 8192


def is_room(tail: bytes) -> bool:
    """Whether ``tail`` (the bytes after the last newline) is room: spaces only, at least one."""
    return bool(tail) and not tail.strip(b" ")


def write_all(fd: int, data: bytes, offset: int) -> None:
    """Write all of ``data`` at ``offset`` of ``fd``."""
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


class Room:
    """The room after a journal's last record: ``end`` is where the next record goes, ``size`` the
    file's size (``end`` plus the room)."""

    def __init__(self, fd: int, end: int):
        self.fd, self.end, self.size = fd, end, end
        self.broken: str | None = None  # why a failed write could not be undone

    @property
    def free(self) -> int:
        return self.size - self.end

    def ensure(self, need: int) -> None:
        """At least ``need`` bytes of room, written as spaces and synced; OSError (the file unchanged)
        when the disk or a file size limit refuses them."""
        if self.free >= need:
            return
        add = need - self.free
        try:
            write_all(self.fd, b" " * add, self.size)
            os.fsync(self.fd)
        except BaseException:
            try:
                os.ftruncate(self.fd, self.size)
            except OSError:  # pragma: no cover - the room is spaces: a reader takes it as room anyway
                pass
            raise
        self.size += add

    def write(self, line: bytes) -> None:
        """Write ``line`` (a whole record and its newline) at the end of the records, into the room where
        there is room; on failure the bytes after the last record are made room (spaces) again, or cut off."""
        try:
            write_all(self.fd, line, self.end)
        except BaseException:
            try:
                self.undo(len(line))
            except OSError as e:
                self.broken = str(e)
            raise
        self.end += len(line)
        self.size = max(self.size, self.end)

    def undo(self, n: int) -> None:
        """Make the ``n`` bytes after the last record room again (a failed or unsynced write): spaces where
        the file had room, the rest cut off. OSError when even that fails."""
        keep = min(self.size, self.end + n) - self.end
        if keep > 0:
            write_all(self.fd, b" " * keep, self.end)
        os.ftruncate(self.fd, self.size)

    def cut(self) -> None:
        """Cut the room off the file (the journal is closed: the file ends with its last record)."""
        if self.size > self.end:
            os.ftruncate(self.fd, self.end)
            os.fsync(self.fd)
            self.size = self.end

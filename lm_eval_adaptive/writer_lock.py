"""One writer at a time: a run folder, or a leaderboard file, is written by one process only.

A command takes the lock of what it writes before it writes anything there, and holds it until it
ends: ``rank`` and ``refresh`` their run folder (before ``run.json``; a resume before its journal is
opened for writing), ``refresh`` each leaderboard before it reads it (so that the board it writes
back is the one it read), ``leaderboard --out`` the board it creates. The lock is never waited for:
a second writer is refused at once with an :class:`~lm_eval_adaptive.errors.InputError`, the first
writer's files untouched.

The lock is an advisory ``flock``: of the run folder itself (no file is added to it), and of a hidden
file beside a leaderboard (``.NAME.lock``: the board is replaced by a rename, so its own inode cannot
carry the lock). The kernel releases it when the process ends, however it ends (SIGKILL included);
the ``.lock`` file stays, empty (removing it would race with the next writer). Where ``flock`` does
not exist (Windows) nothing is locked.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from lm_eval_adaptive.errors import InputError

try:  # POSIX advisory locks
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None

__all__ = ["WriterLock", "run_folder_lock", "board_lock", "board_lock_file"]


class WriterLock:
    """An exclusive lock, held from :meth:`acquire` until :meth:`release` (or the process's end).
    ``target``: the file descriptor's path (a folder, or a lock file created if missing); ``what``: how
    the refusal names what is locked."""

    def __init__(self, target: Path, what: str, shown_path: Path):
        self.target, self.what, self.shown_path = Path(target), what, Path(shown_path)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> WriterLock:
        if self._fd is not None or fcntl is None:
            return self
        is_dir = self.target.is_dir()
        try:
            fd = os.open(self.target, os.O_RDONLY | os.O_CLOEXEC if is_dir else
                         os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError as e:
            raise InputError(f"cannot lock {self.what} for writing: {e.strerror or e}",
                             path=str(self.shown_path)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise InputError(f"another process is writing {self.what} (a rank, refresh or leaderboard command "
                             f"holds its lock); nothing was written: wait for it to end, or write elsewhere",
                             path=str(self.shown_path)) from None
        except OSError as e:  # a file system without locks: go on unlocked, as without flock
            os.close(fd)
            if e.errno not in (errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOLCK):
                raise InputError(f"cannot lock {self.what} for writing: {e.strerror or e}",
                                 path=str(self.shown_path)) from None
            return self
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # releases the flock

    def __enter__(self) -> WriterLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    def __del__(self):  # pragma: no cover - best effort
        try:
            self.release()
        except OSError:
            pass


def run_folder_lock(folder) -> WriterLock:
    """The lock of a run folder (created if missing): ``flock`` of the folder itself."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return WriterLock(folder, "this run folder", folder)


def board_lock_file(board) -> Path:
    """The file whose lock is the leaderboard ``board``'s: ``.NAME.lock`` beside it."""
    board = Path(board)
    return board.with_name(f".{board.name}.lock")


def board_lock(board) -> WriterLock:
    """The lock of the leaderboard file ``board`` (its folder must exist)."""
    return WriterLock(board_lock_file(board), "this leaderboard", Path(board))

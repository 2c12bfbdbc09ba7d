"""Atomic file writes (bytes, text, JSON): nothing half-written is ever left at the destination.

Where the system allows it (Linux ``O_TMPFILE``), the data are written to an *unnamed* file in
the target folder, which no one can see and which vanishes with the process however it dies,
SIGKILL included; only once it is complete and synced is it given a name (linked through
``/proc/self/fd``) and renamed over the target. Elsewhere a named temp file
(``.NAME.XXXX.tmp``, from ``mkstemp``) is used as before. Either way a failure removes the temp
file, and so does SIGTERM while the write is under way (when SIGTERM has its default action:
the file is removed and the process then dies of SIGTERM as it would have).
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

#: Write through an unnamed ``O_TMPFILE`` file where the folder's file system supports it.
#: Set to False to always use a named temp file.
USE_O_TMPFILE = hasattr(os, "O_TMPFILE")


def atomic_write(path: str | os.PathLike, write: Callable[[Any], None]) -> Path:
    """Call ``write(binary_file)`` on a temp file next to ``path`` (its folder is created), then
    rename it into place.

    The file is flushed and synced first and gets the mode an ordinary new file would. On any
    failure (SIGTERM included) the temp file is removed and ``path`` is left untouched; with
    ``O_TMPFILE`` (see the module docstring) not even SIGKILL leaves a temp file behind, but
    for the instant between naming the complete file and renaming it.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _sigterm_cleans_up():
        fd = _unnamed_file(path.parent) if USE_O_TMPFILE else None
        if fd is None:
            _write_named(path, write)
        else:
            _write_unnamed(fd, path, write)
    return path


def _unnamed_file(folder: Path) -> int | None:
    """An ``O_TMPFILE`` descriptor in ``folder``, or None where that is not supported."""
    try:
        return os.open(folder, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o666)  # umask applies
    except OSError:  # EOPNOTSUPP, EISDIR, EINVAL ...: unsupported; a bad folder is reported below
        return None


def _write_unnamed(fd: int, path: Path, write: Callable[[Any], None]) -> None:
    tmp: Path | None = None
    try:
        f = os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise
    try:
        with f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
            tmp = _name_unnamed(f.fileno(), path)
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise


def _name_unnamed(fd: int, path: Path) -> Path:
    """Give the complete unnamed file a fresh temp name beside ``path``.

    Without ``/proc`` (or where linking is refused) the content is copied into a named temp
    file instead.
    """
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{os.urandom(6).hex()}.tmp"
        try:
            os.link(f"/proc/self/fd/{fd}", tmp)  # linkat(AT_SYMLINK_FOLLOW): names an O_TMPFILE file
            return tmp
        except FileExistsError:
            continue
        except OSError:
            break
    return _copy_to_named(fd, path)


def _copy_to_named(fd: int, path: Path) -> Path:
    tmp_fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(tmp_fd, "wb") as out:
            os.lseek(fd, 0, os.SEEK_SET)
            while block := os.read(fd, 1 << 20):
                out.write(block)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
    except BaseException:
        _remove(Path(tmp))
        raise
    return Path(tmp)


def _write_named(path: Path, write: Callable[[Any], None]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600
        os.replace(tmp, path)
    except BaseException:
        _remove(Path(tmp))
        raise


def _remove(tmp: Path | None) -> None:
    if tmp is not None:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


class _Terminated(BaseException):
    """SIGTERM arrived during a write (raised so that the temp file is removed)."""


@contextlib.contextmanager
def _sigterm_cleans_up() -> Iterator[None]:
    """While the body runs, SIGTERM raises so that ``except``/``finally`` blocks clean up; then the
    process dies of SIGTERM as it would have. Only where SIGTERM has its default action and in the
    main thread (signal handlers can only be set there); a program's own handler is left alone."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return

    def on_sigterm(signum, frame):
        raise _Terminated()

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    except _Terminated:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        raise  # pragma: no cover - the signal ends the process first
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    data = text.encode("utf-8")
    return atomic_write(path, lambda f: f.write(data))


def json_default(o):
    """``json.dumps`` fallback for NumPy scalars and arrays, sets and dataclass-like results."""
    import numpy as np

    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (set, frozenset)):
        return sorted(o)
    to_dict = getattr(o, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def write_json(path: str | os.PathLike, obj) -> Path:
    """Write ``obj`` as indented JSON to ``path`` atomically (its folder is created)."""
    import json

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(path, json.dumps(obj, indent=2, default=json_default) + "\n")

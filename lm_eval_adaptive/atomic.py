"""Atomic file writes (bytes, text, JSON): nothing half-written is ever left at the destination."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Callable


def atomic_write(path: str | os.PathLike, write: Callable[[Any], None]) -> Path:
    """Call ``write(binary_file)`` on a temp file next to ``path``, then rename it into place.

    The file is flushed and synced first and gets the mode an ordinary new file would
    (mkstemp creates 0600). On any failure the temp file is removed and ``path`` is left
    untouched.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


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

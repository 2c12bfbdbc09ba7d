"""Progress of long work in the data layer (scoring a table's systems), told to a hook the command gives.

The data layer prints nothing: a loader that works for a while wraps the work in
``with progress(description, total) as advance:`` and calls ``advance()`` after each step. What is
shown is the command's choice: ``with progress_hook(hook):`` installs ``hook`` for the block (the
command line installs a progress bar on stderr, :func:`lm_eval_adaptive.cli.progress.table_progress`).
A hook is called as ``hook(description, total)`` and returns a context manager that gives the
``advance`` callable; without a hook, :func:`progress` gives one that does nothing.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Callable, ContextManager, Iterator

__all__ = ["ProgressHook", "progress", "progress_hook"]

#: ``hook(description, total)`` -> a context manager giving ``advance()``.
ProgressHook = Callable[[str, int], ContextManager[Callable[[], None]]]

_lock = threading.Lock()
_hooks: list[ProgressHook] = []  # the innermost installed hook is last


@contextlib.contextmanager
def progress_hook(hook: ProgressHook) -> Iterator[None]:
    """Tell ``hook`` about every piece of data work done in the block (every thread's)."""
    with _lock:
        _hooks.append(hook)
    try:
        yield
    finally:
        with _lock:
            _hooks.remove(hook)


def _nothing() -> None:
    return None


@contextlib.contextmanager
def progress(description: str, total: int) -> Iterator[Callable[[], None]]:
    """``advance()`` for ``total`` steps of the work ``description``, shown by the installed hook."""
    with _lock:
        hook = _hooks[-1] if _hooks else None
    if hook is None:
        yield _nothing
        return
    with hook(description, total) as advance:
        yield advance

"""Names are data: how a user-supplied string (a model, task, bank or metric name, a path, an
error text) is shown.

:func:`shown` writes every character that could act on a terminal or reorder a line instead of
being read as text — C0 controls, DEL, C1 controls (ESC and CSI included), the bidirectional
embeddings, overrides, isolates and marks (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F,
U+061C), the line/paragraph separators U+2028/U+2029 and lone surrogates (a byte that was not
UTF-8, U+D800-U+DFFF: they cannot be written as text at all) — as its Python escape (``\\x1b``,
``\\u202e``). Everything else is left as it is. It is used for the terminal (stdout, stderr,
log lines), the leaderboard page and plot labels; stored data (JSON, journal) keeps names
exactly as given.

Log lines: importing the package installs (once, :func:`install_shown_logs`) a log-record factory that gives every logger of
the package (``lm_eval_adaptive`` and ``lm_eval_adaptive.*``) the filter :data:`SHOWN_LOG_FILTER` the
first time it makes a record, so the filter runs before any handler writes the record — as if each
module had attached it to its own logger — and no module needs to. Other loggers are left alone.

The rich consoles the commands print with read no markup (``[bold]`` in a name is text; see
:mod:`lm_eval_adaptive.cli.terminal`), so a name is shown whole. This module imports nothing
but the standard library (it sits in the bottom layer, below the engine).
"""

from __future__ import annotations

import logging
import re
import threading

__all__ = ["shown", "ShownLogFilter", "SHOWN_LOG_FILTER", "PACKAGE_LOGGER", "install_shown_logs"]

#: The characters :func:`shown` escapes (with ``\n`` kept where ``lines=True``).
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_KEEP_NEWLINES = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                                   "\ud800-\udfff]")


def _escape(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def shown(text, *, lines: bool = False) -> str:
    """``text`` (made a ``str``) with its control and bidi characters written as escapes:
    ``"a\\x1b[31mb"`` → ``a\\x1b[31mb`` shown literally, U+202E → ``\\u202e``. ``lines=True``
    keeps newlines (for a message of several lines); a name is shown on one line."""
    return (_UNSAFE_KEEP_NEWLINES if lines else UNSAFE).sub(_escape, str(text))


class ShownLogFilter(logging.Filter):
    """A filter for this package's loggers: the record's message (its arguments, a model name or
    an error text among them, filled in) is :func:`shown` before any handler writes it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: left for the handler to report
            return True
        safe = shown(message, lines=True)
        if safe != message:
            record.msg, record.args = safe, None
        return True


#: The one filter every logger of the package carries (``logging.Logger.addFilter`` adds it once).
SHOWN_LOG_FILTER = ShownLogFilter()

#: The package's logger; it and its children (``lm_eval_adaptive.live.journal``, …) are shown escaped.
PACKAGE_LOGGER = "lm_eval_adaptive"

_install_lock = threading.Lock()
_installed = False


def install_shown_logs() -> None:
    """Install (once per process) the log-record factory that gives each package logger
    :data:`SHOWN_LOG_FILTER` as it makes its first record.

    The filter, not the factory, rewrites the message: a logger's filters run when the logger
    handles the record, after every factory (the redaction of
    :mod:`lm_eval_adaptive.redaction` included) made it, so a message is redacted first and then
    shown escaped, exactly as with a filter each module attached itself."""
    global _installed
    with _install_lock:
        if _installed:
            return
        _installed = True
        previous = logging.getLogRecordFactory()

        def factory(*args, **kwargs):
            record = previous(*args, **kwargs)
            name = record.name
            if name == PACKAGE_LOGGER or name.startswith(PACKAGE_LOGGER + "."):
                logger = logging.getLogger(name)
                if SHOWN_LOG_FILTER not in logger.filters:
                    logger.addFilter(SHOWN_LOG_FILTER)  # consulted for this very record (Logger.handle)
            return record

        logging.setLogRecordFactory(factory)


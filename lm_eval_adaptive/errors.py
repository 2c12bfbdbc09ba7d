"""Errors raised for bad user input. Each names what was wrong and where; and the check that a name is text."""

from __future__ import annotations


class InputError(ValueError):
    """Bad user input (a table, a bank, a costs file, an argument).

    The message names the file and, where there is one, the row.
    """

    def __init__(self, message: str, *, path: str | None = None, row: int | None = None):
        where = ""
        if path is not None:
            where = f"{path}"
            if row is not None:
                where += f", row {row}"
            where += ": "
        super().__init__(where + message)
        self.path = path
        self.row = row


class BankError(InputError):
    """An item bank that cannot be used (bad file, wrong task or metric, unknown items)."""


def not_text(value: str) -> str | None:
    """Why ``value`` cannot be written as UTF-8 text (a file, a journal line, a terminal), or None when
    it can: a byte that was not UTF-8 on the command line (read as a surrogate escape, ``\\udcff``), or a
    lone surrogate (``"\\ud800"`` in a JSON file)."""
    for i, c in enumerate(str(value)):
        if "\ud800" <= c <= "\udfff":
            if "\udc80" <= c <= "\udcff":
                return f"the byte 0x{ord(c) - 0xdc00:02x} at character {i + 1} is not UTF-8"
            return f"a lone surrogate U+{ord(c):04X} at character {i + 1} is not text"
    return None


def check_text(value: str, what: str, *, path: str | None = None) -> None:
    """Refuse ``value`` (named ``what`` in the message) unless it is valid UTF-8 text (:func:`not_text`)."""
    why = not_text(value)
    if why is not None:
        raise InputError(f"{what} {shown_text(value)}: {why}; names, model ids and paths must be UTF-8 text",
                         path=path)


def shown_text(value: str) -> str:
    """``value`` quoted, with any surrogate written as its escape (so that it can be printed)."""
    return "'" + str(value).encode("utf-8", "backslashreplace").decode("utf-8") + "'"


_TRACEBACK = "Traceback (most recent call last)"


def error_line(e: BaseException) -> str:
    """One line saying what went wrong: ``Type: message``, whitespace collapsed; a traceback a library
    wrote into its message (litellm does) is left out but for its last line, the error it ended in."""
    text = f"{type(e).__name__}: {e}"
    head, sep, trace = text.partition(_TRACEBACK)
    if sep:
        last = [ln.strip() for ln in trace.splitlines() if ln.strip()]
        head = head.rstrip(" -:\n") + (f" ({last[-1]})" if last and not last[-1].startswith("File ") else "")
    return " ".join(head.split())

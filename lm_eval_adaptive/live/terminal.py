"""The rich consoles the commands print with: text is printed as text.

A :class:`TextConsole` reads no markup and no emoji codes unless a call asks for them (so
``x[/bold]`` or ``aya[bold]`` in a model name is printed as written, never parsed), and every
string it renders — a ``print`` argument, a table cell, a table's title — is first
:func:`~lm_eval_adaptive.display.shown` (control and bidi characters written as escapes). A line
that styles a word (``failed`` in red) is a :func:`styled` text, never markup.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from lm_eval_adaptive.display import shown

__all__ = ["PIPE_WIDTH", "TextConsole", "styled", "text_console"]

#: Columns of output that is not a terminal: wider than any table, so nothing is wrapped or cut.
PIPE_WIDTH = 100_000


class TextConsole(Console):
    """A rich console with markup, emoji codes and highlighting off by default, whose strings are
    shown escaped (:func:`~lm_eval_adaptive.display.shown`, newlines kept)."""

    def __init__(self, **kwargs):
        for key in ("markup", "emoji", "highlight"):
            kwargs.setdefault(key, False)
        super().__init__(**kwargs)

    def render_str(self, text: str, **kwargs):
        return super().render_str(shown(text, lines=True), **kwargs)


def text_console(*, stderr: bool = False, pipe_width: int = PIPE_WIDTH) -> TextConsole:
    """A :class:`TextConsole` on stdout (or stderr): the terminal's width, or ``pipe_width`` when the
    stream is not a terminal."""
    console = TextConsole(stderr=stderr)
    if not console.is_terminal:
        console = TextConsole(stderr=stderr, width=pipe_width)
    return console


def styled(word: str, style: str, rest: str = "") -> Text:
    """A line that starts with ``word`` in ``style`` (``styled("failed", "red", f": {model}: {why}")``):
    a :class:`rich.text.Text`, so neither part is read as markup on any console, both
    :func:`~lm_eval_adaptive.display.shown`."""
    return Text.assemble((shown(word), style), shown(rest, lines=True))

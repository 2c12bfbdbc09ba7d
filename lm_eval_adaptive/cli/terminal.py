"""The rich consoles the commands print with: text is printed as text.

A :class:`TextConsole` reads no markup and no emoji codes unless a call asks for them (so
``x[/bold]`` or ``aya[bold]`` in a model name is printed as written, never parsed), and every
string it renders — a ``print`` argument, a table cell, a table's title — is first
:func:`~lm_eval_adaptive.display.shown` (control and bidi characters written as escapes). A line
that styles a word (``failed`` in red) is a :func:`styled` text, never markup.
"""

from __future__ import annotations

import os
import textwrap

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from lm_eval_adaptive.display import shown

__all__ = ["PIPE_WIDTH", "TextConsole", "default_pipe_width", "fit_table", "styled", "text_console", "wrap_words"]

#: Columns of output that is not a terminal (a pipe, a file, a log), unless ``COLUMNS`` says otherwise.
#: A table wider than that is printed as several narrower tables that each repeat its name column
#: (:func:`fit_table`), so no cell is wrapped or cut and every name stays whole on its line.
PIPE_WIDTH = 120


def default_pipe_width() -> int:
    """The width of output that is not a terminal: ``COLUMNS`` when it is a positive number, else
    :data:`PIPE_WIDTH`."""
    try:
        cols = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        return PIPE_WIDTH
    return cols if cols > 0 else PIPE_WIDTH


class TextConsole(Console):
    """A rich console with markup, emoji codes and highlighting off by default, whose strings are
    shown escaped (:func:`~lm_eval_adaptive.display.shown`, newlines kept).

    ``fit_tables``: a table wider than the console is printed as several tables that fit
    (:func:`fit_table`) instead of having its cells folded or cut (on for output that is not a
    terminal: :func:`text_console`)."""

    def __init__(self, *, fit_tables: bool = False, **kwargs):
        for key in ("markup", "emoji", "highlight"):
            kwargs.setdefault(key, False)
        super().__init__(**kwargs)
        self.fit_tables = bool(fit_tables)

    def render_str(self, text: str, **kwargs):
        return super().render_str(shown(text, lines=True), **kwargs)

    def print(self, *objects, **kwargs):
        """As rich's, and with ``fit_tables``: tables fitted (:func:`fit_table`), text wrapped at spaces
        only (a word, a name or a path longer than the width stays whole on its own line). A caller that
        passes ``soft_wrap=True`` (a progress or log line: one event, one line) gets its text unwrapped."""
        if self.fit_tables and kwargs.get("soft_wrap") is not True:
            parts = []
            for o in objects:
                if isinstance(o, Table):
                    parts.extend(fit_table(self, o))
                elif isinstance(o, str):
                    parts.append(wrap_words(shown(o, lines=True), self.width))
                else:
                    parts.append(o)
            if not any(isinstance(o, Table) for o in parts):  # (a table keeps its centred title)
                kwargs.setdefault("soft_wrap", True)  # never fold a word: text is wrapped above
            objects = tuple(parts)
        return super().print(*objects, **kwargs)


def wrap_words(text: str, width: int) -> str:
    """``text`` with each line wrapped at spaces to ``width`` columns (its later lines indented as its
    first). A line with a word nearly as long as that (a long path or name, over ``width - 20`` columns)
    is left as it is: neither split nor moved off the words before it (``wrote PATH`` stays one line)."""
    out = []
    for line in text.split("\n"):
        if cell_len(line) <= width or max(map(cell_len, line.split(" "))) > width - 20:
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip(" "))]
        out.extend(textwrap.wrap(line, width=width, subsequent_indent=indent, break_long_words=False,
                                 break_on_hyphens=False) or [""])
    return "\n".join(out)


def _natural_width(console: Console, table: Table) -> int:
    """The columns ``table`` takes when nothing in it is wrapped."""
    return table.__rich_measure__(console, console.options.update(width=10**6, max_width=10**6)).maximum


def _key_columns(table: Table) -> int:
    """How many leading columns name a row: up to and including the first column that folds (the
    tables' name column: ``model``, ``table``), else the first."""
    for i, col in enumerate(table.columns):
        if col.overflow == "fold":
            return i + 1
    return 1


def _sub_table(table: Table, columns: list[int], title, *, wrap: bool = False) -> Table:
    """A table of ``table``'s ``columns`` (their cells, rows and look), titled ``title``. Its name columns
    (:func:`_key_columns`) never wrap; the others wrap at spaces only when ``wrap``."""
    t = Table(title=title, box=table.box, show_header=table.show_header, show_edge=table.show_edge,
              show_lines=table.show_lines, padding=table.padding, pad_edge=table.pad_edge,
              header_style=table.header_style, title_style=table.title_style, style=table.style)
    n_key = _key_columns(table)
    for i in columns:
        c = table.columns[i]
        keep = not wrap or i < n_key
        t.add_column(c.header, footer=c.footer, header_style=c.header_style, footer_style=c.footer_style,
                     style=c.style, justify=c.justify, vertical=c.vertical, overflow=c.overflow if keep else "fold",
                     width=c.width, min_width=c.min_width, max_width=c.max_width, ratio=c.ratio, no_wrap=keep)
    cells = [list(table.columns[i].cells) for i in columns]
    for r, row in enumerate(table.rows):
        t.add_row(*[col[r] if r < len(col) else "" for col in cells], style=row.style, end_section=row.end_section)
    return t


def fit_table(console: Console, table: Table) -> list:
    """``table`` as renderables no wider than ``console.width``, every name whole on its line.

    1. A table that fits is returned as it is.
    2. Otherwise its columns are packed, in order, into several tables that each start with the table's
       name columns (:func:`_key_columns`), no cell wrapped; the title is kept on the first and marked
       ``(continued)`` on the others.
    3. When a column is too wide for that (prose in a cell), the table is printed once with its other
       columns wrapped at spaces, the name columns whole.
    4. When the name columns alone do not fit (a very long name), each row is written as a block of
       ``header: value`` lines."""
    width = console.width
    if _natural_width(console, table) <= width:
        return [table]
    n_key = _key_columns(table)
    keys, rest = list(range(n_key)), list(range(n_key, len(table.columns)))
    title = table.title
    parts, current = [], []
    for i in rest:
        trial = _sub_table(table, keys + current + [i], None)
        if current and _natural_width(console, trial) > width:
            parts.append(current)
            current = [i]
        else:
            current.append(i)
    if current:
        parts.append(current)
    tables = [_sub_table(table, keys + p, title if k == 0 else (f"{title} (continued)" if title else None))
              for k, p in enumerate(parts)]
    if all(_natural_width(console, t) <= width for t in tables):
        return tables
    # room for the names and at least 12 columns of wrapped text per other column
    if _natural_width(console, _sub_table(table, keys, None)) + 15 * len(rest) <= width:
        return [_sub_table(table, keys + rest, title, wrap=True)]
    return [_as_records(table)]


def _as_records(table: Table) -> str:
    """Each row of ``table`` as a block of lines: its name columns, then ``  header: value`` per column."""
    n_key = _key_columns(table)
    cols = table.columns
    lines = [str(table.title)] if table.title else []
    for r in range(table.row_count):
        cell = [str(v[r]) if r < len(v) else "" for v in (list(c.cells) for c in cols)]
        lines.append("  ".join(cell[:n_key]))
        lines.extend(f"  {cols[i].header}: {cell[i]}" for i in range(n_key, len(cols)) if cell[i] != "")
    return shown("\n".join(lines), lines=True)


def text_console(*, stderr: bool = False, pipe_width: int | None = None) -> TextConsole:
    """A :class:`TextConsole` on stdout (or stderr): the terminal's width, or, when the stream is not a
    terminal, ``pipe_width`` (default :func:`default_pipe_width`: ``COLUMNS``, else :data:`PIPE_WIDTH`) with
    wide tables split to fit (``fit_tables``)."""
    console = TextConsole(stderr=stderr)
    if not console.is_terminal:
        console = TextConsole(stderr=stderr, width=pipe_width or default_pipe_width(), fit_tables=True)
    return console


def styled(word: str, style: str, rest: str = "") -> Text:
    """A line that starts with ``word`` in ``style`` (``styled("failed", "red", f": {model}: {why}")``):
    a :class:`rich.text.Text`, so neither part is read as markup on any console, both
    :func:`~lm_eval_adaptive.display.shown`."""
    return Text.assemble((shown(word), style), shown(rest, lines=True))

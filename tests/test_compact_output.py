"""Output that is not a terminal is at most 120 columns wide (``COLUMNS`` changes it) and keeps every
name whole on its line (issue 23 item 6: piped, the backtest table was about 220 columns and the
calibrate summary about 270)."""

from __future__ import annotations

import io

from rich.cells import cell_len
from rich.table import Table

from lm_eval_adaptive.cli.terminal import PIPE_WIDTH, TextConsole, default_pipe_width, fit_table, text_console

NAMES = ["Claude-3.5-Sonnet-20240620", "Llama-3.1-405B-Instruct-Turbo", "x[/bold]", "Aya 23 (8B) \u202e evil"]


def _printed(table: Table, width: int = PIPE_WIDTH) -> list[str]:
    buf = io.StringIO()
    console = TextConsole(file=buf, width=width, fit_tables=True)
    console.print(table)
    return buf.getvalue().splitlines()


def _wide_table() -> Table:
    t = Table(title="a wide table")
    t.add_column("rank", justify="right")
    t.add_column("model", overflow="fold")
    for k in range(14):
        t.add_column(f"figure number {k}", justify="right")
    for r, name in enumerate(NAMES, 1):
        t.add_row(str(r), name, *[f"{r * 1000 + k:.4f}" for k in range(14)])
    return t


def test_a_wide_table_is_split_into_parts_that_fit_each_naming_every_row():
    lines = _printed(_wide_table())
    assert max(cell_len(x) for x in lines) <= PIPE_WIDTH
    shown_names = ["Claude-3.5-Sonnet-20240620", "Llama-3.1-405B-Instruct-Turbo", "x[/bold]", "Aya 23 (8B) \\u202e evil"]
    parts = sum("a wide table" in x for x in lines)
    assert parts >= 2 and sum("(continued)" in x for x in lines) == parts - 1
    for name in shown_names:  # whole, on one line, in every part
        assert sum(name in x for x in lines) == parts
    text = "\n".join(lines)
    for r in range(1, 5):  # every cell once, whole
        for k in range(14):
            assert text.count(f"{r * 1000 + k:.4f}") == 1
        for k in range(14):
            assert text.count(f"figure number {k} ") == 1 or text.count(f"figure number {k}") == 1


def test_a_table_that_fits_is_printed_as_it_is():
    t = Table(title="small")
    t.add_column("model", overflow="fold")
    t.add_column("θ̂", justify="right")
    t.add_row("GPT-4", "+0.12")
    buf = io.StringIO()
    console = TextConsole(file=buf, width=PIPE_WIDTH, fit_tables=True)
    assert fit_table(console, t) == [t]
    plain = io.StringIO()
    TextConsole(file=plain, width=PIPE_WIDTH).print(t)
    console.print(t)
    assert buf.getvalue() == plain.getvalue()


def test_prose_in_a_cell_wraps_at_spaces_and_the_row_label_stays_whole():
    t = Table(title="item bank", show_header=False)
    t.add_column("")
    t.add_column("")
    label = "self-check (models left out)"
    prose = " ".join(f"word{k}" for k in range(60))
    t.add_row(label, prose)
    t.add_row("noise k", "0.2459")
    lines = _printed(t)
    assert max(cell_len(x) for x in lines) <= PIPE_WIDTH
    assert sum(label in x for x in lines) == 1
    text = " ".join(x.strip("│ ") for x in lines)
    assert all(f"word{k}" in text for k in range(60))


def test_a_name_longer_than_the_width_is_kept_whole_as_a_block_of_lines():
    long = "org/" + "very-long-model-name-" * 8  # 172 characters, no space
    t = Table(title="ranking")
    t.add_column("model", overflow="fold")
    t.add_column("items", justify="right")
    t.add_row(long, "30")
    lines = _printed(t)
    assert long in lines  # the name alone on its line, whole
    assert "  items: 30" in lines


def test_columns_sets_the_width_of_output_that_is_not_a_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert default_pipe_width() == 200
    monkeypatch.setenv("COLUMNS", "junk")
    assert default_pipe_width() == PIPE_WIDTH
    monkeypatch.delenv("COLUMNS")
    assert default_pipe_width() == PIPE_WIDTH == 120
    console = text_console()  # pytest's captured stdout is not a terminal
    assert console.width == 120 and console.fit_tables


def test_text_wraps_at_spaces_and_keeps_a_long_path_or_name_whole():
    buf = io.StringIO()
    console = TextConsole(file=buf, width=PIPE_WIDTH, fit_tables=True)
    path = "/tmp/" + "a-very-long-folder-name/" * 8 + "adaptive_2026-11-26T00-43-41.645101.png"
    console.print(f"wrote {path}")
    prose = " ".join(["ModelName-with-dashes"] * 20)
    console.print(prose)
    lines = buf.getvalue().splitlines()
    assert f"wrote {path}" in lines  # a line with a word longer than the width is left whole
    rest = lines[lines.index(f"wrote {path}") + 1:]
    assert all(cell_len(x) <= PIPE_WIDTH for x in rest) and len(rest) >= 4
    assert all(set(x.split(" ")) == {"ModelName-with-dashes"} for x in rest)


def test_a_signature_is_cut_at_its_separators_into_lines_that_join_back():
    from lm_eval_adaptive.cli.report import signature_lines

    sig = "|".join(f"key{k}:value-{k * 7919}" for k in range(60))
    lines = signature_lines(sig, 120)
    assert "".join(lines) == sig and len(lines) > 1
    assert all(len(x) <= 120 for x in lines) and all(x.startswith("|") for x in lines[1:])
    prices = "a:1|prices:" + "+".join(f"litellm:provider/model-{k}" for k in range(12)) + "|z:2"
    assert "".join(signature_lines(prices, 120)) == prices and max(map(len, signature_lines(prices, 120))) <= 120
    assert signature_lines("a:" + "x" * 200, 120) == ["a:" + "x" * 200]

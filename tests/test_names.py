"""Names are data: model names that look like rich markup (``x[/bold]``, ``aya[bold]``), carry
terminal escape sequences (ESC, BEL) or a bidi override (U+202E) go through ``rank`` (and its
resume), ``leaderboard``, ``refresh`` and ``leaderboard render`` as they are: no command
crashes, every name is printed whole with its control and bidi characters written as escapes
(no raw ESC, BEL or U+202E in stdout, stderr or the page), every call paid for is in the
results, and the files keep the names exactly as given.

The runs are real: the real CLI, real litellm, real HTTP to the replay endpoint; each odd name
is a display name (``NAME=litellm:model=openai/SYSTEM``) for a system the endpoint serves.
"""

from __future__ import annotations

import ast
import importlib
import json
import logging
from pathlib import Path

import pandas as pd
import pytest
from rich.table import Table

from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.cli.report import report_console
from lm_eval_adaptive.display import shown
from lm_eval_adaptive.cli.terminal import styled
from lm_eval_adaptive.redaction import redacting

REPO = Path(__file__).resolve().parents[1]
# name → the system the replay endpoint serves under it
ODD = {"x[/bold]": "GPT-4", "aya[bold]": "NVIDIA-NeMo", "esc\x1b[31mred\x07": "AIST-AIRC",
       "rtl\u202eevil": "TranssionMT"}
# how each name is shown in the terminal and on the page
SHOWN = {"x[/bold]": "x[/bold]", "aya[bold]": "aya[bold]", "esc\x1b[31mred\x07": "esc\\x1b[31mred\\x07",
         "rtl\u202eevil": "rtl\\u202eevil"}
RAW = ("\x1b", "\x07", "\u202e")
PRICES = ["--price", *[f"{s}=1,3" for s in ("NVIDIA-NeMo", "AIST-AIRC", "TranssionMT")]]
LIVE = ["--include_path", str(REPO / "task_configs"), "--apply_chat_template", "--no-progress", "--backoff", "0.05"]


def assert_shown(*texts):
    """Every odd name is in each text as shown, whole; no raw control or bidi character is."""
    for text in texts:
        assert not [c for c in RAW if c in text], [c for c in RAW if c in text]
    for name, as_shown in SHOWN.items():
        assert as_shown in texts[0], (name, texts[0][-3000:])


# ----------------------------------------------------------------------------- the parts
def test_shown_escapes_control_and_bidi_characters_only():
    assert shown("aya[bold] Ünïcødé 名前 ≈ 😀") == "aya[bold] Ünïcødé 名前 ≈ 😀"
    assert shown("a\x1b[31mb\x07c\rd\x00e\x7ff\x9bg") == "a\\x1b[31mb\\x07c\\x0dd\\x00e\\x7ff\\x9bg"
    for c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c\u2028\u2029":
        assert shown(f"a{c}b") == f"a\\u{ord(c):04x}b"
    assert shown("one\ntwo") == "one\\x0atwo" and shown("one\ntwo", lines=True) == "one\ntwo"


def test_the_report_console_prints_names_as_text(capsys):
    console = report_console()
    t = Table(title="rtl\u202eevil")
    t.add_column("model")
    for name in ODD:
        t.add_row(name)
    console.print(t)
    console.print("x[/bold] :smile:", styled("failed", "red", ": aya[bold]: esc\x1b[31mred\x07"))
    out = capsys.readouterr().out
    assert_shown(out)
    assert ":smile:" in out and "failed: aya[bold]: esc\\x1b[31mred\\x07" in out


def _package_loggers() -> set[str]:
    """The name of every logger a module of the package logs to: ``getLogger("lm_eval_adaptive…")`` or
    ``getLogger(__name__)`` (the module's own name)."""
    names = set()
    for f in (REPO / "lm_eval_adaptive").rglob("*.py"):
        module = ".".join(f.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(f.read_text(), filename=str(f))):
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("getLogger") and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Name) and arg.id == "__name__":
                    names.add(module)
                elif isinstance(arg, ast.Constant) and str(arg.value).startswith("lm_eval_adaptive"):
                    names.add(arg.value)
    return names


def test_log_lines_of_every_module_show_names_escaped(caplog):
    names = _package_loggers()
    # the package logger most modules use, and modules' own loggers (the journal's, the replay server's)
    assert {"lm_eval_adaptive", "lm_eval_adaptive.live.journal", "lm_eval_adaptive.replay.server"} <= names
    for name in sorted(names):
        importlib.import_module(name if name != "lm_eval_adaptive" else "lm_eval_adaptive.harness.attempts")
    for name in sorted(names | {"lm_eval_adaptive.a.module.not.yet.written"}):
        with caplog.at_level(logging.WARNING, logger=name):
            logging.getLogger(name).warning("%s, item %s failed", "esc\x1b[31mred\x07", "rtl\u202eevil")
        assert caplog.records[-1].getMessage() == "esc\\x1b[31mred\\x07, item rtl\\u202eevil failed", name
    with caplog.at_level(logging.WARNING, logger="not_this_package"):  # another library's logger is left alone
        logging.getLogger("not_this_package").warning("%s", "esc\x1b[31m")
    assert caplog.records[-1].getMessage() == "esc\x1b[31m"


def test_log_lines_are_redacted_before_they_are_escaped(caplog):
    # the escape runs when the logger handles the record, after the redaction made it: a secret is
    # found as given even where the line also holds a control character
    with redacting(["--model_args", "api_key=sk-\x07secret-42"]), caplog.at_level(logging.WARNING,
                                                                                   logger="lm_eval_adaptive"):
        logging.getLogger("lm_eval_adaptive.live.driver").warning("key %s for %s", "sk-\x07secret-42", "a\x1bb")
    message = caplog.records[-1].getMessage()
    assert "secret-42" not in message and "a\\x1bb" in message and "\x07" not in message and "\x1b" not in message


# ----------------------------------------------------------------------------- the commands
@pytest.fixture(scope="module")
def bank(tmp_path_factory):
    path = tmp_path_factory.mktemp("bank") / "bank.json"
    assert main(["calibrate", "wmt24/en-de/bleu", "--exclude-models", *ODD.values(), "--task", "wmt24_en-de",
                 "--metric", "bleu", "--no-self-check", "--out", str(path)]) == 0
    return path


@pytest.mark.slow
def test_rank_and_its_resume_show_odd_names_whole_and_escaped(replay_server, bank, tmp_path, capsys):
    out = tmp_path / "rank"
    args = ["rank", "--models", *[f"{n}=litellm:model=openai/{s}" for n, s in ODD.items()], "--tasks",
            "wmt24_en-de", "--bank", str(bank), "--item-field", "id", "--budget-usd", "0.2", "--min-items", "2",
            "--max-items", "3", "--output", str(out), *PRICES, *LIVE]
    capsys.readouterr()
    replay_server.reset_stats()
    assert main(args) == 0
    std = capsys.readouterr()
    assert_shown(std.out, std.err)
    assert "lm-eval-adaptive rank" in std.err
    # the files keep the names as given; every call paid for is in the results
    report = json.loads((out / "ranking.json").read_text())
    assert sorted(e["model"] for e in report["ranking"]) == sorted(ODD)
    assert replay_server.stats()["served"] == report["total_items"] > 0
    assert json.loads((out / "run.json").read_text())["settings"]["models"] == args[2:6]
    header = json.loads((out / "journal.jsonl").read_text().splitlines()[0])
    assert header["models"] == list(ODD)
    assert (out / "ranking.png").stat().st_size > 0
    # the resumed run reports the same, asking nothing again
    replay_server.reset_stats()
    assert main(["rank", "--resume", str(out), "--no-progress"]) == 0
    std = capsys.readouterr()
    assert_shown(std.out, std.err)
    assert replay_server.stats()["requests"] == 0


@pytest.mark.slow
def test_leaderboard_refresh_and_page_show_odd_names_whole_and_escaped(replay_server, tmp_path, capsys):
    table = tmp_path / "wmt24_en-de_bleu.csv"
    assert main(["export-table", "wmt24/en-de/bleu", "--out", str(table)]) == 0
    t = pd.read_csv(table)
    full = {"x[/bold]": "Aya23", "aya[bold]": "Claude-3.5", "esc\x1b[31mred\x07": "CommandR-plus",
            "rtl\u202eevil": "Mistral-Large"}  # odd names for full runs of the table
    t["model"] = t["model"].replace({s: n for n, s in full.items()})
    t.to_csv(table, index=False)
    lb = tmp_path / "board.json"
    board = [*full, "Gemini-1.5-Pro", "IOL-Research", "Llama3-70B", "ONLINE-A"]
    capsys.readouterr()
    assert main(["leaderboard", "--history", str(table), "--task", "wmt24_en-de", "--metric", "bleu",
                 "--item-field", "id", "--models", *board, "--out", str(lb)]) == 0
    std = capsys.readouterr()
    assert_shown(std.out, std.err)
    assert sorted(e["model"] for e in json.loads(lb.read_text())["entries"]) == sorted(board)

    # two new models with odd names placed live: the board lists every odd name, whole
    new = {"new x[/bold]": "GPT-4", "new rtl\u202eevil": "TranssionMT"}
    replay_server.reset_stats()
    assert main(["refresh", "--leaderboard", str(lb), "--add", *[f"{n}=litellm:model=openai/{s}" for n, s in new.items()],
                 "--price", "TranssionMT=1,3", "--budget-usd", "0.2", "--min-items", "2", "--max-items", "4", *LIVE]) == 0
    std = capsys.readouterr()
    assert_shown(std.out, std.err)
    assert "new x[/bold]" in std.out and "new rtl\\u202eevil" in std.out
    d = json.loads(lb.read_text())
    assert {e["model"] for e in d["entries"] if e["source"] == "adaptive"} == set(new)
    assert replay_server.stats()["served"] == sum(d["refreshes"][0]["items"].values()) > 0

    html = tmp_path / "board.html"
    png = tmp_path / "board.png"
    assert main(["leaderboard", "render", str(lb), "--html", str(html), "--plot", str(png)]) == 0
    std = capsys.readouterr()
    page = html.read_text(encoding="utf-8")
    assert_shown(page, std.out, std.err)
    assert "new rtl\\u202eevil" in page and "x[/bold]" in page
    assert 'data-model="esc\\x1b[31mred\\x07"' in page
    assert png.stat().st_size > 0

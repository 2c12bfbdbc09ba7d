"""Every check that needs no task loaded runs first (issue 23 item 2): a misspelled bank (with the close
match), a metric the task does not have (read from its YAML), models without a price (all in one error),
an output path that cannot be written; each refused before the harness loads a task or indexes its tasks,
and in `rank` a bad bank before a missing price. The tests assert the message and that nothing was loaded
or called (no timed test: the times are in the issue's report)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.irt.response_model import ContinuousResponseModel

REPO = Path(__file__).resolve().parents[1]
TASKS = str(REPO / "task_configs")
FOUR = ["Gemini-1.5-Pro", "Llama3-70B", "Aya23", "Unbabel-Tower70B"]
SPECS = [f"litellm:model=openai/{s}" for s in FOUR]
PRICES = ["--price", *[f"openai/{s}=1,3" for s in FOUR]]


@pytest.fixture
def nothing_loaded(monkeypatch):
    """Loading a harness task, indexing the harness's tasks or reading a leaderboard's history fails the test."""
    from lm_eval.config.evaluate_config import EvaluatorConfig

    from lm_eval_adaptive.harness.scorer import HarnessTask

    def loaded(*a, **k):
        raise AssertionError("a harness task was loaded before the check")

    monkeypatch.setattr(HarnessTask, "load", loaded)
    monkeypatch.setattr(EvaluatorConfig, "process_tasks", loaded)
    monkeypatch.setattr("lm_eval_adaptive.live.leaderboard.load_any_table", loaded)


def rank(out, *extra):
    return ["rank", "--models", *SPECS, "--tasks", "wmt24_en-de", "--include_path", TASKS, "--apply_chat_template",
            "--budget-usd", "0.05", "--no-progress", "--output", str(out), *extra]


def err_of(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err  # one error line
    return err


def test_rank_a_misspelled_bank_says_the_close_match_before_anything_is_loaded(nothing_loaded, tmp_path, capsys):
    assert main(rank(tmp_path / "out", "--bank", "wmt24_en-de.bleuu", *PRICES)) == 2
    err = err_of(capsys)
    assert "--bank 'wmt24_en-de.bleuu'" in err and "did you mean wmt24_en-de.bleu?" in err
    assert not (tmp_path / "out").exists()


def test_rank_a_bad_bank_is_reported_before_a_missing_price(nothing_loaded, tmp_path, capsys):
    assert main(rank(tmp_path / "out", "--bank", "wmt24_en-de.bleuu")) == 2
    err = err_of(capsys)
    assert "did you mean wmt24_en-de.bleu?" in err and "price" not in err


def test_a_bank_file_name_close_to_one_beside_it_is_suggested(nothing_loaded, tmp_path, capsys):
    import json

    from lm_eval_adaptive.data.shipped_banks import get_shipped_bank, read_bank_json

    bank = tmp_path / "ende.bank.json"
    bank.write_text(json.dumps(read_bank_json(get_shipped_bank("wmt24_en-de.bleu").path)))
    assert main(rank(tmp_path / "out", "--bank", str(tmp_path / "ende.bnak.json"), *PRICES)) == 2
    assert f"did you mean {bank}?" in err_of(capsys)


def test_rank_a_metric_the_task_lacks_is_named_as_such(nothing_loaded, tmp_path, capsys):
    assert main(rank(tmp_path / "out", "--metric", "rouge_l", *PRICES)) == 2
    err = err_of(capsys)
    assert "task 'wmt24_en-de' has no metric 'rouge_l' (its metrics: bleu, chrf)" in err
    assert "needs an item bank" not in err
    # a bank of another metric than --metric names: the bank's own refusal, still before loading
    assert main(rank(tmp_path / "out", "--metric", "chrf", "--bank", "wmt24_en-de.bleu", *PRICES)) == 2
    assert "calibrated for metric 'bleu', not 'chrf'" in err_of(capsys)


def test_rank_every_unpriced_model_in_one_error_before_anything_is_loaded(nothing_loaded, tmp_path, capsys):
    assert main(rank(tmp_path / "out", "--bank", "wmt24_en-de.bleu")) == 2
    err = err_of(capsys)
    assert "no known price for 4 models" in err
    assert "--price " + " ".join(f"openai/{s}=IN,OUT" for s in FOUR) in err
    assert "--price default=IN,OUT" in err


def test_rank_an_output_path_that_cannot_be_a_folder_before_anything_is_loaded(nothing_loaded, tmp_path, capsys):
    f = tmp_path / "a_file"
    f.write_text("x")
    assert main(rank(f, "--bank", "wmt24_en-de.bleu", *PRICES)) == 2
    assert "--output" in err_of(capsys)


def test_refresh_every_unpriced_new_model_in_one_error_before_the_history_is_read(nothing_loaded, tmp_path, capsys):
    board = tmp_path / "board.json"
    board.write_text('{"format": "lm-eval-adaptive/leaderboard", "version": 1, "task": "wmt24_en-de", '
                     '"metric": "bleu", "history": "wmt24/en-de/bleu", "confidence": 0.95, "entries": '
                     '[{"model": "GPT-4", "source": "full_run"}, {"model": "ONLINE-W", "source": "full_run"}]}')
    assert main(["refresh", "--leaderboard", str(board), "--add", *SPECS[:2], "--budget-usd", "0.3",
                 "--include_path", TASKS, "--no-progress"]) == 2
    err = err_of(capsys)
    assert "no known price for 2 models" in err and "--price openai/Gemini-1.5-Pro=IN,OUT openai/Llama3-70B=IN,OUT" in err


def run_adaptive(out, *extra, model="openai/Mistral-Large"):
    return ["run", "--model", "litellm", "--model_args", f"model={model}", "--tasks", "wmt24_en-de",
            "--include_path", TASKS, "--apply_chat_template", "--output_path", str(out), "--adaptive", *extra]


def test_run_a_misspelled_bank_and_a_missing_metric_before_the_tasks_are_indexed(nothing_loaded, tmp_path, capsys):
    assert main(run_adaptive(tmp_path / "out", "--bank", "wmt24_en-de.bleuu")) == 2
    assert "did you mean wmt24_en-de.bleu?" in err_of(capsys)
    assert main(run_adaptive(tmp_path / "out", "--metric", "rouge_l")) == 2
    assert "task 'wmt24_en-de' has no metric 'rouge_l' (its metrics: bleu, chrf)" in err_of(capsys)
    # a bank of a metric the task does not give
    bank = tmp_path / "rouge.json"
    ItemBank(item_ids=np.array([str(i) for i in range(30)], dtype=object), b=np.linspace(-1, 1, 30),
             model=ContinuousResponseModel(k=0.1), scaling="global", lo=0.0, hi=1.0, input_tokens=100.0,
             output_tokens=100.0, task="wmt24_en-de", metric="rouge_l").save(bank)
    assert main(run_adaptive(tmp_path / "out", "--bank", str(bank))) == 2
    assert "task 'wmt24_en-de' has no metric 'rouge_l'" in err_of(capsys)
    assert not (tmp_path / "out").exists()


def test_run_an_unpriced_model_is_refused_not_priced_at_a_silent_default(nothing_loaded, tmp_path, capsys):
    """Before: `run --adaptive` without --budget-usd charged an unpriced model $1/$3 without a word."""
    assert main(run_adaptive(tmp_path / "out", "--bank", "wmt24_en-de.bleu", model="openai/Aya23")) == 2
    err = err_of(capsys)
    assert "no known price for model openai/Aya23" in err and "--price openai/Aya23=IN,OUT" in err
    assert "--price default=IN,OUT" in err


def test_run_device_in_model_args_and_another_device_flag_is_one_error(nothing_loaded, tmp_path, capsys):
    """Issue 30 item 2: before, the harness crashed with `HFLM() got multiple values for keyword argument
    'device'`; device=cpu alone is the device (tests/test_binary_harness.py runs it), two devices are refused."""
    argv = run_adaptive(tmp_path / "out", "--bank", "wmt24_en-de.bleu", "--device", "cuda:0", model="openai/Aya23")
    i = argv.index("--model_args") + 1
    argv[i] += ",device=cpu"
    assert main(argv) == 2
    assert "--device cuda:0 and device=cpu in --model_args name two devices; give one" in err_of(capsys)
    assert not (tmp_path / "out").exists()


def test_the_early_refusals_import_neither_litellm_nor_a_task(tmp_path):
    """What made them slow: loading the task (the tests above) and importing litellm (seconds): in a fresh
    process, each of these refusals leaves litellm unimported, and `rank`'s the harness's task module too."""
    import subprocess
    import sys

    cases = {
        "rank": rank(tmp_path / "r", "--bank", "wmt24_en-de.bleu"),  # four unpriced models
        "run": run_adaptive(tmp_path / "o", "--bank", "wmt24_en-de.bleuu"),
    }
    for name, argv in cases.items():
        code = ("import sys; from lm_eval_adaptive.cli.main import main; rc = main(sys.argv[1:]); "
                "print(rc, 'litellm' in sys.modules, name == 'rank' and 'lm_eval.tasks' in sys.modules, file=sys.stderr)")
        code = f"name = {name!r}; " + code
        r = subprocess.run([sys.executable, "-c", code, *map(str, argv)], capture_output=True, text=True,
                           timeout=300, cwd=REPO, env={**__import__("os").environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
        last = r.stderr.strip().splitlines()[-1]
        assert last == "2 False False", (name, r.stderr[-2000:])


def test_rank_dry_run_honours_and_names_the_default_price(tmp_path, capsys):
    """--price default=IN,OUT in a dry run: the forecast is made at it, and the models it priced are named."""
    from lm_eval_adaptive.data.data_root import data_root
    from lm_eval_adaptive.errors import InputError

    try:
        data_root()
    except InputError as e:
        pytest.skip(f"real data not available: {e}")
    argv = rank(tmp_path / "dry", "--bank", "wmt24_en-de.bleu", "--price", "default=2,6", "openai/Aya23=1,3",
                "--dry-run")
    assert main(argv) == 0
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())  # (wrapped at 120 columns: not a terminal)
    out = " ".join(captured.out.split())
    # issue 30 item 7: the forecast is the report, on stdout; the notes on stderr; one readable sentence
    assert "cost forecast of rank" in out and "cost forecast" not in err and "forecast written to" in out
    assert "every typical figure, the total's and each row's, is the median of those runs" in out
    assert "the total most of" not in out
    assert ("priced by the default $2/$6 per M tokens (--price default), not a known price: openai/Gemini-1.5-Pro, "
            "openai/Llama3-70B, openai/Unbabel-Tower70B") in err
    (fc,) = (tmp_path / "dry").glob("cost_forecast*.json")
    text = fc.read_text()
    assert text.count('"source": "--price default"') == 3 and '"source": "--price"' in text


# ------------------------------------------------- run --adaptive: refused before the command line is imported
EARLY_RUN_CASES = {
    "misspelled bank": ["--bank", "wmt24_en-de.bleuu"],
    "metric the task lacks": ["--metric", "rouge_l"],
    "bank of another task": ["--bank", "wmt24_en-es.bleu"],
    "unpriced model": ["--bank", "wmt24_en-de.bleu", "--model_args", "model=openai/Aya23"],
    "bad --price": ["--bank", "wmt24_en-de.bleu", "--price", "bad"],
    "--plot with --dry-run": ["--bank", "wmt24_en-de.bleuu", "--dry-run", "--plot", "x.png"],
}
HEAVY = ("lm_eval.tasks", "datasets", "litellm", "scipy.stats", "lm_eval_adaptive.cli.main",
         "lm_eval_adaptive.cli.rank")


def entry_in_subprocess(argv, tmp_path):
    """The console script's main in a fresh process: (exit status, its error line, heavy modules imported)."""
    import json
    import os
    import subprocess
    import sys

    code = ("import json, sys; from lm_eval_adaptive.cli.entry import main; rc = main(sys.argv[2:]); "
            "print(json.dumps([rc, [m for m in json.loads(sys.argv[1]) if m in sys.modules]]))")
    r = subprocess.run([sys.executable, "-c", code, json.dumps(HEAVY), *map(str, argv)], capture_output=True,
                       text=True, timeout=300, cwd=tmp_path, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    rc, heavy = json.loads(r.stdout.strip().splitlines()[-1])
    return rc, [ln for ln in r.stderr.splitlines() if ln.startswith("error: ")], heavy


def test_run_adaptive_refusals_come_before_the_command_line_and_the_task_index_are_imported(tmp_path, monkeypatch,
                                                                                             capsys):
    """Each early refusal of `run --adaptive` (through the console script) imports neither lm-eval's task index,
    datasets, litellm, scipy.stats nor the command line's modules, and says exactly what the full path (the harness's
    parser, then plan_adaptive_run's checks) says."""
    import lm_eval_adaptive.cli.main as cli_main

    monkeypatch.setattr(cli_main, "refuse_before_parsing", lambda argv: None)  # the full path alone
    for name, extra in EARLY_RUN_CASES.items():
        argv = run_adaptive(tmp_path / "out", *extra)
        rc, errors, heavy = entry_in_subprocess(argv, tmp_path)
        assert (rc, heavy, len(errors)) == (2, [], 1), (name, rc, heavy, errors)
        assert cli_main.main(argv) == 2, name
        assert capsys.readouterr().err.strip() == errors[0], name
    assert not (tmp_path / "out").exists()


def test_the_early_parser_leaves_to_the_full_path_what_it_cannot_read(tmp_path):
    """--help, a --config file, no --adaptive, no --model, an option it cannot parse: no early refusal (the
    full path decides), even with a misspelled bank; a good command line passes the early checks."""
    from lm_eval_adaptive.cli.run_early_checks import refuse_before_parsing

    bad = ["--bank", "wmt24_en-de.bleuu"]
    base = run_adaptive(tmp_path / "o", *bad)[1:]
    for argv in (base + ["--help"], base + ["--config", "c.yaml"], [a for a in base if a != "--adaptive"],
                 base[2:], base + ["--metric"]):
        assert refuse_before_parsing(argv) is None, argv
    assert refuse_before_parsing(run_adaptive(tmp_path / "o", "--bank", "wmt24_en-de.bleu")[1:]) is None
    with pytest.raises(Exception, match="did you mean wmt24_en-de.bleu"):
        refuse_before_parsing(base)


def test_the_console_script_makes_the_early_checks_once(tmp_path, monkeypatch):
    """The console script checks before it imports the command line, and tells it so: the command line does
    not check again (called on its own, it checks)."""
    import lm_eval_adaptive.cli.main as cli_main
    from lm_eval_adaptive.cli.entry import main as entry_main

    calls = []

    class Parsed(Exception):
        pass

    def no_parser(**kwargs):
        raise Parsed

    monkeypatch.setattr(cli_main, "refuse_before_parsing", lambda argv: calls.append(argv))
    monkeypatch.setattr(cli_main, "build_parser", no_parser)  # stop where the full path would parse
    argv = run_adaptive(tmp_path / "o", "--bank", "wmt24_en-de.bleu")
    with pytest.raises(Parsed):
        entry_main(argv)
    assert calls == []
    with pytest.raises(Parsed):
        cli_main.main(argv)
    assert calls == [argv[1:]]

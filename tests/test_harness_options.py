"""The harness's command-line conventions on rank and refresh: --model/--model_args, several
--tasks (a bank and a run folder each), --output_path; parsed and refused without any call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lm_eval_adaptive.cli.harness_options import model_specs, task_list
from lm_eval_adaptive.cli.leaderboard import refresh_settings
from lm_eval_adaptive.cli.main import build_parser, main
from lm_eval_adaptive.cli.rank import rank_settings
from lm_eval_adaptive.errors import InputError


def parse(*argv):
    return build_parser().parse_args(list(argv))


def test_model_args_pairing():
    # one --model: the type of every --model_args; each --model_args is one model
    assert model_specs(None, ["litellm"], [["model=a"], ["model=b", "temperature=0"]]) == [
        "litellm:model=a", "litellm:model=b,temperature=0"]
    # one --model per --model_args, in order; added to --models
    assert model_specs(["x=hf:pretrained=gpt2"], ["litellm", "local-chat-completions"],
                       [["model=a,timeout=5"], ["model=b,base_url=http://h:1/v1/chat/completions"]]) == [
        "x=hf:pretrained=gpt2", "litellm:model=a,timeout=5",
        "local-chat-completions:model=b,base_url=http://h:1/v1/chat/completions"]
    assert model_specs(["litellm:model=a"], None, None) == ["litellm:model=a"]
    for types, groups, says in ((["litellm"], None, "needs --model_args"),
                                (None, [["model=a"]], "needs --model TYPE"),
                                (["a", "b"], [["model=x"], ["model=y"], ["model=z"]], "2 --model and 3 --model_args"),
                                (["litellm"], [['{"model": "a"}']], "key=val pairs"),
                                (["litellm"], [[","]], "give the model's arguments")):
        with pytest.raises(InputError, match=says):
            model_specs(None, types, groups)


def test_device_and_batch_size_go_into_every_model_once():
    """Issue 30 item 2: rank's --device and --batch_size, as lm-eval run spells them, are every model's own
    device= and batch_size= (the same value given twice is one; two values are refused)."""
    args = parse("rank", "--models", "hf:pretrained=a", "hf:pretrained=b,device=cpu", "--device", "cpu",
                 "--batch_size", "8", "--tasks", "wmt24_en-de", "--bank", "wmt24_en-de.bleu", "--output", "o")
    (s,), _ = rank_settings(args)
    assert s.models == ["hf:pretrained=a,device=cpu,batch_size=8", "hf:pretrained=b,device=cpu,batch_size=8"]
    assert model_specs(["hf:pretrained=a"], None, None) == ["hf:pretrained=a"]  # nothing given, nothing added
    with pytest.raises(InputError, match=r"--device cuda and device=cpu in --models 'hf:pretrained=b,device=cpu' "
                                         r"disagree; give one"):
        model_specs(["hf:pretrained=b,device=cpu"], None, None, device="cuda")


def test_task_lists():
    assert task_list(["a,b", "c", " d , "]) == ["a", "b", "c", "d"]
    with pytest.raises(InputError, match="a named twice"):
        task_list(["a", "b,a"])


def test_rank_takes_the_harness_spelling_and_several_tasks(tmp_path):
    """The harness's spellings (--model/--model_args, --tasks a,b c, --output_path) give one run per task;
    the banks are shipped ones, so every check before loading passes (banks are read, prices resolved)."""
    tasks = ("wmt24_en-de", "wmt24_en-es", "wmt24_en-ja")
    args = parse("rank", "--model", "litellm", "--model_args", "model=openai/A", "temperature=0",
                 "--model_args", "model=openai/B", "--tasks", f"{tasks[0]},{tasks[1]}", tasks[2],
                 "--bank", f"{tasks[0]}={tasks[0]}.bleu", f"{tasks[1]}={tasks[1]}.bleu",
                 "--bank", f"{tasks[2]}={tasks[2]}.bleu", "--price", "default=1,3",
                 "--output_path", str(tmp_path / "out"))
    runs, several = rank_settings(args)
    assert several and [a.tasks for a in runs] == list(tasks)
    assert [a.bank for a in runs] == [f"{t}.bleu" for t in tasks]
    assert [Path(a.output) for a in runs] == [tmp_path / "out" / t for t in tasks]
    assert runs[0].models == ["litellm:model=openai/A,temperature=0", "litellm:model=openai/B"]
    one, several = rank_settings(parse("rank", "--models", "litellm:model=a", "litellm:model=b", "--tasks", tasks[0],
                                       "--bank", f"{tasks[0]}.bleu", "--price", "default=1,3",
                                       "--output", str(tmp_path / "d")))
    assert not several and (one[0].tasks, one[0].bank, one[0].output) == (tasks[0], f"{tasks[0]}.bleu",
                                                                          str(tmp_path / "d"))
    assert not (tmp_path / "out").exists() and not (tmp_path / "d").exists()  # nothing written yet


@pytest.mark.parametrize("extra, says", [
    (["--tasks", "t1", "t2", "--bank", "b.json", "--output", "o"], "with several tasks write TASK=PATH"),
    # t2 has no bank: ranked bank-free (issue 31), so what is refused is t1's bank that is not there
    (["--tasks", "t1", "t2", "--bank", "t1=a.json", "--output", "o"], "--bank 'a.json': item bank file not found"),
    (["--tasks", "t1", "--bank", "t1=a.json", "t9=b.json", "--output", "o"], "not in --tasks: t9"),
    (["--tasks", "t1", "t2", "--bank", "t1=a.json", "t2=b.json"], "--output DIR is needed"),
    (["--tasks", "t1", "../t2", "--bank", "t1=a.json", "../t2=b.json", "--output", "o"], "cannot be one"),
    (["--tasks", "t1", "--bank", "a.json", "--output", "o", "--model_args", "model=c"], "needs --model TYPE"),
])
def test_rank_refuses_what_cannot_work_before_anything_is_written(tmp_path, capsys, extra, says):
    extra = [str(tmp_path / x) if x == "o" else x for x in extra]
    assert main(["rank", "--models", "litellm:model=a", "litellm:model=b", *extra]) == 2
    assert says in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def _board(path, task):
    path.write_text(json.dumps({"format": "lm-eval-adaptive/leaderboard", "version": 1, "task": task,
                                "metric": "bleu", "history": "h.csv", "entries": []}))
    return str(path)


def test_refresh_takes_one_leaderboard_per_task(tmp_path):
    a, b = _board(tmp_path / "a.json", "t1"), _board(tmp_path / "b.json", "t2")
    args = parse("refresh", "--leaderboard", a, b, "--tasks", "t2,t1", "--model", "litellm", "--model_args",
                 "model=openai/X", "--output_path", str(tmp_path / "out"), "--budget-usd", "1")
    runs = refresh_settings(args)
    assert [r.leaderboard for r in runs] == [b, a]  # in --tasks order
    assert [Path(r.output) for r in runs] == [tmp_path / "out" / "t2", tmp_path / "out" / "t1"]
    assert runs[0].add == ["litellm:model=openai/X"] and runs[0].budget_usd == 1
    (one,) = refresh_settings(parse("refresh", "--leaderboard", a, "--add", "litellm:model=x", "--output", "d"))
    assert (one.leaderboard, one.output) == (a, "d")
    with pytest.raises(InputError, match="each task needs its own leaderboard"):
        refresh_settings(parse("refresh", "--leaderboard", a, b, "--tasks", "t1,t3"))
    with pytest.raises(InputError, match="each task needs its own leaderboard"):
        refresh_settings(parse("refresh", "--leaderboard", a, "--tasks", "t2"))
    # two boards of one task are one refresh of several boards (one per metric; two of one metric are
    # refused when the boards are read: tests/test_refresh_multi_metric_e2e.py)
    c = _board(tmp_path / "c.json", "t1")
    (both,) = refresh_settings(parse("refresh", "--leaderboard", a, c, "--add", "litellm:model=x"))
    assert both.leaderboard == [a, c]

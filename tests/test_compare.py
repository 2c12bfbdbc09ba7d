"""`compare`: single-model `run --adaptive` results of one task and bank, which pairs are ordered (issue 23
item 7). Three real runs of WMT24 en-de systems through the replay endpoint (the real harness, litellm and
HTTP) with the shipped BLEU bank: Mistral-Large and Gemini-1.5-Pro (full-run BLEU 0.3234 and 0.3238: a close
pair) and CycleL (0.0865: clearly apart from both). Their results files carry each administered document
(item id, raw score, random slot) and the price policy; `compare` orders the far pairs on the bank's scale,
the metric's scale and the shared documents, and points the close pair to `rank` with a command line that
`rank` takes as it is."""

from __future__ import annotations

import glob
import json
import shlex
from pathlib import Path

import numpy as np
import pytest

from lm_eval_adaptive.cli.main import main

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
CLOSE = ("Mistral-Large", "Gemini-1.5-Pro")
FAR = "CycleL"


@pytest.fixture(scope="module")
def runs(replay_server, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    files = {}
    for s in (*CLOSE, FAR):
        assert main(["run", "--model", "litellm", "--model_args", f"model=openai/{s}", "--tasks", "wmt24_en-de",
                     "--include_path", str(REPO / "task_configs"), "--apply_chat_template", "--output_path", str(out),
                     "--adaptive", "--bank", "wmt24_en-de.bleu", "--price", "default=1,3", "--no-progress"]) == 0
        (files[s],) = glob.glob(str(out / f"openai__{s}" / "results_*.json"))
    return files


@pytest.fixture(scope="module")
def truth():
    from lm_eval_adaptive.data.named_tables import load_named

    t = load_named("wmt24/en-de/bleu")
    return {f"openai/{m}": float(v) for m, v in zip(t.models, np.nanmean(t.mean_matrix(), axis=1))}


def block(path):
    return json.loads(Path(path).read_text())["adaptive"]["wmt24_en-de"]


def test_a_results_file_records_each_administered_document_and_the_price_policy(runs):
    for s, f in runs.items():
        a = block(f)
        adm = a["administered"]
        assert len(adm) == a["items"] and len({x["item_id"] for x in adm}) == len(adm)
        assert all(set(x) == {"item_id", "doc_id", "raw", "random"} for x in adm)
        assert all(0.0 <= x["raw"] <= 1.0 for x in adm)
        assert abs(sum(x["random"] for x in adm) - len(adm) / 2) <= 1  # every second slot is random
        assert np.mean([x["raw"] for x in adm]) == pytest.approx(a["observed_mean"])
        assert a["bank"] == "wmt24_en-de.bleu" and a["task_args"]["apply_chat_template"] is True
        # Mistral-Large has a price (litellm); the others were priced by --price default, and it says so
        assert a["priced_by_default"] == ([] if s == "Mistral-Large" else [f"openai/{s}"])
        assert a["price"]["source"] == ("--price default" if s != "Mistral-Large" else a["price"]["source"])


def test_compare_orders_the_far_pairs_and_sends_the_close_pair_to_rank(runs, truth, tmp_path, capsys):
    js = tmp_path / "compare.json"
    capsys.readouterr()
    assert main(["compare", *runs.values(), "--json", str(js)]) == 0
    out = capsys.readouterr().out
    c = json.loads(js.read_text())
    assert c["task"] == "wmt24_en-de" and c["metric"] == "bleu" and c["bank"] == "wmt24_en-de.bleu"
    for r in c["runs"]:  # the metric-scale interval of each run holds its full run's BLEU
        e = r["metric_estimate"]
        assert e["lower"] <= truth[r["model"]] <= e["upper"], (r["model"], e, truth[r["model"]])
    pairs = {frozenset((p["a"], p["b"])): p for p in c["pairs"]}
    assert len(pairs) == 3
    for s in CLOSE:
        p = pairs[frozenset((f"openai/{s}", f"openai/{FAR}"))]
        assert p["ordered"] and p["theta"]["ordered"] and p["metric"]["ordered"] and p["shared"]["ordered"]
        assert p["a"] == f"openai/{s}" and p["metric"]["difference"] > 0 and p["rank_command"] is None
        assert p["shared"]["documents"] >= 2 and p["shared"]["lower"] > 0
    close = pairs[frozenset(f"openai/{s}" for s in CLOSE)]
    assert not close["ordered"] and not close["metric"]["ordered"] and not close["shared"]["ordered"]
    assert close["metric"]["items_to_settle"] > 0 and close["metric"]["cost_to_settle_usd"] > 0
    flat = " ".join(out.split())  # (prose wraps at the output's width)
    assert "a statement about these documents, not the task" in flat
    assert flat.count("to order them, rank the two together") == 1
    # the printed command (broken into shell lines) is the JSON's, and rank takes it as it is
    cmd = close["rank_command"]
    argv = shlex.split(cmd)
    assert argv[:2] == ["lm-eval-adaptive", "rank"] and "--bank" in argv and "wmt24_en-de.bleu" in argv
    lines = out.splitlines()
    k = next(i for i, x in enumerate(lines) if x.strip().startswith("lm-eval-adaptive rank "))
    printed = [lines[k]]
    while printed[-1].endswith("\\"):
        k += 1
        printed.append(lines[k])
    assert shlex.split("\n".join(printed).replace("\\\n", " ")) == argv
    assert all(len(line) <= 120 for line in out.splitlines())
    argv[argv.index("--output") + 1] = str(tmp_path / "rank")
    capsys.readouterr()
    assert main(argv[1:] + ["--dry-run", "--no-progress"]) == 0  # its settings pass every check of rank


def _copy(path, dst, change):
    d = json.loads(Path(path).read_text())
    change(d)
    dst.write_text(json.dumps(d))
    return str(dst)


def test_compare_refuses_runs_of_another_task_or_bank_in_one_line(runs, tmp_path, capsys):
    a, b = runs["Mistral-Large"], runs[FAR]

    def other_task(d):
        d["adaptive"] = {"wmt24_en-es": d["adaptive"].pop("wmt24_en-de")}

    def other_bank(d):
        d["adaptive"]["wmt24_en-de"]["bank_id"] = "sha256:0000000000000000"

    assert main(["compare", a, _copy(b, tmp_path / "es.json", other_task)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "different tasks" in err and "wmt24_en-es" in err and "wmt24_en-de" in err
    assert main(["compare", a, _copy(b, tmp_path / "bank.json", other_bank)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "different banks" in err and "sha256:0000000000000000" in err
    assert main(["compare", a]) == 2
    assert "two or more results files" in capsys.readouterr().err
    assert main(["compare", a, str(REPO / "README.md")]) == 2
    assert capsys.readouterr().err.startswith("error: ")

"""The edge of `run --adaptive`, `rank` and `refresh`, end to end: the real harness, the real litellm
client, real HTTP to the replay endpoint.

Each test is one defect that was fixed: answered calls whose scoring failed were not charged;
`rank` ran (and paid) on a bank of another metric; `run` read line-number ids as document
positions; a hung provider could not be stopped; every model failing exited 0 and claimed a
settled ranking; LLM-judge calls were not charged; bad retry settings left a run folder behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.data.price_map import litellm_price
from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.irt.response_model import ContinuousResponseModel
from lm_eval_adaptive.harness.metrics import clear_judge_cache
from lm_eval_adaptive.live.journal import Journal

REPO = Path(__file__).resolve().parents[1]
WMT = "wmt24_en-de"
JUDGE = "openai/gpt-4o-mini"  # priced by litellm's map (as gpt-4o-mini); answered by the replay endpoint


@pytest.fixture(scope="module")
def server(replay_server):
    return replay_server


def make_bank(path, *, ids=range(60), task=WMT, metric="bleu"):
    """A bank whose ids are harness doc ids."""
    ids = [str(i) for i in ids]
    ItemBank(item_ids=np.array(ids, dtype=object), b=np.random.default_rng(0).normal(0, 1, len(ids)),
             model=ContinuousResponseModel(k=0.1), scaling="global", lo=0.0, hi=1.0,
             input_tokens=100.0, output_tokens=100.0, task=task, metric=metric).save(path)
    return str(path)


def rank_args(out, systems, bank, *extra, task=WMT):
    return ["rank", "--models", *[f"{s}=litellm:model=openai/{s}" for s in systems], "--tasks", task,
            "--bank", str(bank), "--include_path", str(REPO / "task_configs"), "--apply_chat_template",
            "--output", str(out), "--no-progress", "--backoff", "0.05",
            "--price", *[f"{s}=1,3" for s in systems], *extra]


def run_args(system, out, *extra, task=WMT):
    return ["run", "--model", "litellm", "--model_args", f"model=openai/{system}", "--tasks", task,
            "--include_path", str(REPO / "task_configs"), "--apply_chat_template", "--log_samples",
            "--output_path", str(out), "--adaptive", *extra]


def files_under(d):
    return sorted(p.name for p in Path(d).rglob("*") if p.is_file()) if Path(d).exists() else []


# ------------------------------------------------------------------ 2. the bank's metric
def test_rank_and_refresh_refuse_a_bank_of_another_metric_before_any_call(server, tmp_path, capsys):
    chrf = tmp_path / "chrf.json"
    assert main(["calibrate", "wmt24/en-de/chrf", "--task", WMT, "--metric", "chrf", "--out", str(chrf)]) == 0
    server.reset_stats()
    out = tmp_path / "rank"
    args = rank_args(out, ["GPT-4", "Aya23"], chrf, "--metric", "bleu", "--item-field", "id")
    assert main(args) == 2
    assert "calibrated for metric 'chrf', not 'bleu'" in capsys.readouterr().err
    # and a metric the task does not give, whatever the bank says
    rouge = make_bank(tmp_path / "rouge.json", metric="rouge_l")
    assert main(rank_args(tmp_path / "rank2", ["GPT-4", "Aya23"], rouge, "--item-field", "doc_id")) == 2
    assert "has no metric 'rouge_l'" in capsys.readouterr().err
    assert server.stats()["requests"] == 0 and not out.exists() and not (tmp_path / "rank2").exists()
    # refresh: a chrF request against a BLEU leaderboard
    lb = tmp_path / "lb.json"
    assert main(["leaderboard", "--history", "wmt24/en-de/bleu", "--task", WMT, "--metric", "bleu", "--item-field",
                 "id", "--models", "AIST-AIRC", "Aya23", "CUNI-NL", "--out", str(lb)]) == 0
    before = lb.read_bytes()
    assert main(["refresh", "--leaderboard", str(lb), "--add", "GPT-4=litellm:model=openai/GPT-4", "--metric", "chrf",
                 "--budget-usd", "0.1", "--include_path", str(REPO / "task_configs"), "--apply_chat_template",
                 "--no-progress"]) == 2
    assert "calibrated for metric 'bleu', not 'chrf'" in capsys.readouterr().err
    assert lb.read_bytes() == before and server.stats()["requests"] == 0


# -------------------------------------------------------------- 3. which document an id names
def test_run_refuses_line_number_ids_read_as_positions_and_takes_item_field(server, tmp_path, capsys):
    import pandas as pd

    table = tmp_path / "bleu.csv"
    assert main(["export-table", "wmt24/en-de/bleu", "--out", str(table)]) == 0
    # without the last line (997) every line number is also a valid position: the silent case
    t = pd.read_csv(table)
    t[t["item"].astype(str) != "997"].to_csv(table, index=False)
    # a table that does not say which document field its ids are (export-table records it beside the file:
    # tests/test_export_item_field.py; a table from elsewhere has no such record)
    from lm_eval_adaptive.data.tables import item_field_file

    item_field_file(table).unlink()
    bank = tmp_path / "bank.json"
    assert main(["calibrate", str(table), "--task", WMT, "--metric", "bleu", "--exclude-models", "GPT-4",
                 "--out", str(bank)]) == 0
    capsys.readouterr()
    server.reset_stats()
    out = tmp_path / "out"
    assert main(run_args("GPT-4", out, "--bank", str(bank), "--min-items", "3", "--max-items", "3")) == 2
    err = capsys.readouterr().err
    assert "ambiguous" in err and "--item-field id" in err, err  # line numbers: the `id` field, not positions
    assert server.stats()["requests"] == 0 and files_under(out) == []
    # with the field named, each document asked is the one the bank item names
    assert main(run_args("GPT-4", out, "--bank", str(bank), "--item-field", "id", "--min-items", "3",
                         "--max-items", "3")) == 0
    (samples,) = out.rglob(f"samples_{WMT}_*.jsonl")
    rows = [json.loads(x) for x in samples.read_text().splitlines()]
    assert len(rows) == 3 and all(r["doc"]["id"] == r["adaptive"]["item_id"] for r in rows)
    (res,) = out.rglob("results_*.json")
    assert json.loads(res.read_text())["adaptive"][WMT]["item_field"] == "id"


# ------------------------------------------------------------ 4. a hung provider; 5. exit status
def test_a_hung_call_times_out_is_retried_and_a_run_that_cannot_rank_exits_1(server, tmp_path, capsys):
    bank = make_bank(tmp_path / "bank.json")
    out = tmp_path / "out"
    server.reset_stats()
    server.latency = 3.0
    t0 = time.monotonic()
    try:
        rc = main(rank_args(out, ["GPT-4", "Aya23"], bank, "--item-field", "doc_id", "--timeout", "0.5",
                            "--max-attempts", "2", "--backoff", "0", "--max-failures", "1"))
    finally:
        server.latency = 0.0
    took = time.monotonic() - t0
    err = "".join(capsys.readouterr())  # the report (stdout) and the plan (stderr)
    assert rc == 1, err
    assert "settled" not in err and "no ranking" in err and "failed" in err
    failures = list(Journal.open(out, writable=False).records("failure"))
    assert len(failures) == 2 and all(f["attempts"] == 2 and "Timeout" in f["error"] for f in failures)
    report = json.loads((out / "ranking.json").read_text())
    assert report["stopped_because"] == "failed" and not report["ranked"] and report["ranking"] == []
    assert server.stats()["requests"] == 4  # two attempts per model, each abandoned after 0.5 s
    assert took < 30


def test_rank_and_refresh_exit_1_when_every_model_fails(server, tmp_path, capsys):
    bank = make_bank(tmp_path / "bank.json")
    out = tmp_path / "out"
    assert main(rank_args(out, ["NoSuchA", "NoSuchB"], bank, "--item-field", "doc_id")) == 1
    err = "".join(capsys.readouterr())  # the report (stdout) and the plan (stderr)
    assert "settled" not in err and "NoSuchA" in err and "NoSuchB" in err and "no ranking" in err
    assert json.loads((out / "ranking.json").read_text())["stopped_because"] == "failed"
    lb = tmp_path / "lb.json"
    assert main(["leaderboard", "--history", "wmt24/en-de/bleu", "--task", WMT, "--metric", "bleu", "--item-field",
                 "id", "--models", "AIST-AIRC", "Aya23", "CUNI-NL", "--out", str(lb)]) == 0
    before = lb.read_bytes()
    assert main(["refresh", "--leaderboard", str(lb), "--add", "Nope=litellm:model=openai/NoSuchSystem",
                 "--price", "Nope=1,1", "--budget-usd", "0.1", "--include_path", str(REPO / "task_configs"),
                 "--apply_chat_template", "--no-progress", "--backoff", "0"]) == 1
    err = "".join(capsys.readouterr())
    assert "no new model placed" in err and "Nope" in err and "stopped because: settled" not in err
    assert lb.read_bytes() == before


def _subprocess(args):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-m", "lm_eval_adaptive.cli.main", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=str(REPO))


def test_a_second_ctrl_c_aborts_at_once_while_a_call_hangs(server, tmp_path):
    bank = make_bank(tmp_path / "bank.json")
    out = tmp_path / "out"
    server.latency = 120.0  # a provider that hangs
    try:
        proc = _subprocess(rank_args(out, ["GPT-4", "Aya23"], bank, "--item-field", "doc_id"))
        journal = out / "journal.jsonl"
        t0 = time.monotonic()
        while not (journal.exists() and journal.read_bytes().count(b'"type":"request"') >= 2):
            assert proc.poll() is None and time.monotonic() - t0 < 120, proc.stdout.read().decode()[-2000:]
            time.sleep(0.2)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)  # first: finish the calls in flight
        time.sleep(2)
        assert proc.poll() is None  # waiting for the hung calls, as documented
        proc.send_signal(signal.SIGINT)  # second: abort now
        t1 = time.monotonic()
        proc.wait(timeout=60)
        aborted_in = time.monotonic() - t1
    finally:
        server.latency = 0.0
        if proc.poll() is None:
            proc.kill()
    # it did not wait for the hung calls (120 s): the bound leaves room for a loaded machine (seen: 10.5 s
    # with the suite and a benchmark beside it)
    assert proc.returncode == 130 and aborted_in < 30, (proc.returncode, aborted_in)
    recs = list(Journal.open(out, writable=False).records())  # the journal is still valid
    assert sum(r["type"] == "request" for r in recs) == 2 and not any(r["type"] == "score" for r in recs)


def test_run_adaptive_gives_up_on_a_hung_call(server, tmp_path, capsys):
    bank = make_bank(tmp_path / "bank.json")
    server.latency = 3.0
    t0 = time.monotonic()
    try:
        rc = main(run_args("GPT-4", tmp_path / "out", "--bank", bank, "--item-field", "doc_id", "--min-items", "2",
                           "--max-items", "2", "--timeout", "0.5", "--model_args", "model=openai/GPT-4,max_retries=1"))
    finally:
        server.latency = 0.0
    assert rc == 1 and "Timeout" in capsys.readouterr().err
    assert time.monotonic() - t0 < 60


# --------------------------------------------------------------------- 8. bad retry settings
@pytest.mark.parametrize("bad", [["--max-attempts", "0"], ["--backoff", "-1"], ["--timeout", "0"]])
def test_bad_live_settings_are_one_argparse_error_and_leave_nothing(tmp_path, capsys, bad):
    bank = make_bank(tmp_path / "bank.json")
    for argv in (rank_args(tmp_path / "rank", ["A", "B"], bank, *bad),
                 ["refresh", "--leaderboard", str(tmp_path / "lb.json"), "--add", "litellm:model=x",
                  "--budget-usd", "1", "--output", str(tmp_path / "refresh"), *bad]):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        err = capsys.readouterr().err
        assert exit_.value.code == 2
        assert [x for x in err.splitlines() if "error:" in x] == [
            next(x for x in err.splitlines() if f"argument {bad[0]}: must be" in x)]
    assert not (tmp_path / "rank").exists() and not (tmp_path / "refresh").exists()


# --------------------------------------------- 1. answered calls that fail to score; 6. the judge
ALPACA = "alpaca_eval"
JUDGED = ["vicuna-13b", "alpaca-7b"]  # models with recorded judge preferences
UNJUDGED = "zephyr-7b-beta"  # answered by the endpoint, but no judge record: its judge requests get 404


def judge_metadata(server):
    return ["--metadata", json.dumps({"judge_model": JUDGE, "judge_api_base": server.url})]


def usd(usage, inp, out):
    return (usage["prompt_tokens"] * inp + usage["completion_tokens"] * out) / 1e6


def test_rank_charges_judge_calls_and_answered_calls_whose_scoring_failed(server, tmp_path, capsys):
    clear_judge_cache()
    bank = make_bank(tmp_path / "bank.json", task=ALPACA, metric="judge")
    out = tmp_path / "out"
    server.reset_stats()
    args = rank_args(out, [*JUDGED, UNJUDGED], bank, *judge_metadata(server), "--min-items", "3",
                     "--max-items", "6", "--budget-usd", "2", task=ALPACA)
    assert main(args) == 3  # the others ranked, the unjudged model dropped (its calls kept failing)
    err = "".join(capsys.readouterr())  # the report (stdout) and the plan (stderr)
    r = json.loads((out / "ranking.json").read_text())
    j = Journal.open(out, writable=False)
    jp = litellm_price("gpt-4o-mini")
    # the unjudged model: 3 answers paid for (not retried: a 404 from the judge), then dropped
    (f,) = r["failed"]
    assert f["model"] == UNJUDGED and "NotFound" in f["error"]
    fails = [x for x in j.records("failure") if x["model"] == UNJUDGED]
    assert len(fails) == 3 and server.stats()["per_model"][UNJUDGED] == 3
    for x in fails:
        (u,) = x["usage"]
        assert x["cost_usd"] == pytest.approx(usd(u, 1, 3)) and x["cost_usd"] > 0
    assert f["cost_usd"] > 0 and f["cost_usd"] == pytest.approx(sum(x["cost_usd"] for x in fails))  # was $0.00
    # every judged item: the model's call at its price + the judge's call at the judge's litellm price
    scores = j.scores()
    assert scores and server.stats()["judge"] == len(scores)
    for s in scores:
        (u,) = s["usage"]
        (ju,) = s["judge_usage"]
        assert ju["model"] == JUDGE
        judge = ju["usage"]["prompt_tokens"] * jp.input_per_token + ju["usage"]["completion_tokens"] * \
            jp.output_per_token
        assert s["judge_cost_usd"] == pytest.approx(judge) and judge > 0
        assert s["cost_usd"] == pytest.approx(usd(u, 1, 3) + judge)
    # the ledger, the report and the models' spend all hold it
    assert r["total_cost_usd"] == pytest.approx(sum(x["cost_usd"] for x in j.records() if x.get("cost_usd")))
    assert r["judge_cost_usd"] == pytest.approx(sum(s["judge_cost_usd"] for s in scores))
    for e in r["ranking"]:
        mine = [s for s in scores if s["model"] == e["model"]]
        assert e["cost_usd"] == pytest.approx(sum(s["cost_usd"] for s in mine))
        assert e["judge_cost_usd"] == pytest.approx(sum(s["judge_cost_usd"] for s in mine))
    assert r["ledger"]["overshoot_usd"] == 0  # the reservations held the judge's allowance
    assert r["judge_prices"][JUDGE]["source"] == "litellm:gpt-4o-mini"
    assert "judge" in err


def test_run_adaptive_charges_the_judge(server, tmp_path):
    clear_judge_cache()
    bank = make_bank(tmp_path / "bank.json", task=ALPACA, metric="judge")
    out = tmp_path / "out"
    assert main(run_args(JUDGED[0], out, "--bank", bank, "--min-items", "3", "--max-items", "3", "--price", "1,3",
                         *judge_metadata(server), task=ALPACA)) == 0
    (res,) = out.rglob("results_*.json")
    a = json.loads(res.read_text())["adaptive"][ALPACA]
    jp = litellm_price("gpt-4o-mini")
    judge = a["judge"]
    assert judge["calls"] == 3 and judge["unpriced_calls"] == 0
    assert a["judge_cost_usd"] > 0 and a["judge_cost_usd"] == pytest.approx(
        judge["prompt_tokens"] * jp.input_per_token + judge["completion_tokens"] * jp.output_per_token)
    assert a["cost_usd"] == pytest.approx(usd(a["usage"], 1, 3) + a["judge_cost_usd"])
    assert judge["prices"][JUDGE]["source"] == "litellm:gpt-4o-mini"


def test_a_task_declares_its_judge_when_loaded_so_it_is_priced_before_any_call(server):
    from lm_eval_adaptive.harness.scorer import HarnessTask

    t = HarnessTask(ALPACA, include_path=str(REPO / "task_configs"),
                    metadata={"judge_model": JUDGE, "judge_api_base": server.url})
    t.load()
    assert t.judges == [JUDGE]


def test_timeout_comes_from_the_flag_else_the_model_arguments_else_the_default():
    from lm_eval_adaptive.harness.scorer import DEFAULT_TIMEOUT_S, resolve_timeout

    assert resolve_timeout(3, "model=x,timeout=7") == 3.0
    assert resolve_timeout(None, "model=x,timeout=7") == 7.0
    assert resolve_timeout(None, {"model": "x"}) == resolve_timeout(None, "") == DEFAULT_TIMEOUT_S == 120.0

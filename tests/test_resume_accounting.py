"""A resumed run is exact about money (issue 28, items 7 and 9): it charges the prices it started with,
a changed price map is reported and refused unless stated (``--new-prices``), and after kill -9 at
concurrency 4 with faults its counts (``calls.attempts``, the ledger's settled charges) are the provider's (to
within the calls in flight at the kill, each counted as sent: it was journaled, and may have been).
Real CLI, harness, litellm and HTTP against the replay endpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_billing import _server, make_bank, openai_env  # noqa: F401 - a fixture

from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.data import price_map
from lm_eval_adaptive.data.prices import Price
from lm_eval_adaptive.live.journal import Journal

REPO = Path(__file__).resolve().parents[1]
TASK = "wmt24_en-de"
MODELS = ["GPT-4=litellm:model=openai/GPT-4", "Aya23=litellm:model=openai/Aya23"]  # GPT-4: litellm's gpt-4 price


def rank_args(bank, out, url, *extra):
    os.environ["OPENAI_API_BASE"] = url
    return ["rank", "--models", *MODELS, "--price", "Aya23=1,3", "--tasks", TASK, "--bank", str(bank),
            "--include_path", str(REPO / "task_configs"), "--apply_chat_template", "--min-items", "4",
            "--no-progress", "--backoff", "0", "--output", str(out), *extra]


def test_a_changed_price_map_on_resume_is_refused_unless_stated(tmp_path, openai_env, monkeypatch, capsys):
    bank = make_bank(tmp_path / "bank.json")
    out = tmp_path / "out"
    with _server() as srv:
        assert main(rank_args(bank, out, srv.url, "--budget-usd", "0.1")) == 0
        first = json.loads((out / "ranking.json").read_text())
        header = Journal.open(out, writable=False).header
        assert header["prices"]["models"]["GPT-4"]["source"] == "litellm:gpt-4"
        before = {p.name: p.read_bytes() for p in out.iterdir()}
        # litellm's map now says twice the price (as a litellm upgrade may)
        orig = price_map.litellm_price
        monkeypatch.setattr(price_map, "litellm_price",
                            lambda k: Price(6e-5, 1.2e-4, f"litellm:{k}") if k == "gpt-4" else orig(k))
        srv.reset_stats()
        capsys.readouterr()
        rc = main(["rank", "--resume", str(out), "--no-progress", "--budget-usd", "0.2"])
        err = capsys.readouterr().err
        errors = [x for x in err.splitlines() if x.startswith("error:")]
        assert rc == 2 and len(errors) == 1 and "Traceback" not in err, err
        assert "prices changed" in errors[0] and "GPT-4" in errors[0] and "--new-prices" in errors[0]
        assert "$30/$60" in errors[0] and "$60/$120" in errors[0] and "Aya23" not in errors[0]
        assert srv.stats()["requests"] == 0 and {p.name: p.read_bytes() for p in out.iterdir()} == before
        # stated: the run goes on at the new prices, journaled, and its report states them
        assert main(["rank", "--resume", str(out), "--no-progress", "--budget-usd", "0.2", "--new-prices"]) == 0
    err = capsys.readouterr().err
    assert "prices changed (--new-prices; journaled): GPT-4" in err
    j = Journal.open(out, writable=False)
    changes = list(j.records("prices"))
    assert len(changes) == 1 and changes[0]["prices"]["models"]["GPT-4"]["input_per_mtok"] == pytest.approx(60)
    r = json.loads((out / "ranking.json").read_text())
    row = next(x for x in r["ranking"] if x["model"] == "GPT-4")
    assert row["price"]["input_per_mtok"] == pytest.approx(60) and row["price"]["output_per_mtok"] == pytest.approx(120)
    assert r["total_cost_usd"] >= first["total_cost_usd"]


def _subprocess(args):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-m", "lm_eval_adaptive.cli.main", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=str(REPO))


def test_attempts_and_ledger_counts_are_exact_across_kill_and_resume(tmp_path, openai_env):
    bank = make_bank(tmp_path / "bank.json", ids=range(60))
    out = tmp_path / "out"
    with _server(fail_rate=0.3, latency=0.05, seed=1) as srv:
        proc = _subprocess(rank_args(bank, out, srv.url, "--concurrency", "4", "--min-items", "20",
                                     "--max-failures", "99", "--budget-usd", "0.05"))
        path = out / "journal.jsonl"
        t0 = time.monotonic()
        while not (path.exists() and path.read_bytes().count(b'"type":"score"') >= 12):
            assert proc.poll() is None and time.monotonic() - t0 < 180, proc.stdout.read().decode()[-2000:]
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        time.sleep(0.5)  # the calls in flight reach the endpoint
        j = Journal.open(out, writable=False)
        lost = {(x["model"], x["item_id"]) for x in j.records("request")} - \
            {(x["model"], x["item_id"]) for x in j.records() if x["type"] in ("score", "failure")}
        j.close()
        assert main(["rank", "--resume", str(out), "--no-progress"]) == 0
        st = srv.stats()
    r = json.loads((out / "ranking.json").read_text())
    assert lost, "the kill landed with no call in flight: nothing to check"
    assert len(r["calls"]["lost_in_flight"]) == len(lost)
    # every request the provider got is counted once; a call in flight at the kill was journaled before it was
    # sent, and is counted as sent (charged on doubt): the count is exact to within the calls lost in flight
    assert st["requests"] <= r["calls"]["attempts"] <= st["requests"] + len(lost)
    # every charge, of either process: each answer and each dropped connection (billed), once
    billed = st["served"] + st["failed_by_kind"]["drop"]
    assert billed - len(lost) <= r["ledger"]["n_settled"] <= billed + len(lost)
    assert r["calls"]["billed_failures"] >= st["failed_by_kind"]["drop"] - len(lost)

"""A charge for every call the provider may have billed (issue 19, item 1).

A provider bills a request it finished even when the client gave up on it (a read timeout)
or lost the connection while reading the answer. Checked: the classification
(:func:`may_have_been_billed`) on the errors the real clients raise against a real socket;
the live driver charges each such attempt its reservation before any retry, reserves every
retry apart, journals each charged attempt and counts it once at resume; and end to end,
with the real CLI, harness, litellm and the replay endpoint slower than ``--timeout`` (for the
model, and for an LLM judge), the calls the endpoint served never cost more than the cap and
the ledger's spend is never below what they cost.
"""

from __future__ import annotations

import json
import time
import os
import socket
from pathlib import Path

import numpy as np
import pytest
from conftest import make_sim_bank
from test_live import THETAS, Caller, make_live

from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.data.price_map import litellm_price
from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.irt.response_model import ContinuousResponseModel
from lm_eval_adaptive.harness.metrics import clear_judge_cache
from lm_eval_adaptive.harness.scorer import ItemScore
from lm_eval_adaptive.live.driver import RetryPolicy, may_have_been_billed
from lm_eval_adaptive.live.journal import Journal
from lm_eval_adaptive.replay.server import ReplayServer

REPO = Path(__file__).resolve().parents[1]
MSGS = [{"role": "user", "content": "hi"}]


def _server(**kw) -> ReplayServer:
    from lm_eval_adaptive.data.data_root import data_root
    from lm_eval_adaptive.errors import InputError

    try:
        data_root()
    except InputError as e:
        pytest.skip(f"real data not available: {e}")
    return ReplayServer(**kw)


def _settled_stats(srv, wait_s: float = 5.0) -> dict:
    """The server's counters once every request it received was answered: a call the client gave up
    on (a timeout) is still being served when the command returns."""
    deadline = time.monotonic() + wait_s
    st = srv.stats()
    while st["served"] < st["requests"] and time.monotonic() < deadline:
        time.sleep(0.05)
        st = srv.stats()
    return st


def _raised(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the error under test
        return e
    raise AssertionError("no error")


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# ------------------------------------------------------------------ the classification
def test_may_have_been_billed_on_the_errors_real_clients_raise():
    import litellm
    import requests

    def both(url):
        return [_raised(lambda: litellm.completion(model="openai/x", api_base=url, api_key="k", messages=MSGS,
                                                   timeout=0.15, max_retries=0, num_retries=0)),
                _raised(lambda: requests.post(url + "/chat/completions", json={"model": "x", "messages": MSGS},
                                              timeout=0.15).raise_for_status())]  # as the harness does

    with _server(latency=0.4) as slow, _server(fail_rate=1.0, fail_kinds=("drop",)) as drop, \
            _server(fail_rate=1.0, fail_kinds=("429", "500")) as status:
        timed_out, dropped, answered_with_error = both(slow.url), both(drop.url), both(status.url) + both(status.url)
        refused = both(f"http://127.0.0.1:{_closed_port()}/v1")
        assert slow.stats()["requests"] == 2 and drop.stats()["requests"] == 2  # no SDK retry
    # sent, never answered: the provider may have finished (and billed) it
    assert all(may_have_been_billed(e) for e in timed_out + dropped), timed_out + dropped
    # never sent, or answered with an error status: not billed
    assert not any(may_have_been_billed(e) for e in refused + answered_with_error), refused + answered_with_error
    assert {getattr(e, "status_code", None) for e in answered_with_error[::2]} <= {429, 500}
    assert not may_have_been_billed(ValueError("bad prompt"))
    # the model answered, then the judge's call timed out: classified by the cause

    class Answered(Exception):
        def __init__(self, cause):
            super().__init__(str(cause))
            self.cause, self.paid = cause, ItemScore(raw=float("nan"))

    assert may_have_been_billed(Answered(timed_out[0])) and not may_have_been_billed(Answered(refused[0]))


# ------------------------------------------------------------------ the driver
UPPER = 100 * 1e-6 + 60 * 3e-6  # make_live's upper cost of every call


def test_timed_out_attempts_are_charged_before_a_retry_and_counted_once_at_resume(tmp_path):
    bank = make_sim_bank(n_items=300, seed=3)
    # every item times out twice, then is answered
    fail = lambda item, attempt: TimeoutError("timed out") if attempt <= 2 else None  # noqa: E731
    callers = {m: Caller(bank, t, k, fail=fail) for k, (m, t) in enumerate(THETAS.items())}
    cap = 40 * UPPER
    j = Journal.create(tmp_path, {"run": "t"})
    live, _ = make_live(bank, budget=cap, journal=j, callers=callers, retry=RetryPolicy(max_attempts=3, base_s=0))
    live.run()
    sent = sum(sum(c.calls.values()) for c in callers.values())
    snap = live.ledger.snapshot()
    assert live.billed_failures >= 2 * len(j.scores()) > 0
    assert live.billed_failures_usd == pytest.approx(live.billed_failures * UPPER)
    # every call sent was reserved first and is charged (a timeout its reservation): within the cap
    assert sent == live.attempts and snap["spent"] <= cap and snap["spent"] > cap - UPPER
    assert snap["spent"] == pytest.approx(live.billed_failures * UPPER + sum(s["cost_usd"] for s in j.scores()))
    attempts = list(j.records("attempt"))
    assert live.retries == len(attempts) and snap["reserved"] == 0  # every retry journaled
    assert attempts and all(a["cost_usd"] == pytest.approx(UPPER) and a["may_have_been_billed"] for a in attempts)
    # the journal holds every charge once: a resume charges exactly what was spent
    charged = sum(r["cost_usd"] for r in j.records() if r.get("cost_usd") is not None)
    assert charged == pytest.approx(snap["spent"])
    j.close()
    j2 = Journal.open(tmp_path)
    again, _ = make_live(bank, budget=cap, journal=j2)
    again.resume_from(j2)
    assert again.ledger.spent == pytest.approx(snap["spent"])
    # the report's counts are rebuilt from the journal, not this process's
    assert (again.attempts, again.retries, again.billed_failures) == (live.attempts, live.retries, live.billed_failures)
    assert again.billed_failures_usd == pytest.approx(live.billed_failures_usd)
    assert sum(e.spent for e in again.ranker.examinees.values()) == pytest.approx(
        sum(e.spent for e in live.ranker.examinees.values()))


def test_a_retry_that_does_not_fit_under_the_cap_is_not_sent(tmp_path):
    bank = make_sim_bank(n_items=300, seed=3)
    always = lambda item, attempt: TimeoutError("timed out")  # noqa: E731
    callers = {m: Caller(bank, t, k, fail=always) for k, (m, t) in enumerate(THETAS.items())}
    cap = 7.5 * UPPER  # room for 7 attempts
    j = Journal.create(tmp_path, {"run": "t"})
    live, _ = make_live(bank, budget=cap, journal=j, callers=callers, max_failures=99,
                        retry=RetryPolicy(max_attempts=4, base_s=0))
    live.run()
    sent = sum(sum(c.calls.values()) for c in callers.values())
    assert sent == 7 and live.ledger.spent == pytest.approx(7 * UPPER) and live.ledger.spent <= cap
    refused = [f for f in j.records("failure") if "BudgetRefused" in f["error"]]
    assert refused and all("does not fit under the cap" in f["error"] for f in refused)
    assert live.ranker.result().stopped_because == "budget"


# ------------------------------------------------------------------ end to end
WMT = "wmt24_en-de"
SYSTEMS = ["GPT-4", "Aya23"]
PRICE = (1.0, 3.0)  # USD per M tokens, given on the command line
BANK_TOKENS = 100.0


def make_bank(path, *, task=WMT, metric="bleu", ids=range(40)):
    ids = [str(i) for i in ids]
    ItemBank(item_ids=np.array(ids, dtype=object), b=np.random.default_rng(0).normal(0, 1, len(ids)),
             model=ContinuousResponseModel(k=0.1), scaling="global", lo=0.0, hi=1.0,
             input_tokens=BANK_TOKENS, output_tokens=BANK_TOKENS, task=task, metric=metric).save(path)
    return str(path)


def rank_args(out, systems, bank, url, *extra, task=WMT):
    os.environ["OPENAI_API_BASE"] = url  # litellm's provider setting (restored by the openai_env fixture)
    return ["rank", "--models", *[f"{s}=litellm:model=openai/{s}" for s in systems],
            "--tasks", task, "--bank", str(bank), "--include_path", str(REPO / "task_configs"),
            "--apply_chat_template", "--output", str(out), "--no-progress", "--backoff", "0",
            "--price", *[f"{s}={PRICE[0]:g},{PRICE[1]:g}" for s in systems], *extra]


def bank_cost(n_calls):  # what n calls cost at the bank's token counts and the given prices
    return n_calls * (BANK_TOKENS * PRICE[0] + BANK_TOKENS * PRICE[1]) / 1e6


@pytest.fixture
def openai_env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "replay")
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:9/v1")


def test_a_provider_slower_than_the_timeout_never_costs_more_than_the_cap(tmp_path, openai_env):
    """The issue's case, small: every call times out and the provider answers it anyway."""
    cap = 0.02
    with _server(latency=0.4) as srv:
        srv.reset_stats()
        out = tmp_path / "out"
        code = main(rank_args(out, SYSTEMS, make_bank(tmp_path / "bank.json"), srv.url, "--timeout", "0.15",
                              "--max-attempts", "3", "--min-items", "2", "--budget-usd", str(cap)))
        r = json.loads((out / "ranking.json").read_text())
        srv_stats = _settled_stats(srv)
    served, sent = srv_stats["served"], srv_stats["requests"]
    assert code == 0 and served >= 3 and served == sent  # every call sent was answered (after the client left)
    spent = r["total_cost_usd"]
    # never more calls than the cap pays for, and every call served is charged
    assert bank_cost(served) <= cap
    assert spent >= bank_cost(served) and spent <= cap
    assert r["calls"]["billed_failures"] == sent and r["calls"]["billed_failures_usd"] == pytest.approx(spent)
    assert r["calls"]["retries"] >= 1 and r["calls"]["attempts"] == sent
    j = Journal.open(out, writable=False)
    charged = [x["cost_usd"] for x in j.records() if x.get("cost_usd")]
    assert len(charged) == sent and sum(charged) == pytest.approx(spent)


ALPACA = "alpaca_eval"
JUDGED = ["vicuna-13b", "alpaca-7b"]
JUDGE = "openai/gpt-4o-mini"


@pytest.mark.parametrize("fault", ["slow", "half_failing"])
def test_a_faulty_judge_endpoint_never_costs_more_than_the_cap(tmp_path, openai_env, fault):
    clear_judge_cache()
    cap = 0.5
    judge_kw = {"latency": 0.4} if fault == "slow" else {"fail_rate": 0.5, "seed": 3}
    with _server() as models, _server(**judge_kw) as judge:
        out = tmp_path / "out"
        meta = json.dumps({"judge_model": JUDGE, "judge_api_base": judge.url})
        code = main(rank_args(out, JUDGED, make_bank(tmp_path / "bank.json", task=ALPACA, metric="judge"), models.url,
                              "--metadata", meta, "--timeout", "0.15" if fault == "slow" else "30",
                              "--max-attempts", "3", "--min-items", "2", "--max-items", "4", "--budget-usd", str(cap),
                              "--max-failures", "99", task=ALPACA))
        r = json.loads((out / "ranking.json").read_text())
        js, ms = _settled_stats(judge), _settled_stats(models)
    assert code == 0 and js["requests"] > 0
    j = Journal.open(out, writable=False)
    attempts = list(j.records("attempt"))
    # no SDK retry behind ours: every judge request the endpoint got is an attempt we counted
    judged_ok = sum(len(x.get("judge_usage", [])) for x in [*j.scores(), *j.records("failure")])
    # at most one judge request per attempt (the model's answer re-used; an attempt whose own model
    # call timed out on a loaded machine sends none)
    assert 0 < js["requests"] <= r["calls"]["attempts"]
    assert ms["served"] == len(j.scores()) + len(list(j.records("failure")))  # one model call per item
    assert r["calls"]["retries"] == len(attempts)  # every retry journaled with what it cost
    jp = litellm_price("gpt-4o-mini")
    spent = r["total_cost_usd"]
    assert spent <= cap
    # every model call and every judge call the endpoints served is charged at least its cost
    # (a judge call: at least 100 prompt tokens and a 5-token "Score: X" reply)
    assert judged_ok <= js["served"]
    floor = bank_cost(ms["served"]) + js["served"] * (100 * jp.input_per_token + 5 * jp.output_per_token)
    assert spent >= floor
    if fault == "slow":
        assert js["served"] == js["requests"] and r["calls"]["billed_failures"] == js["requests"]
    else:
        dropped = js["failed_by_kind"]["drop"]
        assert r["calls"]["billed_failures"] == dropped


def test_run_adaptive_against_a_provider_slower_than_the_timeout_stays_under_its_budget(tmp_path, openai_env, capsys):
    """`run --adaptive`: every call times out and the endpoint answers it anyway. Our retries (the
    harness's and litellm's are off) are reserved at their worst case; the one that does not fit is
    not sent, the run stops on its budget and writes its results."""
    import glob
    import re

    cap = 0.01
    with _server(latency=0.4) as srv:
        os.environ["OPENAI_API_BASE"] = srv.url
        out = tmp_path / "out"
        code = main(["run", "--model", "litellm", "--model_args", "model=openai/Aya23,max_retries=20",
                     "--tasks", WMT, "--include_path", str(REPO / "task_configs"), "--apply_chat_template",
                     "--output_path", str(out), "--adaptive", "--bank", make_bank(tmp_path / "bank.json"),
                     "--item-field", "doc_id", "--min-items", "2", "--max-items", "4", "--timeout", "0.15",
                     "--budget-usd", str(cap), "--price", f"{PRICE[0]:g},{PRICE[1]:g}"])
        stats = srv.stats()
    err = capsys.readouterr().err
    # no document could be scored: the run stops on its budget, one error line, no traceback
    assert code == 1 and "stopped because budget before any document was scored" in err and "Traceback" not in err
    assert not glob.glob(str(out / "**" / "results_*.json"), recursive=True)
    spent = float(re.search(r"spent \$([0-9.e-]+) of", err).group(1))
    served, sent = stats["served"], stats["requests"]
    assert served == sent >= 2  # every call sent was answered, after the client gave up on it
    # never more calls than the budget pays for, and every call served is charged
    assert bank_cost(served) <= cap
    assert bank_cost(served) <= spent <= cap

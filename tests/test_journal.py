"""Journal: fsynced append-only JSONL, crash tolerance, redaction, and resume by replay into a ranker."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import make_sim_bank, simulate_scores

from lm_eval_adaptive.engine.ranking.ranker import AdaptiveRanker
from lm_eval_adaptive.engine.ranking.replay import ReplayEvent
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.live.journal import JOURNAL_NAME, Journal, redact
from lm_eval_adaptive.live.ledger import BudgetLedger

REPO = Path(__file__).resolve().parents[1]


def score_rec(model, item_id, scaled, cost=0.001, **extra):
    return {"type": "score", "model": model, "item_id": item_id, "raw": scaled * 100, "scaled": scaled,
            "cost_usd": cost, "usage": {"prompt_tokens": 100, "completion_tokens": 20}, **extra}


def write_journal(d, n=3):
    with Journal.create(d, {"run": "t", "models": ["a", "b"]}) as j:
        for k in range(n):
            j.append(score_rec("a", f"item{k}", k / 10))
    return d / JOURNAL_NAME


# --------------------------------------------------------------------------- basics
def test_create_append_open_roundtrip(tmp_path):
    j = Journal.create(tmp_path / "run", {"run": "r1", "models": ["a", "b"], "seed": 3})
    assert j.header["type"] == "header" and j.header["version"] == 1 and j.header["run"] == "r1"
    written = [j.append(score_rec("a", "i1", 0.25)),
               j.append({"type": "failure", "model": "b", "item_id": "i1", "error": "HTTP 500"}),
               j.append(score_rec("b", "i2", np.float64(0.5), cost=np.float32(0.5), n=np.int64(3))),
               j.append({"type": "stop", "reason": "settled"})]
    assert all("ts" in r for r in written)
    assert written[2]["scaled"] == 0.5 and written[2]["n"] == 3  # numpy values written as JSON numbers
    j.close()
    with pytest.raises(ValueError, match="not open for writing"):
        j.append({"type": "stop", "reason": "settled"})
    r = Journal.open(tmp_path / "run", writable=False)
    assert list(r.records())[1:] == written
    assert [x["type"] for x in r.records()] == ["header", "score", "failure", "score", "stop"]
    assert [(x["model"], x["item_id"]) for x in r.scores()] == [("a", "i1"), ("b", "i2")]
    assert r.completed_keys() == {("a", "i1"), ("b", "i2")}
    assert len(list(r.records("failure"))) == 1 and len(r) == 5
    assert Journal(tmp_path / "run" / JOURNAL_NAME, writable=False).header == r.header
    lines = (tmp_path / "run" / JOURNAL_NAME).read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 6  # one record a line, newline-terminated


def test_create_refuses_an_existing_journal(tmp_path):
    write_journal(tmp_path)
    before = (tmp_path / JOURNAL_NAME).read_bytes()
    with pytest.raises(InputError, match="already exists"):
        Journal.create(tmp_path, {"run": "other"})
    assert (tmp_path / JOURNAL_NAME).read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [JOURNAL_NAME]  # no temp file left
    with pytest.raises(ValueError):
        Journal.create(tmp_path / "x", {"type": "mine"})
    with pytest.raises(InputError, match="no journal"):
        Journal.open(tmp_path / "missing")


def test_append_fsyncs_every_record_after_writing_it(tmp_path, monkeypatch):
    j = Journal.create(tmp_path, {"run": "t"})
    path = tmp_path / JOURNAL_NAME
    calls = []
    real_fsync = os.fsync

    def counting_fsync(fd):
        calls.append(os.fstat(fd).st_size)  # what the file holds when fsync is called
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    for k in range(5):
        size_before = path.stat().st_size
        j.append(score_rec("a", f"i{k}", 0.5))
        assert len(calls) == k + 1  # one fsync per append, before append returns
        assert calls[-1] > size_before  # the line was written (flushed) before the fsync
        assert calls[-1] == path.stat().st_size
    j.close()


def test_append_refuses_invalid_records_and_writes_nothing(tmp_path):
    j = Journal.create(tmp_path, {"run": "t"})
    j.append(score_rec("a", "i1", 0.5))
    path = tmp_path / JOURNAL_NAME
    size = path.stat().st_size
    bad = [{"model": "a"},  # no type
           {"type": ""},
           {"type": "header"},
           {"type": "score", "model": "a", "item_id": "i2"},  # no scaled
           score_rec("a", "i3", float("nan")),
           score_rec("", "i3", 0.5),
           score_rec("a", "i4", 0.5, cost=-1.0),
           {"type": "failure", "error": float("inf")},
           {"type": "failure", "obj": object()},
           score_rec("a", "i1", 0.7)]  # a second score for the same item
    for rec in bad:
        with pytest.raises(ValueError):
            j.append(rec)
    assert path.stat().st_size == size and len(j) == 2
    j.append(score_rec("a", "i2", 0.5))
    j.close()
    assert len(Journal.open(tmp_path, writable=False)) == 3


def test_appends_from_many_threads(tmp_path):
    import threading

    j = Journal.create(tmp_path, {"run": "t"})

    def worker(t):
        for k in range(50):
            j.append(score_rec(f"m{t}", f"i{k}", k / 50, text="y" * (k * 97 % 5000)))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    j.close()
    back = Journal.open(tmp_path, writable=False)
    assert len(back.scores()) == 400 and len(back.completed_keys()) == 400
    for t in range(8):  # each thread's records in its own order
        assert [r["item_id"] for r in back.scores() if r["model"] == f"m{t}"] == [f"i{k}" for k in range(50)]


@pytest.mark.skipif(sys.platform == "win32", reason="flock")
def test_one_writer_at_a_time(tmp_path):
    j = Journal.create(tmp_path, {"run": "t"})
    with pytest.raises(InputError, match="in use"):
        Journal.open(tmp_path)
    ro = Journal.open(tmp_path, writable=False)  # reading is always allowed
    assert len(ro) == 1
    j.close()
    Journal.open(tmp_path).close()


# --------------------------------------------------------------------------- crashes
def test_truncated_last_line_is_dropped_with_a_warning(tmp_path, caplog):
    path = write_journal(tmp_path, 3)
    with path.open("ab") as f:
        f.write(b'{"type":"score","model":"a","item_id":"item3","sca')  # crash mid-append
    torn = path.read_bytes()
    ro = Journal.open(tmp_path, writable=False)
    assert len(ro.scores()) == 3 and ro.dropped_tail.startswith(b'{"type":"score"')
    assert path.read_bytes() == torn  # reading only leaves the file alone
    with caplog.at_level(logging.WARNING, logger="lm_eval_adaptive.live.journal"):
        j = Journal.open(tmp_path)
    assert any("line 5" in r.getMessage() and "incomplete" in r.getMessage() for r in caplog.records)
    assert len(j.scores()) == 3
    assert ("a", "item3") not in j.completed_keys()  # it never counted: it will be bought again
    j.append(score_rec("a", "item3", 0.3))  # starts on a fresh line
    j.close()
    j = Journal.open(tmp_path, writable=False)
    assert [r["item_id"] for r in j.scores()] == ["item0", "item1", "item2", "item3"]
    assert j.dropped_tail is None


def test_torn_multibyte_and_zero_filled_tails(tmp_path):
    path = write_journal(tmp_path, 2)
    line = json.dumps(score_rec("a", "é", 0.5), ensure_ascii=False).encode()
    cut = line.index("é".encode()) + 1  # inside the two-byte character
    with path.open("ab") as f:
        f.write(line[:cut])
    assert len(Journal.open(tmp_path).scores()) == 2
    with path.open("ab") as f:
        f.write(b"\0" * 4096)  # what a power cut can leave at the end of a file
    assert len(Journal.open(tmp_path).scores()) == 2


def test_last_line_missing_only_its_newline_is_kept(tmp_path):
    path = write_journal(tmp_path, 3)
    path.write_bytes(path.read_bytes()[:-1])
    j = Journal.open(tmp_path)
    assert len(j.scores()) == 3 and j.dropped_tail is None
    j.append(score_rec("a", "item3", 0.3))
    j.close()
    assert len(Journal.open(tmp_path, writable=False).scores()) == 4


@pytest.mark.parametrize("line3, message", [
    (b'{"type":"score","model":"a"', "line 3: not valid JSON"),
    (b"", "line 3: not valid JSON"),
    (b"[1, 2]", "line 3: a record must be a JSON object"),
    (b'{"model":"a"}', "line 3: a record needs a 'type'"),
    (b'{"type":"score","model":"a","item_id":"x","raw":1}', "line 3: a score record needs 'scaled'"),
    # valid JSON, but a record without a field resume reads
    (b'{"type":"score","model":"a","item_id":"x","scaled":0.1}', "line 3: a score record needs 'raw' .*missing"),
    (b'{"type":"score","model":"a","item_id":"x","raw":"high","scaled":0.1}', "line 3: a score record needs 'raw'"),
    (b'{"type":"request","model":"a"}', "line 3: a request record needs 'item_id'"),
    (b'{"type":"request","model":"a","item_id":"x","reserved_usd":-1}', "line 3: a request record needs 'reserved_usd'"),
    (b'{"type":"failure","item_id":"x"}', "line 3: a failure record needs 'model'"),
    (b'{"type":"cap","budget_usd":0}', "line 3: a cap record needs 'budget_usd'"),
    (b'{"type":"stop"}', "line 3: a stop record needs 'reason'"),
    (b'{"type":"header","version":1}', "line 3: a second header"),
    (b'{"type":"score","model":"a","item_id":"item0","raw":10,"scaled":0.1}', "line 3: a second score .* line 2"),
])
def test_malformed_middle_line_names_file_and_line(tmp_path, line3, message):
    path = write_journal(tmp_path, 3)
    lines = path.read_bytes().split(b"\n")
    lines[2] = line3
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(InputError, match=message) as e:
        Journal.open(tmp_path)
    assert str(path) in str(e.value) and e.value.row == 3 and e.value.path == str(path)


def test_bad_header(tmp_path):
    path = tmp_path / JOURNAL_NAME
    path.write_bytes(b'{"type":"score","model":"a","item_id":"x","scaled":1}\n')
    with pytest.raises(InputError, match="line 1: not a journal header"):
        Journal.open(tmp_path)
    path.write_bytes(b'{"type":"header","version":2}\n')
    with pytest.raises(InputError, match="version 2 is not supported"):
        Journal.open(tmp_path)
    path.write_bytes(b'{"type":"hea')
    with pytest.raises(InputError, match="no complete header"):
        Journal.open(tmp_path)
    path.write_bytes(b"")
    with pytest.raises(InputError, match="no complete header"):
        Journal.open(tmp_path)


_WRITER = textwrap.dedent("""
    import sys
    from lm_eval_adaptive.live.journal import Journal
    j = Journal.open(sys.argv[1])
    pad = "x" * int(sys.argv[2])
    i = 0
    while True:
        j.append({"type": "score", "model": "m", "item_id": f"i{i}", "scaled": 0.5, "raw": 50, "pad": pad})
        i += 1
""")


def test_journal_of_a_process_killed_mid_append(tmp_path):
    Journal.create(tmp_path, {"run": "killed"}).close()
    path = tmp_path / JOURNAL_NAME
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    # large records (1 MB): SIGKILL can cut a write between pages, leaving a torn last line
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path), "1000000"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        with path.open("rb") as f:
            deadline = time.monotonic() + 30
            while True:
                assert proc.poll() is None, proc.stderr.read().decode()
                size = os.fstat(f.fileno()).st_size
                mid_line = os.pread(f.fileno(), 1, size - 1) != b"\n"
                # kill while a record is being written, once a few are complete (or at the deadline)
                if size > 3_000_000 and (mid_line or time.monotonic() > deadline):
                    break
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    raw = path.read_bytes()
    n_complete = raw.count(b"\n")  # newline-terminated lines, the header included
    j = Journal.open(tmp_path)  # the lock died with the process
    ids = [r["item_id"] for r in j.scores()]
    assert ids == [f"i{k}" for k in range(len(ids))]  # every complete line, in order, no gap
    assert len(j) in (n_complete, n_complete + 1)  # at most the torn last one is dropped
    assert len(ids) >= 2
    assert (j.dropped_tail is not None) == (not raw.endswith(b"\n"))
    j.append({"type": "stop", "reason": "resumed"})
    j.close()
    assert len(Journal.open(tmp_path, writable=False)) == len(ids) + 2


# --------------------------------------------------------------------------- secrets
SECRET = "sk-abcdefghijklmnopqrstuvwxyz0123456789"
GOOGLE = "AIzaSyA1234567890abcdefghijklmnopqrstuv"


def test_secrets_never_reach_the_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("MYPROVIDER_API_KEY", "plainvalue-without-a-pattern")
    bearer = "tok_0123456789abcdefghijkl"
    j = Journal.create(tmp_path, {"run": "t", "api_key": SECRET,
                                  "endpoint": f"https://llm.example/v1?key={GOOGLE}&alt=json"},
                       secrets=["caller-known-secret"])
    written = j.append({
        "type": "failure", "model": "m", "item_id": "i1",
        "request": {"url": f"https://generativelanguage.googleapis.com/v1/models/x:generate?key={GOOGLE}",
                    "headers": {"Authorization": f"Bearer {bearer}", "X-Api-Key": "anything"},
                    "params": [{"api_key": SECRET}, {"nested": {"Token": 12345, "secret": "s3"}}]},
        "error": f"401 Incorrect API key provided: {SECRET}; also caller-known-secret and "
                 f"plainvalue-without-a-pattern; curl -H 'Authorization: Bearer {bearer}' "
                 "https://user:hunter2pass@proxy.example/",
        "usage": {"prompt_tokens": 10, "completion_tokens": 0}, "max_tokens": 256, "api_key": None,
    })
    j.close()
    raw = (tmp_path / JOURNAL_NAME).read_text()
    for secret in (SECRET, GOOGLE, bearer, "anything", "12345", "s3", "caller-known-secret",
                   "plainvalue-without-a-pattern", "hunter2pass"):
        assert secret not in raw, secret
    assert "?key=***&alt=json" in raw and "generate?key=***" in raw
    assert written["request"]["headers"] == {"Authorization": "***", "X-Api-Key": "***"}
    assert written["usage"] == {"prompt_tokens": 10, "completion_tokens": 0}  # token counts are not secrets
    assert written["max_tokens"] == 256 and written["api_key"] is None
    assert "https://***@proxy.example/" in written["error"]  # the whole user info
    back = Journal.open(tmp_path, writable=False)
    assert list(back.records())[1] == written  # memory and disk agree
    assert back.header["api_key"] == "***"


def test_redact_leaves_ordinary_text_alone():
    text = ("basic arithmetic on a task-abcdefghijklmnopqrstuvwxyz0123 with max_tokens=256, "
            "tokenizer gpt2 and the password prompt 'enter key' https://example.org/a?q=1&page=2")
    assert redact(text) == text
    rec = {"model": "openai/gpt-4o", "item_id": "doc-17", "usage": {"prompt_tokens": 5}, "eos_token": "</s>"}
    assert redact(rec) == rec


# --------------------------------------------------------------------------- budget bridge
def test_costs_feed_a_ledger_at_resume(tmp_path):
    with Journal.create(tmp_path, {"run": "t"}) as j:
        j.append(score_rec("a", "i1", 0.5, cost=0.25))
        j.append({"type": "failure", "model": "a", "item_id": "i2", "cost_usd": 0.125})  # billed, then failed
        j.append({"type": "failure", "model": "a", "item_id": "i3", "cost_usd": None})
        j.append(score_rec("b", "i1", 0.5, cost=0.5))
    j = Journal.open(tmp_path, writable=False)
    costs = j.costs()
    assert costs == [("journal:2", 0.25), ("journal:3", 0.125), ("journal:5", 0.5)]
    led = BudgetLedger(1.0)
    for key, usd in costs:
        led.charge_known(key, usd)
    assert led.spent == 0.875 and led.available == 0.125
    with pytest.raises(ValueError):
        led.charge_known(*costs[0])


# --------------------------------------------------------------------------- resume
MODELS = ["m0", "m1", "m2", "m3"]
THETAS = {"m0": 0.0, "m1": 0.3, "m2": 0.6, "m3": 1.6}


@pytest.fixture(scope="module")
def sim():
    bank = make_sim_bank(n_items=250, seed=5)
    rng = np.random.default_rng(9)
    Y = {m: simulate_scores(THETAS[m], bank.b, k=bank.k, rng=rng) for m in MODELS}
    scale = {"m0": 1.0, "m1": 3.0, "m2": 0.5, "m3": 2.0}
    costs = {m: scale[m] * rng.uniform(0.001, 0.003, bank.n_items) for m in MODELS}
    return bank, Y, costs


def make_ranker(sim, **kw):
    bank, _, costs = sim
    opts = dict(item_costs=costs, budget=0.6, n_init=5, n_max=60, confidence=0.95, top_k=3, seed=11)
    opts.update(kw)
    return AdaptiveRanker(bank, MODELS, **opts)


def fails(model, item):
    """A fixed, rare set of (model, item) calls that fail (the request is cancelled)."""
    return (item * 7 + MODELS.index(model)) % 23 == 0


def administer(ranker, journal, sim, req):
    """One call: fail and cancel, or tell the score and journal it (cost: 90% of the estimate)."""
    _, Y, costs = sim
    if fails(req.model, req.item):
        ranker.cancel(req)
        journal.append({"type": "failure", "model": req.model, "item_id": req.item_id, "error": "HTTP 500"})
        return
    y = float(Y[req.model][req.item])
    raw = 100 * y  # journaled and told alike, as the live driver does (the metric scale reads raw values)
    cost = 0.9 * float(costs[req.model][req.item])
    ranker.tell(req, y, cost=cost, raw=raw)
    journal.append(score_rec(req.model, req.item_id, y, cost=cost, raw=raw))


def run_sequential(ranker, journal, sim):
    calls = []
    while (req := ranker.ask()) is not None:
        calls.append((req.model, req.item_id))
        administer(ranker, journal, sim, req)
    journal.append({"type": "stop", "reason": ranker.stopped_because})
    return calls


def cut_journal(src: Path, dst: Path, n_records: int) -> Path:
    """The journal a crash after ``n_records`` appends would have left (header + n records)."""
    lines = (src / JOURNAL_NAME).read_bytes().split(b"\n")
    dst.mkdir()
    (dst / JOURNAL_NAME).write_bytes(b"\n".join(lines[: 1 + n_records]) + b"\n")
    return dst


def examinee_state(ranker, drop_pending=False):
    """Every model's state, read through the public API (items still in flight left out with
    ``drop_pending``)."""
    out = {}
    for m, e in ranker.examinees.items():
        taken = e.taken()
        if drop_pending:
            for (pm, item) in ranker.pending:
                if pm == m:
                    taken[item] = False
        out[m] = (e.items, e.scores, e.theta, e.se, e.spent, e.info_at_selection, taken.tobytes(), int(taken.sum()))
    return out


def test_resume_equals_the_uninterrupted_run(tmp_path, sim):
    live = make_ranker(sim)
    full = Journal.create(tmp_path / "full", {"run": "sim", "models": MODELS})
    calls = run_sequential(live, full, sim)
    full.close()
    expected = live.result()
    n_records = len(Journal.open(tmp_path / "full", writable=False)) - 2  # header, stop
    types = [r["type"] for r in Journal.open(tmp_path / "full", writable=False).records()][1:-1]
    assert n_records == len(calls) > 60 and "failure" in types  # a real run, with failed calls
    assert expected.stopped_because in ("budget", "settled", "cost_to_settle", "max_items")
    warm = len(MODELS) * 5
    for n in sorted({0, 1, 3, warm - 1, warm, warm + 1, n_records // 2, n_records - 1, n_records}):
        d = cut_journal(tmp_path / "full", tmp_path / f"cut{n}", n)
        j = Journal.open(d)
        done = j.completed_keys()
        resumed = make_ranker(sim)
        stats = j.replay_into(resumed)
        n_scores = types[:n].count("score")
        assert (stats.scores, stats.asked, stats.direct, stats.failures) == (n_scores, n_scores, 0, n - n_scores)
        assert resumed.spent == pytest.approx(sum(r["cost_usd"] for r in j.scores()))
        led = BudgetLedger(0.6)
        for key, usd in j.costs():
            led.charge_known(key, usd)
        assert led.spent == pytest.approx(resumed.spent)
        new_calls = run_sequential(resumed, j, sim)
        j.close()
        assert new_calls == calls[n:]  # the same calls the uninterrupted run made after the cut ...
        assert not done & set(new_calls)  # ... and none of the work already journaled is bought again
        got = resumed.result()
        assert got.ranking == expected.ranking
        assert got.items == expected.items
        assert got.theta == expected.theta and got.se == expected.se  # bit for bit
        assert got.cost == expected.cost and got.total_cost == expected.total_cost
        assert got.item_log == expected.item_log
        assert got.stopped_because == expected.stopped_because
        assert examinee_state(resumed) == examinee_state(live)
        again = Journal.open(d, writable=False)
        assert [(r["model"], r["item_id"], r["scaled"]) for r in again.scores()] == \
            [(r["model"], r["item_id"], r["scaled"]) for r in Journal.open(tmp_path / "full", writable=False).scores()]


def test_resume_after_requests_completed_out_of_order(tmp_path, sim):
    """Many requests in flight, told in random order: replay falls back to the examinees directly."""
    live = make_ranker(sim, top_k=1)
    j = Journal.create(tmp_path / "full", {"run": "concurrent"})
    rng = np.random.default_rng(4)
    inflight, states = [], [examinee_state(live)]
    while True:
        while (req := live.ask()) is not None:
            inflight.append(req)
        if not inflight:
            break
        administer(live, j, sim, inflight.pop(int(rng.integers(len(inflight)))))
        states.append(examinee_state(live, drop_pending=True))
    j.close()
    n_records = len(states) - 1
    assert n_records > 60
    direct = 0
    for n in sorted({0, 1, 2, 5, 19, 20, 21, n_records // 3, n_records // 2, n_records - 1, n_records}):
        d = cut_journal(tmp_path / "full", tmp_path / f"cut{n}", n)
        j = Journal.open(d)
        resumed = make_ranker(sim, top_k=1)
        stats = j.replay_into(resumed)
        direct += stats.direct
        assert stats.asked + stats.direct == stats.scores
        assert not resumed.pending and not resumed.finished
        # every model's examinee is exactly where the live run had it (minus calls still in flight)
        assert examinee_state(resumed) == states[n]
        done = j.completed_keys()
        new_calls = run_sequential(resumed, j, sim)
        assert not done & set(new_calls)
        for e in resumed.examinees.values():
            assert len(set(e.items)) == len(e.items) <= resumed.n_max
        assert resumed.spent <= 0.6 + 1e-12 and resumed.finished
        j.close()
    assert direct > 0  # the out-of-order path was exercised


def test_replay_rejects_a_journal_that_does_not_fit_the_ranker(tmp_path, sim):
    bank = sim[0]
    with Journal.create(tmp_path / "a", {"run": "t"}) as j:
        j.append(score_rec("m0", str(bank.item_ids[0]), 0.5))
        j.append(score_rec("zz", str(bank.item_ids[0]), 0.5))
    with pytest.raises(InputError, match="line 3: model 'zz'"):
        Journal.open(tmp_path / "a", writable=False).replay_into(make_ranker(sim))
    with Journal.create(tmp_path / "b", {"run": "t"}) as j:
        j.append(score_rec("m0", "no-such-item", 0.5))
    with pytest.raises(InputError, match="line 2: item 'no-such-item'"):
        Journal.open(tmp_path / "b", writable=False).replay_into(make_ranker(sim))
    excluded = {"m0": np.array([0])}
    with Journal.create(tmp_path / "c", {"run": "t"}) as j:
        j.append(score_rec("m0", str(bank.item_ids[0]), 0.5))
    with pytest.raises(InputError, match="line 2: .* excluded"):
        Journal.open(tmp_path / "c", writable=False).replay_into(make_ranker(sim, exclude=excluded))
    busy = make_ranker(sim)
    busy.ask()
    with pytest.raises(ValueError, match="in flight"):
        Journal.open(tmp_path / "c", writable=False).replay_into(busy)
    # scaled_of: the scaled score recomputed from the record
    r = make_ranker(sim)
    Journal.open(tmp_path / "c", writable=False).replay_into(r, scaled_of=lambda rec: rec["raw"] / 100)
    assert r.examinees["m0"].scores == [0.5]


def drive_steps(ranker, n, y=0.5):
    """Up to ``n`` ask/tell steps with a constant score; the requests asked."""
    asked = []
    for _ in range(n):
        req = ranker.ask()
        if req is None:
            break
        asked.append(req)
        ranker.tell(req, y)
    return asked


def test_a_mismatched_ask_is_undone_completely(sim):
    """Replaying an outcome the ranker would not ask for next: the ask made to check it is undone
    (reservation, cached next items, random state), so the ranker goes on exactly like one that
    was given the same outcome directly."""
    r = make_ranker(sim, top_k=3)
    r.tell(r.ask(), 0.5)
    before = examinee_state(r)
    assert r.peek("m1") != 0
    stats = r.replay([ReplayEvent.failure("m3", 0)])  # the ranker asks m1 next, not m3
    assert (stats.asked, stats.failures) == (0, 1) and not r.pending
    after = examinee_state(r)
    assert {m: after[m] for m in MODELS if m != "m3"} == {m: before[m] for m in MODELS if m != "m3"}
    assert r.examinees["m3"].is_taken(0) and not r.examinees["m3"].is_scored(0)
    twin = make_ranker(sim, top_k=3)
    twin.tell(twin.ask(), 0.5)
    twin.exclude("m3", [0])  # the same item taken, with no ask made
    assert drive_steps(r, 40) == drive_steps(twin, 40)  # the same random stream
    # a score told out of order is recorded directly
    r = make_ranker(sim, top_k=3)
    r.tell(r.ask(), 0.5)
    stats = r.replay([ReplayEvent.score("m3", "item0007", 0.25, cost=0.002)])
    assert (stats.asked, stats.direct, stats.scores) == (0, 1, 1)
    twin = make_ranker(sim, top_k=3)
    twin.tell(twin.ask(), 0.5)
    twin.record("m3", 7, 0.25, cost=0.002)
    assert examinee_state(r) == examinee_state(twin)
    assert drive_steps(r, 40) == drive_steps(twin, 40)
    # an ask that declares the run over is undone too
    broke = make_ranker(sim, budget=0.0)
    broke.replay([ReplayEvent.failure("m0", 0)])
    assert broke.stopped_because is None and not broke.finished
    assert broke.ask() is None and broke.stopped_because == "budget"


def test_a_ctrl_c_during_an_append_waits_until_the_record_is_on_disk(tmp_path, monkeypatch):
    import os
    import signal

    j = Journal.create(tmp_path, {"command": "test"})
    real_fsync = os.fsync
    fired = []

    def fsync_with_ctrl_c(fd):
        if not fired:
            fired.append(1)
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C in the middle of writing the record
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync_with_ctrl_c)
    # Python's own Ctrl-C handler, as a command starts with (an earlier test in this worker may have left another)
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            j.append({"type": "score", "model": "a", "item_id": "1", "raw": 0.5, "scaled": 0.5, "cost_usd": 0.0})
    finally:
        signal.signal(signal.SIGINT, handler)
    monkeypatch.setattr(os, "fsync", real_fsync)
    # the record is whole and on disk, and the journal still takes the calls in flight
    j.append({"type": "score", "model": "a", "item_id": "2", "raw": 0.4, "scaled": 0.4, "cost_usd": 0.0})
    j.close()
    assert [r["item_id"] for r in Journal.open(tmp_path, writable=False).scores()] == ["1", "2"]


def test_a_several_metric_score_record_holds_every_metrics_score_and_replays_into_the_joint_ranker(tmp_path):
    """With a bank per metric a score record's raw and scaled are objects metric → value (null where the
    metric could not score); the journal checks them and replays them into a MultiMetricRanker."""
    from lm_eval_adaptive.engine.ranking.multi_metric_ranker import MultiMetricRanker

    banks = {"x": make_sim_bank(n_items=40, seed=1), "y": make_sim_bank(n_items=40, seed=2)}
    j = Journal.create(tmp_path, {"command": "rank"})
    r = MultiMetricRanker(banks, ["a", "b"], n_init=3, seed=0)
    told = []
    for _ in range(4):
        req = r.ask()
        y = {"x": 0.4, "y": None} if not told else {"x": 0.6, "y": 0.5}
        r.tell(req, y, cost=0.01)
        j.append({"type": "score", "model": req.model, "item_id": req.item_id, "raw": {"x": 20.0, "y": 1.5},
                  "scaled": y, "cost_usd": 0.01})
        told.append(req)
    for bad in ({"x": float("inf")}, {}, {"": 0.5}, {"x": "0.5"}):
        with pytest.raises(ValueError, match="scaled"):
            j.append({"type": "score", "model": "a", "item_id": "item0039", "raw": 1.0, "scaled": bad})
    j.close()
    again = MultiMetricRanker(banks, ["a", "b"], n_init=3, seed=0)
    stats = Journal.open(tmp_path, writable=False).replay_into(again)
    assert stats.scores == stats.asked == 4
    for m in ("a", "b"):
        assert again.examinees[m].scores == r.examinees[m].scores
        assert again.metric_examinees("y")[m].n == r.metric_examinees("y")[m].n
    assert again.spent == pytest.approx(0.04)

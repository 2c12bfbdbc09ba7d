"""BudgetLedger: reserve/settle/release under a hard cap, many threads, known charges at resume."""

from __future__ import annotations

import logging
import math
import random
import sys
import threading
from types import SimpleNamespace

import pytest

from lm_eval_adaptive.data.prices import Price, actual_cost, upper_estimate
from lm_eval_adaptive.live.ledger import BudgetLedger


def test_reserve_settle_release_basics():
    led = BudgetLedger(1.0)
    assert led.cap == 1.0 and led.spent == 0 and led.reserved == 0 and led.available == 1.0
    assert led.reserve("a", 0.4)
    assert led.reserve("b", 0.5)
    assert not led.reserve("c", 0.2)  # 0.4 + 0.5 + 0.2 > 1: refused, nothing booked
    assert led.reserved == pytest.approx(0.9) and led.in_flight == 2 and led.n_refused == 1
    assert led.settle("a", 0.1) == 0.0  # actual < reserved frees the difference
    assert led.spent == pytest.approx(0.1)
    assert led.reserved == pytest.approx(0.5)
    assert led.available == pytest.approx(0.4)
    assert led.reserve("c", 0.2)  # fits now
    assert led.release("b") == pytest.approx(0.5)
    assert led.reserved == pytest.approx(0.2)
    assert led.charges() == [("a", pytest.approx(0.1))]
    assert led.n_settled == 1
    assert led.reservations() == {"c": pytest.approx(0.2)}
    assert led.overshoot_usd == 0.0
    s = led.snapshot()
    assert s["within_cap"] and s["in_flight"] == 1 and s["n_charges"] == 1
    assert "BudgetLedger(cap=1.0" in repr(led)


def test_keys_name_one_call():
    led = BudgetLedger(10.0)
    assert led.reserve("k", 1.0)
    with pytest.raises(ValueError, match="already reserved"):
        led.reserve("k", 1.0)
    led.settle("k", 0.5)
    with pytest.raises(ValueError, match="already charged"):
        led.reserve("k", 1.0)  # a paid call is never paid again
    with pytest.raises(KeyError):
        led.settle("k", 0.5)  # settled already
    with pytest.raises(KeyError):
        led.settle("nope", 0.5)
    with pytest.raises(KeyError):
        led.release("nope")
    assert led.reserve(("m", "item1"), 1.0)
    led.release(("m", "item1"))
    assert led.reserve(("m", "item1"), 1.0)  # a released (failed, uncharged) call may be retried
    assert led.spent == 0.5 and led.reserved == 1.0


def test_amounts_are_counted_exactly():
    led = BudgetLedger(0.3)
    assert led.reserve("a", 0.1) and led.reserve("b", 0.2)  # 0.1 + 0.2 fits 0.3 (no float drift)
    assert led.available == 0.0
    assert led.reserve("zero", 0.0)  # free calls always fit
    assert not led.reserve("c", 1e-9)
    led = BudgetLedger(1.0)
    assert all(led.reserve(i, 0.001) for i in range(1000))
    assert not led.reserve("one more", 0.001)
    for i in range(1000):
        led.settle(i, 0.001)
    assert led.spent == 1.0 and led.reserved == 0.0 and led.available == 0.0


def test_invalid_amounts():
    with pytest.raises(ValueError):
        BudgetLedger(-1.0)
    with pytest.raises(ValueError):
        BudgetLedger(float("nan"))
    led = BudgetLedger(1.0)
    for bad in (float("nan"), float("inf"), -0.01, "0.1", True, None):
        with pytest.raises(ValueError):
            led.reserve("x", bad)
    assert led.in_flight == 0
    assert led.reserve("x", 0.5)
    with pytest.raises(ValueError):
        led.settle("x", -1.0)
    assert led.reservations() == {"x": 0.5}  # a bad settle changes nothing


def test_no_cap_only_counts():
    led = BudgetLedger(None)
    assert led.cap is None and led.available == math.inf
    assert led.reserve("a", 1e9)
    led.settle("a", 5.0)
    assert led.spent == 5.0 and led.snapshot()["within_cap"]


def test_overshoot_is_charged_and_reported(caplog):
    led = BudgetLedger(1.0)
    assert led.reserve("a", 0.5)
    assert led.reserve("b", 0.4)
    with caplog.at_level(logging.WARNING, logger="lm_eval_adaptive.live.ledger"):
        over = led.settle("a", 0.8)  # the provider billed more than the reservation
    assert over == pytest.approx(0.3)
    assert led.overshoot_usd == pytest.approx(0.3)
    assert led.spent == pytest.approx(0.8)  # reality is booked
    assert led.available == 0.0
    assert not led.reserve("c", 0.01)
    assert any("UPPER estimate" in r.getMessage() and "'a'" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lm_eval_adaptive.live.ledger"):
        assert led.settle("b", 0.1) == 0.0
    assert not caplog.records and led.overshoot_usd == pytest.approx(0.3)


def test_charge_known_for_resume(caplog):
    led = BudgetLedger(1.0)
    led.charge_known("journal:2", 0.25)
    led.charge_known("journal:3", 0.25)
    assert led.spent == 0.5 and led.n_settled == 0 and len(led.charges()) == 2
    with pytest.raises(ValueError, match="already charged"):
        led.charge_known("journal:2", 0.25)  # replaying the journal twice charges nothing twice
    assert led.spent == 0.5
    with pytest.raises(ValueError, match="already charged"):
        led.reserve("journal:3", 0.1)
    assert led.reserve("live", 0.4)
    with pytest.raises(ValueError, match="reserved"):
        led.charge_known("live", 0.1)
    assert not led.reserve("more", 0.2)  # 0.5 spent + 0.4 reserved + 0.2 > 1
    with caplog.at_level(logging.WARNING, logger="lm_eval_adaptive.live.ledger"):
        led.charge_known("journal:4", 0.9)  # paid earlier: counted even past the cap
    assert led.spent == pytest.approx(1.4) and led.available == 0.0
    assert any("over the cap" in r.getMessage() for r in caplog.records)


def test_cap_never_exceeded_under_8_threads():
    cap = 1.0
    led = BudgetLedger(cap)
    violations: list = []
    stop = threading.Event()

    def check(where):
        s = led.snapshot()  # spent and reserved read under one lock
        if not s["within_cap"] or s["spent"] + s["reserved"] > cap + 1e-12:
            violations.append((where, s))

    def checker():
        while not stop.is_set():
            check("checker")

    settled = [[] for _ in range(8)]
    counts = [dict(reserve=0, refused=0, settle=0, release=0) for _ in range(8)]

    def worker(tid):
        rng = random.Random(1000 + tid)
        mine: dict = {}
        c = counts[tid]
        for op in range(500):
            r = rng.random()
            if r < 0.5 or not mine:
                key = (tid, op)
                est = rng.uniform(0.0, 0.08)
                if led.reserve(key, est):
                    mine[key] = est
                    c["reserve"] += 1
                else:
                    c["refused"] += 1
            elif r < 0.8:
                key = rng.choice(list(mine))
                est = mine.pop(key)
                actual = est * rng.choice([rng.random(), 1.0, 0.0])  # never above the reservation
                led.settle(key, actual)
                settled[tid].append(actual)
                c["settle"] += 1
            else:
                key = rng.choice(list(mine))
                del mine[key]
                led.release(key)
                c["release"] += 1
            check(f"thread {tid} op {op}")
        for key in list(mine):
            led.release(key)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        chk = threading.Thread(target=checker)
        chk.start()
        threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stop.set()
        chk.join()
    finally:
        sys.setswitchinterval(old)
    assert not violations, violations[:3]
    total = sum(sum(s) for s in settled)
    n_settles = sum(c["settle"] for c in counts)
    assert led.reserved == 0.0 and led.in_flight == 0
    assert led.spent == pytest.approx(total, abs=1e-9)
    assert led.spent <= cap
    assert led.n_settled == n_settles == len(led.charges())
    assert led.n_refused == sum(c["refused"] for c in counts) > 0  # the cap did bind
    assert led.overshoot_usd == 0.0


def test_upper_estimate_and_actual_cost():
    price = Price.per_million(1.0, 3.0, "test")
    up = upper_estimate(price, 1000, 500)
    assert up == pytest.approx(1000e-6 + 500 * 3e-6)
    assert upper_estimate(price, 1000, 500, margin=1.2) == pytest.approx(1.2 * up)
    usage = {"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200}
    act = actual_cost(price, usage)
    assert act == pytest.approx(1000e-6 + 200 * 3e-6)
    assert act <= up  # the output can never exceed max_output_tokens
    assert actual_cost(price, SimpleNamespace(prompt_tokens=1000, completion_tokens=200)) == act
    assert actual_cost(price, {"input_tokens": 1000, "output_tokens": 200}) == act
    with pytest.raises(ValueError, match="completion_tokens"):
        actual_cost(price, {"prompt_tokens": 10})
    with pytest.raises(ValueError):
        actual_cost(price, None)
    with pytest.raises(ValueError):
        actual_cost(price, {"prompt_tokens": -1, "completion_tokens": 2})
    with pytest.raises(ValueError, match="max_output_tokens"):
        upper_estimate(price, 10, None)
    with pytest.raises(ValueError):
        upper_estimate(price, 10, 10, margin=0.5)


def test_reserve_settle_protocol_with_concurrent_calls():
    """The documented protocol: an upper estimate reserved, the real usage settled; the cap holds."""
    price = Price.per_million(2.0, 8.0, "test")
    cap = 0.05
    led = BudgetLedger(cap)
    made = []
    lock = threading.Lock()

    def caller(tid):
        rng = random.Random(tid)
        for j in range(200):
            inp, max_out = rng.randint(50, 500), 256
            key = (tid, j)
            if not led.reserve(key, upper_estimate(price, inp, max_out)):
                continue
            if rng.random() < 0.1:
                led.release(key)  # the call failed before anything was billed
                continue
            usage = {"prompt_tokens": inp, "completion_tokens": rng.randint(0, max_out)}
            led.settle(key, actual_cost(price, usage))
            with lock:
                made.append(actual_cost(price, usage))

    threads = [threading.Thread(target=caller, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert led.spent <= cap and led.overshoot_usd == 0.0 and led.reserved == 0.0
    assert led.spent == pytest.approx(sum(made), abs=1e-9)
    assert led.n_refused > 0 and len(made) > 10

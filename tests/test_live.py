"""LiveRun: the live driver of the ranker, with simulated callers (no harness, no HTTP).

Checked: the hard cap with many calls in flight; settling at the reported usage; retries of
retryable errors only, with backoff; a model that keeps failing is dropped while the others
finish; Ctrl-C keeps the journal intact; resume after a crash requests nothing twice and
reaches the same ranking; multi-request ranker bookkeeping (release, fail, max_in_flight).
"""

from __future__ import annotations

import collections
import functools
import threading

import numpy as np
import pytest
from conftest import make_sim_bank, simulate_scores

from lm_eval_adaptive.engine.cat.estimation import GridEAP
from lm_eval_adaptive.engine.ranking.ranker import AdaptiveRanker, default_judgement
from lm_eval_adaptive.engine.cat.selection import MaxInfoSelector
from lm_eval_adaptive.engine.ranking.pairs.settle_policy import SettlePolicy
from lm_eval_adaptive.harness.scorer import ItemScore, parse_model_spec
from lm_eval_adaptive.live.driver import LiveRun, RetryPolicy, is_retryable
from lm_eval_adaptive.live.journal import Journal
from lm_eval_adaptive.live.ledger import BudgetLedger

THETAS = {"a": 1.5, "b": 0.0, "c": -1.5}
PRICE_IN, PRICE_OUT = 1e-6, 3e-6  # USD per token


class HTTPError(Exception):
    def __init__(self, status):
        super().__init__(f"HTTP {status}")
        self.status_code = status


class Caller:
    """A model answering with simulated scores; usage in tokens; optional faults; counts calls."""

    def __init__(self, bank, theta, seed, *, fail=None):
        self.bank, self.theta = bank, theta
        self.rng = np.random.default_rng(seed)
        self.fail = fail  # fail(item_id, attempt) -> exception or None
        self.calls = collections.Counter()
        self.served = collections.Counter()
        self.lock = threading.Lock()

    def __call__(self, item_id):
        with self.lock:
            self.calls[item_id] += 1
            attempt = self.calls[item_id]
        if self.fail is not None:
            e = self.fail(item_id, attempt)
            if e is not None:
                raise e
        i = int(self.bank.index_of([item_id])[0])
        # deterministic per item: the same answer whenever asked
        y = float(simulate_scores(self.theta, self.bank.b[i], rng=np.random.default_rng(hash(item_id) % 2**32)))
        with self.lock:
            self.served[item_id] += 1
        return ItemScore(raw=y, usage=[{"prompt_tokens": 100, "completion_tokens": 40 + i % 20}], calls=1)


def make_live(bank, *, budget=None, journal=None, callers=None, in_flight=1, retry=None, max_failures=3,
              models=THETAS, n_init=5, judgement=None):
    costs = {m: np.full(bank.n_items, 100 * PRICE_IN + 50 * PRICE_OUT) for m in models}
    ranker = AdaptiveRanker(bank, list(models), item_costs=costs, n_init=n_init, n_max=60, budget=budget,
                            seed=0, max_in_flight=in_flight, judgement=judgement)
    callers = callers or {m: Caller(bank, t, k) for k, (m, t) in enumerate(models.items())}
    ledger = BudgetLedger(budget)

    def actual(m, score):
        u = score.usage[0]
        return u["prompt_tokens"] * PRICE_IN + u["completion_tokens"] * PRICE_OUT

    live = LiveRun(ranker, callers, upper_cost=lambda m, i: 100 * PRICE_IN + 60 * PRICE_OUT,
                   actual_cost=actual, scale=lambda i, raw: raw, ledger=ledger, journal=journal,
                   retry=retry or RetryPolicy(max_attempts=4, base_s=0.0), max_failures=max_failures)
    return live, callers


@pytest.fixture
def bank():
    return make_sim_bank(n_items=300, seed=3)


def test_runs_to_a_settled_ranking_with_one_charge_per_item(bank, tmp_path):
    j = Journal.create(tmp_path, {"run": "t"})
    live, callers = make_live(bank, journal=j)
    live.run()
    res = live.ranker.result()
    assert res.ranking == ["a", "b", "c"] and res.stopped_because == "settled"
    scores = list(j.records("score"))
    assert len(scores) == res.total_items == live.ledger.n_settled
    assert all(max(c.calls.values()) == 1 for c in callers.values())
    assert live.ledger.spent == pytest.approx(sum(r["cost_usd"] for r in scores))
    assert [r["type"] for r in j.records()][-1] == "stop"


@pytest.mark.parametrize("in_flight", [1, 3])
def test_hard_cap_holds_with_many_calls_in_flight(bank, in_flight):
    budget = 0.01  # ~ 28 items at 3.5e-4 each
    close = {"a": 0.1, "b": 0.0, "c": -0.1}  # never settles: the budget must stop it
    # no stopping policy: whether it gives the close pairs up before the cap depends on which answers are
    # in when (the threads' timing); here only the cap may stop the run
    no_policy = functools.partial(default_judgement, policy=SettlePolicy(None, None))
    live, _ = make_live(bank, budget=budget, in_flight=in_flight, models=close, judgement=no_policy)
    live.run(workers=8)
    res = live.ranker.result()
    assert res.stopped_because == "budget"
    assert live.ledger.spent <= budget
    assert live.ledger.overshoot_usd == 0
    assert res.total_cost == pytest.approx(live.ledger.spent)
    assert res.total_items >= 20


def test_several_requests_in_flight_per_model(bank):
    r = AdaptiveRanker(bank, ["a", "b"], n_init=4, seed=0, max_in_flight=3)
    reqs = [r.ask() for _ in range(6)]
    assert all(q is not None for q in reqs)
    assert collections.Counter(q.model for q in reqs) == {"a": 3, "b": 3}
    assert r.ask() is None  # both at capacity
    assert len({(q.model, q.item) for q in reqs}) == 6
    # release: the item goes back to the pool and is asked again
    r.release(reqs[0])
    again = r.ask()
    assert (again.model, again.item) == (reqs[0].model, reqs[0].item)
    from lm_eval_adaptive.engine.ranking.ranker_state import Request

    with pytest.raises(ValueError):
        r.release(Request(model="a", item=-5, item_id="x", cost=0.0, phase="warmup"))  # never asked
    r.fail("b", "gone")
    assert all(k[0] != "b" for k in r.pending)
    for q in [again] + [q for q in reqs[1:] if q.model == "a"]:
        r.tell(q, 0.5)
    assert r.ask() is None and r.finished and r.stopped_because == "failed"
    res = r.result()
    assert res.ranking == ["a"] and res.failed == {"b": "gone"} and res.items["b"] == 0


def test_retryable_errors_are_retried_with_backoff_and_charged_once(bank):
    fail = lambda item, attempt: HTTPError(429 if attempt % 2 else 503) if attempt <= 2 else None  # noqa: E731
    callers = {m: Caller(bank, t, k, fail=fail) for k, (m, t) in enumerate(THETAS.items())}
    delays = []

    class Policy(RetryPolicy):
        def wait_strategy(self):
            inner = super().wait_strategy()

            def wait(state):
                delays.append((state.attempt_number, inner(state)))
                return 0.0

            return wait

    live, _ = make_live(bank, callers=callers, retry=Policy(max_attempts=4, base_s=0.5, cap_s=30))
    live.run()
    res = live.ranker.result()
    assert res.ranking == ["a", "b", "c"]
    n = res.total_items
    assert live.retries == 2 * n and live.attempts == 3 * n
    assert all(set(c.served.values()) == {1} for c in callers.values())  # one success per item
    assert live.ledger.n_settled == n
    # exponential backoff with full jitter: after attempt k fails, wait at most base·2^(k-1)
    assert all(0 <= d <= 0.5 * 2 ** (k - 1) for k, d in delays)
    assert {k for k, _ in delays} == {1, 2}


def test_retry_policy_delays_grow_and_are_capped():
    import random

    from tenacity import RetryCallState, Retrying

    wait = RetryPolicy(base_s=1.0, cap_s=8.0).wait_strategy()
    random.seed(1)
    samples = []
    for k in range(1, 7):
        state = RetryCallState(Retrying(), fn=None, args=(), kwargs={})
        state.attempt_number = k
        samples.append([wait(state) for _ in range(2000)])
    samples = np.array(samples)
    assert samples.min() >= 0 and samples.max() <= 8.0
    means = samples.mean(axis=1)
    np.testing.assert_allclose(means[:4], [0.5, 1.0, 2.0, 4.0], rtol=0.08)  # uniform(0, 2^(k-1))
    assert means[5] == pytest.approx(4.0, rel=0.08)  # capped at 8 → mean 4


def test_error_classes():
    assert is_retryable(HTTPError(429)) and is_retryable(HTTPError(500)) and is_retryable(HTTPError(503))
    assert not is_retryable(HTTPError(400)) and not is_retryable(HTTPError(401)) and not is_retryable(HTTPError(404))
    assert is_retryable(ConnectionError("reset")) and is_retryable(TimeoutError())
    import requests

    assert is_retryable(requests.exceptions.ConnectionError("Connection aborted."))
    assert not is_retryable(ValueError("bad prompt"))


def test_a_missing_api_key_is_not_retried_though_litellm_calls_it_a_500(monkeypatch):
    import litellm

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(Exception) as err:  # the real client error, raised before any connection
        litellm.completion(model="openai/x", api_base="http://127.0.0.1:9/v1", max_retries=0,
                           messages=[{"role": "user", "content": "hi"}])
    assert type(err.value).__name__ == "InternalServerError" and err.value.status_code == 500
    assert not is_retryable(err.value)


def test_a_model_that_keeps_failing_is_dropped_while_the_others_finish(bank, tmp_path):
    callers = {m: Caller(bank, t, k) for k, (m, t) in enumerate(THETAS.items())}
    callers["b"].fail = lambda item, attempt: HTTPError(401)  # bad key: no retry can fix it
    j = Journal.create(tmp_path, {"run": "t"})
    live, _ = make_live(bank, callers=callers, journal=j, max_failures=3)
    live.run()
    res = live.ranker.result()
    assert res.ranking == ["a", "c"] and "b" in res.failed and "401" in res.failed["b"]
    assert res.stopped_because == "settled"
    assert sum(callers["b"].calls.values()) == 3  # not retried, dropped after 3 in a row
    assert live.ledger.spent == pytest.approx(sum(r["cost_usd"] for r in j.records("score")))
    assert [r["model"] for r in j.records("model_failed")] == ["b"]


def test_ctrl_c_finishes_calls_in_flight_and_keeps_the_journal(bank, tmp_path):
    j = Journal.create(tmp_path, {"run": "t"})
    live, callers = make_live(bank, journal=j)
    fired = []

    def progress(run):  # Ctrl-C once 6 items are scored (warm-up alone is 15)
        if not fired and sum(e.n for e in run.ranker.examinees.values()) >= 6:
            fired.append(1)
            raise KeyboardInterrupt

    live.on_progress = progress
    live.run()
    assert fired and live.interrupted and live.ranker.result().total_items < 15
    j.close()
    j2 = Journal.open(tmp_path)
    recs = list(j2.records())
    assert recs[-1]["type"] == "stop" and recs[-1]["reason"] == "interrupted"
    assert {(r["model"], r["item_id"]) for r in j2.records("request")} == j2.completed_keys() | {
        (r["model"], r["item_id"]) for r in j2.records("failure")}


def test_resume_after_a_crash_requests_nothing_twice(bank, tmp_path):
    # the uninterrupted run
    ref, _ = make_live(bank, journal=Journal.create(tmp_path / "ref", {"run": "t"}))
    ref.run()
    want = ref.ranker.result()
    # a run that dies after 25 journal records (kill -9: no stop record, calls in flight lost)
    src = tmp_path / "ref" / "journal.jsonl"
    crash = tmp_path / "crash"
    crash.mkdir()
    lines = src.read_bytes().split(b"\n")
    (crash / "journal.jsonl").write_bytes(b"\n".join(lines[:26]) + b"\n")
    callers = {m: Caller(bank, t, k) for k, (m, t) in enumerate(THETAS.items())}
    j = Journal.open(crash)
    first_calls = collections.Counter((r["model"], r["item_id"]) for r in j.records("request"))
    live, _ = make_live(bank, journal=j, callers=callers)
    info = live.resume_from(j)
    assert info["scores"] == len(list(j.records("score"))) and info["lost_in_flight"] >= 1
    live.run()
    got = live.ranker.result()
    assert got.ranking == want.ranking and got.stopped_because == "settled"
    again = {(m, i) for m, c in callers.items() for i in c.calls} & set(first_calls)
    assert not again  # nothing requested in the first process is requested again
    # lost in-flight calls are counted at their reservation; no key charged twice
    keys = [k for k, _ in live.ledger.charges()]
    assert len(keys) == len(set(keys))


def test_model_spec_parsing():
    s = parse_model_spec("litellm:model=gpt-4o-mini,num_concurrent=2")
    assert (s.type, s.name, s.model_id) == ("litellm", "gpt-4o-mini", "gpt-4o-mini")
    s = parse_model_spec("GPT-4=litellm:model=openai/GPT-4")
    assert (s.type, s.name, s.model_id, s.args) == ("litellm", "GPT-4", "openai/GPT-4", "model=openai/GPT-4")
    s = parse_model_spec("local-chat-completions:model=X,base_url=http://h:1/v1/chat/completions")
    assert (s.type, s.name) == ("local-chat-completions", "X")
    from lm_eval_adaptive.errors import InputError

    for bad in ("gpt-4o", "litellm:", ":model=x"):
        with pytest.raises(InputError):
            parse_model_spec(bad)


def test_rank_command_errors_name_the_bad_input(tmp_path, capsys):
    from lm_eval_adaptive.cli.main import main
    from lm_eval_adaptive.data.price_map import parse_prices
    from lm_eval_adaptive.errors import InputError

    base = ["rank", "--models", "litellm:model=a", "litellm:model=b", "--tasks", "t", "--bank", "b.json"]
    assert main(base) == 2
    assert "--output" in capsys.readouterr().err
    assert main(["rank", "--resume", str(tmp_path / "nothing")]) == 2
    assert "run.json" in capsys.readouterr().err
    assert main(["rank", "--models", "litellm:model=a", "--tasks", "t", "--bank", "b.json",
                 "--output", str(tmp_path / "o1")]) == 2
    assert "at least 2" in capsys.readouterr().err
    assert main(base[:-4] + ["--tasks", "t1,t2", "--bank", "b.json", "--output", str(tmp_path / "o2")]) == 2
    assert "with several tasks write TASK=PATH" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:  # refused while the command line is parsed
        main(base + ["--output", str(tmp_path / "o3"), "--budget-usd", "-1"])
    assert exit_.value.code == 2 and "--budget-usd" in capsys.readouterr().err
    assert not (tmp_path / "o3").exists()
    with pytest.raises(InputError, match="MODEL=IN,OUT"):
        parse_prices(["gpt=1"])
    p = parse_prices(["org/m=0.5,1.5"])["org/m"]
    assert p.input_per_mtok == pytest.approx(0.5) and p.output_per_mtok == pytest.approx(1.5)
    # an existing run is never overwritten
    (tmp_path / "o4").mkdir()
    (tmp_path / "o4" / "journal.jsonl").write_text("{}\n")
    assert main(base + ["--output", str(tmp_path / "o4")]) == 2
    assert "--resume" in capsys.readouterr().err


def test_refresh_errors_leave_the_leaderboard_untouched(tmp_path, capsys):
    from lm_eval_adaptive.cli.main import main

    bad = tmp_path / "lb.json"
    bad.write_text('{"format": "something-else"}')
    assert main(["refresh", "--leaderboard", str(bad), "--add", "litellm:model=x", "--budget-usd", "1"]) == 2
    assert "not a leaderboard" in capsys.readouterr().err
    assert bad.read_text() == '{"format": "something-else"}'
    assert main(["refresh", "--leaderboard", str(tmp_path / "none.json"), "--add", "litellm:model=x",
                 "--budget-usd", "1"]) == 2


def test_no_money_on_a_pair_only_the_blocked_partner_can_settle(bank):
    def warmed(precise):
        # maximum information and plain posterior SEs: the SEs below are what these scores make them; no
        # stopping policy, so what ends buying is the blocked partner alone
        r = AdaptiveRanker(bank, ["a", "b"], n_init=2, seed=0, estimator=GridEAP(),
                           selector=MaxInfoSelector(bank.b),
                           judgement=functools.partial(default_judgement, policy=SettlePolicy(None, None)))
        for _ in range(4):
            q = r.ask()
            r.tell(q, 0.5 if q.model == "a" else 0.45)
        other = "b" if precise == "a" else "a"
        t = r.examinees[other].theta
        # `precise` gets a small SE next to the other model: 200 items near it, scored as a
        # model just above the other would score them on average
        free = np.flatnonzero(~r.examinees[precise].taken())
        items = free[np.argsort(np.abs(bank.b[free] - t))[:200]]
        r.record_many(precise, items, bank.model.mean(t + 0.05, bank.b[items]))
        assert r.examinees[precise].se < 0.05 < r.examinees[other].se
        return r

    # b cannot be paid for now and its SE alone keeps the pair unsettled: a's items are futile
    r = warmed("a")
    r.block("b")
    assert r.ask() is None and r.finished and r.stopped_because == "budget"
    # a's own SE matters: a still gets items while b is blocked
    r = warmed("b")
    r.block("b")
    q = r.ask()
    assert q is not None and q.model == "a"


class Answered(Exception):
    """A caller's error after the provider answered: it carries the usage that was paid for."""

    def __init__(self, cause, usage):
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.cause = cause
        self.paid = ItemScore(raw=float("nan"), usage=usage, calls=len(usage))


def test_an_answered_item_whose_scoring_fails_is_charged_not_released(bank, tmp_path):
    usage = [{"prompt_tokens": 100, "completion_tokens": 50}]
    each = 100 * PRICE_IN + 50 * PRICE_OUT
    callers = {m: Caller(bank, t, k) for k, (m, t) in enumerate(THETAS.items())}
    callers["b"].fail = lambda item, attempt: Answered(ValueError("no metric 'x'"), usage)  # not retryable
    j = Journal.create(tmp_path, {"run": "t"})
    live, _ = make_live(bank, callers=callers, journal=j, max_failures=3)
    live.run()
    res = live.ranker.result()
    assert "b" in res.failed and sum(callers["b"].calls.values()) == 3  # not retried
    failures = list(j.records("failure"))
    assert [f["cost_usd"] for f in failures] == pytest.approx([each] * 3)
    assert all(f["usage"] == usage for f in failures)
    assert res.cost["b"] == pytest.approx(3 * each)  # the model's spend
    charged = [r["cost_usd"] for r in j.records() if r.get("cost_usd") is not None]
    assert live.ledger.spent == pytest.approx(sum(charged)) and live.ledger.n_settled == len(charged)
    assert live.ledger.reserved == 0


def test_a_retryable_cause_is_retried_after_an_answer(bank):
    usage = [{"prompt_tokens": 100, "completion_tokens": 50}]
    callers = {m: Caller(bank, t, k) for k, (m, t) in enumerate(THETAS.items())}
    callers["a"].fail = lambda item, attempt: Answered(HTTPError(503), usage) if attempt == 1 else None
    live, _ = make_live(bank, callers=callers)
    live.run()
    assert live.ranker.result().ranking == ["a", "b", "c"]
    assert set(callers["a"].calls.values()) == {2}  # every item of a: one failed scoring, one retry


def test_ctrl_c_cuts_a_retry_wait_short(bank):
    callers = {m: Caller(bank, t, k, fail=lambda item, attempt: HTTPError(503)) for k, (m, t) in
               enumerate(THETAS.items())}
    live, _ = make_live(bank, callers=callers, retry=RetryPolicy(max_attempts=5, base_s=60, cap_s=60))
    req = live.ranker.ask()
    import random
    import time

    random.seed(0)  # the first wait is tens of seconds
    threading.Timer(0.3, live._stop.set).start()
    t0 = time.monotonic()
    key = (req.model, req.item_id)
    live._reserved_of[key] = 1e-4  # what _dispatch does before it hands a call to a worker
    assert live.ledger.reserve((*key, 1), 1e-4)
    out = live._call(req, key)
    assert time.monotonic() - t0 < 5  # not the minute of backoff
    assert "interrupted" in str(out.error) and out.attempts == 1


def test_the_new_models_stop_names_a_pair_the_stopping_policy_gave_up():
    """A refresh's stop, of the new models alone: open pairs of theirs -> the ranker's reason; none open but
    one given up by the metric scale's stopping policy -> cost_to_settle (not 'settled'); else settled."""
    from types import SimpleNamespace

    from lm_eval_adaptive.live.leaderboard import new_models_stop

    def pair(a, b, beyond):
        return {"a": a, "b": b, "outcome": "unresolved" if beyond else "ordered", "beyond_policy": beyond}

    given_up = SimpleNamespace(open_pairs=[], pairs=[pair("x", "n", True), pair("n", "y", False)])
    assert new_models_stop(given_up, "cost_to_settle", ["n"]) == "cost_to_settle"
    assert new_models_stop(given_up, "cost_to_settle", ["y"]) == "settled"  # an anchor pair's is not theirs
    still_open = SimpleNamespace(open_pairs=[("n", "y")], pairs=[pair("n", "y", False)])
    assert new_models_stop(still_open, "budget", ["n"]) == "budget"
    assert new_models_stop(SimpleNamespace(open_pairs=[], pairs=[pair("n", "y", False)]), "budget", ["n"]) == "settled"

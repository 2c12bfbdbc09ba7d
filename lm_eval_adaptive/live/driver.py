"""Drive the adaptive ranker live: every model in flight at once, a hard dollar cap, a crash-safe journal.

:class:`LiveRun` knows nothing of the harness or of HTTP: it is given, per model, a
*caller* — ``caller(item_id) -> ItemScore`` (the harness task wrapper in production, any
function in simulation) — and an upper cost estimate per item, and it drives an
:class:`~lm_eval_adaptive.engine.ranking.ranker.AdaptiveRanker` to the end:

1. ``ranker.ask()`` gives the next (model, item); the call's UPPER cost is reserved in the
   :class:`~lm_eval_adaptive.live.ledger.BudgetLedger` (refused → the request is released and the
   run waits for calls in flight; none in flight → the run stops on the budget), a
   ``request`` record is journaled, and the call goes to a worker thread.
2. A worker makes the call, retrying 429s, timeouts, dropped connections and 5xx with
   exponential backoff and full jitter (:class:`RetryPolicy`, tenacity); a wait is cut short
   when the run is interrupted. Every attempt is a paid call of its own, charged in the
   ledger as soon as it ends: an answered attempt at the usage the provider returned (the
   model's calls and any judge's), a failed one at the usage of what was answered
   (``error.paid``: the model answered but scoring failed), or, when the request was sent
   and its answer never read (a read timeout, a dropped connection), or answered with a success
   status and a body the client could not read (cut-off JSON, an unasked-for event stream, a
   usage that is no count: :func:`may_have_been_billed`), at its whole reservation, since the
   provider bills what it finished even when the client gave up; an answered item whose calls
   reported no usage to bill from (none, or zero for a non-empty answer) at its reservation too,
   with a warning naming the model and the count; nothing when it was never sent or the provider
   answered with an error status (4xx, 429, 5xx). A retry is sent only once its own
   reservation (key ``(model, item_id, attempt)``) fits under the cap (else the item fails
   with :class:`BudgetRefused`) and the failed attempt before it is journaled with its
   cost (an ``attempt`` record). The SDKs' own retries are off: every retry is ours.
3. Back on the driver thread the outcome is appended to the journal (fsynced; its
   ``cost_usd`` is the last attempt's charge) and only then told to the ranker: a score
   counts once it is on disk. A call that failed for good is journaled as a ``failure``
   and its item given up for that model. A model whose calls fail ``max_failures`` times
   in a row is dropped and reported as failed while the others finish (a retry the cap
   refused is not the model's failure).
4. Ctrl-C stops asking, waits for the calls in flight (their results are journaled: they were
   paid for), writes a ``stop`` record and returns the partial result. On the main thread the
   first Ctrl-C is caught by the run's own SIGINT handler and acted on between two steps, so it
   never cuts short the journaling of an answer that came back.
   A second Ctrl-C aborts at once: the workers are daemon threads, so a call that hangs
   does not hold the process (the journal stays valid; ``--resume`` counts such a call as
   lost in flight).

With a bank per metric the ranker is a
:class:`~lm_eval_adaptive.engine.ranking.multi_metric_ranker.MultiMetricRanker`: each call generates one
document, the caller's ``raw`` is metric → value, ``scale`` maps each, and the journal's score record
holds every metric's raw and scaled score of that one generation; nothing else changes.

Resume (:meth:`LiveRun.resume_from`, :mod:`lm_eval_adaptive.live.run_resume`): score and failure
records are replayed into a fresh ranker without calling anything, their costs and those of the
``attempt`` records (failed attempts charged before a retry) enter the ledger as known charges, once
each, and calls that were in flight when the process died (a ``request`` record with no outcome) are
not made again: their items are given up for that model and their reserved upper estimate is
counted as spent (the provider may have billed them).
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import math
import queue
import signal
import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from lm_eval_adaptive.display import SHOWN_LOG_FILTER
from lm_eval_adaptive.engine.ranking.ranker import AdaptiveRanker
from lm_eval_adaptive.engine.ranking.ranker_state import Request
from lm_eval_adaptive.errors import error_line
from lm_eval_adaptive.harness.billing import ModelFailed, RetryPolicy, is_retryable, may_have_been_billed
from lm_eval_adaptive.live.journal import Journal, redact
from lm_eval_adaptive.live.ledger import BudgetLedger
from lm_eval_adaptive.live.run_resume import raw_value, resume_run

__all__ = ["LiveRun", "RetryPolicy", "is_retryable", "may_have_been_billed", "ModelFailed", "BudgetRefused"]

log = logging.getLogger("lm_eval_adaptive")
log.addFilter(SHOWN_LOG_FILTER)  # names in messages shown escaped


class _Interrupted(Exception):
    """The run was interrupted while a call waited for its retry."""


class BudgetRefused(ModelFailed):
    """A retry was not sent: its reservation did not fit under the cap (the money went on the
    attempts before it, and on the other calls)."""


class _DaemonPool:
    """Worker threads that never hold the process up.

    ``concurrent.futures.ThreadPoolExecutor`` joins its workers when the interpreter exits,
    so a call hanging in a provider kept the process alive after a second Ctrl-C; these
    daemon workers do not. ``submit`` returns a ``concurrent.futures.Future``.
    """

    def __init__(self, max_workers: int, name: str):
        self._n = max(1, int(max_workers))
        self._name = name
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []

    def submit(self, fn, *args) -> cf.Future:
        f: cf.Future = cf.Future()
        self._q.put((f, fn, args))
        if len(self._threads) < self._n:
            t = threading.Thread(target=self._work, name=f"{self._name}_{len(self._threads)}", daemon=True)
            t.start()
            self._threads.append(t)
        return f

    def _work(self) -> None:
        while True:
            job = self._q.get()
            if job is None:
                return
            f, fn, args = job
            if not f.set_running_or_notify_cancel():
                continue
            try:
                f.set_result(fn(*args))
            except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
                f.set_exception(e)

    def shutdown(self, *, wait: bool = True, cancel_futures: bool = False) -> None:
        if cancel_futures:
            while True:
                try:
                    job = self._q.get_nowait()
                except queue.Empty:
                    break
                if job is not None:
                    job[0].cancel()
        for _ in self._threads:
            self._q.put(None)
        if wait:
            for t in self._threads:
                t.join()


def _judge_fields(score, judge_usd) -> dict:
    """The journal fields of the judge calls made to score an item (none when there were none)."""
    calls = getattr(score, "judge", None) or []
    if not calls:
        return {}
    return {"judge_cost_usd": judge_usd,
            "judge_usage": [{"model": c.model, "usage": c.usage} for c in calls]}


@dataclass
class _Outcome:
    request: Request
    key: tuple  # (model, item_id)
    score: object = None  # ItemScore
    error: BaseException | None = None
    attempts: int = 0
    seconds: float = 0.0
    charge: float | None = None  # what the last attempt was charged (None: nothing)
    judge: float = 0.0  # the judge's part of the answered calls' cost
    earlier: float = 0.0  # what the earlier attempts were charged (each journaled as an ``attempt``)
    last_billed: bool = False  # the last failed attempt may have been billed
    billed_failures: int = 0  # attempts that failed after the request was sent and were charged
    billed_failures_usd: float = 0.0


class LiveRun:
    """One live ranking run (see module docstring).

    Parameters
    ----------
    ranker: the engine (an :class:`AdaptiveRanker`, or a ``MultiMetricRanker`` with a bank per metric),
        built with per-model ``item_costs`` (bank estimates for planning), the budget and ``max_in_flight``.
    callers: model → ``caller(item_id) -> ItemScore`` (with ``.raw``, metric → value with a bank per
        metric, and ``.usage``).
    upper_cost: ``upper_cost(model, item_id) -> USD`` no call for that item can exceed.
    actual_cost: ``actual_cost(model, ItemScore) -> USD`` from the provider's usage (the
        model's calls and any judge's).
    judge_cost: ``judge_cost(model, ItemScore) -> USD``, the judge's part of it (reported apart).
    scale: ``scale(item_index, raw) -> scaled score in [0, 1]`` (metric → scaled score with a bank per
        metric, None where a metric has none).
    ledger: the hard cap (shared by every thread).
    journal: where every request, score, failure and stop goes (None: not journaled).
    """

    def __init__(self, ranker: AdaptiveRanker, callers: Mapping[str, Callable], *,
                 upper_cost: Callable[[str, str], float], actual_cost: Callable[[str, object], float],
                 scale: Callable[[int, float], float], ledger: BudgetLedger, journal: Journal | None = None,
                 retry: RetryPolicy | None = None, max_failures: int = 3,
                 on_progress: Callable[["LiveRun"], None] | None = None, secrets=(),
                 judge_cost: Callable[[str, object], float] | None = None):
        missing = [m for m in ranker.models if m not in callers]
        if missing:
            raise ValueError(f"no caller for model(s) {missing}")
        self.ranker = ranker
        self.callers = dict(callers)
        self.upper_cost = upper_cost
        self.actual_cost = actual_cost
        self.judge_cost = judge_cost
        self.scale = scale
        self.ledger = ledger
        self.journal = journal
        self.retry = retry or RetryPolicy()
        self.max_failures = int(max_failures)
        self.on_progress = on_progress
        self.secrets = list(secrets)
        self.raw: dict[str, dict[int, float]] = {m: {} for m in ranker.models}
        self.failures: dict[str, int] = {m: 0 for m in ranker.models}  # consecutive
        self.failed_calls: dict[str, int] = {m: 0 for m in ranker.models}
        self.judge_spent: dict[str, float] = {m: 0.0 for m in ranker.models}
        self.attempts = 0
        self.retries = 0
        self.billed_failures = 0  # attempts charged though they failed (timeouts, dropped connections)
        self.billed_failures_usd = 0.0
        self.lost_in_flight: list[tuple[str, str, float]] = []
        #: model → answered items whose calls reported no usage to bill from (each charged its reservation)
        self.unknown_usage: dict[str, int] = {m: 0 for m in ranker.models}
        self.unknown_usage_usd: dict[str, float] = {m: 0.0 for m in ranker.models}
        self.interrupted = False
        self._ctrl_c = threading.Event()  # the first Ctrl-C, caught by the run's SIGINT handler
        self._stop = threading.Event()
        self._reserved_of: dict[tuple, float] = {}
        self._usage_unknown: set[tuple] = set()  # calls in flight some of whose answers had no usage to bill from

    # ------------------------------------------------------------------ resume
    def resume_from(self, journal: Journal) -> dict:
        """Replay ``journal`` (of an earlier process of this run) into the fresh ranker
        (:func:`~lm_eval_adaptive.live.run_resume.resume_run`)."""
        return resume_run(self, journal)

    # --------------------------------------------------------------------- run
    def _journal(self, record: dict) -> None:
        if self.journal is not None:
            self.journal.append(record)

    def _call(self, req: Request, key: tuple) -> _Outcome:
        """Make the call of ``req`` in a worker thread: every attempt is a paid call of its own.

        Attempt 1 was reserved by :meth:`_dispatch`. Each attempt is charged as soon as it ends
        (the ledger is thread-safe): an answered attempt at the usage the provider reported
        (the part not charged before: a retry re-uses earlier answers), a failed one at the
        usage of what was answered, or at its whole reservation when the request was sent and
        never answered (:func:`may_have_been_billed`: the provider may have billed it). Before
        a retry is sent, a new reservation (key ``(model, item_id, attempt)``) must fit under
        the cap, else the item fails with :class:`BudgetRefused`; then the failed attempt is
        journaled (an ``attempt`` record with its cost, so a resume counts it once) and the
        retry is sent. The last attempt's charge is journaled by :meth:`_finish`.
        """
        out = _Outcome(request=req, key=key)
        t0 = time.monotonic()
        caller = self.callers[req.model]
        m, item_id = key
        est = self._reserved_of[key]
        known = [0.0]  # the answered calls' cost charged so far (scores carry every answer's usage)
        last: list = [None, None]  # the last failed attempt's error and its journal record

        def sleep(seconds: float) -> None:  # Ctrl-C cuts a wait short, and no retry follows
            if self._stop.wait(seconds):
                raise _Interrupted

        def before_sleep(state) -> None:
            e = state.outcome.exception()
            log.info("%s, item %s: %s; retry %d in %.2fs", req.model, req.item_id,
                     redact(error_line(e), self.secrets)[:300], state.attempt_number,
                     state.next_action.sleep if state.next_action else 0.0)

        def failed(n: int, e: BaseException) -> None:  # charge the failed attempt n at once
            paid = getattr(e, "paid", None)
            usd = judge = 0.0
            if paid is not None:  # answered, then scoring failed: what was answered is paid for
                total, judge = self._cost(m, paid, key)
                usd = max(0.0, total - known[0])
                known[0] = max(known[0], total)
            billed = out.last_billed = may_have_been_billed(e)
            if billed:  # sent, never answered: the provider may have billed it whole
                usd = max(usd, est)
                out.billed_failures += 1
                out.billed_failures_usd += usd
            if usd > 0 or billed:
                self.ledger.settle((m, item_id, n), usd)
                out.charge = usd
            else:
                self.ledger.release((m, item_id, n))
                out.charge = None
            out.judge = judge
            why = redact(error_line(e), self.secrets)[:500]
            last[0] = e
            last[1] = {"type": "attempt", "model": m, "item_id": item_id, "attempt": n, "error": why,
                       "cost_usd": out.charge, "may_have_been_billed": billed,
                       **({"usage": list(paid.usage or []), **_judge_fields(paid, judge)} if paid is not None
                          else {})}

        try:
            for attempt in self.retry.retrying(sleep=sleep, before_sleep=before_sleep):
                with attempt:
                    n = out.attempts = attempt.retry_state.attempt_number
                    if n > 1:  # a retry is a new paid call: its reservation first, then the record
                        if not self.ledger.reserve((m, item_id, n), est):
                            raise BudgetRefused(
                                f"retry {n} not sent: its reservation of ${est:.6g} does not fit under the "
                                f"cap (spent ${self.ledger.spent:.6g} of ${self.ledger.cap:.6g})")
                        try:
                            self._journal({**last[1], "retry_reserved_usd": est})
                        except BaseException:
                            self.ledger.release((m, item_id, n))
                            raise
                        out.earlier += out.charge or 0.0
                        out.charge, out.judge, last[1] = None, 0.0, None
                    try:
                        score = caller(req.item_id)
                    except BudgetRefused:
                        raise
                    except Exception as e:
                        failed(n, e)
                        raise
                    total, out.judge = self._cost(m, score, key)
                    out.charge = max(0.0, total - known[0])
                    self.ledger.settle((m, item_id, n), out.charge)
                    out.score = score
        except BudgetRefused as e:
            out.attempts -= 1  # the refused retry was never sent
            out.error = e
            paid = getattr(last[0], "paid", None)
            if paid is not None:
                e.paid = paid
        except _Interrupted:
            out.error = ModelFailed("interrupted before a retry")
            paid = getattr(last[0], "paid", None)
            if paid is not None:  # the answers of the last attempt were paid for
                out.error.paid = paid
        except Exception as e:  # noqa: BLE001 - classified in _finish
            out.error = e
        out.seconds = time.monotonic() - t0
        return out

    def _cost(self, m: str, score, key: tuple) -> tuple[float, float]:
        """(USD, judge's USD) of an answered item; its reservation when some call reported no usage to
        bill from (none, zero for a non-empty answer, not a count: the provider answered, so it billed;
        counted per model in :attr:`unknown_usage`, and said in a warning naming the model and the count)."""
        try:
            cost = float(self.actual_cost(m, score))
        except (ValueError, TypeError) as e:  # no usage to bill from: charge the reservation
            usd = self._reserved_of[key]
            self._usage_unknown.add(key)
            log.info("%s, item %s: %s; charged its reservation $%.6g", m, key[1], e, usd)
            return usd, 0.0
        judge = 0.0
        if self.judge_cost is not None:
            try:
                judge = float(self.judge_cost(m, score))
            except (ValueError, TypeError):
                judge = 0.0
        return cost, judge

    def _dispatch(self, pool, futures) -> bool:
        """Ask the ranker for everything it wants now; False when the budget refused some call."""
        r = self.ranker
        refused = False
        while not self._stop.is_set() and (req := r.ask()) is not None:
            key = (req.model, req.item_id)
            est = float(self.upper_cost(req.model, req.item_id))
            if not self.ledger.reserve((*key, 1), est):  # each attempt of a call is reserved apart
                # this model's next call does not fit now: the others may still buy cheaper
                # calls; it is asked again once a call in flight settles and frees money
                r.release(req)
                r.block(req.model)
                refused = True
                continue
            self._reserved_of[key] = est
            try:
                self._journal({"type": "request", "model": req.model, "item_id": req.item_id,
                               "phase": req.phase, "reserved_usd": est})
            except BaseException:
                self.ledger.release((*key, 1))
                r.release(req)
                raise
            futures[pool.submit(self._call, req, key)] = key
        return not refused

    def _finish(self, out: _Outcome) -> None:
        """Journal the outcome of a call (charged in the ledger by :meth:`_call`) and tell the ranker."""
        r, req, m = self.ranker, out.request, out.request.model
        unknown = out.key in self._usage_unknown
        self._usage_unknown.discard(out.key)
        self.attempts += out.attempts
        self.retries += max(0, out.attempts - 1)
        self.billed_failures += out.billed_failures
        self.billed_failures_usd += out.billed_failures_usd
        if out.earlier > 0:  # failed attempts charged (and journaled) before their retries
            r.charge(m, out.earlier)
        if out.error is None:
            cost, judge = out.charge or 0.0, out.judge
            raw = raw_value(out.score.raw)
            scaled = self.scale(req.item, raw)
            scaled = float(scaled) if not isinstance(scaled, Mapping) else {
                k: (None if v is None or not math.isfinite(v) else float(v)) for k, v in scaled.items()}
            self.judge_spent[m] += judge
            self._journal({"type": "score", "model": m, "item_id": req.item_id, "raw": raw, "scaled": scaled,
                           "cost_usd": cost, "usage": list(out.score.usage or []), "attempts": out.attempts,
                           "seconds": round(out.seconds, 4), **_judge_fields(out.score, judge),
                           **({"usage_unknown": True} if unknown else {})})
            if unknown:
                self._count_unknown_usage(m, cost)
            if r.is_pending(req):
                r.tell(req, scaled, cost=cost, raw=raw)  # the raw value: the metric scale's (scaling clips)
            else:  # the model was dropped meanwhile: paid for and journaled, not ranked
                r.charge(m, cost)
            self.raw[m][req.item] = raw
            self.failures[m] = 0
        else:
            paid = getattr(out.error, "paid", None)
            cost, judge = out.charge, out.judge
            if cost:
                r.charge(m, cost)
            if paid is not None:
                self.judge_spent[m] += judge
            why = redact(error_line(out.error), self.secrets)[:500]
            self._journal({"type": "failure", "model": m, "item_id": req.item_id, "error": why,
                           "attempts": out.attempts, "cost_usd": cost, "may_have_been_billed": out.last_billed,
                           **({"usage": list(paid.usage or []), **_judge_fields(paid, judge)} if paid is not None
                              else {}), **({"usage_unknown": True} if unknown else {})})
            if unknown:
                self._count_unknown_usage(m, cost or 0.0)
            self.failed_calls[m] += 1
            r.cancel(req)
            interrupted = isinstance(out.error, ModelFailed) and self._stop.is_set()
            if isinstance(out.error, BudgetRefused):  # the cap, not the model: not a failure of it
                log.warning("%s, item %s given up after %d attempt(s): %s", m, req.item_id, out.attempts, why)
            elif not interrupted:
                self.failures[m] += 1
                log.warning("%s, item %s failed after %d attempt(s): %s", m, req.item_id, out.attempts, why)
                if self.failures[m] >= self.max_failures and m not in r.failed:
                    r.fail(m, why)
                    self._journal({"type": "model_failed", "model": m, "error": why})
                    log.error("%s: %d calls in a row failed; dropped from the ranking (%s)", m,
                              self.failures[m], why)
        self._reserved_of.pop(out.key, None)

    def _count_unknown_usage(self, m: str, usd: float) -> None:
        self.unknown_usage[m] += 1
        self.unknown_usage_usd[m] += usd
        if self.unknown_usage[m] == 1:
            log.warning("%s: an answered call reported no usage to bill from (missing, zero for a non-empty answer, "
                        "or not a count); charged its reservation $%.6g", m, usd)

    def warn_unknown_usage(self) -> None:
        """One warning per model whose answered calls reported no usage to bill from: how many, and what
        their reservations charged."""
        for m, n in self.unknown_usage.items():
            if n:
                log.warning("%s: %d answered item(s) reported no usage to bill from; each was charged its "
                            "reservation ($%.6g in all)", m, n, self.unknown_usage_usd[m])

    def run(self, *, workers: int | None = None, pool=None) -> None:
        """Run to the end (or Ctrl-C, which sets :attr:`interrupted`); see the result on the ranker.

        ``pool`` makes the calls (``submit(fn, *args)`` → a ``concurrent.futures.Future``,
        ``shutdown(wait=, cancel_futures=)``); default: ``workers`` daemon threads. The cost forecast
        passes one that answers its calls with simulated scores, one at a time, on this thread."""
        r = self.ranker
        n_workers = workers or max(1, len(r.models) * r.max_in_flight)
        futures: dict = {}
        pool = pool if pool is not None else _DaemonPool(n_workers, "lm-eval-adaptive")
        previous = self._catch_first_ctrl_c()
        try:
            while True:
                try:
                    if self._ctrl_c.is_set():  # the first Ctrl-C, caught between two steps: finish up
                        self._interrupt(futures)
                        break
                    fits = self._dispatch(pool, futures)
                    if not futures:
                        if not r.finished:
                            if not fits:
                                r.stop("budget")
                            elif len(r.active) < 2:
                                r.stop("failed")
                            else:  # nothing asked and nothing in flight: ask once more (state changed)
                                if r.ask() is None and not r.finished:
                                    r.stop("failed" if r.failed else "bank_exhausted")
                        break
                    done, _ = cf.wait(list(futures), timeout=0.5, return_when=cf.FIRST_COMPLETED)
                    for f in [f for f in futures if f in done]:  # in the order asked: reproducible
                        self._finish(f.result())
                        del futures[f]  # (after it is journaled and told: never lost to an interrupt)
                    if done:
                        r.unblock_all()  # money was freed: every model may be asked again
                    if done and self.on_progress is not None:
                        self.on_progress(self)
                except KeyboardInterrupt:  # off the main thread, or a Ctrl-C the handler did not catch
                    if self._stop.is_set():
                        raise
                    self._interrupt(futures)
                    break
                except OSError:  # the journal took no new request (a full disk): nothing more is sent, and the
                    self._stop.set()  # calls in flight are journaled in the room it kept for them (journal_room)
                    self._drain(futures)
                    raise
        finally:
            self._restore_ctrl_c(previous)
            pool.shutdown(wait=not self._stop.is_set() or not futures, cancel_futures=True)
        self.warn_unknown_usage()
        reason = "interrupted" if self.interrupted else r.stopped_because
        self._journal({"type": "stop", "reason": reason, "spent_usd": self.ledger.spent,
                       "items": int(sum(e.n for e in r.examinees.values()))})

    def _interrupt(self, futures) -> None:
        """The first Ctrl-C: ask nothing more, wait for the calls in flight and journal them."""
        self.interrupted = True
        self._stop.set()
        log.warning("interrupted: finishing the %d call(s) in flight (Ctrl-C again to abort)", len(futures))
        self._drain(futures)

    def _drain(self, futures) -> None:
        while futures:
            done, _ = cf.wait(list(futures), timeout=0.5, return_when=cf.FIRST_COMPLETED)
            for f in [f for f in futures if f in done]:
                self._finish(f.result())
                del futures[f]

    def _catch_first_ctrl_c(self):
        """On the main thread, the first Ctrl-C only sets :attr:`_ctrl_c` (the loop finishes up at its next
        step), so it never lands in the middle of journaling an answer that came back: a paid answer is
        never dropped. The second raises KeyboardInterrupt at once (abort). Returns the handler it
        replaced (None: not on the main thread, nothing replaced)."""
        if threading.current_thread() is not threading.main_thread():
            return None

        def on_sigint(signum, frame):
            if self._ctrl_c.is_set() or self._stop.is_set():
                raise KeyboardInterrupt
            self._ctrl_c.set()
            self._stop.set()  # a retry waiting for its turn gives up now

        try:
            return signal.signal(signal.SIGINT, on_sigint)
        except ValueError:  # not allowed here (e.g. an embedded interpreter)
            return None

    @staticmethod
    def _restore_ctrl_c(previous) -> None:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)

    # ------------------------------------------------------------------ result
    def raw_scores(self, model: str, metric: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(bank indices, raw metric values) of the model's scored items, in the order given; with a bank
        per metric, those ``metric`` scored (indices into its bank)."""
        e = self.ranker.examinees[model]
        raw = self.raw[model]
        if metric is None:
            items = np.asarray(e.items, dtype=np.int64)
            vals = np.array([raw.get(int(i), math.nan) for i in items], dtype=float)
            return items, vals
        r = self.ranker
        part = r.metric_examinees(metric)[model]
        joint = {r.bank_item(metric, j): j for j in e.items}
        items = np.asarray(part.items, dtype=np.int64)
        vals = np.array([(raw.get(joint[int(i)]) or {}).get(metric, math.nan) for i in items], dtype=float)
        return items, vals

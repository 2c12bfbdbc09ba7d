"""The task loop of ``run --adaptive``: its settings (:class:`AdaptiveRunConfig`), what it tells a
progress display (:class:`TaskProgress`, :class:`RunDisplay`), and one task's test run batch by
batch — the adaptive test picks documents, the harness generates and scores only those, the test
is told the scores and what they cost (:func:`adaptive_task`; with a bank per metric,
:func:`multi_metric_task`: each document generated once and every bank's metric read from its
sample). The orchestration around it (plan, model, output files) is
:mod:`lm_eval_adaptive.harness.run`'s.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from lm_eval_adaptive.data.prices import actual_cost
from lm_eval_adaptive.display import SHOWN_LOG_FILTER
from lm_eval_adaptive.engine.irt.bank import joint_item_ids
from lm_eval_adaptive.engine.cat.adaptive_test import AdaptiveTest
from lm_eval_adaptive.engine.cat.full_task import full_task_estimate
from lm_eval_adaptive.engine.cat.multi_metric_test import MultiMetricTest
from lm_eval_adaptive.engine.cat.stopping import CIWidth
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness import lm_eval_compat as compat
from lm_eval_adaptive.harness.attempts import AttemptBilling
from lm_eval_adaptive.harness.batch_journal import BatchJournal
from lm_eval_adaptive.harness.binding import BankBinding
from lm_eval_adaptive.harness.judge_pricing import JudgePricing, judge_prices
from lm_eval_adaptive.harness.metrics import judge_calls
from lm_eval_adaptive.harness.scorer import usage_total

__all__ = ["AdaptiveRunConfig", "TaskProgress", "RunDisplay", "TaskOutcome", "MultiTaskOutcome", "adaptive_test",
           "multi_metric_test", "task_progress", "adaptive_task", "multi_metric_task"]

log = logging.getLogger("lm_eval_adaptive")
log.addFilter(SHOWN_LOG_FILTER)  # names in messages shown escaped


@dataclass(frozen=True)
class AdaptiveRunConfig:
    """The adaptive settings of ``run --adaptive`` (the rest of a run is the harness's own config).

    ``bank``: ``[TASK=]PATH`` per task (several for one task: a bank per metric, one joint test);
    ``se_target``, ``min_items``, ``max_items``: the
    stopping rules (``ci_width``: stop on the full-task estimate's 95% interval width (upper − lower) in the metric's
    units instead of the SE target, :class:`~lm_eval_adaptive.engine.cat.stopping.CIWidth`);
    ``budget_usd``: a cap checked with the bank's token estimates;
    ``price``: ``MODEL=IN,OUT`` (or a bare ``IN,OUT`` for the model run); ``batch_size``:
    documents picked per step; ``metric``, ``item_field``: which per-document metric feeds
    the test and which document field holds the bank's ids; ``timeout``: seconds per call;
    ``dry_run``: forecast the run's cost and call nothing (the command line's ``--dry-run``);
    ``seed``: the seed of the test's random half (the same seed, bank and scores give the same
    documents; it is in the result's signature).
    """

    bank: tuple = ()
    se_target: float | None = 0.2
    min_items: int = 30
    max_items: int | None = 500
    budget_usd: float | None = None
    price: tuple = ()
    batch_size: int = 1
    metric: str | None = None
    item_field: str | None = None
    timeout: float | None = None
    dry_run: bool = False
    seed: int | None = 0
    ci_width: float | None = None
    score_range: str | None = None  # a task with no bank: LO,HI of one document's score (harness/bank_free_run.py)
    use_small_bank: bool = False  # use a bank from fewer models than engine/anytime/small_bank.py asks (not bank-free)


def _stop_rules(config: AdaptiveRunConfig) -> dict:
    """The SE target, or with ``ci_width`` the :class:`~lm_eval_adaptive.engine.cat.stopping.CIWidth` rule in its
    place (after ``min_items``), as keyword arguments of a test. ``ci_width`` is the interval's full width
    (upper − lower), as on a task with no bank; the rule is told its half."""
    if config.ci_width is None:
        return {"se_target": config.se_target}
    return {"se_target": None, "rules": (CIWidth(config.ci_width / 2, config.min_items),)}


@dataclass(frozen=True)
class TaskProgress:
    """Where one task of ``run --adaptive`` stands: after each batch (``stopped_because`` None) and
    once more when its test has stopped. ``max_items``: the most documents the test may give;
    ``estimate``, ``lower``, ``upper``: the full-task metric estimate and its 95% interval so
    far; ``spent``: USD so far (``budget``: the cap, or None)."""

    task: str
    metric: str
    items: int
    max_items: int
    task_docs: int
    theta: float
    se: float
    estimate: float
    lower: float
    upper: float
    spent: float
    budget: float | None
    stopped_because: str | None = None
    mode: str | None = None  # "bank-free": no θ̂, no SE; the mean and its interval (harness/bank_free_run.py)


class RunDisplay(Protocol):
    """What ``run --adaptive`` tells its caller's progress display."""

    def update(self, progress: TaskProgress) -> None:
        """After every batch of a task (and when its test stops)."""

    def done(self, results: dict, results_file: Path | None) -> None:
        """Every task done and the files written (``results_file``: the results JSON, None without
        ``--output_path``), before the results are printed."""


@dataclass
class TaskOutcome:
    task: str
    binding: BankBinding
    test: AdaptiveTest
    doc_ids: list
    raw: list
    clipped: int
    price: object
    usage: dict  # provider-reported tokens of the calls made, and how many items were charged by them
    estimated_usd: float  # the same items at the bank's token counts
    judge: dict = field(default_factory=dict)  # judge calls: count, tokens, USD, prices
    trajectory: dict = field(default_factory=dict)  # θ̂ and SE after each item

    @property
    def bank(self):
        return self.binding.bank

    @property
    def n_docs(self) -> int:
        return self.binding.n_docs


@dataclass
class MultiTaskOutcome:
    """A task's multi-metric adaptive run: one generation per document, every bank's metric scored."""

    task: str
    bindings: list  # one BankBinding per metric, in the test's metric order
    test: MultiMetricTest
    doc_ids: list
    raw: dict  # metric -> raw value of each document, in doc_ids order
    clipped: dict  # metric -> scores outside its bank's range
    price: object
    usage: dict
    estimated_usd: float
    judge: dict = field(default_factory=dict)
    trajectory: dict = field(default_factory=dict)  # metric -> θ̂ and SE after each item

    @property
    def n_docs(self) -> int:
        return self.bindings[0].n_docs


def adaptive_test(bank, item_costs: np.ndarray, config: AdaptiveRunConfig, name: str) -> AdaptiveTest:
    """The adaptive test of one task of ``run --adaptive``: ``config``'s stopping rules, ``item_costs``
    (USD per bank item: the bank's token counts at the model's price) for its budget."""
    return AdaptiveTest(bank, **_stop_rules(config), min_items=config.min_items,
                        max_items=config.max_items, budget=config.budget_usd, item_costs=item_costs, name=name,
                        seed=config.seed)


def task_progress(test: AdaptiveTest, binding: BankBinding, raw_scores) -> TaskProgress:
    """Where the adaptive test ``test`` of a task stands (``raw_scores``: its documents' metric values)."""
    e = test.examinee
    est = full_task_estimate(binding.bank, e.items, np.asarray(raw_scores, dtype=float), e.theta, e.se,
                             misfit=e.misfit)
    return TaskProgress(task=e.name, metric=binding.metric, items=e.n, max_items=test.max_items,
                        task_docs=binding.n_docs, theta=e.theta, se=e.se, estimate=est["estimate"],
                        lower=est["lower"], upper=est["upper"], spent=e.spent, budget=test.budget,
                        stopped_because=test.stopped_because)


def adaptive_task(tname, task_obj, binding: BankBinding, price, judges: JudgePricing, config: AdaptiveRunConfig,
                   evaluate, timeout: float, display: RunDisplay | None = None,
                   billing: AttemptBilling | None = None, journal: BatchJournal | None = None) -> TaskOutcome:
    bank, metric, doc_of_item = binding.bank, binding.metric, binding.doc_of_item
    costs = price.item_costs(bank.input_tokens, bank.output_tokens)
    test = adaptive_test(bank, costs, config, tname)
    doc_ids, raws, clipped = [], [], 0
    trajectory = {"theta": [], "se": []}
    if display is not None:
        display.update(task_progress(test, binding, raws))
    usage, judge = _new_tallies()
    journal = journal or BatchJournal()
    while (step := _next_batch(test, config.batch_size, doc_of_item, task_obj, tname, evaluate, timeout, price,
                               judges, costs, usage, judge, billing, journal, [metric])) is not None:
        batch, docs, charged, by_doc = step
        for j, (i, d) in enumerate(zip(batch, docs)):
            v = _metric_value(tname, by_doc.get(d), metric, d,
                              "; pass --metric or use a bank calibrated on this metric")
            if v < bank.lo[i] or v > bank.hi[i]:
                clipped += 1  # documented: mapped with the bank's range and clipped into [0, 1]
            test.record(i, float(bank.scale(i, v)), cost=float(charged[j]))
            doc_ids.append(d)
            raws.append(v)
            trajectory["theta"].append(test.examinee.theta)
            trajectory["se"].append(test.examinee.se)
        log.info("%s: %d documents, θ̂ = %.3f ± %.3f", tname, len(doc_ids), test.examinee.theta, test.examinee.se)
        if display is not None:
            display.update(task_progress(test, binding, raws))
    if display is not None:
        display.update(task_progress(test, binding, raws))
    journal.check_replayed(tname)
    judge["prices"] = judge_prices(judges)
    return TaskOutcome(task=tname, binding=binding, test=test, doc_ids=doc_ids, raw=raws, clipped=clipped,
                       price=price, usage=usage, estimated_usd=float(np.sum(costs[test.examinee.items])),
                       judge=judge, trajectory=trajectory)


def multi_metric_test(bindings: list, item_costs: np.ndarray, config: AdaptiveRunConfig, name: str) -> MultiMetricTest:
    """The multi-metric adaptive test of one task of ``run --adaptive`` (a bank per metric): ``config``'s
    stopping rules, the SE target applying to every metric; ``item_costs``: USD per joint item."""
    return MultiMetricTest({b.metric: b.bank for b in bindings}, **_stop_rules(config),
                           min_items=config.min_items, max_items=config.max_items, budget=config.budget_usd,
                           item_costs=item_costs, seed=config.seed, name=name)


def _metric_progress(test: MultiMetricTest, binding: BankBinding, raws, task: str) -> TaskProgress:
    e = test.examinees[binding.metric]
    est = full_task_estimate(binding.bank, e.items, np.asarray(raws, dtype=float), e.theta, e.se, misfit=e.misfit)
    return TaskProgress(task=f"{task} [{binding.metric}]", metric=binding.metric, items=e.n,
                        max_items=test.max_items, task_docs=binding.n_docs, theta=e.theta, se=e.se,
                        estimate=est["estimate"], lower=est["lower"], upper=est["upper"], spent=test.spent,
                        budget=test.budget, stopped_because=test.stopped_because)


def multi_metric_task(tname, task_obj, bindings: list, price, judges: JudgePricing, config: AdaptiveRunConfig,
                       evaluate, timeout: float, display: RunDisplay | None = None,
                       billing: AttemptBilling | None = None, journal: BatchJournal | None = None) -> MultiTaskOutcome:
    """One task with a bank per metric: each document the test picks is generated once (one harness
    evaluation) and every metric of it recorded."""
    first = bindings[0]
    ids = joint_item_ids({b.metric: b.bank for b in bindings})
    idx0 = first.bank.index_of(ids)
    costs = price.item_costs(first.bank.input_tokens[idx0], first.bank.output_tokens[idx0])
    test = multi_metric_test(bindings, costs, config, tname)
    doc_of_joint = first.doc_of_item[idx0]
    metrics = [b.metric for b in bindings]
    doc_ids: list = []
    raws = {m: [] for m in metrics}
    clipped = {m: 0 for m in metrics}
    trajectory = {m: {"theta": [], "se": []} for m in metrics}

    def show():
        if display is not None:
            for b in bindings:
                display.update(_metric_progress(test, b, raws[b.metric], tname))

    show()
    usage, judge = _new_tallies()
    journal = journal or BatchJournal()
    while (step := _next_batch(test, config.batch_size, doc_of_joint, task_obj, tname, evaluate, timeout, price,
                               judges, costs, usage, judge, billing, journal, metrics)) is not None:
        batch, docs, charged, by_doc = step
        for j, (i, d) in enumerate(zip(batch, docs)):
            scores, values = {}, {}
            for b in bindings:
                m = b.metric
                v = _metric_value(tname, by_doc.get(d), m, d)
                k = test.bank_item(m, i)
                if v < b.bank.lo[k] or v > b.bank.hi[k]:
                    clipped[m] += 1
                scores[m] = float(b.bank.scale(k, v))
                values[m] = v
            test.record(i, scores, cost=float(charged[j]))
            doc_ids.append(d)
            for m in metrics:
                e = test.examinees[m]
                raws[m].append(values[m])
                trajectory[m]["theta"].append(e.theta)
                trajectory[m]["se"].append(e.se)
        log.info("%s: %d documents, %s", tname, len(doc_ids),
                 "; ".join(f"{m} θ̂ = {test.examinees[m].theta:.3f} ± {test.examinees[m].se:.3f}" for m in metrics))
        show()
    show()
    journal.check_replayed(tname)
    judge["prices"] = judge_prices(judges)
    return MultiTaskOutcome(task=tname, bindings=list(bindings), test=test, doc_ids=doc_ids, raw=raws,
                            clipped=clipped, price=price, usage=usage,
                            estimated_usd=float(np.sum(costs[test.items])), judge=judge, trajectory=trajectory)


def _new_tallies() -> tuple[dict, dict]:
    """A task's running totals: the model's reported usage, and its judge calls."""
    return ({"prompt_tokens": 0, "completion_tokens": 0, "items_charged_by_usage": 0},
            {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0, "unpriced_calls": 0})


def _next_batch(test, batch_size: int, doc_of, task_obj, tname: str, evaluate, timeout: float, price,
                judges: JudgePricing, costs: np.ndarray, usage: dict, judge: dict, billing,
                journal: BatchJournal, metrics: list):
    """The test's next items generated and scored (:func:`_generate`) and journaled (``metrics``: the
    values of each document's sample to journal), or replayed from the journal: ``(items, documents,
    USD charged per document, each document's sample)``; None once the test has stopped, or when the
    budget refused the batch's calls (nothing of it was sent; the test is stopped on the budget)."""
    batch = test.next_items(batch_size)
    if not batch:
        return None
    docs = [int(doc_of[i]) for i in batch]
    replayed = journal.replay(tname, batch, docs, test, usage, judge)
    if replayed is not None:
        return (batch, docs, *replayed)
    got = _generate(task_obj, tname, docs, evaluate, timeout, price, judges, costs[batch], usage, judge,
                    billing=billing, test=test, on_sent=lambda usd: journal.sent(tname, batch, usd),
                    on_failed=lambda usd, tallies: journal.failed(tname, batch, usd, tallies, judge))
    if got is None:
        test.stop("budget")
        return None
    journal.scored(tname, batch, docs, got[0], got[1], metrics, usage, judge)
    return (batch, docs, *got)


def _generate(task_obj, tname: str, docs: list, evaluate, timeout: float, price, judges: JudgePricing,
              estimates: np.ndarray, usage: dict, judge: dict, *, billing: AttemptBilling | None = None,
              test=None, on_sent=None, on_failed=None) -> tuple[np.ndarray, dict] | None:
    """One harness evaluation of ``docs``: (USD charged per document, model and judges, added to the
    ``usage`` and ``judge`` tallies; each document's sample, the first filter's). With ``billing``,
    each attempt is reserved against ``test``'s budget and retried (:class:`~lm_eval_adaptive.harness.attempts.AttemptBilling`); None
    when the budget refused it. ``on_sent(reserved_usd)`` is told the worst case of requests about to be
    sent, ``on_failed(usd, usage)`` each failed attempt once it is charged (``usage``: the task's usage
    tally with the attempts counted so far)."""
    def attempt():
        with compat.usage_sink() as sink, judge_calls(timeout=timeout) as judged:
            try:
                res = evaluate(task_obj, docs)
            except Exception as e:  # what was answered before it failed is paid for
                known = _charges(price, sink, estimates, usage, reserved()) if sink else np.zeros(len(estimates))
                known = known + _judge_charges(judges, judged, estimates, judge)
                try:
                    e.known_usd = float(np.sum(known))
                except AttributeError:  # an error that takes no attributes: the answered part is lost
                    pass
                raise
        return res, _charges(price, sink, estimates, usage, reserved()) + _judge_charges(judges, judged, estimates,
                                                                                         judge)

    def reserved():
        return None if billing is None else billing.reserved_usd

    if billing is None:
        res, charged = attempt()
    else:
        before = billing.counts()

        def counted() -> dict:  # the usage tally with this task's share of the calls so far
            return {**usage, **{k: usage.get(k, 0) + v - before[k] for k, v in billing.counts().items()}}

        if on_failed is not None:
            billing.on_failed = lambda usd: on_failed(usd, counted())
        billing.on_sent = on_sent
        try:
            got = billing.evaluate(test, len(docs), attempt)
        finally:
            billing.on_failed = billing.on_sent = None
            usage.update(counted())
        if got is None:
            return None
        res, charged = got
    by_doc: dict = {}
    for s in res["samples"][tname]:
        by_doc.setdefault(int(s["doc_id"]), s)  # first filter's sample
    return charged, by_doc


def _metric_value(tname: str, sample: dict | None, metric: str, doc: int, hint: str = "") -> float:
    """The finite per-document value of ``metric`` in a document's harness sample; InputError (naming what
    the sample does give, then ``hint``) when it has none, or when it is not finite."""
    if sample is None or metric not in sample:
        have = sorted(k for k in (sample or {}) if isinstance((sample or {}).get(k), (int, float)))
        raise InputError(f"task {tname!r} gave no per-document metric {metric!r} for document {doc}"
                         f" (per-document values it gives: {', '.join(have) or 'none'}){hint}")
    v = float(sample[metric])
    if not math.isfinite(v):
        raise InputError(f"task {tname!r}, document {doc}: metric {metric!r} is {v}")
    return v


def _charges(price, usage_list, estimates: np.ndarray, totals: dict, reserved: float | None = None) -> np.ndarray:
    """USD of each document of a batch: the provider-reported usage of the batch's calls at
    ``price``, shared out in proportion to the documents' estimates (exact for one document
    per batch); the estimates themselves when no call was made (a local model). When some call
    answered without usage to bill from (none, zero for a non-empty answer, not a count), the
    attempt's reservation ``reserved`` (its worst case) when it is larger, with a warning."""

    if not usage_list:
        return estimates
    try:
        total = sum(actual_cost(price, u) for u in usage_list)
    except ValueError:
        if reserved is None or reserved <= float(np.sum(estimates)):
            return estimates
        totals["items_charged_reservation"] = totals.get("items_charged_reservation", 0) + len(estimates)
        log.warning("%s: %d answered call(s) reported no usage to bill from; charged their reservation $%.6g "
                    "(%d document(s) so far)", price.source, sum(u is None for u in usage_list), reserved,
                    totals["items_charged_reservation"])
        return reserved * _shares(estimates)
    totals["prompt_tokens"] += usage_total(usage_list, "prompt_tokens", "input_tokens")
    totals["completion_tokens"] += usage_total(usage_list, "completion_tokens", "output_tokens")
    totals["items_charged_by_usage"] += len(estimates)
    return total * _shares(estimates)


def _shares(estimates: np.ndarray) -> np.ndarray:
    return estimates / estimates.sum() if estimates.sum() > 0 else np.full(len(estimates), 1 / len(estimates))


def _judge_charges(judges: JudgePricing, calls, estimates: np.ndarray, totals: dict) -> np.ndarray:
    """USD of the judge calls made while a batch was scored, shared out like the model's
    (exact for one document per batch); a call that reported no usage is counted, not priced."""
    priced = [c for c in calls if usage_total([c.usage], "prompt_tokens", "input_tokens") is not None
              and usage_total([c.usage], "completion_tokens", "output_tokens") is not None]
    totals["calls"] += len(calls)
    totals["unpriced_calls"] += len(calls) - len(priced)
    if not priced:
        return np.zeros(len(estimates))
    total = judges.cost(priced)
    totals["cost_usd"] += total
    totals["prompt_tokens"] += usage_total([c.usage for c in priced], "prompt_tokens", "input_tokens")
    totals["completion_tokens"] += usage_total([c.usage for c in priced], "completion_tokens", "output_tokens")
    return total * _shares(estimates)


# the task loop's steps, as the bank-free loop takes them (harness/bank_free_run.py)
next_batch = _next_batch
metric_value = _metric_value
new_tallies = _new_tallies

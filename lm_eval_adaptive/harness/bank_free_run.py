"""A task with no item bank (issue 31; docs/cold-start.md): what ``run --adaptive`` and ``rank`` need to run it.

* the metric's known range (:func:`score_range_for`: ``--score-range LO,HI``, else the range this package's
  metrics declare, else [0, 1] for the harness's 0/1 metrics; refused otherwise: every interval rests on it);
* the task's documents as the items (:class:`DocBinding`: item id = harness doc id);
* ``run --adaptive`` of one task with no bank (:func:`bank_free_task`): the documents in one seeded random
  order, scored by the harness as the banked loop scores them, until the anytime-valid interval of the
  full-task mean (:class:`~lm_eval_adaptive.engine.anytime.bank_free_test.BankFreeTest`) is at most
  ``--ci-width`` wide (upper − lower, as in a banked run), ``--max-items`` documents, ``--budget-usd`` or the last document: the honest
  replacement of the harness's ``--limit`` (which takes the first N documents). Its ``adaptive`` block
  (:func:`bank_free_block`) says mode ``bank-free``, the estimate and its interval, and why it stopped.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

import numpy as np

from lm_eval_adaptive.engine.anytime.bank_free_test import BankFreeTest
from lm_eval_adaptive.engine.cat.estimation import Z95
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness.batch_journal import BatchJournal
from lm_eval_adaptive.harness.binding import DOC_ID, task_metrics
from lm_eval_adaptive.harness.judge_pricing import judge_prices
from lm_eval_adaptive.harness.metrics import METRIC_RANGES
from lm_eval_adaptive.harness.sample_logs import ADAPTIVE_SAMPLE_KEY
from lm_eval_adaptive.harness.task_loop import TaskProgress, metric_value, new_tallies, next_batch

__all__ = ["BANK_FREE", "UNIT_METRICS", "parse_score_range", "score_range_for", "mode_line", "DocBinding",
           "task_metric", "bank_free_binding", "BankFreeOutcome", "bank_free_task", "bank_free_block",
           "annotate_bank_free_samples"]

log = logging.getLogger("lm_eval_adaptive")

#: How settings, journals and results name the mode.
BANK_FREE = "bank-free"

#: The harness's own 0/1 (or proportion) per-document metrics: their range is [0, 1].
UNIT_METRICS = ("acc", "acc_norm", "acc_mutual_info", "exact_match", "f1", "mcc")


def parse_score_range(value) -> tuple[float, float] | None:
    """``LO,HI`` (a string, or a pair) as two finite numbers with HI > LO; None stays None."""
    if value is None:
        return None
    try:
        lo, hi = (float(x) for x in (value.split(",") if isinstance(value, str) else value))
    except (TypeError, ValueError):
        raise InputError(f"--score-range {value!r}: expected LO,HI (two numbers, e.g. 0,1)") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
        raise InputError(f"--score-range {value!r}: LO and HI must be finite with HI > LO")
    return lo, hi


def score_range_for(metric: str, given=None) -> tuple[float, float]:
    """The per-document score range of ``metric``: ``given`` (``--score-range``), else the range this
    package's metrics declare (:data:`~lm_eval_adaptive.harness.metrics.METRIC_RANGES`: bleu, chrf,
    rouge_l, bertscore, judge, each in [0, 1] as their ``process_results`` report them) or [0, 1] for
    the harness's 0/1 metrics (:data:`UNIT_METRICS`); otherwise an InputError."""
    rng = parse_score_range(given)
    if rng is not None:
        return rng
    if metric in METRIC_RANGES:
        lo, hi = METRIC_RANGES[metric]
        return float(lo), float(hi)
    if metric in UNIT_METRICS:
        return 0.0, 1.0
    raise InputError(f"no item bank for this task and the range of metric {metric!r} is not known: give "
                     "--score-range LO,HI (the lowest and highest score one document can get)")


def mode_line(task: str, metric: str, score_range, *, one_model: bool = False, why: str | None = None) -> str:
    """What a bank-free run says of its mode, and why (``one_model``: ``run --adaptive``'s wording; ``why``: a
    bank given but too small to use, :func:`~lm_eval_adaptive.engine.anytime.small_bank.bank_use`'s reason)."""
    lo, hi = score_range
    who = "the model answers documents in random order" if one_model else \
        "every model answers the same random documents"
    head = f"{why} — " if why else f"no item bank for {task}: "
    return (f"{head}{who}; intervals hold "
            f"whenever the run stops (bank-free, metric {metric} in [{lo:g}, {hi:g}])")


@dataclass(frozen=True)
class DocBinding:
    """A task's documents as the items of a bank-free run: item id = harness doc id (``bank`` is None)."""

    task: str
    metric: str
    n_docs: int
    score_range: tuple = (0.0, 1.0)
    item_field: str = DOC_ID
    bank: None = None
    why: str | None = None  # a bank given but too small to use: why the run goes without it (engine/anytime/small_bank.py)

    @property
    def doc_of(self) -> dict[str, int]:
        return {str(i): i for i in range(self.n_docs)}

    @property
    def doc_of_item(self) -> np.ndarray:
        return np.arange(self.n_docs)

    def doc_id(self, item_id) -> int:
        return int(item_id)


def task_metric(task: str, task_obj, metric: str | None) -> str:
    """``metric``, checked against the metrics the task gives; without it, the task's only metric."""
    have = task_metrics(task_obj)
    if metric:
        if have and metric not in have:
            raise InputError(f"--metric {metric}: task {task!r} has no metric {metric!r} (its metrics: "
                             f"{', '.join(have)})")
        return metric
    if len(have) == 1:
        return have[0]
    raise InputError(f"no item bank for task {task!r}: name the metric to use with --metric "
                     f"(the task gives {', '.join(have) or 'none it names'})")


def bank_free_binding(task: str, task_obj, metric: str | None, score_range=None, *, why: str | None = None) -> DocBinding:
    """The documents of ``task_obj`` bound as a bank-free run's items, its metric and range settled (``why``:
    the bank given is too small to use, said in the mode line)."""
    m = task_metric(task, task_obj, metric)
    return DocBinding(task, m, len(list(task_obj.eval_docs)), score_range_for(m, score_range), why=why)


@dataclass
class BankFreeOutcome:
    """One task's bank-free run (``run --adaptive`` with no bank)."""

    task: str
    binding: DocBinding
    test: BankFreeTest
    doc_ids: list
    raw: list
    price: object
    usage: dict
    judge: dict = field(default_factory=dict)
    trajectory: dict = field(default_factory=dict)

    @property
    def n_docs(self) -> int:
        return self.binding.n_docs


def _progress(test: BankFreeTest, b: DocBinding, max_items) -> TaskProgress:
    r = test.result()
    lo, hi = r.lower, r.upper
    return TaskProgress(task=b.task, metric=b.metric, items=r.n_items, max_items=min(max_items or b.n_docs, b.n_docs),
                        task_docs=b.n_docs, theta=float("nan"), se=float("nan"), estimate=r.estimate, lower=lo,
                        upper=hi, spent=test.spent, budget=test.budget, stopped_because=test.stopped_because,
                        mode=BANK_FREE)


def bank_free_task(tname, task_obj, binding: DocBinding, price, judges, config, evaluate, timeout: float,
                   display=None, billing=None, journal: BatchJournal | None = None) -> BankFreeOutcome:
    """``run --adaptive`` of one task with no bank (module docstring): ``config.ci_width`` is the interval's
    full width (upper − lower) to stop at, ``config.max_items`` and ``config.budget_usd`` cap it;
    the cap holds through ``billing`` (each attempt's worst case reserved before it is sent). Every batch is
    journaled before the test is told (``journal``; a resume replays it: the seeded random order picks the
    same documents again), as in the banked run."""
    n = binding.n_docs
    width = None if config.ci_width is None else float(config.ci_width)  # upper − lower (the "at most W wide")
    test = BankFreeTest([str(i) for i in range(n)], score_range=binding.score_range, ci_width=width,
                        max_items=config.max_items, budget=config.budget_usd, item_costs=np.zeros(n),
                        seed=config.seed or 0)
    costs = np.zeros(n)  # the cap is held by the attempts' worst case (harness/attempts.py), not estimates
    doc_ids, raws = [], []
    trajectory = {"estimate": [], "lower": [], "upper": []}
    usage, judge = new_tallies()
    journal = journal or BatchJournal()
    lo_r, hi_r = binding.score_range
    if display is not None:
        display.update(_progress(test, binding, config.max_items))
    while (step := next_batch(test, config.batch_size, binding.doc_of_item, task_obj, tname, evaluate, timeout,
                              price, judges, costs, usage, judge, billing, journal, [binding.metric])) is not None:
        batch, docs, charged, by_doc = step
        for j, (i, d) in enumerate(zip(batch, docs)):
            v = metric_value(tname, by_doc.get(d), binding.metric, d, "; pass --metric")
            if not (lo_r <= v <= hi_r):
                raise InputError(f"task {tname!r}, document {d}: metric {binding.metric!r} gave {v!r}, outside its "
                                 f"range [{lo_r:g}, {hi_r:g}] (give the right --score-range LO,HI)")
            test.record(i, v, cost=float(charged[j]))
            doc_ids.append(d)
            raws.append(v)
            r = test.result()
            trajectory["estimate"].append(r.estimate)
            trajectory["lower"].append(r.lower)
            trajectory["upper"].append(r.upper)
        if display is not None:
            display.update(_progress(test, binding, config.max_items))
    if display is not None:
        display.update(_progress(test, binding, config.max_items))
    journal.check_replayed(tname)
    judge["prices"] = judge_prices(judges)
    return BankFreeOutcome(task=tname, binding=binding, test=test, doc_ids=doc_ids, raw=raws, price=price,
                           usage=usage, judge=judge, trajectory=trajectory)


def bank_free_block(o: BankFreeOutcome, config) -> dict:
    """The task's ``adaptive`` block of a bank-free run: mode, why, the estimate and its anytime-valid interval
    (``metric_estimate``, which :func:`~lm_eval_adaptive.harness.result_blocks.headline_estimate` makes the
    task's metric, its ``_stderr`` the half-width / 1.96), the documents in the order given, cost, stop."""
    r = o.test.result()
    b = o.binding
    return {
        "mode": BANK_FREE, "mode_note": mode_line(o.task, b.metric, b.score_range, one_model=True, why=b.why),
        "metric": b.metric,
        "score_range": list(b.score_range), "items": r.n_items, "task_docs": b.n_docs,
        "pct_of_task": 100.0 * r.n_items / max(b.n_docs, 1),
        "metric_estimate": {"estimate": r.estimate, "lower": r.lower, "upper": r.upper, "level": 0.95,
                            "anytime_valid": True, "exact": r.n_items >= r.population},
        "observed_mean": float(np.mean(o.raw)) if o.raw else None,
        "administered": [{"item_id": str(d), "doc_id": int(d), "raw": float(v)} for d, v in zip(o.doc_ids, o.raw)],
        "cost_usd": o.test.spent, "judge_cost_usd": o.judge.get("cost_usd", 0.0), "judge": dict(o.judge),
        "cost_source": "provider usage" if o.usage["items_charged_by_usage"] == r.n_items else
        "provider usage, partly estimated",
        "usage": {k: o.usage[k] for k in ("prompt_tokens", "completion_tokens")},
        "calls": {k: o.usage.get(k, 0) for k in ("attempts", "retries", "billed_failures", "billed_failures_usd")},
        "price": {"input_per_mtok": o.price.input_per_mtok, "output_per_mtok": o.price.output_per_mtok,
                  "source": o.price.source},
        "stopped_because": o.test.stopped_because, "trajectory": dict(o.trajectory), "bank_id": None,
        "item_field": DOC_ID, "signature": dict(r.signature),
        "settings": {"ci_width": config.ci_width, "max_items": config.max_items, "budget_usd": config.budget_usd,
                     "seed": config.seed, "z": Z95},
    }


def annotate_bank_free_samples(samples: dict, o: BankFreeOutcome) -> dict:
    """Keep the documents given, in the order given, each with its position (``adaptive.order``)."""
    order = {int(d): k for k, d in enumerate(o.doc_ids)}
    out = {}
    for task, rows in samples.items():
        kept = [{**s, ADAPTIVE_SAMPLE_KEY: {"order": order[int(s["doc_id"])] + 1, "item_id": str(s["doc_id"]),
                                            "mode": BANK_FREE}}
                for s in rows if int(s["doc_id"]) in order]
        kept.sort(key=lambda s: s[ADAPTIVE_SAMPLE_KEY]["order"])
        out[task] = kept
    return out

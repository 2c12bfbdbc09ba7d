"""Harness glue: ``lm-eval-adaptive run`` = ``lm-eval run`` plus an adaptive flag.

Everything about models, tasks, prompts, chat templates, filters, metrics and output
files stays lm-evaluation-harness's own:

* the ``run`` parser *is* the harness's, with one extra argument group (added by
  :mod:`lm_eval_adaptive.cli.run`); without ``--adaptive`` the harness's own ``run``
  executes unchanged;
* with ``--adaptive``, each batch of documents the CAT picks is evaluated by the harness's
  own ``simple_evaluate(samples={task: [doc ids]})`` — it builds the requests exactly as a
  full run would (prompt, few-shot, chat template, gen kwargs, filters), runs them on the
  harness LM and scores them with the task's ``process_results``. The model is wrapped in
  the harness's ``CachingLM``, so the final pass that writes the results JSON over the
  administered documents re-uses the generations and requests nothing new. Documents never
  picked are never generated nor scored.

A task given several banks (one per metric) runs one
:class:`~lm_eval_adaptive.engine.multi_metric_test.MultiMetricTest`: each chosen document is
evaluated once and every bank's metric read from its sample; the task's ``adaptive`` block then
holds one block per metric under ``metrics`` (docs/outputs.md).

Before any model call, every task's bank is bound to the task
(:func:`~lm_eval_adaptive.harness.binding.bind_bank`: task, metric, bank ids → documents)
and the model's price resolved (:func:`~lm_eval_adaptive.data.price_map.model_price`).
Every call gets ``--timeout`` seconds. Calls an LLM judge makes while the task scores a
document are charged at the judge's price beside the model's.

The harness's own progress bars are off during an adaptive run; a :class:`RunDisplay` given by
the caller is told where each task stands after every batch (:class:`TaskProgress`) and, once
the files are written, gets the results (each task's θ̂ and SE after every item are in its
``adaptive.trajectory``).

Supported harness: see :mod:`lm_eval_adaptive.harness.lm_eval_compat` (every access to
lm-eval internals goes through it).
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from lm_eval_adaptive.data.files import read_jsonl_records
from lm_eval_adaptive.data.files import read_json
from lm_eval_adaptive.data.price_map import model_price, parse_prices
from lm_eval_adaptive.data.prices import DEFAULT_PRICE, actual_cost, upper_estimate
from lm_eval_adaptive.data.responses import ResponseTable
from lm_eval_adaptive.display import SHOWN_LOG_FILTER, shown
from lm_eval_adaptive.engine.bank import joint_item_ids
from lm_eval_adaptive.engine.cat import AdaptiveTest
from lm_eval_adaptive.engine.estimation import Z95
from lm_eval_adaptive.engine.full_task import full_task_estimate
from lm_eval_adaptive.engine.multi_metric_test import MultiMetricTest
from lm_eval_adaptive.engine.person_fit import misfit_note
from lm_eval_adaptive.harness.billing import ModelFailed, RetryPolicy, may_have_been_billed
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness import lm_eval_compat as compat
from lm_eval_adaptive.harness.bank_source import parse_banks
from lm_eval_adaptive.harness.binding import SAMPLE_LOGS_SOURCE, BankBinding, bind_bank
from lm_eval_adaptive.harness.lm_eval_compat import SUPPORTED_LM_EVAL
from lm_eval_adaptive.harness.metrics import declared_judges, judge_calls
from lm_eval_adaptive.harness.scorer import (
    DEFAULT_TIMEOUT_S,
    TEMPLATE_TOKENS,
    parse_gen_kwargs,
    resolve_timeout,
    usage_total,
)
from lm_eval_adaptive.redaction import redact, redact_text

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm: bundled price map, no fetch

__all__ = ["SUPPORTED_LM_EVAL", "DEFAULT_TIMEOUT_S", "AdaptiveRunConfig", "AdaptivePlan", "plan_adaptive_run",
           "TaskProgress", "RunDisplay",
           "adaptive_test", "execute_run", "run_adaptive", "ModelCallError", "JudgePricing",
           "table_from_sample_logs", "options_from_sample_logs", "headline_estimate", "display_results", "ADAPTIVE_SAMPLE_KEY",
           "ADMINISTERED_SUFFIX", "metric_blocks"]

log = logging.getLogger("lm_eval_adaptive")
log.addFilter(SHOWN_LOG_FILTER)  # names in messages shown escaped

@dataclass(frozen=True)
class AdaptiveRunConfig:
    """The adaptive settings of ``run --adaptive`` (the rest of a run is the harness's own config).

    ``bank``: ``[TASK=]PATH`` per task (several for one task: a bank per metric, one joint test);
    ``se_target``, ``min_items``, ``max_items``: the
    stopping rules; ``budget_usd``: a cap checked with the bank's token estimates;
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


class RunDisplay(Protocol):
    """What ``run --adaptive`` tells its caller's progress display."""

    def update(self, progress: TaskProgress) -> None:
        """After every batch of a task (and when its test stops)."""

    def done(self, results: dict, results_file: Path | None) -> None:
        """Every task done and the files written (``results_file``: the results JSON, None without
        ``--output_path``), before the results are printed."""


def execute_run(harness_args: argparse.Namespace, adaptive: AdaptiveRunConfig | None, harness_execute,
                forecast=None, display: RunDisplay | None = None) -> int:
    """``run``: the harness's own run of ``harness_args`` (its parsed ``run`` arguments), or with
    ``adaptive`` the adaptive run of every task (shown on ``display``); with ``adaptive.dry_run``,
    ``forecast(plan, adaptive)`` of its :class:`AdaptivePlan` instead (no model is built, nothing
    is called). The task index covers only ``--include_path`` when it holds every requested task."""
    with compat.index_include_path_only(getattr(harness_args, "tasks", None)), compat.redacted_output_files():
        if adaptive is None:
            harness_execute(harness_args)
            return 0
        if adaptive.dry_run:
            if forecast is None:
                raise InputError("--dry-run: no cost forecast was given to this run")
            return forecast(plan_adaptive_run(harness_args, adaptive), adaptive)
        return run_adaptive(harness_args, adaptive, display=display)


# ---------------------------------------------------------------------------- adaptive
class JudgePricing:
    """Prices of the LLM judges a task calls, and what their calls cost.

    A judge the task declares while it is loaded is priced before any call (``--price``
    overrides, litellm's map; refused when unknown and ``required``); a judge seen only when
    it is called is priced then, at the default price when unknown (with a warning).
    """

    def __init__(self, overrides: dict, *, required: bool):
        self.overrides = overrides
        self.required = required
        self.prices: dict = {}

    def declare(self, models) -> None:
        for m in models:
            if m not in self.prices:
                self.prices[m] = model_price(m, overrides=self.overrides,
                                             default=None if self.required else DEFAULT_PRICE)

    def price(self, model: str):
        if model not in self.prices:
            p = model_price(model, overrides=self.overrides, default=DEFAULT_PRICE)
            if p is DEFAULT_PRICE:
                log.warning("judge model %s has no known price; its calls are charged at the default %s "
                            "(give one with --price %s=IN,OUT)", model, p, model)
            self.prices[model] = p
        return self.prices[model]

    def cost(self, calls) -> float:
        """USD of judge calls (:class:`~lm_eval_adaptive.harness.metrics.JudgeCall`); ValueError when
        a call reported no usage."""
        return float(sum(actual_cost(self.price(c.model), c.usage) for c in calls))


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


def _model_name(cfg) -> str:
    ma = cfg.model_args if isinstance(cfg.model_args, dict) else {}
    if not ma and isinstance(cfg.model_args, str):
        from lm_eval.utils import simple_parse_args_string

        ma = simple_parse_args_string(cfg.model_args)
    return str(ma.get("model") or ma.get("pretrained") or cfg.model)


@dataclass
class AdaptivePlan:
    """An adaptive run checked and resolved before the model is built (nothing called yet):
    the harness config, the model's name and price, the judges' prices, and every task
    object with its bank bound to it (``bound``: ``(task name, task object, binding)``)."""

    cfg: object
    task_manager: object
    model: str
    price: object
    judges: JudgePricing
    bound: list
    #: task → its banks' bindings, one per metric, for a task given several banks (a multi-metric
    #: run; ``bound`` then holds the first one)
    metric_bindings: dict = field(default_factory=dict)

    def max_output_tokens(self, task_obj) -> int:
        """The most output tokens one request of ``task_obj`` may ask for (``max_gen_toks``): the
        run's ``--gen_kwargs``, else the task's generation kwargs, else the model's
        ``max_gen_toks`` argument, else the harness API models' default (256)."""
        from lm_eval.utils import simple_parse_args_string

        gk = dict(task_obj.get_config("generation_kwargs") or {})
        extra = self.cfg.gen_kwargs
        gk.update(simple_parse_args_string(extra) if isinstance(extra, str) else dict(extra or {}))
        ma = self.cfg.model_args
        ma = simple_parse_args_string(ma) if isinstance(ma, str) else dict(ma or {})
        return int(gk.get("max_gen_toks") or ma.get("max_gen_toks") or 256)

    def prompt_lengths(self, task_obj, binding: BankBinding) -> np.ndarray:
        """Characters of each bank item's request contexts as this run's harness builds them (its
        few-shot setting, seed and system instruction; the text without a chat template), for
        token estimates before any call."""
        cfg = self.cfg
        if cfg.num_fewshot is not None:
            if task_obj.get_config("num_fewshot") != 0:
                task_obj.set_config(key="num_fewshot", value=cfg.num_fewshot)
        elif task_obj.get_config("num_fewshot") is None:
            task_obj.set_config(key="num_fewshot", value=0)
        seeds = cfg.seed if cfg.seed else [0, 1234, 1234, 1234]
        task_obj.set_fewshot_seed(seed=seeds[3])
        task_obj.build_all_requests(limit=None, samples=None, rank=0, world_size=1, cache_requests=False,
                                    system_instruction=cfg.system_instruction, apply_chat_template=False,
                                    fewshot_as_multiturn=cfg.fewshot_as_multiturn)
        chars: dict = {}
        for inst in task_obj.instances:
            chars[inst.doc_id] = chars.get(inst.doc_id, 0) + len(compat.prompt_text(inst.args[0]))
        return np.array([chars.get(int(d), 0) for d in binding.doc_of_item], dtype=float)


def plan_adaptive_run(hargs: argparse.Namespace, config: AdaptiveRunConfig) -> AdaptivePlan:
    """Check and resolve the adaptive run of ``hargs`` with ``config`` (banks bound to their tasks,
    prices resolved) without building the model or calling anything."""
    from lm_eval.config.evaluate_config import EvaluatorConfig

    parse_gen_kwargs(getattr(hargs, "gen_kwargs", None))
    cfg = EvaluatorConfig.from_cli(hargs)
    try:
        task_manager = cfg.process_tasks(cfg.metadata)
    except ValueError as e:  # the harness's "Tasks not found: ..."
        if "not found" not in str(e):
            raise
        raise InputError(f"{e}: no such harness task; a task of this project needs --include_path task_configs "
                         "(the folder of its YAML)") from None
    tasks = list(cfg.tasks)
    bank_paths = parse_banks(list(config.bank), tasks, metric=config.metric, several=True)
    name = _model_name(cfg)
    overrides = parse_prices(list(config.price) or None, bare=name)
    budgeted = config.budget_usd is not None
    price = model_price(name, overrides=overrides, default=None if budgeted else DEFAULT_PRICE)
    judges = JudgePricing(overrides, required=budgeted)
    # every task's bank is checked and bound before the model is built: nothing is asked of a bad input
    bound, multi = [], {}
    for task_name in tasks:
        with declared_judges() as declared:
            loaded = task_manager.load([task_name])["tasks"]
        if len(loaded) != 1:
            raise InputError(f"--adaptive runs single tasks; {task_name!r} expands to {len(loaded)} tasks "
                             f"({', '.join(list(loaded)[:5])}…): give them one by one with a bank each")
        tname, task_obj = next(iter(loaded.items()))
        specs = bank_paths[task_name]
        if len(specs) > 1 and config.metric:
            raise InputError(f"task {task_name!r} is given {len(specs)} banks (one per metric): each bank says its "
                             "metric; --metric is for a single bank")
        bindings = [bind_bank(spec, tname, task_obj, metric=config.metric, item_field=config.item_field)
                    for spec in specs]
        judges.declare(declared)
        bound.append((tname, task_obj, bindings[0]))
        if len(bindings) > 1:
            multi[tname] = _check_metric_bindings(tname, bindings)
    plan = AdaptivePlan(cfg=cfg, task_manager=task_manager, model=name, price=price, judges=judges, bound=bound,
                        metric_bindings=multi)
    if budgeted:
        for tname, _, binding in bound:
            cheapest = float(np.nanmin(price.item_costs(binding.bank.input_tokens, binding.bank.output_tokens)))
            if config.budget_usd < cheapest:
                raise InputError(f"--budget-usd {config.budget_usd:g} is below one call: the cheapest first call "
                                 f"of task {tname!r} costs ${cheapest:.6g} (the bank's token counts at the "
                                 f"model's price); nothing was run")
    return plan


def _check_metric_bindings(task: str, bindings: list) -> list:
    """The bindings of a task's several banks: one per metric, their shared ids naming the same documents."""
    metrics = [b.metric for b in bindings]
    dup = sorted({m for m in metrics if metrics.count(m) > 1})
    if dup:
        raise InputError(f"task {task!r}: several banks for the metric(s) {', '.join(dup)}; a multi-metric run "
                         "takes one bank per metric")
    first = bindings[0].doc_of
    for b in bindings[1:]:
        other = b.doc_of
        shared = [i for i in other if i in first]
        if not shared:
            raise InputError(f"task {task!r}: the banks {bindings[0].bank.describe()} and {b.bank.describe()} "
                             "share no item id; a multi-metric run gives the items every bank has")
        clash = [i for i in shared if other[i] != first[i]]
        if clash:
            raise InputError(f"task {task!r}: item {clash[0]!r} is document {first[clash[0]]} in "
                             f"{bindings[0].bank.describe()} but {other[clash[0]]} in {b.bank.describe()}")
    return bindings


def run_adaptive(hargs: argparse.Namespace, config: AdaptiveRunConfig, *, display: RunDisplay | None = None) -> int:
    """The adaptive run (module docstring) of the harness run ``hargs`` with ``config``, shown on ``display``."""
    from lm_eval import simple_evaluate
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.utils import make_table

    plan = plan_adaptive_run(hargs, config)
    cfg, task_manager, price, judges, bound = plan.cfg, plan.task_manager, plan.price, plan.judges, plan.bound

    if cfg.output_path:
        cfg.hf_hub_log_args["output_path"] = cfg.output_path
    tracker = EvaluationTracker(**cfg.hf_hub_log_args)
    model_args = cfg.model_args
    extra = {"batch_size": cfg.batch_size, "max_batch_size": cfg.max_batch_size, "device": cfg.device}
    # API models: each call gets --timeout and is charged what the provider reports
    timeout = resolve_timeout(config.timeout, model_args)
    # the harness's and litellm's retries are off: every retry is ours (AttemptBilling), reserved
    # against --budget-usd before it is sent and charged when the provider may have billed it
    lm = compat.build_lm(cfg.model, model_args, extra=extra, timeout=timeout, own_retries=True)
    billing = AttemptBilling(price, lm, RetryPolicy(max_attempts=harness_attempts(model_args)))
    compat.before_requests(lm, billing.before_send)
    tmpdir = tempfile.mkdtemp(prefix="lm-eval-adaptive-")
    # the harness's CachingLM (one sqlite file across calls): the final pass re-uses generations
    cache_path = cfg.use_cache or os.path.join(tmpdir, "generations")
    seeds = cfg.seed if cfg.seed else [0, 1234, 1234, 1234]

    def evaluate(task_obj, docs, *, tracker_=None, log=True, bootstrap=0):
        return simple_evaluate(
            model=lm, model_args=model_args, tasks=[task_obj],
            # in task order: the harness labels a chosen document by its position in this list
            samples={task_obj.config.task: sorted(int(d) for d in docs)}, use_cache=cache_path,
            num_fewshot=cfg.num_fewshot, gen_kwargs=cfg.gen_kwargs, task_manager=task_manager,
            log_samples=log, bootstrap_iters=bootstrap, evaluation_tracker=tracker_,
            system_instruction=cfg.system_instruction, apply_chat_template=cfg.apply_chat_template,
            fewshot_as_multiturn=cfg.fewshot_as_multiturn, random_seed=seeds[0],
            numpy_random_seed=seeds[1], torch_random_seed=seeds[2], fewshot_random_seed=seeds[3],
            confirm_run_unsafe_code=cfg.confirm_run_unsafe_code, metadata=cfg.metadata)

    outcomes, all_samples = [], {}
    try:
        with compat.harness_bars_off():  # the display (or nothing) instead of a bar per request
            all_results = _evaluate_tasks(bound, price, judges, config, evaluate, tracker, cfg, outcomes,
                                          all_samples, timeout, display, plan.metric_bindings, billing)
    except (InputError, KeyboardInterrupt, ModelCallError):
        raise
    except Exception as e:  # a model or metric call that failed for good: say so, write nothing
        billed = (" The failed call was sent and never answered (a timeout or a dropped connection): the "
                  "provider may have billed it.") if may_have_been_billed(e) else ""
        tried = (f" {billing.attempts} attempt(s) sent, {billing.billed_failures} of them failed after sending "
                 f"(charged ${billing.billed_failures_usd:.6g})." if billing.attempts else "")
        raise ModelCallError(redact_text(f"the run stopped, nothing was written: {type(e).__name__}: {e}.{billed}{tried}")) from e
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)

    # everything succeeded: write the harness's output files, then report
    tracker.save_results_aggregated(results=all_results, samples=all_samples if cfg.log_samples else None)
    if cfg.log_samples:
        for t, rows in all_samples.items():
            tracker.save_results_samples(task_name=t, samples=rows)
    public = redact(all_results)  # what is shown holds no secret (the files are redacted as written)
    if display is not None:
        display.done(public, compat.results_file(tracker, cfg.output_path))
    _say(f"{cfg.model} ({redact_text(str(cfg.model_args))}), adaptive: se_target={config.se_target}, "
         f"min_items={config.min_items}, max_items={config.max_items}, "
         f"budget_usd={config.budget_usd}")
    _say(make_table(display_results(public)))
    for label, a in metric_blocks(public["adaptive"]):
        est = a["metric_estimate"]
        judge = f" (judge ${a['judge_cost_usd']:.4f})" if a["judge"]["calls"] else ""
        _say(f"{label}: θ̂ = {a['theta']:+.3f} ± {a['se']:.3f}; {a['items']} of {a['task_docs']} documents "
             f"({a['pct_of_task']:.1f}%); estimated full-task {a['metric']} = {est['estimate']:.4f} "
             f"[{est['lower']:.4f}, {est['upper']:.4f}]; ${a['cost_usd']:.4f}{judge}; "
             f"stopped: {a['stopped_because']}")
        note = misfit_note(a["person_fit"])
        if note:
            _say(f"{label}: misfit: {note}")
    if cfg.output_path:
        _say(f"results written under {cfg.output_path}")
    return 0


class ModelCallError(RuntimeError):
    """A model or metric call failed for good (after our retries)."""


class BudgetRefused(ModelFailed):
    """An attempt was not sent: its worst case did not fit under ``--budget-usd``."""


def harness_attempts(model_args) -> int:
    """Attempts per call: the harness model's ``max_retries`` argument (its own meaning: attempts
    in all), else the harness API models' default, 3."""
    from lm_eval.utils import simple_parse_args_string

    args = dict(model_args) if isinstance(model_args, dict) else simple_parse_args_string(model_args or "")
    try:
        return max(1, int(args.get("max_retries", 3)))
    except (TypeError, ValueError):
        raise InputError(f"--model_args max_retries={args.get('max_retries')!r}: give a whole number >= 1") from None


class AttemptBilling:
    """Every attempt of a batch's evaluation is a paid call of its own (``run --adaptive``).

    The harness's and litellm's retries are off (``build_lm(own_retries=True)``); a batch whose
    evaluation fails with an error :func:`~lm_eval_adaptive.harness.billing.is_retryable` accepts
    is evaluated again (:class:`RetryPolicy`: backoff with full jitter, at most the model's
    ``max_retries`` attempts); the harness's cache keeps the answers an attempt got, so a retry
    sends only what is missing. Before the LM sends requests (:meth:`before_send`, via
    :func:`~lm_eval_adaptive.harness.lm_eval_compat.before_requests`) their worst case (prompt
    bytes plus a chat-template allowance per request, ``max_gen_toks`` output tokens, at the
    model's price) is reserved against the task's budget: when spent + reserved + it exceeds the
    budget, nothing is sent (:class:`BudgetRefused`) and the task stops on its budget. A failed
    attempt is charged at once: the usage of what was answered, or its whole reservation when the
    request was sent and never answered (:func:`may_have_been_billed`: a timeout, a dropped
    connection), since the provider bills what it finished even when the client gave up.
    """

    def __init__(self, price, lm, policy: RetryPolicy):
        self.price, self.lm, self.policy = price, lm, policy
        self.attempts = self.retries = self.billed_failures = 0
        self.billed_failures_usd = 0.0
        self._test = None  # the test the batch in flight charges
        self._reserved = 0.0  # the worst case of what the attempt in flight sent

    def counts(self) -> dict:
        """The attempts sent, the retries among them, and the failed attempts charged as billed."""
        return {"attempts": self.attempts, "retries": self.retries, "billed_failures": self.billed_failures,
                "billed_failures_usd": self.billed_failures_usd}

    def upper_usd(self, request_type: str, requests) -> float:
        """The most the requests can cost (their prompt bytes bound their tokens)."""
        inp = out = 0
        for inst in requests:
            inp += TEMPLATE_TOKENS + sum(len(str(a).encode("utf-8")) for a in inst.args if not isinstance(a, dict))
            if request_type == "generate_until":
                gk = next((a for a in inst.args if isinstance(a, dict)), {}) or {}
                out += int(gk.get("max_gen_toks") or compat.default_max_gen_toks(self.lm))
            else:
                out += 1
        return float(upper_estimate(self.price, inp, out))

    def before_send(self, request_type: str, requests) -> None:
        worst = self.upper_usd(request_type, requests)
        test = self._test
        if test is not None and test.budget is not None and \
                test.spent + self._reserved + worst > test.budget * (1 + 1e-12):
            raise BudgetRefused(f"not sent: its worst case ${worst:.6g} does not fit under the budget (spent "
                                f"${test.spent:.6g} of ${test.budget:.6g})")
        self._reserved += worst

    def evaluate(self, test, n_docs: int, attempt_fn):
        """``attempt_fn()`` (one harness evaluation of a batch), retried; None when the budget
        refused an attempt (nothing of it was sent). ``attempt_fn`` returns its result, or raises
        with ``known`` (USD of what was answered) set on the error."""
        def before_sleep(state) -> None:
            e = state.outcome.exception()
            log.info("%d document(s): %s; retry %d in %.2fs", n_docs, f"{type(e).__name__}: {e}"[:300],
                     state.attempt_number, state.next_action.sleep if state.next_action else 0.0)

        try:
            for attempt in self.policy.retrying(sleep=time.sleep, before_sleep=before_sleep):
                with attempt:
                    n = attempt.retry_state.attempt_number
                    self._test, self._reserved = test, 0.0
                    try:
                        out = attempt_fn()
                    except Exception as e:
                        sent = self._reserved > 0
                        known = float(getattr(e, "known_usd", 0.0) or 0.0)
                        usd = known
                        if sent and may_have_been_billed(e):
                            usd = max(known, self._reserved)
                            self.billed_failures += 1
                            self.billed_failures_usd += usd
                        if usd > 0:
                            test.charge(usd)
                        if sent:
                            self.attempts += 1
                            self.retries += n > 1
                        raise
                    finally:
                        self._test = None
                    self.attempts += 1
                    self.retries += n > 1
                    return out
        except BudgetRefused as e:
            log.warning("%d document(s): %s", n_docs, e)
            return None


def _evaluate_tasks(bound, price, judges, config, evaluate, tracker, cfg, outcomes, all_samples, timeout,
                    display=None, metric_bindings=None, billing: AttemptBilling | None = None) -> dict:
    """Run the adaptive test of every task; return the merged harness results (nothing written)."""
    all_results = None
    metric_bindings = metric_bindings or {}
    for tname, task_obj, binding in bound:
        compat.use_full_run_requests(task_obj)
        if tname in metric_bindings:
            o = _multi_metric_task(tname, task_obj, metric_bindings[tname], price, judges, config, evaluate,
                                   timeout, display, billing)
        else:
            o = _adaptive_task(tname, task_obj, binding, price, judges, config, evaluate, timeout, display, billing)
        outcomes.append(o)
        if not o.doc_ids:  # nothing scored (the budget went on failed attempts): no results to write
            t = o.test
            raise ModelCallError(f"task {tname}: stopped because {t.stopped_because} before any document was "
                                 f"scored; spent ${t.spent:.6g} of ${t.budget if t.budget is not None else 0:.6g}")
        # final pass over the administered documents: every generation comes from the cache
        # (and every judgement from the judge's in-process memo)
        res = evaluate(task_obj, sorted(o.doc_ids), tracker_=tracker, log=True,
                       bootstrap=getattr(cfg, "bootstrap_iters", 100000))
        annotate = _annotate_multi_samples if isinstance(o, MultiTaskOutcome) else _annotate_samples
        all_samples.update(annotate(res.pop("samples", {}), o))
        if all_results is None:
            all_results = res
        else:
            for key in ("results", "configs", "versions", "n-shot", "higher_is_better", "n-samples"):
                all_results.setdefault(key, {}).update(res.get(key, {}))
    all_results["adaptive"] = {o.task: _multi_block(o) if isinstance(o, MultiTaskOutcome) else _adaptive_block(o)
                               for o in outcomes}
    for o in outcomes:
        headline_estimate(all_results, o.task, all_results["adaptive"][o.task])
    # the model was built here, so the harness saw "CUSTOM": record what it really is
    all_results["config"]["model"] = cfg.model
    all_results["model_source"] = tracker.general_config_tracker.model_source = cfg.model
    return all_results


def adaptive_test(bank, item_costs: np.ndarray, config: AdaptiveRunConfig, name: str) -> AdaptiveTest:
    """The adaptive test of one task of ``run --adaptive``: ``config``'s stopping rules, ``item_costs``
    (USD per bank item: the bank's token counts at the model's price) for its budget."""
    return AdaptiveTest(bank, se_target=config.se_target, min_items=config.min_items,
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


def _adaptive_task(tname, task_obj, binding: BankBinding, price, judges: JudgePricing, config: AdaptiveRunConfig,
                   evaluate, timeout: float, display: RunDisplay | None = None,
                   billing: AttemptBilling | None = None) -> TaskOutcome:
    bank, metric, doc_of_item = binding.bank, binding.metric, binding.doc_of_item
    costs = price.item_costs(bank.input_tokens, bank.output_tokens)
    test = adaptive_test(bank, costs, config, tname)
    doc_ids, raws, clipped = [], [], 0
    trajectory = {"theta": [], "se": []}
    if display is not None:
        display.update(task_progress(test, binding, raws))
    usage, judge = _new_tallies()
    while (step := _next_batch(test, config.batch_size, doc_of_item, task_obj, tname, evaluate, timeout, price,
                               judges, costs, usage, judge, billing)) is not None:
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
    judge["prices"] = _judge_prices(judges)
    return TaskOutcome(task=tname, binding=binding, test=test, doc_ids=doc_ids, raw=raws, clipped=clipped,
                       price=price, usage=usage, estimated_usd=float(np.sum(costs[test.examinee.items])),
                       judge=judge, trajectory=trajectory)


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


def multi_metric_test(bindings: list, item_costs: np.ndarray, config: AdaptiveRunConfig, name: str) -> MultiMetricTest:
    """The multi-metric adaptive test of one task of ``run --adaptive`` (a bank per metric): ``config``'s
    stopping rules, the SE target applying to every metric; ``item_costs``: USD per joint item."""
    return MultiMetricTest({b.metric: b.bank for b in bindings}, se_target=config.se_target,
                           min_items=config.min_items, max_items=config.max_items, budget=config.budget_usd,
                           item_costs=item_costs, seed=config.seed, name=name)


def _metric_progress(test: MultiMetricTest, binding: BankBinding, raws, task: str) -> TaskProgress:
    e = test.examinees[binding.metric]
    est = full_task_estimate(binding.bank, e.items, np.asarray(raws, dtype=float), e.theta, e.se, misfit=e.misfit)
    return TaskProgress(task=f"{task} [{binding.metric}]", metric=binding.metric, items=e.n,
                        max_items=test.max_items, task_docs=binding.n_docs, theta=e.theta, se=e.se,
                        estimate=est["estimate"], lower=est["lower"], upper=est["upper"], spent=test.spent,
                        budget=test.budget, stopped_because=test.stopped_because)


def _multi_metric_task(tname, task_obj, bindings: list, price, judges: JudgePricing, config: AdaptiveRunConfig,
                       evaluate, timeout: float, display: RunDisplay | None = None,
                       billing: AttemptBilling | None = None) -> MultiTaskOutcome:
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
    while (step := _next_batch(test, config.batch_size, doc_of_joint, task_obj, tname, evaluate, timeout, price,
                               judges, costs, usage, judge, billing)) is not None:
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
    judge["prices"] = _judge_prices(judges)
    return MultiTaskOutcome(task=tname, bindings=list(bindings), test=test, doc_ids=doc_ids, raw=raws,
                            clipped=clipped, price=price, usage=usage,
                            estimated_usd=float(np.sum(costs[test.items])), judge=judge, trajectory=trajectory)


def _new_tallies() -> tuple[dict, dict]:
    """A task's running totals: the model's reported usage, and its judge calls."""
    return ({"prompt_tokens": 0, "completion_tokens": 0, "items_charged_by_usage": 0},
            {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0, "unpriced_calls": 0})


def _next_batch(test, batch_size: int, doc_of, task_obj, tname: str, evaluate, timeout: float, price,
                judges: JudgePricing, costs: np.ndarray, usage: dict, judge: dict, billing):
    """The test's next items generated and scored (:func:`_generate`): ``(items, documents, USD charged per
    document, each document's sample)``; None once the test has stopped, or when the budget refused the
    batch's calls (nothing of it was sent; the test is stopped on the budget)."""
    batch = test.next_items(batch_size)
    if not batch:
        return None
    docs = [int(doc_of[i]) for i in batch]
    got = _generate(task_obj, tname, docs, evaluate, timeout, price, judges, costs[batch], usage, judge,
                    billing=billing, test=test)
    if got is None:
        test.stop("budget")
        return None
    return (batch, docs, *got)


def _generate(task_obj, tname: str, docs: list, evaluate, timeout: float, price, judges: JudgePricing,
              estimates: np.ndarray, usage: dict, judge: dict, *, billing: AttemptBilling | None = None,
              test=None) -> tuple[np.ndarray, dict] | None:
    """One harness evaluation of ``docs``: (USD charged per document, model and judges, added to the
    ``usage`` and ``judge`` tallies; each document's sample, the first filter's). With ``billing``,
    each attempt is reserved against ``test``'s budget and retried (:class:`AttemptBilling`); None
    when the budget refused it."""
    def attempt():
        with compat.usage_sink() as sink, judge_calls(timeout=timeout) as judged:
            try:
                res = evaluate(task_obj, docs)
            except Exception as e:  # what was answered before it failed is paid for
                known = _charges(price, sink, estimates, usage) if sink else np.zeros(len(estimates))
                known = known + _judge_charges(judges, judged, estimates, judge)
                try:
                    e.known_usd = float(np.sum(known))
                except AttributeError:  # an error that takes no attributes: the answered part is lost
                    pass
                raise
        return res, _charges(price, sink, estimates, usage) + _judge_charges(judges, judged, estimates, judge)

    if billing is None:
        res, charged = attempt()
    else:
        before = billing.counts()
        try:
            got = billing.evaluate(test, len(docs), attempt)
        finally:
            for k, v in billing.counts().items():  # this task's share of the calls
                usage[k] = usage.get(k, 0) + v - before[k]
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


def _judge_prices(judges: JudgePricing) -> dict:
    """The judges' prices, as the outputs record them."""
    return {m: {"input_per_mtok": p.input_per_mtok, "output_per_mtok": p.output_per_mtok, "source": p.source}
            for m, p in judges.prices.items()}


def _charges(price, usage_list, estimates: np.ndarray, totals: dict) -> np.ndarray:
    """USD of each document of a batch: the provider-reported usage of the batch's calls at
    ``price``, shared out in proportion to the documents' estimates (exact for one document
    per batch); the estimates themselves when some call reported no usage or none was made
    (a local model)."""

    if not usage_list:
        return estimates
    try:
        total = sum(actual_cost(price, u) for u in usage_list)
    except ValueError:
        return estimates
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


#: Key every sample row of an adaptive run carries (its order, item id, information, scaled score).
ADAPTIVE_SAMPLE_KEY = "adaptive"
#: Suffix of the metrics that hold plain means over the administered documents only.
ADMINISTERED_SUFFIX = "_administered_mean"


def headline_estimate(results: dict, task: str, block: dict) -> None:
    """Make the full-task estimate the task's metric in the harness results.

    ``results["results"][task]["<metric>,<filter>"]`` becomes the estimate, and its
    ``_stderr`` the interval's half-width / 1.96. The harness's own values (plain means over
    the documents the CAT picked, biased toward them) move to ``<metric>_administered_mean``
    (and its ``_stderr``), every metric of the task alike: no biased number keeps a metric's
    own name.
    """
    row = results.get("results", {}).get(task)
    if row is None:
        return
    estimates = _estimates(block)
    hib = results.setdefault("higher_is_better", {}).setdefault(task, {})
    for key in [k for k in row if "," in k and k != "alias"]:
        name, _, filt = key.partition(",")
        if name.endswith("_stderr") or name.endswith(ADMINISTERED_SUFFIX):
            continue
        row[f"{name}{ADMINISTERED_SUFFIX},{filt}"] = row.pop(key)
        if f"{name}_stderr,{filt}" in row:
            row[f"{name}{ADMINISTERED_SUFFIX}_stderr,{filt}"] = row.pop(f"{name}_stderr,{filt}")
        if name in hib:
            hib[f"{name}{ADMINISTERED_SUFFIX}"] = hib[name]
        if name in estimates:
            est = estimates[name]
            row[key] = est["estimate"]
            row[f"{name}_stderr,{filt}"] = (est["upper"] - est["lower"]) / (2 * Z95)
    if len(estimates) == 1:
        (metric,) = estimates
        block["headline"] = (f"results[{task!r}][{metric!r}] is the full-task estimate; the plain mean of the "
                             f"administered documents is {metric}{ADMINISTERED_SUFFIX}")
    else:
        block["headline"] = (f"results[{task!r}][METRIC] is the full-task estimate for each of "
                             f"{', '.join(estimates)}; the plain mean of the administered documents is "
                             f"METRIC{ADMINISTERED_SUFFIX}")


def _estimates(block: dict) -> dict:
    """Metric → its full-task estimate in a task's ``adaptive`` block (one metric, or several)."""
    if "metrics" in block:
        return {m: b["metric_estimate"] for m, b in block["metrics"].items()}
    return {block["metric"]: block["metric_estimate"]}


def metric_blocks(adaptive: dict) -> list[tuple[str, dict]]:
    """(label, block) for each metric of each task of a results file's ``adaptive`` blocks: a
    single-bank task's block as it is (label: the task), a multi-metric task's per-metric blocks
    (label ``TASK [METRIC]``)."""
    out = []
    for task, block in (adaptive or {}).items():
        if "metrics" in block:
            out += [(f"{task} [{m}]", b) for m, b in block["metrics"].items()]
        else:
            out.append((task, block))
    return out


def display_results(results: dict) -> dict:
    """A copy of the results for the harness's table: each estimate shown with its 95% interval."""
    import copy

    table = copy.deepcopy(results)
    for task, block in (results.get("adaptive") or {}).items():
        row = table.get("results", {}).get(task, {})
        for metric, est in _estimates(block).items():
            for key in [k for k in row if k.split(",", 1)[0] == metric]:
                row[key] = f"{est['estimate']:.4f} [{est['lower']:.4f}, {est['upper']:.4f}]"
                row.pop(f"{metric}_stderr,{key.partition(',')[2]}", None)
    return table


def _estimate_fields(bank, e, raw, n_docs: int) -> dict:
    """One metric's figures of an adaptive block: θ̂ ± SE, items, the full-task estimate, person fit."""
    est = full_task_estimate(bank, e.items, np.asarray(raw), e.theta, e.se, misfit=e.misfit)
    return {
        "theta": e.theta, "se": e.se, "theta_ci95": [e.theta - Z95 * e.se, e.theta + Z95 * e.se],
        "items": e.n, "task_docs": n_docs, "pct_of_task": 100.0 * e.n / max(n_docs, 1),
        "metric_estimate": {"estimate": est["estimate"], "lower": est["lower"], "upper": est["upper"],
                            "level": est["level"], "over_bank_items": est["items_total"]},
        "observed_mean": float(np.mean(raw)) if raw else None,
        "person_fit": e.person_fit.to_dict(),
    }


def _cost_fields(o, generations: int) -> dict:
    """What an adaptive run's generations cost, and where the figure comes from."""
    charged = o.usage["items_charged_by_usage"]
    return {
        "cost_source": ("provider usage" if charged == generations else
                        "bank estimate" if charged == 0 else "provider usage, partly estimated"),
        "cost_estimate_usd": o.estimated_usd,
        "usage": {k: o.usage[k] for k in ("prompt_tokens", "completion_tokens")},
        # attempts sent (each a paid call), retries among them, failed attempts charged as billed
        "calls": {k: o.usage.get(k, 0) for k in ("attempts", "retries", "billed_failures", "billed_failures_usd")},
        "price": {"input_per_mtok": o.price.input_per_mtok,
                  "output_per_mtok": o.price.output_per_mtok, "source": o.price.source},
    }


def _adaptive_block(o: TaskOutcome) -> dict:
    e = o.test.examinee
    return {
        "metric": o.binding.metric,
        **_estimate_fields(o.bank, e, o.raw, o.n_docs),
        "cost_usd": e.spent,
        "judge_cost_usd": o.judge.get("cost_usd", 0.0),
        "judge": dict(o.judge),
        **_cost_fields(o, e.n),
        "stopped_because": o.test.stopped_because,
        "trajectory": dict(o.trajectory),
        "clipped_scores": o.clipped,
        "bank_id": o.bank.bank_id, "bank_task": o.bank.task, "bank_metric": o.bank.metric,
        "item_field": o.binding.item_field,
        "settings": {"se_target": o.test.se_target, "min_items": o.test.min_items,
                     "max_items": o.test.max_items, "budget_usd": o.test.budget},
    }


def _multi_block(o: MultiTaskOutcome) -> dict:
    """The ``adaptive`` block of a multi-metric task: the run's shared figures (generations, cost,
    stop) and, under ``metrics``, one block per metric with its own θ̂, SE, interval and trajectory."""
    t = o.test
    n_docs = o.n_docs
    per = {}
    for b in o.bindings:
        e = t.examinees[b.metric]
        per[b.metric] = {
            "metric": b.metric,
            **_estimate_fields(b.bank, e, o.raw[b.metric], n_docs),
            "cost_usd": t.spent, "judge_cost_usd": o.judge.get("cost_usd", 0.0), "judge": dict(o.judge),
            "stopped_because": t.stopped_because,
            "se_target_met": t.se_target is not None and e.measurement_se <= t.se_target,
            "trajectory": dict(o.trajectory[b.metric]),
            "clipped_scores": o.clipped[b.metric],
            "bank_id": b.bank.bank_id, "bank_task": b.bank.task, "bank_metric": b.bank.metric,
            "item_field": b.item_field,
        }
    return {
        "metrics": per,
        "generations": t.n, "joint_items": len(t.item_ids), "task_docs": n_docs,
        "cost_usd": t.spent,
        "judge_cost_usd": o.judge.get("cost_usd", 0.0),
        "judge": dict(o.judge),
        **_cost_fields(o, t.n),
        "stopped_because": t.stopped_because,
        "signature": t.signature(),
        "settings": {"se_target": t.se_target, "min_items": t.min_items, "max_items": t.max_items,
                     "budget_usd": t.budget, "item_weighting": t.signature()["item_weighting"]},
    }


def _keep_generated(samples: dict, doc_ids, annotation) -> dict:
    """Keep the generated documents only, in generation order, each with ``annotation(k)`` (k: its
    0-based place in ``doc_ids``) under the sample key."""
    order = {d: k for k, d in enumerate(doc_ids)}
    out = {}
    for task, rows in samples.items():
        kept = []
        for s in rows:
            k = order.get(int(s["doc_id"]))
            if k is None:
                continue
            kept.append({**s, ADAPTIVE_SAMPLE_KEY: {"order": k + 1, **annotation(k)}})
        kept.sort(key=lambda s: s[ADAPTIVE_SAMPLE_KEY]["order"])
        out[task] = kept
    return out


def _annotate_multi_samples(samples: dict, o: MultiTaskOutcome) -> dict:
    """Keep the generated documents only, each with its order, joint item id, and per metric its
    information at selection and scaled score."""
    t = o.test
    metrics = [b.metric for b in o.bindings]
    # position of each generation in each metric's examinee (a metric records every one of them)
    info = {m: t.examinees[m].info_at_selection for m in metrics}
    scaled = {m: t.examinees[m].scores for m in metrics}
    return _keep_generated(samples, o.doc_ids, lambda k: {
        "item_id": t.item_ids[t.items[k]], "information": {m: info[m][k] for m in metrics},
        "scaled_score": {m: scaled[m][k] for m in metrics}})


def _annotate_samples(samples: dict, o: TaskOutcome) -> dict:
    """Keep the administered documents only, each with its selection order and information."""
    e = o.test.examinee
    return _keep_generated(samples, o.doc_ids, lambda k: {
        "item_id": str(o.bank.item_ids[e.items[k]]), "information": e.info_at_selection[k],
        "scaled_score": e.scores[k]})


# ------------------------------------------------------------ sample logs → table
def table_from_sample_logs(paths, *, task: str, metric: str, allow_outliers: bool = False):
    """A response table from harness ``--log_samples`` output of full runs (several models).

    Each PATH is a ``samples_<task>_*.jsonl`` file or a directory searched recursively for
    them. Sample logs of adaptive runs (their rows carry an ``adaptive`` record) hold only the
    documents a CAT picked: they are skipped with a warning naming them, and refused when
    nothing else is left. The model name comes from the ``results_*.json`` beside the file (``model_name``
    or ``config.model_args``), else the folder name. Item = ``doc_id``; tokens ≈ characters/4
    of the prompt and of the response. ``allow_outliers``: see
    :func:`~lm_eval_adaptive.data.responses.read_table`.
    """

    files = _sample_files(paths, task)
    model, item, score, itok, otok = [], [], [], [], []
    adaptive_logs = []
    for f in files:
        name = _model_for_samples(f)
        records = read_jsonl_records(f)
        if any(ADAPTIVE_SAMPLE_KEY in s for _, s in records):
            adaptive_logs.append(str(f))  # only the documents a CAT picked: not a full run
            continue
        for n, s in records:
            if metric not in s:
                have = sorted(k for k, v in s.items() if isinstance(v, (int, float)) and k != "doc_id")
                raise InputError(f"no metric {metric!r} in the sample (numeric fields: {', '.join(have)})",
                                 path=str(f), row=n)
            model.append(name)
            item.append(str(s["doc_id"]))
            score.append(s[metric])
            itok.append(len(_prompt_of(s.get("arguments"))) / 4)
            resp = s.get("filtered_resps") or s.get("resps") or [""]
            while isinstance(resp, list) and resp:
                resp = resp[0]
            otok.append(len(str(resp)) / 4)
    if adaptive_logs:
        msg = (f"skipped {len(adaptive_logs)} sample log(s) of adaptive runs (only the documents the CAT "
               f"picked; calibration needs full runs): {', '.join(adaptive_logs)}")
        if not model:
            raise InputError(msg + "; no full-run sample log is left")
        log.warning(msg)
    # the source names the sample logs: a bank calibrated from this table knows its ids are doc ids
    return ResponseTable.from_columns(model, item, score, itok, otok,
                                      source=f"{SAMPLE_LOGS_SOURCE}: " + ", ".join(map(str, paths)),
                                      metric=metric, allow_outliers=allow_outliers)


def _sample_files(paths, task: str) -> list[Path]:
    files = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(p.rglob(f"samples_{task}_*.jsonl"))
        elif p.exists():
            files.append(p)
        else:
            raise InputError("no such file or directory", path=str(p))
    if not files:
        raise InputError(f"no samples_{task}_*.jsonl under {', '.join(map(str, paths))}; "
                         "run the harness with --log_samples --output_path DIR")
    return files


def options_from_sample_logs(paths, *, task: str) -> dict[str, int]:
    """The number of answer options of each document (item = ``doc_id``) of a multiple-choice task,
    from harness sample logs: a multiple-choice document logs one loglikelihood request per option.
    Empty when some document logged a single request (not a multiple-choice task)."""
    options: dict[str, int] = {}
    for f in _sample_files(paths, task):
        for _, s in read_jsonl_records(f):
            a = s.get("arguments")
            n = len(a) if isinstance(a, (dict, list)) else 0
            if n < 2:
                return {}
            options[str(s["doc_id"])] = n
    return options


def _prompt_of(arguments) -> str:
    """The first request's prompt in a logged sample (lm-eval ≥0.4.10 logs a dict, older a list)."""
    a = arguments
    if isinstance(a, dict):
        a = next(iter(a.values()), {})
        a = a.get("arg_0", "") if isinstance(a, dict) else a
    while isinstance(a, (list, tuple)) and a:
        a = a[0]
    return str(a or "")


def _model_for_samples(path: Path) -> str:
    stamp = path.stem.split("_")[-1]
    cands = sorted(path.parent.glob(f"results_{stamp}*.json")) or sorted(path.parent.glob("results_*.json"))
    for r in cands:
        try:
            d = read_json(r, what="results file")  # under the input size limit
        except InputError:
            continue
        if not isinstance(d, dict):
            continue
        ma = (d.get("config") or {}).get("model_args")
        if isinstance(ma, dict) and ma.get("model"):
            return str(ma["model"])
        if isinstance(ma, str):
            for kv in ma.split(","):
                k, _, v = kv.partition("=")
                if k.strip() in ("model", "pretrained") and v:
                    return v.strip()
        if d.get("model_name"):
            return str(d["model_name"])
    return path.parent.name


def _say(text: str) -> None:
    """Print a line of the summary with its names shown escaped (:func:`~lm_eval_adaptive.display.shown`)."""
    print(shown(text, lines=True))

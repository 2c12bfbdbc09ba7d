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
:class:`~lm_eval_adaptive.engine.cat.multi_metric_test.MultiMetricTest`: each chosen document is
evaluated once and every bank's metric read from its sample; the task's ``adaptive`` block then
holds one block per metric under ``metrics`` (docs/outputs.md).

Before any model call, every task's bank is bound to the task
(:func:`~lm_eval_adaptive.harness.binding.bind_bank`: task, metric, bank ids → documents)
and the model's price resolved (:func:`~lm_eval_adaptive.data.price_map.model_price`).
Every call gets ``--timeout`` seconds. Calls an LLM judge makes while the task scores a
document are charged at the judge's price beside the model's.

The harness's own progress bars are off during an adaptive run; a
:class:`~lm_eval_adaptive.harness.task_loop.RunDisplay` given by the caller is told where each
task stands after every batch (:class:`~lm_eval_adaptive.harness.task_loop.TaskProgress`) and,
once the files are written, gets the results (each task's θ̂ and SE after every item are in its
``adaptive.trajectory``). This module prints nothing: the run returns an :class:`AdaptiveRunReport`
(the results, redacted, and what the summary names), which the command prints
(:mod:`lm_eval_adaptive.cli.run`), and a shipped bank taken without ``--bank`` is told to the
caller's ``note``.

This module is the orchestration: the plan (:func:`plan_adaptive_run`), the model, the cache,
the final pass and the output files. Each task's loop is :mod:`~lm_eval_adaptive.harness.task_loop`'s,
each attempt's reservation and retries :mod:`~lm_eval_adaptive.harness.attempts`', the judges'
prices :mod:`~lm_eval_adaptive.harness.judge_pricing`'s, and what the run adds to the harness's
outputs :mod:`~lm_eval_adaptive.harness.result_blocks`'.

Supported harness: see :mod:`lm_eval_adaptive.harness.lm_eval_compat` (every access to
lm-eval internals goes through it).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lm_eval_adaptive.data.price_map import priced_by_default
from lm_eval_adaptive.harness.output_limits import request_output_bound
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness import lm_eval_compat as compat
from lm_eval_adaptive.harness.attempts import AttemptBilling, harness_attempts
from lm_eval_adaptive.harness.bank_free_run import (
    BankFreeOutcome,
    annotate_bank_free_samples,
    bank_free_binding,
    bank_free_block,
    bank_free_task,
)
from lm_eval_adaptive.harness.bank_source import bank_reference, parse_banks, small_bank
from lm_eval_adaptive.harness.batch_journal import BatchJournal, RunJournal
from lm_eval_adaptive.harness.billing import RetryPolicy, may_have_been_billed
from lm_eval_adaptive.harness.binding import BankBinding, bind_bank, check_metric_bindings
from lm_eval_adaptive.harness.judge_pricing import JudgePricing
from lm_eval_adaptive.harness.llm_judge import remember_judgements
from lm_eval_adaptive.harness.metrics import declared_judges
from lm_eval_adaptive.harness.result_blocks import (
    adaptive_block,
    annotate_multi_samples,
    annotate_samples,
    headline_estimate,
    multi_block,
)
from lm_eval_adaptive.harness.run_checks import check_before_loading
from lm_eval_adaptive.harness.scorer import parse_gen_kwargs, resolve_timeout
from lm_eval_adaptive.harness.task_loop import (
    AdaptiveRunConfig,
    MultiTaskOutcome,
    RunDisplay,
    adaptive_task,
    multi_metric_task,
)
from lm_eval_adaptive.redaction import redact, redact_text

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm: bundled price map, no fetch

__all__ = ["AdaptivePlan", "AdaptiveRunReport", "plan_adaptive_run", "execute_run", "run_adaptive",
           "ModelCallError", "journal_settings"]

#: The harness's parsed ``run`` arguments (the namespace lm-eval's own parser gives; cli/run.py parses them).
HarnessArgs = Any


def execute_run(harness_args: HarnessArgs, adaptive: AdaptiveRunConfig | None, harness_execute,
                forecast=None, display: RunDisplay | None = None, note=None,
                journal: RunJournal | None = None) -> int | AdaptiveRunReport:
    """``run``: the harness's own run of ``harness_args`` (its parsed ``run`` arguments; returns 0), or
    with ``adaptive`` the adaptive run of every task (shown on ``display``; returns its
    :class:`AdaptiveRunReport`); with ``adaptive.dry_run``, ``forecast(plan, adaptive)`` of its
    :class:`AdaptivePlan` instead (no model is built, nothing is called; returns what the forecast
    returns). ``note(line)`` is told each shipped bank taken without ``--bank``; ``journal``: where the
    adaptive run journals its batches (with ``--output_path``; see :func:`run_adaptive`). The task index
    covers only ``--include_path`` when it holds every requested task."""
    with compat.index_include_path_only(getattr(harness_args, "tasks", None)), compat.redacted_output_files():
        if adaptive is None:
            harness_execute(harness_args)
            return 0
        if adaptive.dry_run:
            if forecast is None:
                raise InputError("--dry-run: no cost forecast was given to this run")
            plan = plan_adaptive_run(harness_args, adaptive, note=note)
            if any(b.bank is None for _, _, b in plan.bound):  # no bank: no token counts to forecast from
                raise InputError(f"--dry-run: task {next(t for t, _, b in plan.bound if b.bank is None)!r} has no "
                                 "item bank, so there are no token counts to forecast from; run with a small "
                                 "--budget-usd instead (the cap holds)")
            return forecast(plan, adaptive)
        return run_adaptive(harness_args, adaptive, display=display, note=note, journal=journal)


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
    #: task → how the run's settings name its bank(s) (a shipped bank's name, a file's absolute path)
    bank_refs: dict = field(default_factory=dict)

    def max_output_tokens(self, task_obj) -> int:
        """The most output tokens one request of ``task_obj`` may be billed: its worst case as sent
        (:func:`~lm_eval_adaptive.harness.output_limits.request_output_bound`: the largest output limit of
        the run's ``--gen_kwargs`` over the task's generation kwargs, ``max_gen_toks`` defaulting to the
        model's ``max_gen_toks`` argument, else the harness API models' default (256); times ``n``), as
        often as the task repeats it."""
        from lm_eval.utils import simple_parse_args_string

        gk = dict(task_obj.get_config("generation_kwargs") or {})
        extra = self.cfg.gen_kwargs
        gk.update(simple_parse_args_string(extra) if isinstance(extra, str) else dict(extra or {}))
        ma = self.cfg.model_args
        ma = simple_parse_args_string(ma) if isinstance(ma, str) else dict(ma or {})
        if task_obj.get_config("output_type") != "generate_until":
            return 1
        repeats = int(task_obj.get_config("repeats") or 1)
        return repeats * request_output_bound(gk, int(ma.get("max_gen_toks") or 256))

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


def plan_adaptive_run(hargs: HarnessArgs, config: AdaptiveRunConfig, *, note=None) -> AdaptivePlan:
    """Check and resolve the adaptive run of ``hargs`` with ``config`` (banks bound to their tasks,
    prices resolved) without building the model or calling anything; ``note(line)`` is told each
    shipped bank taken without ``--bank``."""
    from lm_eval.config.evaluate_config import EvaluatorConfig

    parse_gen_kwargs(getattr(hargs, "gen_kwargs", None))
    cfg = EvaluatorConfig.from_cli(hargs)
    # the checks that need no task loaded, first: banks (and the task's metric, from its YAML), the price
    early = check_before_loading(getattr(hargs, "tasks", None), cfg.include_path, cfg.model, cfg.model_args,
                                 banks=config.bank, metric=config.metric, prices=config.price, note=note,
                                 device=getattr(hargs, "device", None))
    bank_paths, name, policy, price = early.bank_paths, early.model, early.policy, early.price
    if note is not None and priced_by_default({name: price}):
        note(f"{name}: no known price; priced by the default ${price.input_per_mtok:g}/${price.output_per_mtok:g} "
             f"per M tokens ({price.source})")
    judges = JudgePricing(policy)
    try:
        task_manager = cfg.process_tasks(cfg.metadata)
    except ValueError as e:  # the harness's "Tasks not found: ..."
        if "not found" not in str(e):
            raise
        raise InputError(f"{e}: no such harness task; a task of this project needs --include_path task_configs "
                         "(the folder of its YAML)") from None
    tasks = list(cfg.tasks)
    if bank_paths is None or set(bank_paths) != set(tasks):
        bank_paths = parse_banks(list(config.bank), tasks, metric=config.metric, several=True,
                                 note=note if bank_paths is None else None, include_path=cfg.include_path,
                                 bank_free=True)
    budgeted = config.budget_usd is not None
    # every task's bank is checked and bound before the model is built: nothing is asked of a bad input
    bound, multi, refs = [], {}, {}
    for task_name in tasks:
        with declared_judges() as declared:
            loaded = task_manager.load([task_name])["tasks"]
        if len(loaded) != 1:
            raise InputError(f"--adaptive runs single tasks; {task_name!r} expands to {len(loaded)} tasks "
                             f"({', '.join(list(loaded)[:5])}…): give them one by one with a bank each")
        tname, task_obj = next(iter(loaded.items()))
        specs = bank_paths[task_name]
        if specs is None:  # no bank for the task: the bank-free run (harness/bank_free_run.py)
            bound.append((tname, task_obj, bank_free_binding(tname, task_obj, config.metric, config.score_range)))
            refs[tname] = [None]
            judges.declare(declared)
            continue
        small = None if config.use_small_bank else small_bank(specs)
        if small is not None:  # a bank from too few models: the bank-free run, and why
            use, metric = small.use, config.metric or small.metric
            bound.append((tname, task_obj, bank_free_binding(tname, task_obj, metric, config.score_range,
                                                             why=use.reason)))
            refs[tname] = [None]
            judges.declare(declared)
            if note is not None:
                note(f"{tname}: {use.reason} (bank-free)")
            continue
        if len(specs) > 1 and config.metric:
            raise InputError(f"task {task_name!r} is given {len(specs)} banks (one per metric): each bank says its "
                             "metric; --metric is for a single bank")
        bindings = [bind_bank(spec, tname, task_obj, metric=config.metric, item_field=config.item_field)
                    for spec in specs]
        refs[tname] = [bank_reference(spec) for spec in specs]
        judges.declare(declared)
        bound.append((tname, task_obj, bindings[0]))
        if len(bindings) > 1:
            multi[tname] = check_metric_bindings(tname, bindings)
    plan = AdaptivePlan(cfg=cfg, task_manager=task_manager, model=name, price=price, judges=judges, bound=bound,
                        metric_bindings=multi, bank_refs=refs)
    if budgeted:
        for tname, _, binding in (x for x in bound if x[2].bank is not None):
            cheapest = float(np.nanmin(price.item_costs(binding.bank.input_tokens, binding.bank.output_tokens)))
            if config.budget_usd < cheapest:
                raise InputError(f"--budget-usd {config.budget_usd:g} is below one call: the cheapest first call "
                                 f"of task {tname!r} costs ${cheapest:.6g} (the bank's token counts at the "
                                 f"model's price); nothing was run")
    return plan


@dataclass(frozen=True)
class AdaptiveRunReport:
    """What an adaptive run gives its caller to show, once its files are written: the merged harness
    results with each task's ``adaptive`` block (redacted: it holds no secret), the harness's table
    of them, and the run's model, settings and output."""

    results: dict
    #: the harness's own text table of the results (``lm_eval.utils.make_table``)
    table: str
    #: the harness's ``--model`` and its ``--model_args`` (redacted)
    model: str
    model_args: str
    config: AdaptiveRunConfig
    output_path: str | None
    #: the results JSON written, when there is one
    results_file: object = None


def run_adaptive(hargs: HarnessArgs, config: AdaptiveRunConfig, *, display: RunDisplay | None = None,
                 note=None, journal: RunJournal | None = None) -> AdaptiveRunReport:
    """The adaptive run (module docstring) of the harness run ``hargs`` with ``config``, shown on ``display``;
    ``note(line)`` is told each shipped bank taken without ``--bank``. With ``journal`` and an output path,
    every batch is journaled in the results folder before its test is told, and a journal found there
    (a resume) is replayed first (:mod:`~lm_eval_adaptive.harness.batch_journal`); once the results are
    written the journal is finished."""
    from lm_eval import simple_evaluate
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.utils import make_table

    plan = plan_adaptive_run(hargs, config, note=note)
    cfg, task_manager, price, judges, bound = plan.cfg, plan.task_manager, plan.price, plan.judges, plan.bound
    if journal is not None and cfg.output_path:  # before the model is built: a refused resume costs nothing
        journal.start(compat.results_folder(cfg.output_path, cfg.model_args), journal_settings(plan, config))
    batches = BatchJournal(journal if cfg.output_path else None)

    if cfg.output_path:
        cfg.hf_hub_log_args["output_path"] = cfg.output_path
    tracker = EvaluationTracker(**cfg.hf_hub_log_args)
    model_args = cfg.model_args
    extra = {"batch_size": cfg.batch_size, "max_batch_size": cfg.max_batch_size, "device": cfg.device}
    # API models: each call gets --timeout and is charged what the provider reports
    timeout = resolve_timeout(config.timeout, model_args)
    # the harness's and litellm's retries are off: every retry is ours (AttemptBilling), reserved
    # against --budget-usd before it is sent and charged when the provider may have billed it
    _no_litellm_banners()
    lm = compat.build_lm(cfg.model, model_args, extra=extra, timeout=timeout, own_retries=True)
    billing = AttemptBilling(price, lm, RetryPolicy(max_attempts=harness_attempts(model_args)))
    compat.before_requests(lm, billing.before_send)
    compat.capture_answers(lm, batches.capture)
    tmpdir = tempfile.mkdtemp(prefix="lm-eval-adaptive-")
    # the harness's CachingLM (one sqlite file across calls): the final pass re-uses generations
    cache_path = cfg.use_cache or os.path.join(tmpdir, "generations")
    if answers := batches.answers():  # a resume: what the journal holds is never asked again
        compat.fill_cache(cache_path, lm, answers)
    remember_judgements(batches.judgements())
    seeds = cfg.seed if cfg.seed else [0, 1234, 1234, 1234]

    def evaluate(task_obj, docs, *, tracker_=None, log=True, bootstrap=0):
        # a batch of the adaptive loop (no tracker: nothing written) skips the harness's environment report
        with contextlib.nullcontext() if tracker_ is not None else compat.without_env_info():
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
                                          all_samples, timeout, display, plan.metric_bindings, billing, batches)
    except KeyboardInterrupt:
        raise
    except (InputError, ModelCallError):
        batches.discard_unpaid()
        raise
    except Exception as e:  # a model or metric call that failed for good: say so, write nothing
        batches.discard_unpaid()
        billed = (" The failed call was sent and never answered (a timeout or a dropped connection): the "
                  "provider may have billed it.") if may_have_been_billed(e) else ""
        tried = (f" {billing.attempts} attempt(s) sent, {billing.billed_failures} of them failed after sending "
                 f"(charged ${billing.billed_failures_usd:.6g})." if billing.attempts else "")
        kept = (f" The {batches.documents} document(s) scored before it are journaled: rerun the command with "
                "--resume to go on without paying for them again." if batches.documents else "")
        raise ModelCallError(redact_text(f"the run stopped, {'no results were' if kept else 'nothing was'} written: "
                                         f"{type(e).__name__}: {e}.{billed}{tried}{kept}")) from e
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)

    # everything succeeded: write the harness's output files, then report
    _record_run(all_results, plan, hargs)
    tracker.save_results_aggregated(results=all_results, samples=all_samples if cfg.log_samples else None)
    if cfg.log_samples:
        for t, rows in all_samples.items():
            tracker.save_results_samples(task_name=t, samples=rows)
    public = redact(all_results)  # what is shown holds no secret (the files are redacted as written)
    results_file = compat.results_file(tracker, cfg.output_path)
    if batches.enabled:
        journal.finish(results_file)
    if display is not None:
        display.done(public, results_file)
    return AdaptiveRunReport(results=public, table=make_table(public), model=str(cfg.model),
                             model_args=redact_text(str(cfg.model_args)), config=config,
                             output_path=cfg.output_path or None, results_file=results_file)


def journal_settings(plan: AdaptivePlan, config: AdaptiveRunConfig) -> dict:
    """What a resumed run must share with the run its journal is of: the model, its arguments and price,
    the tasks and how their requests are built, each task's banks (by content), and every other adaptive
    setting but how long a call may take (the banks and prices as resolved, however the command spells
    them)."""
    cfg = plan.cfg
    adaptive = {k: v for k, v in vars(config).items()
                if k not in ("timeout", "dry_run", "bank", "price", "use_small_bank")}  # banks: by mode below
    banks = {t: [b.bank.bank_id if b.bank is not None else "bank-free" for b in plan.metric_bindings.get(t, [binding])]
             for t, _, binding in plan.bound}
    return {"model": str(cfg.model), "model_args": redact_text(str(cfg.model_args)),
            "price": [float(plan.price.input_per_mtok), float(plan.price.output_per_mtok)],
            "tasks": list(cfg.tasks), "banks": banks,
            "num_fewshot": cfg.num_fewshot, "gen_kwargs": cfg.gen_kwargs if isinstance(cfg.gen_kwargs, (str, dict))
            else None, "apply_chat_template": cfg.apply_chat_template,
            "fewshot_as_multiturn": cfg.fewshot_as_multiturn, "system_instruction": cfg.system_instruction,
            "seed": list(cfg.seed) if cfg.seed else None, "adaptive": adaptive}


def _no_litellm_banners() -> None:
    """litellm prints a "Give Feedback / Get Help" banner before every error it raises: off for the run's
    calls (set here, as the model is built, so that the checks before it need not import litellm)."""
    try:
        import litellm  # noqa: PLC0415 - seconds to import: only once the run is to call a model
    except ImportError:  # pragma: no cover - an install without litellm has no litellm model
        return
    litellm.suppress_debug_info = True


def _record_run(results: dict, plan: AdaptivePlan, hargs) -> None:
    """What each task's ``adaptive`` block records of the run beyond its figures: the bank(s) as the run
    named them (``bank``), the models priced by ``--price default`` (``priced_by_default``), and the
    harness task arguments a ``rank`` of the same task needs (``task_args``: ``compare`` prints that
    command)."""
    defaulted = ([plan.model] if priced_by_default({plan.model: plan.price}) else []) + plan.judges.priced_by_default
    include = getattr(hargs, "include_path", None)
    task_args = {"include_path": str(Path(include).resolve()) if include else None,
                 "apply_chat_template": bool(getattr(hargs, "apply_chat_template", False)),
                 "fewshot_as_multiturn": bool(getattr(hargs, "fewshot_as_multiturn", False)),
                 "num_fewshot": getattr(hargs, "num_fewshot", None),
                 "gen_kwargs": getattr(hargs, "gen_kwargs", None) or None,
                 "system_instruction": getattr(hargs, "system_instruction", None)}
    for task, block in results.get("adaptive", {}).items():
        refs = plan.bank_refs.get(task) or []
        block["bank"] = refs[0] if len(refs) == 1 else refs
        block["priced_by_default"] = list(defaulted)
        block["task_args"] = dict(task_args)


class ModelCallError(RuntimeError):
    """A model or metric call failed for good (after our retries)."""


def _evaluate_tasks(bound, price, judges, config, evaluate, tracker, cfg, outcomes, all_samples, timeout,
                    display=None, metric_bindings=None, billing: AttemptBilling | None = None,
                    batches: BatchJournal | None = None) -> dict:
    """Run the adaptive test of every task; return the merged harness results (nothing written)."""
    all_results = None
    metric_bindings = metric_bindings or {}
    for tname, task_obj, binding in bound:
        compat.use_full_run_requests(task_obj)
        if binding.bank is None:
            o = bank_free_task(tname, task_obj, binding, price, judges, config, evaluate, timeout, display, billing,
                               batches)
        elif tname in metric_bindings:
            o = multi_metric_task(tname, task_obj, metric_bindings[tname], price, judges, config, evaluate,
                                   timeout, display, billing, batches)
        else:
            o = adaptive_task(tname, task_obj, binding, price, judges, config, evaluate, timeout, display, billing,
                              batches)
        outcomes.append(o)
        if not o.doc_ids:  # nothing scored (the budget went on failed attempts): no results to write
            t = o.test
            raise ModelCallError(f"task {tname}: stopped because {t.stopped_because} before any document was "
                                 f"scored; spent ${t.spent:.6g} of ${t.budget if t.budget is not None else 0:.6g}")
        # final pass over the administered documents: every generation comes from the cache
        # (and every judgement from the judge's in-process memo)
        res = evaluate(task_obj, sorted(o.doc_ids), tracker_=tracker, log=True,
                       bootstrap=getattr(cfg, "bootstrap_iters", 100000))
        annotate = annotate_multi_samples if isinstance(o, MultiTaskOutcome) else \
            annotate_bank_free_samples if isinstance(o, BankFreeOutcome) else annotate_samples
        all_samples.update(annotate(res.pop("samples", {}), o))
        if all_results is None:
            all_results = res
        else:
            for key in ("results", "configs", "versions", "n-shot", "higher_is_better", "n-samples"):
                all_results.setdefault(key, {}).update(res.get(key, {}))
    all_results["adaptive"] = {o.task: multi_block(o) if isinstance(o, MultiTaskOutcome) else
                               bank_free_block(o, config) if isinstance(o, BankFreeOutcome) else adaptive_block(o)
                               for o in outcomes}
    for o in outcomes:
        headline_estimate(all_results, o.task, all_results["adaptive"][o.task])
    # the model was built here, so the harness saw "CUSTOM": record what it really is
    all_results["config"]["model"] = cfg.model
    all_results["model_source"] = tracker.general_config_tracker.model_source = cfg.model
    return all_results


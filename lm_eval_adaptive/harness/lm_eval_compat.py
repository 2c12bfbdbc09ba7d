"""Every place lm-eval-adaptive reaches past lm-evaluation-harness's public API, in one module.

Tested on lm-eval 0.4.13 (the version installed and run by the test suite); the supported
range is ``>=0.4.9,<0.5`` (:data:`SUPPORTED_LM_EVAL`), the versions whose ``run`` parser,
``simple_evaluate(samples=...)`` and ``TemplateAPI`` this module relies on. When the
harness changes one of these, this is the only module to fix.

The rest of the package uses the harness's public API only: ``simple_evaluate``,
``lm_eval.api.registry.get_model``, ``LM.create_from_arg_obj``, ``TaskManager``,
``EvaluatorConfig``, ``EvaluationTracker``, ``Task.eval_docs``, ``Task.instances``,
``Task.build_all_requests``, ``Task.process_results``, ``Task.aggregation``,
``lm_eval.utils.simple_parse_args_string`` and ``make_table``.

What is reached here, and why:

* **The ``run`` subcommand** (:func:`add_harness_run_parser`): the harness has no public
  parser for ``run``; ``lm_eval._cli.run.Run`` builds it. The harness's own execution of a
  parsed ``run`` is taken from the parser's ``func`` default (an argparse public), not
  from the private ``Run._execute`` by name.
* **Model construction** (:func:`build_lm`): ``num_concurrent``, ``max_retries`` and
  ``timeout`` are constructor arguments of the harness's API models (``TemplateAPI``), so
  they are set through ``create_from_arg_obj``; the float timeout is then set on the
  public ``timeout`` attribute (the constructor rounds it down to whole seconds).
* **A dry run's litellm model** (:func:`build_lm` ``calls=False``): ``LiteLLMChatCompletion.__init__``
  imports litellm (seconds); a model that only builds prompts is built over a stand-in module that refuses calls.
* **Prompt templates** (:func:`compile_templates_once`): ``lm_eval.utils.env.from_string`` is memoised per
  template text (``apply_template`` compiles the task's Jinja template again for every document).
* **litellm calls** (``LiteLLMChatCompletion``): its ``model_call``/``amodel_call`` pass
  the payload to ``litellm.completion``/``acompletion`` without the model's ``timeout``;
  both methods are wrapped on the instance to add ``timeout`` (and ``max_retries=0``, so
  the SDK does not retry behind the live runner's back) to the call's ``gen_kwargs``,
  which become ``litellm`` keyword arguments.
* **Usage capture** (:func:`capture_usage`): ``parse_generations``/``parse_logprobs`` of
  the instance are wrapped to see each raw response (its ``usage``), on the one-at-a-time
  and the concurrent paths alike.
* **Task requests** (:func:`use_full_run_requests`): ``Task.build_all_requests`` of the
  instance is replaced, and the private ``Task._instances`` set, so that a subset of
  documents gets the requests a full run builds for them (the few-shot stream); its
  ``doc_iterator`` reads the chosen documents by index (the harness's walks every document).
* **Task filters** (:func:`task_filters`): the private ``Task._filters`` applied to the
  requests of one document (``Task.apply_filters`` works on the task's whole request list).
* **Default output limit** (:func:`default_max_gen_toks`): the private
  ``TemplateAPI._max_gen_toks`` (the ``max_gen_toks`` model argument).
* **Prompt text** (:func:`prompt_text`): a chat-templated request of an API model holds a
  ``JsonChatStr`` (its ``prompt`` is the JSON list of messages); the text of its messages
  is what the provider is sent.
* **The task index of a run** (:func:`index_include_path_only`): ``EvaluatorConfig.process_tasks``
  builds a ``TaskManager`` over every task the harness ships (about 10 s); while the context
  is active, the ``lm_eval.tasks.TaskManager`` it looks up indexes only ``--include_path``
  when every requested task is found there (tasks there win over the harness's of the same
  name anyway), and the harness's whole index otherwise.
* **The harness's progress bars** (:func:`harness_bars_off`): the harness has no switch for
  them (its evaluator never passes ``disable_tqdm`` to the LM, ``CachingLM`` does not take it,
  the API models' "Requesting API" bars ignore it, and ``TQDM_DISABLE`` is read only when
  tqdm is imported), so while the context is active the ``tqdm`` classes the loaded
  ``lm_eval`` modules hold as module attributes (``tqdm``, ``tqdm_asyncio``) are swapped for
  subclasses that are always disabled.
* **Answers kept across a resume** (:func:`capture_answers`, :func:`fill_cache`): each answer the LM
  returns is reported under the key the harness's ``CachingLM`` files it by (``hash_args`` of the
  request type and the request's ``args``), and a resumed run writes the journaled answers into the
  ``CachingLM`` database (``SqliteDict``, ``<use_cache>_rank0.db``) before its first evaluation.
* **Where the results go** (:func:`results_folder`): the model's folder under ``--output_path``, named
  as ``GeneralConfigTracker`` names it (its ``_get_model_name`` and ``sanitize_model_name``).
* **Where the results file went** (:func:`results_file`): the path
  ``EvaluationTracker.save_results_aggregated`` writes, from its public ``date_id`` and
  ``general_config_tracker.model_name_sanitized`` and the harness's naming rule.
"""

from __future__ import annotations

import copy
import functools
import math
import sys
import threading
import types
from contextlib import contextmanager
from itertools import islice

__all__ = ["SUPPORTED_LM_EVAL", "TESTED_LM_EVAL", "add_harness_run_parser", "index_include_path_only",
           "build_lm", "capture_usage", "before_requests", "billable_usage",
           "usage_sink", "use_full_run_requests", "fresh_instance", "task_filters", "default_max_gen_toks",
           "is_api_model", "prompt_text", "harness_bars_off", "results_file", "redacted_output_files",
           "without_env_info", "capture_answers", "fill_cache", "results_folder", "compile_templates_once"]

SUPPORTED_LM_EVAL = ">=0.4.9,<0.5"
TESTED_LM_EVAL = ("0.4.13",)


# ------------------------------------------------------------------------------- run
def add_harness_run_parser(subparsers):
    """Add the harness's own ``run`` subcommand; return (its parser, the harness's execute(args))."""
    from lm_eval._cli.run import Run

    Run.create(subparsers)
    parser = subparsers.choices["run"]
    return parser, parser.get_default("func")


@contextmanager
def index_include_path_only(tasks):
    """While active, a run's task index covers only ``--include_path`` when it holds every task.

    ``tasks``: the requested task names (a list, or the harness's comma-separated string).
    Names that are paths (YAML files, folders) or not all found in the include path fall
    back to the harness's full index.
    """
    import lm_eval.tasks as lm_tasks

    names = [t.strip() for t in (tasks.split(",") if isinstance(tasks, str) else list(tasks or [])) if t.strip()]
    full = lm_tasks.TaskManager

    def task_manager(*args, **kwargs):
        if kwargs.get("include_path") and names and "include_defaults" not in kwargs:
            only = full(*args, include_defaults=False, **kwargs)
            if all(n in only.all_tasks for n in names):
                return only
        return full(*args, **kwargs)

    lm_tasks.TaskManager = task_manager
    try:
        yield
    finally:
        lm_tasks.TaskManager = full


# ----------------------------------------------------------------------------- models
def is_api_model(factory) -> bool:
    """Whether the harness model class ``factory`` is one of its HTTP API models (``TemplateAPI``)."""
    from lm_eval.models.api_models import TemplateAPI

    return isinstance(factory, type) and issubclass(factory, TemplateAPI)


def build_lm(model_type: str, model_args, *, extra: dict | None = None, timeout: float | None = None,
             own_retries: bool = False, one_call_at_a_time: bool = False, calls: bool = True):
    """The harness LM ``model_type`` built from ``model_args`` (a ``k=v,...`` string or a dict).

    ``calls=False``: an LM that only builds prompts (a dry run): the harness's ``litellm`` model is then
    built without importing litellm (seconds), over a stand-in module that refuses any call
    (:func:`_no_litellm`); its prompts, chat template and token limits are the real class's (it adds
    only the calls).

    For the harness's API models: ``timeout`` seconds per HTTP call (also passed to litellm),
    ``own_retries`` switches the harness's and litellm's retries off (the caller retries and
    counts attempts), ``one_call_at_a_time`` sets ``num_concurrent=1``. Every response's
    usage is reported to :func:`usage_sink`. Raises ``ValueError``/``KeyError`` for an
    unknown model type (the registry's own errors). A key of ``extra`` (the harness's ``--device``,
    ``--batch_size``) that ``model_args`` also sets is the model's own argument's: ``device=cpu`` in
    ``--model_args`` is the device, not a second ``device`` keyword (the harness's ``--device`` defaults
    to ``cuda:0``; a ``--device`` given that disagrees is refused before, ``run_checks.check_device``).
    """
    from lm_eval.api.registry import get_model
    from lm_eval.utils import simple_parse_args_string

    factory = get_model(model_type)
    args = dict(model_args) if isinstance(model_args, dict) else simple_parse_args_string(model_args or "")
    extra = {k: v for k, v in (extra or {}).items() if k not in args}
    api = is_api_model(factory)
    if api:
        if timeout is not None:
            args["timeout"] = max(1, math.ceil(timeout))
        if own_retries:
            args["max_retries"] = 1
        if one_call_at_a_time:
            args["num_concurrent"] = 1
    with _no_litellm(not calls and factory.__module__ == "lm_eval.models.litellm_llms"):
        lm = factory.create_from_arg_obj(args, extra or {})
    if api and timeout is not None:
        lm.timeout = float(timeout)
    if api and type(lm).__name__.startswith("LiteLLM"):
        add = {}
        if timeout is not None:
            add["timeout"] = float(timeout)
        if own_retries:
            add["max_retries"] = 0
        if add:
            _add_litellm_kwargs(lm, add)
    capture_usage(lm)
    return lm


@contextmanager
def _no_litellm(active: bool):
    """While active (and litellm not imported yet), ``import litellm`` gives a stand-in module whose every
    attribute read raises: the harness's litellm model, built inside, keeps it and can make no call."""
    if not active or "litellm" in sys.modules:
        yield
        return
    stand_in = types.ModuleType("litellm")

    def refuse(name):
        raise RuntimeError(f"litellm.{name}: this model only builds prompts (a dry run); it makes no call")

    stand_in.__getattr__ = refuse
    sys.modules["litellm"] = stand_in
    try:
        yield
    finally:
        if sys.modules.get("litellm") is stand_in:
            del sys.modules["litellm"]


def compile_templates_once(size: int = 1024) -> None:
    """lm-eval compiles a task's Jinja template anew for every document it formats
    (``lm_eval.utils.apply_template``: ``env.from_string`` per call); each template text is compiled once
    instead, for every task of the process (the same text gives the same template, which renders the same
    prompt). A call with ``globals`` or a ``template_class`` is passed through."""
    from lm_eval import utils

    env = utils.env
    if getattr(env.from_string, "compiled_once", False):
        return
    compile_ = env.from_string

    @functools.lru_cache(maxsize=size)
    def compiled(source: str):
        return compile_(source)

    def from_string(source, globals=None, template_class=None):
        if globals is None and template_class is None and isinstance(source, str):
            return compiled(source)
        return compile_(source, globals, template_class)

    from_string.compiled_once = True
    env.from_string = from_string


def _add_litellm_kwargs(lm, add: dict) -> None:
    """Pass ``add`` as keyword arguments of every litellm call the harness LM makes."""
    for name in ("model_call", "amodel_call"):
        call = getattr(lm, name, None)
        if call is None:
            continue
        if name == "model_call":
            def wrapped(*args, _call=call, **kwargs):
                kwargs["gen_kwargs"] = {**(kwargs.get("gen_kwargs") or {}), **add}
                return _call(*args, **kwargs)
        else:
            async def wrapped(*args, _call=call, **kwargs):
                kwargs["gen_kwargs"] = {**(kwargs.get("gen_kwargs") or {}), **add}
                return await _call(*args, **kwargs)
        setattr(lm, name, wrapped)


def before_requests(lm, hook) -> None:
    """Call ``hook(request_type, requests)`` each time the harness LM ``lm`` is about to send
    requests: its ``generate_until``, ``loglikelihood`` and ``loglikelihood_rolling`` are wrapped
    on the instance (the harness's ``CachingLM`` looks them up there and passes only the
    requests it has no cached answer for). ``hook`` may raise: then nothing is sent."""
    for name in ("generate_until", "loglikelihood", "loglikelihood_rolling"):
        method = getattr(lm, name, None)
        if method is None:
            continue

        def wrapped(requests, *args, _method=method, _name=name, **kwargs):
            hook(_name, list(requests))
            return _method(requests, *args, **kwargs)

        setattr(lm, name, wrapped)


def default_max_gen_toks(lm, fallback: int = 256) -> int:
    """The LM's default ``max_gen_toks`` (used when a request sets none)."""
    return int(getattr(lm, "_max_gen_toks", fallback))


# ---------------------------------------------------------------------------- answers
#: the harness's request types, each an LM method
REQUEST_TYPES = ("generate_until", "loglikelihood", "loglikelihood_rolling")


def capture_answers(lm, sink) -> None:
    """Call ``sink(request_type, key, answer)`` for every answer the harness LM ``lm`` returns, ``key``
    being the one the harness's ``CachingLM`` files the answer by: its ``generate_until``,
    ``loglikelihood`` and ``loglikelihood_rolling`` are wrapped on the instance (``CachingLM`` passes
    them only the requests it has no answer for, so an answer from the cache is not reported again)."""
    from lm_eval.api.model import hash_args

    for name in REQUEST_TYPES:
        method = getattr(lm, name, None)
        if method is None:
            continue

        def wrapped(requests, *args, _method=method, _name=name, **kwargs):
            requests = list(requests)
            answers = _method(requests, *args, **kwargs)
            for req, answer in zip(requests, answers):
                sink(_name, hash_args(_name, req.args), answer)
            return answers

        setattr(lm, name, wrapped)


def fill_cache(use_cache: str, lm, answers) -> None:
    """Write ``answers`` (``(request type, key, answer)``, as :func:`capture_answers` reported them and
    JSON gave them back) into the database the harness's ``CachingLM`` opens for ``use_cache``."""
    import os

    from sqlitedict import SqliteDict

    # named as simple_evaluate names it
    path = f"{use_cache}_rank{getattr(lm, 'rank', 0) or int(os.environ.get('LOCAL_RANK', '0'))}.db"
    db = SqliteDict(path, autocommit=False)
    try:
        for kind, key, answer in answers:
            # a loglikelihood answer is a (log-likelihood, is-greedy) tuple, which JSON makes a list
            db[key] = tuple(answer) if kind == "loglikelihood" and isinstance(answer, list) else answer
        db.commit()
    finally:
        db.close()


# ------------------------------------------------------------------------------ usage
_tls = threading.local()


def capture_usage(lm) -> None:
    """Report the usage of every response the harness API LM ``lm`` parses to :func:`usage_sink`.

    The harness's API models (``TemplateAPI``: ``litellm``, ``local-chat-completions``,
    ``openai-chat-completions``, ``local-completions``, ...) pass each response, from their
    one-at-a-time and their concurrent (asyncio, same thread) paths alike, to
    ``parse_generations`` or ``parse_logprobs``; those are wrapped here. Responses that come
    from the harness's cache are never parsed, so they report nothing. Other LMs (local
    models) report nothing either.
    """
    for name in ("parse_generations", "parse_logprobs"):
        parse = getattr(lm, name, None)
        if parse is None or getattr(parse, "_lm_eval_adaptive_usage", False):
            continue

        def wrapped(*args, _parse=parse, **kwargs):
            sink = getattr(_tls, "sink", None)
            if sink is not None:
                outputs = kwargs.get("outputs", args[0] if args else None)
                for out in outputs if isinstance(outputs, list) else [outputs]:
                    sink.append(billable_usage(out))
            return _parse(*args, **kwargs)

        wrapped._lm_eval_adaptive_usage = True
        setattr(lm, name, wrapped)


def usage_of(response) -> dict | None:
    """The OpenAI-style usage dict of a response (dict or SDK object); None if it has none."""
    usage = response.get("usage") if isinstance(response, dict) else getattr(response, "usage", None)
    if usage is not None and not isinstance(usage, dict):
        usage = dict(usage) if hasattr(usage, "keys") else {
            "prompt_tokens": getattr(usage, "prompt_tokens", None),
            "completion_tokens": getattr(usage, "completion_tokens", None)}
    return usage


#: More tokens than any call has (the largest context windows hold a few million): a count above it is
#: no count.
_MAX_TOKENS = 10**9


def _count(v) -> int | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 \
            or v != int(v) or v > _MAX_TOKENS:
        return None
    return int(v)


def _answered_text(response) -> bool:
    """Whether the response carries a non-empty answer (a choice's message content or text)."""
    choices = response.get("choices") if isinstance(response, dict) else getattr(response, "choices", None)
    for c in choices or []:
        msg = c.get("message") if isinstance(c, dict) else getattr(c, "message", None)
        text = (msg.get("content") if isinstance(msg, dict) else getattr(msg, "content", None)) if msg is not None \
            else (c.get("text") if isinstance(c, dict) else getattr(c, "text", None))
        if isinstance(text, str) and text:
            return True
    return False


def billable_usage(response) -> dict | None:
    """The usage of a response (:func:`usage_of`) when it can be billed from, else None (the call's cost is
    then unknown and the caller charges its reservation): prompt and completion tokens that are whole
    counts, a prompt of at least one token, and at least one completion token when the response carries an
    answer. litellm reports a usage the provider left out as 0/0, so a zero count for a non-empty answer
    is an unknown usage, not a free call."""
    usage = usage_of(response)
    if not isinstance(usage, dict):
        return None
    prompt = _count(next((usage[k] for k in ("prompt_tokens", "input_tokens") if usage.get(k) is not None), None))
    completion = _count(next((usage[k] for k in ("completion_tokens", "output_tokens")
                              if usage.get(k) is not None), None))
    if prompt is None or completion is None or prompt == 0 or (completion == 0 and _answered_text(response)):
        return None
    return usage


@contextmanager
def usage_sink():
    """Collect, in a list, the usage of every response parsed in this thread meanwhile
    (one OpenAI-style dict per response, None where a response carried none, or none to bill from:
    :func:`billable_usage`)."""
    _tls.sink = sink = []
    try:
        yield sink
    finally:
        _tls.sink = None


# ------------------------------------------------------------------------------ tasks
def fresh_instance(inst, *, doc_id: int | None = None):
    """A copy of a harness request with no responses yet (numbered ``doc_id`` if given)."""
    new = copy.copy(inst)
    if doc_id is not None:
        new.doc_id = doc_id
    new.resps = []
    new.filtered_resps = {}
    return new


def prompt_text(context) -> str:
    """The text a request's context sends: the messages' contents, one per line, for a chat-templated
    request of an API model (``JsonChatStr``); the context itself otherwise."""
    chat = getattr(context, "prompt", None)
    if isinstance(chat, str):
        import json

        try:
            messages = json.loads(chat)
        except ValueError:
            return chat
        if isinstance(messages, list):
            return "\n".join(str(m.get("content") or "") for m in messages if isinstance(m, dict))
        return chat
    return str(context)


def task_filters(task) -> list:
    """The task's filter ensembles (each has ``apply(instances)``)."""
    return list(getattr(task, "_filters", []))


def use_full_run_requests(task_obj) -> None:
    """Make the harness give every document of ``task_obj`` the requests a full run gives it.

    The harness draws few-shot examples from one seeded stream in document order, so
    building the requests of a subset (``simple_evaluate(samples=...)``) gives a document
    other examples than the full runs the bank was calibrated on, and the final pass other
    prompts than the CAT's (its generations would miss the cache and be paid twice). Here
    ``build_all_requests`` builds every document's requests once, as a full run does, and
    each call then takes fresh copies of the requested documents' requests. The chosen documents are
    read by index (``doc_iterator``): the harness's own iterator walks every document of the task to
    find them, once per evaluation, which an adaptive run makes once per item.
    """

    build = task_obj.build_all_requests
    iterate = task_obj.doc_iterator
    memo: dict = {}

    def build_all_requests(*, limit=None, samples=None, **kwargs):
        key = repr(sorted(kwargs.items()))
        if memo.get("key") != key:
            build(limit=None, samples=None, **kwargs)
            by_doc: dict = {}
            for inst in task_obj.instances:
                by_doc.setdefault(inst.doc_id, []).append(inst)
            memo.update(key=key, by_doc=by_doc)
        by_doc = memo["by_doc"]
        if samples is None:
            task_obj._instances = [fresh_instance(i) for d in sorted(by_doc)[:limit] for i in by_doc[d]]
        else:  # as the harness numbers them: by position among the chosen documents, in task order
            task_obj._instances = [fresh_instance(i, doc_id=k) for k, d in enumerate(sorted(samples))
                                   for i in by_doc[d]]

    def doc_iterator(*, rank: int = 0, limit=None, world_size: int = 1, samples=None):
        docs = task_obj.eval_docs
        if not samples or not all(isinstance(e, int) and 0 <= e < len(docs) for e in samples):
            return iterate(rank=rank, limit=limit, world_size=world_size, samples=samples)  # the harness's checks
        # what the harness yields (the chosen documents in task order, each once, numbered by position)
        return islice(enumerate(docs[i] for i in sorted(set(samples))), int(rank), None, int(world_size))

    task_obj.build_all_requests = build_all_requests
    task_obj.doc_iterator = doc_iterator


# ---------------------------------------------------------------------- per-item evaluations
@contextmanager
def without_env_info():
    """While active, ``simple_evaluate`` does not collect its environment report (``add_env_info``:
    torch's ``collect_env``, which runs ``pip list`` and a dozen other subprocesses, about 0.6 s a call)
    nor the git hash (``git describe``, which outside a git repository prints "fatal: not a git
    repository" on stderr each call). An adaptive run evaluates one batch of documents at a time and
    reads only their scores; the final pass over the administered documents, whose results are written,
    keeps both, so a run prints what plain ``lm-eval run`` prints once."""
    import lm_eval.evaluator as evaluator

    saved = evaluator.add_env_info, evaluator.get_git_commit_hash
    evaluator.add_env_info = lambda results: None
    evaluator.get_git_commit_hash = lambda: None
    try:
        yield
    finally:
        evaluator.add_env_info, evaluator.get_git_commit_hash = saved


# ---------------------------------------------------------------------- progress bars
@contextmanager
def harness_bars_off():
    """While active, the harness draws none of its tqdm bars ("Requesting API", "Checking cached
    requests", building a task's requests): the caller shows its own progress instead."""
    import sys

    from tqdm import tqdm

    quiet: dict = {}

    def quiet_class(cls):
        if cls not in quiet:
            def __init__(self, *args, **kwargs):
                kwargs["disable"] = True
                super(quiet[cls], self).__init__(*args, **kwargs)

            quiet[cls] = type(f"Quiet{cls.__name__}", (cls,), {"__init__": __init__})
        return quiet[cls]

    swapped = []
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "lm_eval" or name.startswith("lm_eval.")):
            continue
        for attr in ("tqdm", "tqdm_asyncio"):
            cls = getattr(module, attr, None)
            if isinstance(cls, type) and issubclass(cls, tqdm) and cls not in quiet.values():
                swapped.append((module, attr, cls))
                setattr(module, attr, quiet_class(cls))
    try:
        yield
    finally:
        for module, attr, cls in swapped:
            setattr(module, attr, cls)


# ------------------------------------------------------------------------ output files
@contextmanager
def redacted_output_files():
    """While active, the harness's results JSON and sample logs (``EvaluationTracker``) are written
    without secrets: the results (``config.model_args``, task configs, metadata) through
    :func:`lm_eval_adaptive.redaction.redact`; the samples (documents, prompts, model outputs) with
    only the secrets known by value removed."""
    from lm_eval.loggers import EvaluationTracker

    from lm_eval_adaptive.redaction import redact

    aggregated, per_sample = EvaluationTracker.save_results_aggregated, EvaluationTracker.save_results_samples

    def save_results_aggregated(self, results, samples=None):
        return aggregated(self, results=redact(results), samples=samples)

    def save_results_samples(self, task_name, samples):
        return per_sample(self, task_name=task_name, samples=redact(samples, by_key=False, shapes=False))

    EvaluationTracker.save_results_aggregated = save_results_aggregated
    EvaluationTracker.save_results_samples = save_results_samples
    try:
        yield
    finally:
        EvaluationTracker.save_results_aggregated = aggregated
        EvaluationTracker.save_results_samples = per_sample


def results_folder(output_path, model_args):
    """The folder the harness writes a run's results into under ``output_path`` (a folder: its
    subfolder named for the model of ``model_args``; a ``.json`` file name: its folder)."""
    from pathlib import Path

    from lm_eval.loggers.evaluation_tracker import GeneralConfigTracker
    from lm_eval.utils import sanitize_model_name

    path = Path(output_path)
    if path.suffix == ".json":
        return path.parent
    name = GeneralConfigTracker._get_model_name(model_args)
    return path / sanitize_model_name(name) if name else path


def results_file(tracker, output_path):
    """The results JSON ``tracker.save_results_aggregated`` wrote under ``output_path`` (a folder, or a
    ``.json`` file name the harness adds the date to); None without an output path."""
    from pathlib import Path

    if not output_path:
        return None
    path = Path(output_path)
    if path.suffix == ".json":
        return path.with_name(f"{path.stem}_{tracker.date_id}.json")
    return path / str(tracker.general_config_tracker.model_name_sanitized) / f"results_{tracker.date_id}.json"

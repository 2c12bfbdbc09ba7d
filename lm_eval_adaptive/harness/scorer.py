"""Harness glue for live ranking: one harness model × one harness task, scored one document at a time.

:class:`HarnessItemScorer` builds a task's requests exactly as ``lm_eval``'s evaluator does
(the task's prompt, few-shot examples and seed, chat template, system instruction and
generation kwargs, all the harness's own code), then, for each document the engine
picks, runs that document's requests on the harness LM, applies the task's filters and
takes the per-document metric from the task's own ``process_results``. Documents never
picked are never generated nor scored. Which document a bank item names is decided once,
before any call, by :func:`~lm_eval_adaptive.harness.binding.bind_bank`.

The provider's token usage of every call the LM makes is captured (API models of the
harness — ``litellm``, ``local-chat-completions``, ``openai-chat-completions``,
``local-completions``, ... — return the OpenAI-style ``usage`` of each response), and so is
every call an LLM judge makes while the task scores the document
(:func:`~lm_eval_adaptive.harness.metrics.judge_calls`), so each item is charged what the
providers report. When the model answered but scoring failed, :class:`ScoringFailed`
carries what was paid; a retry re-uses the answers instead of asking the model again. The
harness's own retry loop and litellm's are switched off: the live runner retries with
exponential backoff and jitter and counts attempts itself. Every call gets ``timeout``
seconds. All access to lm-eval internals goes through
:mod:`~lm_eval_adaptive.harness.lm_eval_compat`.

Model specs are ``TYPE:ARGS``, the harness's ``--model`` and ``--model_args``, e.g.
``litellm:model=gpt-4o-mini`` or ``local-chat-completions:model=X,base_url=http://…``.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections import defaultdict
from dataclasses import dataclass, field

from lm_eval_adaptive.display import SHOWN_LOG_FILTER
from lm_eval_adaptive.errors import BankError, InputError
from lm_eval_adaptive.harness import lm_eval_compat as compat
from lm_eval_adaptive.harness.binding import BankBinding
from lm_eval_adaptive.harness.metrics import declared_judges, judge_calls
from lm_eval_adaptive.harness.output_limits import request_output_bound

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm: bundled price map, no fetch

__all__ = ["ModelSpec", "parse_model_spec", "HarnessTask", "HarnessItemScorer", "ItemScore", "ScoringFailed",
           "build_lm", "usage_total", "resolve_timeout", "DEFAULT_TIMEOUT_S", "TEMPLATE_TOKENS", "parse_gen_kwargs",
           "parse_metadata"]

log = logging.getLogger("lm_eval_adaptive")
log.addFilter(SHOWN_LOG_FILTER)  # names in messages shown escaped

#: Chat-template overhead allowed per call in the upper estimate of input tokens.
TEMPLATE_TOKENS = 64

#: Seconds a model (or judge) call may take before it is abandoned, unless ``--timeout`` or the
#: model's own ``timeout=`` argument says otherwise.
DEFAULT_TIMEOUT_S = 120.0


def resolve_timeout(timeout: float | None, model_args) -> float:
    """``--timeout`` when given, else the model's ``timeout=`` argument, else :data:`DEFAULT_TIMEOUT_S`."""
    if timeout is not None:
        return float(timeout)
    args = model_args if isinstance(model_args, dict) else _args_dict(model_args or "")
    try:
        return float(args["timeout"])
    except (KeyError, TypeError, ValueError):
        return DEFAULT_TIMEOUT_S


@dataclass(frozen=True)
class ModelSpec:
    """A harness model: ``type`` (``--model``), ``args`` (``--model_args`` string) and a display name."""

    type: str
    args: str
    name: str

    @property
    def model_id(self) -> str:
        """The model id in its args (``model=`` or ``pretrained=``), else the display name."""
        d = _args_dict(self.args)
        return str(d.get("model") or d.get("pretrained") or self.name)


def _args_dict(args: str) -> dict:
    out = {}
    for kv in filter(None, (x.strip() for x in args.split(","))):
        k, sep, v = kv.partition("=")
        if sep:
            out[k.strip()] = v.strip()
    return out


def parse_model_spec(spec: str) -> ModelSpec:
    """``[NAME=]TYPE:ARGS`` → :class:`ModelSpec` (NAME defaults to the ``model=`` argument).

    A NAME prefix is recognised when the text before the first ``:`` contains ``=`` before
    any ``,`` (``GPT-4=litellm:model=openai/GPT-4``).
    """
    if not isinstance(spec, str) or ":" not in spec:
        raise InputError(f"model spec {spec!r} must be TYPE:ARGS, e.g. litellm:model=gpt-4o-mini")
    name = None
    head, _, rest = spec.partition(":")
    if "=" in head and "," not in head:
        name, _, mtype = head.partition("=")
        name = name.strip()
    else:
        mtype = head
    mtype = mtype.strip()
    if not mtype:
        raise InputError(f"model spec {spec!r} names no harness model type before ':'")
    d = _args_dict(rest)
    model = d.get("model") or d.get("pretrained")
    if not model and not name:
        raise InputError(f"model spec {spec!r} needs model=... (or pretrained=...) in its arguments")
    return ModelSpec(type=mtype, args=rest, name=name or str(model))


@dataclass
class ItemScore:
    """The outcome of one document: the task's metric value (several metrics: metric → value) and what
    the calls used."""

    raw: float | dict
    usage: list = field(default_factory=list)  # one OpenAI-style usage dict per call (None if unreported)
    calls: int = 0
    response: str | None = None
    judge: list = field(default_factory=list)  # JudgeCall of every judge request made to score it

    @property
    def prompt_tokens(self) -> int | None:
        return usage_total(self.usage, "prompt_tokens", "input_tokens")

    @property
    def completion_tokens(self) -> int | None:
        return usage_total(self.usage, "completion_tokens", "output_tokens")


def usage_total(usage: list, *names) -> int | None:
    """Sum of the first of ``names`` present in each usage dict; None if any dict lacks them all."""
    total = 0
    for u in usage:
        if not isinstance(u, dict):
            return None
        v = next((u[n] for n in names if u.get(n) is not None), None)
        if v is None:
            return None
        total += int(v)
    return total


def _positive_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


#: generation kwargs checked before a run starts: key -> (test, what it must be)
GEN_KWARG_RULES = {
    "max_gen_toks": (_positive_int, "a positive integer"),
    "max_tokens": (_positive_int, "a positive integer"),
    "max_completion_tokens": (_positive_int, "a positive integer"),
    "n": (_positive_int, "a positive integer"),
    "temperature": (lambda v: _finite(v) and v >= 0, "a finite number >= 0"),
    "top_p": (lambda v: _finite(v) and 0 < v <= 1, "a number in (0, 1]"),
    "do_sample": (lambda v: isinstance(v, bool), "true or false"),
}


def parse_gen_kwargs(value, *, flag: str = "--gen_kwargs") -> dict:
    """The generation kwargs ``value`` (``K=V,...`` as the harness writes them, or a mapping),
    parsed by the harness's own parser and checked (``max_gen_toks`` a positive integer, ...);
    an :class:`InputError` naming the flag and the key otherwise."""
    if value is None:
        return {}
    if isinstance(value, dict):
        gk = dict(value)
    else:
        from lm_eval.utils import simple_parse_args_string

        text = str(value)
        bad = [p for p in text.split(",") if p.strip() and ("=" not in p or not p.split("=", 1)[0].strip())]
        if bad:
            raise InputError(f"{flag}: {bad[0].strip()!r} is not KEY=VALUE (e.g. max_gen_toks=256,temperature=0)")
        gk = simple_parse_args_string(text)
    for key, (ok, what) in GEN_KWARG_RULES.items():
        if key in gk and not ok(gk[key]):
            raise InputError(f"{flag}: {key} must be {what}, got {gk[key]!r}")
    return gk


def parse_metadata(value, *, flag: str = "--metadata") -> dict | None:
    """The task metadata ``value`` (a JSON object, as ``lm-eval run --metadata`` takes it); None for none."""
    if value is None or value == "":
        return None
    if isinstance(value, dict):
        return dict(value)
    import json

    try:
        md = json.loads(value)
    except ValueError as e:
        raise InputError(f"{flag}: not valid JSON ({e})") from None
    if not isinstance(md, dict):
        raise InputError(f"{flag}: must be a JSON object such as '{{\"max_seq_lengths\": [4096]}}', "
                         f"got {type(md).__name__}")
    return md


def _request_bound(inst, default: int, where: str) -> int:
    """The most output tokens one harness request may be billed (a generation's worst case; 1 for a
    log-likelihood request)."""
    if inst.request_type != "generate_until":
        return 1
    gk = next((a for a in inst.args[1:] if isinstance(a, dict)), None)
    return request_output_bound(gk, default, where=where)


class HarnessTask:
    """The harness's task setup shared by every model: task manager, names, arguments."""

    def __init__(self, task: str, *, include_path=None, num_fewshot=None, gen_kwargs=None,
                 apply_chat_template=False, fewshot_as_multiturn=False, system_instruction=None,
                 fewshot_random_seed: int = 1234, metadata=None):
        from lm_eval.tasks import TaskManager

        self.task = task
        self.num_fewshot = num_fewshot
        self.gen_kwargs = gen_kwargs
        self.apply_chat_template = apply_chat_template
        self.fewshot_as_multiturn = fewshot_as_multiturn
        self.system_instruction = system_instruction
        self.fewshot_random_seed = fewshot_random_seed
        self.judges: list[str] = []  # judge models the task declared while it was loaded
        # the harness's own task index takes ~10 s to build; a task in --include_path needs
        # only that folder indexed (its tasks win over the harness's of the same name anyway)
        tm = TaskManager(include_path=include_path, include_defaults=False, metadata=metadata or {}) \
            if include_path else None
        if tm is None or task not in tm.all_tasks:
            tm = TaskManager(include_path=include_path, metadata=metadata or {})
        self.task_manager = tm
        if task not in self.task_manager.all_tasks:
            raise InputError(f"unknown task {task!r} (no such harness task; --include_path adds task "
                             "folders such as task_configs/)")

    def load(self):
        """A fresh task object configured as ``simple_evaluate`` configures it."""
        compat.compile_templates_once()  # its prompts are built per document: each template compiled once
        with declared_judges() as found:
            loaded = self.task_manager.load([self.task])["tasks"]
        self.judges += [m for m in found if m not in self.judges]
        if len(loaded) != 1:
            raise InputError(f"{self.task!r} expands to {len(loaded)} tasks; rank on one task at a time")
        name, t = next(iter(loaded.items()))
        if t.get_config("output_type") == "generate_until" and self.gen_kwargs is not None:
            gk = self.gen_kwargs
            if isinstance(gk, str):
                from lm_eval.utils import simple_parse_args_string

                gk = simple_parse_args_string(gk)
            t.set_config(key="generation_kwargs", value=gk, update=True)
        if self.num_fewshot is not None:
            if t.get_config("num_fewshot") != 0:
                t.set_config(key="num_fewshot", value=self.num_fewshot)
        elif t.get_config("num_fewshot") is None:
            t.set_config(key="num_fewshot", value=0)
        t.set_fewshot_seed(seed=self.fewshot_random_seed)
        return name, t


def build_lm(spec: ModelSpec, *, timeout: float | None = None, calls: bool = True):
    """The harness LM of ``spec`` (its registry and argument parsing), set up for item-at-a-time use:
    one call at a time, no retries but the live runner's, ``timeout`` seconds per call
    (:func:`resolve_timeout`); ``calls=False``: one that only builds prompts (a dry run)."""
    from lm_eval.api.registry import get_model

    try:
        get_model(spec.type)
    except (ValueError, KeyError) as e:
        raise InputError(f"model spec {spec.type}:{spec.args}: unknown harness model type {spec.type!r} ({e})")
    return compat.build_lm(spec.type, spec.args, extra={"batch_size": 1, "max_batch_size": None, "device": None},
                           timeout=resolve_timeout(timeout, spec.args), own_retries=True, one_call_at_a_time=True,
                           calls=calls)


class ScoringFailed(RuntimeError):
    """The model answered (its calls are paid for) but scoring the document failed.

    ``paid`` is an :class:`ItemScore` with the usage of the calls that were answered (the
    model's and any judge's), for the caller to charge; ``cause`` is the error. A retry of
    the same document re-uses the answers: the model is not asked again.
    """

    def __init__(self, cause: BaseException, paid: ItemScore):
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.cause = cause
        self.paid = paid


@dataclass
class _Answered:
    """What the calls of an item that failed to score left: answers and usage, for a retry."""

    usage: list = field(default_factory=list)
    judge: list = field(default_factory=list)
    instances: list | None = None  # every request answered


class HarnessItemScorer:
    """Score single documents of one task with one harness model (see module docstring).

    Parameters
    ----------
    spec: the model.
    task: the shared :class:`HarnessTask`.
    binding: the bank bound to the task (which document each item names, the metric).
    lm: the harness LM (default: built from ``spec``).
    timeout: seconds per model or judge call.
    loaded: a ``(name, task object)`` from ``task.load()`` to use (default: a fresh one).
    metrics: the per-document metrics to read, one per bank of a several-bank run (default: the
        binding's metric alone); with them an :class:`ItemScore`'s ``raw`` is metric → value, all from
        one generation.
    """

    def __init__(self, spec: ModelSpec, task: HarnessTask, binding: BankBinding, *, lm=None,
                 timeout: float | None = None, loaded=None, metrics=None, calls: bool = True):
        self.spec = spec
        self.name = spec.name
        self.timeout = resolve_timeout(timeout, spec.args)
        self.lm = lm if lm is not None else build_lm(spec, timeout=self.timeout, calls=calls)
        self.task_name, self.task = loaded if loaded is not None else task.load()
        self.binding = binding
        self.metric = binding.metric
        self.metrics = None if metrics is None else [str(k) for k in metrics]
        apply = bool(task.apply_chat_template)
        self.task.build_all_requests(
            limit=None, samples=None, rank=0, world_size=1, cache_requests=False,
            system_instruction=task.system_instruction, apply_chat_template=apply,
            fewshot_as_multiturn=task.fewshot_as_multiturn,
            chat_template=getattr(self.lm, "apply_chat_template", None) if apply else None,
            tokenizer_name=getattr(self.lm, "tokenizer_name", "") if apply else "")
        by_doc = defaultdict(list)
        for inst in self.task.instances:
            by_doc[inst.doc_id].append(inst)
        for v in by_doc.values():
            v.sort(key=lambda x: x.idx)
        self._by_doc = dict(by_doc)
        self.n_docs = len(self._by_doc)
        if self.n_docs != binding.n_docs:
            raise InputError(f"task {self.task_name!r} built requests for {self.n_docs} documents, the bank was "
                             f"bound to {binding.n_docs}")
        self._doc_of = binding.doc_of
        self._lock = threading.Lock()
        self._answered: dict[str, _Answered] = {}
        default = compat.default_max_gen_toks(self.lm)
        where = ("--gen_kwargs, the task's generation_kwargs or the model's max_gen_toks= argument, as task "
                 f"{self.task_name!r} sends them")
        #: document → the most output tokens its requests may be billed (every request's worst case, each
        #: request as often as the task repeats it); an unbounded request is refused here, before any call
        self._out_bound = {d: sum(int(inst.repeats) * _request_bound(inst, default, where) for inst in insts)
                           for d, insts in self._by_doc.items()}

    def doc_id(self, item_id: str) -> int:
        try:
            return self._doc_of[str(item_id)]
        except KeyError:
            raise BankError(f"item {item_id!r} names no document of task {self.task_name!r}") from None

    def prompt_chars(self, item_id: str) -> int:
        """UTF-8 bytes of the item's request contexts, each as often as the task repeats it (an upper bound
        on their tokens)."""
        return sum(int(inst.repeats) * (len(str(inst.args[0]).encode("utf-8")) + TEMPLATE_TOKENS)
                   for inst in self._by_doc[self.doc_id(item_id)])

    def prompt_length(self, item_id: str) -> int:
        """Characters of the text the item's requests send (for token estimates, at 4 characters a token)."""
        return sum(len(compat.prompt_text(inst.args[0])) for inst in self._by_doc[self.doc_id(item_id)])

    def upper_tokens(self, item_id: str) -> tuple[int, int]:
        """(input, output) token counts no call for this item can exceed.

        A byte-level BPE token is at least one byte, so the UTF-8 length of the prompt (plus a
        chat-template allowance per request) bounds its input tokens; the output is bounded by the
        worst case of each request as sent (:func:`~lm_eval_adaptive.harness.output_limits.request_output_bound`:
        its largest output limit times its choices), each request as often as the task repeats it.
        """
        return self.prompt_chars(item_id), self._out_bound[self.doc_id(item_id)]

    def __call__(self, item_id: str) -> ItemScore:
        """Generate and score one document (one attempt; errors propagate to the caller's retry).

        When the model answered but scoring failed, :class:`ScoringFailed` carries the usage
        of the answered calls; the next attempt for this item re-uses the answers.
        """
        doc_id = self.doc_id(item_id)
        done = self._answered.pop(str(item_id), None) or _Answered()
        judged: list = []
        try:
            if done.instances is None:
                # fresh copies, so a failed attempt leaves nothing behind and retries start clean
                instances = [compat.fresh_instance(inst) for inst in self._by_doc[doc_id]]
                with compat.usage_sink() as sink:
                    try:
                        self._generate(instances)
                    finally:
                        done.usage += sink
                done.instances = instances
            instances = done.instances
            with self._lock, judge_calls(timeout=self.timeout) as judged:  # filters, metrics may keep state
                for inst in instances:
                    inst.filtered_resps = {}
                for f in compat.task_filters(self.task):
                    f.apply(instances)
                key = next(iter(instances[0].filtered_resps))
                metrics = self.task.process_results(instances[0].doc,
                                                    [i.filtered_resps[key] for i in instances])
            values = {k: self._metric_value(metrics, k, item_id) for k in (self.metrics or [self.metric])}
            raw = values if self.metrics is not None else values[self.metric]
        except Exception as e:
            done.judge += judged
            if done.usage or done.judge:  # answered, so paid for
                self._answered[str(item_id)] = done
                paid = ItemScore(raw=math.nan, usage=list(done.usage), calls=len(done.usage), judge=list(done.judge))
                raise ScoringFailed(e, paid) from e
            raise
        done.judge += judged
        resp = instances[0].resps[0] if instances[0].resps else None
        return ItemScore(raw=raw, usage=list(done.usage), calls=len(done.usage),
                         response=resp if isinstance(resp, str) else None, judge=list(done.judge))

    def _metric_value(self, metrics: dict, metric: str, item_id) -> float:
        """The task's per-document value of ``metric`` (an InputError when it gives none, or not a number)."""
        if metric not in metrics:
            have = sorted(k for k, v in metrics.items() if isinstance(v, (int, float)))
            raise InputError(f"task {self.task_name!r} gave no per-document metric {metric!r} "
                             f"(it gives: {', '.join(have) or 'none'})")
        raw = float(metrics[metric])
        if not math.isfinite(raw):
            raise InputError(f"task {self.task_name!r}, item {item_id}: metric {metric!r} is {raw}")
        return raw

    def _generate(self, instances) -> None:
        by_type = defaultdict(list)
        for inst in instances:
            by_type[inst.request_type].extend([inst] * inst.repeats)
        for reqtype, reqs in by_type.items():
            resps = getattr(self.lm, reqtype)(reqs, disable_tqdm=True) if reqtype == "generate_until" \
                else getattr(self.lm, reqtype)(reqs)
            for x, req in zip(resps, reqs, strict=True):
                req.resps.append(x)

"""Harness glue for live ranking: one harness model × one harness task, scored one document at a time.

:class:`HarnessItemScorer` builds a task's requests exactly as ``lm_eval``'s evaluator does
(the task's prompt, few-shot examples and seed, chat template, system instruction and
generation kwargs, all the harness's own code), then, for each document the engine
picks, runs that document's requests on the harness LM, applies the task's filters and
takes the per-document metric from the task's own ``process_results``. Documents never
picked are never generated nor scored.

The provider's token usage of every call the LM makes is captured (API models of the
harness — ``litellm``, ``local-chat-completions``, ``openai-chat-completions``,
``local-completions``, ... — return the OpenAI-style ``usage`` of each response), so each
item is charged what the provider reports. The harness's own retry loop is switched off
(``max_retries = 1``): the live runner retries with exponential backoff and jitter and
counts attempts itself.

Model specs are ``TYPE:ARGS``, the harness's ``--model`` and ``--model_args``, e.g.
``litellm:model=gpt-4o-mini`` or ``local-chat-completions:model=X,base_url=http://…``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from lm_eval_adaptive.errors import BankError, InputError

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm: bundled price map, no fetch

__all__ = ["ModelSpec", "parse_model_spec", "HarnessTask", "HarnessItemScorer", "ItemScore", "capture_usage",
           "usage_sink"]

log = logging.getLogger("lm_eval_adaptive")

#: Chat-template overhead allowed per call in the upper estimate of input tokens.
TEMPLATE_TOKENS = 64


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
    """The outcome of one document: the task's metric value and what the calls used."""

    raw: float
    usage: list = field(default_factory=list)  # one OpenAI-style usage dict per call (None if unreported)
    calls: int = 0
    response: str | None = None

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


class HarnessTask:
    """The harness's task setup shared by every model: task manager, names, arguments."""

    def __init__(self, task: str, *, include_path=None, num_fewshot=None, gen_kwargs=None,
                 apply_chat_template=False, fewshot_as_multiturn=False, system_instruction=None,
                 fewshot_random_seed: int = 1234, metadata=None, item_field: str | None = None):
        from lm_eval.tasks import TaskManager

        self.task = task
        self.num_fewshot = num_fewshot
        self.gen_kwargs = gen_kwargs
        self.apply_chat_template = apply_chat_template
        self.fewshot_as_multiturn = fewshot_as_multiturn
        self.system_instruction = system_instruction
        self.fewshot_random_seed = fewshot_random_seed
        self.item_field = item_field
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
        loaded = self.task_manager.load([self.task])["tasks"]
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


def build_lm(spec: ModelSpec):
    """The harness LM of ``spec`` (its registry and argument parsing), set up for item-at-a-time use."""
    from lm_eval.api.registry import get_model

    try:
        factory = get_model(spec.type)
    except (ValueError, KeyError) as e:
        raise InputError(f"model spec {spec.type}:{spec.args}: unknown harness model type {spec.type!r} ({e})")
    lm = factory.create_from_arg_string(spec.args, {"batch_size": 1, "max_batch_size": None, "device": None})
    if hasattr(lm, "max_retries"):
        lm.max_retries = 1  # the live runner retries (backoff with jitter) and counts the attempts
    if hasattr(lm, "_concurrent"):
        lm._concurrent = 1  # one call at a time per item: the runner runs items concurrently
    call = getattr(lm, "model_call", None)
    if call is not None and type(lm).__name__.startswith("LiteLLM"):
        def model_call(*args, **kwargs):  # no hidden SDK retries: the live runner's policy is the only one
            kwargs["gen_kwargs"] = {**(kwargs.get("gen_kwargs") or {}), "max_retries": 0}
            return call(*args, **kwargs)

        lm.model_call = model_call
    capture_usage(lm)
    return lm


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
                    sink.append(_usage_of(out))
            return _parse(*args, **kwargs)

        wrapped._lm_eval_adaptive_usage = True
        setattr(lm, name, wrapped)


def _usage_of(response) -> dict | None:
    usage = response.get("usage") if isinstance(response, dict) else getattr(response, "usage", None)
    if usage is not None and not isinstance(usage, dict):
        usage = dict(usage) if hasattr(usage, "keys") else {
            "prompt_tokens": getattr(usage, "prompt_tokens", None),
            "completion_tokens": getattr(usage, "completion_tokens", None)}
    return usage


@contextmanager
def usage_sink():
    """Collect, in a list, the usage of every response parsed in this thread meanwhile
    (one OpenAI-style dict per response, None where a response carried none)."""
    _tls.sink = sink = []
    try:
        yield sink
    finally:
        _tls.sink = None


class HarnessItemScorer:
    """Score single documents of one task with one harness model (see module docstring).

    Parameters
    ----------
    spec: the model.
    task: the shared :class:`HarnessTask`.
    bank: the item bank (its item ids name documents, its metric is taken from the task).
    metric: per-document metric (default: the bank's).
    """

    def __init__(self, spec: ModelSpec, task: HarnessTask, bank, *, metric: str | None = None, lm=None):
        self.spec = spec
        self.name = spec.name
        self.lm = lm if lm is not None else build_lm(spec)
        self.task_name, self.task = task.load()
        self.metric = metric or bank.metric
        if not self.metric:
            raise BankError(f"bank {bank.describe()} names no metric; pass --metric")
        if bank.task and bank.task != self.task_name:
            raise BankError(f"bank {bank.describe()} was calibrated for task {bank.task!r}, not {self.task_name!r}")
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
        self._doc_of = _doc_index(bank, self._by_doc, task.item_field, self.task_name)
        self._lock = threading.Lock()
        gk = {}
        first = next(iter(self._by_doc.values()))[0]
        if first.request_type == "generate_until" and len(first.args) > 1 and isinstance(first.args[1], dict):
            gk = first.args[1]
        self.max_output_tokens = int(gk.get("max_gen_toks", getattr(self.lm, "_max_gen_toks", 256)))

    def doc_id(self, item_id: str) -> int:
        try:
            return self._doc_of[str(item_id)]
        except KeyError:
            raise BankError(f"item {item_id!r} names no document of task {self.task_name!r}") from None

    def prompt_chars(self, item_id: str) -> int:
        """UTF-8 bytes of the item's request contexts (an upper bound on their tokens)."""
        return sum(len(str(inst.args[0]).encode("utf-8")) + TEMPLATE_TOKENS
                   for inst in self._by_doc[self.doc_id(item_id)])

    def upper_tokens(self, item_id: str) -> tuple[int, int]:
        """(input, output) token counts no call for this item can exceed.

        A byte-level BPE token is at least one byte, so the UTF-8 length of the prompt (plus a
        chat-template allowance per request) bounds its input tokens; the output is bounded
        by the request's ``max_gen_toks``.
        """
        n_req = len(self._by_doc[self.doc_id(item_id)])
        return self.prompt_chars(item_id), n_req * self.max_output_tokens

    def __call__(self, item_id: str) -> ItemScore:
        """Generate and score one document (one attempt; errors propagate to the caller's retry)."""
        doc_id = self.doc_id(item_id)
        template = self._by_doc[doc_id]
        # fresh copies, so a failed attempt leaves nothing behind and retries start clean
        instances = [fresh_instance(inst) for inst in template]
        with usage_sink() as sink:
            by_type = defaultdict(list)
            for inst in instances:
                by_type[inst.request_type].extend([inst] * inst.repeats)
            for reqtype, reqs in by_type.items():
                resps = getattr(self.lm, reqtype)(reqs, disable_tqdm=True) if reqtype == "generate_until" \
                    else getattr(self.lm, reqtype)(reqs)
                for x, req in zip(resps, reqs, strict=True):
                    req.resps.append(x)
        with self._lock:  # filters and metrics may keep state on the task
            for f in getattr(self.task, "_filters", []):
                f.apply(instances)
            key = next(iter(instances[0].filtered_resps))
            metrics = self.task.process_results(instances[0].doc, [i.filtered_resps[key] for i in instances])
        if self.metric not in metrics:
            have = sorted(k for k, v in metrics.items() if isinstance(v, (int, float)))
            raise InputError(f"task {self.task_name!r} gave no per-document metric {self.metric!r} "
                             f"(it gives: {', '.join(have) or 'none'}); pass --metric or use a bank "
                             "calibrated on this metric")
        raw = float(metrics[self.metric])
        resp = instances[0].resps[0] if instances[0].resps else None
        return ItemScore(raw=raw, usage=sink, calls=len(sink), response=resp if isinstance(resp, str) else None)


def fresh_instance(inst, *, doc_id: int | None = None):
    """A copy of a harness request with no responses yet (numbered ``doc_id`` if given)."""
    import copy

    new = copy.copy(inst)
    if doc_id is not None:
        new.doc_id = doc_id
    new.resps = []
    new.filtered_resps = {}
    return new


def _doc_index(bank, by_doc: dict, item_field: str | None, task_name: str) -> dict:
    """Bank item id → harness doc_id: by the document field ``item_field``, or the doc_id itself."""
    ids = [str(x) for x in bank.item_ids]
    if item_field:
        index = {}
        for d, insts in by_doc.items():
            doc = insts[0].doc
            if item_field not in doc:
                raise InputError(f"--item-field {item_field!r}: task {task_name!r} documents have no such "
                                 f"field (fields: {', '.join(map(str, doc))})")
            index[str(doc[item_field])] = d
    else:
        index = {str(d): d for d in by_doc}
    missing = [i for i in ids if i not in index]
    if missing:
        how = f"field {item_field!r}" if item_field else "doc_id (position in the task's eval split)"
        raise BankError(f"bank {bank.describe()} holds {len(missing)} item(s) that match no document of task "
                        f"{task_name!r} by {how}, e.g. {missing[:5]}" +
                        ("" if item_field else "; if the bank's items are document ids, pass --item-field"))
    return {i: index[i] for i in ids}


def item_upper_costs(scorer: HarnessItemScorer, price, item_ids) -> np.ndarray:
    """Upper-bound USD of each item for ``scorer``'s model at ``price``."""
    out = np.empty(len(item_ids))
    for k, i in enumerate(item_ids):
        a, b = scorer.upper_tokens(i)
        out[k] = a * price.input_per_token + b * price.output_per_token
    return out

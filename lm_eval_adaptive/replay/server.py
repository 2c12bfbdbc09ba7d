"""An OpenAI-compatible endpoint that answers with recorded real outputs.

The replay server lets the real lm-evaluation-harness and the real litellm client
run offline: each request names a recorded system (the ``model`` field) and its
prompt contains the text of a recorded item; the answer is that system's recorded
output for that item.  Nothing is ever invented: an unknown model, an unrecognised
prompt or a missing output gives HTTP 404 with an OpenAI-style error body.

Data (read from :func:`lm_eval_adaptive.data.datasets.data_root`, never copied):

* ``wmt24/<pair>/`` -- ``source.txt`` and ``systems/<SYSTEM>.txt``; an item is a
  0-based line number (the canary line is skipped).
* ``alpaca_eval/`` -- ``items.jsonl`` (instructions), ``outputs/<MODEL>.jsonl.gz``
  (answers), ``reference.jsonl`` (the baseline's answers, served under its
  ``generator`` name, gpt4_1106_preview) and ``judge/<MODEL>.jsonl`` (judge
  preferences in [1, 2]); an item is the ``id``.

Everything is loaded lazily (per pair, per model) and cached, so starting is fast.

Model names
    ``GPT-4`` (a plain name), ``wmt24/en-de/GPT-4`` or ``en-de/GPT-4`` (a WMT24
    system of one pair), ``alpaca_eval/claude-2``; an ``openai/`` prefix is
    ignored (litellm strips it itself).  Exact names win; otherwise a unique
    case-insensitive match is used.

Prompt recognition
    The prompt text is the concatenated message contents (chat; joined with
    ``"\\n"``) or the prompt (completions).  Every source segment / instruction
    of the candidate datasets that occurs in it (stripped, exact, not inside a
    word) is found; the one that ends last wins (the query comes last in a
    few-shot prompt), ties by the longest.  The WMT24 pairs share one English
    source, so when a plain name such as ``GPT-4`` exists in several pairs the
    pair is taken from the target language the prompt names (``German``,
    ``Deutsch``, ``en-de``, ``Spanish``, ``Japanese``/``日本語``,
    ``Chinese``/``中文``, ...; the last such mention outside the source text);
    when none is named the request is refused (400) with a message saying to
    use ``wmt24/<pair>/<SYSTEM>``.  A source text that occurs on several lines
    maps to its first line.  Sources are indexed by their first 16 characters
    (windows of the prompt are looked up in a dict); shorter ones are found with
    ``str.rfind``.  A check takes ~0.3 ms for a 1,300-character five-shot WMT
    prompt and ~2 ms for 10,000 characters (linear in the prompt's length).

Judge requests
    A prompt containing the line ``[[lm-eval-adaptive judge]]`` is a judge
    request (whatever the model field).  The instruction follows a line
    ``[Instruction]``; the candidate answer lies between the lines
    ``[Candidate answer]`` and ``[End of candidate answer]``.  The AlpacaEval
    models that have a judge record and whose recorded output equals the
    candidate (after ``.strip()``) are found, and the answer is
    ``Score: X`` with X = mean(preference) - 1, six decimals.

Responses
    OpenAI shape (``id``, ``object``, ``created``, ``model``, ``choices``,
    ``usage``); token counts are estimates, ``ceil(len(text) / 4)`` characters,
    for the prompt text and the answer.  ``stop``, ``max_tokens`` and sampling
    parameters are ignored: the recorded output is returned whole.  A recorded
    empty output (a few WMT24 lines) is returned as ``""``.  ``n`` other than 1,
    ``stream: true``, ``logprobs`` / ``echo`` and token-id prompts are refused
    with 400.  A completions request may carry a list of prompts (one choice
    each, as OpenAI does).

Fault injection (:class:`ReplayServer` options)
    ``latency`` seconds (+ uniform ``[0, latency_jitter]``) are added to every
    completion call; with probability ``fail_rate`` a call fails with one of
    ``fail_kinds`` -- ``"429"`` (rate limit), ``"500"`` (server error) or
    ``"drop"`` (the connection is closed without a response) -- drawn from a
    ``random.Random(seed)`` in order of arrival, so a sequential run is
    reproducible.  Failed calls are counted under ``failed`` and never as served.

Statistics
    ``GET /stats`` returns ``requests`` (completion calls received),
    ``served`` (calls answered), ``answers`` (choices returned),
    ``per_model`` and ``per_item`` (answers by model as requested, and by
    model then item key such as ``wmt24/en-de/17``, ``alpaca_eval/5`` or
    ``judge/alpaca_eval/5``), ``shared_items`` (served item keys whose source text
    stands on several lines of a WMT24 pair: all are answered and counted as the first
    such line), ``judge``, ``not_found`` and
    ``not_found_per_model`` (404s), ``bad_request`` (400s), ``failed`` and
    ``failed_by_kind`` (injected faults).  ``POST /stats/reset`` zeroes them and
    re-seeds the fault generator.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import re
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lm_eval_adaptive.data.datasets import data_root, read_jsonl, read_lines
from lm_eval_adaptive.errors import InputError

__all__ = [
    "FAIL_KINDS",
    "JUDGE_MARKER",
    "ReplayAnswer",
    "ReplayBadRequest",
    "ReplayError",
    "ReplayNotFound",
    "ReplayServer",
    "ReplayStore",
    "add_arguments",
    "estimate_tokens",
    "max_answers_per_item",
    "serve",
]

logger = logging.getLogger(__name__)

#: The line that marks a judge request.
JUDGE_MARKER = "[[lm-eval-adaptive judge]]"
INSTRUCTION_LINE = "[Instruction]"
CANDIDATE_LINE = "[Candidate answer]"
END_CANDIDATE_LINE = "[End of candidate answer]"

#: Fault kinds the server can inject.
FAIL_KINDS: tuple[str, ...] = ("429", "500", "drop")

# Sources at least this long are indexed by their first _KEY characters.
_KEY = 16

# Target-language names that pick a WMT24 pair when a plain system name is ambiguous.
_LANGUAGE_NAMES: dict[str, tuple[str, ...]] = {
    "de": ("German", "Deutsch"),
    "es": ("Spanish", "Español", "Espanol", "Castellano"),
    "ja": ("Japanese", "日本語"),
    "zh": ("Chinese", "Mandarin", "中文", "汉语", "简体中文"),
    "cs": ("Czech", "Čeština"),
    "ru": ("Russian", "Русский"),
    "uk": ("Ukrainian", "Українська"),
    "hi": ("Hindi",),
    "is": ("Icelandic",),
}


def estimate_tokens(text: str) -> int:
    """The token count reported in ``usage``: ``ceil(len(text) / 4)``."""
    return math.ceil(len(text) / 4)


# --------------------------------------------------------------------------- #
# Errors
# --------------------------------------------------------------------------- #


class ReplayError(Exception):
    """A request the replay server cannot answer; carries the HTTP status and error type."""

    status = 400
    type = "invalid_request_error"

    def __init__(self, message: str, *, model: str | None = None):
        super().__init__(message)
        self.message = message
        self.model = model

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": None,
                          "code": self.type}}


class ReplayNotFound(ReplayError):
    """Unknown model, unrecognised prompt or no recorded output (HTTP 404)."""

    status = 404
    type = "not_found"


class ReplayBadRequest(ReplayError):
    """A request the server does not support or cannot resolve (HTTP 400)."""

    status = 400
    type = "invalid_request_error"


@dataclass(frozen=True)
class ReplayAnswer:
    """One answer: the text, the item key (e.g. ``wmt24/en-de/17``) and what produced it."""

    text: str
    item: str
    source: str  # resolved model, e.g. "wmt24/en-de/GPT-4", "alpaca_eval/claude-2", "judge"
    judged: tuple[str, ...] = ()  # judge requests: the models whose answer matched
    shared: bool = False  # the prompt's text stands on several recorded lines; answered as the first


# --------------------------------------------------------------------------- #
# Prompt matching
# --------------------------------------------------------------------------- #


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _bounded(prompt: str, start: int, end: int, text: str) -> bool:
    """The occurrence ``prompt[start:end] == text`` does not begin or end inside a word."""
    if start > 0 and _is_word(text[0]) and _is_word(prompt[start - 1]):
        return False
    return not (end < len(prompt) and _is_word(text[-1]) and _is_word(prompt[end]))


@dataclass(frozen=True)
class _Match:
    start: int
    end: int
    key: Hashable

    @property
    def rank(self) -> tuple[int, int]:
        """Later end first, then the longer."""
        return (self.end, self.end - self.start)


class SourceMatcher:
    """Finds which of a fixed set of texts occurs last in a prompt.

    Texts (stripped) of at least ``_KEY`` characters are indexed by their first
    ``_KEY`` characters: every window of the prompt is looked up in a dict, and
    hits are confirmed with ``startswith``.  Shorter texts are searched with
    ``str.rfind``.  A text that appears twice keeps its first key; those keys are
    in :attr:`repeated`.
    """

    def __init__(self, entries: Iterable[tuple[str, Hashable]]):
        self._long: dict[str, list[tuple[str, Hashable]]] = {}
        self._short: list[tuple[str, Hashable]] = []
        self._exact: dict[str, Hashable] = {}
        self.repeated: set[Hashable] = set()
        for text, key in entries:
            t = text.strip()
            if not t:
                continue
            if t in self._exact:
                self.repeated.add(self._exact[t])
                continue
            self._exact[t] = key
            if len(t) >= _KEY:
                self._long.setdefault(t[:_KEY], []).append((t, key))
            else:
                self._short.append((t, key))
        for bucket in self._long.values():
            bucket.sort(key=lambda e: -len(e[0]))

    def __len__(self) -> int:
        return len(self._exact)

    def exact(self, text: str) -> Hashable | None:
        """The key of the text equal to ``text.strip()``, or None."""
        return self._exact.get(text.strip())

    def best(self, prompt: str) -> _Match | None:
        """The occurrence that ends last (ties: the longest), or None."""
        best: _Match | None = None
        index = self._long
        n = len(prompt)
        if index and n >= _KEY:
            hits = [i for i in range(n - _KEY + 1) if prompt[i:i + _KEY] in index]
            for i in reversed(hits):
                for text, key in index[prompt[i:i + _KEY]]:
                    end = i + len(text)
                    if best is not None and (end, len(text)) <= best.rank:
                        continue
                    if prompt.startswith(text, i) and _bounded(prompt, i, end, text):
                        best = _Match(i, end, key)
        for text, key in self._short:
            j = prompt.rfind(text)
            while j >= 0:
                end = j + len(text)
                if best is not None and (end, len(text)) <= best.rank:
                    break
                if _bounded(prompt, j, end, text):
                    best = _Match(j, end, key)
                    break
                j = prompt.rfind(text, 0, end - 1)
        return best


def _compile_hint(target: str) -> re.Pattern[str]:
    names = [re.escape(n) for n in _LANGUAGE_NAMES.get(target, ())]
    names.append(rf"en\s*(?:-|_|→|->|2|to)\s*{re.escape(target)}")
    return re.compile(r"(?<![^\W\d_])(?:" + "|".join(names) + r")(?![^\W\d_])", re.IGNORECASE)


# --------------------------------------------------------------------------- #
# The store
# --------------------------------------------------------------------------- #


def _first_generator(path: Path) -> str | None:
    """The ``generator`` named on the first line of ``reference.jsonl`` (None if absent)."""
    try:
        with open(path, encoding="utf-8") as f:
            rec = json.loads(f.readline() or "{}")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    name = rec.get("generator") if isinstance(rec, dict) else None
    return name.strip() if isinstance(name, str) and name.strip() else None


def _item_id(value: Any) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip()


def strip_provider(model: str) -> str:
    """``openai/NAME`` -> ``NAME`` (other names unchanged)."""
    model = model.strip()
    model = model.removeprefix("openai/")
    return model


@dataclass
class _Wmt:
    pair: str
    base: Path
    systems: dict[str, Path]
    matcher: SourceMatcher | None = None
    n_lines: int = 0
    outputs: dict[str, list[str]] = field(default_factory=dict)


class ReplayStore:
    """Recorded outputs of the real data, loaded lazily from :func:`data_root`.

    Args:
        root: data directory (default: :func:`lm_eval_adaptive.data.datasets.data_root`).

    Raises:
        InputError: when the directory does not exist or holds neither
            ``wmt24/`` nor ``alpaca_eval/``.
    """

    def __init__(self, root: str | os.PathLike[str] | None = None):

        self.root = data_root(root)
        self._lock = threading.RLock()
        self._wmt: dict[str, _Wmt] = {}
        wmt_dir = self.root / "wmt24"
        if wmt_dir.is_dir():
            for d in sorted(wmt_dir.iterdir()):
                if (d / "source.txt").is_file() and (d / "systems").is_dir():
                    systems = {p.stem: p for p in sorted((d / "systems").glob("*.txt"))}
                    self._wmt[d.name] = _Wmt(d.name, d, systems)
        self._alpaca_dir = self.root / "alpaca_eval"
        self._alpaca_models: dict[str, Path] = {}
        self._judge_models: dict[str, Path] = {}
        if (self._alpaca_dir / "items.jsonl").is_file():
            out_dir, judge_dir = self._alpaca_dir / "outputs", self._alpaca_dir / "judge"
            if out_dir.is_dir():
                for p in sorted(out_dir.glob("*.jsonl.gz")):
                    self._alpaca_models[p.name[: -len(".jsonl.gz")]] = p
                for p in sorted(out_dir.glob("*.jsonl")):
                    self._alpaca_models.setdefault(p.name[: -len(".jsonl")], p)
            ref = self._alpaca_dir / "reference.jsonl"
            if ref.is_file():  # the judge's baseline answers, served under their generator's name
                generator = _first_generator(ref)
                if generator:
                    self._alpaca_models.setdefault(generator, ref)
            if judge_dir.is_dir():
                for p in sorted(judge_dir.glob("*.jsonl")):
                    self._judge_models[p.name[: -len(".jsonl")]] = p
        if not self._wmt and not self._alpaca_models:
            raise InputError("no replayable data (wmt24/<pair>/ or alpaca_eval/) found",
                             path=str(self.root))
        self._alpaca_matcher: SourceMatcher | None = None
        self._alpaca_outputs: dict[str, dict[str, str]] = {}
        self._judge_prefs: dict[str, dict[str, float]] = {}
        self._matchers_by_content: dict[tuple[tuple[str, int], ...], SourceMatcher] = {}
        self._hints = {pair: _compile_hint(pair.split("-", 1)[-1]) for pair in self._wmt}
        self._lower: dict[str, list[str]] = {}
        for name in self._plain_names():
            self._lower.setdefault(name.lower(), []).append(name)

    # ---------------------------------------------------------------- listing
    @property
    def wmt_pairs(self) -> tuple[str, ...]:
        return tuple(self._wmt)

    def wmt_systems(self, pair: str) -> tuple[str, ...]:
        return tuple(self._wmt_entry(pair).systems)

    @property
    def alpaca_models(self) -> tuple[str, ...]:
        return tuple(self._alpaca_models)

    @property
    def judge_models(self) -> tuple[str, ...]:
        return tuple(self._judge_models)

    def _plain_names(self) -> list[str]:
        names = {s for w in self._wmt.values() for s in w.systems} | set(self._alpaca_models)
        return sorted(names)

    def model_names(self) -> list[str]:
        """Every name a request may use: plain names, then ``wmt24/<pair>/<SYSTEM>`` and
        ``alpaca_eval/<MODEL>``."""
        qualified = [f"wmt24/{w.pair}/{s}" for w in self._wmt.values() for s in w.systems]
        qualified += [f"alpaca_eval/{m}" for m in self._alpaca_models]
        return self._plain_names() + qualified

    # ---------------------------------------------------------------- loading
    def _wmt_entry(self, pair: str) -> _Wmt:
        try:
            return self._wmt[pair]
        except KeyError:
            raise InputError(f"unknown WMT24 pair {pair!r}; available: "
                             f"{', '.join(self._wmt) or 'none'}") from None

    def _wmt_matcher(self, pair: str) -> SourceMatcher:
        entry = self._wmt_entry(pair)
        if entry.matcher is not None:
            return entry.matcher
        with self._lock:
            if entry.matcher is None:
                source = read_lines(entry.base / "source.txt")
                docs_path = entry.base / "documents.tsv"
                domains = ([d.split("\t", 1)[0].strip().lower() for d in read_lines(docs_path)]
                           if docs_path.is_file() else [])
                keep = [
                    (text, i) for i, text in enumerate(source)
                    if not (i < len(domains) and domains[i] == "canary")
                    and not text.startswith("CANARY GUID")
                ]
                content = tuple(keep)
                matcher = self._matchers_by_content.get(content)
                if matcher is None:
                    matcher = SourceMatcher(keep)
                    self._matchers_by_content[content] = matcher
                entry.n_lines = len(source)
                entry.matcher = matcher
        return entry.matcher  # type: ignore[return-value]

    def _wmt_outputs(self, pair: str, system: str) -> list[str]:
        entry = self._wmt_entry(pair)
        lines = entry.outputs.get(system)
        if lines is None:
            with self._lock:
                lines = entry.outputs.get(system)
                if lines is None:
                    if system not in entry.systems:
                        raise ReplayNotFound(f"no WMT24 {pair} system {system!r}", model=system)
                    lines = read_lines(entry.systems[system])
                    entry.outputs[system] = lines
        return lines

    def _alpaca(self) -> SourceMatcher:
        if self._alpaca_matcher is None:
            with self._lock:
                if self._alpaca_matcher is None:
                    path = self._alpaca_dir / "items.jsonl"
                    entries = []
                    for rec in read_jsonl(path):
                        ident = _item_id(rec.get("id"))
                        text = rec.get("instruction")
                        if ident is not None and isinstance(text, str):
                            entries.append((text, ident))
                    self._alpaca_matcher = SourceMatcher(entries)
        return self._alpaca_matcher

    def _alpaca_model_outputs(self, model: str) -> dict[str, str]:
        outputs = self._alpaca_outputs.get(model)
        if outputs is None:
            with self._lock:
                outputs = self._alpaca_outputs.get(model)
                if outputs is None:
                    outputs = {}
                    for rec in read_jsonl(self._alpaca_models[model]):
                        ident, text = _item_id(rec.get("id")), rec.get("output")
                        if ident is not None and isinstance(text, str):
                            outputs.setdefault(ident, text)
                    self._alpaca_outputs[model] = outputs
        return outputs

    def _judge_preferences(self, model: str) -> dict[str, float]:
        prefs = self._judge_prefs.get(model)
        if prefs is None:
            with self._lock:
                prefs = self._judge_prefs.get(model)
                if prefs is None:
                    prefs = {}
                    for rec in read_jsonl(self._judge_models[model]):
                        ident, value = _item_id(rec.get("id")), rec.get("preference")
                        if (ident is None or isinstance(value, bool)
                                or not isinstance(value, (int, float)) or not math.isfinite(value)):
                            continue
                        prefs.setdefault(ident, float(value))
                    self._judge_prefs[model] = prefs
        return prefs

    # ---------------------------------------------------------------- data access (tests)
    def wmt_source(self, pair: str) -> dict[int, str]:
        """``{line: stripped source}`` of the servable segments of a pair (canary skipped;
        a repeated text keeps its first line)."""
        matcher = self._wmt_matcher(pair)
        return {int(k): t for t, k in matcher._exact.items()}  # type: ignore[arg-type]

    # ---------------------------------------------------------------- answering
    def _targets(self, name: str) -> list[tuple[str, str]]:
        """``(dataset, model)`` pairs for a requested name; dataset is a WMT24 pair or
        ``"alpaca_eval"``."""
        parts = name.split("/")
        if len(parts) >= 3 and parts[0] == "wmt24" and parts[1] in self._wmt:
            system = "/".join(parts[2:])
            return [(parts[1], s) for s in self._resolve_case(system, self._wmt[parts[1]].systems)]
        if len(parts) >= 2 and parts[0] in self._wmt:
            system = "/".join(parts[1:])
            return [(parts[0], s) for s in self._resolve_case(system, self._wmt[parts[0]].systems)]
        if len(parts) >= 2 and parts[0] == "alpaca_eval":
            model = "/".join(parts[1:])
            return [("alpaca_eval", m) for m in self._resolve_case(model, self._alpaca_models)]
        exact = self._plain_targets(name)
        if exact:
            return exact
        matches = self._lower.get(name.lower(), [])
        if len(matches) == 1:
            return self._plain_targets(matches[0])
        return []

    def _plain_targets(self, name: str) -> list[tuple[str, str]]:
        out = [(w.pair, name) for w in self._wmt.values() if name in w.systems]
        if name in self._alpaca_models:
            out.append(("alpaca_eval", name))
        return out

    @staticmethod
    def _resolve_case(name: str, known: dict[str, Any]) -> list[str]:
        if name in known:
            return [name]
        lower = [k for k in known if k.lower() == name.lower()]
        return lower if len(lower) == 1 else []

    def answer(self, model: str, prompt: str) -> ReplayAnswer:
        """The recorded answer of ``model`` to ``prompt`` (a judge request when the prompt
        carries :data:`JUDGE_MARKER`).

        Raises:
            ReplayNotFound: unknown model, no known item in the prompt, no recorded output.
            ReplayBadRequest: a plain name found in several WMT24 pairs whose prompt names
                no target language; a malformed judge request.
        """
        if JUDGE_MARKER in prompt:
            return self.judge(prompt)
        name = strip_provider(model)
        targets = self._targets(name)
        if not targets:
            raise ReplayNotFound(
                f"unknown model {name!r}: no WMT24 system or AlpacaEval model of that name "
                f"(GET /v1/models lists them)", model=name)
        matches: list[tuple[_Match, str, str]] = []
        checked: dict[int, _Match | None] = {}
        for dataset, system in targets:
            matcher = self._alpaca() if dataset == "alpaca_eval" else self._wmt_matcher(dataset)
            if id(matcher) not in checked:
                checked[id(matcher)] = matcher.best(prompt)
            m = checked[id(matcher)]
            if m is not None:
                matches.append((m, dataset, system))
        if not matches:
            where = ", ".join(sorted({f"wmt24/{d}" if d != "alpaca_eval" else d
                                      for d, _ in targets}))
            raise ReplayNotFound(
                f"model {name!r}: the prompt contains no recorded source segment or "
                f"instruction of {where}", model=name)
        top = max(m.rank for m, _, _ in matches)
        matches = [t for t in matches if t[0].rank == top]
        if len(matches) > 1:
            matches = self._by_language_hint(name, prompt, matches)
        m, dataset, system = matches[0]
        if dataset == "alpaca_eval":
            item = str(m.key)
            text = self._alpaca_model_outputs(system).get(item)
            if text is None:
                raise ReplayNotFound(
                    f"model {name!r}: AlpacaEval model {system!r} has no recorded output for "
                    f"item {item}", model=name)
            return ReplayAnswer(text, f"alpaca_eval/{item}", f"alpaca_eval/{system}")
        line = int(m.key)  # type: ignore[call-overload]
        outputs = self._wmt_outputs(dataset, system)
        if line >= len(outputs):
            raise ReplayNotFound(
                f"model {name!r}: WMT24 {dataset} system {system!r} has no recorded output for "
                f"segment {line}", model=name)
        return ReplayAnswer(outputs[line], f"wmt24/{dataset}/{line}", f"wmt24/{dataset}/{system}",
                            shared=m.key in self._wmt_matcher(dataset).repeated)

    def _by_language_hint(self, name: str, prompt: str,
                          matches: list[tuple[_Match, str, str]]) -> list[tuple[_Match, str, str]]:
        m = matches[0][0]
        rest = prompt[: m.start] + "\n" + prompt[m.end:]
        best: tuple[int, tuple[_Match, str, str]] | None = None
        for t in matches:
            rx = self._hints.get(t[1])
            if rx is None:
                continue
            last = None
            for hit in rx.finditer(rest):
                last = hit.start()
            if last is not None and (best is None or last > best[0]):
                best = (last, t)
        if best is None:
            pairs = ", ".join(t[1] for t in matches)
            raise ReplayBadRequest(
                f"model {name!r} is a system of several WMT24 pairs ({pairs}) and the prompt names "
                f"no target language; name the model as 'wmt24/<pair>/{matches[0][2]}'",
                model=name)
        return [best[1]]

    def judge(self, prompt: str) -> ReplayAnswer:
        """Answer a judge request with ``Score: X`` (see the module docstring)."""
        if not self._judge_models:
            raise ReplayNotFound("judge request: no AlpacaEval judge records (alpaca_eval/judge/)")
        lines = prompt.split("\n")
        stripped = [ln.strip() for ln in lines]

        def find(label: str, start: int = 0) -> int:
            for i in range(start, len(stripped)):
                if stripped[i] == label:
                    return i
            return -1

        i_ins = find(INSTRUCTION_LINE)
        if i_ins < 0:
            raise ReplayBadRequest(f"judge request: no line {INSTRUCTION_LINE!r}")
        i_cand = find(CANDIDATE_LINE, i_ins + 1)
        if i_cand < 0:
            raise ReplayBadRequest(f"judge request: no line {CANDIDATE_LINE!r} after the instruction")
        i_end = -1
        for i in range(len(stripped) - 1, i_cand, -1):
            if stripped[i] == END_CANDIDATE_LINE:
                i_end = i
                break
        if i_end < 0:
            raise ReplayBadRequest(f"judge request: no line {END_CANDIDATE_LINE!r} after the "
                                   f"candidate answer")
        ins_end = i_cand
        for i in range(i_ins + 1, i_cand):
            s = stripped[i]
            if s.startswith("[") and s.endswith("]") and (
                    s.lower().startswith("[end of instruction") or "answer" in s.lower()):
                ins_end = i
                break
        section = "\n".join(lines[i_ins + 1:ins_end])
        candidate = "\n".join(lines[i_cand + 1:i_end]).strip()
        matcher = self._alpaca()
        item = matcher.exact(section)
        if item is None:
            m = matcher.best(section)
            item = None if m is None else m.key
        if item is None:
            raise ReplayNotFound("judge request: the [Instruction] section contains no "
                                 "AlpacaEval instruction")
        item = str(item)
        prefs, who = [], []
        for model in self._judge_models:
            pref = self._judge_preferences(model).get(item)
            if pref is None:
                continue
            out = self._alpaca_model_outputs(model).get(item) if model in self._alpaca_models else None
            if out is not None and out.strip() == candidate:
                prefs.append(pref)
                who.append(model)
        if not prefs:
            raise ReplayNotFound(
                f"judge request: no AlpacaEval model with a judge record "
                f"({len(self._judge_models)} models) gave this candidate answer for item {item}")
        score = sum(prefs) / len(prefs) - 1.0
        return ReplayAnswer(f"Score: {score:.6f}", f"judge/alpaca_eval/{item}", "judge",
                            judged=tuple(who))


# --------------------------------------------------------------------------- #
# Statistics
# --------------------------------------------------------------------------- #


class _Stats:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.requests = 0
        self.served = 0
        self.answers = 0
        self.judge = 0
        self.not_found = 0
        self.bad_request = 0
        self.failed = 0
        self.failed_by_kind: dict[str, int] = {k: 0 for k in FAIL_KINDS}
        self.per_model: dict[str, int] = {}
        self.per_item: dict[str, dict[str, int]] = {}
        self.shared_items: set[str] = set()
        self.not_found_per_model: dict[str, int] = {}

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "served": self.served,
            "answers": self.answers,
            "judge": self.judge,
            "not_found": self.not_found,
            "bad_request": self.bad_request,
            "failed": self.failed,
            "failed_by_kind": dict(self.failed_by_kind),
            "per_model": dict(self.per_model),
            "per_item": {m: dict(v) for m, v in self.per_item.items()},
            "shared_items": sorted(self.shared_items),
            "not_found_per_model": dict(self.not_found_per_model),
        }


# --------------------------------------------------------------------------- #
# The HTTP server
# --------------------------------------------------------------------------- #

_DROP = object()


def max_answers_per_item(stats: dict[str, Any]) -> int:
    """The most answers one model got for one item in ``stats`` (0 when none), leaving out
    ``shared_items``: a source text on several lines is counted once per line asked for."""
    shared = set(stats.get("shared_items", ()))
    return max((v for per in stats["per_item"].values() for k, v in per.items() if k not in shared),
               default=0)


def _prompt_of_messages(messages: Any) -> str:
    if not isinstance(messages, list) or not messages:
        raise ReplayBadRequest("'messages' must be a non-empty list of messages")
    parts = []
    for msg in messages:
        if not isinstance(msg, dict):
            raise ReplayBadRequest("each message must be an object with 'role' and 'content'")
        content = msg.get("content")
        if content is None:
            continue
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            for piece in content:
                if isinstance(piece, dict) and isinstance(piece.get("text"), str):
                    parts.append(piece["text"])
                elif isinstance(piece, str):
                    parts.append(piece)
        else:
            raise ReplayBadRequest("message 'content' must be a string or a list of parts")
    return "\n".join(parts)


def _prompts_of(body: dict[str, Any]) -> list[str]:
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return [prompt]
    if isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
        return list(prompt)
    if isinstance(prompt, list) and prompt and all(
            isinstance(p, int) or (isinstance(p, list) and all(isinstance(x, int) for x in p))
            for p in prompt):
        raise ReplayBadRequest("token-id prompts are not supported by the replay server; send "
                               "text (lm-eval: tokenized_requests=False)")
    raise ReplayBadRequest("'prompt' must be a string or a non-empty list of strings")


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128  # the default 5 makes bursts of connections wait for SYN retries
    replay: ReplayServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that gave up (its timeout ran out during injected latency) is no server error
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "lm-eval-adaptive-replay"
    timeout = 60  # seconds an idle keep-alive connection is kept
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one debug line per request is logged by _reply instead

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                size_line = self.rfile.readline()
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _route(self) -> str:
        path = urlsplit(self.path).path.rstrip("/") or "/"
        return path[3:] if path.startswith("/v1/") else path

    def do_GET(self) -> None:
        route = self._route()
        rs = self.server.replay
        if route == "/models":
            data = [{"id": n, "object": "model", "created": 0, "owned_by": "lm-eval-adaptive-replay"}
                    for n in rs.store.model_names()]
            self._send_json(200, {"object": "list", "data": data})
        elif route == "/stats":
            self._send_json(200, rs.stats())
        elif route in ("/", "/health"):
            self._send_json(200, {"status": "ok", "url": rs.url})
        else:
            self._send_json(404, ReplayNotFound(f"no such endpoint: GET {self.path}").body())
        logger.debug("GET %s", self.path)

    def do_POST(self) -> None:
        route = self._route()
        rs = self.server.replay
        try:
            raw = self._read_body()
        except (ValueError, OSError):
            self.close_connection = True
            self._send_json(400, ReplayBadRequest("cannot read the request body").body())
            return
        if route == "/stats/reset":
            rs.reset_stats()
            self._send_json(200, {"reset": True})
            return
        if route not in ("/chat/completions", "/completions"):
            self._send_json(404, ReplayNotFound(f"no such endpoint: POST {self.path}").body())
            return
        status, payload, headers = rs.handle(route.lstrip("/").replace("/", "."), raw)
        if payload is _DROP:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        self._send_json(status, payload, headers)


class ReplayServer:
    """The replay endpoint on a background thread (or in the foreground, :meth:`serve_forever`).

    Args:
        store: the recorded data (default: a new :class:`ReplayStore` on ``root``).
        root: data directory when no store is given.
        host, port: where to listen (port 0 picks a free port).
        latency: seconds added to every completion call.
        latency_jitter: plus a uniform random ``[0, latency_jitter]`` seconds.
        fail_rate: probability in [0, 1] that a completion call fails.
        fail_kinds: kinds of failure, drawn uniformly: ``"429"``, ``"500"``, ``"drop"``.
        seed: seed of the generator of failures (and jitter).
        retry_after: when set, 429/500 responses carry ``Retry-After`` and ``retry-after-ms``
            headers with this many seconds (clients back off that long).

    Raises:
        InputError: for an invalid option.
    """

    def __init__(
        self,
        store: ReplayStore | None = None,
        *,
        root: str | os.PathLike[str] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        latency: float = 0.0,
        latency_jitter: float = 0.0,
        fail_rate: float = 0.0,
        fail_kinds: Sequence[str] | str = FAIL_KINDS,
        seed: int = 0,
        retry_after: float | None = None,
    ):
        if isinstance(fail_kinds, str):
            fail_kinds = [k for k in (s.strip() for s in fail_kinds.split(",")) if k]
        kinds = tuple(str(k) for k in fail_kinds)
        bad = [k for k in kinds if k not in FAIL_KINDS]
        if bad or not kinds:
            raise InputError(f"fail kinds must be a non-empty subset of {', '.join(FAIL_KINDS)}; "
                             f"got {', '.join(kinds) or 'none'}")
        if not (isinstance(fail_rate, (int, float)) and 0.0 <= fail_rate <= 1.0):
            raise InputError(f"fail rate must be in [0, 1], got {fail_rate!r}")
        for label, value in (("latency", latency), ("latency jitter", latency_jitter)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise InputError(f"{label} must be a finite number >= 0, got {value!r}")
        if retry_after is not None and not (math.isfinite(retry_after) and retry_after >= 0):
            raise InputError(f"retry-after must be a finite number >= 0, got {retry_after!r}")
        if not (isinstance(port, int) and 0 <= port <= 65535):
            raise InputError(f"port must be in 0..65535, got {port!r}")
        self.store = store if store is not None else ReplayStore(root)
        self.host = host
        self.port = port
        self.latency = float(latency)
        self.latency_jitter = float(latency_jitter)
        self.fail_rate = float(fail_rate)
        self.fail_kinds = kinds
        self.seed = int(seed)
        self.retry_after = retry_after
        self._lock = threading.Lock()
        self._stats = _Stats()
        self._seed_rngs()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---------------------------------------------------------------- lifecycle
    def _bind(self) -> _HTTPServer:
        if self._httpd is None:
            try:
                httpd = _HTTPServer((self.host, self.port), _Handler)
            except OSError as exc:
                raise InputError(f"cannot listen on {self.host}:{self.port}: {exc}") from exc
            httpd.replay = self
            self._httpd = httpd
            self.port = httpd.server_address[1]
        return self._httpd

    def start(self) -> ReplayServer:
        """Listen and serve on a background thread; returns self."""
        if self._thread is not None:
            return self
        httpd = self._bind()
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name=f"replay-server-{self.port}", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted (KeyboardInterrupt propagates)."""
        httpd = self._bind()
        try:
            httpd.serve_forever(poll_interval=0.2)
        finally:
            httpd.server_close()
            self._httpd = None

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        httpd, thread = self._httpd, self._thread
        self._httpd, self._thread = None, None
        if httpd is not None:
            if thread is not None:
                httpd.shutdown()
                thread.join(timeout=5)
            httpd.server_close()

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` (no ``/v1``)."""
        if self._httpd is None:
            raise RuntimeError("the replay server is not started")
        host = self.host if self.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    @property
    def url(self) -> str:
        """``http://HOST:PORT/v1``: the ``api_base`` / ``base_url`` for OpenAI clients."""
        return self.base_url + "/v1"

    # ---------------------------------------------------------------- statistics
    def _seed_rngs(self) -> None:
        self._fail_rng = random.Random(self.seed)
        self._jitter_rng = random.Random(f"{self.seed}/latency")

    def stats(self) -> dict[str, Any]:
        """The counters served at ``GET /stats``."""
        with self._lock:
            return self._stats.as_dict()

    def reset_stats(self) -> None:
        """Zero the counters and re-seed the fault generator."""
        with self._lock:
            self._stats.reset()
            self._seed_rngs()

    # ---------------------------------------------------------------- requests
    def handle(self, kind: str, raw: bytes) -> tuple[int, Any, dict[str, str]]:
        """Answer one completion call (``kind`` ``"chat.completions"`` or ``"completions"``):
        ``(status, JSON payload or the drop sentinel, headers)``."""
        t0 = time.perf_counter()
        with self._lock:
            self._stats.requests += 1
            fault = None
            if self.fail_rate > 0 and self._fail_rng.random() < self.fail_rate:
                fault = self.fail_kinds[self._fail_rng.randrange(len(self.fail_kinds))]
            delay = self.latency
            if self.latency_jitter > 0:
                delay += self._jitter_rng.uniform(0.0, self.latency_jitter)
        if delay > 0:
            time.sleep(delay)
        model = "?"
        if fault is not None:
            with self._lock:
                self._stats.failed += 1
                self._stats.failed_by_kind[fault] += 1
            logger.debug("POST /v1/%s -> injected %s", kind.replace(".", "/"), fault)
            return self._fault_response(fault)
        try:
            try:
                body = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ReplayBadRequest(f"the request body is not JSON: {exc}") from None
            if not isinstance(body, dict):
                raise ReplayBadRequest("the request body must be a JSON object")
            model = body.get("model")
            if not isinstance(model, str) or not model.strip():
                model = "?"
                raise ReplayBadRequest("'model' is required")
            model = strip_provider(model)
            if body.get("stream"):
                raise ReplayBadRequest("streaming is not supported by the replay server; "
                                       "send stream=false")
            n = body.get("n")
            if n is not None and n != 1:
                raise ReplayBadRequest(f"only n=1 is supported by the replay server, got n={n!r}")
            if body.get("echo") or body.get("logprobs") or body.get("top_logprobs"):
                raise ReplayBadRequest("logprobs/echo are not supported by the replay server "
                                       "(it replays recorded text only)")
            if kind == "chat.completions":
                prompts = [_prompt_of_messages(body.get("messages"))]
            else:
                prompts = _prompts_of(body)
            answers = [self.store.answer(model, p) for p in prompts]
        except ReplayError as err:
            with self._lock:
                if err.status == 404:
                    self._stats.not_found += 1
                    self._stats.not_found_per_model[model] = (
                        self._stats.not_found_per_model.get(model, 0) + 1)
                else:
                    self._stats.bad_request += 1
            logger.debug("POST /v1/%s model=%s -> %d %s", kind.replace(".", "/"), model,
                         err.status, err.message)
            return err.status, err.body(), {}
        with self._lock:
            s = self._stats
            s.served += 1
            s.answers += len(answers)
            for a in answers:
                s.per_model[model] = s.per_model.get(model, 0) + 1
                items = s.per_item.setdefault(model, {})
                items[a.item] = items.get(a.item, 0) + 1
                if a.shared:
                    s.shared_items.add(a.item)
                if a.source == "judge":
                    s.judge += 1
        logger.debug("POST /v1/%s model=%s -> 200 %s (%.1f ms)", kind.replace(".", "/"), model,
                     ",".join(a.item for a in answers), 1000 * (time.perf_counter() - t0))
        return 200, self._response(kind, model, prompts, answers), {}

    def _fault_response(self, fault: str) -> tuple[int, Any, dict[str, str]]:
        if fault == "drop":
            return 0, _DROP, {}
        headers: dict[str, str] = {}
        if self.retry_after is not None:
            headers["Retry-After"] = str(max(0, math.ceil(self.retry_after)))
            headers["retry-after-ms"] = str(round(self.retry_after * 1000))
        if fault == "429":
            return 429, {"error": {"message": "rate limit exceeded (injected by the replay server)",
                                   "type": "rate_limit_error", "param": None,
                                   "code": "rate_limit_exceeded"}}, headers
        return 500, {"error": {"message": "internal server error (injected by the replay server)",
                               "type": "server_error", "param": None,
                               "code": "server_error"}}, headers

    @staticmethod
    def _response(kind: str, model: str, prompts: list[str],
                  answers: list[ReplayAnswer]) -> dict[str, Any]:
        prompt_tokens = sum(estimate_tokens(p) for p in prompts)
        completion_tokens = sum(estimate_tokens(a.text) for a in answers)
        if kind == "chat.completions":
            choices = [{"index": i, "message": {"role": "assistant", "content": a.text},
                        "finish_reason": "stop", "logprobs": None}
                       for i, a in enumerate(answers)]
            obj, prefix = "chat.completion", "chatcmpl-replay-"
        else:
            choices = [{"index": i, "text": a.text, "finish_reason": "stop", "logprobs": None}
                       for i, a in enumerate(answers)]
            obj, prefix = "text_completion", "cmpl-replay-"
        return {
            "id": prefix + uuid.uuid4().hex[:24],
            "object": obj,
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": None,
            "choices": choices,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }


# --------------------------------------------------------------------------- #
# Command line
# --------------------------------------------------------------------------- #


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``lm-eval-adaptive replay-server``."""
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default: 127.0.0.1, this machine only)")
    parser.add_argument("--port", type=int, default=8123, help="port (0 picks a free one; default 8123)")
    parser.add_argument("--data", default=None,
                        help="data directory (default: $LM_EVAL_ADAPTIVE_DATA or ../shared/data)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every call")
    parser.add_argument("--latency-jitter", type=float, default=0.0,
                        help="plus uniform random [0, this] seconds")
    parser.add_argument("--fail-rate", type=float, default=0.0,
                        help="probability in [0, 1] that a call fails (default 0)")
    parser.add_argument("--fail-kinds", default=",".join(FAIL_KINDS),
                        help="comma-separated failure kinds: 429, 500, drop (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the failure generator")
    parser.add_argument("--retry-after", type=float, default=None,
                        help="seconds to put in Retry-After headers of 429/500 responses")
    parser.add_argument("--verbose", "-v", action="store_true", help="log one line per request")


def serve(args: argparse.Namespace) -> int:
    """Run the replay server until Ctrl-C or SIGTERM (``lm-eval-adaptive replay-server``)."""
    if getattr(args, "verbose", False):
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
        logger.setLevel(logging.DEBUG)
    store = ReplayStore(args.data)
    server = ReplayServer(
        store,
        host=args.host,
        port=args.port,
        latency=args.latency,
        latency_jitter=getattr(args, "latency_jitter", 0.0),
        fail_rate=args.fail_rate,
        fail_kinds=args.fail_kinds,
        seed=args.seed,
        retry_after=getattr(args, "retry_after", None),
    )
    server._bind()
    n_wmt = sum(len(store.wmt_systems(p)) for p in store.wmt_pairs)
    print(f"replay server on {server.url} (data: {store.root}; {n_wmt} WMT24 systems in "
          f"{len(store.wmt_pairs)} pairs, {len(store.alpaca_models)} AlpacaEval models, "
          f"{len(store.judge_models)} with judge records); Ctrl-C to stop", flush=True)
    previous = None
    if threading.current_thread() is threading.main_thread():
        def _on_term(signum: int, frame: Any) -> None:  # SIGTERM stops like Ctrl-C
            raise KeyboardInterrupt

        previous = signal.signal(signal.SIGTERM, _on_term)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("replay server stopped", flush=True)
    finally:
        server.stop()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0

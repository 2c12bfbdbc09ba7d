"""The recorded outputs of the real data, loaded lazily from the data folder, and the answer
a model gives to a prompt.

Data (read from :func:`lm_eval_adaptive.data.data_root.data_root`, never copied):

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

Which item a prompt asks for is found by :mod:`lm_eval_adaptive.replay.matching`.

Judge requests
    A prompt carrying :data:`~lm_eval_adaptive.data.judge_format.JUDGE_MARKER` is a judge
    request (whatever the model field), in the judge wire format of
    :mod:`lm_eval_adaptive.data.judge_format` (the one ``llm_judge`` writes): the
    instruction follows a line ``[Instruction]``; the candidate answer lies between the
    lines ``[Candidate answer]`` and ``[End of candidate answer]``.  The AlpacaEval
    models that have a judge record and whose recorded output equals the
    candidate (after ``.strip()``) are found, and the answer is
    ``Score: X`` with X = mean(preference) - 1, six decimals.
"""

from __future__ import annotations

import json
import math
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lm_eval_adaptive.data.data_root import data_root
from lm_eval_adaptive.data.files import read_jsonl, read_lines
from lm_eval_adaptive.data.judge_format import format_judge_score, is_judge_prompt, parse_judge_prompt
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.replay.errors import ReplayAnswer, ReplayBadRequest, ReplayNotFound
from lm_eval_adaptive.replay.matching import (
    SourceMatch,
    SourceMatcher,
    language_hint,
    pick_by_language,
    resolve_case,
    strip_provider,
)

__all__ = ["ReplayStore"]


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
        root: data directory (default: :func:`lm_eval_adaptive.data.data_root.data_root`).

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
        self._hints = {pair: language_hint(pair.split("-", 1)[-1]) for pair in self._wmt}
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
        return {int(k): t for t, k in matcher.items()}  # type: ignore[call-overload]

    # ---------------------------------------------------------------- answering
    def _targets(self, name: str) -> list[tuple[str, str]]:
        """``(dataset, model)`` pairs for a requested name; dataset is a WMT24 pair or
        ``"alpaca_eval"``."""
        parts = name.split("/")
        if len(parts) >= 3 and parts[0] == "wmt24" and parts[1] in self._wmt:
            system = "/".join(parts[2:])
            return [(parts[1], s) for s in resolve_case(system, self._wmt[parts[1]].systems)]
        if len(parts) >= 2 and parts[0] in self._wmt:
            system = "/".join(parts[1:])
            return [(parts[0], s) for s in resolve_case(system, self._wmt[parts[0]].systems)]
        if len(parts) >= 2 and parts[0] == "alpaca_eval":
            model = "/".join(parts[1:])
            return [("alpaca_eval", m) for m in resolve_case(model, self._alpaca_models)]
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

    def answer(self, model: str, prompt: str) -> ReplayAnswer:
        """The recorded answer of ``model`` to ``prompt`` (a judge request when the prompt
        carries :data:`~lm_eval_adaptive.data.judge_format.JUDGE_MARKER`).

        Raises:
            ReplayNotFound: unknown model, no known item in the prompt, no recorded output.
            ReplayBadRequest: a plain name found in several WMT24 pairs whose prompt names
                no target language; a malformed judge request.
        """
        if is_judge_prompt(prompt):
            return self.judge(prompt)
        name = strip_provider(model)
        targets = self._targets(name)
        if not targets:
            raise ReplayNotFound(
                f"unknown model {name!r}: no WMT24 system or AlpacaEval model of that name "
                f"(GET /v1/models lists them)", model=name)
        matches: list[tuple[SourceMatch, str, str]] = []
        checked: dict[int, SourceMatch | None] = {}
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
            matches = pick_by_language(name, prompt, matches, self._hints)
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

    def judge(self, prompt: str) -> ReplayAnswer:
        """Answer a judge request with ``Score: X`` (see the module docstring)."""
        if not self._judge_models:
            raise ReplayNotFound("judge request: no AlpacaEval judge records (alpaca_eval/judge/)")
        try:
            request = parse_judge_prompt(prompt)
        except ValueError as exc:
            raise ReplayBadRequest(f"judge request: {exc}") from None
        section, candidate = request.instruction, request.candidate
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
        return ReplayAnswer(format_judge_score(score), f"judge/alpaca_eval/{item}", "judge",
                            judged=tuple(who))

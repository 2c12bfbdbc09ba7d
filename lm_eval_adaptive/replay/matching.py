"""Which recorded item a prompt asks for: the text index, and the target-language hints.

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

:class:`SourceMatcher` finds the text; :func:`language_hint` and :func:`pick_by_language`
settle a plain name found in several WMT24 pairs; :func:`resolve_case` and
:func:`strip_provider` read model names.  Nothing here reads files: the store
(:mod:`lm_eval_adaptive.replay.store`) builds the matchers from the data.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, ItemsView
from dataclasses import dataclass
from typing import Any

from lm_eval_adaptive.replay.errors import ReplayBadRequest

__all__ = [
    "SourceMatch",
    "SourceMatcher",
    "language_hint",
    "pick_by_language",
    "resolve_case",
    "strip_provider",
]

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


def strip_provider(model: str) -> str:
    """``openai/NAME`` -> ``NAME`` (other names unchanged)."""
    model = model.strip()
    model = model.removeprefix("openai/")
    return model


def resolve_case(name: str, known: dict[str, Any]) -> list[str]:
    """``[name]`` when ``known`` has it, else the one key equal to it ignoring case (``[]``
    when none or several)."""
    if name in known:
        return [name]
    lower = [k for k in known if k.lower() == name.lower()]
    return lower if len(lower) == 1 else []


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _bounded(prompt: str, start: int, end: int, text: str) -> bool:
    """The occurrence ``prompt[start:end] == text`` does not begin or end inside a word."""
    if start > 0 and _is_word(text[0]) and _is_word(prompt[start - 1]):
        return False
    return not (end < len(prompt) and _is_word(text[-1]) and _is_word(prompt[end]))


@dataclass(frozen=True)
class SourceMatch:
    """One occurrence of a known text in a prompt: ``prompt[start:end]``, the text's key."""

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

    def items(self) -> ItemsView[str, Hashable]:
        """``(stripped text, key)`` of every distinct text (a repeated text: its first key)."""
        return self._exact.items()

    def exact(self, text: str) -> Hashable | None:
        """The key of the text equal to ``text.strip()``, or None."""
        return self._exact.get(text.strip())

    def best(self, prompt: str) -> SourceMatch | None:
        """The occurrence that ends last (ties: the longest), or None."""
        best: SourceMatch | None = None
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
                        best = SourceMatch(i, end, key)
        for text, key in self._short:
            j = prompt.rfind(text)
            while j >= 0:
                end = j + len(text)
                if best is not None and (end, len(text)) <= best.rank:
                    break
                if _bounded(prompt, j, end, text):
                    best = SourceMatch(j, end, key)
                    break
                j = prompt.rfind(text, 0, end - 1)
        return best


def language_hint(target: str) -> re.Pattern[str]:
    """The pattern of a mention of target language ``target`` (``de``, ``ja``, ...): its
    names, or ``en-de``, ``en_de``, ``en→de``, ``en to de`` ..., not inside a word."""
    names = [re.escape(n) for n in _LANGUAGE_NAMES.get(target, ())]
    names.append(rf"en\s*(?:-|_|→|->|2|to)\s*{re.escape(target)}")
    return re.compile(r"(?<![^\W\d_])(?:" + "|".join(names) + r")(?![^\W\d_])", re.IGNORECASE)


Candidate = tuple[SourceMatch, str, str]  # (the match, the WMT24 pair, the system)


def pick_by_language(name: str, prompt: str, matches: list[Candidate],
                     hints: dict[str, re.Pattern[str]]) -> list[Candidate]:
    """Of equally good ``(SourceMatch, pair, system)`` candidates (one text, several WMT24
    pairs), the one whose target language the prompt names last outside the matched text.

    Raises:
        ReplayBadRequest: the prompt names none of the pairs' target languages.
    """
    m = matches[0][0]
    rest = prompt[: m.start] + "\n" + prompt[m.end:]
    best: tuple[int, Candidate] | None = None
    for t in matches:
        rx = hints.get(t[1])
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

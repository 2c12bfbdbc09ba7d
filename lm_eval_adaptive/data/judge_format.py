"""The judge wire format: how a judge prompt is written and read back, and the reply's format.

Both sides import this one module: :func:`lm_eval_adaptive.harness.metrics.llm_judge` builds
its prompt with :func:`build_judge_prompt` and reads the judge's reply with
:func:`parse_judge_score`; the replay endpoint (:mod:`lm_eval_adaptive.replay.store`)
recognises a judge prompt by :data:`JUDGE_MARKER`, reads it with :func:`parse_judge_prompt`
and answers with :func:`format_judge_score`.

Layout of a judge prompt (each marker on its own line)::

    [[lm-eval-adaptive judge]]
    <rubric>

    [Instruction]
    <instruction>

    [Reference answer]          (only when a reference is given)
    <reference>

    [Candidate answer]
    <answer, verbatim>
    [End of candidate answer]

    <request to reply "Score: X" with X from lo to hi>

No heavy imports: the standard library only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "CANDIDATE_LINE",
    "DEFAULT_RUBRIC",
    "END_CANDIDATE_LINE",
    "INSTRUCTION_LINE",
    "JUDGE_MARKER",
    "REFERENCE_LINE",
    "SCORE_PATTERN",
    "JudgePrompt",
    "build_judge_prompt",
    "check_scale",
    "format_judge_score",
    "is_judge_prompt",
    "parse_judge_prompt",
    "parse_judge_score",
]

#: First line of every judge prompt (the replay endpoint recognises it).
JUDGE_MARKER = "[[lm-eval-adaptive judge]]"
#: The line before the instruction.
INSTRUCTION_LINE = "[Instruction]"
#: The line before the reference answer (only when one is given).
REFERENCE_LINE = "[Reference answer]"
#: The line before the candidate answer.
CANDIDATE_LINE = "[Candidate answer]"
#: The line after the candidate answer.
END_CANDIDATE_LINE = "[End of candidate answer]"

DEFAULT_RUBRIC = (
    "You are an impartial judge. Evaluate the quality of the candidate answer to the "
    "instruction below. Consider helpfulness, correctness, relevance, depth, clarity "
    "and level of detail, and whether the answer actually does what the instruction "
    "asks. If a reference answer is given, use it as a guide to a good answer, not as "
    "the only acceptable one. Do not let the length of the answer or the order of the "
    "texts influence you. Be as objective as possible."
)

#: The ``Score: <number>`` of a reply (case-insensitive; markdown bold allowed around it).
SCORE_PATTERN = re.compile(
    r"Score\s*\**\s*[:=]\s*\**\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)",
    re.IGNORECASE,
)


def _fmt_num(x: float) -> str:
    return f"{x:g}"


def check_scale(scale: Sequence[float]) -> tuple[float, float]:
    """``(lo, hi)`` of a judge's scale, checked.

    Raises:
        ValueError: not a pair of finite numbers with ``hi > lo``.
    """
    try:
        lo, hi = (float(v) for v in scale)
    except (TypeError, ValueError):
        raise ValueError(f"scale must be a pair of numbers (lo, hi), got {scale!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
        raise ValueError(f"scale must be finite with hi > lo, got {scale!r}")
    return lo, hi


def build_judge_prompt(
    instruction: str,
    answer: str,
    *,
    reference: str | None = None,
    rubric: str = DEFAULT_RUBRIC,
    scale: Sequence[float] = (0, 1),
) -> str:
    """The judge prompt :func:`~lm_eval_adaptive.harness.metrics.llm_judge` sends (one user
    message), in the layout of the module docstring."""
    lo, hi = check_scale(scale)
    parts = [JUDGE_MARKER, str(rubric).strip(), "", INSTRUCTION_LINE, str(instruction), ""]
    if reference is not None:
        parts += [REFERENCE_LINE, str(reference), ""]
    parts += [CANDIDATE_LINE, str(answer), END_CANDIDATE_LINE, ""]
    parts.append(
        f"Rate the candidate answer on a scale from {_fmt_num(lo)} (worst) to "
        f"{_fmt_num(hi)} (best). You may explain your reasoning briefly first, then end "
        f'with a line of the form "Score: X", where X is a number from {_fmt_num(lo)} '
        f"to {_fmt_num(hi)}."
    )
    return "\n".join(parts)


def is_judge_prompt(prompt: str) -> bool:
    """Whether ``prompt`` is a judge request: it contains :data:`JUDGE_MARKER`."""
    return JUDGE_MARKER in prompt


@dataclass(frozen=True)
class JudgePrompt:
    """What a judge prompt asks about: its instruction section (raw lines) and the candidate
    answer (stripped)."""

    instruction: str
    candidate: str


def parse_judge_prompt(prompt: str) -> JudgePrompt:
    """Read a judge prompt back.

    The instruction follows the line :data:`INSTRUCTION_LINE` and ends at the next marker
    line (``[End of instruction...]`` or one naming an answer, such as
    :data:`REFERENCE_LINE`) or at :data:`CANDIDATE_LINE`; the candidate answer lies between
    :data:`CANDIDATE_LINE` and the last :data:`END_CANDIDATE_LINE`.  Marker lines are
    matched after ``.strip()``.

    Raises:
        ValueError: a marker line is missing (the message names it).
    """
    lines = prompt.split("\n")
    stripped = [ln.strip() for ln in lines]

    def find(label: str, start: int = 0) -> int:
        for i in range(start, len(stripped)):
            if stripped[i] == label:
                return i
        return -1

    i_ins = find(INSTRUCTION_LINE)
    if i_ins < 0:
        raise ValueError(f"no line {INSTRUCTION_LINE!r}")
    i_cand = find(CANDIDATE_LINE, i_ins + 1)
    if i_cand < 0:
        raise ValueError(f"no line {CANDIDATE_LINE!r} after the instruction")
    i_end = -1
    for i in range(len(stripped) - 1, i_cand, -1):
        if stripped[i] == END_CANDIDATE_LINE:
            i_end = i
            break
    if i_end < 0:
        raise ValueError(f"no line {END_CANDIDATE_LINE!r} after the candidate answer")
    ins_end = i_cand
    for i in range(i_ins + 1, i_cand):
        s = stripped[i]
        if s.startswith("[") and s.endswith("]") and (
                s.lower().startswith("[end of instruction") or "answer" in s.lower()):
            ins_end = i
            break
    return JudgePrompt(instruction="\n".join(lines[i_ins + 1:ins_end]),
                       candidate="\n".join(lines[i_cand + 1:i_end]).strip())


def format_judge_score(score: float) -> str:
    """A judge's reply giving ``score``: ``Score: X`` with six decimals (what the replay
    endpoint answers; :func:`parse_judge_score` reads it back)."""
    return f"Score: {score:.6f}"


def parse_judge_score(reply: str | None) -> float:
    """The number in the first ``Score: <number>`` of a judge's reply (raw scale).

    Raises:
        ValueError: when the reply has no such line; the message quotes the reply
            (truncated to 300 characters).
    """
    text = "" if reply is None else str(reply)
    match = SCORE_PATTERN.search(text)
    if match is not None:
        value = float(match.group(1))
        if math.isfinite(value):
            return value
    shown = text if len(text) <= 300 else text[:300] + "..."
    raise ValueError(f'cannot parse a "Score: <number>" from the judge reply: {shown!r}')

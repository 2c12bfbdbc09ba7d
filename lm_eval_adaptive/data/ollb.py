"""Open LLM Leaderboard: real 0/1 results of many models on multiple-choice and exact-match tasks.

``binary/<name>.csv.gz`` under :func:`~lm_eval_adaptive.data.data_root.data_root` is a long table
(``model,item,score``, score 1 = correct) derived from the leaderboard's public per-sample
details; :func:`load_ollb` reads one as a response table named ``ollb/<name>``. The tables are
the dev data of the binary (2PL/3PL) path (docs/binary.md): tune on ``mmlu_pro_math_7b``,
``tiny_gsm8k`` and ``tiny_hellaswag``; report on ``bbh_shuffled_objects_5`` and
``tiny_truthfulqa``.

:data:`OLLB_OPTIONS` says how many answer options an item of each table has (the chance of a
right guess is 1/k): 0 for an exact-match task (no guessing), None where the count varies by
item and is not in the data.
"""

from __future__ import annotations

import os

from lm_eval_adaptive.data.data_root import data_root
from lm_eval_adaptive.data.responses import ResponseTable
from lm_eval_adaptive.data.table_files import read_table
from lm_eval_adaptive.errors import InputError

__all__ = ["OLLB_NAMES", "OLLB_OPTIONS", "OLLB_TUNING", "OLLB_REPORT", "load_ollb"]

#: Answer options per item of each table: MMLU-Pro (10), BBH tracking-shuffled-objects with five
#: objects (5), GSM8K (exact match: 0), HellaSwag (4 endings), TruthfulQA (varies by question: None).
OLLB_OPTIONS: dict[str, int | None] = {
    "mmlu_pro_math_7b": 10,
    "bbh_shuffled_objects_5": 5,
    "tiny_gsm8k": 0,
    "tiny_hellaswag": 4,
    "tiny_truthfulqa": None,
}
OLLB_NAMES: tuple[str, ...] = tuple(OLLB_OPTIONS)
#: The halves of the dev data: defaults are chosen on the tuning half, the report half is only reported.
OLLB_TUNING: tuple[str, ...] = ("mmlu_pro_math_7b", "tiny_gsm8k", "tiny_hellaswag")
OLLB_REPORT: tuple[str, ...] = ("bbh_shuffled_objects_5", "tiny_truthfulqa")


def load_ollb(name: str = "mmlu_pro_math_7b", root: str | os.PathLike[str] | None = None) -> ResponseTable:
    """The Open LLM Leaderboard table ``name`` (one of :data:`OLLB_NAMES`) as a response table
    whose metric is ``ollb/<name>``. Item ids are the file's (question ids or positions), kept as
    strings; there are no token counts (a backtest gives every item the same cost).

    Raises:
        InputError: unknown name, missing or malformed file.
    """
    if name not in OLLB_OPTIONS:
        raise InputError(f"unknown Open LLM Leaderboard table {name!r}; valid names: {', '.join(OLLB_NAMES)}")
    path = data_root(root) / "binary" / f"{name}.csv.gz"
    if not path.is_file():
        raise InputError("required file not found", path=str(path))
    return read_table(path, metric=f"ollb/{name}")

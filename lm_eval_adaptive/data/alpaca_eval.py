"""AlpacaEval: the judge's preference of each model's answer over the reference.

``alpaca_eval/`` under :func:`~lm_eval_adaptive.data.data_root.data_root` holds the items,
the reference answers and one judge file per model; :func:`load_alpaca_eval` turns them into
a response table. No text from the data is stored.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

from lm_eval_adaptive.data.data_root import data_root
from lm_eval_adaptive.data.files import read_jsonl_records
from lm_eval_adaptive.data.responses import ResponseTable
from lm_eval_adaptive.errors import InputError

__all__ = ["ALPACA_METRICS", "load_alpaca_eval"]

# Each metric -> the score of a judge preference (in [1, 2]).
_SCORE_OF: dict[str, Callable[[float], float]] = {
    "judge": lambda pref: float(pref) - 1.0,
    "win": lambda pref: 1.0 if pref > 1.5 else 0.0,
}
#: ``judge``: the judge's preference - 1, in [0, 1]; ``win``: 1 if preference > 1.5 (the model's
#: answer beats the reference, how AlpacaEval's win rate counts it) else 0.
ALPACA_METRICS: tuple[str, ...] = tuple(_SCORE_OF)


def _id_of(record: dict[str, Any], path: Path, number: int) -> int:
    value = record.get("id")
    try:
        if isinstance(value, bool):
            raise TypeError
        ident = int(value)  # type: ignore[arg-type]
        if ident != value and str(ident) != str(value).strip():
            raise ValueError
    except (TypeError, ValueError):
        raise InputError(f"id {value!r} is not an integer", path=str(path), row=number) from None
    return ident


def load_alpaca_eval(
    metric: str = "judge", root: str | os.PathLike[str] | None = None
) -> ResponseTable:
    """AlpacaEval judge scores of 28 models, as a response table.

    ``judge``: score = judge preference - 1, in [0, 1] (1 = the model's answer is
    preferred to the reference). ``win``: score = 1 if preference > 1.5 else 0
    (win/lose, a binary table: how AlpacaEval's win rate is defined).  Models are the files ``judge/<MODEL>.jsonl``
    (sorted), items the ``id`` values (as strings, in numeric order).  Rows
    with a null/NaN preference are skipped.  Token counts are estimated as
    characters / 4 of the instruction (input) and the reference answer (output).

    Raises:
        InputError: unknown metric, missing or malformed files.
    """
    if metric not in ALPACA_METRICS:
        raise InputError(
            f"unknown AlpacaEval metric {metric!r}; valid metrics: {', '.join(ALPACA_METRICS)}"
        )
    base = data_root(root) / "alpaca_eval"
    items_path, ref_path, judge_dir = base / "items.jsonl", base / "reference.jsonl", base / "judge"
    for p in (items_path, ref_path):
        if not p.is_file():
            raise InputError("required file not found", path=str(p))
    judge_files = sorted(judge_dir.glob("*.jsonl")) if judge_dir.is_dir() else []
    if len(judge_files) < 2:
        raise InputError(f"need at least 2 judge files, found {len(judge_files)}",
                         path=str(judge_dir))

    in_len: dict[int, float] = {}
    for number, rec in read_jsonl_records(items_path):
        in_len[_id_of(rec, items_path, number)] = len(str(rec.get("instruction") or "")) / 4.0
    out_len: dict[int, float] = {}
    for number, rec in read_jsonl_records(ref_path):
        out_len[_id_of(rec, ref_path, number)] = len(str(rec.get("output") or "")) / 4.0

    score_of = _SCORE_OF[metric]
    models: list[str] = []
    model_col: list[np.ndarray] = []
    id_col: list[np.ndarray] = []
    score_col: list[np.ndarray] = []
    for path in judge_files:
        ids, prefs = [], []
        for number, rec in read_jsonl_records(path):
            ident = _id_of(rec, path, number)
            if ident not in in_len:
                raise InputError(f"id {ident} is not in items.jsonl", path=str(path), row=number)
            pref = rec.get("preference")
            if pref is None:
                continue
            if isinstance(pref, bool) or not isinstance(pref, (int, float)):
                raise InputError(f"preference {pref!r} is not a number", path=str(path), row=number)
            if math.isnan(pref):
                continue
            if math.isinf(pref):
                raise InputError(f"preference {pref!r} is not finite", path=str(path), row=number)
            ids.append(ident)
            prefs.append(score_of(pref))
        if not ids:
            continue  # a model with no usable judgement contributes nothing
        model_col.append(np.full(len(ids), len(models), dtype=np.int64))
        models.append(path.name[: -len(".jsonl")])
        id_col.append(np.asarray(ids, dtype=np.int64))
        score_col.append(np.asarray(prefs, dtype=np.float64))
    if len(models) < 2:
        raise InputError(f"need at least 2 models with judgements, found {len(models)}",
                         path=str(judge_dir))

    all_ids = np.concatenate(id_col)
    unique_ids, item_idx = np.unique(all_ids, return_inverse=True)
    in_tok = np.array([in_len[i] for i in unique_ids.tolist()], dtype=np.float64)
    out_tok = np.array([out_len.get(i, math.nan) for i in unique_ids.tolist()], dtype=np.float64)
    item_idx = item_idx.astype(np.int64).reshape(-1)
    return ResponseTable(
        models=np.array(models, dtype=object),
        items=np.array([str(i) for i in unique_ids.tolist()], dtype=object),
        model_idx=np.concatenate(model_col),
        item_idx=item_idx,
        score=np.concatenate(score_col),
        input_tokens=in_tok[item_idx],
        output_tokens=out_tok[item_idx],
        source=str(judge_dir),
        metric=f"alpaca_eval/{metric}",
    )

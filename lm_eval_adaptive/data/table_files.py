"""Response-table files read: CSV/TSV, JSON Lines and Parquet, optionally gzip-compressed.

:func:`read_table` reads a long-format table (one row per observation ``(model, item, score)``,
:mod:`lm_eval_adaptive.data.responses`) under the input size limit of
:mod:`lm_eval_adaptive.data.files`. Every problem with the file raises
:class:`~lm_eval_adaptive.errors.InputError` naming the file and, where there is one, the row: an
unknown format, a file that cannot be read, a column (or JSON key) that appears twice, and then
every bad value (:func:`~lm_eval_adaptive.data.responses.table_from_frame`).
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from lm_eval_adaptive.data.files import max_input_bytes, read_bytes, read_text, suffix_of
from lm_eval_adaptive.data.responses import ResponseTable, table_from_frame
from lm_eval_adaptive.data.table_columns import list_columns
from lm_eval_adaptive.errors import InputError

__all__ = ["READ_SUFFIXES", "read_table"]

#: File suffixes :func:`read_table` understands, and the format each means.
READ_SUFFIXES = {
    ".csv": "csv",
    ".csv.gz": "csv",
    ".tsv": "tsv",
    ".tsv.gz": "tsv",
    ".jsonl": "jsonl",
    ".jsonl.gz": "jsonl",
    ".ndjson": "jsonl",
    ".ndjson.gz": "jsonl",
    ".parquet": "parquet",
}


def read_table(
    path: str | os.PathLike[str],
    *,
    metric: str | None = None,
    score_column: str = "score",
    allow_outliers: bool = False,
) -> ResponseTable:
    """Read a long-format response table.

    Formats, by suffix: CSV (``.csv``, ``.csv.gz``), TSV (``.tsv``, ``.tsv.gz``),
    JSON Lines (``.jsonl``, ``.jsonl.gz``, ``.ndjson``) and Parquet (``.parquet``).
    Columns ``model``, ``item`` and the score column are required;
    ``input_tokens`` and ``output_tokens`` are optional (empty = unknown); other
    columns are ignored.  Model names and item ids are kept as strings (``0001``
    stays ``"0001"``).  Repeated ``(model, item)`` rows are several observations.

    Rows in messages: for CSV/TSV the header is row 1 (first data row is row 2);
    for JSON Lines the line number; for Parquet the 1-based data row.

    Args:
        path: the file.
        metric: name of the metric, stored on the table.
        score_column: name of the score column (renamed to ``score``).
        allow_outliers: accept scores far outside the bulk of the table (the rule is
            :mod:`lm_eval_adaptive.data.score_outliers`'); the table remembers it.

    Raises:
        InputError: unreadable file or unknown format, missing or repeated
            column, empty table, missing/non-numeric/infinite score, a score
            far outside the bulk (unless ``allow_outliers``), empty model or
            item, negative or non-numeric token count, fewer than 2 distinct
            models.
    """
    path = Path(path)
    where = str(path)
    suffix = suffix_of(path, tuple(READ_SUFFIXES))
    if suffix is None:
        raise InputError(
            "unknown table format; use one of " + ", ".join(READ_SUFFIXES), path=where
        )
    kind = READ_SUFFIXES[suffix]
    if not path.is_file():
        raise InputError("file not found" if not path.exists() else "not a file", path=where)
    try:
        if kind in ("csv", "tsv"):
            frame, rows = _read_csv(path, sep="\t" if kind == "tsv" else ",")
        elif kind == "jsonl":
            frame, rows = _read_jsonl(path)
        else:
            import pyarrow.parquet as pq

            if path.stat().st_size > max_input_bytes():
                read_bytes(path, what="PARQUET file")  # refused: larger than the input size limit
            _refuse_repeated_columns(pq.read_schema(path).names, where)
            frame = pd.read_parquet(path)
            rows = np.arange(1, len(frame) + 1, dtype=np.int64)
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - any reader failure is bad input
        raise InputError(f"cannot read {kind.upper()} file: {exc}", path=where) from exc

    frame.columns = [str(c).strip() for c in frame.columns]
    _refuse_repeated_columns(frame.columns, where)
    if score_column != "score":
        if score_column not in frame.columns:
            raise InputError(
                f"missing required column {score_column!r}; "
                f"columns found: {list_columns(frame.columns)}",
                path=where,
            )
        frame = frame.drop(columns=[c for c in frame.columns if c == "score"])
        frame = frame.rename(columns={score_column: "score"})
    return table_from_frame(frame, rows, source=where, metric=metric,
                             score_name=score_column, allow_outliers=allow_outliers)


def _read_csv(path: Path, sep: str) -> tuple[pd.DataFrame, np.ndarray]:
    data = read_bytes(path, what="TSV file" if sep == "\t" else "CSV file")  # under the input size limit; .gz inflated in chunks
    frame = pd.read_csv(
        io.BytesIO(data),
        sep=sep,
        dtype=str,
        keep_default_na=False,
        na_filter=False,
        skip_blank_lines=False,
        compression=None,
        encoding="utf-8",
    )
    if len(frame.columns):
        # pandas renames a repeated header name ("score", "score.1"): look at the header itself.
        header = pd.read_csv(io.BytesIO(data), sep=sep, header=None, nrows=1, dtype=str, keep_default_na=False,
                             na_filter=False, compression=None, encoding="utf-8")
        _refuse_repeated_columns(header.iloc[0].tolist() if len(header) else [], str(path))
    rows = np.arange(2, len(frame) + 2, dtype=np.int64)
    if len(frame):
        # Blank lines (and lines of empty fields) are not observations.
        blank = (frame.apply(lambda c: c.str.strip()) == "").all(axis=1).to_numpy()
        if blank.any():
            frame = frame.loc[~blank].reset_index(drop=True)
            rows = rows[~blank]
    return frame, rows


def _read_jsonl(path: Path) -> tuple[pd.DataFrame, np.ndarray]:
    text = read_text(path, what="JSONL file")  # under the input size limit; .gz inflated in chunks
    lines = text.split("\n")
    numbers = np.array([i for i, line in enumerate(lines, 1) if line.strip()], dtype=np.int64)
    if len(numbers) == 0:
        return pd.DataFrame(), numbers
    body = "\n".join(lines[i - 1] for i in numbers)
    try:
        frame = pd.read_json(
            io.StringIO(body), lines=True, dtype=False,
            precise_float=True,
        )
    except ValueError:
        # Find the first bad line for a precise message.
        for i in numbers:
            try:
                value = json.loads(lines[i - 1])
            except json.JSONDecodeError as exc:
                raise InputError(f"invalid JSON: {exc.msg}", path=str(path), row=int(i)) from exc
            if not isinstance(value, dict):
                raise InputError("line is not a JSON object", path=str(path), row=int(i))
        raise
    if len(frame) != len(numbers):
        raise InputError("could not read every line as one JSON object", path=str(path))
    # pandas keeps the last of repeated keys in an object: look for them line by line.
    for i in numbers:
        json.loads(lines[i - 1], object_pairs_hook=lambda pairs, _i=int(i): _refuse_repeated_keys(
            pairs, str(path), _i))
    return frame, numbers


def _refuse_repeated_columns(names: Iterable[Any], source: str) -> None:
    """A column name (surrounding spaces ignored) may appear only once.

    Empty names (trailing separators in a CSV header) are not columns anyone
    reads and may repeat.
    """
    seen: dict[str, int] = {}
    for name in (str(n).strip() for n in names):
        if name:
            seen[name] = seen.get(name, 0) + 1
    repeated = [n for n, count in seen.items() if count > 1]
    if repeated:
        raise InputError(
            f"column {repeated[0]!r} appears {seen[repeated[0]]} times; "
            "each column may appear only once",
            path=source,
        )


def _refuse_repeated_keys(pairs: list[tuple[str, Any]], source: str, row: int) -> dict:
    """``object_pairs_hook``: a JSON object may hold each key (spaces ignored) only once."""
    seen: set[str] = set()
    for key, _ in pairs:
        name = str(key).strip()
        if name and name in seen:
            raise InputError(f"key {name!r} appears more than once in the object; "
                             "each column may appear only once", path=source, row=row)
        seen.add(name)
    return dict(pairs)

"""The columns of a raw response table, parsed and checked value by value.

A reader (:mod:`lm_eval_adaptive.data.table_files`) or a caller
(:meth:`ResponseTable.from_columns <lm_eval_adaptive.data.responses.ResponseTable.from_columns>`)
hands over one row per observation; these functions turn the model and item columns into
stripped strings (:func:`parse_labels`) and the score and token columns into floats
(:func:`parse_numbers`), refusing the first bad value with an
:class:`~lm_eval_adaptive.errors.InputError` that names the source and the row.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import pandas as pd

from lm_eval_adaptive.errors import InputError

__all__ = ["REQUIRED_COLUMNS", "TOKEN_COLUMNS", "parse_labels", "parse_numbers", "factorize", "list_columns"]

#: The columns every table has.
REQUIRED_COLUMNS = ("model", "item", "score")
#: The optional token columns (empty = unknown).
TOKEN_COLUMNS = ("input_tokens", "output_tokens")


def parse_labels(col: pd.Series, name: str, rows: np.ndarray, source: str) -> np.ndarray:
    """Model names / item ids as stripped strings; error on the first empty one."""
    values = col.to_numpy(dtype=object)
    missing = pd.isna(col).to_numpy()
    if col.dtype.kind == "f":
        # JSON numbers with nulls come back as floats: 7.0 -> "7".
        finite = ~missing
        integral = np.zeros(len(values), dtype=bool)
        integral[finite] = np.mod(col.to_numpy()[finite], 1) == 0
        out = col.astype(str).to_numpy(dtype=object)
        if integral.any():
            out[integral] = col.to_numpy()[integral].astype(np.int64).astype(str)
        values = out
    else:
        values = pd.Series(values, dtype=object).astype(str).to_numpy(dtype=object)
    strings = pd.Series(values, dtype=object).str.strip()
    empty = (strings == "").to_numpy() | missing
    if empty.any():
        first = int(np.flatnonzero(empty)[0])
        raise InputError(f"{name} is empty", path=source, row=int(rows[first]))
    return strings.to_numpy(dtype=object)


def parse_numbers(
    col: pd.Series, name: str, rows: np.ndarray, source: str, *, optional: bool
) -> np.ndarray:
    """Parse a numeric column; error on the first bad value.

    Scores must be finite numbers; token counts may be missing (NaN) but must
    otherwise be finite and non-negative.
    """
    if col.dtype.kind in "fiu":
        raw = col.to_numpy()
        parsed = raw.astype(np.float64)
        blank = np.isnan(parsed)
        not_number = np.zeros(len(parsed), dtype=bool)
    else:
        missing = pd.isna(col).to_numpy()
        text = col.astype(str).str.strip()
        text[missing] = ""
        blank = (text == "").to_numpy()
        parsed = np.array(pd.to_numeric(text.where(~blank, None), errors="coerce"), dtype=np.float64)
        nan_words = text.str.lower().isin(["nan", "-nan", "+nan"]).to_numpy()
        not_number = np.isnan(parsed) & ~blank & ~nan_words
        blank = blank | nan_words
        raw = text.to_numpy(dtype=object)
    infinite = np.isinf(parsed)
    if optional:
        negative = parsed < 0
        bad = not_number | infinite | negative
    else:
        negative = np.zeros(len(parsed), dtype=bool)
        bad = not_number | infinite | blank
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        value = raw[i]
        if not_number[i]:
            message = f"{name} {str(value)!r} is not a number"
        elif infinite[i]:
            message = f"{name} {str(value)!r} is not finite"
        elif negative[i]:
            message = f"{name} {str(value)!r} is negative"
        elif isinstance(value, str) and value.strip() == "":
            message = f"{name} is empty"
        else:
            message = f"{name} is missing (NaN)"
        raise InputError(message, path=source, row=int(rows[i]))
    if optional:
        parsed[blank] = np.nan
    return parsed


def factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique values in order of first appearance, and each value's index into them."""
    codes, uniques = pd.factorize(values, sort=False)  # order of first appearance
    return np.asarray(uniques, dtype=object), codes.astype(np.int64)


def list_columns(columns: Iterable[Any]) -> str:
    """Column names for a message: ``'a', 'b'``, or ``(none)``."""
    cols = [str(c) for c in columns]
    return ", ".join(map(repr, cols)) if cols else "(none)"

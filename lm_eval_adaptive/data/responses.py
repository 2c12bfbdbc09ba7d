"""Long-format response tables: one row per (model, item) observation.

A response table holds continuous scores of several models on the items of one
benchmark, in long format: each row is one observation ``(model, item, score)``,
optionally with the number of input and output tokens the item cost.  The same
``(model, item)`` pair may appear several times (repeated samples); pairs may
also be missing.

Files are read with :func:`~lm_eval_adaptive.data.table_files.read_table`
(CSV/TSV, JSON Lines, Parquet, optionally gzip-compressed) and written with
:meth:`ResponseTable.write` (atomically).  A table is built from its raw columns by
:func:`table_from_frame` (the columns parsed by :mod:`lm_eval_adaptive.data.table_columns`);
every problem with the input raises :class:`~lm_eval_adaptive.errors.InputError`
naming the file and, where there is one, the row.

Outlying scores are refused (:func:`check_score_outliers`) by the rule of
:mod:`lm_eval_adaptive.data.score_outliers`, unless ``allow_outliers=True`` (on the
command line ``--allow-outliers``) accepts them as genuine.
"""

from __future__ import annotations

import gzip
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from lm_eval_adaptive.atomic import atomic_write
from lm_eval_adaptive.data.files import suffix_of
from lm_eval_adaptive.data.score_outliers import OUTLIER_FENCE, outlier_fences
from lm_eval_adaptive.data.table_columns import (
    REQUIRED_COLUMNS,
    TOKEN_COLUMNS,
    factorize,
    list_columns,
    parse_labels,
    parse_numbers,
)
from lm_eval_adaptive.errors import InputError

__all__ = ["ResponseTable", "table_from_frame", "check_score_outliers", "as_str_array", "WRITE_SUFFIXES"]

#: File suffixes :meth:`ResponseTable.write` understands.
WRITE_SUFFIXES = (".csv", ".csv.gz", ".jsonl", ".jsonl.gz", ".parquet")


# --------------------------------------------------------------------------- #
# The table
# --------------------------------------------------------------------------- #


@dataclass(frozen=True, eq=False)
class ResponseTable:
    """Scores of several models on the items of one benchmark, in long format.

    Attributes:
        models: unique model names (``dtype=object`` of ``str``), in order of
            first appearance.
        items: unique item ids (``dtype=object`` of ``str``), in order of first
            appearance.
        model_idx: ``int64`` index into :attr:`models`, one per observation.
        item_idx: ``int64`` index into :attr:`items`, one per observation.
        score: ``float64`` score, one per observation.
        input_tokens: ``float64`` input tokens per observation, NaN if unknown.
        output_tokens: ``float64`` output tokens per observation, NaN if unknown.
        source: file path or description, used in messages.
        metric: name of the metric the scores come from, if known.
        outliers_allowed: the scores were accepted without the outlier check
            (``allow_outliers=True``); :func:`calibrate
            <lm_eval_adaptive.engine.irt.calibration.calibrate>` then skips it too.

    Build one with :meth:`from_columns` or :func:`read_table`, which validate
    their input; the plain constructor only checks shapes and index ranges.
    """

    models: np.ndarray
    items: np.ndarray
    model_idx: np.ndarray
    item_idx: np.ndarray
    score: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    source: str = "<memory>"
    metric: str | None = None
    outliers_allowed: bool = False

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "models", as_str_array(self.models))
        set_(self, "items", as_str_array(self.items))
        set_(self, "model_idx", np.asarray(self.model_idx, dtype=np.int64).reshape(-1))
        set_(self, "item_idx", np.asarray(self.item_idx, dtype=np.int64).reshape(-1))
        set_(self, "score", np.asarray(self.score, dtype=np.float64).reshape(-1))
        n = self.model_idx.shape[0]
        for name in TOKEN_COLUMNS:
            value = getattr(self, name)
            arr = (
                np.full(n, np.nan)
                if value is None
                else np.asarray(value, dtype=np.float64).reshape(-1)
            )
            set_(self, name, arr)
        for name in ("item_idx", "score", *TOKEN_COLUMNS):
            if getattr(self, name).shape[0] != n:
                raise InputError(
                    f"column {name} has {getattr(self, name).shape[0]} values, "
                    f"model_idx has {n}",
                    path=self.source,
                )
        for name, size in (("model_idx", len(self.models)), ("item_idx", len(self.items))):
            idx = getattr(self, name)
            if n and (idx.min() < 0 or idx.max() >= size):
                raise InputError(f"{name} out of range [0, {size})", path=self.source)
        for arr in (self.models, self.items, self.model_idx, self.item_idx,
                    self.score, self.input_tokens, self.output_tokens):
            arr.flags.writeable = False

    # ----------------------------------------------------------------- sizes
    @property
    def n_models(self) -> int:
        """Number of distinct models."""
        return int(len(self.models))

    @property
    def n_items(self) -> int:
        """Number of distinct items."""
        return int(len(self.items))

    @property
    def n_obs(self) -> int:
        """Number of observations (rows)."""
        return int(self.score.shape[0])

    def __repr__(self) -> str:
        metric = f", metric={self.metric!r}" if self.metric else ""
        return (
            f"ResponseTable(source={self.source!r}{metric}, n_models={self.n_models}, "
            f"n_items={self.n_items}, n_obs={self.n_obs})"
        )

    # ------------------------------------------------------------ build
    @classmethod
    def from_columns(
        cls,
        model: Sequence[Any] | np.ndarray,
        item: Sequence[Any] | np.ndarray,
        score: Sequence[Any] | np.ndarray,
        input_tokens: Sequence[Any] | np.ndarray | None = None,
        output_tokens: Sequence[Any] | np.ndarray | None = None,
        *,
        source: str = "<memory>",
        metric: str | None = None,
        allow_outliers: bool = False,
    ) -> "ResponseTable":
        """Build a validated table from one value per observation in each column.

        Model names and item ids are converted to ``str``.  Validation is the
        same as :func:`read_table`'s (outlying scores included, unless
        ``allow_outliers``); rows in messages are 1-based positions.

        Raises:
            InputError: on any invalid value (see :func:`read_table`).
        """
        n = len(score)
        columns: dict[str, Any] = {"model": model, "item": item, "score": score}
        if input_tokens is not None:
            columns["input_tokens"] = input_tokens
        if output_tokens is not None:
            columns["output_tokens"] = output_tokens
        for name, values in columns.items():
            if len(values) != n:
                raise InputError(
                    f"column {name} has {len(values)} values, score has {n}", path=source
                )
        frame = pd.DataFrame({k: _as_column(v) for k, v in columns.items()})
        rows = np.arange(1, n + 1, dtype=np.int64)
        return table_from_frame(frame, rows, source=source, metric=metric,
                                 allow_outliers=allow_outliers)

    # ------------------------------------------------------------ matrices
    def _pair_index(self) -> np.ndarray:
        return self.model_idx * self.n_items + self.item_idx

    def count_matrix(self) -> np.ndarray:
        """``(n_models, n_items)`` number of observations of each pair (``int64``)."""
        size = self.n_models * self.n_items
        counts = np.bincount(self._pair_index(), minlength=size)
        return counts.astype(np.int64).reshape(self.n_models, self.n_items)

    def mean_matrix(self) -> np.ndarray:
        """``(n_models, n_items)`` mean score of each pair, NaN where there is none.

        Repeated observations of a pair are averaged.
        """
        size = self.n_models * self.n_items
        flat = self._pair_index()
        sums = np.bincount(flat, weights=self.score, minlength=size)
        counts = np.bincount(flat, minlength=size)
        out = np.full(size, np.nan)
        seen = counts > 0
        out[seen] = sums[seen] / counts[seen]
        return out.reshape(self.n_models, self.n_items)

    def item_tokens(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean input and output tokens of each item over its observations.

        NaN values are ignored; an item with no known value gets NaN.

        Returns:
            ``(input_tokens, output_tokens)``, each of shape ``(n_items,)``.
        """
        return (
            _group_nanmean(self.item_idx, self.input_tokens, self.n_items),
            _group_nanmean(self.item_idx, self.output_tokens, self.n_items),
        )

    # ------------------------------------------------------------ subsets
    def select_models(self, names: Iterable[str]) -> "ResponseTable":
        """Keep only the observations of these models, in the given order.

        The :attr:`items` array is kept unchanged (so item indices stay aligned
        with the full table), even for items left without observations.

        Raises:
            InputError: for an unknown or repeated name, or an empty selection.
        """
        names = [str(n) for n in names]
        if not names:
            raise InputError("no models selected", path=self.source)
        position = {m: i for i, m in enumerate(self.models)}
        unknown = [n for n in names if n not in position]
        if unknown:
            raise InputError(
                f"unknown model(s) {', '.join(map(repr, unknown))}; the table has "
                f"{', '.join(map(repr, self.models))}",
                path=self.source,
            )
        if len(set(names)) != len(names):
            raise InputError("a model is selected more than once", path=self.source)
        remap = np.full(self.n_models, -1, dtype=np.int64)
        remap[[position[n] for n in names]] = np.arange(len(names), dtype=np.int64)
        new_idx = remap[self.model_idx]
        keep = new_idx >= 0
        return ResponseTable(
            models=np.array(names, dtype=object),
            items=self.items,
            model_idx=new_idx[keep],
            item_idx=self.item_idx[keep],
            score=self.score[keep],
            input_tokens=self.input_tokens[keep],
            output_tokens=self.output_tokens[keep],
            source=self.source,
            metric=self.metric,
            outliers_allowed=self.outliers_allowed,
        )

    # ------------------------------------------------------------ output
    def to_frame(self) -> pd.DataFrame:
        """The table as a DataFrame with columns model, item, score, input_tokens, output_tokens."""
        return pd.DataFrame(
            {
                "model": self.models[self.model_idx],
                "item": self.items[self.item_idx],
                "score": np.array(self.score),
                "input_tokens": np.array(self.input_tokens),
                "output_tokens": np.array(self.output_tokens),
            }
        )

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the table; the format follows the suffix of ``path``.

        Suffixes: ``.csv``, ``.csv.gz``, ``.jsonl``, ``.jsonl.gz``, ``.parquet``.
        The file is written to a temporary file in the same directory and then
        renamed over ``path``, so ``path`` is either complete or untouched.
        Gzip output is reproducible (no time stamp or file name in the header).
        Floats are written so that they read back exactly.

        Returns:
            The path written.

        Raises:
            InputError: for an unknown suffix or a missing directory.
        """
        path = Path(path)
        suffix = suffix_of(path, WRITE_SUFFIXES)
        if suffix is None:
            raise InputError(
                f"cannot write this format; use one of {', '.join(WRITE_SUFFIXES)}",
                path=str(path),
            )
        parent = path.parent
        if not parent.is_dir():
            raise InputError(f"directory {str(parent)!r} does not exist", path=str(path))
        if suffix == ".parquet":
            atomic_write(path, lambda f: self.to_frame().to_parquet(f, index=False))
            return path
        data = self._csv_bytes() if suffix.startswith(".csv") else self._jsonl_bytes()
        if suffix.endswith(".gz"):
            data = gzip.compress(data, compresslevel=9, mtime=0)
        atomic_write(path, lambda f: f.write(data))
        return path

    def _csv_bytes(self) -> bytes:
        buf = io.StringIO()
        self.to_frame().to_csv(buf, index=False, lineterminator="\n")
        return buf.getvalue().encode("utf-8")

    def _jsonl_bytes(self) -> bytes:
        if self.n_obs == 0:
            return b""
        models = np.array([json.dumps(m, ensure_ascii=False) for m in self.models], dtype=object)
        items = np.array([json.dumps(i, ensure_ascii=False) for i in self.items], dtype=object)
        lines = (
            '{"model": ' + models[self.model_idx]
            + ', "item": ' + items[self.item_idx]
            + ', "score": ' + _float_json(self.score)
            + ', "input_tokens": ' + _float_json(self.input_tokens)
            + ', "output_tokens": ' + _float_json(self.output_tokens)
            + "}\n"
        )
        return "".join(lines.tolist()).encode("utf-8")


# --------------------------------------------------------------------------- #
# Validation
# --------------------------------------------------------------------------- #


def table_from_frame(
    frame: pd.DataFrame,
    rows: np.ndarray,
    *,
    source: str,
    metric: str | None,
    score_name: str = "score",
    allow_outliers: bool = False,
) -> ResponseTable:
    """Validate a raw frame (one row per observation) and build the table."""
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        names = [score_name if c == "score" else c for c in missing]
        raise InputError(
            f"missing required column{'s' if len(names) > 1 else ''} "
            f"{', '.join(map(repr, names))}; columns found: {list_columns(frame.columns)}",
            path=source,
        )
    if len(frame) == 0:
        raise InputError("the table has no rows", path=source)

    model = parse_labels(frame["model"], "model", rows, source)
    item = parse_labels(frame["item"], "item", rows, source)
    score = parse_numbers(frame["score"], score_name, rows, source, optional=False)
    tokens = {}
    for name in TOKEN_COLUMNS:
        if name in frame.columns:
            tokens[name] = parse_numbers(frame[name], name, rows, source, optional=True)
        else:
            tokens[name] = np.full(len(frame), np.nan)

    models, model_idx = factorize(model)
    items, item_idx = factorize(item)
    if len(models) < 2:
        raise InputError(
            f"need at least 2 distinct models, found {len(models)} ({', '.join(map(repr, models))})",
            path=source,
        )
    table = ResponseTable(
        models=models,
        items=items,
        model_idx=model_idx,
        item_idx=item_idx,
        score=score,
        input_tokens=tokens["input_tokens"],
        output_tokens=tokens["output_tokens"],
        source=source,
        metric=metric,
        outliers_allowed=allow_outliers,
    )
    if not allow_outliers:
        check_score_outliers(table, rows=rows, score_name=score_name)
    return table


def check_score_outliers(
    table: ResponseTable, *, rows: np.ndarray | None = None, score_name: str = "score"
) -> None:
    """Refuse a table with a score far outside the bulk of its scores.

    The rule is the module docstring's.  The message names the table's source,
    the first offending row (``rows[i]`` for observation ``i``; without
    ``rows``, the 1-based observation number), its model, item and value, the allowed range, and how
    many scores in all are outside it.

    Raises:
        InputError: if any score lies outside :func:`outlier_fences`.
    """
    fences = outlier_fences(table.score)
    if fences is None:
        return
    low, high = fences
    bad = (table.score < low) | (table.score > high)
    if not bad.any():
        return
    i = int(np.flatnonzero(bad)[0])
    more = int(bad.sum()) - 1
    what = "" if rows is not None else f"observation {i + 1}: "
    raise InputError(
        f"{what}{score_name} {float(table.score[i])!r} of model {table.models[table.model_idx[i]]!r} "
        f"on item {table.items[table.item_idx[i]]!r} is far outside the other scores "
        f"(allowed: {low:.6g} to {high:.6g}, i.e. P1/P99 -/+ {OUTLIER_FENCE:g} x (P99 - P1))"
        + (f"; {more} more score{'s' if more > 1 else ''} too" if more else "")
        + "; a corrupt value? (allow_outliers / --allow-outliers accepts it)",
        path=table.source,
        row=None if rows is None else int(rows[i]),
    )


# --------------------------------------------------------------------------- #
# Helpers
# --------------------------------------------------------------------------- #


def _group_nanmean(groups: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    known = ~np.isnan(values)
    sums = np.bincount(groups[known], weights=values[known], minlength=n)
    counts = np.bincount(groups[known], minlength=n)
    out = np.full(n, np.nan)
    has = counts > 0
    out[has] = sums[has] / counts[has]
    return out


def as_str_array(values: Any) -> np.ndarray:
    """``values`` flattened to a 1-d object array of str (model and item names)."""
    arr = np.asarray(values, dtype=object).reshape(-1)
    return np.array([str(v) for v in arr], dtype=object) if len(arr) else np.array([], dtype=object)


def _as_column(values: Any) -> Any:
    if isinstance(values, pd.Series):
        return values.reset_index(drop=True)
    arr = np.asarray(values)
    return arr if arr.dtype.kind in "fiub" else np.asarray(values, dtype=object)


def _float_json(values: np.ndarray) -> np.ndarray:
    """Exact (shortest round-trip) JSON text of floats; NaN -> null."""
    text = np.array(list(map(repr, values.tolist())), dtype=object)
    text[np.isnan(values)] = "null"
    return text

"""Dense response matrices: one score per (model, item) cell, NaN where a pair is missing.

A :class:`ResponseMatrix` holds the same information as a long-format
:class:`~lm_eval_adaptive.data.responses.ResponseTable` with at most one observation per
(model, item) pair, stored as an ``(n_models, n_items)`` array.  It is the form for
leaderboard-scale calibration: 5,000 models × 30,000 items is 150 M scores, which a long table
holds in 6 GB (two ``int64`` indices, the ``float64`` score and two token columns per row) and a
``float32`` matrix in 0.6 GB.  Token counts are per item (the mean over models in a long table).

:func:`~lm_eval_adaptive.engine.irt.calibration.calibrate` takes either form; on a matrix it gives
the bank it gives on :meth:`ResponseMatrix.to_table` (up to the rounding of sums taken in another
order).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lm_eval_adaptive.data.responses import ResponseTable, as_str_array
from lm_eval_adaptive.data.score_outliers import OUTLIER_FENCE, OUTLIER_QUANTILE
from lm_eval_adaptive.errors import InputError

__all__ = ["ResponseMatrix", "check_matrix_outliers"]

#: Rows per block when scanning a matrix (keeps temporaries small).
_ROW_BLOCK = 256


@dataclass(frozen=True, eq=False)
class ResponseMatrix:
    """Scores of several models on the items of one benchmark, as a dense matrix.

    Attributes:
        models: unique model names (``dtype=object`` of ``str``), one per row.
        items: unique item ids (``dtype=object`` of ``str``), one per column.
        scores: ``(n_models, n_items)`` ``float32`` or ``float64`` array, NaN where a pair has
            no score; other dtypes are converted to ``float64``. The array is not copied when it
            already has one of these dtypes, and is made read-only.
        input_tokens, output_tokens: ``(n_items,)`` ``float64`` tokens per item, NaN if unknown
            (``None``: all unknown).
        source, metric, outliers_allowed: as for
            :class:`~lm_eval_adaptive.data.responses.ResponseTable`; the outlier check itself is
            :func:`check_matrix_outliers` (run by ``calibrate`` unless ``outliers_allowed``).

    Raises:
        InputError: wrong shape, repeated model or item, an infinite score, no score at all,
            fewer than 2 models.
    """

    models: np.ndarray
    items: np.ndarray
    scores: np.ndarray
    input_tokens: np.ndarray | None = None
    output_tokens: np.ndarray | None = None
    source: str = "<memory>"
    metric: str | None = None
    outliers_allowed: bool = False

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "models", as_str_array(self.models))
        set_(self, "items", as_str_array(self.items))
        scores = np.asarray(self.scores)
        if scores.dtype not in (np.float32, np.float64):
            scores = scores.astype(np.float64)
        M, N = len(self.models), len(self.items)
        if scores.shape != (M, N):
            raise InputError(f"scores have shape {scores.shape}, expected (models, items) = ({M}, {N})",
                             path=self.source)
        if M < 2:
            raise InputError(f"need at least 2 distinct models, found {M}", path=self.source)
        for name, labels in (("model", self.models), ("item", self.items)):
            if len(set(labels.tolist())) != len(labels):
                raise InputError(f"a {name} appears more than once", path=self.source)
        n_obs = 0
        for rows in _blocks(M):
            block = scores[rows]
            if np.isinf(block).any():
                raise InputError("a score is not finite (inf)", path=self.source)
            n_obs += int(np.count_nonzero(~np.isnan(block)))
        if n_obs == 0:
            raise InputError("the table has no scores (every cell is NaN)", path=self.source)
        set_(self, "scores", scores)
        set_(self, "_n_obs", n_obs)
        for name in ("input_tokens", "output_tokens"):
            value = getattr(self, name)
            arr = np.full(N, np.nan) if value is None else np.asarray(value, dtype=np.float64).reshape(-1)
            if arr.shape != (N,):
                raise InputError(f"{name} has {arr.size} values, expected one per item ({N})", path=self.source)
            set_(self, name, arr)
        for arr in (self.models, self.items, self.scores, self.input_tokens, self.output_tokens):
            arr.flags.writeable = False

    @property
    def n_models(self) -> int:
        """Number of models (rows)."""
        return len(self.models)

    @property
    def n_items(self) -> int:
        """Number of items (columns)."""
        return len(self.items)

    @property
    def n_obs(self) -> int:
        """Number of scores (cells that are not NaN)."""
        return self._n_obs

    def __repr__(self) -> str:
        metric = f", metric={self.metric!r}" if self.metric else ""
        return (f"ResponseMatrix(source={self.source!r}{metric}, n_models={self.n_models}, "
                f"n_items={self.n_items}, n_obs={self.n_obs}, dtype={self.scores.dtype})")

    def item_tokens(self) -> tuple[np.ndarray, np.ndarray]:
        """``(input_tokens, output_tokens)`` per item, as ``ResponseTable.item_tokens``."""
        return self.input_tokens.copy(), self.output_tokens.copy()

    def to_table(self) -> ResponseTable:
        """The long-format table of the same scores (row-major order; one row per score)."""
        mi, ii = np.nonzero(~np.isnan(self.scores))
        return ResponseTable(models=self.models, items=self.items, model_idx=mi, item_idx=ii,
                             score=self.scores[mi, ii].astype(np.float64),
                             input_tokens=self.input_tokens[ii], output_tokens=self.output_tokens[ii],
                             source=self.source, metric=self.metric,
                             outliers_allowed=self.outliers_allowed)


def check_matrix_outliers(matrix: ResponseMatrix) -> None:
    """Refuse a matrix with a score far outside the bulk of its scores.

    The rule is :func:`~lm_eval_adaptive.data.score_outliers.outlier_fences`' (the same as for a long
    table; its two order statistics come from one in-place partition of a copy of the scores
    instead of two quantile calls, which is 150 M scores' largest cost); the message names the
    first offending cell in row-major order.

    Raises:
        InputError: if any score lies outside the fences.
    """
    scores = matrix.scores
    present = scores[~np.isnan(scores)] if matrix.n_obs < scores.size else scores.reshape(-1).copy()
    n = present.size
    if n < 3:
        return
    # the order statistics np.quantile(..., method="higher" / "lower") takes, from one partition
    k_lo = min(n - 1, math.ceil(OUTLIER_QUANTILE * (n - 1)))
    k_hi = max(0, math.floor((1.0 - OUTLIER_QUANTILE) * (n - 1)))
    present.partition([k_lo, k_hi] if k_lo < k_hi else [k_hi, k_lo])
    p_lo, p_hi = float(present[k_lo]), float(present[k_hi])
    del present
    spread = p_hi - p_lo
    if not spread > 0:
        return
    low, high = p_lo - OUTLIER_FENCE * spread, p_hi + OUTLIER_FENCE * spread
    first, total = None, 0
    for rows in _blocks(matrix.n_models):
        block = scores[rows]
        bad = (block < low) | (block > high)
        n = int(np.count_nonzero(bad))
        if n and first is None:
            r, c = np.argwhere(bad)[0]
            first = (rows.start + int(r), int(c))
        total += n
    if first is None:
        return
    j, i = first
    more = total - 1
    raise InputError(
        f"score {float(scores[j, i])!r} of model {matrix.models[j]!r} on item {matrix.items[i]!r} "
        f"is far outside the other scores (allowed: {low:.6g} to {high:.6g}, i.e. P1/P99 -/+ "
        f"{OUTLIER_FENCE:g} x (P99 - P1))"
        + (f"; {more} more score{'s' if more > 1 else ''} too" if more else "")
        + "; a corrupt value? (allow_outliers accepts it)",
        path=matrix.source,
    )


def _blocks(n_rows: int, size: int = _ROW_BLOCK):
    for start in range(0, n_rows, size):
        yield slice(start, min(n_rows, start + size))



"""Checks on what the engine is told: scaled scores, raw metric values and costs.

A scaled score must be a real number in [0, 1] and a cost a real number >= 0, both finite.
A NaN score would make θ̂ NaN (and a ranker keep asking for ever); a score outside [0, 1]
drives θ̂ to the edge of the grid. Every path that records a score (``tell``, ``record``,
``record_many``, a replay) calls these first, so a bad value is refused with a
``ValueError`` naming the model, the item and the value, and nothing is changed.
"""

from __future__ import annotations

import math
from numbers import Real

import numpy as np

__all__ = ["check_score", "check_scores", "check_cost", "check_costs", "check_raw"]


def _where(model, item) -> str:
    parts = []
    if model is not None:
        parts.append(f"model {model!r}")
    if item is not None:
        parts.append(f"item {item!r}")
    return ", ".join(parts) + ": " if parts else ""


def _is_real(v) -> bool:
    return isinstance(v, Real) and not isinstance(v, (bool, np.bool_))


def check_score(y, *, model=None, item=None) -> float:
    """``y`` as a float; ValueError unless it is a finite real number in [0, 1]."""
    if not _is_real(y) or not math.isfinite(y) or not (0.0 <= y <= 1.0):
        raise ValueError(f"{_where(model, item)}the scaled score must be a finite number in [0, 1], got {y!r}")
    return float(y)


def check_cost(usd, *, model=None, item=None) -> float | None:
    """``usd`` as a float (None stays None); ValueError unless it is a finite real number >= 0."""
    if usd is None:
        return None
    if not _is_real(usd) or not math.isfinite(usd) or usd < 0:
        raise ValueError(f"{_where(model, item)}a cost must be a finite number >= 0 (USD), got {usd!r}")
    return float(usd)


def check_raw(v, *, model=None, item=None) -> float:
    """A raw metric value as a float; ValueError unless it is a finite real number."""
    if not _is_real(v) or not math.isfinite(v):
        raise ValueError(f"{_where(model, item)}a raw metric value must be a finite number, got {v!r}")
    return float(v)


def _items_at(items, k):
    return items[k] if k < len(items) else None


def check_scores(y, *, model=None, items=()) -> np.ndarray:
    """Vector version of :func:`check_score`: a 1-d float array; the first bad value is named."""
    if np.ndim(y) != 1:
        raise ValueError(f"{_where(model, None)}scores must be a 1-d sequence of numbers")
    raw = np.asarray(y)
    if not isinstance(y, np.ndarray) or raw.dtype.kind not in "iuf":  # lists, bools, strings: one by one
        return np.array([check_score(v, model=model, item=_items_at(items, k)) for k, v in enumerate(y)],
                        dtype=float)
    arr = raw.astype(float)
    bad = np.flatnonzero(~(np.isfinite(arr) & (arr >= 0.0) & (arr <= 1.0)))
    if bad.size:
        k = int(bad[0])
        check_score(float(arr[k]), model=model, item=_items_at(items, k))
    return arr


def check_costs(usd, *, model=None, items=()) -> np.ndarray:
    """Vector version of :func:`check_cost` (None is refused too): a 1-d float array."""
    if np.ndim(usd) != 1:
        raise ValueError(f"{_where(model, None)}costs must be a 1-d sequence of numbers")
    raw = np.asarray(usd)
    if not isinstance(usd, np.ndarray) or raw.dtype.kind not in "iuf":
        out = []
        for k, v in enumerate(usd):
            if v is None:
                raise ValueError(f"{_where(model, _items_at(items, k))}a cost must be a finite number >= 0 "
                                 "(USD), got None")
            out.append(check_cost(v, model=model, item=_items_at(items, k)))
        return np.array(out, dtype=float)
    arr = raw.astype(float)
    bad = np.flatnonzero(~(np.isfinite(arr) & (arr >= 0.0)))
    if bad.size:
        k = int(bad[0])
        check_cost(float(arr[k]), model=model, item=_items_at(items, k))
    return arr

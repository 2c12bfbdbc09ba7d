"""Reproducibility signatures (like sacrebleu's): what produced a result, as a dict and one line.

A signature names everything that decides a run's numbers: the bank (its content hash),
the settings, the seed, the selection / estimation / stopping parts by name, and the
versions of this package and of NumPy. Two results with the same signature came from
the same computation; ``format_signature`` writes it as ``key:value|key:value|...``.
"""

from __future__ import annotations

import numpy as np

from lm_eval_adaptive import __version__

__all__ = ["component_name", "format_signature", "versions"]


def component_name(obj) -> str:
    """The name a part (selector, estimator, rule) reports: its ``name``, else its class or function name."""
    name = getattr(obj, "name", None)
    if isinstance(name, str) and name:
        return name
    if isinstance(obj, type) or callable(obj) and hasattr(obj, "__name__"):
        return str(obj.__name__)
    return type(obj).__name__


def versions() -> dict:
    """The versions that go into every signature."""
    return {"version": __version__, "numpy": np.__version__}


def _fmt(v) -> str:
    if isinstance(v, (list, tuple)):
        return "+".join(_fmt(x) for x in v)
    return str(v)  # floats: the shortest text that reads back as the same number


def format_signature(sig: dict) -> str:
    """One line: ``key:value`` pairs joined by ``|`` in the dict's order (lists joined by ``+``),
    in the style of the backtest's signature."""
    return "|".join(f"{k}:{_fmt(v)}" for k, v in sig.items())

"""The registry of named tables: a name pattern per family of tables -> its loader.

A family is registered with :func:`register_table` (in the style of lm-evaluation-harness's
``register_model``): a pattern such as ``"wmt24/{pair}/{metric}"``, the values each field may
take, and the loader, called with the fields as keyword arguments and ``root=``. Every name the
patterns expand to is in :data:`NAMED_TABLES`, in registration order; :func:`load_named` loads
one, :func:`named_item_field` says which document field of the project's task configs holds its
item ids.

* ``wmt24/<pair>/<metric>`` -- WMT24 BLEU or chrF (:mod:`lm_eval_adaptive.data.wmt24`).
* ``alpaca_eval/<metric>`` -- the AlpacaEval judge (:mod:`lm_eval_adaptive.data.alpaca_eval`).
* ``wmt25/<pair>/<metric>`` -- WMT25 segment metrics (:mod:`lm_eval_adaptive.data.wmt25`).
* ``ollb/<name>`` -- Open LLM Leaderboard 0/1 results (:mod:`lm_eval_adaptive.data.ollb`).
* ``realsumm/<metric>`` -- REALSumm summarization ROUGE (:mod:`lm_eval_adaptive.data.realsumm`).

Only numbers computed from the data (and system names / numeric ids) ever end up in tables
and caches; no text from the data is stored.
"""

from __future__ import annotations

import itertools
import os
import string
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from lm_eval_adaptive.data.alpaca_eval import ALPACA_METRICS, load_alpaca_eval
from lm_eval_adaptive.data.ollb import OLLB_NAMES, load_ollb
from lm_eval_adaptive.data.realsumm import REALSUMM_METRICS, load_realsumm
from lm_eval_adaptive.data.responses import ResponseTable
from lm_eval_adaptive.data.wmt24 import WMT24_METRICS, WMT24_PAIRS, load_wmt24
from lm_eval_adaptive.data.wmt25 import WMT25_METRICS, WMT25_PAIRS, load_wmt25
from lm_eval_adaptive.errors import InputError

__all__ = ["NAMED_TABLES", "TABLE_REGISTRY", "TableFamily", "load_named", "named_item_field",
           "register_table"]

#: A loader: the pattern's fields as keyword arguments, and ``root`` (the data directory).
TableLoader = Callable[..., ResponseTable]


@dataclass(frozen=True)
class TableFamily:
    """One registered family of named tables."""

    pattern: str  #: e.g. ``"wmt24/{pair}/{metric}"``
    choices: Mapping[str, tuple[str, ...]]  #: the values each field of the pattern may take
    loader: TableLoader
    #: The document field of the project's task configs (``task_configs/``) that holds the
    #: family's item ids, or None when the family has no task config.
    item_field: str | None = None

    def names(self) -> dict[str, dict[str, str]]:
        """Every name of the family -> the field values it stands for (fields vary in the
        pattern's order, the last fastest)."""
        fields = [f for _, f, _, _ in string.Formatter().parse(self.pattern) if f]
        out = {}
        for values in itertools.product(*(self.choices[f] for f in fields)):
            kwargs = dict(zip(fields, values))
            out[self.pattern.format(**kwargs)] = kwargs
        return out


#: Name pattern -> its family, in registration order.
TABLE_REGISTRY: dict[str, TableFamily] = {}
# Every name -> (its family, its field values); filled by register_table.
_NAMES: dict[str, tuple[TableFamily, dict[str, str]]] = {}


def register_table(pattern: str, *, item_field: str | None = None,
                   **choices: Iterable[str]) -> Callable[[TableLoader], TableLoader]:
    """Decorator registering a loader for the tables named by ``pattern``.

    Example::

        @register_table("wmt24/{pair}/{metric}", item_field="id",
                        pair=WMT24_PAIRS, metric=WMT24_METRICS)
        def load_wmt24(pair, metric, root=None): ...
    """

    def decorate(loader: TableLoader) -> TableLoader:
        if pattern in TABLE_REGISTRY:
            raise ValueError(f"table pattern {pattern!r} is already registered")
        family = TableFamily(pattern, {k: tuple(v) for k, v in choices.items()}, loader, item_field)
        names = family.names()
        clash = [n for n in names if n in _NAMES]
        if clash:
            raise ValueError(f"table name(s) {', '.join(clash)} already registered")
        TABLE_REGISTRY[pattern] = family
        for name, kwargs in names.items():
            _NAMES[name] = (family, kwargs)
        return loader

    return decorate


# WMT24 items are 0-based line numbers, the ``id`` of a ``wmt24_<pair>`` document (canary lines
# are skipped, so it is not the doc's position); AlpacaEval items are AlpacaEval ids, the ``id``
# of an ``alpaca_eval*`` document. WMT25 has no task config, so no field.
register_table("wmt24/{pair}/{metric}", item_field="id",
               pair=WMT24_PAIRS, metric=WMT24_METRICS)(load_wmt24)
register_table("alpaca_eval/{metric}", item_field="id", metric=ALPACA_METRICS)(load_alpaca_eval)
register_table("wmt25/{pair}/{metric}", pair=WMT25_PAIRS, metric=WMT25_METRICS)(load_wmt25)
# Open LLM Leaderboard 0/1 results (no task config).
register_table("ollb/{name}", name=OLLB_NAMES)(load_ollb)
# REALSumm ROUGE (no task config).
register_table("realsumm/{metric}", metric=REALSUMM_METRICS)(load_realsumm)

#: Every name :func:`load_named` understands.
NAMED_TABLES: tuple[str, ...] = tuple(_NAMES)


def load_named(name: str, root: str | os.PathLike[str] | None = None) -> ResponseTable:
    """Load a table by name, one of :data:`NAMED_TABLES`.

    ``wmt24/<pair>/<metric>`` (e.g. ``wmt24/en-de/bleu``), ``alpaca_eval/judge`` or
    ``wmt25/<pair>/<metric>`` (e.g. ``wmt25/en-de/xcomet``).

    Raises:
        InputError: for an unknown name (the message lists the valid ones).
    """
    key = str(name).strip().strip("/")
    if key not in _NAMES:
        raise InputError(f"unknown table {name!r}; valid names: {', '.join(NAMED_TABLES)}")
    family, kwargs = _NAMES[key]
    return family.loader(**kwargs, root=root)


def named_item_field(name: str) -> str | None:
    """The document field of the project's task configs that holds the item ids of the named
    table ``name`` (one of :data:`NAMED_TABLES`): ``"id"`` for WMT24 and AlpacaEval, None for
    WMT25 (no task config) and for any name that is not a named table."""
    key = str(name).strip().strip("/")
    if key not in _NAMES:
        return None
    return _NAMES[key][0].item_field

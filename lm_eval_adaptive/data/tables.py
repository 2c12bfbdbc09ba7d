"""Response tables by name: a file, a table embedded in the package, or a named real table."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from lm_eval_adaptive.data.named_tables import NAMED_TABLES, load_named, named_item_field
from lm_eval_adaptive.data.files import suffix_of
from lm_eval_adaptive.data.table_files import READ_SUFFIXES, read_table
from lm_eval_adaptive.errors import InputError

__all__ = ["EMBEDDED", "embedded_path", "load_any_table", "table_item_field", "table_stem", "item_field_file",
           "write_item_field"]

EMBEDDED = {
    "wmt24-en-de-chrf": "wmt24_en-de_chrf.csv.gz",
    "alpaca-eval-judge": "alpaca_eval_judge.csv.gz",
}
#: The named table each embedded table was exported from (its item ids are that table's).
EMBEDDED_FROM = {"wmt24-en-de-chrf": "wmt24/en-de/chrf", "alpaca-eval-judge": "alpaca_eval/judge"}


def embedded_path(name: str) -> Path:
    return Path(__file__).parent / EMBEDDED[name]


def load_any_table(spec: str, *, metric: str | None = None, allow_outliers: bool = False):
    """A response table from a file, an embedded table (``embedded:NAME``) or a named real table.

    ``allow_outliers``: accept scores far outside the bulk of the table (see
    :func:`~lm_eval_adaptive.data.table_files.read_table`); the table remembers it.
    """
    if spec.startswith("embedded:"):
        name = spec.split(":", 1)[1]
        if name not in EMBEDDED:
            raise InputError(f"unknown embedded table {name!r}; choose one of {', '.join(EMBEDDED)}")
        return read_table(embedded_path(name), metric=metric or name, allow_outliers=allow_outliers)
    p = Path(spec)
    if p.exists():
        return read_table(p, metric=metric or table_stem(p), allow_outliers=allow_outliers)
    if spec in NAMED_TABLES:
        table = load_named(spec)
        return dataclasses.replace(table, outliers_allowed=True) if allow_outliers else table
    raise InputError(f"no such file, and not a named table ({', '.join(NAMED_TABLES)}) "
                     f"nor embedded:{{{','.join(EMBEDDED)}}}", path=spec)


def table_stem(path: Path) -> str:
    """A table file's label: its whole name less the format's suffix (``wmt23.en-ja.bleu.csv.gz`` →
    ``wmt23.en-ja.bleu``), so that tables whose names share a first dotted part stay apart (issue 32)."""
    suffix = suffix_of(path, tuple(READ_SUFFIXES))
    return path.name[:-len(suffix)] if suffix else path.name


def table_item_field(spec: str) -> str | None:
    """The document field that holds the item ids of the table ``spec`` names, when the table
    says so: a named real table or an embedded one (see
    :func:`~lm_eval_adaptive.data.named_tables.named_item_field`), or a file ``export-table`` wrote
    (the field it recorded beside it, :func:`item_field_file`). None for another file (its ids may be
    anything; an existing file always wins over a name) and for tables with no task config."""
    if spec.startswith("embedded:"):
        return named_item_field(EMBEDDED_FROM.get(spec.split(":", 1)[1], ""))
    if Path(spec).exists():
        return _recorded_item_field(Path(spec))
    return named_item_field(spec)


def item_field_file(table_path) -> Path:
    """Where ``export-table`` records the item field of the table it wrote: ``<table>.item_field.json``
    beside it (a CSV or JSONL file has no room for it)."""
    p = Path(table_path)
    return p.with_name(p.name + ".item_field.json")


def write_item_field(table_path, item_field: str, source: str) -> Path | None:
    """Record beside ``table_path`` the document field that holds its item ids (``source``: the named
    table it came from), for ``leaderboard`` and ``calibrate`` to read (:func:`table_item_field`)."""
    from lm_eval_adaptive.atomic import write_json  # noqa: PLC0415 - writing only

    return write_json(item_field_file(table_path), {"item_field": item_field, "exported_from": source})


def _recorded_item_field(path: Path) -> str | None:
    """The item field ``export-table`` recorded beside the file ``path``, else None (its ids may be anything)."""
    side = item_field_file(path)
    if not side.is_file():
        return None
    try:
        field = json.loads(side.read_text(encoding="utf-8")).get("item_field")
    except (OSError, ValueError, AttributeError) as e:
        raise InputError(f"cannot read the item field recorded beside the table: {e}", path=str(side)) from None
    if not isinstance(field, str) or not field:
        raise InputError("the recorded item field must be a non-empty string", path=str(side))
    return field

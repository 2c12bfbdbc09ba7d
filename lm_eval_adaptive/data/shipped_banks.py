"""The item banks that ship with the package: their names, the task and metric of each, their files.

Every task config of the project's own data (``task_configs/wmt24``, ``task_configs/alpaca_eval``)
has a bank per metric a recorded table gives, built by ``benchmarks/build_banks.py`` from
``../shared/data`` (numbers only: ids, difficulties, ranges, token counts) and stored as
gzip-compressed bank JSON in ``lm_eval_adaptive/banks/<NAME>.json.gz``. A bank's name is
``<task>.<metric>``, e.g. ``wmt24_en-de.bleu``.

The banks are a registry in the harness's ``register_model`` style (like the named tables of
:mod:`lm_eval_adaptive.data.named_tables`): :func:`register_banks` adds a family of banks (a name
pattern, the named table, harness task and metric each name stands for, and the values the
pattern's fields take), refusing a name registered twice and a table that is not a named table.
:data:`BANK_REGISTRY` maps every name to its :class:`ShippedBank`; :func:`shipped_bank` looks a
name up (None when it is not one), :func:`get_shipped_bank` does the same but refuses an unknown
name, listing the registered ones.

This module only knows names and files; turning a file into an
:class:`~lm_eval_adaptive.engine.irt.bank.ItemBank` is
:func:`lm_eval_adaptive.harness.bank_source.load_bank`'s.
"""

from __future__ import annotations

import gzip
import io
import itertools
import json
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from lm_eval_adaptive.atomic import atomic_write
from lm_eval_adaptive.data.files import read_json
from lm_eval_adaptive.data.named_tables import NAMED_TABLES
from lm_eval_adaptive.data.wmt24 import WMT24_METRICS, WMT24_PAIRS
from lm_eval_adaptive.errors import BankError, InputError

__all__ = ["BANKS_DIR", "BANK_REGISTRY", "SHIPPED_BANKS", "ShippedBank", "register_banks", "shipped_bank",
           "get_shipped_bank", "shipped_names", "shipped_for_task", "read_bank_json", "write_bank_json"]

#: Where the shipped bank files are (package data).
BANKS_DIR = Path(__file__).resolve().parents[1] / "banks"


@dataclass(frozen=True)
class ShippedBank:
    """One shipped bank: its name, the named table it is calibrated on, its harness task and metric."""

    name: str
    table: str
    task: str
    metric: str

    @property
    def path(self) -> Path:
        """The bank's file (read :data:`BANKS_DIR` when asked, so a test can point it elsewhere)."""
        return BANKS_DIR / f"{self.name}.json.gz"


#: Every registered bank's name -> the bank, in registration order.
BANK_REGISTRY: dict[str, ShippedBank] = {}


def register_banks(name: str, *, table: str, task: str, metric: str,
                   fields: Mapping[str, Iterable[str]] | None = None) -> tuple[ShippedBank, ...]:
    """Register the shipped banks that ``name`` expands to, and return them.

    ``name``, ``table``, ``task`` and ``metric`` are patterns over the fields of ``name``, each field
    taking the values ``fields`` gives it (the last field varies fastest)::

        register_banks("wmt24_{pair}.{metric}", table="wmt24/{pair}/{metric}", task="wmt24_{pair}",
                       metric="{metric}", fields={"pair": WMT24_PAIRS, "metric": WMT24_METRICS})

    A name without fields registers one bank.

    Raises:
        ValueError: a name already registered (naming it), a table that is not a named table
            (listing them), a field of ``name`` without values or values for no field of it.
    """
    choices = dict(fields or {})
    names = [f for _, f, _, _ in string.Formatter().parse(name) if f]
    if sorted(names) != sorted(choices):
        raise ValueError(f"bank pattern {name!r}: fields {', '.join(names) or '(none)'}; "
                         f"values given for {', '.join(choices) or '(none)'}")
    banks = []
    for values in itertools.product(*(tuple(choices[f]) for f in names)):
        kw = dict(zip(names, values))
        bank = ShippedBank(name.format(**kw), table.format(**kw), task.format(**kw), metric.format(**kw))
        if bank.name in BANK_REGISTRY or any(b.name == bank.name for b in banks):
            raise ValueError(f"shipped bank {bank.name!r} is already registered")
        if bank.table not in NAMED_TABLES:
            raise ValueError(f"shipped bank {bank.name!r}: {bank.table!r} is not a named table; named tables: "
                             f"{', '.join(NAMED_TABLES)}")
        banks.append(bank)
    for bank in banks:
        BANK_REGISTRY[bank.name] = bank
    return tuple(banks)


# Every WMT24 pair × BLEU/chrF, and the AlpacaEval judge for both task configs that give it
# (``alpaca_eval_judge`` and ``alpaca_eval``; ``alpaca_eval_rouge_l`` has no recorded table, so no bank).
register_banks("wmt24_{pair}.{metric}", table="wmt24/{pair}/{metric}", task="wmt24_{pair}", metric="{metric}",
               fields={"pair": WMT24_PAIRS, "metric": WMT24_METRICS})
register_banks("alpaca_eval_judge.judge", table="alpaca_eval/judge", task="alpaca_eval_judge", metric="judge")
register_banks("alpaca_eval.judge", table="alpaca_eval/judge", task="alpaca_eval", metric="judge")

#: Every bank registered when this module is imported, in registration order.
SHIPPED_BANKS: tuple[ShippedBank, ...] = tuple(BANK_REGISTRY.values())


def shipped_names() -> list[str]:
    """The names of every registered bank, in registration order."""
    return list(BANK_REGISTRY)


def _key(name: str) -> str:
    key = str(name).strip()
    for suffix in (".json.gz", ".json"):
        key = key.removesuffix(suffix)
    return key


def shipped_bank(name: str) -> ShippedBank | None:
    """The shipped bank called ``name`` (``wmt24_en-de.bleu``; a trailing ``.json.gz`` or ``.json``
    is allowed), else None."""
    return BANK_REGISTRY.get(_key(name))


def get_shipped_bank(name: str) -> ShippedBank:
    """The shipped bank called ``name``, as :func:`shipped_bank` finds it.

    Raises:
        InputError: for a name that is not a shipped bank's (the message lists the registered ones).
    """
    bank = shipped_bank(name)
    if bank is None:
        raise InputError(f"unknown shipped bank {name!r}; shipped: {', '.join(BANK_REGISTRY)}")
    return bank


def shipped_for_task(task: str, metric: str | None = None) -> list[ShippedBank]:
    """The shipped banks of harness task ``task`` (of ``metric`` only, when given)."""
    return [b for b in BANK_REGISTRY.values() if b.task == task and (metric is None or b.metric == metric)]


def read_bank_json(path) -> dict:
    """The JSON object of a bank file, plain or gzip-compressed (``.gz``), read under the input size
    limit (:mod:`lm_eval_adaptive.data.files`); BankError naming the file when it is missing,
    corrupt, too large or not JSON."""
    path = Path(path)
    if not path.is_file():
        raise BankError("item bank file not found", path=str(path))
    try:
        return read_json(path, what="item bank")
    except BankError:
        raise
    except InputError as e:
        raise BankError(str(e).removeprefix(f"{e.path}: "), path=e.path) from None


def write_bank_json(path, bank_dict: dict) -> Path:
    """Write a bank's JSON object gzip-compressed, byte for byte the same for the same object (no
    time stamp or file name in the gzip header), atomically."""
    path = Path(path)
    text = json.dumps(bank_dict, separators=(",", ":"), allow_nan=False).encode("utf-8")
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        gz.write(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = buf.getvalue()
    atomic_write(path, lambda f: f.write(data))
    return path

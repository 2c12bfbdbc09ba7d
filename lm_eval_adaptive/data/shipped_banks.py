"""The item banks that ship with the package: their names, the task and metric of each, their files.

Every task config of the project's own data (``task_configs/wmt24``, ``task_configs/alpaca_eval``)
has a bank per metric a recorded table gives, built by ``benchmarks/build_banks.py`` from
``../shared/data`` (numbers only: ids, difficulties, ranges, token counts) and stored as
gzip-compressed bank JSON in ``lm_eval_adaptive/banks/<NAME>.json.gz``. A bank's name is
``<task>.<metric>``, e.g. ``wmt24_en-de.bleu``.

This module only knows names and files; turning a file into an
:class:`~lm_eval_adaptive.engine.bank.ItemBank` is
:func:`lm_eval_adaptive.harness.bank_source.load_bank`'s.
"""

from __future__ import annotations

import gzip
import io
import json
from dataclasses import dataclass
from pathlib import Path

from lm_eval_adaptive.atomic import atomic_write
from lm_eval_adaptive.data.wmt24 import WMT24_METRICS, WMT24_PAIRS
from lm_eval_adaptive.data.files import read_json
from lm_eval_adaptive.errors import BankError, InputError

__all__ = ["BANKS_DIR", "SHIPPED_BANKS", "ShippedBank", "shipped_bank", "shipped_names", "shipped_for_task",
           "read_bank_json", "write_bank_json"]

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


#: Every shipped bank: each WMT24 pair × BLEU/chrF, and the AlpacaEval judge for both task
#: configs that give it (``alpaca_eval_judge`` and ``alpaca_eval``; ``alpaca_eval_rouge_l`` has no
#: recorded table, so no bank).
SHIPPED_BANKS: tuple[ShippedBank, ...] = tuple(
    ShippedBank(f"wmt24_{pair}.{metric}", f"wmt24/{pair}/{metric}", f"wmt24_{pair}", metric)
    for pair in WMT24_PAIRS for metric in WMT24_METRICS
) + (
    ShippedBank("alpaca_eval_judge.judge", "alpaca_eval/judge", "alpaca_eval_judge", "judge"),
    ShippedBank("alpaca_eval.judge", "alpaca_eval/judge", "alpaca_eval", "judge"),
)


def shipped_names() -> list[str]:
    return [b.name for b in SHIPPED_BANKS]


def shipped_bank(name: str) -> ShippedBank | None:
    """The shipped bank called ``name`` (``wmt24_en-de.bleu``; a trailing ``.json.gz`` or ``.json``
    is allowed), else None."""
    key = str(name).strip()
    for suffix in (".json.gz", ".json"):
        key = key.removesuffix(suffix)
    return next((b for b in SHIPPED_BANKS if b.name == key), None)


def shipped_for_task(task: str, metric: str | None = None) -> list[ShippedBank]:
    """The shipped banks of harness task ``task`` (of ``metric`` only, when given)."""
    return [b for b in SHIPPED_BANKS if b.task == task and (metric is None or b.metric == metric)]


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

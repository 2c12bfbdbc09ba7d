"""Build the item banks that ship with the package (``lm_eval_adaptive/banks/``) from ``../shared/data``.

One bank per entry of :data:`lm_eval_adaptive.data.shipped_banks.SHIPPED_BANKS` (every WMT24 pair ×
BLEU/chrF, the AlpacaEval judge for ``alpaca_eval_judge`` and ``alpaca_eval``): its named table
(``wmt24/en-de/bleu`` …, every recorded system) calibrated exactly as ``lm-eval-adaptive calibrate``
calibrates it (``calibrate_checked``: the default calibration, then the bank's self-check and the
model error it measures), for the shipped task and metric, recording the document field its item
ids are values of (``calibration.item_field``: ``id``), so ``run``/``rank`` map it without
``--item-field``. Only numbers (and system names, item ids) go into a bank; no data text.

The files are gzip-compressed bank JSON, byte for byte the same when built again from the same data
(the calibration and the self-check are seeded; the source is named by the table's name, not a
path; the gzip header has no time stamp).

    python benchmarks/build_banks.py                                   # every shipped bank, in place
    python benchmarks/build_banks.py --only wmt24_en-de.bleu --exclude-models Mistral-Large --out /tmp/b
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from lm_eval_adaptive import __version__
from lm_eval_adaptive.data import shipped_banks
from lm_eval_adaptive.data.named_tables import load_named
from lm_eval_adaptive.data.tables import table_item_field
from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.evaluation.self_check import calibrate_checked
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness.binding import record_item_field

__all__ = ["build_bank", "bank_file_dict", "write_bank", "build", "main"]


def build_bank(name: str, *, exclude=(), root=None) -> ItemBank:
    """The shipped bank ``name`` built from the data (``root``: the data folder, default as
    :func:`~lm_eval_adaptive.data.data_root.data_root`), without the models in ``exclude``."""
    spec = shipped_banks.get_shipped_bank(name)  # InputError listing the shipped names when unknown
    table = load_named(spec.table, root=root)
    exclude = [str(m) for m in exclude]
    names = [str(m) for m in table.models]
    unknown = [m for m in exclude if m not in names]
    if unknown:
        raise InputError(f"--exclude-models: not in {spec.table}: {', '.join(unknown)}")
    if exclude:
        table = table.select_models([m for m in names if m not in exclude])
    bank = calibrate_checked(table, task=spec.task, metric=spec.metric)
    bank.calibration["source"] = f"{spec.table} (lm-eval-adaptive data folder)"  # not a machine's path
    bank.calibration["table"] = spec.table
    return record_item_field(bank, table_item_field(spec.table))


def bank_file_dict(bank: ItemBank) -> dict:
    """The bank file's JSON object, as :meth:`ItemBank.save` writes it."""
    return {**bank.to_dict(), "bank_id": bank.bank_id, "created_by": f"lm-eval-adaptive {__version__}"}


def write_bank(bank: ItemBank, path) -> Path:
    return shipped_banks.write_bank_json(path, bank_file_dict(bank))


def build(names=None, *, out=None, exclude=(), root=None, log=print) -> list[Path]:
    """Build the banks ``names`` (default: every shipped one) into the folder ``out`` (default: the
    package's ``banks/``) as ``<name>.json.gz``; the paths written."""
    out = Path(out) if out is not None else shipped_banks.BANKS_DIR
    written = []
    for name in names or shipped_banks.shipped_names():
        t0 = time.perf_counter()
        bank = build_bank(name, exclude=exclude, root=root)
        path = write_bank(bank, out / f"{shipped_banks.shipped_bank(name).name}.json.gz")
        log(f"{path}: {bank.task}/{bank.metric} {bank.n_items} items ({len(bank.dropped)} dropped), "
            f"{len(bank.calibration['models'])} models, {bank.bank_id}, {path.stat().st_size:,} bytes, "
            f"{time.perf_counter() - t0:.1f} s")
        written.append(path)
    return written


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="+", default=None, metavar="NAME", help="build these shipped banks only")
    p.add_argument("--out", default=None, help="folder to write to (default: lm_eval_adaptive/banks/)")
    p.add_argument("--exclude-models", nargs="+", default=(), metavar="MODEL",
                   help="leave these systems out of every bank built (e.g. one to test on)")
    p.add_argument("--data", default=None, help="data folder (default: $LM_EVAL_ADAPTIVE_DATA or ../shared/data)")
    args = p.parse_args(argv)
    try:
        build(args.only, out=args.out, exclude=args.exclude_models, root=args.data)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

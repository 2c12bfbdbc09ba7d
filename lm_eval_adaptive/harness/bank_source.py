"""Which item bank a task runs on: ``--bank`` (a file or a shipped bank's name), or a task's shipped bank.

The one resolution ``run --adaptive`` and ``rank`` share (``refresh`` takes its bank from the
leaderboard):

* ``--bank [TASK=]SPEC``: ``SPEC`` is a bank file (``.json``, or gzip-compressed ``.json.gz``)
  or the name of a bank shipped with the package (``wmt24_en-de.bleu``; see
  :mod:`lm_eval_adaptive.data.shipped_banks`). An existing file wins over a name. A bare
  shipped name also says its task, so with several tasks ``--bank wmt24_en-de.bleu
  wmt24_en-es.bleu`` needs no ``TASK=``.
* several banks for one task (``run --adaptive`` and ``rank``: ``--bank wmt24_en-de.bleu
  wmt24_en-de.chrf``, or ``TASK=SPEC`` given twice): a multi-metric run, one bank per metric,
  each generation scored with every one of them.
* no bank for a task: when exactly one shipped bank fits the task (and ``--metric``, when
  given) it is taken, and the caller's ``note`` is told so (the command prints it on stderr);
  when several fit (WMT24: BLEU and chrF) the run is refused, naming them.
* an unknown name (neither a file nor a shipped bank): refused before anything is loaded, with the
  closest shipped names or bank files (``did you mean wmt24_en-de.bleu?``) and the shipped names.
* ``--metric`` that the task does not have (its YAML under ``--include_path`` says which it has):
  refused as such, listing the task's metrics.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import NamedTuple

from lm_eval_adaptive.data.shipped_banks import (
    read_bank_json,
    shipped_bank,
    shipped_for_task,
    shipped_names,
)
from lm_eval_adaptive.engine.anytime.small_bank import BankUse, bank_use_of
from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.errors import BankError, InputError
from lm_eval_adaptive.harness.task_files import yaml_task_metrics

__all__ = ["parse_banks", "load_bank", "small_bank", "RejectedBank", "bank_reference", "unknown_bank", "check_task_metric"]


def unknown_bank(spec: str) -> str:
    """What to say of a ``--bank`` value that is neither a file nor a shipped bank's name: the closest
    shipped names or bank files beside it, then every shipped name."""
    spec = str(spec)
    names = list(shipped_names())
    parent = Path(spec).parent
    files = []
    try:
        if parent.is_dir():
            files = [str(parent / f.name) if str(parent) != "." else f.name for f in parent.iterdir()
                     if f.name.endswith((".json", ".json.gz"))][:1000]
    except OSError:
        pass
    ratio = {c: difflib.SequenceMatcher(None, spec, c).ratio() for c in names + files}
    close = [c for c in difflib.get_close_matches(spec, list(ratio), n=3, cutoff=0.6)
             if ratio[c] >= max(ratio.values()) - 0.02]  # the best match, and any as close as it
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    return f"--bank {spec!r}: item bank file not found, nor a shipped bank's name{hint} (shipped: {', '.join(names)})"


def parse_banks(specs, tasks, *, metric: str | None = None, command: str = "--adaptive", note=None,
                several: bool = False, include_path=None, bank_free: bool = False) -> dict:
    """Task → bank spec (a path or a shipped name) from ``--bank [TASK=]SPEC ...`` and the tasks'
    shipped banks; nothing is read yet. Refused: a task with no bank and no single shipped one, a
    bank for a task not run, a task given two banks. ``note(line)`` is told each shipped bank taken
    without ``--bank`` (the command line prints it on stderr; without ``note`` it is not said).

    ``several``: a task may be given several banks (one per metric: a multi-metric run); every
    value is then a list of specs (one item when a task has one bank). A spec that is neither a file
    nor a shipped bank's name is refused here (:func:`unknown_bank`); so is a ``--metric`` the task's
    YAML under ``include_path`` does not list.

    ``bank_free``: a task with no bank given and none shipped for it is not refused; its value is None
    (the caller runs it without a bank: docs/cold-start.md)."""
    out: dict = {}
    unknown: list = []
    for s in specs or ():
        s = str(s)
        named = None if Path(s).exists() else shipped_bank(s)
        if "=" in s and not Path(s).exists():
            t, p = s.split("=", 1)
            if not Path(p).exists() and shipped_bank(p) is None:
                unknown.append(p)  # refused once the command line's form is known to be right
        elif named is None and not Path(s).exists():
            if len(tasks) != 1:  # the form first: which task is it for?
                raise InputError(f"--bank {s!r}: with several tasks write TASK=PATH")
            raise InputError(unknown_bank(s))
        elif named is not None and (len(tasks) != 1 or named.task in tasks):
            t, p = named.task, s
        elif len(tasks) == 1:
            t, p = tasks[0], s
        else:
            raise InputError(f"--bank {s!r}: with several tasks write TASK=PATH")
        if t in out and not several:
            raise InputError(f"--bank: task {t!r} is given two banks")
        if t in out and p in out[t]:
            raise InputError(f"--bank: task {t!r} is given the bank {p!r} twice")
        out.setdefault(t, []).append(p)
    extra = [t for t in out if t not in tasks]
    if extra:
        raise InputError(f"--bank names task(s) not in --tasks: {', '.join(extra)}")
    missing = []
    for t in tasks:
        if t in out:
            continue
        fits = shipped_for_task(t, metric)
        if not fits and metric:
            check_task_metric(t, metric, include_path)
        if len(fits) == 1:
            out[t] = [fits[0].name]
            if note is not None:
                note(f"{t}: no --bank given; using the shipped bank {fits[0].name} (metric {fits[0].metric})")
        elif fits:
            raise InputError(f"{command} needs an item bank for task {t!r}: no --bank given, and several shipped "
                             f"banks fit it ({', '.join(b.name for b in fits)}): name one (--bank {fits[0].name}) "
                             "or give --metric")
        else:
            missing.append(t)
    if missing and bank_free:
        out.update({t: None for t in missing})
        missing = []
    if missing and not specs:
        raise InputError(f"{command} needs an item bank per task: --bank TASK=BANK.json or a shipped bank's "
                         f"name ({', '.join(shipped_names())}); build one with `lm-eval-adaptive calibrate "
                         "--samples ...`")
    if missing:
        raise InputError(f"no --bank for task(s): {', '.join(missing)}")
    if unknown:
        raise InputError(unknown_bank(unknown[0]))
    return out if several else {t: (v[0] if v else None) for t, v in out.items()}


def check_task_metric(task: str, metric: str, include_path, *, what: str | None = None) -> None:
    """Refuse ``metric`` (named by ``what``, default ``--metric``) when the task's YAML under
    ``include_path`` lists its metrics without it (nothing is loaded; a task not found there is not
    checked here)."""
    have = yaml_task_metrics(task, include_path)
    if have is not None and metric not in have:
        raise InputError(f"{what or f'--metric {metric}'}: task {task!r} has no metric {metric!r} (its "
                         f"metrics: {', '.join(have)})")


def load_bank(spec) -> ItemBank:
    """The bank ``spec`` names: an :class:`ItemBank` as it is, a bank file (``.json`` or
    ``.json.gz``), or a shipped bank's name; BankError naming it otherwise, listing the shipped
    names when it is neither a file nor one of them."""
    if isinstance(spec, ItemBank):
        return spec
    path = Path(spec)
    if not path.exists():
        named = shipped_bank(str(spec))
        if named is None:
            raise BankError(unknown_bank(str(spec)))
        return ItemBank.from_dict(read_bank_json(named.path), source=f"shipped bank {named.name} ({named.path})")
    if path.name.endswith(".gz"):
        return ItemBank.from_dict(read_bank_json(path), source=str(path))
    return ItemBank.load(path)


class RejectedBank(NamedTuple):
    """A bank the bank-use rule rejects: the rule's :class:`~lm_eval_adaptive.engine.anytime.small_bank.BankUse`
    (why) and the bank's metric (what the bank-free run ranks by, unless ``--metric`` says)."""

    use: BankUse
    metric: str | None


def small_bank(specs, *, what: str = "estimating") -> RejectedBank | None:
    """A :class:`RejectedBank` (the rule's verdict and the bank's metric) when ``specs`` is one
    bank the bank-use rule rejects (calibrated from too few models, or for ``rank`` a self-check that ranked below
    shared random documents: docs/cold-start.md, *A small history*), else None
    (several banks, one per metric, are used as given)."""
    specs = specs if isinstance(specs, (list, tuple)) else [specs]
    if len(specs) != 1 or specs[0] is None:
        return None
    bank = load_bank(specs[0])
    use = bank_use_of(bank, what=what)
    return None if use.use_bank else RejectedBank(use, bank.metric)


def bank_reference(spec) -> str:
    """How a run's settings name its bank: a shipped bank by its name, a file by its absolute path."""
    spec = str(spec)
    if not Path(spec).exists() and shipped_bank(spec) is not None:
        return spec
    return str(Path(spec).resolve())

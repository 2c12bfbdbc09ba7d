"""The history a task grows by itself (issue 31 item 4; docs/cold-start.md): ``calibrate --samples`` reads
the journals of ``rank`` runs made with no bank beside harness sample logs, missing cells allowed.

A bank-free ``rank`` asks every model the task's documents in one uniformly random order (seeded before any
score is seen) and stops on what it has seen: which documents a model answered depends only on the random
order and on the answers already observed, so its missing cells are *missing at random* and a likelihood
fit of the item parameters over the cells present is unbiased for them (the same holds for the sample logs
of a ``run --adaptive`` with no bank: :func:`~lm_eval_adaptive.harness.sample_logs.sample_log_columns`).
A banked ``rank``'s journal is not read: its documents were picked by the bank's own predictions, and the
item ranges a calibration fits would be fitted on the documents each bank found informative.

Each journal's scores are the raw metric values it recorded (``raw``), its items the harness doc ids, its
models the names the run gave them, its tokens the usage the provider reported.
"""

from __future__ import annotations

from pathlib import Path

from lm_eval_adaptive.data.responses import ResponseTable
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness.bank_free_run import BANK_FREE
from lm_eval_adaptive.harness.binding import SAMPLE_LOGS_SOURCE
from lm_eval_adaptive.harness.sample_logs import sample_log_columns
from lm_eval_adaptive.live.journal import JOURNAL_NAME, Journal

__all__ = ["is_run_journal", "journal_columns", "table_from_history"]


def is_run_journal(path) -> bool:
    """Whether ``path`` is a run's journal, or a run folder holding one."""
    p = Path(path)
    return (p.is_file() and p.name == JOURNAL_NAME) or (p.is_dir() and (p / JOURNAL_NAME).is_file())


def journal_columns(path, *, task: str, metric: str) -> tuple[list, ...]:
    """(model, item, score, input tokens, output tokens) of a bank-free ``rank`` journal's scores; an
    InputError naming the journal when it is of another task or metric, or of a banked run."""
    folder = Path(path).parent if Path(path).is_file() else Path(path)
    with Journal.open(folder, writable=False) as j:
        head = j.header
        settings = head.get("settings") or {}
        where = str(folder / JOURNAL_NAME)
        if head.get("mode") != BANK_FREE:
            raise InputError("a banked run's journal (its documents were picked by the bank): only the journals "
                             "of runs with no bank, whose documents are in random order, are history",
                             path=where)
        if head.get("task") != task:
            raise InputError(f"the journal is of task {head.get('task')!r}, not {task!r}", path=where)
        if settings.get("metric") != metric:
            raise InputError(f"the journal scored metric {settings.get('metric')!r}, not {metric!r}", path=where)
        model, item, score, itok, otok = [], [], [], [], []
        for rec in j.records("score"):
            usage = rec.get("usage") or []
            model.append(str(rec["model"]))
            item.append(str(rec["item_id"]))
            score.append(float(rec["raw"]))
            itok.append(float(sum((u or {}).get("prompt_tokens") or 0 for u in usage)))
            otok.append(float(sum((u or {}).get("completion_tokens") or 0 for u in usage)))
    return model, item, score, itok, otok


def table_from_history(paths, *, task: str, metric: str, allow_outliers: bool = False) -> ResponseTable:
    """One response table from harness sample logs (full runs, and ``run --adaptive`` with no bank) and
    bank-free ``rank`` journals (a ``journal.jsonl`` or its run folder), missing cells allowed; items are
    harness doc ids."""
    cols: list[list] = [[], [], [], [], []]
    journals = [p for p in paths if is_run_journal(p)]
    logs = [p for p in paths if not is_run_journal(p)]
    for p in journals:
        for c, v in zip(cols, journal_columns(p, task=task, metric=metric)):
            c += v
    if logs:
        for c, v in zip(cols, sample_log_columns(logs, task=task, metric=metric, required=not journals,
                                                   random_partial=True)):
            c += v
    if not cols[0]:
        raise InputError(f"no scores of task {task!r} in {', '.join(map(str, paths))}")
    # the source names the sample logs: a bank calibrated from this table knows its ids are doc ids
    return ResponseTable.from_columns(*cols, source=f"{SAMPLE_LOGS_SOURCE}: " + ", ".join(map(str, paths)),
                                      metric=metric, allow_outliers=allow_outliers)

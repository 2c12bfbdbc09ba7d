"""Harness sample logs (``--log_samples``) read back: a response table of full runs
(:func:`table_from_sample_logs`, each file's model named by the ``results_*.json`` beside it) and
the answer options of a multiple-choice task's documents (:func:`options_from_sample_logs`)."""

from __future__ import annotations

import logging
from pathlib import Path

from lm_eval_adaptive.data.files import read_json, read_jsonl_records
from lm_eval_adaptive.data.responses import ResponseTable
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness.binding import SAMPLE_LOGS_SOURCE

__all__ = ["ADAPTIVE_SAMPLE_KEY", "table_from_sample_logs", "sample_log_columns", "options_from_sample_logs"]

log = logging.getLogger("lm_eval_adaptive")

#: Key every sample row of an adaptive run carries (its order, item id, information, scaled score).
ADAPTIVE_SAMPLE_KEY = "adaptive"


def table_from_sample_logs(paths, *, task: str, metric: str, allow_outliers: bool = False):
    """A response table from harness ``--log_samples`` output of full runs (several models): the sample
    logs of adaptive runs are skipped (:func:`sample_log_columns`)."""
    model, item, score, itok, otok = sample_log_columns(paths, task=task, metric=metric)
    # the source names the sample logs: a bank calibrated from this table knows its ids are doc ids
    return ResponseTable.from_columns(model, item, score, itok, otok,
                                      source=f"{SAMPLE_LOGS_SOURCE}: " + ", ".join(map(str, paths)),
                                      metric=metric, allow_outliers=allow_outliers)


def sample_log_columns(paths, *, task: str, metric: str, required: bool = True,
                       random_partial: bool = False) -> tuple[list, ...]:
    """(model, item, score, input tokens, output tokens) of every scored document in harness
    ``--log_samples`` output.

    Each PATH is a ``samples_<task>_*.jsonl`` file or a directory searched recursively for
    them. Sample logs of banked adaptive runs (their rows carry an ``adaptive`` record) hold only the
    documents a CAT picked, chosen by what the bank predicted of them: they are skipped with a warning
    naming them, and refused when nothing else is left (``required``). With ``random_partial`` those of a
    ``run --adaptive`` with no bank (``adaptive.mode`` ``bank-free``), whose documents were taken in
    uniformly random order (a missing cell is missing at random), are read as partial runs
    (``calibrate``'s history: docs/cold-start.md); without it they are skipped too. The model name comes from the ``results_*.json`` beside the file (``model_name``
    or ``config.model_args``), else the folder name. Item = ``doc_id``; tokens ≈ characters/4
    of the prompt and of the response. ``allow_outliers``: see
    :func:`~lm_eval_adaptive.data.table_files.read_table`.
    """

    files = _sample_files(paths, task)
    model, item, score, itok, otok = [], [], [], [], []
    adaptive_logs = []
    for f in files:
        name = _model_for_samples(f)
        records = read_jsonl_records(f)
        if any(ADAPTIVE_SAMPLE_KEY in s and not (random_partial and (s[ADAPTIVE_SAMPLE_KEY] or {}).get("mode")
                                                  == "bank-free") for _, s in records):
            adaptive_logs.append(str(f))  # only the documents a CAT picked: not a full run
            continue
        for n, s in records:
            if metric not in s:
                have = sorted(k for k, v in s.items() if isinstance(v, (int, float)) and k != "doc_id")
                raise InputError(f"no metric {metric!r} in the sample (numeric fields: {', '.join(have)})",
                                 path=str(f), row=n)
            model.append(name)
            item.append(str(s["doc_id"]))
            score.append(s[metric])
            itok.append(len(_prompt_of(s.get("arguments"))) / 4)
            resp = s.get("filtered_resps") or s.get("resps") or [""]
            while isinstance(resp, list) and resp:
                resp = resp[0]
            otok.append(len(str(resp)) / 4)
    if adaptive_logs:
        msg = (f"skipped {len(adaptive_logs)} sample log(s) of adaptive runs (only the documents the CAT "
               f"picked; calibration needs full runs): {', '.join(adaptive_logs)}")
        if not model and required:
            raise InputError(msg + "; no full-run sample log is left")
        log.warning(msg)
    return model, item, score, itok, otok


def _sample_files(paths, task: str) -> list[Path]:
    files = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(p.rglob(f"samples_{task}_*.jsonl"))
        elif p.exists():
            files.append(p)
        else:
            raise InputError("no such file or directory", path=str(p))
    if not files:
        raise InputError(f"no samples_{task}_*.jsonl under {', '.join(map(str, paths))}; "
                         "run the harness with --log_samples --output_path DIR")
    return files


def options_from_sample_logs(paths, *, task: str) -> dict[str, int]:
    """The number of answer options of each document (item = ``doc_id``) of a multiple-choice task,
    from harness sample logs: a multiple-choice document logs one loglikelihood request per option.
    Empty when some document logged a single request (not a multiple-choice task)."""
    options: dict[str, int] = {}
    for f in _sample_files(paths, task):
        for _, s in read_jsonl_records(f):
            a = s.get("arguments")
            n = len(a) if isinstance(a, (dict, list)) else 0
            if n < 2:
                return {}
            options[str(s["doc_id"])] = n
    return options


def _prompt_of(arguments) -> str:
    """The first request's prompt in a logged sample (lm-eval ≥0.4.10 logs a dict, older a list)."""
    a = arguments
    if isinstance(a, dict):
        a = next(iter(a.values()), {})
        a = a.get("arg_0", "") if isinstance(a, dict) else a
    while isinstance(a, (list, tuple)) and a:
        a = a[0]
    return str(a or "")


def _model_for_samples(path: Path) -> str:
    stamp = path.stem.split("_")[-1]
    cands = sorted(path.parent.glob(f"results_{stamp}*.json")) or sorted(path.parent.glob("results_*.json"))
    for r in cands:
        try:
            d = read_json(r, what="results file")  # under the input size limit
        except InputError:
            continue
        if not isinstance(d, dict):
            continue
        ma = (d.get("config") or {}).get("model_args")
        if isinstance(ma, dict) and ma.get("model"):
            return str(ma["model"])
        if isinstance(ma, str):
            for kv in ma.split(","):
                k, _, v = kv.partition("=")
                if k.strip() in ("model", "pretrained") and v:
                    return v.strip()
        if d.get("model_name"):
            return str(d["model_name"])
    return path.parent.name

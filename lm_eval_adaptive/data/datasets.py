"""Loaders that turn the real evaluation data into :class:`ResponseTable`\\ s.

The data live outside the repository (see :func:`data_root`):

* ``wmt24/<pair>/`` -- WMT24 General MT submissions; sentence-level BLEU or chrF
  of every system against the reference gives a continuous score per
  (system, segment).  See :func:`load_wmt24`.
* ``alpaca_eval/`` -- AlpacaEval; the judge's preference of each model's answer
  over the reference, minus one, is a score in [0, 1].  See
  :func:`load_alpaca_eval`.

Only numbers computed from these files (and system names / numeric ids) ever
end up in tables and caches; no text from the data is stored.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from lm_eval_adaptive.atomic import atomic_write
from lm_eval_adaptive.data.files import read_text
from lm_eval_adaptive.data.responses import ResponseTable
from lm_eval_adaptive.display import shown
from lm_eval_adaptive.errors import InputError

__all__ = [
    "DATA_ENV",
    "NAMED_TABLES",
    "WMT24_METRICS",
    "WMT25_PAIRS",
    "WMT25_METRICS",
    "load_wmt25",
    "WMT24_PAIRS",
    "cache_dir",
    "data_root",
    "load_alpaca_eval",
    "load_named",
    "named_item_field",
    "load_wmt24",
]

#: Environment variable naming the data directory.
DATA_ENV = "LM_EVAL_ADAPTIVE_DATA"

#: WMT24 language pairs available.  BLEU's tokenizer is sacrebleu's choice for the target
#: language (``BLEU(trg_lang=...)``: ``ja-mecab`` for ja, ``zh`` for zh, ``13a`` otherwise).
WMT24_PAIRS: tuple[str, ...] = ("en-de", "en-es", "en-ja", "en-zh")
WMT24_METRICS: tuple[str, ...] = ("bleu", "chrf")
#: ``judge``: the judge's preference - 1, in [0, 1]; ``win``: 1 if preference > 1.5 (the model's
#: answer beats the reference, how AlpacaEval's win rate counts it) else 0.
ALPACA_METRICS: tuple[str, ...] = ("judge", "win")
#: WMT25 pairs (short code -> folder) and metrics (short name -> key in ``metric_scores``).
WMT25_PAIRS: dict[str, str] = {
    "cs-de": "cs-de_DE", "en-ar": "en-ar_EG", "en-de": "en-de_DE", "en-et": "en-et_EE",
    "en-it": "en-it_IT", "en-ja": "en-ja_JP", "en-ko": "en-ko_KR", "en-zh": "en-zh_CN",
}
WMT25_METRICS: dict[str, str] = {
    "xcomet": "XCOMET-XL", "cometkiwi": "CometKiwi-XL", "metricx": "MetricX-24-Hybrid-XL",
    "gemba-gpt4.1": "GEMBA-ESA-GPT4.1", "gemba-cmda": "GEMBA-ESA-CMDA",
}

#: Every name :func:`load_named` understands.
NAMED_TABLES: tuple[str, ...] = tuple(
    f"wmt24/{pair}/{metric}" for pair in WMT24_PAIRS for metric in WMT24_METRICS
) + tuple(f"alpaca_eval/{metric}" for metric in ALPACA_METRICS) + tuple(
    f"wmt25/{pair}/{metric}" for pair in WMT25_PAIRS for metric in WMT25_METRICS
)

#: The document field of the project's task configs (``task_configs/``) that holds each named
#: table family's item ids: WMT24 items are 0-based line numbers, the ``id`` of a
#: ``wmt24_<pair>`` document (canary lines are skipped, so it is not the doc's position);
#: AlpacaEval items are AlpacaEval ids, the ``id`` of an ``alpaca_eval*`` document. WMT25
#: has no task config, so no field.
_ITEM_FIELDS: dict[str, str] = {"wmt24": "id", "alpaca_eval": "id"}

# Bump when the way tables are computed changes, to invalidate old caches.
_CACHE_VERSION = 2
# Use worker processes when serial scoring is expected to take longer than this.
_PARALLEL_SECONDS = 5.0
# Rough cost of scoring one segment (seconds), for the estimate above.
_SECONDS_PER_SEGMENT = 5e-4


# --------------------------------------------------------------------------- #
# Locations
# --------------------------------------------------------------------------- #


def data_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The data directory.

    In order: ``root`` when given; else the environment variable
    ``LM_EVAL_ADAPTIVE_DATA`` when set; else the first existing of
    ``<repo>/../shared/data`` and ``<cwd>/../shared/data``.

    Raises:
        InputError: if the chosen directory does not exist, or none is found.
    """
    if root is not None:
        path = Path(root).expanduser()
        if not path.is_dir():
            raise InputError("data directory does not exist", path=str(path))
        return path
    env = os.environ.get(DATA_ENV)
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise InputError(
                f"data directory named by {DATA_ENV} does not exist", path=str(path)
            )
        return path
    candidates = [
        Path(__file__).resolve().parents[2] / ".." / "shared" / "data",
        Path.cwd() / ".." / "shared" / "data",
    ]
    for path in candidates:
        if path.is_dir():
            return path.resolve()
    raise InputError(
        f"no data directory found; set {DATA_ENV} to it (looked in "
        + ", ".join(str(p) for p in candidates)
        + ")"
    )


def cache_dir() -> Path:
    """``${XDG_CACHE_HOME:-~/.cache}/lm-eval-adaptive`` (not created here)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lm-eval-adaptive"


# --------------------------------------------------------------------------- #
# WMT24
# --------------------------------------------------------------------------- #


def _make_metric(metric: str, pair: str) -> Any:
    """The sacrebleu metric object for ``metric`` on ``pair``."""
    from sacrebleu.metrics import BLEU, CHRF

    if metric == "bleu":
        # sacrebleu picks the tokenizer for the target language; the signature names it.
        return BLEU(effective_order=True, trg_lang=pair.split("-", 1)[1])
    return CHRF()


def _metric_signature(metric: str, pair: str) -> str:
    """sacrebleu's signature of the metric (it needs one evaluation first)."""
    scorer = _make_metric(metric, pair)
    scorer.sentence_score("a b c d", ["a b c d"])
    return scorer.get_signature().format()


def _score_segments(metric: str, pair: str, hyps: Sequence[str], refs: Sequence[str]) -> np.ndarray:
    """Sentence-level scores in [0, 1] of each hypothesis against its reference.

    sacrebleu's score / 100, clipped to [0, 1] (a perfect BLEU can come out as
    1 + 4e-16 from rounding).
    """
    scorer = _make_metric(metric, pair)
    scores = np.fromiter(
        (scorer.sentence_score(h, [r]).score / 100.0 for h, r in zip(hyps, refs)),
        dtype=np.float64,
        count=len(hyps),
    )
    return np.clip(scores, 0.0, 1.0)


def read_lines(path: Path) -> list[str]:
    """Lines of a UTF-8 text file, split on ``\\n`` only (trailing ``\\r`` removed)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read file: {exc}", path=str(path)) from exc
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _progress(total: int, description: str) -> tuple[Callable[[], None], Callable[[], None]]:
    """A progress bar on stderr (only when it is a terminal): ``(advance, close)``."""
    if not sys.stderr.isatty():
        return (lambda: None), (lambda: None)
    try:
        from rich.console import Console
        from rich.markup import escape
        from rich.progress import Progress
    except ImportError:  # pragma: no cover - rich is a dependency
        return (lambda: None), (lambda: None)
    progress = Progress(console=Console(stderr=True, markup=False, emoji=False), transient=True)
    progress.start()
    task = progress.add_task(escape(shown(description)), total=total)
    return (lambda: progress.advance(task)), progress.stop


def load_wmt24(
    pair: str = "en-de",
    metric: str = "bleu",
    root: str | os.PathLike[str] | None = None,
    systems: Iterable[str] | None = None,
    cache: bool = True,
) -> ResponseTable:
    """Sentence-level BLEU or chrF of WMT24 systems, as a response table.

    Each system (file ``systems/<NAME>.txt``) is a model, each segment (line) an
    item whose id is its 0-based line number.  Canary lines (domain ``canary``
    in ``documents.tsv``) and lines with an empty reference are skipped.
    Scores are sacrebleu's sentence scores divided by 100: BLEU with
    ``effective_order=True`` and sacrebleu's tokenizer for the target language
    (``trg_lang``: ``ja-mecab`` for en-ja, ``zh`` for en-zh, ``13a`` otherwise)
    or chrF with default settings, clipped to [0, 1]
    against floating-point rounding.  Token counts are
    estimated as characters / 4 of the source (input) and reference (output).

    The table is cached under :func:`cache_dir`, keyed by the contents of the
    input files, the metric, its signature and the sacrebleu version.

    Args:
        pair: one of :data:`WMT24_PAIRS`.
        metric: ``"bleu"`` or ``"chrf"``.
        root: data directory (see :func:`data_root`).
        systems: system names to load, in this order (default: all, sorted).
        cache: read and write the cache.

    Raises:
        InputError: unknown pair, metric or system; missing files; a system file
            whose line count differs from ``source.txt``.
    """
    if pair not in WMT24_PAIRS:
        raise InputError(f"unknown WMT24 pair {pair!r}; valid pairs: {', '.join(WMT24_PAIRS)}")
    if metric not in WMT24_METRICS:
        raise InputError(
            f"unknown WMT24 metric {metric!r}; valid metrics: {', '.join(WMT24_METRICS)}"
        )
    import sacrebleu

    base = data_root(root) / "wmt24" / pair
    source_path, ref_path, docs_path = (
        base / "source.txt", base / "reference.txt", base / "documents.tsv"
    )
    for p in (source_path, ref_path, docs_path):
        if not p.is_file():
            raise InputError("required file not found", path=str(p))
    system_dir = base / "systems"
    available = sorted(p.stem for p in system_dir.glob("*.txt")) if system_dir.is_dir() else []
    if systems is None:
        names = available
    else:
        names = [str(s) for s in systems]
        unknown = [s for s in names if s not in available]
        if unknown:
            raise InputError(
                f"unknown system(s) {', '.join(map(repr, unknown))} for {pair}; "
                f"available: {', '.join(available)}",
                path=str(system_dir),
            )
        if len(set(names)) != len(names):
            raise InputError("a system is listed more than once", path=str(system_dir))
    if len(names) < 2:
        raise InputError(
            f"need at least 2 systems, found {len(names)}", path=str(system_dir)
        )
    system_paths = [system_dir / f"{name}.txt" for name in names]
    metric_name = f"wmt24/{pair}/{metric}"
    signature = _metric_signature(metric, pair)

    cache_file: Path | None = None
    if cache:
        key = {
            "version": _CACHE_VERSION,
            "pair": pair,
            "metric": metric,
            "signature": signature,
            "sacrebleu": sacrebleu.__version__,
            "inputs": [_file_digest(p) for p in (source_path, ref_path, docs_path)],
            "systems": [[n, _file_digest(p)] for n, p in zip(names, system_paths)],
        }
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
        cache_file = cache_dir() / f"wmt24_{pair}_{metric}_{digest}.npz"
        cached = _read_cache(cache_file, source=str(base), metric=metric_name)
        if cached is not None:
            return cached

    source = read_lines(source_path)
    refs = read_lines(ref_path)
    docs = read_lines(docs_path)
    n_lines = len(source)
    for p, lines in ((ref_path, refs), (docs_path, docs)):
        if len(lines) != n_lines:
            raise InputError(
                f"has {len(lines)} lines, source.txt has {n_lines}", path=str(p)
            )
    domains = [d.split("\t", 1)[0].strip().lower() for d in docs]
    keep = np.array(
        [dom != "canary" and ref.strip() != "" for dom, ref in zip(domains, refs)], dtype=bool
    )
    kept = np.flatnonzero(keep)
    if len(kept) == 0:
        raise InputError("no segments left after skipping canary and empty references",
                         path=str(base))
    kept_refs = [refs[i] for i in kept]
    hyps_by_system: list[list[str]] = []
    for p in system_paths:
        lines = read_lines(p)
        if len(lines) != n_lines:
            raise InputError(
                f"has {len(lines)} lines, source.txt has {n_lines}", path=str(p)
            )
        hyps_by_system.append([lines[i] for i in kept])

    scores = _score_all(metric, pair, names, hyps_by_system, kept_refs)

    n_sys, n_items = len(names), len(kept)
    src_len = np.array([len(source[i]) for i in kept], dtype=np.float64) / 4.0
    ref_len = np.array([len(refs[i]) for i in kept], dtype=np.float64) / 4.0
    table = ResponseTable(
        models=np.array(names, dtype=object),
        items=np.array([str(i) for i in kept], dtype=object),
        model_idx=np.repeat(np.arange(n_sys, dtype=np.int64), n_items),
        item_idx=np.tile(np.arange(n_items, dtype=np.int64), n_sys),
        score=np.concatenate(scores),
        input_tokens=np.tile(src_len, n_sys),
        output_tokens=np.tile(ref_len, n_sys),
        source=str(base),
        metric=metric_name,
    )
    if cache_file is not None:
        _write_cache(cache_file, table)
    return table


def _score_all(
    metric: str,
    pair: str,
    names: Sequence[str],
    hyps_by_system: Sequence[Sequence[str]],
    refs: Sequence[str],
) -> list[np.ndarray]:
    """Score every system, in worker processes when that is worth it."""
    n_seg = sum(len(h) for h in hyps_by_system)
    workers = min(os.cpu_count() or 1, len(names))
    advance, close = _progress(len(names), f"scoring WMT24 {pair} {metric}")
    try:
        if workers > 1 and n_seg * _SECONDS_PER_SEGMENT > _PARALLEL_SECONDS:
            try:
                return _score_parallel(metric, pair, hyps_by_system, refs, workers, advance)
            except (cf.process.BrokenProcessPool, OSError, RuntimeError):
                pass  # fall back to scoring in this process
        out = []
        for hyps in hyps_by_system:
            out.append(_score_segments(metric, pair, hyps, refs))
            advance()
        return out
    finally:
        close()


def _score_parallel(
    metric: str,
    pair: str,
    hyps_by_system: Sequence[Sequence[str]],
    refs: Sequence[str],
    workers: int,
    advance: Callable[[], None],
) -> list[np.ndarray]:
    out: list[np.ndarray | None] = [None] * len(hyps_by_system)
    with cf.ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {
            pool.submit(_score_segments, metric, pair, list(hyps), list(refs)): k
            for k, hyps in enumerate(hyps_by_system)
        }
        for fut in cf.as_completed(futures):
            out[futures[fut]] = fut.result()
            advance()
    return out  # type: ignore[return-value]


def _read_cache(path: Path, *, source: str, metric: str) -> ResponseTable | None:
    """The cached table, or None if absent or unreadable."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            return ResponseTable(
                models=z["models"].astype(str).astype(object),
                items=z["items"].astype(str).astype(object),
                model_idx=z["model_idx"],
                item_idx=z["item_idx"],
                score=z["score"],
                input_tokens=z["input_tokens"],
                output_tokens=z["output_tokens"],
                source=source,
                metric=metric,
            )
    except Exception:  # noqa: BLE001 - a broken cache is recomputed
        return None


def _write_cache(path: Path, table: ResponseTable) -> None:
    """Write the table's numbers atomically; failures only skip caching."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda f: np.savez(
            f,
            models=table.models.astype(str),
            items=table.items.astype(str),
            model_idx=table.model_idx,
            item_idx=table.item_idx,
            score=table.score,
            input_tokens=table.input_tokens,
            output_tokens=table.output_tokens,
        ))
    except OSError:
        pass


def read_jsonl_records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-blank line of a JSON Lines file (``.gz`` too)."""
    text = read_text(path)  # under the input size limit; .gz inflated in chunks
    out = []
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg}", path=str(path), row=number) from exc
        if not isinstance(value, dict):
            raise InputError("line is not a JSON object", path=str(path), row=number)
        out.append((number, value))
    return out


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The objects of a JSON Lines file (``.gz`` too); errors name the file and line."""
    return [rec for _, rec in read_jsonl_records(path)]


def _id_of(record: dict[str, Any], path: Path, number: int) -> int:
    value = record.get("id")
    try:
        if isinstance(value, bool):
            raise TypeError
        ident = int(value)  # type: ignore[arg-type]
        if ident != value and str(ident) != str(value).strip():
            raise ValueError
    except (TypeError, ValueError):
        raise InputError(f"id {value!r} is not an integer", path=str(path), row=number) from None
    return ident


def load_alpaca_eval(
    metric: str = "judge", root: str | os.PathLike[str] | None = None
) -> ResponseTable:
    """AlpacaEval judge scores of 28 models, as a response table.

    ``judge``: score = judge preference - 1, in [0, 1] (1 = the model's answer is
    preferred to the reference). ``win``: score = 1 if preference > 1.5 else 0
    (win/lose, a binary table: how AlpacaEval's win rate is defined).  Models are the files ``judge/<MODEL>.jsonl``
    (sorted), items the ``id`` values (as strings, in numeric order).  Rows
    with a null/NaN preference are skipped.  Token counts are estimated as
    characters / 4 of the instruction (input) and the reference answer (output).

    Raises:
        InputError: unknown metric, missing or malformed files.
    """
    if metric not in ALPACA_METRICS:
        raise InputError(
            f"unknown AlpacaEval metric {metric!r}; valid metrics: {', '.join(ALPACA_METRICS)}"
        )
    base = data_root(root) / "alpaca_eval"
    items_path, ref_path, judge_dir = base / "items.jsonl", base / "reference.jsonl", base / "judge"
    for p in (items_path, ref_path):
        if not p.is_file():
            raise InputError("required file not found", path=str(p))
    judge_files = sorted(judge_dir.glob("*.jsonl")) if judge_dir.is_dir() else []
    if len(judge_files) < 2:
        raise InputError(f"need at least 2 judge files, found {len(judge_files)}",
                         path=str(judge_dir))

    in_len: dict[int, float] = {}
    for number, rec in read_jsonl_records(items_path):
        in_len[_id_of(rec, items_path, number)] = len(str(rec.get("instruction") or "")) / 4.0
    out_len: dict[int, float] = {}
    for number, rec in read_jsonl_records(ref_path):
        out_len[_id_of(rec, ref_path, number)] = len(str(rec.get("output") or "")) / 4.0

    models: list[str] = []
    model_col: list[np.ndarray] = []
    id_col: list[np.ndarray] = []
    score_col: list[np.ndarray] = []
    for path in judge_files:
        ids, prefs = [], []
        for number, rec in read_jsonl_records(path):
            ident = _id_of(rec, path, number)
            if ident not in in_len:
                raise InputError(f"id {ident} is not in items.jsonl", path=str(path), row=number)
            pref = rec.get("preference")
            if pref is None:
                continue
            if isinstance(pref, bool) or not isinstance(pref, (int, float)):
                raise InputError(f"preference {pref!r} is not a number", path=str(path), row=number)
            if math.isnan(pref):
                continue
            if math.isinf(pref):
                raise InputError(f"preference {pref!r} is not finite", path=str(path), row=number)
            ids.append(ident)
            prefs.append((1.0 if pref > 1.5 else 0.0) if metric == "win" else float(pref) - 1.0)
        if not ids:
            continue  # a model with no usable judgement contributes nothing
        model_col.append(np.full(len(ids), len(models), dtype=np.int64))
        models.append(path.name[: -len(".jsonl")])
        id_col.append(np.asarray(ids, dtype=np.int64))
        score_col.append(np.asarray(prefs, dtype=np.float64))
    if len(models) < 2:
        raise InputError(f"need at least 2 models with judgements, found {len(models)}",
                         path=str(judge_dir))

    all_ids = np.concatenate(id_col)
    unique_ids, item_idx = np.unique(all_ids, return_inverse=True)
    in_tok = np.array([in_len[i] for i in unique_ids.tolist()], dtype=np.float64)
    out_tok = np.array([out_len.get(i, math.nan) for i in unique_ids.tolist()], dtype=np.float64)
    item_idx = item_idx.astype(np.int64).reshape(-1)
    return ResponseTable(
        models=np.array(models, dtype=object),
        items=np.array([str(i) for i in unique_ids.tolist()], dtype=object),
        model_idx=np.concatenate(model_col),
        item_idx=item_idx,
        score=np.concatenate(score_col),
        input_tokens=in_tok[item_idx],
        output_tokens=out_tok[item_idx],
        source=str(judge_dir),
        metric=f"alpaca_eval/{metric}",
    )


# --------------------------------------------------------------------------- #
# WMT25 (segment scores of five metrics, no text)
# --------------------------------------------------------------------------- #


def load_wmt25(pair: str = "en-de", metric: str = "xcomet",
               root: str | os.PathLike[str] | None = None) -> ResponseTable:
    """One metric's segment scores of the WMT25 systems of a pair, as a response table.

    Each file ``wmt25/<folder>/<SYSTEM>.jsonl`` is a model; each line a document whose
    ``metric_scores[<metric>]`` lists one score per segment, in order. The item id is
    ``<document_id>:<segment position>``. Scores are the metric's own values (XCOMET and
    CometKiwi roughly in [0, 1], MetricX in [-25, 0] with higher better, the GEMBA judges
    on 0-100); calibration maps them into [0, 1]. A ``null`` score is a missing pair.

    No token counts are published for WMT25: the table's are NaN, and a backtest on it
    gives every item the same cost (see :mod:`lm_eval_adaptive.engine.backtest`).

    Raises:
        InputError: unknown pair or metric, missing folder, malformed records, systems
            whose documents or segment counts disagree.
    """
    if pair not in WMT25_PAIRS:
        raise InputError(f"unknown WMT25 pair {pair!r}; valid pairs: {', '.join(WMT25_PAIRS)}")
    if metric not in WMT25_METRICS:
        raise InputError(f"unknown WMT25 metric {metric!r}; valid metrics: {', '.join(WMT25_METRICS)}")
    key = WMT25_METRICS[metric]
    base = data_root(root) / "wmt25" / WMT25_PAIRS[pair]
    files = sorted(base.glob("*.jsonl")) if base.is_dir() else []
    if len(files) < 2:
        raise InputError(f"need at least 2 system files, found {len(files)}", path=str(base))
    models: list[str] = []
    item_index: dict[str, int] = {}
    m_col: list[int] = []
    i_col: list[int] = []
    s_col: list[float] = []
    for path in files:
        m = len(models)
        models.append(path.name[: -len(".jsonl")])
        for number, rec in read_jsonl_records(path):
            doc = rec.get("document_id")
            scores = (rec.get("metric_scores") or {}).get(key)
            if not isinstance(doc, str) or not isinstance(scores, list):
                raise InputError(f"a record needs document_id and metric_scores[{key!r}] (a list)",
                                 path=str(path), row=number)
            for pos, v in enumerate(scores):
                if v is None:
                    continue
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                    raise InputError(f"{key} score {v!r} of segment {pos} is not a finite number",
                                     path=str(path), row=number)
                item = f"{doc}:{pos}"
                m_col.append(m)
                i_col.append(item_index.setdefault(item, len(item_index)))
                s_col.append(float(v))
    n = len(s_col)
    return ResponseTable(
        models=np.array(models, dtype=object),
        items=np.array(list(item_index), dtype=object),
        model_idx=np.asarray(m_col, dtype=np.int64),
        item_idx=np.asarray(i_col, dtype=np.int64),
        score=np.asarray(s_col, dtype=np.float64),
        input_tokens=np.full(n, math.nan),
        output_tokens=np.full(n, math.nan),
        source=str(base),
        metric=f"wmt25/{pair}/{metric}",
    )


# --------------------------------------------------------------------------- #
# By name
# --------------------------------------------------------------------------- #


def load_named(name: str, root: str | os.PathLike[str] | None = None) -> ResponseTable:
    """Load a table by name, one of :data:`NAMED_TABLES`.

    ``wmt24/<pair>/<metric>`` (e.g. ``wmt24/en-de/bleu``), ``alpaca_eval/judge`` or
    ``wmt25/<pair>/<metric>`` (e.g. ``wmt25/en-de/xcomet``).

    Raises:
        InputError: for an unknown name (the message lists the valid ones).
    """
    key = str(name).strip().strip("/")
    if key not in NAMED_TABLES:
        raise InputError(f"unknown table {name!r}; valid names: {', '.join(NAMED_TABLES)}")
    parts = key.split("/")
    if parts[0] == "wmt24":
        return load_wmt24(parts[1], parts[2], root=root)
    if parts[0] == "wmt25":
        return load_wmt25(parts[1], parts[2], root=root)
    return load_alpaca_eval(parts[1], root=root)


def named_item_field(name: str) -> str | None:
    """The document field of the project's task configs that holds the item ids of the named
    table ``name`` (one of :data:`NAMED_TABLES`): ``"id"`` for WMT24 and AlpacaEval, None for
    WMT25 (no task config) and for any name that is not a named table."""
    key = str(name).strip().strip("/")
    if key not in NAMED_TABLES:
        return None
    return _ITEM_FIELDS.get(key.split("/", 1)[0])

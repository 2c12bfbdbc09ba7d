"""WMT24 General MT: sentence-level BLEU or chrF of every system, cached.

``wmt24/<pair>/`` under :func:`~lm_eval_adaptive.data.data_root.data_root` holds the source,
the reference, ``documents.tsv`` and one file per system; :func:`load_wmt24` scores every
system's segments against the reference with sacrebleu (in worker processes when that is
worth it) and caches the table's numbers under
:func:`~lm_eval_adaptive.data.data_root.cache_dir`. No text from the data is stored. While it
scores, it tells the command's progress hook each system done (:mod:`lm_eval_adaptive.data.progress`).
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from lm_eval_adaptive.atomic import atomic_write
from lm_eval_adaptive.data.data_root import cache_dir, data_root
from lm_eval_adaptive.data.files import read_lines
from lm_eval_adaptive.data.progress import progress
from lm_eval_adaptive.data.responses import ResponseTable
from lm_eval_adaptive.errors import InputError

__all__ = ["WMT24_METRICS", "WMT24_PAIRS", "load_wmt24"]

#: WMT24 language pairs available.  BLEU's tokenizer is sacrebleu's choice for the target
#: language (``BLEU(trg_lang=...)``: ``ja-mecab`` for ja, ``zh`` for zh, ``13a`` otherwise).
WMT24_PAIRS: tuple[str, ...] = ("en-de", "en-es", "en-ja", "en-zh")

# Bump when the way tables are computed changes, to invalidate old caches.
_CACHE_VERSION = 2
# Use worker processes when serial scoring is expected to take longer than this.
_PARALLEL_SECONDS = 5.0
# Rough cost of scoring one segment (seconds), for the estimate above.
_SECONDS_PER_SEGMENT = 5e-4


def _bleu(pair: str) -> Any:
    from sacrebleu.metrics import BLEU

    # sacrebleu picks the tokenizer for the target language; the signature names it.
    return BLEU(effective_order=True, trg_lang=pair.split("-", 1)[1])


def _chrf(pair: str) -> Any:
    from sacrebleu.metrics import CHRF

    return CHRF()


#: Each metric -> the sacrebleu metric object it is on a pair.
_SACREBLEU_METRICS: dict[str, Callable[[str], Any]] = {"bleu": _bleu, "chrf": _chrf}
WMT24_METRICS: tuple[str, ...] = tuple(_SACREBLEU_METRICS)


def _make_metric(metric: str, pair: str) -> Any:
    """The sacrebleu metric object for ``metric`` on ``pair``."""
    return _SACREBLEU_METRICS[metric](pair)


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


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


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
    with progress(f"scoring WMT24 {pair} {metric}", len(names)) as advance:  # shown by the command's hook
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

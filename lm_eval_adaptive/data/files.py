"""Reading input files under a size limit, and checking output paths before any work is done.

Inputs (item banks, leaderboards, costs files, response tables) are read through
:func:`read_bytes` / :func:`read_json`: a gzip-compressed file (``.gz``) is inflated in chunks,
and a file whose content (after decompression) exceeds the limit is refused with an
:class:`~lm_eval_adaptive.errors.InputError` naming the file and the limit, before it can take
the machine's memory (a 2 MB gzip file may inflate to gigabytes). The limit is
:data:`DEFAULT_MAX_FILE_MB` MiB, or the number of MiB in the environment variable
:data:`MAX_FILE_MB_ENV`. Any read failure (missing file, a corrupt gzip stream, bad UTF-8,
bad JSON) is an ``InputError`` naming the file too.

Outputs are checked by :func:`check_outputs` as a command starts: each output file's folder
exists or can be created and is writable, the path is not a folder, no output is also an input
(the same file, through any link or spelling of its path), and no two outputs are the same.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import zlib
from pathlib import Path
from typing import Any, Iterable

from lm_eval_adaptive.errors import InputError

__all__ = ["DEFAULT_MAX_FILE_MB", "MAX_FILE_MB_ENV", "max_input_bytes", "read_bytes", "read_text", "read_json",
           "check_outputs", "check_output_folder", "same_path", "read_lines", "read_jsonl_records",
           "read_jsonl", "suffix_of"]

#: Largest input content (after decompression) read by default, in MiB.
DEFAULT_MAX_FILE_MB = 512
#: Environment variable overriding :data:`DEFAULT_MAX_FILE_MB` (a number of MiB > 0).
MAX_FILE_MB_ENV = "LM_EVAL_ADAPTIVE_MAX_FILE_MB"

_CHUNK = 1 << 20


def max_input_bytes() -> int:
    """The input size limit in bytes (:data:`MAX_FILE_MB_ENV`, else :data:`DEFAULT_MAX_FILE_MB`)."""
    text = os.environ.get(MAX_FILE_MB_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_FILE_MB << 20
    try:
        mb = float(text)
    except ValueError:
        mb = math.nan
    if not (math.isfinite(mb) and mb > 0):
        raise InputError(f"{MAX_FILE_MB_ENV}={text!r}: must be a number of MiB > 0")
    return max(1, int(mb * (1 << 20)))


def _limit_text(limit: int) -> str:
    mb = limit / (1 << 20)
    return f"{mb:g} MiB" if mb >= 0.01 else f"{limit} bytes"


def read_bytes(path, *, what: str = "file") -> bytes:
    """The content of ``path``, inflated when its name ends in ``.gz``; InputError naming the file
    when it is missing, unreadable, corrupt or larger than :func:`max_input_bytes`."""
    path = Path(path)
    limit = max_input_bytes()
    gz = path.name.lower().endswith(".gz")
    if not path.exists():
        raise InputError(f"{what} not found", path=str(path))
    if path.is_dir():
        raise InputError(f"{what} is a folder, not a file", path=str(path))
    data = bytearray()
    try:
        with (gzip.open(path, "rb") if gz else open(path, "rb")) as f:
            while block := f.read(_CHUNK):
                data += block
                if len(data) > limit:
                    break
    except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
        raise InputError(f"cannot read {what}: {'corrupt gzip data: ' if gz else ''}{e}", path=str(path)) from None
    if len(data) > limit:
        raise InputError(f"{what} is larger than {_limit_text(limit)}{' once decompressed' if gz else ''} "
                         f"(the limit; set {MAX_FILE_MB_ENV} to a number of MiB to change it)", path=str(path))
    return bytes(data)


def read_text(path, *, what: str = "file") -> str:
    """:func:`read_bytes` decoded as UTF-8; InputError naming the file when it is not."""
    data = read_bytes(path, what=what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"cannot read {what}: not UTF-8 text ({e})", path=str(path)) from None


def read_json(path, *, what: str = "file", object_pairs_hook=None):
    """The JSON value in ``path`` (see :func:`read_bytes`); InputError naming the file, line and
    column when it is not JSON."""
    text = read_text(path, what=what)
    try:
        return json.loads(text, object_pairs_hook=object_pairs_hook)
    except json.JSONDecodeError as e:
        raise InputError(f"cannot read {what}: not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})",
                         path=str(path)) from None
    except RecursionError:
        raise InputError(f"cannot read {what}: JSON nested too deeply", path=str(path)) from None


# ------------------------------------------------------------------------------------ outputs
def same_path(a, b) -> bool:
    """Whether ``a`` and ``b`` name the same file: the same inode when both exist, else the same
    resolved path."""
    a, b = Path(a), Path(b)
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
        return a.resolve() == b.resolve()
    except OSError:
        return False


def _nearest_existing(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _check_can_create_in(folder: Path, option: str, target: Path) -> None:
    """``folder`` (which may not exist yet) can be created and written in."""
    base = _nearest_existing(folder)
    if not base.is_dir():
        raise InputError(f"{option}: cannot write here: {base} is not a folder", path=str(target))
    if not os.access(base, os.W_OK | os.X_OK):
        raise InputError(f"{option}: cannot write here: the folder {base} is not writable", path=str(target))


def check_output_folder(path, option: str) -> Path:
    """An output folder: a folder, or a path where one can be created, and writable."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputError(f"{option} must be a folder", path=str(p))
    _check_can_create_in(p, option, p)
    return p


def check_outputs(outputs: Iterable[tuple[str, object]], inputs: Iterable[object] = ()) -> None:
    """Refuse, before any work, an output file that cannot be written: ``outputs`` are
    ``(option, path)`` pairs (a None path is skipped), ``inputs`` the files the command reads (named
    tables and other non-paths among them are harmless). Refused: a path that is a folder, a file
    that is not writable, a folder that cannot be created or written in, an output that is also an
    input, and two outputs that are the same file."""
    outputs = [(opt, Path(p)) for opt, p in outputs if p is not None and str(p) != ""]
    inputs = [Path(str(p)) for p in inputs if p is not None and str(p) != ""]
    for k, (opt, p) in enumerate(outputs):
        if p.is_dir():
            raise InputError(f"{opt}: is a folder; give a file name", path=str(p))
        if p.exists() and not os.access(p, os.W_OK):
            raise InputError(f"{opt}: the file is not writable", path=str(p))
        _check_can_create_in(p.parent, opt, p)
        for src in inputs:
            if same_path(p, src):
                raise InputError(f"{opt} is also an input of this command ({src}); writing it would overwrite that input: "
                                 f"give another path", path=str(p))
        for other_opt, other in outputs[:k]:
            if same_path(p, other):
                raise InputError(f"{opt} and {other_opt} are the same file; give two paths", path=str(p))


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


def suffix_of(path: Path, suffixes: Iterable[str]) -> str | None:
    """The one of ``suffixes`` that ``path``'s name ends in (case ignored; the longest that fits, e.g.
    ``.csv.gz`` before ``.gz``), or None; a name that is only the suffix has none."""
    name = path.name.lower()
    for s in sorted(suffixes, key=len, reverse=True):
        if name.endswith(s) and len(name) > len(s):
            return s
    return None

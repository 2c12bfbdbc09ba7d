"""Where the recorded real data and the table cache live.

The data live outside the repository: :func:`data_root` finds them (an explicit folder,
the environment variable :data:`DATA_ENV`, or ``../shared/data`` next to the repository or
the working folder). :func:`cache_dir` is where computed tables are cached.
"""

from __future__ import annotations

import os
from pathlib import Path

from lm_eval_adaptive.errors import InputError

__all__ = ["DATA_ENV", "cache_dir", "data_root"]

#: Environment variable naming the data directory.
DATA_ENV = "LM_EVAL_ADAPTIVE_DATA"


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

"""REALSumm: ROUGE of 24 CNN/DailyMail summarizers on 100 documents (no text).

``realsumm/realsumm.<metric>.csv.gz`` under :func:`~lm_eval_adaptive.data.data_root.data_root` holds one
row per (system, document): ``model,item,score,input_tokens,output_tokens`` (see the data folder's README);
:func:`load_realsumm` reads one metric's file as a response table named ``realsumm/<metric>``. A small
table: a full run is 100 items per model.
"""

from __future__ import annotations

import os

from lm_eval_adaptive.data.data_root import data_root
from lm_eval_adaptive.data.responses import ResponseTable
from lm_eval_adaptive.data.table_files import read_table
from lm_eval_adaptive.errors import InputError

__all__ = ["REALSUMM_METRICS", "load_realsumm"]

#: ROUGE-1, ROUGE-2 and ROUGE-L F-measure.
REALSUMM_METRICS: tuple[str, ...] = ("rouge1", "rouge2", "rougeL")


def load_realsumm(metric: str = "rouge1", root: str | os.PathLike[str] | None = None) -> ResponseTable:
    """One ROUGE variant of REALSumm as a response table (``metric`` one of :data:`REALSUMM_METRICS`).

    Raises:
        InputError: unknown metric, or the file is missing or malformed.
    """
    if metric not in REALSUMM_METRICS:
        raise InputError(f"unknown REALSumm metric {metric!r}; valid metrics: {', '.join(REALSUMM_METRICS)}")
    path = data_root(root) / "realsumm" / f"realsumm.{metric}.csv.gz"
    if not path.is_file():
        raise InputError("REALSumm table not found", path=str(path))
    return read_table(path, metric=f"realsumm/{metric}")

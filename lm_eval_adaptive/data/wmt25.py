"""WMT25: segment scores of five metrics for the systems of each pair (no text).

``wmt25/<folder>/`` under :func:`~lm_eval_adaptive.data.data_root.data_root` holds one JSON
Lines file per system; :func:`load_wmt25` turns one metric's scores into a response table.
"""

from __future__ import annotations

import math
import os

import numpy as np

from lm_eval_adaptive.data.data_root import data_root
from lm_eval_adaptive.data.files import read_jsonl_records
from lm_eval_adaptive.data.responses import ResponseTable
from lm_eval_adaptive.errors import InputError

__all__ = ["WMT25_METRICS", "WMT25_PAIRS", "load_wmt25"]

#: WMT25 pairs (short code -> folder) and metrics (short name -> key in ``metric_scores``).
WMT25_PAIRS: dict[str, str] = {
    "cs-de": "cs-de_DE", "en-ar": "en-ar_EG", "en-de": "en-de_DE", "en-et": "en-et_EE",
    "en-it": "en-it_IT", "en-ja": "en-ja_JP", "en-ko": "en-ko_KR", "en-zh": "en-zh_CN",
}
WMT25_METRICS: dict[str, str] = {
    "xcomet": "XCOMET-XL", "cometkiwi": "CometKiwi-XL", "metricx": "MetricX-24-Hybrid-XL",
    "gemba-gpt4.1": "GEMBA-ESA-GPT4.1", "gemba-cmda": "GEMBA-ESA-CMDA",
}


def load_wmt25(pair: str = "en-de", metric: str = "xcomet",
               root: str | os.PathLike[str] | None = None) -> ResponseTable:
    """One metric's segment scores of the WMT25 systems of a pair, as a response table.

    Each file ``wmt25/<folder>/<SYSTEM>.jsonl`` is a model; each line a document whose
    ``metric_scores[<metric>]`` lists one score per segment, in order. The item id is
    ``<document_id>:<segment position>``. Scores are the metric's own values (XCOMET and
    CometKiwi roughly in [0, 1], MetricX in [-25, 0] with higher better, the GEMBA judges
    on 0-100); calibration maps them into [0, 1]. A ``null`` score is a missing pair.

    No token counts are published for WMT25: the table's are NaN, and a backtest on it
    gives every item the same cost (see :mod:`lm_eval_adaptive.engine.evaluation.backtest`).

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

"""Small loader for WMT25 automatic segment scores -> ResponseTable (research prototype).

Item id = "<document_id>#<segment position>". Every observation gets the same token counts
(100 input, 100 output), so with uniform prices every item costs the same.
Null scores (GEMBA-ESA-CMDA has two) are left out (the pair is missing).
Only numbers are kept; nothing from the data files is copied.
"""
from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

import numpy as np

from lm_eval_adaptive.data.responses import ResponseTable

ROOT = Path(os.environ.get("LM_EVAL_ADAPTIVE_DATA", "/work/shared/data")) / "wmt25"
PAIRS = ("cs-de_DE", "en-ar_EG", "en-de_DE", "en-et_EE", "en-it_IT", "en-ja_JP", "en-ko_KR", "en-zh_CN")
METRICS = ("XCOMET-XL", "CometKiwi-XL", "MetricX-24-Hybrid-XL", "GEMBA-ESA-GPT4.1", "GEMBA-ESA-CMDA")
TUNING_PAIRS = ("en-de_DE", "en-ja_JP", "en-zh_CN", "en-ko_KR")
REPORT_PAIRS = ("cs-de_DE", "en-ar_EG", "en-et_EE", "en-it_IT")
TOKENS = 100.0


@lru_cache(maxsize=None)
def _read_pair(pair: str):
    d = ROOT / pair
    out = {}  # system -> {metric: {item: score}}
    for f in sorted(d.glob("*.jsonl")):
        sysname = f.stem
        per = {m: {} for m in METRICS}
        with open(f) as fh:
            for line in fh:
                if not line.strip():
                    continue
                rec = json.loads(line)
                doc = rec["document_id"]
                for m, vals in rec["metric_scores"].items():
                    if m not in per:
                        continue
                    for k, v in enumerate(vals):
                        if v is not None:
                            per[m][f"{doc}#{k}"] = float(v)
        out[sysname] = per
    return out


def load_wmt25(pair: str, metric: str) -> ResponseTable:
    data = _read_pair(pair)
    model, item, score = [], [], []
    for sysname in sorted(data):
        for it, v in data[sysname][metric].items():
            model.append(sysname)
            item.append(it)
            score.append(v)
    n = len(score)
    return ResponseTable.from_columns(model, item, np.asarray(score), np.full(n, TOKENS), np.full(n, TOKENS),
                                      source=str(ROOT / pair), metric=f"wmt25/{pair}/{metric}")


WMT24 = tuple(f"wmt24/{p}/{m}" for p in ("en-de", "en-es", "en-ja", "en-zh") for m in ("bleu", "chrf"))
TUNING = WMT24 + ("alpaca_eval/judge",) + tuple(f"wmt25/{p}/{m}" for p in TUNING_PAIRS for m in METRICS)
REPORT = tuple(f"wmt25/{p}/{m}" for p in REPORT_PAIRS for m in METRICS)


def load(name: str) -> ResponseTable:
    if name.startswith("wmt25/"):
        _, pair, metric = name.split("/", 2)
        return load_wmt25(pair, metric)
    from lm_eval_adaptive.data.tables import load_any_table
    return load_any_table(name)


def family(name: str) -> str:
    """Table family for per-family defaults."""
    if name.startswith("alpaca"):
        return "judge"
    if name.startswith("wmt24"):
        return "overlap"  # BLEU/chrF
    m = name.split("/")[-1]
    if m.startswith("GEMBA"):
        return "judge"
    return "neural"  # XCOMET, CometKiwi, MetricX


def scale_range(name: str) -> float:
    """Width of the metric's nominal scale: 1 for [0,1] scores, 100 for GEMBA, 25 for MetricX."""
    m = name.split("/")[-1]
    if m.startswith("GEMBA"):
        return 100.0
    if m.startswith("MetricX"):
        return 25.0
    return 1.0

"""Write the small demo response tables embedded in the package.

Usage (from the repository root)::

    python benchmarks/make_demo_tables.py [--root DATA_DIR]

Writes ``lm_eval_adaptive/data/wmt24_en-de_chrf.csv.gz`` and
``lm_eval_adaptive/data/alpaca_eval_judge.csv.gz`` with columns
``model,item,score,input_tokens,output_tokens``: scores rounded to 6 decimals,
token estimates to 1 decimal.  They hold only numbers, system/model names and
numeric item ids computed from the data -- no text from it.  The gzip output is
reproducible (no time stamp), so re-running on the same data gives the same bytes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from lm_eval_adaptive.data.alpaca_eval import load_alpaca_eval  # noqa: E402
from lm_eval_adaptive.data.wmt24 import load_wmt24  # noqa: E402
from lm_eval_adaptive.data.responses import ResponseTable  # noqa: E402

OUT_DIR = REPO / "lm_eval_adaptive" / "data"
SCORE_DECIMALS = 6
TOKEN_DECIMALS = 1


def rounded(table: ResponseTable) -> ResponseTable:
    """The same table with scores and token estimates rounded for storage."""
    return ResponseTable(
        models=table.models,
        items=table.items,
        model_idx=table.model_idx,
        item_idx=table.item_idx,
        score=np.round(table.score, SCORE_DECIMALS),
        input_tokens=np.round(table.input_tokens, TOKEN_DECIMALS),
        output_tokens=np.round(table.output_tokens, TOKEN_DECIMALS),
        source=table.source,
        metric=table.metric,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=None, help="data directory (default: see data_root)")
    parser.add_argument("--out-dir", default=str(OUT_DIR), help="where to write the tables")
    args = parser.parse_args(argv)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = {
        "wmt24_en-de_chrf.csv.gz": lambda: load_wmt24("en-de", "chrf", root=args.root),
        "alpaca_eval_judge.csv.gz": lambda: load_alpaca_eval("judge", root=args.root),
    }
    for filename, load in jobs.items():
        table = load()
        path = rounded(table).write(out_dir / filename)
        print(
            f"{path}: {table.n_models} models, {table.n_items} items, "
            f"{table.n_obs} rows, {path.stat().st_size} bytes"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The Open LLM Leaderboard tables ``ollb/<name>`` (lm_eval_adaptive.data.ollb).

The tests on the real data read it from ``../shared/data/binary`` (or ``$LM_EVAL_ADAPTIVE_DATA``)
and are skipped where that folder is absent; the others use a small made-up file.
"""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from lm_eval_adaptive.data.data_root import data_root
from lm_eval_adaptive.data.named_tables import NAMED_TABLES, load_named, named_item_field
from lm_eval_adaptive.data.ollb import OLLB_NAMES, OLLB_OPTIONS, OLLB_REPORT, OLLB_TUNING, load_ollb
from lm_eval_adaptive.errors import InputError


def _binary_root():
    try:
        root = data_root()
    except InputError:
        return None
    return root if (root / "binary").is_dir() else None


ROOT = _binary_root()
needs_data = pytest.mark.skipif(ROOT is None, reason="../shared/data/binary not found")

# (models, items, scores) of each file, as its README states them
SHAPES = {
    "mmlu_pro_math_7b": (539, 1351, 728189),
    "bbh_shuffled_objects_5": (4027, 250, 1006750),
    "tiny_gsm8k": (3741, 100, 374100),
    "tiny_hellaswag": (3467, 97, 336299),
    "tiny_truthfulqa": (4635, 97, 449595),
}


def test_names_halves_and_options():
    assert [f"ollb/{n}" for n in OLLB_NAMES] == [n for n in NAMED_TABLES if n.startswith("ollb/")]
    assert set(OLLB_TUNING) | set(OLLB_REPORT) == set(OLLB_NAMES) and not set(OLLB_TUNING) & set(OLLB_REPORT)
    assert OLLB_OPTIONS["tiny_gsm8k"] == 0 and OLLB_OPTIONS["mmlu_pro_math_7b"] == 10
    assert named_item_field("ollb/tiny_gsm8k") is None  # no task config


def test_made_up_file_and_refusals(tmp_path):
    (tmp_path / "binary").mkdir()
    with gzip.open(tmp_path / "binary" / "tiny_gsm8k.csv.gz", "wt") as f:
        f.write("model,item,score\nm1,7,1\nm1,9,0\nm2,7,0\nm2,9,0\n")
    t = load_named("ollb/tiny_gsm8k", root=tmp_path)
    assert t.metric == "ollb/tiny_gsm8k" and list(t.models) == ["m1", "m2"] and sorted(t.items) == ["7", "9"]
    np.testing.assert_array_equal(np.nanmean(t.mean_matrix(), axis=1), [0.5, 0.0])
    with pytest.raises(InputError, match="required file not found"):
        load_ollb("tiny_hellaswag", root=tmp_path)
    with pytest.raises(InputError, match="unknown Open LLM Leaderboard table 'mmlu'.*tiny_truthfulqa"):
        load_ollb("mmlu", root=tmp_path)


@needs_data
@pytest.mark.parametrize("name", OLLB_NAMES)
def test_real_tables_match_their_readme(name):
    t = load_named(f"ollb/{name}")
    assert t.metric == f"ollb/{name}"
    assert (t.n_models, t.n_items, t.n_obs) == SHAPES[name]
    assert np.all((t.score == 0) | (t.score == 1))
    # one score per (model, item): every table is a full matrix
    assert t.count_matrix().max() == 1 and t.n_obs == t.n_models * t.n_items

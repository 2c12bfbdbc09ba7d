"""Tests for lm_eval_adaptive.data.responses: reading, validating and writing tables."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lm_eval_adaptive.data import responses, score_outliers
from lm_eval_adaptive.data.responses import ResponseTable
from lm_eval_adaptive.data.table_files import read_table
from lm_eval_adaptive.errors import InputError

GOOD_CSV = (
    "model,item,score,input_tokens,output_tokens\n"
    "m1,0001,0.5,10,20\n"
    "m2,0001,0.25,10,\n"
    "m1,0002,1.0,,\n"
    "m1,0001,0.7,12,22\n"
)


def write_text(path: Path, text: str) -> Path:
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode("utf-8")))
    else:
        path.write_text(text, encoding="utf-8")
    return path


def small_table() -> ResponseTable:
    return ResponseTable.from_columns(
        model=["a", "b", "a", "b", "a", "c"],
        item=["x", "x", "x", "y", "z", "z"],
        score=[0.1, 0.2, 0.3, 0.4, 0.5, 1 / 3],
        input_tokens=[1.0, 2.0, 3.0, np.nan, 5.0, 7.0],
        output_tokens=[np.nan, np.nan, 4.0, 8.0, np.nan, 2.5],
        source="small",
        metric="demo",
    )


# --------------------------------------------------------------------------- #
# Reading good files
# --------------------------------------------------------------------------- #


def test_read_csv_keeps_string_ids_and_repeats(tmp_path):
    t = read_table(write_text(tmp_path / "s.csv", GOOD_CSV), metric="m")
    assert list(t.models) == ["m1", "m2"]
    assert list(t.items) == ["0001", "0002"]
    assert t.n_models == 2 and t.n_items == 2 and t.n_obs == 4
    assert t.metric == "m" and t.source.endswith("s.csv")
    assert t.model_idx.dtype == np.int64 and t.score.dtype == np.float64
    np.testing.assert_allclose(t.score, [0.5, 0.25, 1.0, 0.7])
    np.testing.assert_allclose(t.input_tokens, [10, 10, np.nan, 12])
    np.testing.assert_allclose(t.output_tokens, [20, np.nan, np.nan, 22])


def test_read_tsv_jsonl_ndjson_parquet(tmp_path):
    t = read_table(write_text(tmp_path / "s.tsv", GOOD_CSV.replace(",", "\t")))
    assert list(t.items) == ["0001", "0002"] and t.n_obs == 4
    lines = "\n".join(
        json.dumps(r)
        for r in [
            {"model": "m1", "item": "0001", "score": 0.5},
            {"model": "m2", "item": 7, "score": 1, "input_tokens": None},
        ]
    )
    for name in ("s.jsonl", "s.ndjson", "s.jsonl.gz"):
        t = read_table(write_text(tmp_path / name, lines + "\n"))
        assert list(t.items) == ["0001", "7"]
        np.testing.assert_allclose(t.score, [0.5, 1.0])
        assert np.isnan(t.input_tokens).all()
    pd.DataFrame({"model": ["a", "b"], "item": [1, 2], "score": [0.0, 1.0]}).to_parquet(
        tmp_path / "s.parquet"
    )
    t = read_table(tmp_path / "s.parquet")
    assert list(t.items) == ["1", "2"] and np.isnan(t.output_tokens).all()


def test_score_column_option(tmp_path):
    p = write_text(tmp_path / "s.csv", "model,item,acc\na,1,0.5\nb,1,0.6\n")
    t = read_table(p, score_column="acc")
    np.testing.assert_allclose(t.score, [0.5, 0.6])
    with pytest.raises(InputError, match=r"s\.csv: missing required column 'score'"):
        read_table(p)
    with pytest.raises(InputError, match="missing required column 'f1'.*'acc'"):
        read_table(p, score_column="f1")


def test_blank_lines_are_skipped_but_rows_stay_numbered(tmp_path):
    p = write_text(tmp_path / "s.csv", "model,item,score\na,1,0.5\n\nb,1,0.6\nb,2,bad\n")
    with pytest.raises(InputError, match=r"s\.csv, row 5: score 'bad' is not a number"):
        read_table(p)
    t = read_table(write_text(tmp_path / "ok.csv", "model,item,score\na,1,0.5\n\nb,1,0.6\n\n"))
    assert t.n_obs == 2


# --------------------------------------------------------------------------- #
# Bad input: every error names the file and, where there is one, the row
# --------------------------------------------------------------------------- #

BAD_CSV_CASES = [
    # (body after header, row, message regex)
    ("a,1,0.5\nb,1,abc\n", 3, r"score 'abc' is not a number"),
    ("a,1,0.5\nb,1,\n", 3, r"score is empty"),
    ("a,1,0.5\nb,1,0.2\na,2,nan\n", 4, r"score is missing \(NaN\)"),
    ("a,1,0.5\nb,1,inf\n", 3, r"score 'inf' is not finite"),
    ("a,1,-Infinity\nb,1,0.1\n", 2, r"score '-Infinity' is not finite"),
    ("a,1,0.5\n ,1,0.5\n", 3, r"model is empty"),
    ("a,1,0.5\nb,,0.5\n", 3, r"item is empty"),
    ("a,1,0.5,3\nb,1,0.5,-2\n", 3, r"input_tokens '-2' is negative"),
    ("a,1,0.5,x\nb,1,0.5,2\n", 2, r"input_tokens 'x' is not a number"),
]


@pytest.mark.parametrize("body,row,message", BAD_CSV_CASES)
def test_bad_csv_values_name_file_and_row(tmp_path, body, row, message):
    header = "model,item,score,input_tokens\n" if "tokens" in message else "model,item,score\n"
    p = write_text(tmp_path / "scores.csv", header + body)
    with pytest.raises(InputError, match=rf"scores\.csv, row {row}: {message}") as info:
        read_table(p)
    assert info.value.row == row and info.value.path.endswith("scores.csv")


def test_bad_output_tokens(tmp_path):
    p = write_text(tmp_path / "t.csv.gz", "model,item,score,output_tokens\na,1,0.5,1\nb,1,0.5,-0.5\n")
    with pytest.raises(InputError, match=r"t\.csv\.gz, row 3: output_tokens '-0.5' is negative"):
        read_table(p)


def test_bad_jsonl_rows_are_line_numbers(tmp_path):
    lines = [
        {"model": "a", "item": 1, "score": 0.5},
        {"model": "b", "item": 1, "score": 0.5},
        {"model": "b", "item": 2, "score": None},
    ]
    body = json.dumps(lines[0]) + "\n\n" + json.dumps(lines[1]) + "\n" + json.dumps(lines[2]) + "\n"
    p = write_text(tmp_path / "s.jsonl", body)
    with pytest.raises(InputError, match=r"s\.jsonl, row 4: score is missing \(NaN\)"):
        read_table(p)
    p = write_text(tmp_path / "m.jsonl", body.replace('"model": "b"', '"model": null', 1))
    with pytest.raises(InputError, match=r"m\.jsonl, row 3: model is empty"):
        read_table(p)
    p = write_text(tmp_path / "s2.jsonl", json.dumps(lines[0]) + '\n{"model": "b", "item": 1, "score": "x"}\n')
    with pytest.raises(InputError, match=r"s2\.jsonl, row 2: score 'x' is not a number"):
        read_table(p)
    p = write_text(tmp_path / "j.jsonl", json.dumps(lines[0]) + "\n{not json\n")
    with pytest.raises(InputError, match=r"j\.jsonl, row 2: invalid JSON"):
        read_table(p)


def test_bad_parquet_row(tmp_path):
    pd.DataFrame({"model": ["a", "b", "b"], "item": ["1", "1", "2"],
                  "score": [0.1, np.nan, 0.3]}).to_parquet(tmp_path / "s.parquet")
    with pytest.raises(InputError, match=r"s\.parquet, row 2: score is missing"):
        read_table(tmp_path / "s.parquet")


def test_missing_columns_are_named_with_columns_found(tmp_path):
    p = write_text(tmp_path / "s.csv", "model,itm,value\na,1,0.5\n")
    with pytest.raises(InputError) as info:
        read_table(p)
    msg = str(info.value)
    assert msg.startswith(str(p))
    assert "missing required columns 'item', 'score'" in msg
    assert "columns found: 'model', 'itm', 'value'" in msg


def test_empty_tables(tmp_path):
    with pytest.raises(InputError, match=r"e\.csv: the table has no rows"):
        read_table(write_text(tmp_path / "e.csv", "model,item,score\n"))
    with pytest.raises(InputError, match=r"e2\.csv: the table has no rows"):
        read_table(write_text(tmp_path / "e2.csv", "model,item,score\n\n\n"))
    with pytest.raises(InputError, match=r"e3\.csv: cannot read CSV"):
        read_table(write_text(tmp_path / "e3.csv", ""))
    with pytest.raises(InputError, match=r"e\.jsonl: missing required column"):
        read_table(write_text(tmp_path / "e.jsonl", "\n"))


def test_one_model_is_not_enough(tmp_path):
    p = write_text(tmp_path / "one.csv", "model,item,score\na,1,0.5\na,2,0.6\n")
    with pytest.raises(InputError, match=r"one\.csv: need at least 2 distinct models, found 1"):
        read_table(p)


def test_unreadable_and_unknown_format(tmp_path):
    with pytest.raises(InputError, match=r"s\.xlsx: unknown table format"):
        read_table(write_text(tmp_path / "s.xlsx", GOOD_CSV))
    with pytest.raises(InputError, match=r"nope\.csv: file not found"):
        read_table(tmp_path / "nope.csv")
    with pytest.raises(InputError, match=r"bad\.csv\.gz: cannot read CSV"):
        read_table(_bytes(tmp_path / "bad.csv.gz", b"not gzip at all"))
    with pytest.raises(InputError, match=r"bad\.parquet: cannot read PARQUET"):
        read_table(_bytes(tmp_path / "bad.parquet", b"not parquet"))
    (tmp_path / "dir.csv").mkdir()
    with pytest.raises(InputError, match=r"dir\.csv: not a file"):
        read_table(tmp_path / "dir.csv")


def _bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_from_columns_validates():
    with pytest.raises(InputError, match=r"<memory>, row 2: score 'x' is not a number"):
        ResponseTable.from_columns(["a", "b"], ["1", "1"], [0.5, "x"])
    with pytest.raises(InputError, match=r"mem, row 1: score is missing"):
        ResponseTable.from_columns(["a", "b"], ["1", "1"], [np.nan, 0.5], source="mem")
    with pytest.raises(InputError, match=r"row 2: model is empty"):
        ResponseTable.from_columns(["a", ""], ["1", "1"], [0.5, 0.5])
    with pytest.raises(InputError, match=r"row 1: input_tokens '-1.0' is negative"):
        ResponseTable.from_columns(["a", "b"], ["1", "1"], [0.5, 0.5], input_tokens=[-1.0, 2.0])
    with pytest.raises(InputError, match="column item has 1 values"):
        ResponseTable.from_columns(["a", "b"], ["1"], [0.5, 0.5])
    with pytest.raises(InputError, match="at least 2 distinct models"):
        ResponseTable.from_columns(["a", "a"], ["1", "2"], [0.5, 0.5])
    with pytest.raises(InputError, match="no rows"):
        ResponseTable.from_columns([], [], [])


@pytest.mark.parametrize("header", ["model,item,score,score", "model,item,score, score",
                                    "score,model,item,score"])
@pytest.mark.parametrize("name", ["s.csv", "s.csv.gz", "s.tsv"])
def test_a_repeated_csv_column_is_refused(tmp_path, header, name):
    sep = "\t" if name.endswith(".tsv") else ","
    body = "m1,1,0.5,0.9\nm2,1,0.25,0.3\n" if header.startswith("model") else "0.5,m1,1,0.9\n0.25,m2,1,0.3\n"
    p = write_text(tmp_path / name, (header + "\n" + body).replace(",", sep))
    with pytest.raises(InputError, match=rf"^{tmp_path}/{name}: column 'score' appears 2 times"):
        read_table(p)


def test_empty_header_names_may_repeat(tmp_path):
    p = write_text(tmp_path / "s.csv", "model,item,score,,\nm1,1,0.5,,\nm2,1,0.25,,\n")
    assert read_table(p).n_obs == 2


def test_a_repeated_column_in_jsonl_and_parquet_is_refused(tmp_path):
    lines = ('{"model": "m1", "item": 1, "score": 0.5}\n\n'
             '{"model": "m2", "item": 1, "score": 0.25, "score": 0.9}\n')
    with pytest.raises(InputError, match=r"s\.jsonl, row 3: key 'score' appears more than once"):
        read_table(write_text(tmp_path / "s.jsonl", lines))
    lines = '{"model": "m1", "item": 1, "score": 0.5, " score": 0.1}\n{"model": "m2", "item": 1, "score": 0.2}\n'
    with pytest.raises(InputError, match=r"s2\.jsonl, row 1: key 'score' appears more than once"):
        read_table(write_text(tmp_path / "s2.jsonl", lines))
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table([pa.array(["a", "b"]), pa.array(["1", "1"]), pa.array([0.1, 0.2]),
                             pa.array([0.3, 0.4])], names=["model", "item", "score", "score"]),
                   tmp_path / "s.parquet")
    with pytest.raises(InputError) as ei:
        read_table(tmp_path / "s.parquet")
    assert str(ei.value) == f"{tmp_path}/s.parquet: column 'score' appears 2 times; each column may appear only once"


# --------------------------------------------------------------------------- #
# Outlying scores
# --------------------------------------------------------------------------- #


def _bulk_frame(n_models=4, n_items=30, scale=1.0, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "model": np.repeat([f"m{j}" for j in range(n_models)], n_items),
        "item": np.tile([f"i{i:02d}" for i in range(n_items)], n_models),
        "score": np.round(rng.uniform(0, scale, n_models * n_items), 4),
    })


@pytest.mark.parametrize("scale,value", [(1.0, -12540.0), (1.0, 1e300), (100.0, -12540.0),
                                         (100.0, 1e300), (1.0, 12.0)])
@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_one_corrupt_score_is_refused_naming_row_model_item_value(tmp_path, suffix, scale, value):
    frame = _bulk_frame(scale=scale)
    frame.loc[37, "score"] = value  # model m1, item i07
    path = tmp_path / f"t{suffix}"
    if suffix == ".csv":
        frame.to_csv(path, index=False)
        row = 39  # header is row 1
    elif suffix == ".jsonl":
        frame.to_json(path, orient="records", lines=True, double_precision=15)
        row = 38
    else:
        frame.to_parquet(path)
        row = 38
    with pytest.raises(InputError) as ei:
        read_table(path)
    msg = str(ei.value)
    assert msg.startswith(f"{path}, row {row}: score {value!r} of model 'm1' on item 'i07' is far outside")
    assert "\n" not in msg and ei.value.row == row
    # the opt-out keeps the value, and the table remembers it
    t = read_table(path, allow_outliers=True)
    assert value in t.score and t.outliers_allowed
    assert t.select_models(["m1", "m0"]).outliers_allowed


def test_outlier_rule_counts_further_outliers_and_covers_from_columns():
    score = np.linspace(0, 1, 200)
    score[[5, 150]] = [-50.0, 75.0]
    models = ["a", "b"] * 100
    with pytest.raises(InputError, match=r"^mem, row 6: score -50\.0 of model 'b' on item '5'.*; 1 more score too"):
        ResponseTable.from_columns(models, [str(i) for i in range(200)], score, source="mem")
    ResponseTable.from_columns(models, [str(i) for i in range(200)], score, allow_outliers=True)


def test_outlier_fences_rule():
    # the fences are P1 - 10 s and P99 + 10 s, s = P99 - P1, from order statistics that
    # leave out the single extreme value of a small table, so one outlier cannot widen them
    x = np.r_[np.linspace(0.0, 1.0, 99), 1e300]
    p1, p99 = x[1], x[98]  # 100 scores: the 2nd smallest and 2nd largest
    spread = p99 - p1
    assert score_outliers.outlier_fences(x) == pytest.approx((p1 - 10 * spread, p99 + 10 * spread))
    assert score_outliers.outlier_fences(np.r_[np.zeros(99), 1e300]) is None  # no spread to judge by
    # near-binary scores (most at 0, some at 1) are the bulk, not outliers
    y = np.r_[np.zeros(900), np.ones(100), 1e-7]
    lo, hi = score_outliers.outlier_fences(y)
    assert lo <= 0 and hi >= 1


# --------------------------------------------------------------------------- #
# Matrices and subsets
# --------------------------------------------------------------------------- #


def test_mean_and_count_matrix_with_repeats_and_missing_pairs():
    t = small_table()
    assert list(t.models) == ["a", "b", "c"] and list(t.items) == ["x", "y", "z"]
    counts = t.count_matrix()
    np.testing.assert_array_equal(counts, [[2, 0, 1], [1, 1, 0], [0, 0, 1]])
    assert counts.dtype == np.int64
    mean = t.mean_matrix()
    np.testing.assert_allclose(
        mean, [[0.2, np.nan, 0.5], [0.2, 0.4, np.nan], [np.nan, np.nan, 1 / 3]]
    )
    assert mean.shape == (t.n_models, t.n_items)


def test_item_tokens_nanmean():
    inp, out = small_table().item_tokens()
    np.testing.assert_allclose(inp, [2.0, np.nan, 6.0])
    np.testing.assert_allclose(out, [4.0, 8.0, 2.5])


def test_select_models_keeps_items_aligned():
    t = small_table()
    s = t.select_models(["c", "a"])
    assert list(s.models) == ["c", "a"]
    assert list(s.items) == list(t.items)
    assert s.n_obs == 4 and s.metric == "demo"
    full = t.mean_matrix()
    np.testing.assert_allclose(s.mean_matrix(), full[[2, 0]])
    with pytest.raises(InputError, match="unknown model.*'zz'"):
        t.select_models(["a", "zz"])
    with pytest.raises(InputError, match="more than once"):
        t.select_models(["a", "a"])


def test_arrays_are_read_only():
    t = small_table()
    with pytest.raises(ValueError):
        t.score[0] = 1.0


def test_to_frame():
    f = small_table().to_frame()
    assert list(f.columns) == ["model", "item", "score", "input_tokens", "output_tokens"]
    assert f["model"].tolist() == ["a", "b", "a", "b", "a", "c"]


# --------------------------------------------------------------------------- #
# Writing
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".jsonl", ".jsonl.gz", ".parquet"])
def test_round_trip(tmp_path, suffix):
    t = ResponseTable.from_columns(
        model=["m 1", "m,2", 'm"3', "m 1"],
        item=["0001", "0002", "0001", "0001"],
        score=[0.1, 1 / 3, 2.0**-40, 0.123456789012345678],
        input_tokens=[1.5, np.nan, 3.0, 4.0],
        output_tokens=[np.nan, np.nan, np.nan, 1e6],
    )
    path = t.write(tmp_path / f"t{suffix}")
    back = read_table(path)
    assert list(back.models) == list(t.models)
    assert list(back.items) == ["0001", "0002"]
    np.testing.assert_array_equal(back.model_idx, t.model_idx)
    np.testing.assert_array_equal(back.item_idx, t.item_idx)
    np.testing.assert_array_equal(back.score, t.score)  # exact
    np.testing.assert_array_equal(back.input_tokens, t.input_tokens)
    np.testing.assert_array_equal(back.output_tokens, t.output_tokens)
    assert [p.name for p in tmp_path.iterdir()] == [f"t{suffix}"]


def test_gzip_output_is_reproducible(tmp_path):
    t = small_table()
    a = t.write(tmp_path / "a.csv.gz").read_bytes()
    b = t.write(tmp_path / "b.csv.gz").read_bytes()
    assert a == b


def test_write_to_missing_directory_leaves_nothing(tmp_path):
    target = tmp_path / "missing" / "t.csv"
    with pytest.raises(InputError, match="does not exist"):
        small_table().write(target)
    assert list(tmp_path.iterdir()) == []


def test_write_unknown_suffix(tmp_path):
    with pytest.raises(InputError, match=r"t\.xlsx: cannot write this format"):
        small_table().write(tmp_path / "t.xlsx")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("suffix", [".csv.gz", ".parquet"])
def test_failure_mid_write_leaves_old_file_and_no_temp(tmp_path, monkeypatch, suffix):
    target = tmp_path / f"t{suffix}"
    target.write_bytes(b"old contents")

    real_fdopen = os.fdopen

    class Boom(RuntimeError):
        pass

    class FailingFile:
        """Writes half of the first chunk, then fails."""

        def __init__(self, f):
            self._f = f

        def write(self, data):
            self._f.write(bytes(data)[: max(1, len(data) // 2)])
            self._f.flush()
            raise Boom("disk full")

        def __getattr__(self, name):
            return getattr(self._f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._f.close()
            return False

    monkeypatch.setattr(responses.os, "fdopen", lambda *a, **k: FailingFile(real_fdopen(*a, **k)))
    with pytest.raises(Exception):
        small_table().write(target)
    assert target.read_bytes() == b"old contents"
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


def test_failure_in_replace_leaves_no_temp(tmp_path, monkeypatch):
    def fail(*args, **kwargs):
        raise OSError("rename failed")

    monkeypatch.setattr(responses.os, "replace", fail)
    with pytest.raises(OSError, match="rename failed"):
        small_table().write(tmp_path / "t.jsonl")
    assert list(tmp_path.iterdir()) == []


def test_a_table_file_is_labelled_by_its_whole_stem(tmp_path):
    """Issue 32: ``wmt23.en-ja.bleu`` and ``wmt23.de-en.chrf`` were both labelled ``wmt23``."""
    from lm_eval_adaptive.data.tables import load_any_table

    labels = []
    for name in ("wmt23.en-ja.bleu.csv", "wmt23.de-en.chrf.csv.gz"):
        p = tmp_path / name
        text = "model,item,score\n" + "".join(f"m{j},{i},{(i * 7 + j) % 10 / 10}\n" for j in range(3) for i in range(5))
        if name.endswith(".gz"):
            import gzip
            p.write_bytes(gzip.compress(text.encode()))
        else:
            p.write_text(text)
        labels.append(load_any_table(str(p)).metric)
    assert labels == ["wmt23.en-ja.bleu", "wmt23.de-en.chrf"]

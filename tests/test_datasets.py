"""Tests for the real-data loaders (lm_eval_adaptive.data: wmt24, wmt25, alpaca_eval, named_tables) and demo tables.

Tests on the real data read it from ``../shared/data`` (relative to the repo
root) or from ``$LM_EVAL_ADAPTIVE_DATA``; they are skipped when it is absent.
WMT tables are cached (``~/.cache/lm-eval-adaptive``): the first run scores the
segments (a few seconds per table), later runs are fast.
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
from sacrebleu.metrics import BLEU, CHRF

from lm_eval_adaptive.data import wmt24
from lm_eval_adaptive.data.alpaca_eval import load_alpaca_eval
from lm_eval_adaptive.data.data_root import DATA_ENV, data_root
from lm_eval_adaptive.data.named_tables import NAMED_TABLES, load_named
from lm_eval_adaptive.data.progress import progress, progress_hook
from lm_eval_adaptive.data.wmt24 import load_wmt24
from lm_eval_adaptive.data.wmt25 import WMT25_METRICS, WMT25_PAIRS, load_wmt25
from lm_eval_adaptive.data.table_files import read_table
from lm_eval_adaptive.errors import InputError

PACKAGE_DATA = Path(wmt24.__file__).resolve().parent


def _real_root() -> Path | None:
    try:
        return data_root()
    except InputError:
        return None


REAL_ROOT = _real_root()
needs_data = pytest.mark.skipif(
    REAL_ROOT is None,
    reason=f"real data not found (../shared/data next to the repo, or ${DATA_ENV})",
)


def lines_of(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


# --------------------------------------------------------------------------- #
# Synthetic WMT-like data (made-up sentences) for fast, data-free tests
# --------------------------------------------------------------------------- #


def make_fake_wmt(root: Path, pair: str = "en-de") -> Path:
    base = root / "wmt24" / pair
    (base / "systems").mkdir(parents=True)
    src = ["canary line", "the cat sat", "a dog ran", "empty ref here", "birds fly high"]
    ref = ["canary", "die katze sass", "ein hund lief", "   ", "voegel fliegen hoch"]
    docs = ["canary\tcanary", "news\td1", "news\td1", "social\td2", "speech\td3"]
    (base / "source.txt").write_text("\n".join(src) + "\n", encoding="utf-8")
    (base / "reference.txt").write_text("\n".join(ref) + "\n", encoding="utf-8")
    (base / "documents.tsv").write_text("\n".join(docs) + "\n", encoding="utf-8")
    hyps = {
        "SysA": ["x", "die katze sass", "ein hund lief", "y", "voegel fliegen hoch"],
        "SysB": ["x", "die hund sass", "", "y", "voegel hoch"],
        "SysC": ["x", "katze", "ein hund", "y", "fliegen"],
    }
    for name, h in hyps.items():
        (base / "systems" / f"{name}.txt").write_text("\n".join(h) + "\n", encoding="utf-8")
    return base


@pytest.fixture
def fake_root(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = tmp_path / "data"
    make_fake_wmt(root)
    return root


def test_fake_wmt_skips_canary_and_empty_refs(fake_root):
    t = load_wmt24("en-de", "bleu", root=fake_root)
    assert list(t.models) == ["SysA", "SysB", "SysC"]
    assert list(t.items) == ["1", "2", "4"]
    assert t.metric == "wmt24/en-de/bleu"
    m = t.mean_matrix()
    np.testing.assert_allclose(m[0], 1.0)
    assert m[1, 1] == 0.0  # empty hypothesis
    bleu = BLEU(effective_order=True)
    assert m[2, 2] == pytest.approx(bleu.sentence_score("fliegen", ["voegel fliegen hoch"]).score / 100)
    inp, out = t.item_tokens()
    np.testing.assert_allclose(inp, [len("the cat sat") / 4, len("a dog ran") / 4, len("birds fly high") / 4])
    np.testing.assert_allclose(out, [len("die katze sass") / 4, len("ein hund lief") / 4,
                                     len("voegel fliegen hoch") / 4])
    c = load_wmt24("en-de", "chrf", root=fake_root, systems=["SysC", "SysA"])
    assert list(c.models) == ["SysC", "SysA"]
    assert c.mean_matrix()[0, 0] == pytest.approx(CHRF().sentence_score("katze", ["die katze sass"]).score / 100)


def test_fake_wmt_cache_is_used_and_invalidated(fake_root, tmp_path, monkeypatch):
    first = load_wmt24("en-de", "chrf", root=fake_root)
    cached = list((tmp_path / "cache" / "lm-eval-adaptive").glob("*.npz"))
    assert len(cached) == 1 and cached[0].name.startswith("wmt24_en-de_chrf_")

    def no_scoring(*args, **kwargs):
        raise AssertionError("should have been read from the cache")

    monkeypatch.setattr(wmt24, "_score_segments", no_scoring)
    second = load_wmt24("en-de", "chrf", root=fake_root)
    np.testing.assert_array_equal(second.score, first.score)
    assert list(second.items) == list(first.items) and list(second.models) == list(first.models)
    # Without the cache, or after an input changes, it scores again.
    with pytest.raises(AssertionError, match="cache"):
        load_wmt24("en-de", "chrf", root=fake_root, cache=False)
    (fake_root / "wmt24/en-de/systems/SysB.txt").write_text("x\na\nb\nc\nd\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="cache"):
        load_wmt24("en-de", "chrf", root=fake_root)


def test_fake_wmt_parallel_matches_serial(fake_root, monkeypatch):
    serial = load_wmt24("en-de", "bleu", root=fake_root, cache=False)
    monkeypatch.setattr(wmt24, "_PARALLEL_SECONDS", 0.0)
    monkeypatch.setattr(wmt24.os, "cpu_count", lambda: 2)
    parallel = load_wmt24("en-de", "bleu", root=fake_root, cache=False)
    np.testing.assert_array_equal(parallel.score, serial.score)


def test_scoring_tells_the_commands_progress_hook_and_prints_nothing(fake_root, monkeypatch, capfd):
    told = []

    @contextlib.contextmanager
    def hook(description, total):
        told.append((description, total, "open"))
        yield lambda: told.append("advance")
        told.append("closed")

    with progress_hook(hook):
        load_wmt24("en-de", "chrf", root=fake_root, cache=False)
        monkeypatch.setattr(wmt24, "_PARALLEL_SECONDS", 0.0)  # the worker processes' path tells it too
        monkeypatch.setattr(wmt24.os, "cpu_count", lambda: 2)
        load_wmt24("en-de", "bleu", root=fake_root, cache=False, systems=["SysB", "SysA"])
    load_wmt24("en-de", "chrf", root=fake_root, cache=False)  # no hook: nothing told, nothing shown
    assert told == [("scoring WMT24 en-de chrf", 3, "open"), *["advance"] * 3, "closed",
                    ("scoring WMT24 en-de bleu", 2, "open"), *["advance"] * 2, "closed"]
    assert capfd.readouterr() == ("", "")
    with progress("anything", 5) as advance:  # without a hook: a step that does nothing
        assert advance() is None


def test_wmt_system_with_wrong_line_count(fake_root):
    bad = fake_root / "wmt24/en-de/systems/SysB.txt"
    bad.write_text("only\ntwo\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"SysB\.txt: has 2 lines, source\.txt has 5"):
        load_wmt24("en-de", "bleu", root=fake_root, cache=False)


def test_wmt_bad_arguments(fake_root):
    with pytest.raises(InputError, match="unknown WMT24 pair 'de-en'.*en-de, en-es, en-ja, en-zh"):
        load_wmt24("de-en", root=fake_root)
    with pytest.raises(InputError, match="unknown WMT24 metric 'ter'.*bleu, chrf"):
        load_wmt24("en-de", "ter", root=fake_root)
    with pytest.raises(InputError, match="unknown system.*'Nope'.*SysA"):
        load_wmt24("en-de", root=fake_root, systems=["SysA", "Nope"])
    with pytest.raises(InputError, match="required file not found"):
        load_wmt24("en-es", root=fake_root)


def test_named_tables_and_unknown_name():
    assert "wmt24/en-de/bleu" in NAMED_TABLES and "alpaca_eval/judge" in NAMED_TABLES
    assert "alpaca_eval/win" in NAMED_TABLES
    assert len(NAMED_TABLES) == 8 + 2 + 8 * 5 + 5 + 3  # WMT24, AlpacaEval (judge, win), WMT25, Open LLM Leaderboard, REALSumm
    with pytest.raises(InputError, match="unknown table 'wmt24/fr-de/bleu'; valid names: wmt24/en-de/bleu"):
        load_named("wmt24/fr-de/bleu")
    with pytest.raises(InputError, match="alpaca_eval/judge"):
        load_named("mmlu")
    with pytest.raises(InputError, match="unknown AlpacaEval metric 'rouge'.*judge"):
        load_alpaca_eval("rouge")


def test_data_root_resolution(tmp_path, monkeypatch):
    assert data_root(tmp_path) == tmp_path
    with pytest.raises(InputError, match="does not exist"):
        data_root(tmp_path / "nope")
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    assert data_root() == tmp_path
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "nope"))
    with pytest.raises(InputError, match=DATA_ENV):
        data_root()


# --------------------------------------------------------------------------- #
# Real data
# --------------------------------------------------------------------------- #


@needs_data
def test_wmt24_en_de_bleu():
    t = load_wmt24("en-de", "bleu")
    base = REAL_ROOT / "wmt24" / "en-de"
    assert t.n_models == 26
    assert 980 <= t.n_items <= 997
    assert t.n_obs == t.n_models * t.n_items
    assert t.metric == "wmt24/en-de/bleu"
    assert np.all((t.score >= 0) & (t.score <= 1))
    assert 0.1 < t.score.mean() < 0.6
    docs = [d.split("\t")[0] for d in lines_of(base / "documents.tsv")]
    canary = {str(i) for i, d in enumerate(docs) if d == "canary"}
    assert "0" in canary and not canary & set(t.items)
    refs = lines_of(base / "reference.txt")
    assert all(refs[int(i)].strip() for i in t.items)
    assert set(t.models) == {p.stem for p in (base / "systems").glob("*.txt")}
    # Token estimates: characters / 4 of the source and reference.
    src = lines_of(base / "source.txt")
    inp, out = t.item_tokens()
    k = 5
    assert inp[k] == pytest.approx(len(src[int(t.items[k])]) / 4)
    assert out[k] == pytest.approx(len(refs[int(t.items[k])]) / 4)
    assert (t.count_matrix() == 1).all()


@needs_data
@pytest.mark.parametrize(
    "pair,metric,system,line",
    [
        ("en-de", "bleu", "GPT-4", 17),
        ("en-de", "chrf", "Aya23", 100),
        ("en-ja", "bleu", "Claude-3.5", 42),
        ("en-zh", "bleu", "GPT-4", 300),
    ],
)
def test_wmt24_spot_check_against_sacrebleu(pair, metric, system, line):
    base = REAL_ROOT / "wmt24" / pair
    hyp = lines_of(base / "systems" / f"{system}.txt")[line]
    ref = lines_of(base / "reference.txt")[line]
    tokenize = {"en-ja": "ja-mecab", "en-zh": "zh"}.get(pair, "13a")
    scorer = BLEU(effective_order=True, tokenize=tokenize) if metric == "bleu" else CHRF()
    expected = scorer.sentence_score(hyp, [ref]).score / 100
    t = load_wmt24(pair, metric)
    m = t.mean_matrix()
    got = m[list(t.models).index(system), list(t.items).index(str(line))]
    assert got == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("pair,tokenizer", [("en-de", "13a"), ("en-es", "13a"), ("en-ja", "ja-mecab"),
                                            ("en-zh", "zh")])
def test_bleu_tokenizer_is_sacrebleus_choice_for_the_target_language(pair, tokenizer):
    # sacrebleu chooses (BLEU(trg_lang=...)); the tables came out bit-identical to the
    # hand-chosen tokenizers they were built with before
    scorer = wmt24._make_metric("bleu", pair)
    assert scorer.trg_lang == pair.split("-")[1]
    assert scorer.tokenizer_signature.startswith(tokenizer)  # "ja-mecab-0.996-IPA"


@needs_data
def test_wmt24_en_ja_bleu_uses_mecab():
    t = load_wmt24("en-ja", "bleu")
    assert t.n_models == 23 and "0" not in set(t.items)
    # With whitespace tokenization nearly every Japanese segment would score 0.
    assert (t.score > 0).mean() > 0.5
    assert 0.05 < t.score.mean() < 0.6


@needs_data
def test_wmt24_en_de_chrf_values():
    t = load_wmt24("en-de", "chrf")
    b = load_wmt24("en-de", "bleu")
    assert list(t.items) == list(b.items) and list(t.models) == list(b.models)
    assert np.all((t.score >= 0) & (t.score <= 1))
    assert 0.3 < t.score.mean() < 0.8
    # chrF is smoother than BLEU: far fewer exact zeros, higher on average.
    assert (t.score == 0).mean() < (b.score == 0).mean() + 1e-9
    assert t.score.mean() > b.score.mean()


@needs_data
def test_alpaca_eval_judge():
    t = load_alpaca_eval()
    base = REAL_ROOT / "alpaca_eval"
    assert t.n_models == 28 and t.n_items <= 805 and t.n_items > 700
    assert t.metric == "alpaca_eval/judge"
    assert np.all((t.score >= 0) & (t.score <= 1))
    assert np.isfinite(t.score).all()
    assert t.count_matrix().max() == 1
    # Spot check: one judgement is preference - 1.
    model = "claude-2"
    records = [json.loads(x) for x in lines_of(base / "judge" / f"{model}.jsonl") if x.strip()]
    rec = next(r for r in records[10:] if r["preference"] is not None and not math.isnan(r["preference"]))
    m = t.mean_matrix()
    assert m[list(t.models).index(model), list(t.items).index(str(rec["id"]))] == pytest.approx(
        rec["preference"] - 1
    )
    items = {json.loads(x)["id"]: json.loads(x) for x in lines_of(base / "items.jsonl")}
    inp, out = t.item_tokens()
    k = list(t.items).index(str(rec["id"]))
    assert inp[k] == pytest.approx(len(items[rec["id"]]["instruction"]) / 4)
    assert np.isfinite(out).all() and (out > 0).all()


@needs_data
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.slow)
        if n in ("wmt24/en-es/bleu", "wmt24/en-es/chrf", "wmt24/en-ja/chrf", "wmt24/en-zh/chrf")
        else n
        for n in NAMED_TABLES if not n.startswith(("wmt25/", "ollb/", "realsumm/"))
    ],
)
def test_load_named_real(name):
    t = load_named(name)
    assert t.metric == name
    assert t.n_models >= 19 and 700 < t.n_items <= 997
    assert np.all((t.score >= 0) & (t.score <= 1))


WMT25_RANGES = {"xcomet": (-0.2, 1.0), "cometkiwi": (-0.2, 1.0), "metricx": (-25.0, 0.0),
                "gemba-gpt4.1": (0.0, 100.0), "gemba-cmda": (0.0, 100.0)}


@needs_data
@pytest.mark.parametrize("pair", sorted(WMT25_PAIRS))
def test_wmt25_named_tables(pair):
    tables = {m: load_named(f"wmt25/{pair}/{m}") for m in WMT25_METRICS}
    first = tables["xcomet"]
    assert 27 <= first.n_models <= 43 and 332 <= first.n_items <= 457
    assert all(":" in i for i in first.items[:5])
    for metric, t in tables.items():
        lo, hi = WMT25_RANGES[metric]
        assert t.metric == f"wmt25/{pair}/{metric}"
        assert lo <= t.score.min() and t.score.max() <= hi
        assert list(t.models) == list(first.models)
        assert np.isnan(t.input_tokens).all() and np.isnan(t.output_tokens).all()  # none published
        if metric != "gemba-cmda":  # the only metric with missing (null) scores
            assert t.n_obs == t.n_models * t.n_items


@needs_data
def test_wmt25_segment_score_matches_the_file():
    t = load_named("wmt25/en-de/metricx")
    path = REAL_ROOT / "wmt25" / WMT25_PAIRS["en-de"] / f"{t.models[3]}.jsonl"
    rec = json.loads(lines_of(path)[5])
    item = f"{rec['document_id']}:1"
    m = t.mean_matrix()
    assert m[3, list(t.items).index(item)] == pytest.approx(rec["metric_scores"]["MetricX-24-Hybrid-XL"][1])


def test_wmt25_unknown_names_are_refused():
    with pytest.raises(InputError, match="unknown WMT25 pair"):
        load_wmt25("en-xx", "xcomet")
    with pytest.raises(InputError, match="unknown WMT25 metric"):
        load_wmt25("en-de", "bleu")


# --------------------------------------------------------------------------- #
# Embedded demo tables
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("name", ["wmt24_en-de_chrf.csv.gz", "alpaca_eval_judge.csv.gz"])
def test_demo_tables_are_numbers_only(name):
    t = read_table(PACKAGE_DATA / name)
    assert t.n_models >= 26 and t.n_items >= 800
    assert all(i.isdigit() for i in t.items)
    assert np.all((t.score >= 0) & (t.score <= 1))
    assert np.isfinite(t.input_tokens).all() and np.isfinite(t.output_tokens).all()


@needs_data
@pytest.mark.parametrize(
    "name,loader",
    [
        ("wmt24_en-de_chrf.csv.gz", lambda: load_wmt24("en-de", "chrf")),
        ("alpaca_eval_judge.csv.gz", lambda: load_alpaca_eval("judge")),
    ],
)
def test_demo_tables_match_loaders(name, loader):
    demo = read_table(PACKAGE_DATA / name)
    full = loader()
    assert list(demo.models) == list(full.models)
    assert list(demo.items) == list(full.items)
    np.testing.assert_array_equal(demo.count_matrix(), full.count_matrix())
    np.testing.assert_allclose(demo.mean_matrix(), full.mean_matrix(), atol=5.1e-7, rtol=0)
    for a, b in zip(demo.item_tokens(), full.item_tokens()):
        np.testing.assert_allclose(a, b, atol=0.051, rtol=0)


def test_named_tables_registry_expands_patterns_in_order_and_refuses_a_second_registration():
    from lm_eval_adaptive.data.named_tables import TABLE_REGISTRY, named_item_field, register_table

    assert list(TABLE_REGISTRY) == ["wmt24/{pair}/{metric}", "alpaca_eval/{metric}",
                                    "wmt25/{pair}/{metric}", "ollb/{name}", "realsumm/{metric}"]
    assert NAMED_TABLES[:2] == ("wmt24/en-de/bleu", "wmt24/en-de/chrf")
    assert NAMED_TABLES[8:10] == ("alpaca_eval/judge", "alpaca_eval/win")
    assert len(NAMED_TABLES) == 8 + 2 + len(WMT25_PAIRS) * len(WMT25_METRICS) + 5 + 3
    assert named_item_field("/wmt24/en-ja/chrf/") == "id" and named_item_field("wmt25/en-de/xcomet") is None
    assert named_item_field("wmt24/xx-yy/bleu") is None
    with pytest.raises(ValueError, match="already registered"):
        register_table("wmt24/{pair}/{metric}", pair=("en-de",), metric=("bleu",))(load_wmt24)
    with pytest.raises(ValueError, match="alpaca_eval/judge"):
        register_table("alpaca_eval/{m}", m=("judge",))(load_wmt24)
    assert list(TABLE_REGISTRY)[-1] == "realsumm/{metric}"


def test_realsumm_loads_by_name():
    """Issue 32: REALSumm (24 summarizers × 100 documents, ROUGE) is a dev table, loadable by name."""
    from lm_eval_adaptive.data.named_tables import load_named

    try:
        t = load_named("realsumm/rouge2")
    except InputError as e:
        pytest.skip(f"real data not available: {e}")
    assert t.metric == "realsumm/rouge2" and t.n_models == 24 and t.n_items == 100
    m = t.mean_matrix()
    assert np.all((m >= 0) & (m <= 1))
    with pytest.raises(InputError, match="rouge3"):
        load_named("realsumm/rouge3")

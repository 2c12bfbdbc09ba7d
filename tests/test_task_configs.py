"""Tests for the harness task YAMLs in task_configs/.

WMT24 and AlpacaEval tasks are built with lm-eval's TaskManager on the real data
(``../shared/data`` or ``$LM_EVAL_ADAPTIVE_DATA``); those tests are skipped when the
data are absent.  The public-dataset examples are only parsed (they download data when
run), and their helper functions are tried on small made-up docs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lm_eval_adaptive.data.data_root import data_root
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness.metrics import JUDGE_MODEL_ENV

lm_eval = pytest.importorskip("lm_eval")
from lm_eval.tasks import TaskManager
from lm_eval.tasks._yaml_loader import load_yaml

CONFIGS = Path(__file__).resolve().parents[1] / "task_configs"
WMT_TASKS = ["wmt24_en-de", "wmt24_en-es", "wmt24_en-ja", "wmt24_en-zh"]
PUBLIC_TASKS = ["flores_en-de_adaptive", "truthfulqa_gen_bertscore", "truthfulqa_gen_judge",
                "scrolls_govreport_rouge_l"]


def _root() -> Path | None:
    try:
        return data_root()
    except InputError:
        return None


ROOT = _root()
needs_wmt = pytest.mark.skipif(
    ROOT is None or not (ROOT / "wmt24" / "en-de" / "source.txt").is_file(),
    reason="WMT24 data not found (set LM_EVAL_ADAPTIVE_DATA)",
)
needs_alpaca = pytest.mark.skipif(
    ROOT is None or not (ROOT / "alpaca_eval" / "items.jsonl").is_file(),
    reason="AlpacaEval data not found (set LM_EVAL_ADAPTIVE_DATA)",
)


@pytest.fixture(scope="module")
def manager() -> TaskManager:
    return TaskManager(include_path=str(CONFIGS), include_defaults=False)


def _build(manager: TaskManager, name: str):
    loaded = manager.load([name])
    tasks = loaded["tasks"] if isinstance(loaded, dict) and "tasks" in loaded else loaded
    return tasks[name]


def test_all_tasks_are_indexed(manager):
    names = set(manager.all_tasks)
    for name in WMT_TASKS + ["alpaca_eval", "alpaca_eval_judge", "alpaca_eval_rouge_l"] + PUBLIC_TASKS:
        assert name in names
    assert "wmt24" in manager.all_tags


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("**/*.yaml")), ids=lambda p: p.name)
def test_yaml_functions_resolve(path):
    cfg = load_yaml(path, resolve_func=True)
    assert cfg["output_type"] == "generate_until"
    assert callable(cfg["process_results"])
    assert "until" in cfg["generation_kwargs"]
    for entry in cfg["metric_list"]:
        assert entry["aggregation"] == "mean" and entry["higher_is_better"] is True


@needs_wmt
def test_wmt24_en_de_task(manager):
    task = _build(manager, "wmt24_en-de")
    docs = list(task.test_docs())
    assert len(docs) == 997
    assert set(docs[0]) == {"id", "source", "reference", "domain"}
    assert "canary" not in {d["domain"] for d in docs}
    ids = [int(d["id"]) for d in docs]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    for doc in docs[:20]:
        prompt = task.doc_to_text(doc)
        assert doc["source"] in prompt
        assert prompt.startswith("Translate the following English text into German.")
        assert task.doc_to_target(doc) == doc["reference"]
        scores = task.process_results(doc, [doc["reference"]])
        assert scores == {"bleu": 1.0, "chrf": 1.0}
    # No stop sequence may truncate a multi-paragraph translation.
    assert task.config.generation_kwargs["until"] == []
    assert task.aggregation()["bleu"].__name__ == "mean"
    assert task.higher_is_better() == {"bleu": True, "chrf": True}


@needs_wmt
def test_wmt24_ids_match_load_wmt24():
    from lm_eval_adaptive.data.wmt24 import load_wmt24

    spec = __import__("importlib.util").util.spec_from_file_location(
        "wmt24_utils_for_test", CONFIGS / "wmt24" / "utils.py")
    utils = __import__("importlib.util").util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    systems = sorted(p.stem for p in (ROOT / "wmt24" / "en-ja" / "systems").glob("*.txt"))[:2]
    table = load_wmt24("en-ja", "chrf", systems=systems, cache=False)
    docs = utils.wmt24_docs("en-ja")
    assert [d["id"] for d in docs] == list(table.items)
    # Japanese BLEU uses the ja-mecab tokenizer.
    doc = docs[0]
    from sacrebleu.metrics import BLEU

    hyp = doc["reference"][: max(1, len(doc["reference"]) // 2)]
    expected = BLEU(effective_order=True, tokenize="ja-mecab").sentence_score(
        hyp, [doc["reference"]]).score / 100
    assert utils.process_results_en_ja(doc, [hyp])["bleu"] == pytest.approx(expected, abs=1e-12)


@needs_alpaca
def test_alpaca_eval_task(manager, monkeypatch):
    monkeypatch.setenv(JUDGE_MODEL_ENV, "openai/test-judge")
    task = _build(manager, "alpaca_eval")
    docs = list(task.test_docs())
    assert 0 < len(docs) <= 805
    assert set(docs[0]) == {"id", "instruction", "reference"}
    for doc in docs[:20]:
        assert doc["instruction"] in task.doc_to_text(doc)
        assert doc["reference"]
    assert task.config.generation_kwargs["until"] == []
    assert set(task.aggregation()) == {"judge", "rouge_l"}


@needs_alpaca
def test_alpaca_eval_judge_task_scores_only_the_judge(manager, monkeypatch):
    monkeypatch.setenv(JUDGE_MODEL_ENV, "openai/test-judge")
    task = _build(manager, "alpaca_eval_judge")
    full = _build(manager, "alpaca_eval")
    assert [d["id"] for d in task.test_docs()] == [d["id"] for d in full.test_docs()]
    assert set(task.aggregation()) == {"judge"}


@needs_alpaca
def test_alpaca_eval_rouge_l_task(manager):
    task = _build(manager, "alpaca_eval_rouge_l")
    docs = list(task.test_docs())
    assert 0 < len(docs) <= 805
    doc = docs[0]
    assert task.doc_to_text(doc) == doc["instruction"]
    assert task.process_results(doc, [doc["reference"]]) == {"rouge_l": 1.0}


@needs_alpaca
def test_alpaca_eval_judge_needs_a_model(manager, monkeypatch):
    monkeypatch.delenv(JUDGE_MODEL_ENV, raising=False)
    with pytest.raises(Exception, match=JUDGE_MODEL_ENV):
        _build(manager, "alpaca_eval")


def _public_utils():
    import importlib.util

    spec = importlib.util.spec_from_file_location("public_utils_for_test",
                                                  CONFIGS / "public" / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_public_helpers_on_made_up_docs():
    import datasets

    utils = _public_utils()
    doc = {"id": "1", "source": "Good morning.", "reference": "おはようございます。",
           "target_lang": "jpn_Jpan"}
    assert utils.process_results_translation(doc, [doc["reference"]]) == {"bleu": 1.0, "chrf": 1.0}

    raw = datasets.Dataset.from_list([
        {"id": "a", "pid": "a_0", "input": "Report A text.", "output": "Summary one."},
        {"id": "a", "pid": "a_1", "input": "Report A text.", "output": "Summary two."},
        {"id": "b", "pid": "b_0", "input": "Report B text.", "output": "Summary three."},
    ])
    docs = list(utils.process_docs_govreport(raw))
    assert [d["id"] for d in docs] == ["a", "b"]
    assert docs[0]["outputs"] == ["Summary one.", "Summary two."]
    assert utils.process_results_govreport(docs[0], ["Summary two."]) == {"rouge_l": 1.0}

    tqa = datasets.Dataset.from_list([{
        "type": "Adversarial", "category": "Misc", "question": " Is the sky green? ",
        "best_answer": "No", "correct_answers": ["No, it is blue", ""],
        "incorrect_answers": ["Yes"], "source": "made up",
    }])
    doc = next(iter(utils.process_docs_truthfulqa(tqa)))
    assert doc == {"question": "Is the sky green?",
                   "correct_answers": ["No, it is blue.", "I have no comment."],
                   "incorrect_answers": ["Yes."]}


def test_truthfulqa_prompt_renders(manager):
    from lm_eval.utils import apply_template

    cfg = load_yaml(CONFIGS / "public" / "truthfulqa_gen_judge.yaml", resolve_func=False)
    prompt = apply_template(cfg["doc_to_text"], {"question": "Is the sky green?"})
    assert prompt.startswith("Q: What is human life expectancy")
    assert prompt.endswith("\n\nQ: Is the sky green?\nA:")


@needs_wmt
def test_the_adaptive_loops_document_iterator_yields_what_the_harness_does(manager):
    """``use_full_run_requests`` reads the chosen documents by index instead of walking all 997 of the task
    once per evaluation (an adaptive run evaluates once per item): the same documents, in the same order,
    numbered the same, each once; bad samples still get the harness's own check."""
    from lm_eval_adaptive.harness.lm_eval_compat import use_full_run_requests

    task = _build(manager, "wmt24_en-de")
    harness = task.doc_iterator
    use_full_run_requests(task)
    for samples in ([5], [9, 1, 5], [0, 996, 3, 3], list(range(0, 997, 97))):
        assert list(task.doc_iterator(samples=samples)) == list(harness(samples=samples))
    assert list(task.doc_iterator(samples=[4, 2, 8], rank=1, world_size=2)) == \
        list(harness(samples=[4, 2, 8], rank=1, world_size=2))
    assert list(task.doc_iterator(limit=3)) == list(harness(limit=3))
    with pytest.raises(AssertionError, match="--samples"):
        list(task.doc_iterator(samples=[997]))

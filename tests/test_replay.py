"""Tests for lm_eval_adaptive.replay: the OpenAI-compatible replay endpoint.

The server runs in-process on a free port and is driven with the real litellm
client and with plain urllib.  Tests on the real data read it from
``../shared/data`` (or ``$LM_EVAL_ADAPTIVE_DATA``) and are skipped when it is
absent; expected answers are read from the data files directly, never copied here.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import gzip
import http.client
import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import pytest

from lm_eval_adaptive.data.data_root import DATA_ENV, data_root
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.cli.replay_server import add_arguments
from lm_eval_adaptive.data.judge_format import JUDGE_MARKER
from lm_eval_adaptive.replay.matching import SourceMatcher
from lm_eval_adaptive.replay.server import ReplayServer, estimate_tokens, max_answers_per_item
from lm_eval_adaptive.replay.store import ReplayStore


def _real_root() -> Path | None:
    try:
        root = data_root()
    except InputError:
        return None
    if not (root / "wmt24" / "en-de" / "source.txt").is_file() or not (
            root / "alpaca_eval" / "items.jsonl").is_file():
        return None
    return root


ROOT = _real_root()
needs_data = pytest.mark.skipif(
    ROOT is None, reason=f"real data not found (../shared/data next to the repo, or ${DATA_ENV})")


# --------------------------------------------------------------------------- #
# Helpers: read expected values straight from the data files
# --------------------------------------------------------------------------- #


def lines_of(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def wmt_source(pair: str = "en-de") -> list[str]:
    return lines_of(ROOT / "wmt24" / pair / "source.txt")


def wmt_system(system: str, pair: str = "en-de") -> list[str]:
    return lines_of(ROOT / "wmt24" / pair / "systems" / f"{system}.txt")


def good_lines(pair: str = "en-de", system: str = "GPT-4", k: int = 20) -> list[int]:
    """Lines (not the canary) with a unique source of >= 60 characters and a non-empty output."""
    src, out = wmt_source(pair), wmt_system(system, pair)
    counts: dict[str, int] = {}
    for s in src:
        counts[s.strip()] = counts.get(s.strip(), 0) + 1
    picked = [i for i in range(1, len(src))
              if len(src[i].strip()) >= 60 and counts[src[i].strip()] == 1 and out[i].strip()
              and not src[i].startswith("CANARY")]
    return picked[:k]


def alpaca_items() -> dict[str, str]:
    out = {}
    for line in (ROOT / "alpaca_eval" / "items.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            out[str(rec["id"])] = rec["instruction"]
    return out


def alpaca_outputs(model: str) -> dict[str, str]:
    with gzip.open(ROOT / "alpaca_eval" / "outputs" / f"{model}.jsonl.gz", "rt",
                   encoding="utf-8") as f:
        return {str(r["id"]): r["output"] for r in map(json.loads, f) if r.get("output") is not None}


def judge_prefs(model: str) -> dict[str, float]:
    out = {}
    for line in (ROOT / "alpaca_eval" / "judge" / f"{model}.jsonl").read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            if rec.get("preference") is not None:
                out[str(rec["id"])] = float(rec["preference"])
    return out


def post(url: str, body: dict, timeout: float = 30) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def chat(server: ReplayServer, model: str, content: str) -> tuple[int, dict]:
    return post(server.url + "/chat/completions",
                {"model": model, "messages": [{"role": "user", "content": content}]})


def judge_prompt(instruction: str, answer: str) -> str:
    return (f"{JUDGE_MARKER}\nRate the candidate answer from 0 to 1.\n[Instruction]\n{instruction}\n"
            f"[Candidate answer]\n{answer}\n[End of candidate answer]\nReply as 'Score: X'.")


# --------------------------------------------------------------------------- #
# Fixtures
# --------------------------------------------------------------------------- #


@pytest.fixture(scope="module")
def store() -> ReplayStore:
    if ROOT is None:
        pytest.skip("real data not found")
    return ReplayStore(ROOT)


@pytest.fixture(scope="module")
def server(store):
    with ReplayServer(store) as s:
        yield s


@pytest.fixture
def srv(server):
    """The shared server with its counters zeroed."""
    status, body = post(server.base_url + "/stats/reset", {})
    assert status == 200 and body == {"reset": True}
    return server


@pytest.fixture(scope="module")
def litellm():
    import litellm as _litellm

    _litellm.suppress_debug_info = True
    _litellm.telemetry = False
    return _litellm


# --------------------------------------------------------------------------- #
# Matching (no data needed)
# --------------------------------------------------------------------------- #


SYNTH = [
    ("The quick brown fox jumps over the lazy dog near the river bank.", "a"),
    ("A completely different sentence about weather forecasts in spring.", "b"),
    ("the lazy dog near the river bank.", "c"),  # a suffix of "a"
    ("Yay", "d"),
    ("etc.", "e"),
    ("The quick brown fox jumps over the lazy dog near the river bank.", "dup"),
]


def test_matcher_picks_the_last_source():
    m = SourceMatcher(SYNTH)
    a, b = SYNTH[0][0], SYNTH[1][0]
    assert m.best(f"Example: {a}\nAnswer: x\n\nQuery: {b}\nAnswer:").key == "b"
    assert m.best(f"Example: {b}\nAnswer: x\n\nQuery: {a}\nAnswer:").key == "a"


def test_matcher_ties_by_longest_and_first_duplicate():
    m = SourceMatcher(SYNTH)
    # "c" ends where "a" ends: the longer one wins; the repeated text keeps its first key
    assert m.best(f"Translate: {SYNTH[0][0]}").key == "a"
    assert m.best(f"Translate: {SYNTH[2][0]}").key == "c"


def test_matcher_short_sources_need_word_boundaries():
    m = SourceMatcher(SYNTH)
    assert m.best("Translate: Yay") .key == "d"
    assert m.best("Translate: Yayoi Kusama") is None  # "Yay" inside a word
    assert m.best("Nothing known here.") is None
    assert m.best("") is None
    # a short source inside a longer one that ends later never wins
    assert m.best(f"Translate: Yay. {SYNTH[1][0]}").key == "b"


def test_estimate_tokens():
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2


def test_options_are_validated():
    with pytest.raises(InputError, match="fail kinds"):
        ReplayServer(store=object(), fail_kinds="429,teapot")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="fail rate"):
        ReplayServer(store=object(), fail_rate=1.5)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="latency"):
        ReplayServer(store=object(), latency=-1)  # type: ignore[arg-type]


def test_cli_arguments():
    p = argparse.ArgumentParser()
    add_arguments(p)
    a = p.parse_args([])
    assert (a.host, a.port, a.data, a.latency, a.fail_rate, a.fail_kinds, a.seed) == (
        "127.0.0.1", 8123, None, 0.0, 0.0, "429,500,drop", 0)
    a = p.parse_args(["--port", "0", "--fail-rate", "0.5", "--fail-kinds", "429", "--seed", "3",
                      "--latency", "0.1", "--data", "/x"])
    assert (a.port, a.fail_rate, a.fail_kinds, a.seed, a.latency, a.data) == (
        0, 0.5, "429", 3, 0.1, "/x")


def test_missing_data_dir_is_an_input_error(tmp_path):
    with pytest.raises(InputError):
        ReplayStore(tmp_path / "nope")
    with pytest.raises(InputError, match="no replayable data"):
        ReplayStore(tmp_path)


# --------------------------------------------------------------------------- #
# Real data: answers
# --------------------------------------------------------------------------- #


@needs_data
def test_litellm_chat_returns_recorded_wmt_output(srv, litellm):
    line = good_lines()[0]
    src, expected = wmt_source()[line], wmt_system("GPT-4")[line]
    resp = litellm.completion(model="openai/GPT-4", api_base=srv.url, api_key="x",
                              messages=[{"role": "user", "content": f"Translate into German:\n{src}"}],
                              max_retries=0)
    assert resp.choices[0].message.content == expected
    assert resp.choices[0].finish_reason == "stop"
    assert resp.usage.prompt_tokens == estimate_tokens(f"Translate into German:\n{src}")
    assert resp.usage.completion_tokens == estimate_tokens(expected) > 0
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens
    stats = get(srv.base_url + "/stats")
    assert stats["per_item"] == {"GPT-4": {f"wmt24/en-de/{line}": 1}}


@needs_data
@pytest.mark.parametrize("pair,language", [("en-es", "Spanish"), ("en-ja", "Japanese"),
                                           ("en-zh", "Chinese")])
def test_target_language_picks_the_pair(srv, pair, language):
    line = good_lines(pair)[1]
    status, body = chat(srv, "GPT-4", f"Translate the following text into {language}.\n\n"
                                      f"{wmt_source(pair)[line]}")
    assert status == 200
    assert body["choices"][0]["message"]["content"] == wmt_system("GPT-4", pair)[line]


@needs_data
def test_qualified_name_and_ambiguous_plain_name(srv):
    line = good_lines("en-ja")[2]
    src = wmt_source("en-ja")[line]
    status, body = chat(srv, "wmt24/en-ja/Claude-3.5", src)  # no language named: the name says it
    assert status == 200
    assert body["choices"][0]["message"]["content"] == wmt_system("Claude-3.5", "en-ja")[line]
    status, body = chat(srv, "Claude-3.5", src)
    assert status == 400
    assert "Claude-3.5" in body["error"]["message"] and "wmt24/<pair>/" in body["error"]["message"]


@needs_data
def test_completions_with_urllib(srv):
    line = good_lines()[3]
    prompt = f"English: {wmt_source()[line]}\nGerman:"
    status, body = post(srv.url + "/completions", {"model": "openai/Mistral-Large", "prompt": prompt,
                                                    "max_tokens": 256, "temperature": 0,
                                                    "stop": ["\n"]})
    assert status == 200
    assert body["object"] == "text_completion"
    assert body["choices"] == [{"index": 0, "text": wmt_system("Mistral-Large")[line],
                                "finish_reason": "stop", "logprobs": None}]
    assert body["usage"]["prompt_tokens"] == estimate_tokens(prompt)
    assert body["id"] and isinstance(body["created"], int)


@needs_data
def test_completions_with_a_list_of_prompts(srv):
    lines = good_lines()[4:7]
    prompts = [f"Translate into German: {wmt_source()[i]}" for i in lines]
    status, body = post(srv.url + "/completions", {"model": "ONLINE-B", "prompt": prompts})
    assert status == 200
    assert [c["text"] for c in body["choices"]] == [wmt_system("ONLINE-B")[i] for i in lines]
    stats = get(srv.base_url + "/stats")
    assert stats["served"] == 1 and stats["answers"] == 3 and stats["per_model"] == {"ONLINE-B": 3}


@needs_data
def test_few_shot_prompt_answers_the_last_source(srv):
    a, b = good_lines()[7:9]
    src, out = wmt_source(), wmt_system("GPT-4")
    prompt = (f"Translate English into German.\n\nEnglish: {src[a]}\nGerman: {out[a]}\n\n"
              f"English: {src[b]}\nGerman:")
    status, body = chat(srv, "GPT-4", prompt)
    assert status == 200 and body["choices"][0]["message"]["content"] == out[b]
    prompt = (f"Translate English into German.\n\nEnglish: {src[b]}\nGerman: {out[b]}\n\n"
              f"English: {src[a]}\nGerman:")
    status, body = chat(srv, "GPT-4", prompt)
    assert status == 200 and body["choices"][0]["message"]["content"] == out[a]


@needs_data
def test_chat_messages_are_concatenated(srv):
    line = good_lines()[9]
    status, body = post(srv.url + "/chat/completions", {"model": "Aya23", "messages": [
        {"role": "system", "content": "You translate English into German."},
        {"role": "user", "content": [{"type": "text", "text": wmt_source()[line]}]},
    ]})
    assert status == 200 and body["choices"][0]["message"] == {
        "role": "assistant", "content": wmt_system("Aya23")[line]}


@needs_data
def test_alpaca_eval_output(srv, litellm):
    items, outputs = alpaca_items(), alpaca_outputs("gpt4")
    item = next(i for i in sorted(items, key=int) if i in outputs and len(items[i]) > 40)
    resp = litellm.completion(model="openai/gpt4", api_base=srv.url, api_key="x", max_retries=0,
                              messages=[{"role": "system", "content": "Be helpful."},
                                        {"role": "user", "content": items[item]}])
    assert resp.choices[0].message.content == outputs[item]
    status, body = post(srv.url + "/completions", {"model": "alpaca_eval/gpt4",
                                                    "prompt": f"USER: {items[item]}\nASSISTANT:"})
    assert status == 200 and body["choices"][0]["text"] == outputs[item]
    assert get(srv.base_url + "/stats")["per_item"] == {"gpt4": {f"alpaca_eval/{item}": 1},
                                                         "alpaca_eval/gpt4": {f"alpaca_eval/{item}": 1}}


@needs_data
def test_alpaca_model_without_output_for_item_is_404(srv, store):
    items = alpaca_items()
    for model in ("alpaca-7b_verbose", "phi-2", "text_davinci_001", "minotaur-13b"):
        missing = sorted(set(items) - set(alpaca_outputs(model)), key=int)
        if missing:
            break
    else:
        pytest.skip("every model answers every item")
    status, body = chat(srv, model, items[missing[0]])
    assert status == 404
    assert model in body["error"]["message"] and missing[0] in body["error"]["message"]


@needs_data
def test_judge_score_is_preference_minus_one(srv, litellm):
    items = alpaca_items()
    judge_models = sorted(p.name[:-len(".jsonl")] for p in (ROOT / "alpaca_eval" / "judge").glob("*.jsonl"))
    outs = {m: alpaca_outputs(m) for m in judge_models}
    prefs = {m: judge_prefs(m) for m in judge_models}
    model = "claude-2"
    # an item where claude-2's answer is nobody else's
    item = next(i for i in sorted(items, key=int)
                if i in prefs[model] and i in outs[model]
                and all(outs[m].get(i, "").strip() != outs[model][i].strip()
                        for m in judge_models if m != model))
    resp = litellm.completion(model="openai/gpt-4-turbo", api_base=srv.url, api_key="x",
                              max_retries=0, messages=[{"role": "user", "content": judge_prompt(
                                  items[item], "  " + outs[model][item] + "\n")}])
    assert resp.choices[0].message.content == f"Score: {prefs[model][item] - 1:.6f}"
    stats = get(srv.base_url + "/stats")
    assert stats["judge"] == 1 and stats["per_item"] == {"gpt-4-turbo": {f"judge/alpaca_eval/{item}": 1}}

    # several judged models gave the identical answer: the mean of their preferences
    for i in sorted(items, key=int):
        same = {}
        for m in judge_models:
            if i in outs[m] and i in prefs[m]:
                same.setdefault(outs[m][i].strip(), []).append(m)
        group = next((g for g in same.values() if len(g) > 1), None)
        if group:
            break
    else:
        pytest.skip("no identical answers among judged models")
    mean = sum(prefs[m][i] for m in group) / len(group)
    status, body = chat(srv, "judge", judge_prompt(items[i], outs[group[0]][i]))
    assert status == 200 and body["choices"][0]["message"]["content"] == f"Score: {mean - 1:.6f}"


@needs_data
def test_not_found_errors_name_the_model(srv, litellm):
    line = good_lines()[10]
    src = wmt_source()[line]
    status, body = chat(srv, "no-such-model", f"Translate into German:\n{src}")
    assert status == 404
    assert body["error"]["type"] == "not_found" and "no-such-model" in body["error"]["message"]
    status, body = chat(srv, "GPT-4", "Translate into German:\nThis sentence was never recorded.")
    assert status == 404
    assert body["error"]["type"] == "not_found" and "GPT-4" in body["error"]["message"]
    items = alpaca_items()
    status, body = chat(srv, "judge", judge_prompt(items["0"], "An answer nobody ever gave."))
    assert status == 404 and "candidate answer" in body["error"]["message"]
    with pytest.raises(litellm.NotFoundError, match="no-such-model"):
        litellm.completion(model="openai/no-such-model", api_base=srv.url, api_key="x",
                           max_retries=0, messages=[{"role": "user", "content": src}])
    stats = get(srv.base_url + "/stats")
    assert stats["not_found"] == 4 and stats["served"] == 0 and stats["per_model"] == {}
    assert stats["not_found_per_model"] == {"no-such-model": 2, "GPT-4": 1, "judge": 1}


@needs_data
def test_unsupported_requests_are_400(srv):
    line = good_lines()[11]
    msgs = [{"role": "user", "content": f"Translate into German:\n{wmt_source()[line]}"}]
    for extra, word in (({"stream": True}, "stream"), ({"n": 2}, "n=1"),
                        ({"logprobs": True}, "logprobs")):
        status, body = post(srv.url + "/chat/completions", {"model": "GPT-4", "messages": msgs, **extra})
        assert status == 400 and word in body["error"]["message"], body
    status, body = post(srv.url + "/completions", {"model": "GPT-4", "prompt": [[1, 2, 3]]})
    assert status == 400 and "token-id" in body["error"]["message"]
    status, body = post(srv.url + "/completions", {"prompt": "x"})
    assert status == 400 and "model" in body["error"]["message"]
    assert get(srv.base_url + "/stats")["bad_request"] == 5


@needs_data
def test_models_endpoint(srv):
    ids = {m["id"] for m in get(srv.url + "/models")["data"]}
    assert {"GPT-4", "wmt24/en-de/GPT-4", "wmt24/en-zh/GPT-4", "gpt4", "alpaca_eval/claude-2",
            "gpt4_1106_preview"} <= ids


@needs_data
def test_stats_count_per_model_and_item_and_reset(srv):
    lines = good_lines()[12:14]
    src = wmt_source()
    for i in (lines[0], lines[0], lines[1]):
        assert chat(srv, "GPT-4", f"Translate into German:\n{src[i]}")[0] == 200
    assert chat(srv, "Claude-3.5", f"Translate into German:\n{src[lines[1]]}")[0] == 200
    stats = get(srv.base_url + "/stats")
    assert stats["requests"] == 4 and stats["served"] == 4 and stats["failed"] == 0
    assert stats["per_model"] == {"GPT-4": 3, "Claude-3.5": 1}
    assert stats["per_item"] == {
        "GPT-4": {f"wmt24/en-de/{lines[0]}": 2, f"wmt24/en-de/{lines[1]}": 1},
        "Claude-3.5": {f"wmt24/en-de/{lines[1]}": 1},
    }
    assert srv.stats() == stats
    assert stats["shared_items"] == [] and max_answers_per_item(stats) == 2
    assert post(srv.base_url + "/stats/reset", {})[0] == 200
    stats = get(srv.base_url + "/stats")
    assert stats["requests"] == 0 and stats["per_model"] == {} and stats["per_item"] == {}
    assert max_answers_per_item(stats) == 0


@needs_data
def test_a_source_on_several_lines_is_answered_as_its_first_line_and_flagged(srv):
    src = wmt_source()
    first: dict[str, int] = {}
    repeated = None
    for i, s in enumerate(src[1:], start=1):
        t = s.strip()
        if t and t in first:
            repeated = (first[t], i)
            break
        first.setdefault(t, i)
    assert repeated is not None, "WMT24 en-de has repeated source segments"
    a, b = repeated
    for line in (a, b):
        status, body = chat(srv, "GPT-4", f"Translate into German:\n{src[line]}")
        assert status == 200 and body["choices"][0]["message"]["content"] == wmt_system("GPT-4")[a]
    unique = good_lines()[0]
    assert chat(srv, "GPT-4", f"Translate into German:\n{src[unique]}")[0] == 200
    stats = srv.stats()
    assert stats["per_item"]["GPT-4"] == {f"wmt24/en-de/{a}": 2, f"wmt24/en-de/{unique}": 1}
    assert stats["shared_items"] == [f"wmt24/en-de/{a}"]
    assert max_answers_per_item(stats) == 1


@needs_data
def test_concurrent_requests(srv):
    lines = good_lines(k=20)
    src, out = wmt_source(), wmt_system("GPT-4")
    with cf.ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(lambda i: chat(srv, "GPT-4", f"Translate into German:\n{src[i]}"),
                                lines))
    assert [r[1]["choices"][0]["message"]["content"] for r in results] == [out[i] for i in lines]
    stats = get(srv.base_url + "/stats")
    assert stats["served"] == 20 and sum(stats["per_item"]["GPT-4"].values()) == 20


@needs_data
def test_prompt_check_is_fast(store):
    src = wmt_source()
    lines = good_lines(k=200)
    store.answer("wmt24/en-de/GPT-4", src[lines[0]])  # load
    prompts = ["Translate English into German.\n\n" + "\n\n".join(
        f"English: {src[lines[(k + j) % len(lines)]]}\nGerman: ..." for j in range(5))
        for k in range(100)]
    t0 = time.perf_counter()
    for p in prompts:
        store.answer("wmt24/en-de/GPT-4", p)
    per_call = (time.perf_counter() - t0) / len(prompts)
    assert per_call < 5e-3, f"{per_call * 1e3:.2f} ms per prompt"


# --------------------------------------------------------------------------- #
# Fault injection
# --------------------------------------------------------------------------- #


@needs_data
def test_injected_429_raises_rate_limit_error(store, litellm):
    line = good_lines()[14]
    msgs = [{"role": "user", "content": f"Translate into German:\n{wmt_source()[line]}"}]
    with ReplayServer(store, fail_rate=1.0, fail_kinds=["429"]) as s:
        with pytest.raises(litellm.RateLimitError):
            litellm.completion(model="openai/GPT-4", api_base=s.url, api_key="x", messages=msgs,
                               max_retries=0)
        assert chat(s, "GPT-4", msgs[0]["content"])[0] == 429
        stats = s.stats()
        assert stats["failed"] == 2 and stats["failed_by_kind"]["429"] == 2
        assert stats["served"] == 0 and stats["per_model"] == {}


@needs_data
def test_injected_500_and_drop(store, litellm):
    line = good_lines()[15]
    content = f"Translate into German:\n{wmt_source()[line]}"
    with ReplayServer(store, fail_rate=1.0, fail_kinds="500") as s:
        assert chat(s, "GPT-4", content)[0] == 500
    with ReplayServer(store, fail_rate=1.0, fail_kinds="drop") as s:
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError, urllib.error.URLError)):
            chat(s, "GPT-4", content)
        # litellm reports the openai client's connection error as InternalServerError
        with pytest.raises((litellm.APIConnectionError, litellm.InternalServerError),
                           match="(?i)connection"):
            litellm.completion(model="openai/GPT-4", api_base=s.url, api_key="x", max_retries=0,
                               messages=[{"role": "user", "content": content}])
        assert s.stats()["failed_by_kind"]["drop"] == 2 and s.stats()["served"] == 0


@needs_data
def test_latency(store):
    line = good_lines()[16]
    with ReplayServer(store, latency=0.2) as s:
        t0 = time.perf_counter()
        status, _ = chat(s, "GPT-4", f"Translate into German:\n{wmt_source()[line]}")
        assert status == 200 and time.perf_counter() - t0 >= 0.2


@needs_data
def test_seeded_failure_pattern_is_reproducible(store):
    line = good_lines()[17]
    content = f"Translate into German:\n{wmt_source()[line]}"

    def pattern(s: ReplayServer) -> list[int]:
        return [chat(s, "GPT-4", content)[0] for _ in range(24)]

    with ReplayServer(store, fail_rate=0.5, fail_kinds="429,500", seed=7) as s:
        first = pattern(s)
        stats = s.stats()
        s.reset_stats()
        assert pattern(s) == first
    assert set(first) == {200, 429, 500}
    assert stats["failed"] == sum(c != 200 for c in first)
    assert stats["served"] == first.count(200) == stats["per_model"]["GPT-4"]
    with ReplayServer(store, fail_rate=0.5, fail_kinds="429,500", seed=7) as s:
        assert pattern(s) == first
    with ReplayServer(store, fail_rate=0.5, fail_kinds="429,500", seed=8) as s:
        assert pattern(s) != first

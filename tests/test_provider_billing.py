"""The cap holds whatever the provider bills, and no paid answer goes uncharged (issue 28, items 1, 2, 9).

Each case runs the real CLI (``rank``), the real harness and litellm, over real HTTP against a local
endpoint that misbehaves as a provider may (:mod:`misbehaving_provider`): it writes until the largest
output limit the request carries, answers every one of ``n`` choices, bills reasoning tokens at their own
price, answers 200 with a body litellm cannot parse, or leaves usage out. It keeps the provider's bill:
what it served, at the tokens it really generated, at the run's prices. Asserted each time: the bill is
within the cap, and the run's own accounting is at least the bill.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from misbehaving_provider import MisbehavingProvider
from test_billing import PRICE, make_bank, openai_env  # noqa: F401 - a fixture

from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.live.journal import Journal

REPO = Path(__file__).resolve().parents[1]
WMT = "wmt24_en-de"
SYSTEMS = ["GPT-4", "Aya23"]


def rank(tmp_path, url, *extra, task_yaml=None, models=SYSTEMS, price=PRICE, dry_run=False, extra_models=None):
    os.environ["OPENAI_API_BASE"] = url
    out = tmp_path / "out"
    include = task_yaml or REPO / "task_configs"
    ids = extra_models or {s: f"openai/{s}" for s in models}
    args = ["rank", "--models", *[f"{s}=litellm:model={ids[s]}" for s in models], "--tasks", WMT,
            "--bank", make_bank(tmp_path / "bank.json"), "--include_path", str(include), "--apply_chat_template",
            "--no-progress", "--backoff", "0", "--min-items", "2",
            *(["--price", *[f"{s}={price[0]:g},{price[1]:g}" for s in models]] if price else []), *extra]
    if "--max-failures" not in extra:
        args += ["--max-failures", "99"]
    args += ["--dry-run"] if dry_run else ["--output", str(out)]
    code = main(args)
    report = json.loads((out / "ranking.json").read_text()) if (out / "ranking.json").exists() else None
    return code, report, out


def assert_bill_within_cap_and_charged(provider, report, cap):
    spent = report["total_cost_usd"]
    assert provider.served >= 2  # the case was exercised
    assert provider.bill_usd <= cap, f"the provider billed ${provider.bill_usd:.4f} on a ${cap} cap"
    assert spent >= provider.bill_usd * (1 - 1e-9), f"spent ${spent:.6f} < the provider's bill ${provider.bill_usd:.6f}"
    assert spent <= cap


# ------------------------------------------------------------------ item 1: the worst case of the request as sent
@pytest.mark.parametrize("gen_kwargs", ["max_gen_toks=1024,max_tokens=16000", "max_gen_toks=64,max_completion_tokens=8000",
                                        "max_gen_toks=64,max_new_tokens=4000", "max_gen_toks=512,n=4"])
def test_a_provider_writing_until_the_largest_limit_stays_under_the_cap(tmp_path, openai_env, gen_kwargs):
    cap = 0.2
    with MisbehavingProvider("until_limit", price=PRICE) as p:
        code, r, out = rank(tmp_path, p.url, "--gen_kwargs", gen_kwargs, "--concurrency", "4", "--budget-usd", str(cap))
    assert code in (0, 1, 3) and r is not None
    assert_bill_within_cap_and_charged(p, r, cap)
    assert r["ledger"]["overshoot_usd"] == 0  # every reservation bounded its call


def task_copy(tmp_path, **common) -> Path:
    """The WMT24 task folder with settings added to its shared YAML (``repeats: 4``, ``max_tokens: null``)."""
    import shutil

    d = tmp_path / "tasks"
    shutil.copytree(REPO / "task_configs" / "wmt24", d / "wmt24")
    y = d / "wmt24" / "_wmt24_common_yaml"
    text = y.read_text()
    for k, v in common.items():
        if k == "max_tokens":
            text = text.replace("  max_gen_toks: 1024\n", f"  max_gen_toks: 1024\n  max_tokens: {v}\n")
        else:
            text += f"\n{k}: {v}\n"
    y.write_text(text)
    return d


def test_a_task_that_repeats_its_requests_stays_under_the_cap(tmp_path, openai_env):
    cap = 0.2
    with MisbehavingProvider("until_limit", price=PRICE) as p:
        code, r, out = rank(tmp_path, p.url, "--gen_kwargs", "max_gen_toks=2000", "--concurrency", "4",
                            "--budget-usd", str(cap), task_yaml=task_copy(tmp_path, repeats=4))
    assert r is not None and p.served >= 4 and p.served % 4 == 0  # four calls an item
    assert_bill_within_cap_and_charged(p, r, cap)


def test_a_request_with_no_output_limit_is_refused_before_any_call(tmp_path, openai_env, capsys):
    with MisbehavingProvider("until_limit", price=PRICE) as p:
        code, r, out = rank(tmp_path, p.url, "--budget-usd", "1", task_yaml=task_copy(tmp_path, max_tokens="null"))
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith("error:")]
    assert code == 2 and p.requests == 0 and not out.exists()
    assert len(lines) == 1 and "no output limit" in lines[0] and "--gen_kwargs max_gen_toks=N" in lines[0], err
    assert "Traceback" not in err


def test_the_dry_run_bound_is_the_worst_case_of_the_request_as_sent(tmp_path, openai_env):
    out = tmp_path / "fc"
    os.environ["OPENAI_API_BASE"] = "http://127.0.0.1:9/v1"
    args = ["rank", "--models", *[f"{s}=litellm:model=openai/{s}" for s in SYSTEMS], "--tasks", WMT,
            "--bank", make_bank(tmp_path / "bank.json"), "--include_path", str(REPO / "task_configs"),
            "--apply_chat_template", "--price", *[f"{s}=1,3" for s in SYSTEMS], "--dry-run", "--output", str(out),
            "--min-items", "2", "--max-items", "3"]
    assert main([*args, "--gen_kwargs", "max_gen_toks=1024,max_tokens=16000,n=2"]) == 0
    fc = json.loads((out / "cost_forecast.json").read_text())
    bounds = [m["worst_case"]["bound_usd"] for m in fc["models"]]
    # three items a model, each at least 16000 tokens × 2 choices at $3/M
    assert all(b >= 3 * 16000 * 2 * 3e-6 for b in bounds), bounds


# ------------------------------------------------------------------ reasoning tokens at their own price
def test_reasoning_tokens_are_reserved_and_charged_at_the_reasoning_price(tmp_path, openai_env, monkeypatch):
    """dashscope/qwen-plus-2025-04-28: $0.4/M in, $1.2/M out, $4/M reasoning in litellm's map; the provider
    spends 90% of each answer on reasoning."""
    from lm_eval_adaptive.data.price_map import litellm_price

    model = "dashscope/qwen-plus-2025-04-28"
    price = litellm_price(model)
    assert price.reasoning_per_token == pytest.approx(4e-6)
    cap = 0.05
    with MisbehavingProvider("until_limit", price=(0.4, 1.2), reasoning_price=4.0, reasoning_share=0.9) as p:
        monkeypatch.setenv("DASHSCOPE_API_BASE", p.url)
        monkeypatch.setenv("DASHSCOPE_API_KEY", "k")
        code, r, out = rank(tmp_path, p.url, "--gen_kwargs", "max_gen_toks=2000", "--concurrency", "2",
                            "--budget-usd", str(cap), models=["qwen-a", "qwen-b"], price=None,
                            extra_models={"qwen-a": model, "qwen-b": model})
    assert r is not None
    assert_bill_within_cap_and_charged(p, r, cap)
    assert r["ledger"]["overshoot_usd"] == 0


# ------------------------------------------------------------------ item 2: a call the provider answered is charged
@pytest.mark.parametrize("mode", ["truncated", "event_stream", "usage_abc", "usage_huge"])
def test_an_answer_litellm_cannot_parse_is_charged_its_reservation(tmp_path, openai_env, mode):
    cap = 0.03
    with MisbehavingProvider(mode, price=PRICE, words=300) as p:
        code, r, out = rank(tmp_path, p.url, "--max-attempts", "3", "--budget-usd", str(cap))
    assert r is not None
    assert_bill_within_cap_and_charged(p, r, cap)
    assert r["calls"]["billed_failures"] == p.served == r["calls"]["attempts"]  # each one charged


@pytest.mark.parametrize("mode", ["no_usage", "zero_usage"])
def test_an_answer_without_usage_is_charged_its_reservation_with_a_warning(tmp_path, openai_env, caplog, mode):
    cap = 0.03
    with MisbehavingProvider(mode, price=PRICE, words=300) as p:
        code, r, out = rank(tmp_path, p.url, "--budget-usd", str(cap))
    assert r is not None
    assert_bill_within_cap_and_charged(p, r, cap)
    unknown = r["calls"]["usage_unknown"]
    assert sum(v["items"] for v in unknown.values()) == p.served
    assert sum(v["charged_usd"] for v in unknown.values()) == pytest.approx(r["total_cost_usd"])
    said = [m.getMessage() for m in caplog.records if "answered item(s) reported no usage" in m.getMessage()]
    assert len(said) == 2 and all(any(m.startswith(s) for m in said) for s in SYSTEMS)
    assert all(f"{unknown[s]['items']} answered item(s)" in " ".join(said) for s in unknown)


def test_sixty_percent_unparseable_answers_with_defaults_stay_under_the_cap(tmp_path, openai_env):
    cap = 0.03
    with MisbehavingProvider("truncated", rate=0.6, price=PRICE, words=300, seed=2) as p:
        code, r, out = rank(tmp_path, p.url, "--budget-usd", str(cap))
    assert r is not None
    assert_bill_within_cap_and_charged(p, r, cap)


@pytest.mark.parametrize("mode", ["http_500", "http_429"])
def test_an_error_status_the_provider_does_not_bill_is_free(tmp_path, openai_env, mode):
    with MisbehavingProvider(mode, price=PRICE) as p:
        code, r, out = rank(tmp_path, p.url, "--max-attempts", "2", "--max-failures", "2", "--budget-usd", "0.05")
    assert r is not None and p.requests >= 2 and p.served == 0 and p.bill_usd == 0
    assert r["total_cost_usd"] == 0 and r["calls"]["billed_failures"] == 0
    assert r["calls"]["attempts"] == p.requests


# ------------------------------------------------------------------ run --adaptive: the same rules
@pytest.mark.parametrize("mode", ["until_limit", "no_usage", "truncated"])
def test_run_adaptive_stays_under_its_budget_whatever_the_provider_answers(tmp_path, openai_env, capsys, mode):
    import re

    cap = 0.03
    with MisbehavingProvider(mode, price=PRICE, words=300) as p:
        os.environ["OPENAI_API_BASE"] = p.url
        code = main(["run", "--model", "litellm", "--model_args", "model=openai/Aya23,max_retries=3",
                     "--tasks", WMT, "--include_path", str(REPO / "task_configs"), "--apply_chat_template",
                     "--output_path", str(tmp_path / "out"), "--adaptive", "--bank", make_bank(tmp_path / "bank.json"),
                     "--item-field", "doc_id", "--min-items", "2", "--max-items", "30",
                     "--gen_kwargs", "max_gen_toks=512,max_tokens=4000", "--budget-usd", str(cap),
                     "--price", f"{PRICE[0]:g},{PRICE[1]:g}"])
    out = capsys.readouterr()
    assert p.served >= 2 and p.bill_usd <= cap, (p.served, p.bill_usd)
    spent = [float(x) for x in re.findall(r"\$([0-9.]+(?:e-?\d+)?) of (?:a )?\$?0\.03", out.out + out.err)]
    assert spent and max(spent) >= p.bill_usd * (1 - 1e-9), (out.err[-3000:], p.bill_usd)

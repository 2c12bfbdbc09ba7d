"""The provider's bill against the cap, per misbehaviour of issue 28 (items 1 and 2): each case runs the real
``rank`` CLI, harness and litellm over HTTP against ``tests/misbehaving_provider.py`` and prints what the
provider billed (what it served, at the tokens it really generated, at the run's prices) as a multiple of the
cap, beside what the run says it spent.

    PYTHONPATH=. LITELLM_LOCAL_MODEL_COST_MAP=True python benchmarks/bench_provider_bill.py [CASE ...]

Run it with another checkout first on PYTHONPATH to compare (e.g. ``git archive c9c94ca lm_eval_adaptive``).
"""
import logging
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
os.environ["OPENAI_API_KEY"] = "replay"
from misbehaving_provider import MisbehavingProvider
import test_provider_billing as t
cases = {
 "max_gen_toks=1024,max_tokens=16000": ("until_limit", {}, ["--gen_kwargs", "max_gen_toks=1024,max_tokens=16000", "--concurrency", "4"], 0.05),
 "max_tokens=8000": ("until_limit", {}, ["--gen_kwargs", "max_tokens=8000", "--concurrency", "4"], 0.05),
 "max_completion_tokens=8000": ("until_limit", {}, ["--gen_kwargs", "max_gen_toks=1024,max_completion_tokens=8000", "--concurrency", "4"], 0.05),
 "n=4": ("until_limit", {}, ["--gen_kwargs", "max_gen_toks=1024,n=4", "--concurrency", "4"], 0.05),
 "n=4, 8 items a model": ("until_limit", {}, ["--gen_kwargs", "max_gen_toks=1024,n=4", "--concurrency", "4", "--min-items", "8"], 0.05),
 "truncated JSON (all)": ("truncated", {"words": 300}, ["--max-attempts", "3"], 0.03),
 "event stream (all)": ("event_stream", {"words": 300}, ["--max-attempts", "3"], 0.03),
 "usage abc (all)": ("usage_abc", {"words": 300}, ["--max-attempts", "3"], 0.03),
 "usage 1e30 (all)": ("usage_huge", {"words": 300}, ["--max-attempts", "3"], 0.03),
 "no usage": ("no_usage", {"words": 300}, [], 0.03),
 "zero usage": ("zero_usage", {"words": 300}, [], 0.03),
 "60% truncated, defaults": ("truncated", {"rate": 0.6, "words": 300, "seed": 2}, [], 0.03),
 "repeats: 4 (task YAML)": ("until_limit", {}, ["--gen_kwargs", "max_gen_toks=2000", "--concurrency", "4"], 0.05),
 "reasoning (dashscope/qwen-plus-2025-04-28, 90%)": ("until_limit", {"price": (0.4, 1.2), "reasoning_price": 4.0, "reasoning_share": 0.9}, ["--gen_kwargs", "max_gen_toks=2000", "--concurrency", "2"], 0.05),
}
only = sys.argv[1:] or list(cases)
logging.disable(logging.WARNING)
for name in only:
    mode, kw, extra, cap = cases[name]
    kw = dict(kw); kw.setdefault("price", t.PRICE)
    rkw = {}
    with tempfile.TemporaryDirectory() as d, MisbehavingProvider(mode, **kw) as p:
        if name.startswith("repeats"):
            rkw["task_yaml"] = t.task_copy(Path(d), repeats=4)
        if name.startswith("reasoning"):
            os.environ["DASHSCOPE_API_BASE"] = p.url; os.environ["DASHSCOPE_API_KEY"] = "k"
            rkw.update(models=["qwen-a", "qwen-b"], price=None, extra_models={"qwen-a": "dashscope/qwen-plus-2025-04-28", "qwen-b": "dashscope/qwen-plus-2025-04-28"})
        devnull = open(os.devnull, "w"); so, se = sys.stdout, sys.stderr; sys.stdout = sys.stderr = devnull
        try:
            code, r, out = t.rank(Path(d), p.url, *extra, "--budget-usd", str(cap), **rkw)
        finally:
            sys.stdout, sys.stderr = so, se
        spent = r["total_cost_usd"] if r else float("nan")
        print(f"{name:40s} exit {code} served {p.served:4d} bill ${p.bill_usd:.4f} = {p.bill_usd/cap:.2f}x cap ${cap}; run says spent ${spent:.4f}", flush=True)

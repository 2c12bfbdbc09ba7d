"""A near tie ranked live: what does a confident ranking of four systems cost when two of them tie?

Issue 11 ("Must show"): four systems of a WMT24 pair, two of them a near tie on the full data,
ranked live with `lm-eval-adaptive rank` through the real harness, the real litellm client and
real HTTP against the replay endpoint, with the default settings and a dollar cap ABOVE a full
run's cost (so the cap never decides when to stop). The case (table, systems, which two are the
near tie, the cap factor, the spend limit) is benchmarks/near_tie_case.json, shared with
tests/test_near_tie_live.py. The bank is calibrated on the pair's other systems
(`calibrate --exclude-models`).

Full-run cost: every document the ranking can draw from (every bank item) asked of each of the
four systems, at the litellm price the run charges ($1/$3 per M tokens for systems litellm does
not price, given with --price as in the other live benchmarks), for the usage the replay endpoint
bills (ceil(len/4) tokens of the prompt the harness sends and of the recorded answer). The run's
own journal is checked against it: every served item must carry exactly the usage computed here.

Prints the true gaps (full-data means, 95% bootstrap intervals over documents, paired intervals
of each gap), total spend, the full-run cost and the share, items per model, the ranking with each
model's estimate of record and rank range, every pair's outcome (ordered, equivalent, unresolved
with its items and dollars to settle), every confident pair and whether the full data agrees, and one
PASS/FAIL line per criterion (issue 21):

1. total spend ≤ max_spend_share (10%) of a full run (with ``--settle-share S``: ≤ S);
2. the near-tie pair not ordered (with ``--tie-margin``: reported ``equivalent``);
3. every confident (ordered) pair ordered as the full data orders it;
4. no impossibility claim (no pair "inseparable") and every unresolved pair with its cost to settle.

    python benchmarks/bench_near_tie.py [--case benchmarks/near_tie_case.json] [--json out.json]
        [--tie-margin DELTA] [--seed S ...] [--settle-share S] [--anytime]

``--seed``: run the case with each of these ranking seeds (``rank --seed``; default 0) and print each.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from lm_eval_adaptive.cli.main import main as cli  # noqa: E402
from lm_eval_adaptive.data.data_root import data_root  # noqa: E402
from lm_eval_adaptive.data.files import read_lines  # noqa: E402
from lm_eval_adaptive.data.named_tables import load_named  # noqa: E402
from lm_eval_adaptive.data.price_map import price_for  # noqa: E402
from lm_eval_adaptive.data.prices import DEFAULT_PRICE, Price  # noqa: E402
from lm_eval_adaptive.engine.irt.bank import ItemBank  # noqa: E402
from lm_eval_adaptive.errors import InputError  # noqa: E402
from lm_eval_adaptive.live.journal import Journal  # noqa: E402
from lm_eval_adaptive.replay.server import ReplayServer, estimate_tokens, max_answers_per_item  # noqa: E402

CASE_PATH = Path(__file__).with_name("near_tie_case.json")
TASK_CONFIGS = REPO / "task_configs"


def load_case(path: Path | str = CASE_PATH) -> dict:
    return json.loads(Path(path).read_text())


def pair_of(case: dict) -> str:
    return case["table"].split("/")[1]


# ----------------------------------------------------------------------------- the full-data truth
def full_data_truth(case: dict, *, n_boot: int = 2000, seed: int = 0) -> dict:
    """Full-data means of the case's systems, 95% percentile bootstrap intervals over documents,
    and for every pair the gap with its paired bootstrap interval."""
    table = load_named(case["table"])
    names = [str(m) for m in table.models]
    rows = {m: table.mean_matrix()[names.index(m)] for m in case["systems"]}
    ok = np.all([np.isfinite(r) for r in rows.values()], axis=0)  # documents every system has
    rows = {m: r[ok] for m, r in rows.items()}
    n = int(ok.sum())
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    boot = {m: r[idx].mean(axis=1) for m, r in rows.items()}
    mean = {m: float(r.mean()) for m, r in rows.items()}
    ci = {m: [float(np.percentile(b, 2.5)), float(np.percentile(b, 97.5))] for m, b in boot.items()}
    gaps = []
    for a, b in itertools.combinations(case["systems"], 2):
        hi, lo = (a, b) if mean[a] >= mean[b] else (b, a)
        d = boot[hi] - boot[lo]
        gaps.append({"higher": hi, "lower": lo, "gap": mean[hi] - mean[lo],
                     "paired_ci95": [float(np.percentile(d, 2.5)), float(np.percentile(d, 97.5))],
                     "intervals_overlap": bool(ci[lo][1] >= ci[hi][0])})
    return {"metric": case["metric"], "n_docs": n, "mean": mean, "ci95": ci, "gaps": gaps}


# ----------------------------------------------------------------------------- prices and full-run cost
def prices_of(case: dict) -> dict[str, Price]:
    """litellm's price of each system; DEFAULT_PRICE ($1/$3 per M) where litellm has none."""
    out = {}
    for m in case["systems"]:
        try:
            out[m] = price_for(m, default=None)
        except InputError:
            out[m] = DEFAULT_PRICE
    return out


def price_arguments(prices: dict[str, Price]) -> list[str]:
    """--price for the systems litellm's price map does not know (rank refuses them otherwise)."""
    args = []
    for m, p in prices.items():
        if p is DEFAULT_PRICE:
            args += ["--price", f"{m}={p.input_per_mtok:g},{p.output_per_mtok:g}"]
    return args


def prompt_template(task: str) -> str:
    """The task's doc_to_text, read from its YAML (a double-quoted string with one {{source}})."""
    text = (TASK_CONFIGS / "wmt24" / f"{task}.yaml").read_text()
    m = re.search(r'^doc_to_text:\s*(".*")\s*$', text, re.MULTILINE)
    if not m:
        raise ValueError(f"no double-quoted doc_to_text in {task}.yaml")
    return json.loads(m.group(1))


def billed_usage(case: dict, item_ids) -> dict[str, dict[str, tuple[int, int]]]:
    """Per system and item: (prompt_tokens, completion_tokens) the replay endpoint bills for it."""
    base = data_root() / "wmt24" / pair_of(case)
    source = read_lines(base / "source.txt")
    template = prompt_template(case["task"])
    prompt = {i: estimate_tokens(template.replace("{{source}}", source[int(i)])) for i in item_ids}
    out = {}
    for m in case["systems"]:
        answers = read_lines(base / "systems" / f"{m}.txt")
        out[m] = {i: (prompt[i], estimate_tokens(answers[int(i)])) for i in item_ids}
    return out


def task_doc_ids(case: dict) -> list[str]:
    """The task's documents in harness order (doc id = position), as the segment ids the bank and the data use:
    what a bank-free run (``--anytime``) journals by doc id is billed by these."""
    import importlib.util  # noqa: PLC0415

    spec = importlib.util.spec_from_file_location("wmt24_task_utils", TASK_CONFIGS / "wmt24" / "utils.py")
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    return [d["id"] for d in utils.wmt24_docs(pair_of(case))]


def full_run_cost(usage: dict, prices: dict[str, Price]) -> dict[str, float]:
    return {m: float(sum(p * prices[m].input_per_token + c * prices[m].output_per_token for p, c in u.values()))
            for m, u in usage.items()}


# ----------------------------------------------------------------------------- the live run
def run_case(case: dict, workdir: Path, *, server: ReplayServer, tie_margin: float | None = None,
             seed: int | None = None, settle_share: float | None = None, anytime: bool = False) -> dict:
    """Calibrate the bank without the case's systems, rank them live, and collect the figures.

    ``server`` is a running ReplayServer that litellm already reaches (OPENAI_API_BASE); ``tie_margin``,
    ``seed`` and ``settle_share`` are passed to ``rank`` (None: its defaults). The bank is calibrated once per workdir."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    bank_path = workdir / "bank.json"
    t0 = time.perf_counter()
    if not bank_path.exists():
        assert cli(["calibrate", case["table"], "--exclude-models", *case["systems"], "--task", case["task"],
                    "--metric", case["metric"], "--out", str(bank_path)]) == 0
    t_cal = time.perf_counter() - t0
    bank = ItemBank.load(bank_path)
    item_ids = [str(i) for i in bank.item_ids]
    prices = prices_of(case)
    if anytime:  # the anytime-valid ranker draws from every document of the task and journals doc ids
        ids = task_doc_ids(case)
        by_segment = billed_usage(case, ids)
        usage = {m: {str(d): by_segment[m][i] for d, i in enumerate(ids)} for m in case["systems"]}
    else:
        usage = billed_usage(case, item_ids)
    full = full_run_cost(usage, prices)
    full_total = sum(full.values())
    cap = round(case["cap_over_full_run"] * full_total, 6)
    out = workdir / f"rank-{seed}-{tie_margin}-{settle_share}-{anytime}"
    extra = ([] if tie_margin is None else ["--tie-margin", str(tie_margin)]) + \
        ([] if seed is None else ["--seed", str(seed)]) + \
        ([] if settle_share is None else ["--settle-share", str(settle_share)]) + (["--anytime"] if anytime else [])
    server.reset_stats()
    t1 = time.perf_counter()
    rc = cli(["rank", "--models", *[f"{m}=litellm:model=openai/{m}" for m in case["systems"]],
              "--tasks", case["task"], "--bank", str(bank_path), "--include_path", str(TASK_CONFIGS),
              "--apply_chat_template", "--item-field", "id", "--budget-usd", f"{cap:.6f}",
              "--output", str(out), "--no-progress", *price_arguments(prices), *extra])
    t_rank = time.perf_counter() - t1
    if rc != 0:
        raise RuntimeError(f"rank exited {rc}")
    report = json.loads((out / "ranking.json").read_text())
    stats = server.stats()
    # the run was billed exactly what the full-run cost counts, item by item
    mismatched = []
    for s in Journal.open(out, writable=False).scores():
        (u,) = s["usage"]
        if (u["prompt_tokens"], u["completion_tokens"]) != usage[s["model"]][s["item_id"]]:
            mismatched.append((s["model"], s["item_id"], u, usage[s["model"]][s["item_id"]]))
    charged = {e["model"]: (e["price"]["input_per_mtok"], e["price"]["output_per_mtok"]) for e in report["ranking"]}
    assumed = {m: (p.input_per_mtok, p.output_per_mtok) for m, p in prices.items()}
    return {"case": case, "tie_margin": tie_margin, "seed": seed, "settle_share": settle_share,
            "bank_items": len(item_ids), "bank_id": report["bank_id"], "prices": assumed,
            "charged_prices": charged, "usage_mismatches": mismatched[:5], "n_usage_mismatches": len(mismatched),
            "full_run_cost_usd": full, "full_run_cost_total_usd": full_total,
            "report_full_run_cost_usd": report["full_run_cost_usd"], "cap_usd": cap, "report": report,
            "served": stats["served"], "max_served_per_item": max_answers_per_item(stats),
            "seconds": {"calibrate": t_cal, "rank": t_rank}}


# ----------------------------------------------------------------------------- the three criteria
def confident_pairs(report: dict) -> list[tuple[str, str]]:
    """(a, b) with a ranked above b and the pair's order settled (not one of the ranking's ties)."""
    order = [e["model"] for e in report["ranking"]]
    tied = {frozenset(p) for p in report["ties"]}
    return [(a, b) for i, a in enumerate(order) for b in order[i + 1:] if frozenset((a, b)) not in tied]


def judge(result: dict, truth: dict) -> dict:
    case, report = result["case"], result["report"]
    spent = report["total_cost_usd"]
    share = spent / result["full_run_cost_total_usd"]
    near = frozenset(case["near_tie"])
    near_tied = near in {frozenset(p) for p in report["ties"]}
    pairs = report.get("pairs") or []
    outcome = {frozenset((p["a"], p["b"])): p["outcome"] for p in pairs}
    conf = [{"higher": a, "lower": b, "p": report["pairwise"][a][b], "right": truth["mean"][a] > truth["mean"][b]}
            for a, b in confident_pairs(report)]
    unresolved = [p for p in pairs if p["outcome"] == "unresolved"]
    limit = result.get("settle_share") or case["max_spend_share"]
    return {
        "spent_usd": spent, "spend_share": share, "spend_limit": limit,
        "spend_ok": share <= limit,
        "near_tie_reported_as_tie": near_tied,
        "near_tie_outcome": outcome.get(near),
        "near_tie_equivalent": outcome.get(near) == "equivalent",
        "confident_pairs": conf,
        "confident_all_right": all(c["right"] for c in conf),
        "no_impossibility_claim": not report.get("inseparable"),
        "unresolved_with_cost": all(p.get("items_to_settle") and p.get("cost_to_settle_usd") is not None
                                    for p in unresolved),
        "unresolved": [{k: p.get(k) for k in ("a", "b", "items_to_settle", "cost_to_settle_usd", "beyond_policy")}
                       for p in unresolved],
    }


def show(result: dict, truth: dict, verdict: dict) -> None:
    case, report = result["case"], result["report"]
    print(f"case: {case['table']}, systems {', '.join(case['systems'])}; near tie: {' vs '.join(case['near_tie'])}")
    print(f"full-data truth ({truth['n_docs']} documents, mean sentence {truth['metric']}, 95% bootstrap intervals):")
    for m in sorted(truth["mean"], key=lambda m: -truth["mean"][m]):
        lo, hi = truth["ci95"][m]
        print(f"  {m:<14} {truth['mean'][m]:.4f} [{lo:.4f}, {hi:.4f}]")
    print("true gaps:")
    for g in truth["gaps"]:
        lo, hi = g["paired_ci95"]
        print(f"  {g['higher']:>12} - {g['lower']:<12} {g['gap']:.4f}  paired 95% [{lo:+.4f}, {hi:+.4f}]; "
              f"the two intervals {'overlap' if g['intervals_overlap'] else 'do not overlap'}")
    print("prices per M tokens (in, out): " + "; ".join(f"{m} ${i:g}/${o:g}" for m, (i, o) in result["prices"].items()))
    print(f"bank: {result['bank_items']} items, calibrated without the four; cap ${result['cap_usd']:.4f} "
          f"({case['cap_over_full_run']:g} × a full run)")
    print(f"full-run cost (every document the ranking can draw from, each system, usage as billed): ${result['full_run_cost_total_usd']:.4f} "
          f"(" + ", ".join(f"{m} ${c:.4f}" for m, c in result["full_run_cost_usd"].items())
          + f"); the report's own estimate from the bank's mean tokens: ${result['report_full_run_cost_usd']:.4f}")
    print(f"journal usage vs the usage counted here: {result['n_usage_mismatches']} mismatches; "
          f"most answers per item {result['max_served_per_item']}; served {result['served']}")
    print(f"total spend ${verdict['spent_usd']:.4f} = {100 * verdict['spend_share']:.1f}% of a full run; "
          f"stopped because: {report['stopped_because']}; items {report['total_items']}; "
          f"rank {result['seconds']['rank']:.1f} s")
    print("ranking (best first; the estimate of record on the metric scale, its 95% interval, the rank range):")
    for e in report["ranking"]:
        me = e.get("estimate") or e["metric_estimate"]
        rr = e.get("rank_range")
        print(f"  {e['model']:<14} θ {e['theta']:+.3f} ± {e['se']:.3f}  items {e['items']:>4}  "
              f"${e['cost_usd']:.4f} of ${result['full_run_cost_usd'][e['model']]:.4f}  "
              f"est. {me['estimate']:.4f} [{me['lower']:.4f}, {me['upper']:.4f}]"
              + (f"  rank {rr[0]}-{rr[1]}" if rr else ""))
    print("pairs:")
    for p in report.get("pairs") or []:
        cost = (f"; to settle: {p['items_to_settle']} more items, ${p['cost_to_settle_usd']:.4f}"
                + (" (beyond the stopping policy)" if p.get("beyond_policy") else "")) \
            if p["outcome"] == "unresolved" else ""
        print(f"  {p['a']} vs {p['b']}: {p['outcome']}, P(order) {p['p_order']:.4f}{cost}")
    print("ties: " + ("; ".join(" ≈ ".join(p) for p in report["ties"]) or "none")
          + ("; settled as ties: " + "; ".join(" ≈ ".join(p) for p in report["equivalent"])
             if report["equivalent"] else ""))
    print("confident pairs:")
    for c in verdict["confident_pairs"]:
        print(f"  {c['higher']} > {c['lower']}  P = {c['p']:.4f}  full data: {'right' if c['right'] else 'WRONG'}")
    if not verdict["confident_pairs"]:
        print("  none")
    n_conf = len(verdict["confident_pairs"])
    n_ok = sum(c["right"] for c in verdict["confident_pairs"])
    print(f"{'PASS' if verdict['spend_ok'] else 'FAIL'}: total spend ≤ {100 * verdict['spend_limit']:g}% of a full "
          f"run ({100 * verdict['spend_share']:.1f}%)")
    if result.get("tie_margin") is None:
        print(f"{'PASS' if verdict['near_tie_reported_as_tie'] else 'FAIL'}: the near tie "
              f"{' vs '.join(case['near_tie'])} not ordered ({verdict['near_tie_outcome']})")
    else:
        print(f"{'PASS' if verdict['near_tie_equivalent'] else 'FAIL'}: the near tie "
              f"{' vs '.join(case['near_tie'])} reported equivalent at tie margin {result['tie_margin']:g} "
              f"({verdict['near_tie_outcome']})")
    print(f"{'PASS' if verdict['confident_all_right'] else 'FAIL'}: every confident pair right "
          f"({n_ok} of {n_conf})")
    print(f"{'PASS' if verdict['no_impossibility_claim'] and verdict['unresolved_with_cost'] else 'FAIL'}: no "
          f"impossibility claim, every unresolved pair with its cost to settle ({len(verdict['unresolved'])} unresolved)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default=str(CASE_PATH))
    ap.add_argument("--json", default=None, help="write the figures here")
    ap.add_argument("--tie-margin", type=float, default=None, help="rank --tie-margin (metric units)")
    ap.add_argument("--seed", type=int, nargs="+", default=[None], help="rank --seed, one run each")
    ap.add_argument("--anytime", action="store_true", help="rank --anytime: the anytime-valid ranker, the bank "
                    "ordering the pairs it leaves open; its stopping policy is the bank-free one (docs/cold-start.md)")
    ap.add_argument("--settle-share", type=float, default=None,
                    help="rank --settle-share (the stopping policy's share of a full run; the spend criterion then)")
    a = ap.parse_args(argv)
    case = load_case(a.case)
    truth = full_data_truth(case)
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-near-tie-") as tmp, ReplayServer() as srv:
        os.environ["OPENAI_API_BASE"] = srv.url
        os.environ["OPENAI_API_KEY"] = "replay"
        for seed in a.seed:
            result = run_case(case, Path(tmp), server=srv, tie_margin=a.tie_margin, seed=seed,
                              settle_share=a.settle_share, anytime=a.anytime)
            verdict = judge(result, truth)
            if len(a.seed) > 1:
                print(f"\n=== rank --seed {seed} ===")
            show(result, truth, verdict)
            runs.append({"verdict": verdict, **{k: v for k, v in result.items() if k != "usage_mismatches"}})
    if len(runs) > 1:
        shares = [r["verdict"]["spend_share"] for r in runs]
        print(f"\n{len(runs)} seeds: spend {100 * min(shares):.1f}-{100 * max(shares):.1f}% of a full run; every "
              f"confident pair right in {sum(r['verdict']['confident_all_right'] for r in runs)} of {len(runs)}; "
              f"near tie not ordered in {sum(r['verdict']['near_tie_reported_as_tie'] for r in runs)}")
    if a.json:
        Path(a.json).write_text(json.dumps({"truth": truth, "runs": runs} if len(runs) > 1 else
                                           {"truth": truth, **runs[0]}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

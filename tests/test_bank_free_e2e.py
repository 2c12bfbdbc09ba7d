"""Day one on a task with no bank (issue 31), end to end and offline: the real harness, the real litellm
client, real HTTP to the replay endpoint.

The WMT24 en-de task is copied under another name (``cold_en-de``) so that no shipped bank fits it:
``rank`` of four WMT24 systems then ranks with the bank-free ranker (every model answering the same random
documents) and ``run --adaptive`` evaluates one system on documents in random order to ``--ci-width``.
Both are checked against the recorded full-run means (``wmt24/en-de/bleu`` and ``chrf``); the rank is
killed (``kill -9``) and resumed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from lm_eval_adaptive.cli.main import main

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
TASK = "cold_en-de"
# four systems whose full-run BLEU means are 0.09-0.34 apart (the recorded table's)
SYSTEMS = ["CycleL", "TSU-HITs", "NVIDIA-NeMo", "TranssionMT"]
MAX_ITEMS = 60


@pytest.fixture(scope="module")
def server(replay_server):
    return replay_server


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory):
    """The WMT24 en-de task under a name no shipped bank is for."""
    d = tmp_path_factory.mktemp("tasks")
    src = REPO / "task_configs" / "wmt24"
    for name in ("_wmt24_common_yaml", "utils.py"):
        (d / name).write_text((src / name).read_text())
    (d / f"{TASK}.yaml").write_text((src / "wmt24_en-de.yaml").read_text().replace("task: wmt24_en-de",
                                                                                  f"task: {TASK}"))
    return d


def truth(metric: str) -> dict:
    from lm_eval_adaptive.data.tables import load_any_table

    t = load_any_table(f"wmt24/en-de/{metric}")
    return {str(m): float(v) for m, v in zip(t.models, np.nanmean(t.mean_matrix(), axis=1))}


def rank_args(task_dir, out, *extra):
    return ["rank", "--models", *[f"{s}=litellm:model=openai/{s}" for s in SYSTEMS], "--tasks", TASK,
            "--include_path", str(task_dir), "--apply_chat_template", "--metric", "bleu", "--max-items",
            str(MAX_ITEMS), "--budget-usd", "1", "--price", "default=1,3", "--output", str(out), "--backoff",
            "0.05", "--no-progress", *extra]


def two_model_rank(task_dir, bank, out) -> list:
    """``rank`` of two of the systems with ``bank``, 12 items each at most, under a $1 cap."""
    return ["rank", "--models", *[f"{s}=litellm:model=openai/{s}" for s in ("CycleL", "TranssionMT")], "--tasks",
            TASK, "--include_path", str(task_dir), "--apply_chat_template", "--bank", str(bank), "--max-items", "12",
            "--budget-usd", "1", "--price", "default=1,3", "--output", str(out), "--backoff", "0.05", "--no-progress"]


def read(out) -> dict:
    return json.loads((Path(out) / "ranking.json").read_text())


@pytest.fixture(scope="module")
def clean_rank(server, task_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("rank") / "run"
    assert main(rank_args(task_dir, out)) == 0
    return out


def test_rank_with_no_bank_orders_pairs_rightly_and_prices_the_rest(clean_rank, capsys):
    r = read(clean_rank)
    full = truth("bleu")
    assert r["mode"] == "bank-free" and r["bank_id"] is None
    assert r["mode_note"].startswith(f"no item bank for {TASK}: every model answers the same random documents")
    assert {e["model"] for e in r["ranking"]} == set(SYSTEMS)
    assert r["stopped_because"] in ("max_items", "settled") and r["total_cost_usd"] <= 1.0
    ordered = [p for p in r["pairs"] if p["outcome"] == "ordered"]
    assert ordered, "no pair was ordered: the check below would be empty"
    for p in ordered:  # every ordered pair right against the recorded full runs
        assert (p["lower"] > 0) == (full[p["a"]] > full[p["b"]]), p
    for p in r["pairs"]:
        if p["outcome"] == "unresolved":  # each unsettled pair with its cost to settle
            assert p["items_to_settle"] > 0 and p["cost_to_settle_usd"] > 0, p
            lo, hi = p["items_to_settle_range"]
            assert lo <= p["items_to_settle"] <= hi
    for e in r["ranking"]:  # intervals inside the metric's range, holding the full-run mean
        est = e["metric_estimate"]
        assert 0.0 <= est["lower"] <= est["estimate"] <= est["upper"] <= 1.0
        assert est["lower"] <= full[e["model"]] <= est["upper"], (e["model"], est, full[e["model"]])
        assert e["items"] == MAX_ITEMS or r["stopped_because"] == "settled"
    # every model answered the same documents, in the same order
    j = [json.loads(x) for x in (Path(clean_rank) / "journal.jsonl").read_text().splitlines()]
    docs = {m: [x["item_id"] for x in j if x.get("type") == "score" and x["model"] == m] for m in SYSTEMS}
    assert len({tuple(sorted(v)) for v in docs.values()}) == 1


def _subprocess(args):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-m", "lm_eval_adaptive.cli.main", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=str(REPO))


def _kill_after_scores(server, args, out, n: int):
    """Run ``rank`` (``args``) in a subprocess against ``server`` with some latency and SIGKILL it once its
    journal holds ``n`` scores: a run stopped mid-way, nothing of its result written."""
    server.latency = 0.05
    try:
        proc = _subprocess(args)
        path, t0 = out / "journal.jsonl", time.monotonic()
        while not (path.exists() and path.read_bytes().count(b'"type":"score"') >= n):
            assert proc.poll() is None, proc.stdout.read().decode()[-2000:]
            assert time.monotonic() - t0 < 300, "no progress"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        server.latency = 0.0
    assert not (out / "ranking.json").exists()


def test_a_killed_bank_free_rank_resumes_to_the_same_result(server, task_dir, clean_rank, tmp_path):
    out = tmp_path / "killed"
    _kill_after_scores(server, rank_args(task_dir, out), out, 60)
    # the journal holds the run's prices (issue 28): prices that changed since are refused on resume, as in a
    # banked run, before anything is asked
    import dataclasses

    from lm_eval_adaptive.live import session

    real = session.live_prices  # the settings are priced once, by the command line (session.resolved_settings)

    def doubled(a, specs):
        prices, policy = real(a, specs)
        return {m: dataclasses.replace(p, input_per_token=2 * p.input_per_token) for m, p in prices.items()}, policy

    def records():  # the journal's records (the disk room it keeps for calls in flight is padding, not a record)
        return [x for x in (out / "journal.jsonl").read_text().splitlines() if x.strip()]

    journal_before = records()
    session.live_prices = doubled
    try:
        assert main(["rank", "--resume", str(out), "--no-progress"]) == 2
    finally:
        session.live_prices = real
    assert records() == journal_before
    assert main(["rank", "--resume", str(out), "--no-progress"]) == 0
    r, ref = read(out), read(clean_rank)
    assert r["mode"] == "bank-free"
    j = [json.loads(x) for x in (out / "journal.jsonl").read_text().splitlines()]
    scored = Counter((x["model"], x["item_id"]) for x in j if x.get("type") == "score")
    assert max(scored.values()) == 1  # nothing scored twice
    # the same documents in the same order: the same estimates and intervals as the run never killed
    got = {e["model"]: e["metric_estimate"] for e in r["ranking"]}
    want = {e["model"]: e["metric_estimate"] for e in ref["ranking"]}
    for m in SYSTEMS:
        assert got[m]["estimate"] == pytest.approx(want[m]["estimate"], abs=1e-12)
        assert (got[m]["lower"], got[m]["upper"]) == pytest.approx((want[m]["lower"], want[m]["upper"]), abs=1e-12)
    assert [p["outcome"] for p in r["pairs"]] == [p["outcome"] for p in ref["pairs"]]


def test_run_adaptive_with_no_bank_stops_at_the_interval_width(server, task_dir, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "--model", "litellm", "--model_args", "model=openai/TranssionMT", "--tasks", TASK,
                 "--include_path", str(task_dir), "--apply_chat_template", "--adaptive", "--metric", "chrf",
                 "--ci-width", "0.06", "--price", "1,3", "--output_path", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert f"mode: no item bank for {TASK}: the model answers documents in random order" in printed
    (results,) = list(out.rglob("results_*.json"))
    res = json.loads(results.read_text())
    block = res["adaptive"][TASK]
    est = block["metric_estimate"]
    full = truth("chrf")["TranssionMT"]
    assert block["mode"] == "bank-free" and block["stopped_because"] == "ci_width"
    assert est["lower"] <= full <= est["upper"], (est, full)
    assert est["upper"] - est["lower"] <= 0.06  # --ci-width W: the interval is at most W wide (upper − lower)
    assert block["items"] < 0.5 * block["task_docs"]
    # the harness table's Value ± Stderr: the estimate, and the interval's half-width / 1.96
    row = res["results"][TASK]
    assert row["chrf,none"] == pytest.approx(est["estimate"])
    assert row["chrf_stderr,none"] == pytest.approx((est["upper"] - est["lower"]) / (2 * 1.959963984540054), rel=1e-6)


def test_a_killed_bank_free_run_adaptive_resumes_paying_each_document_once(server, task_dir, tmp_path):
    """run --adaptive with no bank is journaled as the banked run is (harness/batch_journal.py): killed with
    SIGKILL after its 1st and 4th journaled documents and resumed with --resume, every document is asked of
    the endpoint once in all, and the results are the uninterrupted run's (the seeded random order picks
    the same documents again)."""
    import glob

    from tests.test_run_journal import cli

    def args(out, *extra):
        return ["run", "--model", "litellm", "--model_args", "model=openai/TranssionMT", "--tasks", TASK,
                "--include_path", str(task_dir), "--apply_chat_template", "--adaptive", "--metric", "chrf",
                "--max-items", "6", "--price", "1,3", "--output_path", str(out), "--no-progress", *extra]

    def block(out):
        (f,) = glob.glob(str(out / "**" / "results_*.json"), recursive=True)
        return json.loads(Path(f).read_text())["adaptive"][TASK]

    log = tmp_path / "log.txt"
    server.reset_stats()
    assert cli(args(tmp_path / "whole"), log) == 0, log.read_text()[-3000:]
    whole = server.stats()["per_item"]["TranssionMT"]
    assert len(whole) == 6
    server.reset_stats()
    out = tmp_path / "killed"
    for resume, kill_after in ((False, 1), (True, 4)):
        code = cli(args(out, *(["--resume"] if resume else [])), log, kill_after=f"batch:{kill_after}")
        assert code == -signal.SIGKILL, log.read_text()[-3000:]
        assert server.stats()["per_model"] == {"TranssionMT": kill_after}  # nothing journaled asked again
    assert cli(args(out, "--resume"), log) == 0, log.read_text()[-3000:]
    stats = server.stats()
    assert stats["per_model"] == {"TranssionMT": 6} and stats["per_item"]["TranssionMT"].keys() == whole.keys()
    a, b = block(tmp_path / "whole"), block(out)
    assert a["mode"] == b["mode"] == "bank-free"
    for k in ("items", "metric_estimate", "stopped_because"):
        assert a[k] == b[k], k


def test_a_bad_score_range_or_a_missing_metric_is_one_error_line(task_dir, tmp_path, capsys):
    base = ["rank", "--models", "a=litellm:model=openai/CycleL", "b=litellm:model=openai/TSU-HITs", "--tasks",
            TASK, "--include_path", str(task_dir), "--price", "default=1,3"]
    assert main([*base, "--metric", "bleu", "--score-range", "1,0", "--output", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: --score-range '1,0'")
    assert main([*base, "--output", str(tmp_path / "y")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: no item bank for task") and "--metric" in err[-1]
    assert main([*base, "--metric", "bleu", "--dry-run"]) == 2
    assert "has no item bank, so there are no token counts to forecast from" in capsys.readouterr().err
    assert main(["run", "--model", "litellm", "--model_args", "model=openai/CycleL", "--tasks", TASK, "--include_path",
                 str(task_dir), "--adaptive", "--metric", "bleu", "--price", "1,3", "--dry-run"]) == 2
    assert "has no item bank, so there are no token counts to forecast from" in capsys.readouterr().err
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_calibrate_reads_a_bank_free_rank_and_run_as_history(server, task_dir, clean_rank, tmp_path, capsys):
    """Issue 31 item 4: the answers of a rank with no bank (its journal) and of a run --adaptive with no bank
    (its sample logs) are history: calibrate builds a bank from them, missing cells allowed."""
    logs = tmp_path / "logs"
    assert main(["run", "--model", "litellm", "--model_args", "model=openai/Aya23", "--tasks", TASK,
                 "--include_path", str(task_dir), "--apply_chat_template", "--adaptive", "--metric", "bleu",
                 "--max-items", "40", "--price", "1,3", "--output_path", str(logs), "--log_samples",
                 "--no-progress"]) == 0
    bank = tmp_path / "bank.json"
    capsys.readouterr()
    assert main(["calibrate", "--samples", str(clean_rank), str(logs), "--task", TASK, "--metric", "bleu",
                 "--out", str(bank), "--no-self-check"]) == 0
    from lm_eval_adaptive.engine.irt.bank import ItemBank

    b = ItemBank.load(bank)
    answered = {json.loads(x)["item_id"] for x in (Path(clean_rank) / "journal.jsonl").read_text().splitlines()
                if '"type":"score"' in x}
    (samples,) = list(logs.rglob(f"samples_{TASK}_*.jsonl"))
    logged = {str(json.loads(x)["doc_id"]) for x in samples.read_text().splitlines() if x.strip()}
    assert len(logged) == 40
    assert b.task == TASK and b.metric == "bleu"
    assert set(map(str, b.item_ids)) <= answered | logged  # only documents some run answered
    assert b.n_items >= 0.5 * len(answered)  # the rank's documents, less the items calibration drops
    # a journal is read for the task and metric it scored, else refused naming it
    from lm_eval_adaptive.errors import InputError
    from lm_eval_adaptive.live.run_history import journal_columns

    with pytest.raises(InputError, match="scored metric 'bleu', not 'chrf'"):
        journal_columns(clean_rank, task=TASK, metric="chrf")


def test_a_bank_from_too_few_models_is_not_used_and_the_runs_say_why(server, task_dir, clean_rank, tmp_path, capsys):
    """Issue 31 item 3: a bank from the 4 models of one rank is below the threshold
    (engine/anytime/small_bank.py): calibrate says what it can do, and rank and run --adaptive given it run
    bank-free, saying so and why, with intervals that hold the full-run means."""
    from lm_eval_adaptive.engine.anytime.small_bank import MIN_BANK_MODELS, MIN_BANK_MODELS_ESTIMATE

    assert len(SYSTEMS) < MIN_BANK_MODELS
    bank = tmp_path / "bank4.json"
    capsys.readouterr()
    assert main(["calibrate", "--samples", str(clean_rank), "--task", TASK, "--metric", "bleu", "--out", str(bank),
                 "--no-self-check"]) == 0
    said = capsys.readouterr().out
    assert f"note: a bank from {len(SYSTEMS)} models is not used" in " ".join(said.split())
    why = f"bank from {len(SYSTEMS)} models, too few to use (a bank needs at least {MIN_BANK_MODELS} calibration models)"
    why_run = why.replace(f"at least {MIN_BANK_MODELS} ", f"at least {MIN_BANK_MODELS_ESTIMATE} ")
    out = tmp_path / "rank"
    assert main(two_model_rank(task_dir, bank, out)) == 0
    r = read(out)
    assert r["mode"] == "bank-free" and r["mode_note"].startswith(why + ": ranking without it")
    assert r["metric"] == "bleu"  # the bank's metric, no --metric given
    full = truth("bleu")
    for e in r["ranking"]:
        est = e["metric_estimate"]
        assert 0.0 <= est["lower"] <= full[e["model"]] <= est["upper"] <= 1.0
    logs = tmp_path / "run"
    capsys.readouterr()
    assert main(["run", "--model", "litellm", "--model_args", "model=openai/TranssionMT", "--tasks", TASK,
                 "--include_path", str(task_dir), "--apply_chat_template", "--adaptive", "--bank", str(bank),
                 "--max-items", "8", "--price", "1,3", "--output_path", str(logs), "--no-progress"]) == 0
    assert f"mode: {why_run}: estimating without it" in " ".join(capsys.readouterr().out.split())
    (results,) = list(logs.rglob("results_*.json"))
    block = json.loads(results.read_text())["adaptive"][TASK]
    assert block["mode"] == "bank-free" and block["items"] == 8 and block["metric"] == "bleu"


def test_a_killed_rank_that_fell_back_resumes_bank_free(server, task_dir, clean_rank, tmp_path):
    """Issue 31: a ``rank`` given a bank too small to use runs bank-free; killed (``kill -9``) mid-run and
    resumed, it stays bank-free with the same reason (the resumed run does not start using the bank), asks
    no document twice, and ends with the uninterrupted run's estimates."""
    bank = tmp_path / "bank4.json"
    assert main(["calibrate", "--samples", str(clean_rank), "--task", TASK, "--metric", "bleu", "--out", str(bank),
                 "--no-self-check"]) == 0

    def args(out):
        return two_model_rank(task_dir, bank, out)

    whole = tmp_path / "whole"
    assert main(args(whole)) == 0
    out = tmp_path / "killed"
    _kill_after_scores(server, args(out), out, 8)
    assert main(["rank", "--resume", str(out), "--no-progress"]) == 0
    r, ref = read(out), read(whole)
    assert r["mode"] == ref["mode"] == "bank-free"
    assert r["mode_note"] == ref["mode_note"] and "too few to use" in r["mode_note"]
    j = [json.loads(x) for x in (out / "journal.jsonl").read_text().splitlines() if x.strip()]
    scored = Counter((x["model"], x["item_id"]) for x in j if x.get("type") == "score")
    assert max(scored.values()) == 1  # nothing scored twice
    got = {e["model"]: e["metric_estimate"] for e in r["ranking"]}
    want = {e["model"]: e["metric_estimate"] for e in ref["ranking"]}
    assert got.keys() == want.keys()
    for m in got:
        assert got[m]["estimate"] == pytest.approx(want[m]["estimate"], abs=1e-12)
        assert (got[m]["lower"], got[m]["upper"]) == pytest.approx((want[m]["lower"], want[m]["upper"]), abs=1e-12)


def test_a_bank_whose_self_check_ranks_below_shared_random_is_not_used_by_rank(server, task_dir, tmp_path,
                                                                               monkeypatch):
    """Issue 31 item 3 (the bank's own history decides): a bank from 26 models (the shipped WMT24 en-de BLEU
    bank) whose self-check, as written here, ranked its held-out models well below shared random documents
    (τ 0.30 against 0.70): ``rank`` given it runs bank-free and its mode line names the reason."""
    from lm_eval_adaptive.engine.anytime import small_bank
    from lm_eval_adaptive.harness.bank_source import load_bank

    if small_bank.BANK_USE_MARGIN is None:  # the rule's m as shipped; a margin for the rule to apply at all
        monkeypatch.setattr(small_bank, "BANK_USE_MARGIN", 0.10)
    bank = load_bank("wmt24_en-de.bleu")
    assert small_bank.bank_use_of(bank).use_bank  # as shipped (the rule is off by default): used
    bank.diagnostics["self_check"] |= {"mean_tau": 0.30, "shared_random_tau": 0.70, "tau_runs": 40}
    path = tmp_path / "bank.json"
    bank.save(path)
    out = tmp_path / "rank"
    assert main(two_model_rank(task_dir, path, out)) == 0
    r = read(out)
    assert r["mode"] == "bank-free"
    assert r["mode_note"].startswith("the bank's self-check ranked its held-out models worse than shared random "
                                     "documents (τ 0.300 against 0.700 over 40 runs")
    assert "ranking without it" in r["mode_note"] and r["metric"] == "bleu"
    full = truth("bleu")
    for e in r["ranking"]:
        assert 0.0 <= e["metric_estimate"]["lower"] <= full[e["model"]] <= e["metric_estimate"]["upper"] <= 1.0


@pytest.fixture(scope="module")
def anytime_bank(tmp_path_factory):
    """The shipped WMT24 en-de BLEU bank (26 models), made this task's: a bank ``rank`` would use."""
    from lm_eval_adaptive.engine.irt.bank import ItemBank
    from lm_eval_adaptive.harness.bank_source import load_bank

    made = load_bank("wmt24_en-de.bleu").to_dict() | {"task": TASK}  # the same bank, made for this task
    path = tmp_path_factory.mktemp("bank") / "bank.json"
    ItemBank.from_dict(made).save(path)
    return path


@pytest.fixture(scope="module")
def anytime_rank(server, task_dir, anytime_bank, tmp_path_factory):
    out = tmp_path_factory.mktemp("anytime") / "run"
    assert main(rank_args(task_dir, out, "--bank", str(anytime_bank), "--anytime")) == 0
    return out


def test_rank_anytime_with_a_bank_decides_as_bank_free_and_the_bank_orders_only_open_pairs(anytime_rank, anytime_bank,
                                                                                          clean_rank):
    """Issue 31 item 2 (docs/cold-start.md, *The anytime-valid ranker with a bank*): ``rank --anytime`` given a
    usable bank (the shipped WMT24 en-de BLEU bank, 26 models, made this task's) runs the anytime-valid ranker.
    Its bank decides nothing: the same documents are asked, and every pair outcome, estimate and interval is
    the no-bank run's; only the order of the pairs left open may differ, and the report names what set it."""
    out, path = anytime_rank, anytime_bank
    r, ref = read(out), read(clean_rank)
    assert r["mode"] == "bank-free"
    assert r["mode_note"].startswith(f"anytime-valid ranking asked (--anytime; the bank '{TASK}/bleu'")
    assert "every model answers the same random documents; intervals hold whenever the run stops" in r["mode_note"]
    assert r["open_pair_order"].startswith("bank prediction") and ref["open_pair_order"] is None
    saved = json.loads((out / "run.json").read_text())["settings"]
    assert saved["anytime"] is True and saved["bank"] == str(path.resolve())

    def scored(run):
        j = [json.loads(x) for x in (Path(run) / "journal.jsonl").read_text().splitlines() if x.strip()]
        return sorted((x["model"], x["item_id"]) for x in j if x.get("type") == "score")

    assert scored(out) == scored(clean_rank)  # the same documents: the bank chose none of them
    def outcomes(run):  # each pair's outcome and interval, written with its two models in name order
        out = {}
        for p in run["pairs"]:
            lo, hi = (p["lower"], p["upper"]) if p["a"] < p["b"] else (-p["upper"], -p["lower"])
            out[tuple(sorted((p["a"], p["b"])))] = (p["outcome"], round(lo, 12), round(hi, 12))
        return out

    assert outcomes(r) == outcomes(ref)
    full = truth("bleu")
    want = {e["model"]: e["metric_estimate"] for e in ref["ranking"]}
    for e in r["ranking"]:
        est = e["metric_estimate"]
        assert est["anytime_valid"] and (est["lower"], est["upper"]) == pytest.approx(
            (want[e["model"]]["lower"], want[e["model"]]["upper"]), abs=1e-12)
        assert 0.0 <= est["lower"] <= full[e["model"]] <= est["upper"] <= 1.0
    ranked = [e["model"] for e in r["ranking"]]
    for p in r["pairs"]:  # the decided pairs fix the order as in the no-bank run
        if p["outcome"] == "ordered":
            first, second = (p["a"], p["b"]) if p["lower"] > 0 else (p["b"], p["a"])
            assert ranked.index(first) < ranked.index(second)


def test_rank_anytime_refusals_are_one_error_line(task_dir, tmp_path, capsys):
    """``--anytime`` ranks on one metric: several banks (one per metric) are refused before anything is asked."""
    base = ["rank", "--models", "a=litellm:model=openai/CycleL", "b=litellm:model=openai/TSU-HITs", "--tasks",
            "wmt24_en-de", "--include_path", str(REPO / "task_configs"), "--anytime", "--price", "default=1,3",
            "--no-progress"]
    assert main([*base, "--bank", "wmt24_en-de.bleu", "wmt24_en-de.chrf", "--output", str(tmp_path / "x")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--anytime: task 'wmt24_en-de' is given 2 banks" in err and err.count("error:") == 1
    assert not (tmp_path / "x").exists()


def test_rank_anytime_dry_run_forecasts_the_anytime_ranker_and_calls_nothing(server, task_dir, anytime_bank, tmp_path,
                                                                             capsys):
    """``rank --anytime --dry-run`` (live/bank_free_forecast.py): the anytime-valid ranker simulated on the bank's
    documents and response model, under the run's cap, item cap and stopping policy. No call is made and only the
    forecast is written; it says it forecast the anytime-valid ranker, and the real run with the same settings (two
    of the systems, at most 30 items each, a $1 cap) spends within the project's 25% of its typical figure."""
    def args(out, *extra):
        return ["rank", "--models", *[f"{s}=litellm:model=openai/{s}" for s in ("CycleL", "NVIDIA-NeMo")], "--tasks",
                TASK, "--include_path", str(task_dir), "--apply_chat_template", "--bank", str(anytime_bank),
                "--anytime", "--max-items", "30", "--budget-usd", "1", "--price", "default=1,3", "--output", str(out),
                "--backoff", "0.05", "--no-progress", *extra]

    out = tmp_path / "fc"
    requests = server.stats()["requests"]
    assert main(args(out, "--dry-run")) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "cost forecast of rank" in printed and "the anytime-valid ranker (--anytime)" in printed
    assert server.stats()["requests"] == requests  # no call made
    assert sorted(p.name for p in out.iterdir()) == ["cost_forecast.json"]
    fc = json.loads((out / "cost_forecast.json").read_text())
    assert fc["settings"]["anytime"] is True and fc["settings"]["max_items"] == 30
    assert main(args(tmp_path / "real")) == 0
    total, real = fc["total"], read(tmp_path / "real")
    assert fc["budget_usd"] == 1.0 and total["worst_case"]["cost_usd"] >= real["total_cost_usd"]
    assert total["worst_case"]["items"] >= sum(e["items"] for e in real["ranking"])
    usd = total["cost_usd"]
    assert 0 < usd["p10"] <= usd["typical"] <= usd["p90"] <= total["worst_case"]["cost_usd"]
    # the project's forecast target (tests/test_dry_run_e2e.py): the real spend within 25% of the typical figure;
    # measured (50 simulated runs): typical $0.0137 (60 items) against the real run's $0.0151 (60 items, --max-items)
    assert abs(real["total_cost_usd"] - usd["typical"]) <= 0.25 * real["total_cost_usd"], (usd, real["total_cost_usd"])


def test_a_killed_rank_anytime_resumes_with_its_bank_order(server, task_dir, anytime_bank, anytime_rank, tmp_path):
    """``rank --anytime`` killed (``kill -9``) mid-run and resumed: the journal's settings bring back the mode and
    the bank that orders the open pairs, no document is asked twice, and the result is the uninterrupted run's."""
    out = tmp_path / "killed"
    _kill_after_scores(server, rank_args(task_dir, out, "--bank", str(anytime_bank), "--anytime"), out, 60)
    assert main(["rank", "--resume", str(out), "--no-progress"]) == 0
    r, ref = read(out), read(anytime_rank)
    assert r["mode_note"] == ref["mode_note"] and r["mode_note"].startswith("anytime-valid ranking asked")
    assert r["open_pair_order"] == ref["open_pair_order"] is not None
    j = [json.loads(x) for x in (out / "journal.jsonl").read_text().splitlines() if x.strip()]
    scored = Counter((x["model"], x["item_id"]) for x in j if x.get("type") == "score")
    assert max(scored.values()) == 1  # nothing scored twice
    assert [e["model"] for e in r["ranking"]] == [e["model"] for e in ref["ranking"]]
    got = {e["model"]: e["metric_estimate"] for e in r["ranking"]}
    for e in ref["ranking"]:
        assert (got[e["model"]]["lower"], got[e["model"]]["upper"]) == pytest.approx(
            (e["metric_estimate"]["lower"], e["metric_estimate"]["upper"]), abs=1e-12)


def test_rank_anytime_with_no_cap_settles_far_systems_and_stops_on_its_own(server, task_dir, anytime_bank, tmp_path,
                                                                         capsys):
    """``rank --anytime`` with neither ``--budget-usd`` nor ``--max-items`` runs under the live stopping policy on the
    cost to settle (engine/anytime/cost_to_settle.py; a near tie: tests/test_near_tie_live.py). Two systems far apart
    (full-run BLEU 0.09 and 0.34): the run settles them and stops on its own."""
    out = tmp_path / "nocap"
    two = [SYSTEMS[0], SYSTEMS[3]]
    args = ["rank", "--models", *[f"{s}=litellm:model=openai/{s}" for s in two], "--tasks", TASK,
            "--include_path", str(task_dir), "--apply_chat_template", "--bank", str(anytime_bank), "--anytime",
            "--price", "default=1,3", "--output", str(out), "--backoff", "0.05", "--no-progress"]
    assert main(args) == 0
    r = read(out)
    assert r["stopped_because"] == "settled" and r["pairs"][0]["outcome"] == "ordered"
    # the bank-free ranker's policy: the banked ranker's share, its own floor of documents per model (rule 3 of
    # docs/results/stop34_rules.txt)
    assert r["signature"]["settle_policy"].startswith("settle-cost(full_run=0.1,floor_items=50,")

"""``run --adaptive`` with several banks of one task (one per metric): each chosen document is generated
once and scored with every metric; the results give each metric its own θ̂, SE and interval.

End to end offline: the real harness, real litellm, real HTTP to the replay endpoint (WMT24 en-de,
BLEU and chrF banks built as the shipped ones are, without the system run). The engine part (:class:`MultiMetricTest`) is checked on simulated
scores with known abilities.
"""

from __future__ import annotations

import glob
import json
from pathlib import Path

import numpy as np
import pytest

from conftest import build_banks_module, make_sim_bank, simulate_scores
from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.data.named_tables import load_named
from lm_eval_adaptive.engine.cat.adaptive_test import AdaptiveTest
from lm_eval_adaptive.engine.cat.multi_metric_test import MultiMetricTest
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness.bank_source import parse_banks

REPO = Path(__file__).resolve().parents[1]
WMT = "wmt24_en-de"
SYSTEM = "Mistral-Large"


# ------------------------------------------------------------------------------------ engine
def _run_multi(banks, thetas, seed, **kw):
    rng = np.random.default_rng(seed)
    t = MultiMetricTest(banks, seed=seed, **kw)
    while items := t.next_items(1):
        for i in items:
            t.record(i, {m: float(simulate_scores(thetas[m], np.array([b.b[t.bank_item(m, i)]]), rng=rng)[0])
                         for m, b in banks.items()})
    return t


def test_multi_metric_test_stops_when_every_metric_meets_its_se_target_and_covers_the_true_abilities():
    banks = {"a": make_sim_bank(seed=1), "b": make_sim_bank(seed=2)}
    thetas = {"a": 0.8, "b": -0.5}
    hits, n = 0, 0
    for seed in range(40):
        t = _run_multi(banks, thetas, seed, se_target=0.25, min_items=10, max_items=400)
        assert t.stopped_because == "se_target"
        for m, e in t.examinees.items():
            assert e.measurement_se <= 0.25 and e.n == t.n  # every generation scored under every metric
            hits += abs(e.theta - thetas[m]) <= 1.96 * e.se
            n += 1
        assert len(set(t.items)) == t.n  # no item generated twice
    assert hits / n >= 0.88  # nominal 0.95 over 80 intervals


def test_multi_metric_test_with_one_bank_needs_no_more_items_than_the_single_test():
    bank = make_sim_bank(seed=3)
    multi = [_run_multi({"a": bank}, {"a": 0.3}, s, se_target=0.3, min_items=5).n for s in range(10)]
    rng = np.random.default_rng(0)
    single = [AdaptiveTest(bank, se_target=0.3, min_items=5, seed=s).run(
        lambda i: float(simulate_scores(0.3, np.array([bank.b[i]]), rng=rng)[0])).n_items for s in range(10)]
    assert abs(np.mean(multi) - np.mean(single)) <= 0.15 * np.mean(single)


def test_multi_metric_test_budget_and_missing_scores():
    banks = {"a": make_sim_bank(seed=1), "b": make_sim_bank(seed=2)}
    n = len(MultiMetricTest(banks, max_items=5).item_ids)
    t = MultiMetricTest(banks, se_target=None, max_items=None, budget=1.0, item_costs=np.full(n, 0.3))
    given = []
    while items := t.next_items(2):
        for i in items:
            t.record(i, {"a": 0.5, "b": None})  # metric b could not score it
            given.append(i)
    assert t.stopped_because == "budget" and len(given) == 3 and t.spent == pytest.approx(0.9)
    assert t.examinees["a"].n == 3 and t.examinees["b"].n == 0
    assert all(t.examinees["b"].is_excluded(t.bank_item("b", i)) for i in given)
    with pytest.raises(ValueError, match="not asked for"):
        t.record(given[0], {"a": 0.5})


def test_parse_banks_gives_a_task_several_banks_only_when_asked():
    assert parse_banks(["wmt24_en-de.bleu", "wmt24_en-de.chrf"], [WMT], several=True) == {
        WMT: ["wmt24_en-de.bleu", "wmt24_en-de.chrf"]}
    with pytest.raises(InputError, match="given two banks"):
        parse_banks(["wmt24_en-de.bleu", "wmt24_en-de.chrf"], [WMT])
    with pytest.raises(InputError, match="twice"):
        parse_banks(["wmt24_en-de.bleu", "wmt24_en-de.bleu"], [WMT], several=True)


# ------------------------------------------------------------------------- end to end (replay)
def _run(out, *extra):
    return main(["run", "--model", "litellm", "--model_args", f"model=openai/{SYSTEM}", "--tasks", WMT,
                 "--include_path", str(REPO / "task_configs"), "--apply_chat_template", "--log_samples",
                 "--no-progress", "--output_path", str(out), *extra])


def _results(out):
    (res,) = glob.glob(str(Path(out) / "*" / "results_*.json"))
    return json.loads(Path(res).read_text())


def test_run_adaptive_with_two_banks_generates_each_document_once_and_both_intervals_hold_the_truth(
        replay_server, tmp_path, capsys):
    # the BLEU and chrF banks built WITHOUT the system run (as the shipped ones are built, from every system)
    bb = build_banks_module()
    paths = [bb.write_bank(bb.build_bank(f"{WMT}.{m}", exclude=[SYSTEM]), tmp_path / f"{m}.json.gz")
             for m in ("bleu", "chrf")]
    # --dry-run first: a forecast of the joint run, nothing called
    replay_server.reset_stats()
    assert _run(tmp_path / "dry", "--adaptive", "--bank", *map(str, paths), "--dry-run") == 0
    assert replay_server.stats()["served"] == 0
    fc = json.loads((tmp_path / "dry" / "cost_forecast.json").read_text())
    assert "calibration models every bank records" in " ".join(capsys.readouterr().out.split())  # (wrapped)
    assert len(fc["bank_id"].split(", ")) == 2  # both banks named
    assert _run(tmp_path / "joint", "--adaptive", "--bank", *map(str, paths),
                "--plot", str(tmp_path / "run.png")) == 0  # the defaults: SE target 0.2, 30 to 500 documents
    assert (tmp_path / "run.png").stat().st_size > 0  # a panel per metric
    res = _results(tmp_path / "joint")
    a = res["adaptive"][WMT]
    n = a["generations"]
    assert a["stopped_because"] == "se_target" and 30 <= n < 100
    assert replay_server.stats()["served"] == n  # one generation per document, both metrics scored from it
    # the forecast's typical spend against the real one (one generation per document, charged once)
    typical, real = fc["total"]["cost_usd"]["typical"], a["cost_usd"]
    with capsys.disabled():  # shown with -s
        print(f"\ntwo-bank run --adaptive: forecast ${typical:.4f}, real ${real:.4f}, real/forecast "
              f"{real / typical:.3f}; items forecast {fc['total']['items']['typical']}, real {n}")
    assert real <= fc["total"]["worst_case"]["cost_usd"]
    assert abs(real - typical) <= 0.25 * real
    assert set(a["metrics"]) == {"bleu", "chrf"}
    for m, b in a["metrics"].items():
        est = b["metric_estimate"]
        assert b["metric"] == b["bank_metric"] == m and b["items"] == n and len(b["trajectory"]["theta"]) == n
        assert b["se_target_met"]
        # the system's recorded full-run mean of the metric is inside the metric's own interval
        t = load_named(f"wmt24/en-de/{m}")
        truth = float(np.nanmean(t.mean_matrix()[list(t.models).index(SYSTEM)]))
        assert est["lower"] <= truth <= est["upper"], (m, est, truth)
        # the harness's own number for the metric is the full-task estimate; its plain mean is kept beside
        assert res["results"][WMT][f"{m},none"] == pytest.approx(est["estimate"])
        assert f"{m}_administered_mean,none" in res["results"][WMT]
    (samples,) = glob.glob(str(tmp_path / "joint" / "*" / f"samples_{WMT}_*.jsonl"))
    rows = [json.loads(x) for x in Path(samples).read_text().splitlines()]
    assert len(rows) == n and len({r["doc_id"] for r in rows}) == n
    assert all(set(r["adaptive"]["scaled_score"]) == {"bleu", "chrf"} for r in rows)
    out = capsys.readouterr().out
    assert f"{WMT} [bleu]: θ̂ =" in out and f"{WMT} [chrf]: θ̂ =" in out
    # --metric names one bank's metric: refused with several
    assert _run(tmp_path / "bad", "--adaptive", "--bank", *map(str, paths), "--metric", "bleu") == 2
    assert replay_server.stats()["served"] == n


def test_dry_run_with_several_banks_forecasts_the_joint_run(tmp_path, capsys):
    """A bank per metric: the forecast simulates the joint test (one generation per document, every
    metric scored), with one calibration model's abilities on every bank; nothing is called."""
    assert _run(tmp_path / "dry", "--adaptive", "--bank", "wmt24_en-de.bleu", "wmt24_en-de.chrf", "--dry-run") == 0
    out = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    assert "cost forecast of run --adaptive" in out and "calibration models every bank records" in out
    fc = json.loads((tmp_path / "dry" / "cost_forecast.json").read_text())
    single = tmp_path / "dry1"
    assert _run(single, "--adaptive", "--bank", "wmt24_en-de.bleu", "--dry-run") == 0
    one = json.loads((single / "cost_forecast.json").read_text())
    # the joint test stops when both metrics meet the SE target: at least the items of BLEU's alone
    assert fc["total"]["items"]["typical"] >= one["total"]["items"]["typical"]
    assert fc["total"]["cost_usd"]["typical"] <= fc["total"]["worst_case"]["cost_usd"]

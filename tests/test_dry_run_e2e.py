"""``--dry-run`` against the real run it forecasts, offline: the real harness, the real litellm client,
real HTTP to the replay endpoint.

Three dev cases, with the settings of the project's existing end-to-end tests (fixed before the
forecast was measured against them):

1. ``rank``: test_rank_e2e's four WMT24 en-de systems (the backtest's hold-out set 0), a bank
   calibrated on the other 22 systems, a $0.2 cap;
2. ``refresh``: test_rank_e2e's 15-system leaderboard, GPT-4 and TSU-HITs added under a $0.3
   cap with at most 120 items each;
3. ``run --adaptive``: Mistral-Large (test_harness_e2e's held-out system), a bank calibrated on
   the other 25 systems, SE target 0.1, 30 to 99 documents.

Each dry run must make no call (counted at the endpoint) and write nothing but its forecast;
then the real run spends, and its spend is compared with the forecast's typical figure. The
target is 25% of the real spend. Forecast typical → real spend (real / forecast), with the
engine's defaults (additive model error, futility stop):

* before (typical = median of 30 simulated runs): rank $0.1827 → $0.1455-$0.1477 (0.80-0.81;
  off by 24-26%: at the edge, xfail); refresh $0.0609 → $0.0546 (0.90; earlier code: $0.0515 →
  $0.0381, 0.74, xfail); run --adaptive $0.0804 → $0.0746 (0.93).
* after (typical = the figure most simulated runs come within 25% of; 100 runs for rank and
  refresh): rank $0.1479 → $0.1454 (0.98); refresh $0.0508 → $0.0546 (1.08); run --adaptive
  $0.0896 → $0.0746 (0.83, off by 20%).
* now (issue 23: one table consistent by construction, the simulated runs made by the live driver
  itself and engine/evaluation/simulation.py; the typical total inside its 10-90% range, every other typical
  figure the median of the runs within 25% of it): rank $0.1532 → $0.1477 (0.96); refresh $0.0587
  → $0.0546 (0.93); run --adaptive $0.0749 → $0.0746 (1.00). README's five-minute block (dry run
  only here): 30 [30, 33] documents, $0.0260 (the real run: 30 documents, $0.0242).

Why the median failed the rank case: its spend is bimodal. The real run stops once the cap's
headroom cannot hold GPT-4's next call's upper estimate (~$0.073, while its calls cost ~$0.005)
and the cheap models' pairs are settled (~$0.145); in about 40-50% of the simulated runs two
cheap models are left in an open pair and buy until the headroom cannot hold their next call
(~$0.197). The median of 30 runs sat on either mode with the seed (30-run blocks of one
200-run simulation: $0.152-$0.183 as medians), and even 200 runs left it at $0.159 or $0.184 by
seed. One figure within 25% of both modes exists ($0.148-$0.181); the figure most runs come
within 25% of finds it (90% of the runs are within 25% of $0.148). The refresh's spend is
long-tailed instead (GPT-4 landing just far enough from its anchors to need many items): the
median ($0.061-$0.068) and more so the mean ($0.092) are pulled by the tail.
(The bank calibrated here records zero model error, so simulating the model error could not
move the rank case; simulating real misfit by resampling the calibration models' own
standardised residuals moved the share of cap-spending runs up, not down.)

The rank case also checks the forecast's simulated run (the live driver itself, its calls
answered one at a time in the order sent): given the scores and charges the real run recorded,
it reproduces that run's items per model. Every forecast here must be consistent
(:func:`consistent`), and the rank and refresh forecasts' full-run cost must be the real report's.
"""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path

import numpy as np
import pytest

from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.live.cost_forecast import FORECAST_FILE, simulated_live_run
from lm_eval_adaptive.live.journal import Journal
from lm_eval_adaptive.live.session import LiveSettings, Setup, rank_ranker, resolved_settings

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
TARGET = 0.25  # |real - forecast| / real


@pytest.fixture(scope="module")
def server(replay_server):
    return replay_server


def calibrated(tmp_path, exclude):
    path = tmp_path / "bank.json"
    assert main(["calibrate", "wmt24/en-de/bleu", "--exclude-models", *exclude, "--task", "wmt24_en-de",
                 "--metric", "bleu", "--out", str(path)]) == 0
    return path


def dry_then_real(server, argv, out, *, out_flag="--output"):
    """(the forecast, the real run's exit status): ``argv --dry-run`` calls nothing; then ``argv``."""
    server.reset_stats()
    assert main(argv + ["--dry-run", out_flag, str(out)]) == 0
    assert server.stats()["requests"] == 0
    assert sorted(os.listdir(out)) == [FORECAST_FILE]  # no run.json, no journal: the real run may use the folder
    forecast = json.loads((out / FORECAST_FILE).read_text())
    assert forecast["dry_run"] and forecast["calls_made"] == 0
    consistent(forecast)
    server.reset_stats()
    return forecast, main(argv + [out_flag, str(out)])


def off_by(real, forecast):
    return abs(real - forecast) / real


def consistent(fc: dict) -> None:
    """Issue 23's forecast table, consistent by construction: in every row and the total, each typical
    figure inside its own 10-90% range and the worst case at least the range's top, never above the cap
    (rank, refresh) or a full run, and never above the hard bound of the upper estimates."""
    cap = fc["budget_usd"] if fc["command"] != "run --adaptive" else None
    for row in [*fc["models"], fc["total"]]:
        for key in ("items", "cost_usd"):
            s = row[key]
            assert s["p10"] <= s["typical"] <= s["p90"], (row.get("model", "total"), key, s)
        worst = row["worst_case"]
        assert row["cost_usd"]["p90"] <= worst["cost_usd"] * (1 + 1e-12), (row.get("model", "total"), worst)
        assert worst["cost_usd"] <= min(cap or float("inf"), row["full_run_cost_usd"]) * (1 + 1e-12)
        assert worst["cost_usd"] <= worst["bound_usd"] * (1 + 1e-12)
        assert row["items"]["p90"] <= worst["items"]


# --------------------------------------------------------------------------- 1. rank
RANK_SYSTEMS = ["GPT-4", "NVIDIA-NeMo", "AIST-AIRC", "TranssionMT"]
RANK_PRICES = ["--price", "NVIDIA-NeMo=1,3", "AIST-AIRC=1,3", "TranssionMT=1,3"]


@pytest.fixture(scope="module")
def rank_case(server, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rank")
    bank = calibrated(tmp, RANK_SYSTEMS)
    argv = ["rank", "--models", *[f"{s}=litellm:model=openai/{s}" for s in RANK_SYSTEMS], "--tasks", "wmt24_en-de",
            "--bank", str(bank), "--include_path", str(REPO / "task_configs"), "--apply_chat_template",
            "--item-field", "id", "--budget-usd", "0.2", "--backoff", "0.05", "--no-progress", *RANK_PRICES,
            # one call at a time: the order the calls complete in is the order they were sent, as the forecast's
            # driver answers them, so the reproduction test below is not at the mercy of a loaded machine
            # (at 4 calls in flight it failed here with 136 items against 108 for one model)
            "--concurrency", "1"]
    forecast, rc = dry_then_real(server, argv, tmp / "run")
    assert rc == 0
    return forecast, json.loads((tmp / "run" / "ranking.json").read_text()), tmp / "run", bank


def test_rank_forecast_bounds_the_real_run(rank_case):
    fc, real, _, _ = rank_case
    assert [m["model"] for m in fc["models"]] == RANK_SYSTEMS
    assert real["total_cost_usd"] <= fc["total"]["worst_case"]["cost_usd"] == 0.2
    for m in fc["models"]:
        r = next(e for e in real["ranking"] if e["model"] == m["model"])
        assert r["items"] <= m["worst_case"]["items"]
        assert m["cost_usd"]["typical"] <= m["worst_case"]["cost_usd"]
    print(f"rank: forecast ${fc['total']['cost_usd']['typical']:.4f}, real ${real['total_cost_usd']:.4f}, "
          f"real/forecast {real['total_cost_usd'] / fc['total']['cost_usd']['typical']:.3f}")


def test_rank_forecast_full_run_is_the_reports(rank_case):
    """The dry run's full-run cost is the real report's, model by model (before: $5.8794 forecast against
    $5.3201 reported: the report priced the bank's token counts, the forecast the built prompts)."""
    fc, real, _, _ = rank_case
    assert fc["total"]["full_run_cost_usd"] == pytest.approx(real["full_run_cost_usd"], rel=1e-12)
    for m in fc["models"]:
        r = next(e for e in real["ranking"] if e["model"] == m["model"])
        assert m["full_run_cost_usd"] == pytest.approx(r["full_run_cost_usd"], rel=1e-12)


def test_rank_forecast_within_25_percent(rank_case):
    fc, real, _, _ = rank_case
    assert off_by(real["total_cost_usd"], fc["total"]["cost_usd"]["typical"]) <= TARGET


def test_the_forecasts_driver_reproduces_the_real_run_from_its_recorded_scores(rank_case):
    """The forecast's simulated run (the live driver, calls answered in the order sent), told the scores and
    charges the live run recorded, asks what the live run asked."""
    from lm_eval_adaptive.data.named_tables import load_named

    _, real, out, _ = rank_case
    run = json.loads((out / "run.json").read_text())["settings"]
    a = resolved_settings(LiveSettings.from_mapping(run))
    setup = Setup(a, a.bank)
    bank = setup.bank
    recorded = {(s["model"], s["item_id"]): s for s in Journal.open(out, writable=False).scores()}
    table = load_named("wmt24/en-de/bleu")  # items the real run did not ask (a different path) score as recorded data
    raw, names = table.mean_matrix(), [str(m) for m in table.models]
    col = {str(v): k for k, v in enumerate(table.items)}
    ids = [str(x) for x in bank.item_ids]

    def score(m, i):  # (scaled, raw), as the live run told them
        s = recorded.get((m, ids[i]))
        if s:
            return s["scaled"], s["raw"]
        r = float(raw[names.index(m), col[ids[i]]])
        return float(bank.scale(i, r)), r

    cost = {m: np.array([recorded[(m, x)]["cost_usd"] if (m, x) in recorded else c
                         for x, c in zip(ids, setup.bank_costs[m])]) for m in RANK_SYSTEMS}
    upper = {m: np.array([setup.upper_cost(m, x) for x in ids]) for m in RANK_SYSTEMS}
    sim = simulated_live_run(rank_ranker(setup, a), score, cost, upper, a.budget_usd)
    items = {e["model"]: e["items"] for e in real["ranking"]}
    # the last pairs are given up by the stopping policy about when the budget runs out: which comes first
    # depends on the order the calls in flight completed (seen both ways on a loaded machine)
    assert sim["stopped_because"] == real["stopped_because"] \
        or {sim["stopped_because"], real["stopped_because"]} == {"budget", "cost_to_settle"}
    # calls in flight complete in another order than the simulation's, and which pairs are still
    # open (the stopping policy) depends on every model's state when a model is asked: a few items move
    # (CI on a loaded machine: 21 against 24 for one model, 190 against 201 in all). Since a cap buys the cheap
    # open pairs (live/stopping_policy.py) the path branches more: on a loaded machine 77 against 109 items for
    # one model, 389 against 386 in all. The forecast is of the run's total; per model, within a third
    for m in RANK_SYSTEMS:
        assert abs(sim["items"][m] - items[m]) <= max(3, 0.35 * items[m]), (sim["items"], items)
    assert sum(sim["items"].values()) == pytest.approx(sum(items.values()), rel=0.1)
    assert sum(sim["usd"].values()) == pytest.approx(real["total_cost_usd"], rel=0.1)


# ------------------------------------------------------------------------ 2. refresh
BOARD = ["AIST-AIRC", "Aya23", "CUNI-NL", "Claude-3.5", "CommandR-plus", "CycleL", "Dubformer", "Gemini-1.5-Pro",
         "IKUN", "IOL-Research", "Llama3-70B", "MSLC", "Mistral-Large", "NVIDIA-NeMo", "ONLINE-A"]


def test_refresh_forecast_within_25_percent(server, tmp_path):
    lb = tmp_path / "lb.json"
    assert main(["leaderboard", "--history", "wmt24/en-de/bleu", "--task", "wmt24_en-de", "--metric", "bleu",
                 "--item-field", "id", "--models", *BOARD, "--out", str(lb)]) == 0
    before = lb.read_bytes()
    argv = ["refresh", "--leaderboard", str(lb), "--include_path", str(REPO / "task_configs"), "--apply_chat_template",
            "--no-progress", "--backoff", "0.05", "--add", "GPT-4=litellm:model=openai/GPT-4",
            "TSU-HITs=litellm:model=openai/TSU-HITs", "--price", "TSU-HITs=0.5,1.5", "--budget-usd", "0.3",
            "--max-items", "120"]
    server.reset_stats()
    assert main(argv + ["--dry-run"]) == 0  # no output folder: printed only
    assert server.stats()["requests"] == 0 and lb.read_bytes() == before
    fc, rc = dry_then_real(server, argv, tmp_path / "run")
    assert rc == 0
    (refresh,) = json.loads(lb.read_text())["refreshes"]
    spent, typical = refresh["spent_usd"], fc["total"]["cost_usd"]["typical"]
    print(f"refresh: forecast ${typical:.4f}, real ${spent:.4f}, real/forecast {spent / typical:.3f}")
    assert [m["model"] for m in fc["models"]] == ["GPT-4", "TSU-HITs"]
    assert spent <= fc["total"]["worst_case"]["cost_usd"] <= 0.3
    assert all(refresh["items"][m["model"]] <= m["worst_case"]["items"] == 120 for m in fc["models"])
    entries = {e["model"]: e for e in json.loads(lb.read_text())["entries"]}
    for m in fc["models"]:  # the same full-run cost as the refresh reports
        assert m["full_run_cost_usd"] == pytest.approx(entries[m["model"]]["full_run_cost_usd"], rel=1e-12)
    assert off_by(spent, typical) <= TARGET


# -------------------------------------------------------------------- 3. run --adaptive
def test_run_adaptive_forecast_within_25_percent(server, tmp_path):
    system = "Mistral-Large"
    bank = calibrated(tmp_path, [system])
    argv = ["run", "--model", "litellm", "--model_args", f"model=openai/{system}", "--tasks", "wmt24_en-de",
            "--include_path", str(REPO / "task_configs"), "--apply_chat_template", "--adaptive", "--bank", str(bank),
            "--item-field", "id", "--se-target", "0.1", "--min-items", "30", "--max-items", "99"]
    fc, rc = dry_then_real(server, argv, tmp_path / "run", out_flag="--output_path")
    assert rc == 0
    (res,) = glob.glob(str(tmp_path / "run" / "*" / "results_*.json"))
    a = json.loads(Path(res).read_text())["adaptive"]["wmt24_en-de"]
    assert server.stats()["served"] == a["items"]
    (row,) = fc["models"]
    spent, typical = a["cost_usd"], row["cost_usd"]["typical"]
    print(f"run --adaptive: forecast {row['items']['typical']:.0f} items ${typical:.4f}, real {a['items']} items "
          f"${spent:.4f}, real/forecast {spent / typical:.3f}")
    assert a["items"] <= row["worst_case"]["items"] == 99 and spent <= row["worst_case"]["cost_usd"]
    assert off_by(spent, typical) <= TARGET


# ------------------------------------------------------------- 4. README's five-minute block
def test_the_readme_blocks_dry_run_is_consistent(server, tmp_path):
    """README's five-minute block (the shipped BLEU bank, the default stopping rules) with ``--dry-run``: the
    table issue 23 found contradicting itself ("34 [30, 30]" documents; a worst case of $7.04 beside a
    $0.91 full run) is consistent, and no call is made."""
    server.reset_stats()
    out = tmp_path / "runs"
    assert main(["run", "--model", "litellm", "--model_args", "model=openai/Mistral-Large", "--tasks", "wmt24_en-de",
                 "--include_path", str(REPO / "task_configs"), "--apply_chat_template", "--output_path", str(out),
                 "--adaptive", "--bank", "wmt24_en-de.bleu", "--dry-run"]) == 0
    assert server.stats()["requests"] == 0
    fc = json.loads((out / FORECAST_FILE).read_text())
    consistent(fc)
    (row,) = fc["models"]
    assert row["worst_case"]["items"] == 500 and row["worst_case"]["bound_usd"] > row["full_run_cost_usd"]
    items = row["items"]
    print(f"README block: forecast {items['typical']:.0f} [{items['p10']:.0f}, {items['p90']:.0f}] "
          f"items ${row['cost_usd']['typical']:.4f}; worst ${row['worst_case']['cost_usd']:.4f} (bound "
          f"${row['worst_case']['bound_usd']:.4f}); full run ${row['full_run_cost_usd']:.4f}")

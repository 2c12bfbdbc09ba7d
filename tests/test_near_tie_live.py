"""Issue 11, "Must show": a near tie ranked live, cheaply, and reported as a tie.

Four WMT24 systems, two of them a near tie on the full data, ranked through the real harness,
litellm and HTTP against the replay endpoint with the default settings and a cap above a full
run's cost (benchmarks/near_tie_case.json; the run and the checks are benchmarks/bench_near_tie.py,
so the benchmark and this test measure the same thing). Criteria, all on one run:

1. total spend within the cap and never above a full run (every bank item asked of each system,
   as billed): no item is bought twice (test_the_measurement_is_sound);
2. the near-tie pair reported as a tie;
3. every confident pair ordered as the full data orders it (and there is at least one).

How small a share of a full run the near tie costs is measured, not guaranteed: it depends on
whether a model's scatter flags it as misfitting (which sets the model error the futility stop
uses). `python benchmarks/bench_near_tie.py` prints it against the case's 10% target
(``max_spend_share``); a test pins what the engine guarantees.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]


def _load_bench():
    spec = importlib.util.spec_from_file_location("bench_near_tie", REPO / "benchmarks" / "bench_near_tie.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _load_bench()


@pytest.fixture(scope="module")
def case():
    return bench.load_case()


@pytest.fixture(scope="module")
def truth(case):
    return bench.full_data_truth(case)


@pytest.fixture(scope="module")
def measured(replay_server, case, truth, tmp_path_factory):
    result = bench.run_case(case, tmp_path_factory.mktemp("near_tie"), server=replay_server)
    return result, bench.judge(result, truth)


def test_the_case_is_a_near_tie_among_separated_systems(case, truth):
    (near,) = [g for g in truth["gaps"] if {g["higher"], g["lower"]} == set(case["near_tie"])]
    assert near["gap"] < 0.01 and near["intervals_overlap"]
    lo, hi = near["paired_ci95"]
    assert lo < 0 < hi  # the full data do not order the near tie either
    others = [g for g in truth["gaps"] if g is not near]
    assert all(g["paired_ci95"][0] > 0 for g in others)  # every other pair is ordered by the full data


def test_the_measurement_is_sound(measured):
    result, verdict = measured
    report = result["report"]
    # the run was billed exactly the usage the full-run cost counts, at the same prices, once per item
    assert result["n_usage_mismatches"] == 0, result["usage_mismatches"]
    assert result["charged_prices"] == result["prices"]
    assert result["max_served_per_item"] == 1
    assert result["served"] == report["total_items"] == sum(e["items"] for e in report["ranking"])
    assert not report["failed"] and report["ranked"]
    # the cap is above a full run, so it is not what stops the run
    assert report["budget_usd"] > result["full_run_cost_total_usd"] >= verdict["spent_usd"]


def test_the_near_tie_is_reported_as_a_tie(measured, case):
    result, verdict = measured
    assert verdict["near_tie_reported_as_tie"], (case["near_tie"], result["report"]["ties"])


def test_every_confident_pair_is_right(measured):
    _, verdict = measured
    conf = verdict["confident_pairs"]
    assert conf, "no pair was settled"
    assert verdict["confident_all_right"], [c for c in conf if not c["right"]]

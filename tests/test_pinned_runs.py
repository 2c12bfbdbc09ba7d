"""Seeded runs give the items and estimates computed before the hot path was made faster.

tests/fixtures/pinned_runs.json was first written by ``tests/pinned_runs.py`` on the code before the
speed work (issue 13 item 5): the same items, in the same order, and the same θ̂, SE, costs and
information at selection up to floating-point rounding. It was written again when θ̂ before any
score became the prior's centre exactly (issue 19): the first item of every scenario had been a
float tie between the two items nearest an even bank's median, decided by BLAS rounding.

Issue 21 made the full-task metric's scale the rankers' default judgement, which changes which model
gets each item and when a run stops: the default scenarios were written again (with each model's
estimate of record, every pair's outcome and the rank ranges). Issue 29 removed the θ-scale judgement
and the ``theta_*`` scenarios that pinned it; the others are unchanged. Every pair's ``items_to_settle`` was written again when the stated cost to settle
became the median of simulated continuations (everything else equal).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import assert_nested_close
from pinned_runs import pinned_runs

EXPECTED = json.loads((Path(__file__).parent / "fixtures" / "pinned_runs.json").read_text())
NOW = pinned_runs()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_pinned_run(name):
    exp, now = EXPECTED[name], NOW[name]
    # the items first: the same items in the same order for every model
    assert now["items"] == exp["items"]
    assert_nested_close(exp, now, name)


def test_the_fixture_covers_the_paths():
    """The pinned runs reach the adaptive phase, the model error, a misfit, a budget and the metric scale's
    stopping policy, and every outcome of a pair."""
    assert set(EXPECTED) == set(NOW)  # every scenario pinned, none left over
    assert any(EXPECTED["default_1k"]["misfit"].values())
    assert EXPECTED["topk_budget"]["stopped_because"] == "budget"
    assert EXPECTED["adaptive_test"]["stopped_because"] == "se_target"
    # the metric scale: never an impossibility, its stopping policy reached, ordered and unresolved pairs
    assert not any(EXPECTED[k]["inseparable"] for k in EXPECTED if "pairs" in EXPECTED[k])
    assert EXPECTED["bernoulli"]["stopped_because"] == "cost_to_settle"
    outcomes = {p["outcome"] for k in EXPECTED if "pairs" in EXPECTED[k] for p in EXPECTED[k]["pairs"]}
    assert {"ordered", "unresolved"} <= outcomes
    assert any(p["beyond_policy"] for p in EXPECTED["bernoulli"]["pairs"])

"""Seeded runs give the items and estimates computed before the hot path was made faster.

tests/fixtures/pinned_runs.json was first written by ``tests/pinned_runs.py`` on the code before the
speed work (issue 13 item 5): the same items, in the same order, and the same θ̂, SE, costs and
information at selection up to floating-point rounding. It was written again when θ̂ before any
score became the prior's centre exactly (issue 19): the first item of every scenario had been a
float tie between the two items nearest an even bank's median, decided by BLAS rounding.
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
    """The pinned runs reach the adaptive phase, the model error, a misfit, a budget and futility."""
    assert EXPECTED["default_1k"]["stopped_because"] == "settled"
    assert EXPECTED["default_1k"]["inseparable"]
    assert any(EXPECTED["default_1k"]["misfit"].values())
    assert EXPECTED["topk_budget"]["stopped_because"] == "budget"
    assert EXPECTED["adaptive_test"]["stopped_because"] == "se_target"

"""A live run's settings are resolved once, at the edge, into one frozen object the layers below read (issue 29
item 3): the command line parses and prices the models, parses the task metadata and takes a resume's settings
and cap change from its journal; the session, the forecast, the driver's caller and the report only read them."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import pytest

from lm_eval_adaptive.cli.main import build_parser
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.live.session import (
    RUN_FILE,
    RUN_KEYS,
    LiveSettings,
    Setup,
    open_run,
    resolved_settings,
    resumed_settings,
    start_run,
)

REPO = Path(__file__).resolve().parents[1]
RANK = ["rank", "--models", "litellm:model=openai/a", "litellm:model=openai/b", "--tasks", "t", "--bank", "b.json",
        "--budget-usd", "1", "--price", "default=1,3", "--metadata", '{"k": 1}']


def test_the_settings_are_frozen_and_resolved_once_into_a_new_object():
    a = LiveSettings.from_mapping(vars(build_parser().parse_args(RANK)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.budget_usd = 2.0
    r = resolved_settings(a)
    assert r is not a and not a.priced and r.priced  # the object given is left as it was
    assert [s.name for s in r.specs] == ["openai/a", "openai/b"]
    assert {m: (p.input_per_mtok, p.output_per_mtok) for m, p in r.prices.items()} == {
        "openai/a": (1.0, 3.0), "openai/b": (1.0, 3.0)}
    assert r.task_metadata == {"k": 1}
    with pytest.raises(InputError, match="appear twice"):  # one name, two models: refused before pricing
        resolved_settings(dataclasses.replace(a, models=["litellm:model=openai/a", "litellm:model=openai/a"]))


def test_a_session_is_never_given_settings_to_resolve_itself():
    a = LiveSettings.from_mapping(vars(build_parser().parse_args(RANK)))
    with pytest.raises(TypeError, match="not resolved"):
        Setup(a, "b.json")


def _old_run(out: Path, budget: float = 1.0):
    """A run folder as ``rank`` wrote it before (3b16139): run.json's settings are RUN_KEYS, the header's too."""
    settings = {k: None for k in RUN_KEYS}
    settings.update({"models": ["litellm:model=openai/a", "litellm:model=openai/b"], "tasks": "t",
                     "bank": "b.json", "confidence": 0.95, "budget_usd": budget, "min_items": 10, "concurrency": 1,
                     "price": ["default=1,3"], "seed": 0, "apply_chat_template": False,
                     "fewshot_as_multiturn": False, "family_wise": False})
    start_run(out, "rank", settings, {"command": "rank", "bank_id": "sha256:x", "models": ["openai/a", "openai/b"],
                                      "task": "t", "budget_usd": budget}, "sha256:x").close()
    return settings


def test_a_resume_takes_its_journal_into_a_new_object_and_an_old_run_folder_still_resumes(tmp_path):
    out = tmp_path / "run"
    settings = _old_run(out)
    assert json.loads((out / RUN_FILE).read_text())["settings"] == settings
    given = LiveSettings(resume=str(out), given={"budget_usd": 2.0, "seed": 0})
    r = resumed_settings(given)
    assert given.models is None and given.cap_change is None  # nothing written into the settings given
    assert r.models == settings["models"] and r.tasks == "t" and r.bank == "b.json"
    assert r.budget_usd == 2.0 and r.cap_change == (1.0, 2.0)
    d, journal, resumed = open_run(resolved_settings(r))
    try:
        assert resumed and d == out
    finally:
        journal.close()
    with pytest.raises(InputError, match="seed: journal 0 vs given 3"):
        resumed_settings(LiveSettings(resume=str(out), given={"seed": 3}))
    with pytest.raises(InputError, match="does not go with --resume"):
        resumed_settings(LiveSettings(resume=str(out), dry_run=True))


def _settings_path():
    spec = importlib.util.spec_from_file_location("settings_path", REPO / "benchmarks" / "settings_path.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_below_the_command_line_the_settings_of_a_dry_run_are_read_never_changed_or_resolved_again():
    """benchmarks/settings_path.py's dry-run case: the settings are read in at most three modules (cli/rank.py,
    live/session.py, live/cost_forecast.py; before: the same three, but priced three times, the models parsed
    again in the session and the forecast checking them again), never mutated, and nothing below cli/
    resolves a setting again: the one pricing there is of the judges the task declares, known once it is loaded."""
    from lm_eval_adaptive.data.data_root import data_root

    try:
        data_root()
    except InputError as e:
        pytest.skip(f"real data not available: {e}")
    s = _settings_path().run_cases(["dry-run"])["dry-run"]
    assert s["modules"] <= 3, s["readers"]
    assert s["mutated_in"] == []
    assert [r for r in s["resolutions_below_cli"] if r != "resolve_prices in live.session.Setup.__init__"] == []
    assert s["resolution_calls"]["live_prices"] == 1 and s["resolution_calls"]["parse_banks"] == 1

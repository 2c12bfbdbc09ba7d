"""Plain words first (issue 30 item 6): the answer in one paragraph before any table (who is ahead, how sure,
what it cost, what is left open and what settling it costs, pairs named), θ̂ and the model-error note behind
--verbose, and the model-error sentence that read as if flagged models got less."""

from __future__ import annotations

import pytest

from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.engine.evaluation.model_error import describe_correction
from lm_eval_adaptive.live.pair_prose import answer_paragraph, rank_theta_note

PAIRS = [{"a": "A", "b": "B", "outcome": "ordered"}, {"a": "A", "b": "C", "outcome": "unresolved",
                                                      "items_to_settle": 40, "cost_to_settle_usd": 0.12},
         {"a": "B", "b": "C", "outcome": "equivalent"}]


def test_the_answer_names_the_leader_its_pairs_the_cost_and_what_is_left_open():
    text = answer_paragraph(["A", "B", "C"], PAIRS, confidence=0.95, spent=0.25, items=120, full_run=5.0, cap=0.3)
    assert text.startswith("A is ranked first; settled ahead of B at 95% confidence; not yet settled against C.")
    assert "Of the 3 pairs, 1 ordered at 95% confidence, 1 settled as level, 1 not settled yet." in text
    assert "It cost $0.2500 for 120 items, 5.0% of a full run's $5.0000 (cap $0.3)." in text
    assert "Left open: A vs C (about 40 more items, $0.1200)." in text
    every = answer_paragraph(["A", "B"], PAIRS[:1], confidence=0.9, spent=0.0, items=10)
    assert every.startswith("A is ahead of B at 90% confidence.") and "Nothing is left open." in every
    three = answer_paragraph(["A", "B", "C"], [{**p, "outcome": "ordered"} for p in PAIRS], confidence=0.95, spent=0.0,
                             items=30)
    assert three.startswith("A is ahead of all 2 others, each at 95% confidence.")


def test_the_rank_theta_note_only_where_they_disagree():
    assert rank_theta_note(["A", "B"], {"A": 1.0, "B": 0.5}, "bleu") is None
    note = rank_theta_note(["A", "B"], {"A": 0.5, "B": 1.0}, "bleu")
    assert note.startswith("why the rank and θ̂ disagree: the rank follows the estimated full-task bleu")


def test_the_model_error_sentence_says_what_is_measured_where():
    text = describe_correction({"ability_sd": 0.167, "ability_sd_misfit": 0.147, "full_task_sd": 0.0,
                                "full_task_sd_misfit": 0.0})
    assert "τ = 0.167" in text and "τ = 0.147 for a model the person-fit statistic flags: measured on the flagged " \
                                   "runs alone" in text
    assert "× 0" not in text and "not widened" in text
    assert "1.96 × σ, σ = 0.012" in describe_correction({"ability_sd": 0.1, "full_task_sd": 0.012})


@pytest.mark.parametrize("verbose", [False, True])
def test_demo_prints_the_answer_first_and_theta_only_when_verbose(capsys, verbose):
    from lm_eval_adaptive.data.data_root import data_root
    from lm_eval_adaptive.errors import InputError

    try:
        data_root()
    except InputError as e:
        pytest.skip(f"real data not available: {e}")
    assert main(["demo", "--models", "GPT-4", "Phi-3-Medium", "Aya23", "--budget-usd", "0.2",
                 *(["--verbose"] if verbose else [])]) == 0
    out = capsys.readouterr().out
    answer = out.index(" is ranked first") if " is ranked first" in out else out.index(" is ahead of ")
    # the paragraph is wrapped to the output's width: read it with its line breaks as spaces
    assert answer < out.index("Adaptive ranking") and "It cost $" in " ".join(out[answer:out.index("Adaptive ranking")].split())
    assert ("θ̂ ± SE" in out) == verbose and ("bank self-check" in out) == verbose


@pytest.mark.parametrize("verbose", [False, True])
def test_leaderboard_table_shows_theta_only_when_verbose(verbose):
    """The board's table leads with the metric; θ̂ ± SE and the rank/θ̂ note are the --verbose detail."""
    import io

    from rich.console import Console

    from lm_eval_adaptive.cli.live_output import print_leaderboard

    lb = {"task": "t", "metric": "bleu", "entries": [
        {"model": "A", "rank": 1, "source": "full_run", "metric": {"value": 0.40}, "theta": 0.2, "se": 0.1},
        {"model": "B", "rank": 2, "source": "full_run", "metric": {"value": 0.30}, "theta": 0.9, "se": 0.1}]}
    buf = io.StringIO()
    print_leaderboard(Console(file=buf, width=200), lb, {}, {}, verbose=verbose)
    out = buf.getvalue()
    assert "0.4000" in out and "0.3000" in out
    assert ("θ ± SE" in out) == verbose and ("+0.900" in out) == verbose
    assert ("why the rank and θ̂ disagree" in out) == verbose

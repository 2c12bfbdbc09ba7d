"""Leaderboards on the metric scale (issue 21): full runs exact and ordered, pairs of entries made apart,
rank ranges, and the prose every report prints about pairs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import norm

from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.data.tables import load_any_table
from lm_eval_adaptive.engine.ranking.pairs.outcomes import judge_apart
from lm_eval_adaptive.live.pair_prose import pair_counts, pair_lines, rank_range_text


def test_judge_apart_closed_forms():
    o = judge_apart(["a", "b", "c", "d", "e"], [0.70, 0.70, 0.68, 0.65, 0.671], [0.0, 0.0, 0.0, 0.01, 0.01])
    rec = {frozenset((r["a"], r["b"])): r for r in o.to_records()}
    assert rec[frozenset("ab")]["outcome"] == "equivalent"  # two full runs, equal means: equivalent at any δ
    assert rec[frozenset("ac")]["outcome"] == "ordered" and rec[frozenset("ac")]["p_order"] == 1.0
    # 0.68 − 0.65 = 0.03 > 1.96 × 0.01: ordered; 0.68 − 0.671 = 0.009 < 1.96 × 0.01: not settled yet
    assert rec[frozenset("cd")]["outcome"] == "ordered"
    r = rec[frozenset("ce")]
    assert r["outcome"] == "unresolved" and r["a"] == "c"
    assert r["p_order"] == pytest.approx(norm.cdf(0.009 / 0.01))
    assert r["items_to_settle"] == -1 and np.isnan(r["cost_to_settle_usd"])  # no run holds both
    # d and e: SE √2 × 0.01 of the difference 0.021: z = 1.48
    r = rec[frozenset("de")]
    assert r["outcome"] == "unresolved" and r["a"] == "e" and r["se"] == pytest.approx(0.01 * np.sqrt(2))
    # equivalence: |D| + z_γ SE ≤ δ
    o = judge_apart(["x", "y"], [0.5, 0.501], [0.001, 0.001], tie_margin=0.005)
    assert o.outcome.tolist() == ["equivalent"]
    o = judge_apart(["x", "y"], [0.5, 0.501], [0.001, 0.001], tie_margin=0.003)
    assert o.outcome.tolist() == ["unresolved"]
    best, worst = judge_apart(["a", "b", "c"], [0.7, 0.6, 0.5], [0.0, 0.2, 0.0]).rank_ranges()
    assert best.tolist() == [1, 1, 2] and worst.tolist() == [2, 3, 3]
    with pytest.raises(ValueError):
        judge_apart(["a", "b"], [0.1, np.nan], [0.0, 0.1])


def test_judge_apart_orders_equal_models_at_most_at_its_stated_rate():
    """Two models with the same true metric, each estimated apart with known SE: the pair is
    (wrongly) ordered in about 1 − γ of the repetitions, never much more."""
    rng = np.random.default_rng(0)
    n, wrong = 4000, 0
    for _ in range(n):
        se = rng.uniform(0.005, 0.03, 2)
        x = 0.6 + rng.normal(0.0, se)
        wrong += judge_apart(["a", "b"], x, se).outcome[0] == "ordered"
    assert wrong / n < 0.05 + 3 * np.sqrt(0.05 * 0.95 / n)
    assert wrong / n > 0.05 - 3 * np.sqrt(0.05 * 0.95 / n)  # and not far below: the test is exact here


def test_a_leaderboard_of_full_runs_orders_every_pair_with_different_means(tmp_path, capsys):
    """Issue 21: `leaderboard --history wmt24/en-es/chrf` used to give full runs SEs of 0.22-0.26 and put
    17 of 19 in one tie group; a full run is exact, so every two with different means are ordered."""
    out = tmp_path / "lb.json"
    assert main(["leaderboard", "--history", "wmt24/en-es/chrf", "--task", "wmt24_en-es", "--metric", "chrf",
                 "--out", str(out)]) == 0
    lb = json.loads(out.read_text())
    entries = lb["entries"]
    k = len(entries)
    assert k >= 19 and all(e["source"] == "full_run" for e in entries)
    values = [e["metric"]["value"] for e in entries]
    assert values == sorted(values, reverse=True) and len(set(values)) == k
    assert all(e["rank_range"] == [e["rank"], e["rank"]] and e["tie_group"] is None for e in entries)
    assert len(lb["pairs"]) == k * (k - 1) // 2 and pair_counts(lb["pairs"])["ordered"] == k * (k - 1) // 2
    # issue 30 item 8: the value of record is the full run's mean over every document of the task (the harness's
    # full run), not over the bank's items (calibration drops some): one full-run value per model everywhere
    table = load_any_table("wmt24/en-es/chrf", metric="chrf")
    raw = table.mean_matrix()
    names = [str(m) for m in table.models]
    for e in entries:
        row = raw[names.index(e["model"])]
        assert e["metric"]["value"] == pytest.approx(float(np.nanmean(row)), abs=1e-12)
        assert e["items"] == e["documents"] == int(np.count_nonzero(~np.isnan(row)))  # 997 of 997, not 970
    text = capsys.readouterr().out
    assert f"pairs: {k * (k - 1) // 2} ordered at γ, 0 equivalent, 0 not settled yet" in text


def test_pair_prose_never_says_a_pair_cannot_be_settled():
    assert rank_range_text([3, 5]) == "3–5" and rank_range_text([2, 2]) == "2" and rank_range_text(None) == ""
    pairs = [{"a": "A", "b": "B", "outcome": "ordered", "p_order": 0.99},
             {"a": "B", "b": "C", "outcome": "equivalent", "p_order": 0.6},
             {"a": "C", "b": "D", "outcome": "unresolved", "p_order": 0.8, "items_to_settle": 120,
              "cost_to_settle_usd": 0.42, "beyond_policy": True, "items_to_settle_range": [30, 610]},
             {"a": "E", "b": "D", "outcome": "unresolved", "p_order": 0.7, "items_to_settle": None,
              "cost_to_settle_usd": None}]
    lines = pair_lines(pairs, ["A", "B", "C", "D", "E"], 0.01)
    text = "\n".join(lines)
    assert lines[0] == "pairs: 1 ordered at γ, 1 equivalent, 2 not settled yet (of 4)"
    assert "B ≈ C" in text and "±0.01" in text
    assert ("C vs D (about 120 more items, $0.4200; 80% range 30–610 items; the stopping policy bought no more for it)"
            in text)
    assert "D vs E (estimated in different runs: a run of both settles it)" in text
    for word in ("cannot", "impossible", "would not", "inseparable", "never"):
        assert word not in text
    # every unresolved pair beyond the policy: said once, not per pair
    both = [dict(pairs[2]), dict(pairs[2], a="E", b="D", items_to_settle=50, items_to_settle_range=[10, 200])]
    (line,) = [x for x in pair_lines(both, ["A", "B", "C", "D", "E"]) if x.startswith("not settled yet")]
    assert line.startswith("not settled yet (the stopping policy bought no more for them): ")
    assert line.count("stopping policy") == 1 and "D vs E (about 50 more items, $0.4200; 80% range 10–200 items)" in line


def test_a_pair_the_policy_gave_up_names_the_settle_share_that_buys_it():
    """Issue 32: a stop on cost names each open pair, its cost, and the flag that buys it."""
    from lm_eval_adaptive.live.pair_prose import pair_lines

    p = {"a": "C", "b": "D", "outcome": "unresolved", "p_order": 0.8, "items_to_settle": 120,
         "cost_to_settle_usd": 0.42, "beyond_policy": True, "settle_share_to_buy": 0.35}
    text = "\n".join(pair_lines([p], ["C", "D"]))
    assert "C vs D (about 120 more items, $0.4200" in text and "a settle share of 0.35 (--settle-share of rank or refresh) buys it" in text
    p.pop("beyond_policy")  # a pair the run still buys for: no such note
    assert "settle share" not in "\n".join(pair_lines([p], ["C", "D"]))


def test_refresh_takes_the_settle_share_the_stop_line_names_and_journals_it():
    """The stop line names ``--settle-share`` for a pair the policy gave up; refresh takes it as rank does."""
    from lm_eval_adaptive.cli.main import build_parser
    from lm_eval_adaptive.live.leaderboard import REFRESH_KEYS
    from lm_eval_adaptive.live.session import LiveSettings
    from lm_eval_adaptive.live.stopping_policy import live_policy

    args = build_parser().parse_args(["refresh", "--leaderboard", "b.json", "--add", "litellm:model=x",
                                      "--settle-share", "0.3"])
    a = LiveSettings.from_mapping(vars(args))
    assert a.settle_share == 0.3 and "settle_share" in REFRESH_KEYS  # resumed with the run's own share
    assert live_policy(a.settle_share, None).full_run_share == 0.3

"""What settling a pair of the bank-free ranker costs, and when its stopping policy gives a pair up (issue 31;
docs/cold-start.md, *Stopping on the cost to settle*).

A pair of the bank-free ranker always settles by a full run of its two models (its confidence sequence is exact
there), but a near tie can cost most of one. The banked ranker stops buying such a pair once settling it would
take the run past its :class:`~lm_eval_adaptive.engine.ranking.pairs.settle_policy.SettlePolicy` (by default 10%
of a full run, at least 15 items per model on a small table); :class:`PolicyJudge` applies the same policy, the
same shares and the same pair rules (a live run with a dollar cap buys a pair whose own cost to settle is at most
10% of a full run of its two models), to the bank-free ranker, judged by its own projection:

* **what settling costs**: the common documents the pair's confidence sequence needs, in continuations that
  resample the pair's differences so far (as the cost to settle the report states, :func:`stated_cost`), every
  difference moved ``policy.optimism`` standard errors away from 0 (as the banked policy judges: a pair whose
  early gap only looks small is not given up), the median over the paths; its dollars are those of the two
  models' unanswered documents in the pair's shared order (:func:`prefix_cost`);
* **bought** while that cost fits the policy's limit (``SettlePolicy.limit``: its share of a full run of every
  model, less what the run has spent; the budget left) or its pair rules' (``SettlePolicy.pair_limit``);
* a pair is judged from its :data:`MIN_COMMON`-th common document on: a bootstrap of fewer differences says
  little (after a few equal answers every difference is 0 and no continuation settles);
* **projected at points** :data:`JUDGE_RATIO` apart in its common documents (10, 12, 15, 18, 21, 25, ...): at n common
  documents the projection is the one made at the last such point g ≤ n (from the pair's sequence and
  differences at g), less the n − g documents taken since; a projection costs up to a few hundred updates of a
  batch of sequences, and one per document would slow a run (a simulated forecast most of all) for little.

It is judged at every ask from the run's state alone (the projection at g from the first g differences, seeded
by the run's seed, the pair and g; the limit from what the run has spent), so a resumed run decides as the
uninterrupted one did. A pair given up is reported ``unresolved`` with its cost to settle, marked
``beyond_policy``, with the share of a full run that would buy it (:func:`share_to_buy`): a cost, never an
impossibility. Without a policy (None) nothing is given up: a pair is
bought until it settles, the budget or the item cap ends the run, or the documents run out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from lm_eval_adaptive.engine.anytime.confidence_sequence import WorBettingCS
from lm_eval_adaptive.engine.anytime.pair_decisions import settle_projection
from lm_eval_adaptive.engine.ranking.pairs.settle_policy import SettlePolicy

__all__ = ["MIN_COMMON", "BANK_FREE_FLOOR_ITEMS", "JUDGE_RATIO", "POLICY_PATHS", "judged_at", "prefix_cost",
           "stated_cost", "PolicyJudge", "share_to_buy"]

#: A pair is judged by the policy from this many common documents on (module docstring).
MIN_COMMON = 10
#: The bank-free ranker's floor of documents per model in its live stopping policy (``SettlePolicy.floor_items``:
#: the share of a full run is at least this many documents per model); chosen on the tuning half by
#: docs/results/stop34_rules.txt, rule 3 (the banked ranker's is 15).
BANK_FREE_FLOOR_ITEMS = 50
#: The points at which a pair's cost to settle is projected grow by this ratio (module docstring).
JUDGE_RATIO = 1.2
#: Continuations behind the policy's judgement of one pair (odd: their median is one of them; the stated cost
#: uses the report's number).
POLICY_PATHS = 33


def prefix_cost(upto: np.ndarray, scores: Mapping[str, np.ndarray], costs: Mapping[str, np.ndarray],
                models: Sequence[str]) -> tuple[int, float]:
    """(items, dollars) for each of ``models`` to answer the documents ``upto`` it has not answered yet."""
    items, usd = 0, 0.0
    for m in models:
        need = upto[np.isnan(scores[m][upto])]
        items += int(need.size)
        usd += float(np.sum(costs[m][need]))
    return items, usd


def stated_cost(cs: WorBettingCS, d: np.ndarray, margin: float, rng: np.random.Generator, paths: int,
                common: np.ndarray, pos: int, scores: Mapping[str, np.ndarray], costs: Mapping[str, np.ndarray],
                pair: Sequence[str]) -> dict:
    """The cost to settle a pair states: its items and dollars at the median of ``paths`` continuations
    (:func:`settle_projection` of the sequence ``cs`` on the differences ``d``, in its own orientation) with the
    10%-90% range, and the common documents at the median. ``common``: the pair's documents in the shared order,
    ``pos`` of them taken."""
    steps = settle_projection(cs, d, margin, rng, paths)
    q = np.quantile(steps, [0.1, 0.5, 0.9])
    got = [prefix_cost(common[: pos + int(np.ceil(s))], scores, costs, pair) for s in q]
    return {"items_to_settle": got[1][0], "items_to_settle_range": [got[0][0], got[2][0]],
            "cost_to_settle_usd": got[1][1], "cost_to_settle_usd_range": [got[0][1], got[2][1]],
            "documents_to_settle": int(np.ceil(q[1]))}


class PolicyJudge:
    """Judges the pairs of one bank-free run under ``policy`` (:meth:`beyond`; None: nothing is given up), keeping
    each pair's projection at its last projection point: the median continuation's documents to settle are exact
    once known, so a later judgement from the same point (more documents taken, the limit moved) needs no new
    projection unless it must look further than the projection did."""

    def __init__(self, policy: SettlePolicy | None):
        self.policy = policy
        self._known: dict = {}  # (pair, projection point) -> (documents projected to, median documents or None)

    def beyond(self, pair: Sequence[str], *, cs: WorBettingCS, d: np.ndarray, margin: float,
               rng: Callable[[int], np.random.Generator], common: np.ndarray, pos: int,
               scores: Mapping[str, np.ndarray], costs: Mapping[str, np.ndarray], spent: float,
               full: Mapping[str, float], full_run_items: float, remaining: float | None) -> bool:
        """Does the policy give the pair (its two models; ``cs``, ``d``: its sequence and differences, in the
        sequence's orientation; ``common``, ``pos``: its documents in the shared order and how many are taken) no
        more documents? ``rng(g)``: its projection's seeded generator at the projection point g; ``spent``: the
        run's dollars; ``full``: each model's full run in dollars (a full run: all of them); ``full_run_items``: the
        documents of a full run per model; ``remaining``: the budget left (None: no budget). See the module
        docstring."""
        policy = self.policy
        if policy is None or d.size < MIN_COMMON:
            return False
        pair_spent = float(sum(np.sum(costs[m][~np.isnan(scores[m])]) for m in pair))
        limit = max(policy.limit(spent, float(sum(full.values())), remaining, full_run_items),
                    policy.pair_limit(float(sum(full[m] for m in pair)), pair_spent, remaining))
        rest = common[pos:]
        need = sum(np.where(np.isnan(scores[m][rest]), costs[m][rest], 0.0) for m in pair)
        most = int(np.searchsorted(np.cumsum(need), limit * (1 + 1e-12) + 1e-15, side="right"))
        if most >= rest.size:  # it can buy every common document: the pair settles there, exact
            return False
        if most <= 0:
            return True
        g = judged_at(d.size)
        since = int(d.size) - g  # documents taken since the pair was last projected
        key, cap = (tuple(pair), g), most + since
        seen = self._known.get(key)
        if seen is None or (seen[1] is None and cap > seen[0]):
            at = cs if since == 0 else _rebuilt(cs, d[:g])
            seen = (cap, _median_documents(at, d[:g], margin, rng(g), policy.optimism, rest.size + since, cap))
            self._known[key] = seen
        return seen[1] is None or seen[1] - since > most


def judged_at(n: int) -> int:
    """The last point at or before ``n`` common documents at which a pair is projected (module docstring): the
    points are ⌈MIN_COMMON · JUDGE_RATIOᵏ⌉, each at least one past the one before."""
    g, k = MIN_COMMON, 0
    while True:
        k += 1
        nxt = max(math.ceil(MIN_COMMON * JUDGE_RATIO ** k - 1e-9), g + 1)
        if nxt > n:
            return g
        g = nxt


def _rebuilt(cs: WorBettingCS, d: np.ndarray) -> WorBettingCS:
    """The pair's sequence ``cs`` as it stood after the differences ``d`` (it is a function of them, in order)."""
    out = cs.restarted()
    out.update_many(d)
    return out


def _median_documents(cs: WorBettingCS, d: np.ndarray, margin: float, rng: np.random.Generator, optimism: float,
                      left: int, most: int) -> int | None:
    """The documents to settle of the median of :data:`POLICY_PATHS` continuations of the pair (differences moved
    ``optimism`` SEs away from 0), None when it does not settle within ``most``."""
    sd = float(np.std(d, ddof=1)) if d.size > 1 else 0.0
    se = sd / math.sqrt(d.size) * math.sqrt(max(0.0, 1.0 - d.size / (d.size + left)))
    span = float(cs.hi)
    moved = np.clip(d + (1.0 if np.mean(d) >= 0 else -1.0) * optimism * se, -span, span)
    half = POLICY_PATHS // 2 + 1
    steps = np.sort(settle_projection(cs, moved, margin, rng, POLICY_PATHS, most=most, enough=half))
    return int(steps[half - 1]) if steps[half - 1] <= most else None


def share_to_buy(spent: float, cost_to_settle, full_run: float) -> float | None:
    """The run's spend with the pair's stated cost to settle added, as a share of a full run (at most 1, rounded
    up to 0.001): the ``--settle-share`` that would have bought the pair; None when either is unknown."""
    if cost_to_settle is None or not math.isfinite(cost_to_settle) or full_run <= 0:
        return None
    return min(1.0, math.ceil((spent + float(cost_to_settle)) / full_run * 1000 - 1e-9) / 1000)

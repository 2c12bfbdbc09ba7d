"""The bank-free ranker: rank models on any task from zero history, honest at every look.

It has the ask/tell/result protocol of :class:`~lm_eval_adaptive.engine.ranking.ranker.AdaptiveRanker`
(:meth:`BankFreeRanker.ask` → a :class:`~lm_eval_adaptive.engine.ranking.ranker_state.Request`, :meth:`tell`,
:meth:`result` → a :class:`~lm_eval_adaptive.engine.ranking.result.RankingResult`), so
:func:`~lm_eval_adaptive.engine.evaluation.simulation.drive`, a harness or live driver can run it unchanged; it is
told each score in the metric's own units, inside the stated range [lo, hi].

Design (docs/cold-start.md):

1. **One shared random order.** The documents are put in one uniformly random permutation (seeded); every
   model answers them in that order (skipping those it cannot be scored on). Each model's answers are a
   sample without replacement from its documents, and any two models' common prefix is one from the
   documents both have: their paired differences estimate the difference of their full-task means.
2. **Intervals that hold whenever the run stops.** Each model's full-task mean has an anytime-valid
   confidence sequence (:class:`~lm_eval_adaptive.engine.anytime.confidence_sequence.WorBettingCS`) and so
   does each pair's difference; a pair is ``ordered``, ``equivalent`` or ``unresolved``
   (:mod:`~lm_eval_adaptive.engine.anytime.pair_decisions`). Each pair at level γ by default, as the banked
   ranker; ``family_wise``: every pair at (1 − γ)/P (Bonferroni), the whole ranking at γ.
3. **Who answers next.** Among the models in unresolved pairs that can be asked (under ``n_max``, a
   document left, its cost within the budget), the one with the largest worth per unit of its relative
   cost, worth = Σ over its unresolved pairs of 1 when it is behind its partner in the shared order, ½
   when level (either could go first: the cheaper one does) and 0 when ahead (its answer waits for the
   partner's and settles nothing yet), each pair's term times its weight under ``allocation``
   (:mod:`~lm_eval_adaptive.engine.anytime.pair_worth`: 1 for every open pair by default; ``steer``:
   its chance of being in the wrong order now, a signal that steers and decides nothing). The engine's allocation rule
   (:mod:`~lm_eval_adaptive.engine.ranking.allocation`) weighs the same way: what an item does for the model's
   open pairs, per dollar.
4. **Stop** when every pair is settled (``settled``), the next item would overrun the budget
   (``budget``), a model in every open pair reached ``n_max`` (``max_items``), no document is left
   (``exhausted``: then every interval is exact) or, with a ``settle_policy``, the policy gives every open
   pair up on its cost to settle (``cost_to_settle``; :mod:`~lm_eval_adaptive.engine.anytime.cost_to_settle`:
   the banked ranker's policy, judged by this ranker's projection).

The ranking lists the models by a least-squares fit of the pairs' mean differences on their common
documents (weights: the common documents), keeping every ``ordered`` pair in its order; each model's
rank range counts the pairs settled above and below it, as the banked ranker reports.
"""

from __future__ import annotations

import math
from types import MappingProxyType
from typing import Callable, Mapping, Sequence

import numpy as np

from lm_eval_adaptive.engine.anytime.confidence_sequence import DEFAULT_GRID, PAIR_TRUNCATION, TRUNCATION, WorBettingCS
from lm_eval_adaptive.engine.anytime.cost_to_settle import PolicyJudge, share_to_buy, stated_cost
from lm_eval_adaptive.engine.anytime.pair_worth import ALLOCATIONS, DEFAULT_ALLOCATION, p_order, pair_weight
from lm_eval_adaptive.engine.ranking.pairs.outcomes import equivalence_groups
from lm_eval_adaptive.engine.ranking.pairs.settle_policy import SettlePolicy
from lm_eval_adaptive.engine.anytime.pair_decisions import (
    EQUIVALENT,
    ORDERED,
    SETTLE_PATHS,
    UNRESOLVED,
    decide,
    pair_alpha,
)
from lm_eval_adaptive.engine.irt.checks import check_cost
from lm_eval_adaptive.engine.ranking.result import RankingResult
from lm_eval_adaptive.engine.ranking.ranker_state import Request
from lm_eval_adaptive.engine.signature import versions

__all__ = ["BankFreeRanker", "BANK_FREE_STOP_REASONS", "ALLOCATIONS", "ranking_from_pairs"]

#: Why a bank-free run ended.
BANK_FREE_STOP_REASONS = ("settled", "cost_to_settle", "budget", "max_items", "exhausted", "failed")


class BankFreeRanker:
    """Rank ``models`` on the documents ``item_ids`` with no calibration history (module docstring).

    Parameters
    ----------
    score_range:
        (lo, hi), the metric's known range: every score told must lie in it (the intervals' guarantee
        rests on it; a score outside is refused).
    item_costs:
        Per model, the USD of each document (an array like ``item_ids``); None: 1.0 each.
    confidence:
        γ, each pair's (and each model's interval's) level; with ``family_wise`` the whole ranking's.
    tie_margin:
        δ in metric units: a pair whose difference is confidently inside ±δ is ``equivalent``.
    budget, n_max:
        Dollars for the whole run and items per model (None: no limit).
    exclude:
        Per model, document indices it has no score for (outside its population).
    seed:
        Seeds the shared permutation (anything ``numpy.random.default_rng`` takes).
    order_key:
        ``(model, item log) → number`` ordering the pairs left open (it decides nothing), e.g. a bank's
        prediction (:class:`~lm_eval_adaptive.engine.cat.bank_prediction.BankPrediction`); None: the fit.
    settle_policy:
        Gives up a pair whose cost to settle it does not allow (None: no pair is given up; a live run's
        policy: live/stopping_policy.py).
    """

    def __init__(self, models: Sequence[str], item_ids: Sequence, *, score_range: tuple[float, float],
                 item_costs: Mapping[str, np.ndarray] | None = None, confidence: float = 0.95,
                 tie_margin: float = 0.0, family_wise: bool = False, budget: float | None = None,
                 n_max: int | None = None, exclude: Mapping[str, Sequence[int]] | None = None, seed=0,
                 max_in_flight: int = 1, grid: int = DEFAULT_GRID, settle_paths: int = SETTLE_PATHS,
                 allocation: str = DEFAULT_ALLOCATION,
                 order_key: Callable[[str, list], float] | None = None, settle_policy: SettlePolicy | None = None):
        models = [str(m) for m in models]
        self._order_key, self._judge = order_key, PolicyJudge(settle_policy)
        if allocation not in ALLOCATIONS:
            raise ValueError(f"allocation must be one of {ALLOCATIONS}, got {allocation!r}")
        self._allocation = allocation
        if len(models) < 2 or len(set(models)) != len(models):
            raise ValueError(f"ranking needs at least 2 distinct models, got {models}")
        if not (0.5 < confidence < 1.0):
            raise ValueError(f"confidence must be in (0.5, 1), got {confidence}")
        lo, hi = (float(v) for v in score_range)
        if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
            raise ValueError(f"the score range must be finite with hi > lo, got {score_range}")
        if tie_margin is None or tie_margin < 0:
            raise ValueError(f"the tie margin must be >= 0, got {tie_margin}")
        self._models = models
        self._ids = [str(i) for i in item_ids]
        n = len(self._ids)
        if n < 1:
            raise ValueError("no documents to rank on")
        self._index = {v: i for i, v in enumerate(self._ids)}
        self._lo, self._hi = lo, hi
        self._tol = 1e-9 * (hi - lo)  # float rounding: two exact equal means are equal
        self._confidence, self._margin, self._family_wise = float(confidence), float(tie_margin), bool(family_wise)
        self._budget = None if budget is None else float(budget)
        self._n_max = n if n_max is None else int(n_max)
        self._most, self._seed, self._grid, self._paths = int(max_in_flight), seed, int(grid), int(settle_paths)
        self._costs = {m: np.ones(n) if item_costs is None else np.asarray(item_costs[m], dtype=float) for m in models}
        mean_cost = {m: float(np.mean(c)) for m, c in self._costs.items()}
        overall = float(np.mean(list(mean_cost.values()))) or 1.0
        self._relcost = {m: (mean_cost[m] / overall) or 1.0 for m in models}
        self._perm = np.random.default_rng(seed).permutation(n)
        self._rank_of = np.argsort(self._perm)  # position of each document in the shared order
        has = {m: np.ones(n, dtype=bool) for m in models}
        for m, idx in (exclude or {}).items():
            has[str(m)][np.asarray(list(idx), dtype=np.int64)] = False
        self._order = {m: self._perm[has[m][self._perm]] for m in models}  # its documents, in the shared order
        self._scores = {m: np.full(n, np.nan) for m in models}
        self._asked = {m: np.zeros(n, dtype=bool) for m in models}
        self._next = {m: 0 for m in models}  # position in _order of the first document not asked
        alpha_model = 1.0 - self._confidence
        self._cs = {m: WorBettingCS(max(1, self._order[m].size), lo, hi, alpha_model, grid=self._grid) for m in models}
        self._cs_pos = {m: 0 for m in models}
        self._pairs = [(a, b) for i, a in enumerate(models) for b in models[i + 1:]]
        alpha_pair = pair_alpha(self._confidence, len(self._pairs), self._family_wise)
        self._pair_order, self._pair_cs, self._pair_pos, self._pair_d, self._outcome = {}, {}, {}, {}, {}
        for a, b in self._pairs:
            common = self._perm[has[a][self._perm] & has[b][self._perm]]
            self._pair_order[(a, b)] = common
            self._pair_cs[(a, b)] = WorBettingCS(max(1, common.size), lo - hi, hi - lo, alpha_pair, grid=self._grid,
                                                  truncation=PAIR_TRUNCATION)
            self._pair_pos[(a, b)] = 0
            self._pair_d[(a, b)] = []
            self._outcome[(a, b)] = UNRESOLVED if common.size else EQUIVALENT  # no common document: nothing to compare
        self._pending: dict[tuple[str, int], Request] = {}
        self._spent = 0.0
        self._reserved = 0.0
        self._failed: dict[str, str] = {}
        self._stopped: str | None = None

    # ------------------------------------------------------------------ read-only state
    @property
    def models(self) -> list[str]:
        return list(self._models)

    @property
    def active(self) -> list[str]:
        return [m for m in self._models if m not in self._failed]

    @property
    def confidence(self) -> float:
        return self._confidence

    @property
    def budget(self) -> float | None:
        return self._budget

    @property
    def spent(self) -> float:
        return self._spent

    @property
    def pending(self) -> Mapping[tuple[str, int], Request]:
        return MappingProxyType(self._pending)

    @property
    def failed(self) -> Mapping[str, str]:
        return MappingProxyType(self._failed)

    @property
    def stopped_because(self) -> str | None:
        return self._stopped

    @property
    def finished(self) -> bool:
        return self._stopped is not None and not self._pending

    @property
    def permutation(self) -> np.ndarray:
        """The shared order of the documents (indices into ``item_ids``)."""
        return self._perm.copy()

    @property
    def signature(self) -> dict:
        return {"ranker": "bank-free", "design": "shared-random-order", "interval": "wor-betting-cs",
                "truncation": f"mean={TRUNCATION:g},pair={PAIR_TRUNCATION:g}", "confidence": self._confidence,
                "family_wise": self._family_wise, "tie_margin": self._margin,
                "range": [self._lo, self._hi], "documents": len(self._ids), "grid": self._grid,
                "seed": _seed_value(self._seed), "allocation": self._allocation,
                "settle_policy": self._judge.policy.name if self._judge.policy is not None else None,
                "open_pair_order": getattr(self._order_key, "name", "order key") if self._order_key is not None
                else "paired differences"} | versions()

    def items(self, m: str) -> int:
        """Documents ``m`` has been scored on."""
        return int(np.sum(~np.isnan(self._scores[m])))

    def interval(self, m: str) -> tuple[float, float]:
        """``m``'s anytime-valid interval of its full-task mean (over its documents)."""
        cs = self._cs[m]
        return float(cs.lower), float(cs.upper)

    def pair_interval(self, a: str, b: str) -> tuple[float, float]:
        """The interval of mean(a) − mean(b) over the documents both have."""
        if (a, b) in self._pair_cs:
            cs = self._pair_cs[(a, b)]
            return float(cs.lower), float(cs.upper)
        lo, hi = self.pair_interval(b, a)
        return -hi, -lo

    def outcome(self, a: str, b: str) -> str:
        return self._outcome[(a, b) if (a, b) in self._outcome else (b, a)]

    # ------------------------------------------------------------------ asking
    def _open_pairs(self) -> list[tuple[str, str]]:
        act = set(self.active)
        return [p for p in self._pairs if self._outcome[p] == UNRESOLVED and p[0] in act and p[1] in act]

    def _front(self, m: str) -> int:
        """Position in the shared order of ``m``'s first document not asked (N: none left)."""
        k = self._next[m]
        order = self._order[m]
        return int(self._rank_of[order[k]]) if k < order.size else len(self._ids)

    def _affordable(self, m: str, item: int) -> bool:
        if self._budget is None:
            return True
        return self._spent + self._reserved + float(self._costs[m][item]) <= self._budget * (1 + 1e-12)

    def ask(self) -> Request | None:
        """The next administration, or None (the run is over, or it waits for calls in flight)."""
        if self._stopped is not None:
            return None
        open_pairs = self._open_pairs()
        if not open_pairs:
            self._stop_if_idle("settled")
            return None
        if not (open_pairs := [p for p in open_pairs if not self._beyond(p)]):
            self._stop_if_idle("cost_to_settle")
            return None
        worth: dict[str, float] = {}
        for a, b in open_pairs:
            fa, fb = self._front(a), self._front(b)
            w = pair_weight(self._allocation, np.asarray(self._pair_d[(a, b)], dtype=float),
                            int(self._pair_order[(a, b)].size), self.pair_interval(a, b))
            worth[a] = worth.get(a, 0.0) + w * (1.0 if fa < fb else 0.5 if fa == fb else 0.0)
            worth[b] = worth.get(b, 0.0) + w * (1.0 if fb < fa else 0.5 if fa == fb else 0.0)
        flight = self._flight()
        best, best_val, passed = None, -math.inf, set()
        for m in self._models:
            if worth.get(m, 0.0) <= 0.0:
                continue
            k = self._next[m]
            if flight.get(m, 0) >= self._most:
                passed.add("pending")
                continue
            if k >= self._order[m].size:
                passed.add("pending" if flight.get(m) else "exhausted")
                continue
            if self.items(m) + flight.get(m, 0) >= self._n_max:
                passed.add("pending" if flight.get(m) else "max_items")
                continue
            if not self._affordable(m, int(self._order[m][k])):
                passed.add("pending" if flight.get(m) else "budget")
                continue
            val = worth[m] / self._relcost[m]
            if val > best_val + 1e-12:
                best, best_val = m, val
        if best is None:
            if "pending" not in passed and not self._pending:
                self._stopped = next((r for r in ("budget", "max_items", "exhausted") if r in passed), "exhausted")
            return None
        item = int(self._order[best][self._next[best]])
        self._asked[best][item] = True
        self._advance_next(best)
        req = Request(best, item, self._ids[item], float(self._costs[best][item]), "adaptive")
        self._pending[(best, item)] = req
        self._reserved += req.cost
        return req

    def _flight(self) -> dict:
        out: dict[str, int] = {}
        for m, _ in self._pending:
            out[m] = out.get(m, 0) + 1
        return out

    def _advance_next(self, m: str) -> None:
        order, k = self._order[m], self._next[m]
        while k < order.size and self._asked[m][order[k]]:
            k += 1
        self._next[m] = k

    def _stop_if_idle(self, reason: str) -> None:
        if not self._pending:
            self._stopped = reason

    # ------------------------------------------------------------------ telling
    def tell(self, request: Request, y, *, cost: float | None = None, raw=None) -> None:
        """Record ``request``'s score ``y`` (metric units, inside the stated range) and its cost (USD;
        None: the planned one). ``raw`` is accepted for the protocol and not used."""
        key = (request.model, int(request.item))
        if key not in self._pending:
            raise ValueError(f"model {request.model!r}, item {request.item_id!r}: no such request in flight")
        y = float(y)
        if not math.isfinite(y) or not (self._lo <= y <= self._hi):
            raise ValueError(f"model {request.model!r}, item {request.item_id!r}: the score must be a finite "
                             f"number in the stated range [{self._lo:g}, {self._hi:g}], got {y!r}")
        usd = request.cost if cost is None else check_cost(cost, model=request.model, item=request.item_id)
        del self._pending[key]
        self._reserved = max(0.0, self._reserved - request.cost)
        self._spent += float(usd)
        self._scores[request.model][int(request.item)] = y
        self._absorb(request.model)

    def cancel(self, request: Request) -> None:
        """Give up ``request`` (nothing charged): its document is asked again later."""
        key = (request.model, int(request.item))
        if self._pending.pop(key, None) is None:
            return
        self._reserved = max(0.0, self._reserved - request.cost)
        self._asked[request.model][int(request.item)] = False
        pos = np.flatnonzero(self._order[request.model] == int(request.item))
        self._next[request.model] = min(self._next[request.model], int(pos[0]))

    def fail(self, model: str, why: str) -> None:
        """Drop ``model`` from the ranking (it is listed as failed)."""
        self._failed[str(model)] = str(why)
        for key in [k for k in self._pending if k[0] == model]:
            self.cancel(self._pending[key])
        if len(self.active) < 2:
            self._stopped = "failed"

    def stop(self, reason: str) -> None:
        if reason not in BANK_FREE_STOP_REASONS:
            raise ValueError(f"stop reason must be one of {BANK_FREE_STOP_REASONS}, got {reason!r}")
        self._stopped = reason

    def _absorb(self, m: str) -> None:
        """Feed ``m``'s confidence sequence and its pairs' every score now in order; re-decide the pairs."""
        cs, order, k = self._cs[m], self._order[m], self._cs_pos[m]
        while k < order.size and not np.isnan(self._scores[m][order[k]]):
            cs.update(self._scores[m][order[k]])
            k += 1
        self._cs_pos[m] = k
        for p in self._pairs:
            if m not in p:
                continue
            a, b = p
            pcs, common, j = self._pair_cs[p], self._pair_order[p], self._pair_pos[p]
            moved = False
            while j < common.size:
                ya, yb = self._scores[a][common[j]], self._scores[b][common[j]]
                if np.isnan(ya) or np.isnan(yb):
                    break
                pcs.update(ya - yb)
                self._pair_d[p].append(ya - yb)
                j += 1
                moved = True
            self._pair_pos[p] = j
            if moved:
                self._outcome[p] = decide(float(pcs.lower), float(pcs.upper), self._margin, self._tol)

    # ------------------------------------------------------------------ running and results
    def run(self, score: Callable[[str, int], float]) -> RankingResult:
        """Ask and tell until the run ends, ``score(model, item index)`` giving each score."""
        while (req := self.ask()) is not None:
            self.tell(req, score(req.model, req.item))
        return self.result()

    def result(self, *, settle_costs: bool = True) -> RankingResult:
        """The ranking now (see the module docstring); ``settle_costs``: simulate each unresolved pair's
        cost to settle (off: None, for speed)."""
        act = self.active
        est = {m: self._estimate(m) for m in act}
        for m in act if self._order_key is not None else ():  # the open pairs' order (it decides nothing)
            est[m]["order_key"] = float(self._order_key(m, self._log(m)))
        ranking = ranking_from_pairs(act, est, self._pair_stats, self._settled_ahead,
                                     key="order_key" if self._order_key is not None else None)
        pairs = [_pair_record(self, a, b, settle_costs) for i, a in enumerate(ranking) for b in ranking[i + 1:]]
        K = len(ranking)
        rank_range, P = _ranges_and_pairwise(ranking, pairs)
        unsettled = [(p["a"], p["b"]) for p in pairs if p["outcome"] != ORDERED]
        equivalent = [(p["a"], p["b"]) for p in pairs if p["outcome"] == EQUIVALENT]
        groups = equivalence_groups(ranking, equivalent)
        return RankingResult(
            ranking=ranking, theta={m: est[m]["estimate"] for m in ranking},
            se={m: (est[m]["upper"] - est[m]["lower"]) / 2 for m in ranking},
            items={m: self.items(m) for m in ranking},
            cost={m: float(np.nansum(np.where(np.isnan(self._scores[m]), 0.0, self._costs[m]))) for m in ranking},
            pairwise=P, ties=unsettled, tie_groups=groups,
            adjacent_confidence=[float(P[i, i + 1]) for i in range(K - 1)],
            stopped_because=self._stopped or "running", confidence=self._confidence, budget=self._budget,
            total_cost=self._spent,
            item_log={m: self._log(m) for m in ranking},
            failed=dict(self._failed), signature=self.signature, equivalent=equivalent,
            open_pairs=[(p["a"], p["b"]) for p in pairs if p["outcome"] == UNRESOLVED and not p["beyond_policy"]],
            pairs=pairs, rank_range=rank_range, estimates=est, judgement="anytime")

    def _log(self, m: str) -> list:
        """(document id, score) of each document ``m`` answered, in the shared order."""
        return [(self._ids[i], float(self._scores[m][i])) for i in self._order[m] if not np.isnan(self._scores[m][i])]

    def _estimate(self, m: str) -> dict:
        cs = self._cs[m]
        t = int(cs.t)
        return {"estimate": float(cs.mean) if t else float("nan"), "lower": float(cs.lower),
                "upper": float(cs.upper), "items": t, "population": int(self._order[m].size),
                "exact": bool(t >= self._order[m].size), "method": "anytime-cs",
                "level": self._confidence}

    def _settled_ahead(self, a: str, b: str) -> bool:
        """Is the pair ordered with ``a`` above ``b`` (its interval of a − b above 0)?"""
        return self.outcome(a, b) == ORDERED and self.pair_interval(a, b)[0] > 0.0

    def _pair_stats(self, a: str, b: str) -> tuple[float, int]:
        """(mean difference a − b on the common documents taken, their number)."""
        p = (a, b) if (a, b) in self._pair_d else (b, a)
        d = self._pair_d[p]
        if not d:
            return 0.0, 0
        mean = float(np.mean(d))
        return (mean if p == (a, b) else -mean), len(d)

    def _pair_rng(self, p: tuple[str, str], *more: int) -> np.random.Generator:
        """The seeded generator of the pair ``p``'s projections (``more``: what else it depends on)."""
        return np.random.default_rng([*np.atleast_1d(_seed_value(self._seed) or 0).tolist(),
                                      self._models.index(p[0]), self._models.index(p[1]), *more])

    def _full(self) -> dict:
        """Each active model's full run in dollars (every one of its documents, at today's cost estimates)."""
        return {m: float(np.sum(self._costs[m][self._order[m]])) for m in self.active}

    def _beyond(self, p: tuple[str, str]) -> bool:
        """Does the stopping policy give the unresolved pair ``p`` no more documents now (cost_to_settle.py)?"""
        if self._judge.policy is None or self._outcome[p] != UNRESOLVED:
            return False
        d = self._pair_d[p]
        return self._judge.beyond(p, cs=self._pair_cs[p], d=np.asarray(d, dtype=float), margin=self._margin,
                                  rng=lambda g: self._pair_rng(p, g), common=self._pair_order[p],
                                  pos=self._pair_pos[p], scores=self._scores, costs=self._costs,
                                  spent=self._spent + self._reserved, full=self._full(),
                                  full_run_items=float(np.mean([self._order[m].size for m in self.active])),
                                  remaining=None if self._budget is None
                                  else self._budget - self._spent - self._reserved)


def _pair_record(r: BankFreeRanker, a: str, b: str, settle_costs: bool) -> dict:
    """The record of the pair (a, b) of ``r`` now: its outcome, interval, and, unresolved, its cost to settle
    (``settle_costs``; off: None) and whether the stopping policy gave it up."""
    p = (a, b) if (a, b) in r._pair_cs else (b, a)
    sign = 1.0 if p == (a, b) else -1.0
    lo, hi = r.pair_interval(a, b)
    d = np.asarray(r._pair_d[p], dtype=float) * sign
    n_common, pop = int(d.size), int(r._pair_order[p].size)
    outcome = r._outcome[p]
    diff = float(d.mean()) if n_common else 0.0
    rec = {"a": a, "b": b, "outcome": outcome, "p_order": p_order(d, pop), "difference": diff,
           "lower": lo, "upper": hi, "se": (hi - lo) / 2, "common_items": n_common, "population": pop,
           "beyond_policy": False, "items_to_settle": 0, "items_to_settle_range": [0, 0],
           "cost_to_settle_usd": 0.0, "cost_to_settle_usd_range": [0.0, 0.0]}
    if outcome != UNRESOLVED:
        return rec
    rec["beyond_policy"] = r._beyond(p)
    if not settle_costs:
        rec.update(items_to_settle=None, items_to_settle_range=None, cost_to_settle_usd=None,
                   cost_to_settle_usd_range=None)
        return rec
    rec.update(stated_cost(r._pair_cs[p], d * sign, r._margin, r._pair_rng(p), r._paths,
                           r._pair_order[p], r._pair_pos[p], r._scores, r._costs, p))
    if rec["beyond_policy"]:  # the --settle-share that buys it
        rec["settle_share_to_buy"] = share_to_buy(r._spent, rec["cost_to_settle_usd"], sum(r._full().values()))
    return rec


def ranking_from_pairs(models: Sequence[str], est: Mapping[str, dict], pair_stats: Callable, ahead: Callable,
                       key: str | None = None) -> list:
    """Models best first: a least-squares fit s of the pairs' mean differences on their common documents
    (min Σ n_ab (s_a − s_b − d̄_ab)², Σ s = 0; models sharing no document fall back on their own means), or
    with ``key`` each model's ``est[m][key]`` instead of the fit, then a stable topological order that keeps
    every ordered pair's order (``ahead(a, b)``: a is settled above b)."""
    ms = list(models)
    K = len(ms)
    if key is not None:
        est = {m: {"estimate": est[m][key]} for m in ms}
        pair_stats = _no_pairs
    A = np.zeros((K, K))
    r = np.zeros(K)
    for i in range(K):
        for j in range(i + 1, K):
            d, n = pair_stats(ms[i], ms[j])
            if n:
                A[i, i] += n
                A[j, j] += n
                A[i, j] -= n
                A[j, i] -= n
                r[i] += n * d
                r[j] -= n * d
    own = np.array([est[m]["estimate"] if np.isfinite(est[m]["estimate"]) else -np.inf for m in ms])
    s = np.linalg.lstsq(A + 1.0 / K, r, rcond=None)[0] if A.any() else np.zeros(K)
    fin = np.where(np.isfinite(own), own, 0.0)
    key = s + 1e-9 * fin  # ties of the fit (e.g. no common documents): the own mean decides
    order = sorted(range(K), key=lambda i: (-key[i], i))
    # keep every ordered pair in its order: repeatedly take the best-keyed model nobody ordered above it
    left = list(order)
    out = []
    while left:
        for i in left:
            beaten = any(ahead(ms[j], ms[i]) for j in left if j != i)
            if not beaten:
                break
        else:
            i = left[0]
        out.append(ms[i])
        left.remove(i)
    return out


def _no_pairs(a: str, b: str) -> tuple[float, int]:
    return 0.0, 0


def _ranges_and_pairwise(ranking: Sequence[str], pairs: list) -> tuple[dict, np.ndarray]:
    """Each model's rank range (best = 1 + the entries ordered above it, worst = K − those below) and the
    matrix of P(ranking[i] > ranking[j]) from the pair records."""
    K = len(ranking)
    pos = {m: i for i, m in enumerate(ranking)}
    above = {m: 0 for m in ranking}
    below = {m: 0 for m in ranking}
    P = np.full((K, K), 0.5)
    for p in pairs:
        if p["outcome"] == ORDERED:
            below[p["a"]] += 1
            above[p["b"]] += 1
        i, j = pos[p["a"]], pos[p["b"]]
        P[i, j], P[j, i] = p["p_order"], 1.0 - p["p_order"]
    return {m: [1 + above[m], K - below[m]] for m in ranking}, P


def _seed_value(seed):
    if seed is None or isinstance(seed, (int, np.integer)):
        return None if seed is None else int(seed)
    try:
        return [int(x) for x in seed]
    except TypeError:
        return str(seed)

"""The adaptive multi-model ranker (METHOD.md §4, the paper's Algorithm 1).

The ranker never sees a model or a metric. It is asked for the next administration
(:meth:`AdaptiveRanker.ask` → a :class:`Request` naming a model and an item) and told the
scaled score (:meth:`AdaptiveRanker.tell`). Simulation, the harness and live API calls
drive the same object; several requests may be in flight at once (one per model), their
cost reserved against the budget until told.

Algorithm
1. Warm-up: every model gets ``n_init`` items by maximum information.
2. Rank models by θ̂. An adjacent pair (i, j) is settled when
   P(θ_i > θ_j) = Φ((θ̂_i - θ̂_j)/√(SE_i² + SE_j²)) lies outside [(1-γ)/2, 1-(1-γ)/2].
3. Candidates: models in unsettled adjacent pairs, under ``n_max``, with an unseen item
   whose cost fits in the budget. None → stop. Otherwise give
   m* = argmax SE_m² / ((n_m + 1)·c_m) (uncertainty reduction per dollar; c_m is the
   model's relative cost) its most informative unseen item.
4. Stop when every adjacent pair is settled or nothing more can be bought. Report the
   ranking, pairwise confidences and, as ties, the pairs never settled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np
from scipy.special import ndtr, ndtri

from lm_eval_adaptive.engine.bank import ItemBank
from lm_eval_adaptive.engine.cat import Examinee
from lm_eval_adaptive.engine.selection import MaxInfoSelector

__all__ = ["AdaptiveRanker", "Request", "RankingResult", "pairwise_matrix", "tie_groups"]

STOP_REASONS = ("settled", "budget", "max_items", "bank_exhausted", "failed")


@dataclass(frozen=True)
class Request:
    """One administration: give bank item ``item`` (id ``item_id``) to ``model``."""

    model: str
    item: int
    item_id: str
    cost: float
    phase: str  # "warmup" or "adaptive"


def pairwise_matrix(theta: np.ndarray, se: np.ndarray) -> np.ndarray:
    """P(θ_i > θ_j) for every pair under independent normal posteriors (diagonal 0.5)."""
    d = theta[:, None] - theta[None, :]
    s = np.sqrt(se[:, None] ** 2 + se[None, :] ** 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = ndtr(d / s)
    p[s == 0] = 0.5
    np.fill_diagonal(p, 0.5)
    return p


def tie_groups(ranking: Sequence[str], adjacent_settled: Sequence[bool]) -> list[list[str]]:
    """Maximal runs of the ranking linked by unsettled adjacent pairs (groups of ≥ 2)."""
    groups, cur = [], [ranking[0]] if len(ranking) else []
    for m, settled in zip(ranking[1:], adjacent_settled):
        if settled:
            if len(cur) > 1:
                groups.append(cur)
            cur = [m]
        else:
            cur.append(m)
    if len(cur) > 1:
        groups.append(cur)
    return groups


@dataclass
class RankingResult:
    """What a ranking run found. Models are listed best first."""

    ranking: list
    theta: dict
    se: dict
    items: dict
    cost: dict
    pairwise: np.ndarray  # P(ranking[i] > ranking[j])
    ties: list  # pairs (a, b), a ranked above b, whose order is not settled at γ
    tie_groups: list
    adjacent_confidence: list  # P(ranking[i] > ranking[i+1])
    stopped_because: str
    confidence: float
    budget: float | None
    total_cost: float
    item_log: dict = field(default_factory=dict)  # model -> list of (item_id, scaled score)
    failed: dict = field(default_factory=dict)  # model -> why it was dropped (not ranked)

    @property
    def total_items(self) -> int:
        return int(sum(self.items.values()))

    def to_dict(self) -> dict:
        return {
            "ranking": [{"model": m, "theta": self.theta[m], "se": self.se[m], "items": self.items[m],
                         "cost_usd": self.cost[m]} for m in self.ranking],
            "ties": [list(p) for p in self.ties],
            "tie_groups": self.tie_groups,
            "pairwise": {a: {b: float(self.pairwise[i, j]) for j, b in enumerate(self.ranking) if j != i}
                         for i, a in enumerate(self.ranking)},
            "adjacent_confidence": [float(p) for p in self.adjacent_confidence],
            "stopped_because": self.stopped_because,
            "confidence": self.confidence,
            "budget_usd": self.budget,
            "total_cost_usd": self.total_cost,
            "total_items": self.total_items,
            "failed": dict(self.failed),
        }


class AdaptiveRanker:
    """Adaptive multi-model ranker over one item bank (see module docstring).

    Parameters
    ----------
    bank:
        The calibrated item bank.
    models:
        Names of the models to rank (at least 2).
    item_costs:
        Per model, the USD cost of each bank item (array aligned with the bank). Omitted:
        every item costs 0 and no budget applies.
    relative_costs:
        Per model cost weight c_m in the allocation rule; default: each model's mean item
        cost, normalised so the cheapest is 1 (all 1 without item costs).
    confidence:
        γ; a pair is settled when P(order) > 1 - (1-γ)/2.
    n_init, n_max:
        Warm-up length and maximum items per model.
    budget:
        Hard cap on total spend in USD (None: no cap).
    top_k:
        1 for strict maximum information; > 1 for randomesque selection.
    exclude:
        Per model, bank items never to give it (e.g. it has no recorded answer).
    max_in_flight:
        Requests one model may have in flight at once (1: each item is chosen after the
        previous score; k > 1: the k most informative unseen items at the current θ̂).
    """

    def __init__(self, bank: ItemBank, models: Sequence[str], *,
                 item_costs: Mapping[str, np.ndarray] | None = None,
                 relative_costs: Mapping[str, float] | None = None,
                 confidence: float = 0.95, n_init: int = 10, n_max: int | None = None,
                 budget: float | None = None, top_k: int = 1, seed: int | None = None,
                 selector: MaxInfoSelector | None = None,
                 exclude: Mapping[str, np.ndarray] | None = None, reserve_mean_cost: bool = True,
                 max_in_flight: int = 1):
        models = [str(m) for m in models]
        if len(models) < 2:
            raise ValueError("ranking needs at least 2 models")
        if len(set(models)) != len(models):
            raise ValueError("model names must be unique")
        if not (0.5 < confidence < 1):
            raise ValueError(f"confidence must be in (0.5, 1), got {confidence}")
        if n_init < 1:
            raise ValueError("n_init must be >= 1")
        if budget is not None and not (budget >= 0):
            raise ValueError("budget must be >= 0")
        if budget is not None and item_costs is None:
            raise ValueError("a budget needs item_costs")
        self.bank = bank
        self.models = models
        self.confidence = float(confidence)
        self.upper = 1 - (1 - self.confidence) / 2
        self.n_init = int(n_init)
        self.n_max = bank.n_items if n_max is None else min(int(n_max), bank.n_items)
        if self.n_max < 1:
            raise ValueError("n_max must be >= 1")
        self.budget = budget
        self.rng = np.random.default_rng(seed)
        self.selector = selector or MaxInfoSelector(bank.b, top_k=top_k)
        costs = {}
        for m in models:
            c = None if item_costs is None else np.asarray(item_costs[m], dtype=float)
            if c is not None and c.shape != (bank.n_items,):
                raise ValueError(f"item_costs[{m!r}] must have one cost per bank item ({bank.n_items})")
            costs[m] = c
        if relative_costs is None:
            if item_costs is None:
                rel = {m: 1.0 for m in models}
            else:
                rel = {m: float(np.mean(costs[m])) for m in models}
        else:
            rel = {m: float(relative_costs[m]) for m in models}
        lo = min(rel.values())
        self.relative_costs = {m: (v / lo if lo > 0 else 1.0) for m, v in rel.items()}
        self.examinees = {m: Examinee(bank, self.selector, m, item_costs=costs[m]) for m in models}
        for m, items in (exclude or {}).items():
            self.examinees[m].exclude(items)
        self._next: dict[str, int | None] = {m: None for m in models}
        if int(max_in_flight) < 1:
            raise ValueError("max_in_flight must be >= 1")
        self.max_in_flight = int(max_in_flight)
        self.pending: dict[tuple[str, int], Request] = {}  # (model, item) -> request in flight
        self.failed: dict[str, str] = {}
        #: models the caller cannot pay for right now (e.g. a live run's ledger refused their
        #: next call's upper estimate); skipped by ask() as over budget until removed
        self.blocked: set[str] = set()
        self.stopped_because: str | None = None
        self.reserve_mean_cost = bool(reserve_mean_cost)
        self._mean_cost = {m: (float(np.mean(costs[m])) if costs[m] is not None else 0.0) for m in models}

    # ----------------------------------------------------------------- state
    @property
    def finished(self) -> bool:
        return self.stopped_because is not None

    @property
    def spent(self) -> float:
        return float(sum(e.spent for e in self.examinees.values()))

    @property
    def reserved(self) -> float:
        return float(sum(r.cost for r in self.pending.values()))

    def in_flight(self, m: str) -> int:
        """Requests of model ``m`` in flight."""
        return sum(1 for (pm, _) in self.pending if pm == m)

    @property
    def active(self) -> list[str]:
        """The models still ranked (not failed)."""
        return [m for m in self.models if m not in self.failed]

    def _peek(self, m: str) -> int:
        """The model's next item (cached until its posterior changes)."""
        nxt = self._next[m]
        if nxt is None:
            nxt = self.examinees[m].next_item(self.rng)
            self._next[m] = nxt
        return nxt

    def _affordable(self, m: str, item: int) -> bool:
        """The item's cost fits in the remaining budget, and so does the model's typical item.

        Before a live call the real charge is unknown (output length), so a run plans with
        the model's mean item cost too: spending the last cents on whatever short items happen
        to be informative would let the budget, not the information, choose the items.
        """
        if self.budget is None:
            return True
        e = self.examinees[m]
        need = e.cost_of(item)
        if self.reserve_mean_cost and e.item_costs is not None:
            need = max(need, self._mean_cost[m])
        return self.spent + self.reserved + need <= self.budget * (1 + 1e-12)

    def _request(self, m: str, item: int, phase: str) -> Request:
        e = self.examinees[m]
        req = Request(model=m, item=int(item), item_id=str(self.bank.item_ids[item]),
                      cost=e.cost_of(item), phase=phase)
        e.reserve(item)
        self._next[m] = None
        self.pending[(m, req.item)] = req
        return req

    def _order(self):
        models = self.active
        th = np.array([self.examinees[m].theta for m in models])
        se = np.array([self.examinees[m].se for m in models])
        order = np.argsort(-th, kind="stable")
        d = th[order[:-1]] - th[order[1:]]
        s = np.sqrt(se[order[:-1]] ** 2 + se[order[1:]] ** 2)
        p = ndtr(d / s)
        return models, order, p, se

    # --------------------------------------------------------------- ask/tell
    def ask(self) -> Request | None:
        """The next administration, or None (finished, or waiting for pending scores)."""
        if self.finished:
            return None
        active = self.active
        if len(active) < 2:
            self._stop_if_idle("failed")
            return None
        # 1. warm-up, round robin: fewest items first (a model with no unseen item left is done)
        n_warm = min(self.n_init, self.n_max)
        warm = [m for m in active if self.examinees[m].n + self.in_flight(m) < n_warm
                and self.in_flight(m) < self.max_in_flight and m not in self.blocked and self._peek(m) >= 0]
        if warm:
            m = min(warm, key=lambda x: self.examinees[x].n + self.in_flight(x))
            item = self._peek(m)
            if not self._affordable(m, item):
                self._stop_if_idle("budget")
                return None
            return self._request(m, item, "warmup")
        if any(self.examinees[m].n < n_warm for (m, _) in self.pending):
            return None  # warm-up items still in flight
        # 2. adaptive phase
        models, order, p, se = self._order()
        unsettled = np.flatnonzero(~(p > self.upper))
        if unsettled.size == 0:
            self._stop_if_idle("settled")
            return None
        cand = np.unique(np.concatenate([order[unsettled], order[unsettled + 1]]))
        partners: dict[int, list[int]] = {}
        for u in unsettled:
            partners.setdefault(int(order[u]), []).append(int(order[u + 1]))
            partners.setdefault(int(order[u + 1]), []).append(int(order[u]))
        th = np.array([self.examinees[m].theta for m in models])
        z = float(ndtri(self.upper))
        best, best_val, blocked = None, -np.inf, set()
        for j in cand:
            m = models[j]
            e = self.examinees[m]
            # items for m cannot settle a pair whose partner may not be asked now (blocked) when
            # the partner's uncertainty alone keeps it unsettled even if m's θ̂ moved z·SE_m
            # away: do not buy them
            if self.blocked and all(models[p] in self.blocked and abs(th[j] - th[p]) + z * se[j] < z * se[p]
                                    for p in partners[int(j)]):
                blocked.add("pending" if self.in_flight(m) else "budget")
                continue
            k = self.in_flight(m)
            if k >= self.max_in_flight:
                blocked.add("pending")
                continue
            if e.n + k >= self.n_max:
                blocked.add("pending" if k else "max_items")
                continue
            if m in self.blocked:
                blocked.add("pending" if k else "budget")
                continue
            item = self._peek(m)
            if item < 0:
                blocked.add("pending" if k else "bank_exhausted")
                continue
            if not self._affordable(m, item):
                blocked.add("budget")
                continue
            val = se[j] ** 2 / ((e.n + k + 1) * self.relative_costs[m])
            if val > best_val:
                best, best_val = m, val
        if best is None:
            if "pending" not in blocked:
                reason = next(r for r in ("budget", "max_items", "bank_exhausted") if r in blocked)
                self._stop_if_idle(reason)
            return None
        return self._request(best, self._next[best], "adaptive")

    def _stop_if_idle(self, reason: str) -> None:
        if not self.pending:
            self.stopped_because = reason

    def tell(self, request: Request, y: float, *, cost: float | None = None) -> None:
        """Record the scaled score y ∈ [0, 1] for a request from :meth:`ask`.

        ``cost`` is the real charge when it differs from the reserved estimate.
        """
        key = (request.model, request.item)
        if self.pending.get(key) != request:
            raise ValueError(f"no pending request {request}")
        del self.pending[key]
        self.examinees[request.model].record(request.item, float(y), cost=cost)
        self._next[request.model] = None

    def cancel(self, request: Request) -> None:
        """Give up a pending request (e.g. the call failed for good); its item stays unused."""
        key = (request.model, request.item)
        if self.pending.get(key) == request:
            del self.pending[key]

    def release(self, request: Request) -> None:
        """Take back a pending request that was never made: its item may be asked again."""
        key = (request.model, request.item)
        if self.pending.get(key) != request:
            raise ValueError(f"no pending request {request}")
        del self.pending[key]
        e = self.examinees[request.model]
        pos = e.selector.rank[request.item]
        if e.mask[pos]:
            e.mask[pos] = False
            e.n_masked -= 1
        self._next[request.model] = None

    def fail(self, model: str, why: str) -> None:
        """Drop ``model`` from the ranking (it keeps failing); its requests in flight are cancelled."""
        if model not in self.examinees:
            raise ValueError(f"unknown model {model!r}")
        self.failed[model] = str(why)
        for key in [k for k in self.pending if k[0] == model]:
            del self.pending[key]

    def run(self, score: Callable[[str, int], float]) -> RankingResult:
        """Drive to the end with ``score(model, bank_item_index) -> scaled score``."""
        while (req := self.ask()) is not None:
            self.tell(req, score(req.model, req.item))
        return self.result()

    # ----------------------------------------------------------------- result
    def result(self) -> RankingResult:
        models = self.active
        th = np.array([self.examinees[m].theta for m in models])
        se = np.array([self.examinees[m].se for m in models])
        order = np.argsort(-th, kind="stable")
        ranking = [models[i] for i in order]
        P = pairwise_matrix(th[order], se[order])
        lower = 1 - self.upper
        ties = [(ranking[i], ranking[j]) for i in range(len(ranking)) for j in range(i + 1, len(ranking))
                if lower <= P[i, j] <= self.upper]
        adj = [float(P[i, i + 1]) for i in range(len(ranking) - 1)]
        groups = tie_groups(ranking, [p > self.upper for p in adj])
        ex = self.examinees
        every = ranking + [m for m in self.models if m in self.failed]
        return RankingResult(
            ranking=ranking,
            theta={m: ex[m].theta for m in every},
            se={m: ex[m].se for m in every},
            items={m: ex[m].n for m in every},
            cost={m: ex[m].spent for m in every},
            pairwise=P, ties=ties, tie_groups=groups, adjacent_confidence=adj,
            stopped_because=self.stopped_because or "running",
            confidence=self.confidence, budget=self.budget, total_cost=self.spent,
            item_log={m: [(str(self.bank.item_ids[i]), s) for i, s in zip(ex[m].items, ex[m].scores)]
                      for m in every},
            failed=dict(self.failed),
        )

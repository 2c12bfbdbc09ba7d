"""Prototype of the adaptive ranker with pluggable estimator, design and pair rule.

With ``est={"kind": "plain"}``, ``rule="theta_indep"``, ``delta=None``, ``rho=0`` it is the
engine's AdaptiveRanker (METHOD.md §4) step for step (checked by ``check_equivalence.py``):
warm-up round robin of n_init items, then the model with max SE²/((n+1)·c) among the models in
unsettled adjacent pairs, budget with mean-cost reservation.

The pair rule is ``settled(i, j) -> "order" | "tie" | None`` (:meth:`status`); ties reported at
the end are pairs settled as "tie" and pairs never settled.
"""
from __future__ import annotations

import numpy as np

from .bankview import BankView
from .decisions import RULES, decide, task_mean_pred
from .estimators import make_estimator
from .state import ModelState


class ProtoRanker:
    def __init__(self, bv: BankView, names, raw: np.ndarray, costs: np.ndarray, *, budget: float,
                 est: dict | None = None, rule: str = "theta_indep", rule_kw: dict | None = None,
                 delta: float | None = None, tie_alpha: float = 0.05, confidence: float = 0.95,
                 n_init: int = 10, rho: float = 0.0, random_first: int = 0, perm=None,
                 rank_by: str = "theta", fallback_rule: str | None = None, futility: float = 0.0):
        self.bv = bv
        self.names = list(names)
        self.states = [ModelState(m, bv, make_estimator(bv, est or {"kind": "plain"}), raw[j], costs[j],
                                  perm=perm, rho=rho, random_first=random_first)
                       for j, m in enumerate(self.names)]
        self.budget = float(budget)
        self.rule = RULES[rule]
        self.rule_kw = rule_kw or {}
        self.fallback = RULES[fallback_rule] if fallback_rule else None
        self.delta = delta
        self.tie_alpha = tie_alpha
        self.confidence = confidence
        self.n_init = n_init
        self.rank_by = rank_by
        self.futility = futility
        self.stopped_because = None
        self.spent = 0.0
        self.rel = np.ones(len(self.names))
        mc = np.array([s.mean_cost_bank for s in self.states])
        if mc.min() > 0:
            self.rel = mc / mc.min()

    # ------------------------------------------------------------------ rules
    def score(self, s: ModelState) -> float:
        if self.rank_by == "theta":
            return s.est.mean
        return task_mean_pred(self.bv, s, s.est.mean)

    def pair_stat(self, a: ModelState, b: ModelState):
        kw = dict(self.rule_kw)
        if self.rule.__name__.startswith("rule_theta") and self.delta is None:
            kw.setdefault("metric", False)
        ps = self.rule(self.bv, a, b, **kw)
        if self.fallback is not None and not np.isfinite(ps.se):
            ps = self.fallback(self.bv, a, b)
        return ps

    def status(self, a: ModelState, b: ModelState):
        return decide(self.pair_stat(a, b), confidence=self.confidence, delta=self.delta,
                      tie_alpha=self.tie_alpha)

    def futile(self, a: ModelState, b: ModelState) -> bool:
        """The pair cannot be ordered by any number of further items: the bank's misfit floor
        alone, √(τ_a² + τ_b²), keeps |θ̂_a - θ̂_b| below the decision threshold (times the
        factor ``futility`` ∈ (0, 1]; 1 = the full floor, smaller = only clearly hopeless pairs).
        Such a pair no longer draws items (it is reported as a tie, "not separable with this bank")."""
        ta, tb = getattr(a.est, "tau", 0.0), getattr(b.est, "tau", 0.0)
        floor = float(np.hypot(ta, tb))
        if floor <= 0:
            return False
        from .decisions import _q
        return abs(a.est.mean - b.est.mean) < float(self.futility) * _q(self.confidence, np.inf) * floor

    def _affordable(self, s: ModelState, t: int) -> bool:
        need = max(float(s.costs[t]), s.mean_cost_bank)
        return self.spent + need <= self.budget * (1 + 1e-12)

    def _give(self, s: ModelState, t: int, kind: str):
        s.record(t, kind)
        self.spent += float(s.costs[t])

    # ------------------------------------------------------------------- loop
    def run(self):
        S = self.states
        # 1. warm-up
        while True:
            warm = [s for s in S if s.n < self.n_init]
            if not warm:
                break
            s = min(warm, key=lambda x: x.n)
            t, kind = s.peek()
            if t < 0:
                s.n_init_done = True
                break
            if not self._affordable(s, t):
                self.stopped_because = "budget"
                return self.result()
            self._give(s, t, kind)
        # 2. adaptive
        while True:
            sc = np.array([self.score(s) for s in S])
            order = np.argsort(-sc, kind="stable")
            unsettled = []
            for u in range(len(S) - 1):
                a, b = S[order[u]], S[order[u + 1]]
                if self.status(a, b) is None and not (self.futility and self.futile(a, b)):
                    unsettled.append(u)
            if not unsettled:
                self.stopped_because = "settled"
                break
            cand = np.unique(np.concatenate([order[unsettled], order[np.array(unsettled) + 1]]))
            best, best_val, why = None, -np.inf, set()
            for j in cand:
                s = S[j]
                t, kind = s.peek()
                if t < 0:
                    why.add("bank_exhausted")
                    continue
                if not self._affordable(s, t):
                    why.add("budget")
                    continue
                val = s.est.sd ** 2 / ((s.n + 1) * self.rel[j])
                if val > best_val:
                    best, best_val, best_t = j, val, (t, kind)
            if best is None:
                self.stopped_because = next(r for r in ("budget", "bank_exhausted") if r in why)
                break
            self._give(S[best], *best_t)
        return self.result()

    def result(self):
        S = self.states
        sc = np.array([self.score(s) for s in S])
        order = np.argsort(-sc, kind="stable")
        ranking = [self.names[i] for i in order]
        pairs = {}
        for x in range(len(S)):
            for y in range(x + 1, len(S)):
                a, b = S[order[x]], S[order[y]]
                ps = self.pair_stat(a, b)
                st = decide(ps, confidence=self.confidence, delta=self.delta, tie_alpha=self.tie_alpha)
                # "order" means a (ranked above) beats b: the rule's sign must agree with the ranking
                if st == "order" and ps.d < 0:
                    st = "order_rev"
                pairs[(a.name, b.name)] = (st, ps.d, ps.se, ps.d_metric, ps.se_metric)
        return {"ranking": ranking, "items": {s.name: s.n for s in S}, "spent": self.spent,
                "stopped": self.stopped_because, "pairs": pairs,
                "theta": {s.name: s.est.mean for s in S}, "sd": {s.name: s.est.sd for s in S},
                "n_random": {s.name: int(len(s.S)) for s in S}}

"""What a ranking run reports: :class:`RankingResult` (the ranking, every model's estimate, items and
cost, every pair's outcome and rank ranges, the signature of what produced it)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lm_eval_adaptive.engine.signature import format_signature


__all__ = ["RankingResult"]


@dataclass
class RankingResult:
    """What a ranking run found. Models are listed best first."""

    ranking: list
    theta: dict
    se: dict
    items: dict
    cost: dict
    pairwise: np.ndarray  # P(ranking[i] > ranking[j])
    ties: list  # pairs (a, b), a ranked above b, whose order was not settled (equivalent or unresolved)
    tie_groups: list  # metric scale: runs of the ranking every two of which are equivalent (never chained)
    adjacent_confidence: list  # P(ranking[i] > ranking[i+1])
    stopped_because: str
    confidence: float
    budget: float | None
    total_cost: float
    item_log: dict = field(default_factory=dict)  # model -> list of (item_id, scaled score)
    failed: dict = field(default_factory=dict)  # model -> why it was dropped (not ranked)
    signature: dict = field(default_factory=dict)  # what produced it (AdaptiveRanker.signature)
    equivalent: list = field(default_factory=list)  # of the ties, those settled as ties (within a margin)
    inseparable: list = field(default_factory=list)  # always empty: no pair is given up (the retired θ-scale stop's)
    open_pairs: list = field(default_factory=list)  # unresolved pairs the run still buys items for
    # every pair: {"a", "b", "outcome" (ordered | equivalent | unresolved), "p_order" (P(a > b)),
    # "items_to_settle", "cost_to_settle_usd" (0 once settled), "beyond_policy"
    # (unresolved and the stopping policy buys no more items for it), "difference", "se"}; ordered: a higher
    pairs: list = field(default_factory=list)
    rank_range: dict = field(default_factory=dict)  # model -> [best, worst] rank from the ordered pairs
    estimates: dict = field(default_factory=dict)  # model -> its estimate of record (metric scale; see to_dict)
    judgement: str = "metric-scale"  # which judgement decided the pairs ("metric-scale"; "anytime": bank-free)

    @property
    def total_items(self) -> int:
        return int(sum(self.items.values()))

    def __str__(self) -> str:
        """A short summary (``print(result)``): one line per model, the ties, the signature."""
        group = {m: g for g, members in enumerate(self.tie_groups, 1) for m in members}
        width = max((len(str(m)) for m in self.ranking), default=0)
        lines = [f"RankingResult: {len(self.ranking)} models at confidence {self.confidence:g}, "
                 f"stopped because {self.stopped_because}; {self.total_items} items, ${self.total_cost:.4f}"
                 + (f" of ${self.budget:.4f}" if self.budget is not None else "")]
        for r, m in enumerate(self.ranking, 1):
            lines.append(f"  {r:>2}. {str(m):<{width}}  θ̂ {self.theta[m]:+.2f} ± {self.se[m]:.2f}  "
                         f"items {self.items[m]}  ${self.cost[m]:.4f}" + (f"  T{group[m]}" if m in group else ""))
        if self.tie_groups:
            lines.append("  ties: " + "; ".join(" ≈ ".join(map(str, g)) for g in self.tie_groups))
        if self.failed:
            lines.append("  failed: " + ", ".join(map(str, self.failed)))
        if self.signature:
            lines.append(f"  {self.signature_string}")
        return "\n".join(lines)

    @property
    def signature_string(self) -> str:
        """The signature on one line (``bank:...|confidence:0.95|...``)."""
        return format_signature(self.signature)

    def to_dict(self) -> dict:
        def entry(m):
            e = {"model": m, "theta": self.theta[m], "se": self.se[m], "items": self.items[m],
                 "cost_usd": self.cost[m]}
            if m in self.rank_range:
                e["rank_range"] = list(self.rank_range[m])
            if m in self.estimates:
                e["estimate"] = dict(self.estimates[m])
            return e

        return {
            "ranking": [entry(m) for m in self.ranking],
            "judgement": self.judgement,
            "pairs": [dict(p) for p in self.pairs],
            "ties": [list(p) for p in self.ties],
            "equivalent": [list(p) for p in self.equivalent],
            "inseparable": [list(p) for p in self.inseparable],
            "open_pairs": [list(p) for p in self.open_pairs],
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
            "signature": dict(self.signature),
            "signature_string": self.signature_string,
        }

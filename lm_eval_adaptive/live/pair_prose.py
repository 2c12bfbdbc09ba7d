"""How a ranking's pairs and rank ranges are written for people (plain text; the commands print it).

Every pair has one of three outcomes (docs/metric-scale.md): ``ordered`` at γ, ``equivalent``
(the difference confidently within the tie margin δ), or ``unresolved`` — not settled *yet*, with
what settling it would cost. Nothing here says a pair cannot be settled: a full run settles every
pair whose full-task means differ.
"""

from __future__ import annotations

import math

from lm_eval_adaptive.display import shown

__all__ = ["rank_range_text", "pair_counts", "pair_lines", "settle_text"]


def rank_range_text(rng) -> str:
    """``[3, 5]`` as ``3–5``, ``[2, 2]`` as ``2``; empty when there is none."""
    if not rng:
        return ""
    best, worst = int(rng[0]), int(rng[1])
    return str(best) if best == worst else f"{best}–{worst}"


def pair_counts(pairs) -> dict:
    """How many pairs have each outcome."""
    out = {"ordered": 0, "equivalent": 0, "unresolved": 0}
    for p in pairs:
        out[p["outcome"]] = out.get(p["outcome"], 0) + 1
    return out


def settle_text(p: dict, policy_note: bool = True) -> str:
    """What settling an unresolved pair would take, in words (``policy_note``: say when the stopping
    policy bought no more for it)."""
    n, c = p.get("items_to_settle"), p.get("cost_to_settle_usd")
    if n is None or c is None or (isinstance(c, float) and not math.isfinite(c)):
        return "estimated in different runs: a run of both settles it"
    text = f"about {n} more items, ${c:.4f}" if c > 0 else f"about {n} more items"
    rng = p.get("items_to_settle_range")
    if rng and rng[1] > 0:  # where running on would settle it: 80% of continuations (docs/metric-scale.md)
        text += f"; 80% range {int(rng[0])}–{int(rng[1])} items"
    if policy_note and p.get("beyond_policy"):
        text += "; the stopping policy bought no more for it"
    if p.get("beyond_policy") and p.get("settle_share_to_buy"):
        text += f"; a settle share of {p['settle_share_to_buy']:g} (rank --settle-share) buys it"
    return text


def pair_lines(pairs, ranking, tie_margin=None) -> list[str]:
    """The lines a report prints about ``pairs`` (records with ``a``, ``b``, ``outcome`` and the cost to
    settle), ordered by ``ranking``: the counts, each equivalent pair, each pair not settled yet with its
    cost to settle."""
    if not pairs:
        return []
    rank = {m: k for k, m in enumerate(ranking)}

    def key(p):
        return rank.get(p["a"], len(rank)), rank.get(p["b"], len(rank))

    def named(p, sep):
        a, b = sorted((p["a"], p["b"]), key=lambda m: rank.get(m, len(rank)))
        return f"{shown(a)} {sep} {shown(b)}"

    n = pair_counts(pairs)
    lines = [f"pairs: {n['ordered']} ordered at γ, {n['equivalent']} equivalent, "
             f"{n['unresolved']} not settled yet (of {len(pairs)})"]
    eq = sorted((p for p in pairs if p["outcome"] == "equivalent"), key=key)
    if eq:
        margin = f" ±{tie_margin:g}" if tie_margin else " the tie margin"
        lines.append(f"equivalent (difference confidently within{margin}): " + "; ".join(named(p, "≈") for p in eq))
    open_ = sorted((p for p in pairs if p["outcome"] == "unresolved"), key=key)
    if open_:
        every = all(p.get("beyond_policy") for p in open_)  # said once for all of them
        head = "not settled yet (the stopping policy bought no more for them): " if every else "not settled yet: "
        lines.append(head + "; ".join(f"{named(p, 'vs')} ({settle_text(p, not every)})" for p in open_))
    return lines

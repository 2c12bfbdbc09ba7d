"""How a ranking's pairs and rank ranges are written for people (plain text; the commands print it).

Every pair has one of three outcomes (docs/metric-scale.md): ``ordered`` at γ, ``equivalent``
(the difference confidently within the tie margin δ), or ``unresolved`` — not settled *yet*, with
what settling it would cost. Nothing here says a pair cannot be settled: a full run settles every
pair whose full-task means differ.
"""

from __future__ import annotations

import math

from lm_eval_adaptive.display import shown

__all__ = ["rank_range_text", "pair_counts", "pair_lines", "settle_text", "answer_paragraph", "cost_sentence",
           "rank_theta_note", "buy_text", "left_open_text", "stop_note"]


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
        text += f"; a settle share of {p['settle_share_to_buy']:g} (--settle-share of rank or refresh) buys it"
    if p.get("budget_usd_to_buy"):
        text += f"; a cap of about ${p['budget_usd_to_buy']:g} (--budget-usd) buys it"
    return text


def buy_text(p: dict) -> str:
    """The flags that would buy an open pair, as a command line states them (``--settle-share S``, where the
    stopping policy's share gave it up; ``--budget-usd USD``, where the cap left is short); empty: none known."""
    flags = []
    if p.get("beyond_policy") and p.get("settle_share_to_buy"):
        flags.append(f"--settle-share {p['settle_share_to_buy']:g}")
    if p.get("budget_usd_to_buy"):
        flags.append(f"--budget-usd {p['budget_usd_to_buy']:g}")
    return " with ".join(flags)


def left_open_text(pairs, ranking=()) -> str:
    """What a stop line says of the pairs left open: each by name (in the order of ``ranking``), with its cost to
    settle and the flags that would buy it (:func:`buy_text`); empty when none is open."""
    rank = {m: k for k, m in enumerate(ranking)}
    open_ = [p for p in pairs or [] if p.get("outcome") == "unresolved"]
    if not open_:
        return ""
    parts = []
    for p in sorted(open_, key=lambda p: sorted((rank.get(p["a"], len(rank)), rank.get(p["b"], len(rank))))):
        a, b = sorted((p["a"], p["b"]), key=lambda m: rank.get(m, len(rank)))
        n, c = p.get("items_to_settle"), p.get("cost_to_settle_usd")
        known = isinstance(c, (int, float)) and math.isfinite(c) and isinstance(n, (int, float))
        cost = (f"${c:.4f}, about {int(n)} items" if c > 0 else f"about {int(n)} items") if known else "cost unknown"
        flags = buy_text(p)
        parts.append(f"{shown(a)} vs {shown(b)} ({cost}" + (f"; {flags} buys it" if flags else "") + ")")
    return "left open: " + "; ".join(parts)


def stop_note(report: dict) -> str:
    """What a ``rank`` report's stop line adds after a stop on cost (the policy's or the cap's): each pair left open
    with its cost and the flag that buys it, per metric with a bank per metric ("; left open: ..."; else empty)."""
    if report.get("stopped_because") not in ("cost_to_settle", "budget"):
        return ""
    blocks = report["rankings"].items() if "rankings" in report else [(None, report)]
    texts = [(k, left_open_text(b.get("pairs"), [e["model"] for e in b["ranking"]])) for k, b in blocks]
    return "".join(f"; {'' if k is None else f'on {shown(k)}, '}{t}" for k, t in texts if t)


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


def cost_sentence(spent: float, items: int, *, full_run: float | None = None, cap: float | None = None) -> str:
    """What a run cost, in one sentence: dollars, items, its share of a full run, the cap."""
    cost = f"It cost ${spent:.4f} for {items} items"
    if full_run:
        cost += f", {spent / full_run:.1%} of a full run's ${full_run:.4f}"
    if cap is not None:
        cost += f" (cap ${cap:.4g})"
    return cost + "."


def answer_paragraph(ranking, pairs, *, confidence: float, spent: float | None, items: int,
                     full_run: float | None = None, cap: float | None = None, most_named: int = 4) -> str:
    """The answer a ranking gives, in one paragraph of plain words, before any table: who is ahead and how
    sure (the leader's pairs, named), what it cost, what is left open (pairs named) and what settling it would
    cost. ``ranking``: the models in rank order; ``pairs``: the pair records (``a``, ``b``, ``outcome``, the
    cost to settle); ``confidence``: γ; ``spent`` None: no cost sentence (a several-metric run says it once,
    :func:`cost_sentence`)."""
    ranking = [str(m) for m in ranking]
    if not ranking:
        return "No model was ranked."
    rank = {m: k for k, m in enumerate(ranking)}
    level = f"{confidence:.0%}"
    first = ranking[0]

    def other(p):
        return p["b"] if p["a"] == first else p["a"]

    def names(ms):
        ms = [shown(m) for m in ms]
        return ", ".join(ms[:-1]) + " and " + ms[-1] if len(ms) > 1 else (ms[0] if ms else "")

    def ordered_pair(p):
        a, b = sorted((p["a"], p["b"]), key=lambda m: rank.get(m, len(rank)))
        return f"{shown(a)} vs {shown(b)}"

    mine = sorted((p for p in pairs or [] if first in (p["a"], p["b"])), key=lambda p: rank.get(other(p), len(rank)))
    ahead = [other(p) for p in mine if p["outcome"] == "ordered"]
    level_with = [other(p) for p in mine if p["outcome"] == "equivalent"]
    open_with = [other(p) for p in mine if p["outcome"] == "unresolved"]
    if len(ranking) == 1:
        text = [f"{shown(first)} is the only model ranked."]
    elif pairs and len(ahead) == len(ranking) - 1:
        text = [f"{shown(first)} is ahead of {shown(ahead[0])} at {level} confidence." if len(ahead) == 1 else
                f"{shown(first)} is ahead of all {len(ahead)} others, each at {level} confidence."]
    elif pairs:
        parts = [f"{shown(first)} is ranked first"]
        if ahead:
            parts.append(f"settled ahead of {names(ahead)} at {level} confidence")
        if level_with:
            parts.append(f"level with {names(level_with)}")
        if open_with:
            parts.append(f"not yet settled against {names(open_with)}")
        text = ["; ".join(parts) + "."]
    else:
        text = [f"{shown(first)} is ranked first."]
    if pairs:
        n = pair_counts(pairs)
        text.append(f"Of the {len(pairs)} pair{'s' if len(pairs) > 1 else ''}, {n['ordered']} ordered at {level} "
                    f"confidence, {n['equivalent']} settled as level, {n['unresolved']} not settled yet.")
    if spent is not None:
        text.append(cost_sentence(spent, items, full_run=full_run, cap=cap))
    open_ = sorted((p for p in pairs or [] if p["outcome"] == "unresolved"),
                   key=lambda p: sorted((rank.get(p["a"], len(rank)), rank.get(p["b"], len(rank)))))
    if open_:
        def finite(v):
            return isinstance(v, (int, float)) and math.isfinite(v)

        def need(p):
            n, c = p.get("items_to_settle"), p.get("cost_to_settle_usd")
            if finite(c) and c > 0:
                return f" (about {n} more items, ${float(c):.4f})" if finite(n) else f" (about ${float(c):.4f})"
            return f" (about {n} more items)" if finite(n) else ""

        usd = [float(p["cost_to_settle_usd"]) for p in open_ if finite(p.get("cost_to_settle_usd"))]
        more_items = [int(p["items_to_settle"]) for p in open_ if finite(p.get("items_to_settle"))]
        named = "; ".join(ordered_pair(p) + need(p) for p in open_[:most_named])
        more = f", and {len(open_) - most_named} more (listed below)" if len(open_) > most_named else ""
        many = len(open_) > 1
        if not many:  # its own figure was just given
            settle = ""
        elif usd and sum(usd) > 0:
            settle = f"; settling them pair by pair would cost about ${sum(usd):.4f} more at most (pairs share items)"
        elif more_items:
            settle = f"; settling them would take about {sum(more_items)} more items at most"
        else:
            settle = ""
        text.append(f"Left open: {named}{more}{settle}.")
    elif pairs:
        text.append("Nothing is left open.")
    return " ".join(text)


def rank_theta_note(ranking, theta: dict, metric: str) -> str | None:
    """One line when the rank column and the θ̂ column disagree (None when they agree): the rank follows
    the estimated full-task metric, which decided the pairs, and θ̂ is the bank's ability scale."""
    order = [m for m in ranking if m in theta]
    if all(theta[a] >= theta[b] for a, b in zip(order, order[1:])):
        return None
    return (f"why the rank and θ̂ disagree: the rank follows the estimated full-task {metric}, which decided the "
            f"pairs; θ̂ is the ability on the bank's scale, which weighs items differently from the task's mean")

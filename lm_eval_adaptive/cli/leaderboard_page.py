"""The leaderboard page: one static HTML file (``leaderboard render BOARD --html OUT``), and its
plot alone as a PNG (``--plot OUT.png``).

Everything the page shows is in the file: the ranking with each model's metric (a full run's
value, or an adaptive entry's estimate and 95% interval), θ̂ ± SE and its 95% interval, tie
group, items and dollars; the tie groups; the bank's id and the board's settings as one
signature line; the refreshes; and the plot of the intervals (a PNG, base64 in the page). No
script, font, style sheet or image is fetched when the page is viewed, and its
Content-Security-Policy forbids any such fetch. Model names and every other text from the
board are HTML-escaped (jinja2 autoescape), their control and bidi characters (U+202E, which
would reverse the text after it, among them) written as escapes (``\\u202e``:
:func:`~lm_eval_adaptive.display.shown`). Rows carry ``data-*`` attributes (model, rank,
interval, tie group) for checks that read the page's DOM.
"""

from __future__ import annotations

import base64
import io
from importlib import resources
from pathlib import Path

from lm_eval_adaptive import __version__
from lm_eval_adaptive.atomic import atomic_write, atomic_write_text
from lm_eval_adaptive.cli.report import group_colors, plot_intervals
from lm_eval_adaptive.display import shown
from lm_eval_adaptive.engine.signature import format_signature
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.live.leaderboard import load_leaderboard
from lm_eval_adaptive.live.pair_prose import pair_counts, rank_range_text, settle_text

__all__ = ["render_page", "write_page", "write_plot", "board_signature", "tie_groups"]

TEMPLATE = "leaderboard_page.html.j2"


def board_signature(lb: dict) -> str:
    """The board's signature line: its bank (content hash) and the settings its numbers depend on."""
    return format_signature({"bank": lb.get("bank_id", "unknown"), "task": lb["task"], "metric": lb["metric"],
                             "item_field": lb.get("item_field"), "history": lb["history"],
                             "confidence": lb.get("confidence", 0.95),
                             "format": f"{lb.get('format')}/v{lb.get('version')}"})


def tie_groups(entries) -> dict[str, list[str]]:
    """The board's tie groups: name (as stored, the group's best member) → the entries sharing it,
    each in rank order, best group first."""
    groups: dict[str, list[str]] = {}
    for e in sorted(entries, key=lambda e: e.get("rank", 0)):
        if e.get("tie_group"):
            groups.setdefault(str(e["tie_group"]), []).append(e["model"])
    return groups


def _usd(x) -> str:
    return f"${x:.4f}"


def _metric_cell(met: dict) -> tuple[str, str]:
    """(value, interval) of an entry's metric: a full run's value, or an estimate and its interval."""
    if "value" in met:
        return f"{met['value']:.4f}", "full run"
    if "estimate" in met:
        return f"{met['estimate']:.4f}", f"[{met['lower']:.4f}, {met['upper']:.4f}]"
    return "", ""


def _metric_range(met: dict) -> tuple[float, float, float]:
    """(point, lower, upper) of an entry's full-task metric (a full run's value: all three); NaN: none."""
    if "value" in met:
        v = float(met["value"])
        return v, v, v
    if "estimate" in met:
        return float(met["estimate"]), float(met["lower"]), float(met["upper"])
    nan = float("nan")
    return nan, nan, nan


def _rows(lb: dict, group_of: dict, colors: dict) -> list[dict]:
    rows = []
    for e in sorted(lb["entries"], key=lambda e: e.get("rank", 0)):
        lo, hi = e["theta_ci95"]
        value, interval = _metric_cell(e.get("metric") or {})
        point, m_lo, m_hi = _metric_range(e.get("metric") or {})
        cost = e.get("cost_usd")
        judge = e.get("judge_cost_usd") or 0.0
        full = e.get("full_run_cost_usd")
        g = group_of.get(e["model"])
        rows.append({
            "model": e["model"], "rank": e["rank"], "source": e.get("source", ""),
            "rank_range": rank_range_text(e.get("rank_range")) or str(e["rank"]),
            "metric_point": point, "metric_lo": m_lo, "metric_hi": m_hi,
            "metric_value": value, "metric_interval": interval,
            "theta": e["theta"], "se": e["se"], "lo": lo, "hi": hi,
            "theta_text": f"{e['theta']:+.3f} ± {e['se']:.3f}", "ci_text": f"[{lo:+.3f}, {hi:+.3f}]",
            "tie_group": g or "", "color": colors.get(g, ""),
            "items": e.get("items", ""),
            "usd": "" if cost is None else _usd(cost + judge),
            "usd_note": ("" if cost is None else
                         (f"of which judge {_usd(judge)}; " if judge else "") +
                         (f"full run ≈ {_usd(full)}" if full is not None else "")),
            "added": e.get("added", ""), "spec": e.get("spec", ""),
        })
    return rows


def _plot(out, lb: dict, rows: list[dict], groups: dict[str, list[str]]) -> None:
    """The full-task metric of every entry with its 95% interval (a full run: a point), labelled with
    its rank range; θ̂ where a board has no metric for an entry (written before the metric scale)."""
    on_metric = all(r["metric_point"] == r["metric_point"] for r in rows)  # no NaN
    pts = [{"model": r["model"], "theta": r["metric_point"], "lo": r["metric_lo"], "hi": r["metric_hi"],
            "label": f"{r['model']}  (rank {r['rank_range']})"} if on_metric else
           {"model": r["model"], "theta": r["theta"], "lo": r["lo"], "hi": r["hi"],
            "label": f"{r['model']}  (rank {r['rank_range']})"} for r in rows]
    plot_intervals(out, pts, list(groups.values()), title=f"{lb['task']} leaderboard ({lb['metric']})",
                   xlabel=(f"full-task {lb['metric']} (95% interval; a full run is exact)" if on_metric
                           else "ability θ (95% interval)") + "; colour = tie group")


def _plot_png(lb: dict, rows: list[dict], groups: dict[str, list[str]]) -> str:
    buf = io.BytesIO()
    _plot(buf, lb, rows, groups)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _placed(lb: dict, source: str):
    """(rows, tie groups, colours) of the board ``lb``; refused when an entry has no place."""
    unplaced = [e["model"] for e in lb["entries"] if any(k not in e for k in ("rank", "theta", "se", "theta_ci95"))]
    if unplaced:
        raise InputError(f"leaderboard entries without rank, theta, se and theta_ci95: {', '.join(unplaced)}",
                         path=source or None)
    groups = tie_groups(lb["entries"])
    group_of = {m: name for name, members in groups.items() for m in members}
    colors = dict(zip(groups, group_colors(len(groups))))
    return _rows(lb, group_of, colors), groups, colors


def _shown_value(value):
    """A value the page prints, as the page shows it: a string :func:`shown` (an already escaped
    one, such as a ``join`` of names, stays markup-safe: the escapes add no HTML); anything else
    as it is."""
    import markupsafe

    if isinstance(value, markupsafe.Markup):
        return markupsafe.Markup(shown(value))
    return shown(value) if isinstance(value, str) else value


def render_page(lb: dict, *, source: str = "") -> str:
    """The page of the leaderboard ``lb`` (a loaded board, see ``live.leaderboard``) as HTML text."""
    import jinja2

    rows, groups, colors = _placed(lb, source)
    refreshes = [{"at": r.get("at", ""), "added": r.get("added", []), "failed": r.get("failed", {}),
                  "budget": _usd(r["budget_usd"]) if r.get("budget_usd") is not None else "",
                  "spent": _usd(r["spent_usd"]) if r.get("spent_usd") is not None else "",
                  "stopped": r.get("stopped_because", ""), "confidence": r.get("confidence", "")}
                 for r in lb.get("refreshes", [])]
    spent = sum(float(r.get("spent_usd") or 0.0) for r in lb.get("refreshes", []))
    text = resources.files(__package__).joinpath(TEMPLATE).read_text(encoding="utf-8")
    # every value the page shows (names, paths, texts from the board) is shown() before jinja2
    # escapes it: control and bidi characters (U+202E would reverse what follows) as escapes
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True, finalize=_shown_value)
    return env.from_string(text).render(
        lb=lb, rows=rows, source=source, signature=board_signature(lb), version=__version__,
        groups=[{"name": name, "members": members, "color": colors[name]} for name, members in groups.items()],
        n_full=sum(r["source"] == "full_run" for r in rows), n_adaptive=sum(r["source"] == "adaptive" for r in rows),
        refreshes=refreshes, spent=_usd(spent), plot_png=_plot_png(lb, rows, groups),
        counts=pair_counts(lb.get("pairs") or []),
        open_pairs=[{"a": p["a"], "b": p["b"], "settle": settle_text(p)} for p in lb.get("pairs") or []
                    if p["outcome"] == "unresolved"])


def write_page(board, html) -> Path:
    """Render the leaderboard file ``board`` to the page ``html`` (written atomically)."""
    lb = load_leaderboard(board)
    return atomic_write_text(html, render_page(lb, source=Path(board).name))


def write_plot(board, png) -> Path:
    """The page's plot of the leaderboard file ``board`` (each model's θ̂ with its 95% interval, one
    colour per tie group) alone, written atomically to ``png``."""
    lb = load_leaderboard(board)
    rows, groups, _ = _placed(lb, Path(board).name)
    return atomic_write(png, lambda f: _plot(f, lb, rows, groups))

"""Terminal tables and plots for calibration, backtest, ranking and ``run --adaptive`` results (rich, matplotlib).

Output that is not a terminal (a pipe, a file, a captured stream) is at most :data:`PIPE_WIDTH`
(120) columns: a wider table is printed in parts that each repeat its name column
(:func:`~lm_eval_adaptive.cli.terminal.fit_table`), so no cell is cut and every model name stays whole.
On a terminal a model name that does not fit is folded onto the next line, never ellipsised.
"""

from __future__ import annotations

import math
import sys

import numpy as np
from rich.table import Table

from lm_eval_adaptive.display import shown
from lm_eval_adaptive.engine.cat.estimation import Z95
from lm_eval_adaptive.engine.evaluation.model_error import describe_correction
from lm_eval_adaptive.live.pair_prose import answer_paragraph, pair_lines, rank_range_text, rank_theta_note
from lm_eval_adaptive.cli.terminal import PIPE_WIDTH, TextConsole, text_console

__all__ = ["PIPE_WIDTH", "plot_ranking", "plot_intervals", "interval_figure", "plot_backtest", "backtest_figure", "plot_adaptive_run",
           "pooled_any_wrong", "print_backtest", "print_calibration", "print_inseparable", "print_ranking",
           "report_console", "signature_lines", "table_label", "note_on_stderr"]


def note_on_stderr(line: str) -> None:
    """Print a note for the user (a shipped bank taken without ``--bank``, …) on stderr, names shown
    escaped (:func:`~lm_eval_adaptive.display.shown`); the ``note`` the layers below are given."""
    print(shown(line, lines=True), file=sys.stderr)

def report_console(*, stderr: bool = False) -> TextConsole:
    """A rich console on stdout (or stderr) that prints text as text (no markup; control and bidi
    characters shown escaped: :class:`~lm_eval_adaptive.cli.terminal.TextConsole`): the terminal's
    width, or :data:`PIPE_WIDTH` when the stream is not a terminal."""
    return text_console(stderr=stderr)


def _calibration_note(results, s) -> str:
    """How the backtest's banks were calibrated: the continuous settings, or the binary model(s)."""
    kinds = sorted({f.get("response_model", "continuous") for r in results for f in r.folds})
    binary = [k for k in kinds if k != "continuous"]
    cont = f"calibration={s['method']}/{s['scaling']}, likelihood={s['likelihood']}"
    if not binary:
        return cont
    note = f"response model={'/'.join(binary)} (0/1 scores, marginal ML by EM)"
    return note if len(kinds) == len(binary) else f"{cont}; {note}"


def print_calibration(console, bank, out_path) -> None:
    d = bank.diagnostics
    t = Table(title=f"item bank {bank.describe()} → {out_path}", show_header=False)
    t.add_column("", style="bold")
    t.add_column("")
    t.add_row("models used", str(d.get("n_models")))
    t.add_row("items kept / in table", f"{bank.n_items} / {d.get('n_items_in')}")
    t.add_row("dropped", ", ".join(f"{k}: {v}" for k, v in d.get("dropped_by_reason", {}).items()) or "none")
    t.add_row("scaling", bank.scaling)
    if bank.model.per_item:  # 2PL/3PL: a (and c) per item
        q = np.quantile(bank.a, [0.05, 0.5, 0.95])
        t.add_row("response model", f"{bank.model.kind}: P(right) = c + (1 - c)·logistic(a·(θ - b)) per item")
        t.add_row("discrimination a per item", f"mean {bank.discrimination:.3f} (5%/50%/95%: "
                                              f"{q[0]:.2f} / {q[1]:.2f} / {q[2]:.2f})")
        t.add_row("guessing c", f"mean {float(np.mean(bank.c)):.3f}"
                  + (" (estimated)" if bank.calibration.get("guessing") == "estimated" else ""))
    else:
        t.add_row("noise k", f"{bank.k:.4f}" if bank.k is not None else "-")
        t.add_row("discrimination a = 1/√k", f"{bank.discrimination:.3f}")
    r2 = d.get("conformance_r2")
    t.add_row("conformance R² (variance model)", "-" if r2 is None or math.isnan(r2) else f"{r2:.3f}")
    t.add_row("difficulty range", f"{bank.b.min():.2f} … {bank.b.max():.2f} (median {bank.prior_mean:.2f})")
    check = d.get("self_check")
    if "self_check" in d:
        if check is None:
            t.add_row("self-check", "too few models to hold some out")
        else:
            acc = check["confident_accuracy"]
            t.add_row("self-check (models left out)",
                      f"{check['tests']} tests ({check['folds']} × {check['holdout_size']} models × {check['seeds']} "
                      f"seeds): 95% full-task intervals held {100 * check['full_task_coverage']:.0f}% of the time; "
                      f"|θ̂ − θ̂(all items)| > 1.96 SE in {100 * check['share_abs_z_over_1_96']:.0f}% (honest: 5%); "
                      f"confident pairs right {'-' if acc is None else f'{100 * acc:.0f}%'}; mean τ {check['mean_tau']:.2f}")
            c = check.get("correction") or {}
            t.add_row("correction applied", f"{describe_correction(c)} → on the same runs they hold "
                      f"{100 * check['corrected_coverage']:.0f}%, |z| > 1.96 in "
                      f"{100 * check['corrected_share_abs_z_over_1_96']:.0f}%")
    console.print(t)


def print_backtest(console, results) -> None:
    t = Table(title="Backtest: adaptive ranking vs random sampling and shared random documents (matched $) "
                    "vs fixed-length CAT (the busiest model's items per model, and matched: the adaptive items)")
    for col in ("table", "items", "models", "a", "adaptive τ", "random τ", "shared τ", "fixed τ", "fixed τ (matched)",
                "items/set",
                "% pairs", "conf. acc.", "any wrong", "ties % (true %)", "tie P/R/F1", "saved vs fixed (items/$)",
                "full-task cover", "|z|>1.96", "misfit", "s"):
        t.add_column(col, justify="right" if col != "table" else "left",
                     overflow="fold" if col == "table" else "ellipsis")
    for r in results:
        a, rd, fx, ti = r.adaptive, r.random, r.fixed, r.ties
        t.add_row(shown(r.table), str(r.n_items), str(r.n_models), f"{r.discrimination:.2f}",
                  f"{a.tau:.3f}±{a.tau_std:.2f}", f"{rd.tau:.3f}", f"{r.method('shared_random').tau:.3f}",
                  f"{fx.tau:.3f}", f"{r.method('fixed_matched').tau:.3f}",
                  f"{a.items:.0f}", f"{a.pct_used:.1f}%", _f(r.confident_accuracy), _f(r.any_wrong_share),
                  f"{ti.adaptive_pct:.0f} ({ti.truth_pct:.0f})",
                  f"{ti.precision:.2f}/{ti.recall:.2f}/{ti.f1:.2f}",
                  f"{100 * r.item_savings_vs_fixed:.0f}% / {100 * r.cost_savings_vs_fixed:.0f}%",
                  _f(r.full_task_coverage, 2), _f(r.se_calibration.get("share_abs_z_over_1_96"), 2),
                  _f(r.person_misfit_flags.get("share"), 2), f"{r.seconds:.1f}")
    if len(results) > 1:

        def m(f):
            return float(np.mean([f(r) for r in results]))

        t.add_row("mean", "", "", "", f"{m(lambda r: r.adaptive.tau):.3f}",
                  f"{m(lambda r: r.random.tau):.3f}", f"{m(lambda r: r.method('shared_random').tau):.3f}",
                  f"{m(lambda r: r.fixed.tau):.3f}", f"{m(lambda r: r.method('fixed_matched').tau):.3f}",
                  f"{m(lambda r: r.adaptive.items):.0f}", f"{m(lambda r: r.adaptive.pct_used):.1f}%",
                  _f(m(lambda r: r.confident_accuracy)), _f(pooled_any_wrong(results)), "", "", "",
                  _f(m(lambda r: r.full_task_coverage), 2),
                  _f(m(lambda r: r.se_calibration.get("share_abs_z_over_1_96", float("nan"))), 2),
                  _f(m(lambda r: r.person_misfit_flags.get("share", float("nan"))), 2), "")
    console.print(t)
    s = results[0].settings
    console.print(f"{s['folds']} folds × {s['seeds']} seeds, hold-out {s['holdout_size']} models, "
                  f"γ={s['confidence']}, ≥{s['min_items']} items/model, budget {s['target_items']} items/model "
                  f"at the mean item cost, {_calibration_note(results, s)}, "
                  f"pair rule: {'family-wise (Holm over every pair)' if s.get('family_wise') else 'per pair'}, "
                  f"prices: {', '.join(s['prices'])}")
    short = [f"{r.table}: {r.folds_run} of {s['folds']} folds" for r in results if r.folds_run < s["folds"]]
    if short:
        console.print("too few models for every fold (complete hold-out sets only): " + "; ".join(short))
    console.print("any wrong: share of runs with at least one confident pair in the wrong order (mean row: "
                  "pooled over the tables' runs; at most 1 − γ with --family-wise)", highlight=False)
    console.print("full-task cover: share of hold-out models whose 95% full-task interval holds their true "
                  "mean; |z|>1.96: share of stops whose θ̂ is further than 1.96 SE from θ̂ on every bank item "
                  "(honest: 0.05); misfit: share flagged by the person-fit statistic", highlight=False)
    # not "signature: …": the redaction reads a generic secret name before a colon as a secret and hid the line
    console.print("the signature of these figures (settings and versions; its lines joined without a break):",
                  highlight=False)
    for line in signature_lines(results[0].signature, console.width):
        console.print(line, highlight=False)


def signature_lines(signature: str, width: int) -> list[str]:
    """A ``key:value|key:value…`` signature cut before a ``|`` (or a ``+`` inside a field) into lines of
    at most ``width`` columns (a piece longer than that stays whole): joined without a break, they are
    the signature."""
    import re

    lines, cur = [], ""
    for piece in re.split(r"(?=[|+])", signature):
        if cur and len(cur) + len(piece) > width:
            lines.append(cur)
            cur = piece
        else:
            cur += piece
    return lines + [cur] if cur else lines


def pooled_any_wrong(results) -> float:
    """Share of all the results' runs with a wrongly ordered confident pair."""
    n = sum(r.counts.get("runs", 0) for r in results)
    return sum(r.counts.get("runs_any_wrong", 0) for r in results) / n if n else float("nan")


def _f(v, digits: int = 3) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def print_ranking(console, rows, result, *, metric_name: str, full_cost: float, verbose: bool = True) -> None:
    """``rows``: per model dicts with theta, se, lo, hi, est, est_lo, est_hi, items, cost, full_cost, truth?
    The answer in plain words first (:func:`~lm_eval_adaptive.live.pair_prose.answer_paragraph`); the θ̂
    columns only when ``verbose``."""
    console.print(answer_paragraph(result.ranking, result.pairs, confidence=result.confidence,
                                   spent=result.total_cost, items=result.total_items, full_run=full_cost or None,
                                   cap=result.budget), highlight=False)
    groups = {m: gi + 1 for gi, g in enumerate(result.tie_groups) for m in g}
    has_truth = any("truth" in r for r in rows)
    t = Table(title=f"Adaptive ranking (γ = {result.confidence:.2f})")
    for col in ["rank", "ranks", "model"] + (["θ̂ ± SE", "95% interval"] if verbose else []) + \
               [f"est. full-task {metric_name} [95%]"] + \
               (["full run (truth)"] if has_truth else []) + ["items", "spent $", "full run $", "tie group"]:
        t.add_column(col, justify="left" if col in ("model",) else "right",
                     overflow="fold" if col == "model" else "ellipsis")
    for i, r in enumerate(rows):
        g = groups.get(r["model"])
        t.add_row(str(i + 1), rank_range_text(result.rank_range.get(r["model"])), shown(r["model"]),
                  *([f"{r['theta']:+.2f} ± {r['se']:.2f}", f"[{r['lo']:+.2f}, {r['hi']:+.2f}]"] if verbose else []),
                  f"{r['est']:.4f} [{r['est_lo']:.4f}, {r['est_hi']:.4f}]",
                  *([f"{r['truth']:.4f}"] if has_truth else []),
                  str(r["items"]), f"{r['cost']:.4f}", f"{r['full_cost']:.4f}", f"T{g}" if g else "")
    console.print(t)
    note = rank_theta_note(result.ranking, {r["model"]: r["theta"] for r in rows}, metric_name) if verbose else None
    if note:
        console.print(note, highlight=False)
    if not result.pairs:  # the θ judgement; the metric-scale one states each pair's outcome below
        adj = "  ".join(f"P({a} > {b}) = {p:.3f}" for a, b, p in
                        zip(result.ranking, result.ranking[1:], result.adjacent_confidence))
        console.print(f"adjacent pairs: {adj}")
    if result.pairs:  # the metric-scale judgement: three outcomes per pair
        for line in pair_lines(result.pairs, result.ranking, result.signature.get("tie_margin")):
            console.print(line, highlight=False)
    elif result.tie_groups:
        console.print("ties (order not settled at γ): " +
                      "; ".join(" ≈ ".join(g) for g in result.tie_groups))
    else:
        console.print("ties: none — every adjacent pair is settled")
    print_inseparable(console, result.inseparable)
    spent = result.total_cost
    console.print(f"stopped because: {result.stopped_because}; items: {result.total_items}; "
                  f"spent ${spent:.4f} of a ${full_cost:.4f} full run "
                  f"({100 * (1 - spent / full_cost):.1f}% saved)" if full_cost > 0 else "")


def print_inseparable(console, pairs) -> None:
    """The line for adjacent pairs the θ-scale judgement's futility stop ended buying for (closer than its
    model error lets the θ scale resolve). Not settled, not unsettleable: a full run orders any pair whose
    full-task means differ, and the metric-scale judgement (the default) keeps that open."""
    if pairs:
        console.print("not settled on the θ scale (closer than the bank's model error lets θ̂ resolve; the run "
                      "stopped buying for them; a full run, or the metric-scale judgement, settles them): "
                      + "; ".join(f"{a} ≈ {b}" for a, b in pairs), highlight=False)


def group_colors(n: int) -> list[str]:
    """The colours of ``n`` tie groups as ``#rrggbb``, in order (matplotlib's colour cycle, repeated)."""
    import matplotlib
    from matplotlib.colors import to_hex

    cycle = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    return [to_hex(cycle[g % len(cycle)]) for g in range(n)]


def plot_ranking(path, rows, result, *, title: str) -> None:
    """A ranking's plot: on the metric scale (the result has pairs), each model's full-task estimate of record
    with its 95% interval, labelled with its rank range; else θ̂ with its interval. ``rows``: best first, with
    ``theta``/``lo``/``hi`` and ``est``/``est_lo``/``est_hi``."""
    if result.pairs:
        pts = [{"model": r["model"], "theta": r["est"], "lo": r["est_lo"], "hi": r["est_hi"],
                "label": f"{r['model']}  (rank {rank_range_text(result.rank_range.get(r['model'])) or '?'})"}
               for r in rows]
        plot_intervals(path, pts, result.tie_groups, title=title,
                       xlabel="full-task estimate (95% interval); colour = tie group (equivalent)")
    else:
        plot_intervals(path, rows, result.tie_groups, title=title)


def plot_intervals(path, rows, tie_groups, *, title: str, xlabel: str = "ability θ (95% interval); colour = tie group") -> None:
    """Points with 95% intervals (``rows``: model, theta (the point), lo, hi, and an optional ``label``
    drawn in place of the name; best first), one colour per
    tie group (``group_colors``; black: in no group), saved to ``path`` (a file name, its suffix
    the format, or a binary file: PNG). Model names are drawn as written (no mathtext), their control
    and bidi characters shown escaped (:func:`~lm_eval_adaptive.display.shown`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = interval_figure(plt, rows, tie_groups, title=title, xlabel=xlabel)
    # bbox_inches="tight": nothing drawn (a long label, the axis title) is cut at the figure's edge
    fig.savefig(path, dpi=120, bbox_inches="tight", pad_inches=0.1)
    plt.close(fig)


def interval_figure(plt, rows, tie_groups, *, title: str, xlabel: str):
    """The figure :func:`plot_intervals` saves (``plt``: pyplot, its backend chosen by the caller): labels at
    12 pt and the axis title wrapped at "; " so it fits under the axes however long the names are."""
    groups = {m: gi for gi, g in enumerate(tie_groups) for m in g}
    colors = group_colors(len(tie_groups))
    fig, ax = plt.subplots(figsize=(8, 0.42 * len(rows) + 1.8), layout="constrained")
    for y, r in enumerate(rows[::-1]):
        g = groups.get(r["model"])
        c = "black" if g is None else colors[g]
        ax.errorbar(r["theta"], y, xerr=[[r["theta"] - r["lo"]], [r["hi"] - r["theta"]]], fmt="o", color=c,
                    capsize=3)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([shown(r.get("label", r["model"])) for r in rows[::-1]], parse_math=False, fontsize=12)
    ax.tick_params(axis="x", labelsize=12)
    ax.set_xlabel(xlabel.replace("; ", "\n"), fontsize=12)
    ax.set_title(shown(title), parse_math=False, fontsize=13)
    ax.grid(axis="x", alpha=0.3)
    return fig


#: The colour of each method in the backtest plot (matplotlib's first three).
METHOD_COLORS = {"adaptive": "C0", "random": "C1", "shared_random": "C3", "fixed": "C2"}
METHOD_LABELS = {"adaptive": "adaptive", "random": "random (same $)",
                 "shared_random": "same random documents (same $)", "fixed": "fixed-length CAT"}


def table_label(name: str) -> str:
    """A table's name as a plot shows it: a named table as written (``wmt24/en-de/bleu``), a file by its name."""
    from pathlib import Path

    path = Path(name)
    return path.name if path.is_absolute() or path.exists() else name


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_backtest(path, results) -> None:
    """:func:`backtest_figure` saved to ``path`` (PNG)."""
    plt = _pyplot()
    fig = backtest_figure(results)
    fig.savefig(path, dpi=120)
    plt.close(fig)


#: The note under the items panel: random sampling is matched in dollars, not in items.
EQUAL_SPEND_NOTE = ("random and same random documents (same $) spend the adaptive run's dollars, not its items: "
                    "they buy items of every model at their own price, so their count differs where prices differ")


def backtest_figure(results):
    """Per table, Kendall τ of adaptive ranking, random sampling and shared random documents (same $) and
    fixed-length CAT (mean, error
    bar ± its SD over folds × seeds, cut at τ's range [-1, 1]) and the items each spent per hold-out set,
    with :data:`EQUAL_SPEND_NOTE`; a matplotlib figure."""
    plt = _pyplot()
    methods = ("adaptive", "random", "shared_random", "fixed")
    n = len(results)
    fig, (ax_tau, ax_items) = plt.subplots(1, 2, figsize=(11, 0.55 * n * len(methods) + 2.6), sharey=True,
                                           gridspec_kw={"width_ratios": [3, 2]})
    offsets = {"adaptive": 0.3, "random": 0.1, "shared_random": -0.1, "fixed": -0.3}
    lowest = 0.0
    for row, r in enumerate(results[::-1]):
        for meth in methods:
            m = r.method(meth)
            y = row + offsets[meth]
            sd = 0.0 if math.isnan(m.tau_std) else m.tau_std
            lo, hi = max(-1.0, m.tau - sd), min(1.0, m.tau + sd)  # τ lies in [-1, 1]: so does its bar
            lowest = min(lowest, lo)
            ax_tau.errorbar(m.tau, y, xerr=[[m.tau - lo], [hi - m.tau]], fmt="o", capsize=3,
                            color=METHOD_COLORS[meth], label=METHOD_LABELS[meth] if row == 0 else None)
            ax_items.barh(y, m.items, height=0.18, color=METHOD_COLORS[meth])
            ax_items.text(m.items, y, f" {m.items:.0f}", va="center", fontsize=8)
    labels = [shown(table_label(r.table)) for r in results[::-1]]
    ax_tau.set_yticks(range(n))
    ax_tau.set_yticklabels(labels, parse_math=False)
    ax_tau.set_ylim(-0.6, n - 0.4)
    ax_tau.set_xlim(max(-1.03, lowest - 0.05), 1.03)  # a cap at ±1 stays visible
    ax_tau.set_xlabel("Kendall τ against the full-data ranking (mean ± SD over folds × seeds, within [-1, 1])")
    ax_tau.axvline(0, color="grey", lw=0.5)
    ax_tau.grid(axis="x", alpha=0.3)
    ax_tau.legend(loc="lower left", fontsize=8)
    s = results[0].settings
    ax_items.set_xlabel(f"items per hold-out set of {s['holdout_size']} models")
    ax_items.grid(axis="x", alpha=0.3)
    ax_items.set_xlim(0, 1.15 * max(r.method(m).items for r in results for m in methods) or 1)
    fig.suptitle(f"Backtest: {s['folds']} folds × {s['seeds']} seeds, γ = {s['confidence']}, budget "
                 f"{s['target_items']} items/model at the mean item cost", fontsize=10)
    fig.text(0.99, 0.005, EQUAL_SPEND_NOTE, ha="right", va="bottom", fontsize=7, color="dimgray", wrap=True)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig


def plot_adaptive_run(path, blocks: dict, *, title: str = "") -> None:
    """θ̂ and its 95% interval as documents accrued, one panel per task (``blocks``: task → the
    ``adaptive`` block of ``run --adaptive``'s results, with its ``trajectory``); saved to ``path`` (PNG)."""
    plt = _pyplot()
    tasks = list(blocks)
    fig, axes = plt.subplots(max(1, len(tasks)), 1, figsize=(8, 3.2 * max(1, len(tasks))), squeeze=False)
    for ax, task in zip(axes[:, 0], tasks):
        b = blocks[task]
        tr = b.get("trajectory") or {}
        theta = [float(x) for x in tr.get("theta", [])]
        se = [float(x) for x in tr.get("se", [])]
        est = b.get("metric_estimate") or {}
        ax.set_title(shown(f"{task}: {b.get('metric')} ≈ {est.get('estimate', float('nan')):.4f} "
                     f"[{est.get('lower', float('nan')):.4f}, {est.get('upper', float('nan')):.4f}] from "
                     f"{b.get('items')} of {b.get('task_docs')} documents; stopped: {b.get('stopped_because')}"),
                     fontsize=9, loc="left", parse_math=False)
        if not theta:
            ax.text(0.5, 0.5, "no document was given", ha="center", va="center", transform=ax.transAxes)
            continue
        x = list(range(1, len(theta) + 1))
        lo = [t - Z95 * e for t, e in zip(theta, se)]
        hi = [t + Z95 * e for t, e in zip(theta, se)]
        ax.fill_between(x, lo, hi, color="C0", alpha=0.25, lw=0, label="95% interval (θ̂ ± 1.96 SE)")
        ax.plot(x, theta, color="C0", marker="." if len(x) <= 60 else None, label="θ̂")
        ax.axhline(theta[-1], color="grey", lw=0.6, ls="--")
        ax.set_xlim(0.5, len(x) + 0.5)
        ax.set_xlabel("documents given")
        ax.set_ylabel("ability θ")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right", fontsize=8)
    if title:
        fig.suptitle(shown(title), fontsize=10, parse_math=False)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)

"""What the live commands (``rank``, ``refresh``, their dry runs, ``run --adaptive --dry-run``) print
while they run: the plan, the progress table or lines, a changed cap, the cost forecast and the
leaderboard. The computations are in :mod:`lm_eval_adaptive.live`; this module only draws them.
"""

from __future__ import annotations

from lm_eval_adaptive.cli.terminal import styled
from lm_eval_adaptive.display import shown
from lm_eval_adaptive.harness.lm_eval_compat import harness_bars_off
from lm_eval_adaptive.live.cost_forecast import TOLERANCE, CostForecast, Spread
from lm_eval_adaptive.live.pair_prose import pair_lines, rank_range_text, rank_theta_note
from lm_eval_adaptive.live.session import LiveSettings, cap_text

__all__ = ["announce", "note_default_prices", "LiveProgress", "print_cap_change", "print_forecast", "stop_rule",
           "print_forecast_written", "print_leaderboard"]


def announce(console, setup, a: LiveSettings) -> None:
    bank = setup.bank
    banks = (f"banks {setup.bank_ids}, {len(setup.item_ids)} items they share, metrics {setup.metric_label}: "
             "one generation per document, every metric scored" if setup.joint else
             f"bank {bank.bank_id}, {bank.n_items} items, metric {setup.metric}")
    console.print(styled("lm-eval-adaptive rank", "bold", f": {len(setup.specs)} models on {setup.task_name} "
                  f"({setup.n_docs} documents; {banks}); γ = {a.confidence}, cap "
                  + (f"${a.budget_usd:g}" if a.budget_usd is not None else "none")
                  + f", {a.concurrency} call(s) in flight per model"))
    for s in setup.specs:
        p = setup.prices[s.name]
        console.print(f"  {s.name}: {s.type}:{s.model_id}, ${p.input_per_mtok:g}/${p.output_per_mtok:g} per M tokens "
                      f"({p.source}); full run ≈ ${setup.full_cost[s.name]:.4f}")
    note_default_prices(console, setup.priced_by_default, setup.prices, setup.judges.prices)


def note_default_prices(console, names, *price_maps) -> None:
    """One line naming the models priced by ``--price default`` (nothing when there are none)."""
    if not names:
        return
    prices = {k: v for m in price_maps for k, v in m.items()}
    p = prices[names[0]]
    console.print(f"priced by the default ${p.input_per_mtok:g}/${p.output_per_mtok:g} per M tokens ({p.source}), "
                  f"not a known price: {', '.join(names)}", highlight=False)


class LiveProgress:
    """Live table on stderr: items and dollars per model called (a refresh's new models, not its anchors),
    θ̂ ± SE, calls in flight, failures; while it is open the harness draws none of its own bars (:func:`~lm_eval_adaptive.harness.lm_eval_compat.harness_bars_off`:
    ``TQDM_DISABLE`` alone misses a tqdm imported before it was set)."""

    def __init__(self, console, live, setup, *, enabled: bool, every: int = 25):
        self.console, self.live_run, self.setup = console, live, setup
        self.enabled = enabled and console.is_terminal
        self.lines = enabled and not console.is_terminal  # logs, pipes: a plain line now and then
        self.every, self._next_line = every, every
        self._live = None
        self._bars_off = None
        #: the models this run calls (a refresh's anchors are never called: not counted, not shown)
        self.called = [s.name for s in setup.specs]

    def _table(self):
        from rich.table import Table

        r, led, setup = self.live_run.ranker, self.setup.ledger, self.setup
        t = Table(title=f"spent ${led.spent:.4f}" + (f" of ${led.cap:g}" if led.cap is not None else "")
                  + f", reserved ${led.reserved:.4f}, retries {self.live_run.retries}")
        thetas = [f"θ̂ ± SE ({shown(k)})" for k in setup.metrics] if setup.joint else ["θ̂ ± SE"]
        for c in ("model", "items", "in flight", *thetas, "$", "failed calls"):
            t.add_column(c, justify="left" if c == "model" else "right",
                         overflow="fold" if c == "model" else "ellipsis")
        for m in self.called:
            e = r.examinees[m]
            parts = [r.metric_examinees(k)[m] for k in setup.metrics] if setup.joint else [e]
            t.add_row(shown(m) + (" (failed)" if m in r.failed else ""), str(e.n), str(r.in_flight(m)),
                      *[f"{p.theta:+.2f} ± {p.se:.2f}" for p in parts], f"{e.spent:.4f}",
                      str(self.live_run.failed_calls[m]))
        return t

    def __enter__(self):
        self._bars_off = harness_bars_off()
        self._bars_off.__enter__()
        if self.enabled:
            from rich.live import Live

            self._live = Live(self._table(), console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def update(self, _live_run) -> None:
        if self._live is not None:
            self._live.update(self._table())
        elif self.lines:
            r = self.live_run.ranker
            called = self.called
            n = sum(r.examinees[m].n for m in called)
            if n >= self._next_line:
                self._next_line = n + self.every
                per = ", ".join(f"{m} {r.examinees[m].n} (${r.examinees[m].spent:.4f})" for m in called)
                self.console.print(f"{n} items, ${self.setup.ledger.spent:.4f} spent: {per}", highlight=False)

    def __exit__(self, *exc):
        try:
            if self._live is not None:
                self._live.update(self._table())
                self._live.__exit__(*exc)
        finally:
            self._bars_off.__exit__(*exc)


def print_cap_change(console, change, ledger) -> None:
    """The line for a cap changed on resume (``change``: (old, new) from
    :func:`~lm_eval_adaptive.live.session.journal_cap_change`; nothing when None)."""
    if change is None:
        return
    old, new = change
    console.print(f"cap changed: {cap_text(old)} → {cap_text(new)} (journaled); ${ledger.spent:.4f} already spent",
                  highlight=False)


def print_price_change(console, changes) -> None:
    """The line for prices changed on resume and stated with ``--new-prices`` (nothing when none changed)."""
    if changes:
        console.print("prices changed (--new-prices; journaled): " + "; ".join(changes), highlight=False)


# ------------------------------------------------------------------------ cost forecast
def stop_rule(se_target, ci_width) -> str:
    """The stopping rule of a ``run --adaptive`` task as its summary and its forecast name it: ``ci_width=W``
    (``--ci-width``, which replaces the SE target), else ``se_target=SE``."""
    return f"ci_width={ci_width}" if ci_width is not None else f"se_target={se_target}"


def print_forecast(console, fc: CostForecast) -> None:
    """The forecast as a table (one row per model, and the total), and how it was made."""
    from rich.table import Table

    per_task = fc.command == "run --adaptive"
    cap = f", cap ${fc.budget_usd:g}" + (" per task" if per_task else "") if fc.budget_usd is not None else ""
    t = Table(title=f"cost forecast of {fc.command} (dry run: no call made{cap})")
    cols = ["model"] + (["task"] if per_task else []) + ["price $/M in, out", "items typical [10-90%]",
                                                         "$ typical [10-90%]", "worst items", "worst $", "full run $"]
    for c in cols:
        t.add_column(c, justify="left" if c in ("model", "task") else "right")

    def spread(s: Spread, fmt: str) -> str:
        return f"{s.typical:{fmt}} [{s.low:{fmt}}, {s.high:{fmt}}]"

    for r in fc.rows:
        t.add_row(shown(r.model), *([shown(r.task)] if per_task else []),
                  f"{r.price.input_per_mtok:g}, {r.price.output_per_mtok:g}", spread(r.items, ".0f"),
                  spread(r.usd, ".4f"), str(r.worst_items), f"{r.worst_usd:.4f}", f"{r.full_run_usd:.4f}")
    t.add_row("total", *([""] if per_task else []), "", spread(fc.items, ".0f"), spread(fc.usd, ".4f"),
              str(fc.worst_items), f"{fc.worst_usd:.4f}", f"{fc.full_run_usd:.4f}", style="bold")
    console.print(t)
    if per_task and fc.settings:  # the settings the simulated runs stopped by, as the real run's summary names them
        st = fc.settings
        console.print(f"settings per task: stop at {stop_rule(st.get('se_target'), st.get('ci_width'))}, "
                      f"min_items={st.get('min_items')}, max_items={st.get('max_items')}, "
                      f"budget_usd={st.get('budget_usd_per_task')}, batch_size={st.get('batch_size')}", highlight=False)
    stops = ", ".join(f"{k} {v}" for k, v in sorted(fc.stopped_because.items(), key=lambda kv: -kv[1]))
    bound = ("the cap" if fc.budget_usd is not None and not per_task and fc.bound_usd >= fc.budget_usd
             else f"${fc.bound_usd:.4f}")
    if fc.settings.get("anytime"):  # rank --anytime: which ranker, on which documents (live/bank_free_forecast.py)
        console.print(f"simulated: the anytime-valid ranker (--anytime) with its stopping policy, on the "
                      f"{fc.settings.get('documents')} documents the bank covers (the task has "
                      f"{fc.settings.get('task_documents')}), the bank's response model giving the scores.",
                      highlight=False)
    console.print(f"typical: {fc.draws} runs simulated on bank {fc.bank_id} (abilities: {fc.abilities}; the runs "
                  f"ended: {stops}). The typical runs are those within {TOLERANCE:.0%} of the total most runs come "
                  f"within {TOLERANCE:.0%} of; every typical figure, the total's and each row's, is the median of "
                  f"those runs (so no row's is above the total's), and {fc.usd.share_within:.0%} of all runs come "
                  f"within {TOLERANCE:.0%} of the typical total; [10-90%]: the range of all runs. "
                  "Items at the bank's token counts (input: at least the prompt's characters / 4) and the prices. "
                  "Worst case: the most items the settings allow, the dearest first, at those costs"
                  + (", capped by the budget" if fc.budget_usd is not None else "") + " and never above a full "
                  "run. Every call is reserved at its upper estimate (prompt + max output tokens, and any judge's "
                  f"allowance): the run cannot spend past {bound}. Judge calls are in that bound only.",
                  highlight=False)
    if fc.full_run_usd > 0:
        console.print(f"expected ${fc.usd.typical:.4f} ({100 * fc.usd.typical / fc.full_run_usd:.1f}% of a full run's "
                      f"${fc.full_run_usd:.4f}); worst case ${fc.worst_usd:.4f}", highlight=False)


def print_forecast_written(console, path) -> None:
    """Where the forecast was written (nothing when it was not)."""
    if path is not None:
        console.print(f"forecast written to {path}", highlight=False)


# ------------------------------------------------------------------------ leaderboard
def print_leaderboard(console, lb, added, failed, *, verbose: bool = False) -> None:
    """The board as a table: the metric's value or estimate first; the ability scale (θ̂ ± SE, and why
    the rank may disagree with it) only when ``verbose``."""
    from rich.table import Table

    t = Table(title=f"{lb['task']} leaderboard ({lb['metric']})")
    cols = ("rank", "ranks", "model", "source", f"{lb['metric']} [95%]", "items", "tie group") + (("θ ± SE",) if verbose else ())
    for c in cols:
        t.add_column(c, justify="left" if c in ("model", "source") else "right",
                     overflow="fold" if c in ("model", "tie group") else "ellipsis")
    for e in lb["entries"]:
        met = e.get("metric") or {}
        val = (f"{met['value']:.4f}" if "value" in met else
               f"{met['estimate']:.4f} [{met['lower']:.4f}, {met['upper']:.4f}]" if "estimate" in met else "")
        style = "bold green" if e["model"] in added else None
        theta = (f"{e['theta']:+.3f} ± {e['se']:.3f}",) if verbose else ()
        t.add_row(str(e["rank"]), rank_range_text(e.get("rank_range")), shown(e["model"]), e.get("source", ""), val,
                  str(e.get("items", "")), str(e.get("tie_group") or ""), *theta, style=style)
    console.print(t)
    note = rank_theta_note([e["model"] for e in lb["entries"]],
                           {e["model"]: e["theta"] for e in lb["entries"] if "theta" in e},
                           lb["metric"]) if verbose else None
    if note:
        console.print(note, highlight=False)
    for m, why in failed.items():
        console.print(styled("failed", "red", f": {m}: {why} (not entered)"))
    for line in pair_lines(lb.get("pairs") or [], [e["model"] for e in lb["entries"]], lb.get("tie_margin")):
        console.print(line, highlight=False)

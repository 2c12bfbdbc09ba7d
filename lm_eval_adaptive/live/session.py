"""One live session, shared by ``rank`` and ``refresh``: settings checked, models, prices, scorers, ledger, run folder, progress and report.

A session is built from the command's settings and an item bank. It resolves each model's
price once, builds one harness document scorer per model, and owns the dollar ledger; the
live driver (:mod:`lm_eval_adaptive.live.driver`) asks it what a call may cost at most, what
it cost, and how a raw metric value maps into the bank's [0, 1] scale.
"""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path

import numpy as np

from lm_eval_adaptive.data.price_map import price_for
from lm_eval_adaptive.data.prices import Price, actual_cost, upper_estimate
from lm_eval_adaptive.engine.cat import full_task_estimate
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness.scorer import (
    HarnessItemScorer,
    HarnessTask,
    parse_model_spec,
)
from lm_eval_adaptive.live.journal import JOURNAL_NAME, Journal, env_secrets
from lm_eval_adaptive.live.ledger import BudgetLedger

__all__ = ["Setup", "RUN_FILE", "RANKING_FILE", "PLOT_FILE", "RUN_KEYS", "parse_prices", "price_of",
           "check_settings", "quiet_libraries", "open_run", "announce", "LiveProgress",
           "model_rows", "build_report"]

log = logging.getLogger("lm_eval_adaptive")

RUN_FILE = "run.json"
RANKING_FILE = "ranking.json"
PLOT_FILE = "ranking.png"

# settings a resumed run takes from run.json (the rest of the command line is ignored)
RUN_KEYS = ("models", "tasks", "bank", "confidence", "budget_usd", "min_items", "max_items", "concurrency",
            "price", "metric", "item_field", "include_path", "num_fewshot", "apply_chat_template",
            "fewshot_as_multiturn", "gen_kwargs", "system_instruction", "seed", "metadata")


def parse_prices(specs) -> dict:

    out = {}
    for s in specs or []:
        name, sep, vals = s.rpartition("=")
        try:
            if not sep or not name:
                raise ValueError
            i, o = (float(x) for x in vals.split(","))
            out[name] = Price.per_million(i, o, source="--price")
        except ValueError:
            raise InputError(f"--price {s!r}: expected MODEL=IN,OUT (USD per million input,output tokens)") from None
    return out


def price_of(spec, overrides: dict):
    """The model's price: --price, else litellm's map (its id, without a provider prefix, or a known system)."""

    for key in (spec.name, spec.model_id):
        if key in overrides:
            return overrides[key]
    mid = spec.model_id
    cands = [mid, mid.split("/", 1)[1] if "/" in mid else None, spec.name]
    for c in filter(None, cands):
        try:
            return price_for(c, default=None)
        except InputError:
            continue
    raise InputError(f"no known price for model {spec.name!r} ({spec.type}:{mid}) in litellm's price map; "
                     f"give one with --price {spec.name}=IN,OUT (USD per million input,output tokens)")


def check_settings(a) -> None:
    if not a.models or len(a.models) < 2:
        raise InputError("--models needs at least 2 model specs")
    if not a.tasks:
        raise InputError("--tasks: name the harness task to rank on")
    if "," in a.tasks:
        raise InputError(f"--tasks {a.tasks!r}: rank runs on one task at a time")
    if not a.bank:
        raise InputError("--bank: the task's item bank is needed (build one with lm-eval-adaptive calibrate)")
    if not (0.5 < a.confidence < 1):
        raise InputError(f"--confidence must be in (0.5, 1), got {a.confidence}")
    if a.budget_usd is not None and not (a.budget_usd > 0 and math.isfinite(a.budget_usd)):
        raise InputError(f"--budget-usd must be a positive number, got {a.budget_usd}")
    if a.concurrency < 1:
        raise InputError("--concurrency must be at least 1")
    if a.min_items < 1:
        raise InputError("--min-items must be at least 1")
    if a.max_items is not None and a.max_items < a.min_items:
        raise InputError("--max-items must be at least --min-items")


class Setup:
    """Everything a live run needs, built from the settings (shared by rank and refresh)."""

    def __init__(self, a, bank, *, anchors=None):

        os.environ.setdefault("TQDM_DISABLE", "1")  # the harness's per-call progress bars
        quiet_libraries()
        self.bank = bank
        self.specs = [parse_model_spec(s) for s in a.models]
        names = [s.name for s in self.specs]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise InputError(f"--models: the name(s) {dup} appear twice; name them NAME=TYPE:ARGS")
        clash = sorted(set(names) & set(anchors or ()))
        if clash:
            raise InputError(f"model(s) {clash} are already on the leaderboard")
        overrides = parse_prices(a.price)
        self.prices = {s.name: price_of(s, overrides) for s in self.specs}
        metadata = json.loads(a.metadata) if a.metadata else None
        self.task = HarnessTask(a.tasks, include_path=a.include_path, num_fewshot=a.num_fewshot,
                                gen_kwargs=a.gen_kwargs, apply_chat_template=a.apply_chat_template,
                                fewshot_as_multiturn=a.fewshot_as_multiturn,
                                system_instruction=a.system_instruction, metadata=metadata,
                                item_field=a.item_field)
        self.scorers = {s.name: HarnessItemScorer(s, self.task, bank, metric=a.metric) for s in self.specs}
        first = next(iter(self.scorers.values()))
        self.task_name, self.metric, self.n_docs = first.task_name, first.metric, first.n_docs
        self.ledger = BudgetLedger(a.budget_usd)
        self.bank_costs = {m: self.prices[m].item_costs(bank.input_tokens, bank.output_tokens) for m in names}
        self.full_cost = {m: float(np.mean(c)) * self.n_docs for m, c in self.bank_costs.items()}
        self._upper = {}

    def upper_cost(self, model: str, item_id: str) -> float:

        inp, out = self.scorers[model].upper_tokens(item_id)
        return upper_estimate(self.prices[model], inp, out)

    def actual_cost(self, model: str, score) -> float:

        if not score.usage:
            if score.calls == 0:
                return 0.0
        return float(sum(actual_cost(self.prices[model], u) for u in score.usage))

    def scale(self, item: int, raw: float) -> float:
        return float(self.bank.scale(item, raw))


def quiet_libraries() -> None:
    for name in ("lm_eval", "LiteLLM", "litellm", "httpx", "urllib3"):
        lg = logging.getLogger(name)
        if lg.level < logging.ERROR:
            lg.setLevel(logging.CRITICAL)
    try:
        import litellm

        litellm.suppress_debug_info = True
    except ImportError:  # pragma: no cover
        pass




def open_run(args, keys=RUN_KEYS, *, command: str = "rank", required: bool = True):
    """(output dir, journal or None, resumed?); with --resume the settings come from run.json."""

    if args.resume:
        d = Path(args.resume)
        run_file = d / RUN_FILE
        if not run_file.is_file():
            raise InputError("no run to resume here (run.json is missing)", path=str(d))
        try:
            saved_run = json.loads(run_file.read_text())
            saved = saved_run["settings"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise InputError(f"unreadable run settings ({e})", path=str(run_file)) from None
        if saved_run.get("command", "rank") != command:
            raise InputError(f"this is a {saved_run.get('command')!r} run; resume it with that command",
                             path=str(run_file))
        for k in keys:
            if k in saved:
                setattr(args, k, saved[k])
        if not (d / JOURNAL_NAME).is_file():
            raise InputError("no journal to resume (journal.jsonl is missing)", path=str(d))
        return d, Journal.open(d, secrets=env_secrets()), True
    if not args.output:
        if not required:
            return None, None, False
        raise InputError("--output DIR is needed (the journal, settings and results go there)")
    d = Path(args.output)
    if (d / JOURNAL_NAME).exists():
        raise InputError(f"a run already exists in {d}; continue it with --resume {d} or choose another --output")
    d.mkdir(parents=True, exist_ok=True)
    return d, None, False


def announce(console, setup, a) -> None:
    bank = setup.bank
    console.print(f"[bold]lm-eval-adaptive rank[/]: {len(setup.specs)} models on {setup.task_name} "
                  f"({setup.n_docs} documents; bank {bank.bank_id}, {bank.n_items} items, metric {setup.metric}); "
                  f"γ = {a.confidence}, cap " + (f"${a.budget_usd:g}" if a.budget_usd is not None else "none") +
                  f", {a.concurrency} call(s) in flight per model")
    for s in setup.specs:
        p = setup.prices[s.name]
        console.print(f"  {s.name}: {s.type}:{s.model_id}, ${p.input_per_mtok:g}/${p.output_per_mtok:g} per M tokens "
                      f"({p.source}); full run ≈ ${setup.full_cost[s.name]:.4f}")


class LiveProgress:
    """Live table on stderr: items and dollars per model, θ̂ ± SE, calls in flight, failures."""

    def __init__(self, console, live, setup, *, enabled: bool, every: int = 25):
        self.console, self.live_run, self.setup = console, live, setup
        self.enabled = enabled and console.is_terminal
        self.lines = enabled and not console.is_terminal  # logs, pipes: a plain line now and then
        self.every, self._next_line = every, every
        self._live = None

    def _table(self):
        from rich.table import Table

        r, led = self.live_run.ranker, self.setup.ledger
        t = Table(title=f"spent ${led.spent:.4f}" + (f" of ${led.cap:g}" if led.cap is not None else "")
                  + f", reserved ${led.reserved:.4f}, retries {self.live_run.retries}")
        for c in ("model", "items", "in flight", "θ̂ ± SE", "$", "failed calls"):
            t.add_column(c, justify="left" if c == "model" else "right")
        for m in r.models:
            e = r.examinees[m]
            t.add_row(m + (" (failed)" if m in r.failed else ""), str(e.n), str(r.in_flight(m)),
                      f"{e.theta:+.2f} ± {e.se:.2f}", f"{e.spent:.4f}", str(self.live_run.failed_calls[m]))
        return t

    def __enter__(self):
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
            n = sum(e.n for e in r.examinees.values())
            if n >= self._next_line:
                self._next_line = n + self.every
                per = ", ".join(f"{m} {r.examinees[m].n} (${r.examinees[m].spent:.4f})" for m in r.models)
                self.console.print(f"{n} items, ${self.setup.ledger.spent:.4f} spent: {per}", highlight=False)

    def __exit__(self, *exc):
        if self._live is not None:
            self._live.update(self._table())
            self._live.__exit__(*exc)


# ----------------------------------------------------------------------------- report
def model_rows(live, setup, models) -> list[dict]:

    r = live.ranker
    z = 1.959963984540054
    rows = []
    for m in models:
        e = r.examinees[m]
        items, raw = live.raw_scores(m)
        est = full_task_estimate(setup.bank, items, raw, e.theta, e.se)
        rows.append({"model": m, "theta": e.theta, "se": e.se, "lo": e.theta - z * e.se, "hi": e.theta + z * e.se,
                     "est": est["estimate"], "est_lo": est["lower"], "est_hi": est["upper"], "items": e.n,
                     "cost": e.spent, "full_cost": setup.full_cost[m]})
    return rows


def build_report(live, setup, a, *, command: str) -> dict:
    res = live.ranker.result()
    rows = model_rows(live, setup, res.ranking)
    failed_rows = model_rows(live, setup, list(res.failed)) if res.failed else []
    d = res.to_dict()
    by = {r["model"]: r for r in rows}
    for entry in d["ranking"]:
        r = by[entry["model"]]
        entry["theta_ci95"] = [r["lo"], r["hi"]]
        entry["metric_estimate"] = {"estimate": r["est"], "lower": r["est_lo"], "upper": r["est_hi"],
                                    "level": 0.95, "metric": setup.metric}
        entry["full_run_cost_usd"] = r["full_cost"]
        entry["price"] = {"input_per_mtok": setup.prices[entry["model"]].input_per_mtok,
                          "output_per_mtok": setup.prices[entry["model"]].output_per_mtok,
                          "source": setup.prices[entry["model"]].source}
    snap = setup.ledger.snapshot()
    d.update({
        "command": command,
        "task": setup.task_name, "metric": setup.metric, "task_docs": setup.n_docs,
        "bank_id": setup.bank.bank_id,
        "stopped_because": "interrupted" if live.interrupted else d["stopped_because"],
        "total_cost_usd": snap["spent"], "budget_usd": a.budget_usd,
        "full_run_cost_usd": float(sum(setup.full_cost[m] for m in live.ranker.models)),
        "failed": [{"model": m, "error": why, "items": res.items[m], "cost_usd": res.cost[m]}
                   for m, why in res.failed.items()],
        "calls": {"attempts": live.attempts, "retries": live.retries,
                  "failed_items": int(sum(live.failed_calls.values())),
                  "lost_in_flight": [{"model": m, "item_id": i, "charged_usd": u} for m, i, u in live.lost_in_flight]},
        "ledger": {k: snap[k] for k in ("spent", "reserved", "n_settled", "n_refused", "overshoot_usd")},
        "settings": {"confidence": a.confidence, "min_items": a.min_items, "max_items": a.max_items,
                     "concurrency": a.concurrency, "seed": a.seed},
        "rows": rows + failed_rows,
    })
    return d

"""``lm-eval-adaptive rank``: rank harness models live, to a stated confidence, under a hard dollar cap.

Each model (``--models TYPE:ARGS …``, the harness's ``--model``/``--model_args``) gets its own
harness LM and task object (:mod:`lm_eval_adaptive.task_wrapper`); the engine's
multi-model ranker picks items, :class:`~lm_eval_adaptive.live.LiveRun` runs every model's
calls at once, each charged at litellm's price for the usage the provider returns.

Files in ``--output DIR``:

* ``run.json``: the run's settings (what ``--resume DIR`` rebuilds the run from; secrets redacted);
* ``journal.jsonl``: every request, score, failure and stop, fsynced (see :mod:`.journal`);
* ``ranking.json`` and ``ranking.png``: the result (written atomically at the end, also after
  Ctrl-C, with ``stopped_because: "interrupted"``).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
from pathlib import Path

import numpy as np

from .errors import InputError

__all__ = ["add_rank_parser", "cmd_rank", "RUN_FILE", "RANKING_FILE"]

log = logging.getLogger("lm_eval_adaptive")

RUN_FILE = "run.json"
RANKING_FILE = "ranking.json"
PLOT_FILE = "ranking.png"

# settings a resumed run takes from run.json (the rest of the command line is ignored)
_RUN_KEYS = ("models", "tasks", "bank", "confidence", "budget_usd", "min_items", "max_items", "concurrency",
             "price", "metric", "item_field", "include_path", "num_fewshot", "apply_chat_template",
             "fewshot_as_multiturn", "gen_kwargs", "system_instruction", "seed", "metadata")


def add_task_arguments(p: argparse.ArgumentParser) -> None:
    """The harness's task arguments, spelled as ``lm-eval run`` spells them."""
    g = p.add_argument_group("harness task arguments (as in lm-eval run)")
    g.add_argument("--include_path", default=None, metavar="DIR", help="extra folder of task YAMLs")
    g.add_argument("--num_fewshot", type=int, default=None, metavar="N")
    g.add_argument("--apply_chat_template", action="store_true", help="format prompts with the chat template")
    g.add_argument("--fewshot_as_multiturn", action="store_true")
    g.add_argument("--gen_kwargs", default=None, metavar="K=V,…", help="generation kwargs, e.g. max_gen_toks=256")
    g.add_argument("--system_instruction", default=None)
    g.add_argument("--metadata", default=None, metavar="JSON", help="task metadata (JSON), as in lm-eval run")


def add_live_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("live calls")
    g.add_argument("--concurrency", type=int, default=1, metavar="K",
                   help="calls in flight per model (default 1: each item chosen after the last score); "
                        "every model is in flight at once")
    g.add_argument("--price", action="append", default=[], metavar="MODEL=IN,OUT",
                   help="USD per million input,output tokens for MODEL (repeatable); needed for models "
                        "litellm's price map does not know")
    g.add_argument("--metric", default=None, help="per-document metric (default: the bank's)")
    g.add_argument("--item-field", default=None, metavar="FIELD",
                   help="document field that holds the bank's item ids (default: the harness doc_id)")
    g.add_argument("--max-attempts", type=int, default=6, metavar="N",
                   help="attempts per call for 429/5xx/timeouts/dropped connections (backoff with jitter)")
    g.add_argument("--max-failures", type=int, default=3, metavar="N",
                   help="a model whose calls fail N times in a row is dropped and reported as failed")
    g.add_argument("--backoff", type=float, default=0.5, metavar="S", help="base backoff in seconds")
    g.add_argument("--no-progress", action="store_true", help="no live progress table")


def add_rank_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("rank", help="rank harness models live under a hard dollar cap (ties reported as ties)")
    p.add_argument("--models", nargs="+", metavar="SPEC",
                   help="harness models as TYPE:ARGS, e.g. litellm:model=gpt-4o-mini "
                        "(optionally NAME=TYPE:ARGS)")
    p.add_argument("--tasks", metavar="TASK", help="the harness task to rank on (one)")
    p.add_argument("--bank", metavar="BANK.json", help="item bank of the task (lm-eval-adaptive calibrate)")
    p.add_argument("--confidence", type=float, default=0.95, help="γ for settling a pair (default 0.95)")
    p.add_argument("--budget-usd", type=float, default=None, metavar="USD",
                   help="hard cap on total spend (reserved before each call, settled with real usage)")
    p.add_argument("--min-items", type=int, default=10, help="warm-up items per model (default 10)")
    p.add_argument("--max-items", type=int, default=None, help="maximum items per model")
    p.add_argument("--output", metavar="DIR", help="folder for run.json, journal.jsonl, ranking.json/png")
    p.add_argument("--resume", metavar="DIR", default=None,
                   help="continue the run in DIR (crashed or interrupted): nothing is requested or paid twice")
    p.add_argument("--seed", type=int, default=0)
    add_task_arguments(p)
    add_live_arguments(p)
    p.set_defaults(func=cmd_rank)
    return p


# ----------------------------------------------------------------------------- setup
def parse_prices(specs) -> dict:
    from .costs import Price

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
    from .costs import price_for

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


def _check_settings(a) -> None:
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
        from .budget import BudgetLedger
        from .task_wrapper import HarnessItemScorer, HarnessTask, parse_model_spec

        os.environ.setdefault("TQDM_DISABLE", "1")  # the harness's per-call progress bars
        _quiet_libraries()
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
        from .budget import upper_estimate

        inp, out = self.scorers[model].upper_tokens(item_id)
        return upper_estimate(self.prices[model], inp, out)

    def actual_cost(self, model: str, score) -> float:
        from .budget import actual_cost

        if not score.usage:
            if score.calls == 0:
                return 0.0
        return float(sum(actual_cost(self.prices[model], u) for u in score.usage))

    def scale(self, item: int, raw: float) -> float:
        return float(self.bank.scale(item, raw))


def _quiet_libraries() -> None:
    for name in ("lm_eval", "LiteLLM", "litellm", "httpx", "urllib3"):
        lg = logging.getLogger(name)
        if lg.level < logging.ERROR:
            lg.setLevel(logging.CRITICAL)
    try:
        import litellm

        litellm.suppress_debug_info = True
    except ImportError:  # pragma: no cover
        pass


def _secrets() -> list[str]:
    from .journal import _env_secrets

    return _env_secrets()


# ----------------------------------------------------------------------------- command
def cmd_rank(args) -> int:
    from rich.console import Console

    from .bank import ItemBank
    from .journal import JOURNAL_NAME, Journal, redact
    from .live import LiveRun, RetryPolicy
    from .ranker import AdaptiveRanker

    console = Console(stderr=True)
    out_dir, journal, resumed = _open_run(args)
    a = args
    try:
        _check_settings(a)
        bank = ItemBank.load(a.bank)
        setup = Setup(a, bank)
        names = [s.name for s in setup.specs]
        ranker = AdaptiveRanker(bank, names, item_costs=setup.bank_costs, confidence=a.confidence,
                                n_init=a.min_items, n_max=a.max_items, budget=a.budget_usd, seed=a.seed,
                                max_in_flight=a.concurrency)
        if journal is None:
            settings = {k: getattr(a, k) for k in _RUN_KEYS}
            settings["bank"] = str(Path(a.bank).resolve())
            settings["include_path"] = str(Path(a.include_path).resolve()) if a.include_path else None
            from .cli import _write_json_atomic

            _write_json_atomic(out_dir / RUN_FILE, redact({"command": "rank", "settings": settings,
                                                           "bank_id": bank.bank_id}, _secrets()))
            journal = Journal.create(out_dir, {"command": "rank", "bank_id": bank.bank_id, "models": names,
                                               "task": setup.task_name, "budget_usd": a.budget_usd},
                                     secrets=_secrets())
        elif journal.header.get("bank_id") != bank.bank_id:
            raise InputError(f"the bank changed since the run started ({journal.header.get('bank_id')} → "
                             f"{bank.bank_id})", path=str(out_dir / JOURNAL_NAME))
        live = LiveRun(ranker, setup.scorers, upper_cost=setup.upper_cost, actual_cost=setup.actual_cost,
                       scale=setup.scale, ledger=setup.ledger, journal=journal,
                       retry=RetryPolicy(max_attempts=a.max_attempts, base_s=a.backoff),
                       max_failures=a.max_failures, secrets=_secrets())
        if resumed:
            info = live.resume_from(journal)
            console.print(f"resumed {out_dir}: {info['scores']} scored items replayed, {info['failures']} failures, "
                          f"{info['lost_in_flight']} call(s) lost in flight (not requested again), "
                          f"${info['spent_usd']:.4f} already spent")
        _announce(console, setup, a)
        with _Progress(console, live, setup, enabled=not a.no_progress) as prog:
            live.on_progress = prog.update
            live.run()
        report = build_report(live, setup, a, command="rank")
        _write_outputs(out_dir, report, live, setup)
        print_report(console, report)
        console.print(f"results: {out_dir / RANKING_FILE}, {out_dir / PLOT_FILE}; journal {out_dir / JOURNAL_NAME}")
        return 130 if live.interrupted else 0
    finally:
        if journal is not None:
            journal.close()


def _open_run(args, keys=_RUN_KEYS, *, command: str = "rank", required: bool = True):
    """(output dir, journal or None, resumed?); with --resume the settings come from run.json."""
    from .journal import JOURNAL_NAME, Journal

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
        return d, Journal.open(d, secrets=_secrets()), True
    if not args.output:
        if not required:
            return None, None, False
        raise InputError("--output DIR is needed (the journal, settings and results go there)")
    d = Path(args.output)
    if (d / JOURNAL_NAME).exists():
        raise InputError(f"a run already exists in {d}; continue it with --resume {d} or choose another --output")
    d.mkdir(parents=True, exist_ok=True)
    return d, None, False


def _announce(console, setup, a) -> None:
    bank = setup.bank
    console.print(f"[bold]lm-eval-adaptive rank[/]: {len(setup.specs)} models on {setup.task_name} "
                  f"({setup.n_docs} documents; bank {bank.bank_id}, {bank.n_items} items, metric {setup.metric}); "
                  f"γ = {a.confidence}, cap " + (f"${a.budget_usd:g}" if a.budget_usd is not None else "none") +
                  f", {a.concurrency} call(s) in flight per model")
    for s in setup.specs:
        p = setup.prices[s.name]
        console.print(f"  {s.name}: {s.type}:{s.model_id}, ${p.input_per_mtok:g}/${p.output_per_mtok:g} per M tokens "
                      f"({p.source}); full run ≈ ${setup.full_cost[s.name]:.4f}")


class _Progress:
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
    from .cat import full_task_estimate

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


def _write_outputs(out_dir: Path, report: dict, live, setup) -> None:
    from .cli import _write_json_atomic
    from .report import plot_ranking

    res = live.ranker.result()
    rows = [r for r in report["rows"] if r["model"] in res.ranking]
    tmp = out_dir / (PLOT_FILE + ".tmp.png")
    plot_ranking(tmp, rows, res, title=f"{setup.task_name}: adaptive ranking ({setup.metric})")
    os.replace(tmp, out_dir / PLOT_FILE)
    _write_json_atomic(out_dir / RANKING_FILE, report)


def print_report(console, report: dict) -> None:
    from rich.table import Table

    groups = {m: gi + 1 for gi, g in enumerate(report["tie_groups"]) for m in g}
    rows = {r["model"]: r for r in report["rows"]}
    t = Table(title=f"{report['task']}: adaptive ranking (γ = {report['confidence']:.2f})")
    for c in ("rank", "model", "θ̂ ± SE", f"est. full-task {report['metric']} [95%]", "items", "spent $",
              "full run $", "tie group"):
        t.add_column(c, justify="left" if c == "model" else "right")
    for i, e in enumerate(report["ranking"]):
        r = rows[e["model"]]
        g = groups.get(e["model"])
        t.add_row(str(i + 1), e["model"], f"{r['theta']:+.2f} ± {r['se']:.2f}",
                  f"{r['est']:.4f} [{r['est_lo']:.4f}, {r['est_hi']:.4f}]", str(r["items"]),
                  f"{r['cost']:.4f}", f"{r['full_cost']:.4f}", f"T{g}" if g else "")
    for f in report["failed"]:
        t.add_row("-", f"{f['model']} (failed)", "", "", str(f["items"]), f"{f['cost_usd']:.4f}", "", "")
    console.print(t)
    adj = "  ".join(f"P({x['model']} > {y['model']}) = {p:.3f}" for x, y, p in
                    zip(report["ranking"], report["ranking"][1:], report["adjacent_confidence"]))
    console.print(f"adjacent pairs: {adj}")
    console.print("ties (order not settled at γ): " + "; ".join(" ≈ ".join(g) for g in report["tie_groups"])
                  if report["tie_groups"] else "ties: none — every adjacent pair is settled")
    for f in report["failed"]:
        console.print(f"[red]failed[/]: {f['model']}: {f['error']}")
    full = report["full_run_cost_usd"]
    spent = report["total_cost_usd"]
    cap = report["budget_usd"]
    console.print(f"stopped because: {report['stopped_because']}; items: {report['total_items']}; spent ${spent:.4f}"
                  + (f" of a ${cap:g} cap" if cap is not None else "")
                  + (f"; a full run would cost ${full:.4f} ({100 * spent / full:.1f}% of it)" if full > 0 else "")
                  + f"; retries: {report['calls']['retries']}")

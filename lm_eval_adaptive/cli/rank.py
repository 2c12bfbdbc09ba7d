"""``lm-eval-adaptive rank``: rank harness models live, to a stated confidence, under a hard dollar cap.

Each model (``--models TYPE:ARGS …``, the harness's ``--model``/``--model_args``) gets its own
harness LM and task object (:mod:`lm_eval_adaptive.harness.scorer`); the engine's
multi-model ranker picks items, :class:`~lm_eval_adaptive.live.driver.LiveRun` runs every model's
calls at once, each charged at litellm's price for the usage the provider returns.

Files in ``--output DIR``:

* ``run.json``: the run's settings (what ``--resume DIR`` rebuilds the run from; secrets redacted);
* ``journal.jsonl``: every request, score, failure and stop, fsynced (see :mod:`.journal`);
* ``ranking.json`` and ``ranking.png``: the result (written atomically at the end, also after
  Ctrl-C, with ``stopped_because: "interrupted"``).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from lm_eval_adaptive.atomic import write_json
from lm_eval_adaptive.cli.arguments import (
    add_tie_margin_argument,
    confidence_level,
    nonnegative_float,
    positive_float,
    positive_int,
)
from lm_eval_adaptive.cli.report import plot_ranking
from lm_eval_adaptive.engine.person_fit import misfit_note
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness.scorer import DEFAULT_TIMEOUT_S
from lm_eval_adaptive.live.cost_forecast import forecast_rank
from lm_eval_adaptive.live.driver import LiveRun, RetryPolicy
from lm_eval_adaptive.live.journal import JOURNAL_NAME, env_secrets
from lm_eval_adaptive.live.session import (
    PLOT_FILE,
    RANKING_FILE,
    RUN_KEYS,
    LiveProgress,
    LiveSettings,
    Setup,
    announce,
    build_report,
    check_settings,
    open_run,
    rank_ranker,
    start_run,
)

__all__ = ["add_rank_parser", "add_task_arguments", "add_live_arguments", "cmd_rank", "print_report",
           "print_misfits"]


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
    add_tie_margin_argument(g)
    g.add_argument("--concurrency", type=positive_int, default=1, metavar="K",
                   help="calls in flight per model (default 1: each item chosen after the last score); "
                        "every model is in flight at once")
    g.add_argument("--price", nargs="+", action="extend", default=[], metavar="MODEL=IN,OUT",
                   help="USD per million input,output tokens for MODEL (a list, or repeated); needed for "
                        "models (and judge models) litellm's price map does not know")
    g.add_argument("--metric", default=None, help="per-document metric (default: the bank's)")
    g.add_argument("--item-field", default=None, metavar="FIELD",
                   help="document field that holds the bank's item ids (doc_id: the harness doc id; "
                        "default: doc ids, refused when that reading is ambiguous)")
    g.add_argument("--timeout", type=positive_float, default=None, metavar="SECONDS",
                   help=f"seconds one model or judge call may take before it fails (retried as a timeout; "
                        f"default: the model's timeout= argument, else {DEFAULT_TIMEOUT_S:g})")
    g.add_argument("--max-attempts", type=positive_int, default=6, metavar="N",
                   help="attempts per call for 429/5xx/timeouts/dropped connections (backoff with jitter)")
    g.add_argument("--max-failures", type=positive_int, default=3, metavar="N",
                   help="a model whose calls fail N times in a row is dropped and reported as failed")
    g.add_argument("--backoff", type=nonnegative_float, default=0.5, metavar="S", help="base backoff in seconds")
    g.add_argument("--no-progress", action="store_true", help="no live progress table")
    g.add_argument("--dry-run", action="store_true",
                   help="call nothing: forecast the items and dollars per model (typical and worst case) "
                        "beside a full run's cost, from the bank's token counts and the prices")


def add_rank_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("rank", help="rank harness models live under a hard dollar cap (ties reported as ties)",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog="example:\n  " + 'lm-eval-adaptive rank --models litellm:model=openai/GPT-4 litellm:model=openai/Aya23 --tasks wmt24_en-de \\\n      --include_path task_configs --apply_chat_template --bank bank.json --budget-usd 2 --output runs/rank1\n  lm-eval-adaptive rank --resume runs/rank1')
    p.add_argument("--models", nargs="+", metavar="SPEC",
                   help="harness models as TYPE:ARGS, e.g. litellm:model=gpt-4o-mini "
                        "(optionally NAME=TYPE:ARGS)")
    p.add_argument("--tasks", metavar="TASK", help="the harness task to rank on (one)")
    p.add_argument("--bank", metavar="BANK.json", help="item bank of the task (lm-eval-adaptive calibrate)")
    p.add_argument("--confidence", type=confidence_level, default=0.95, help="γ for settling a pair (default 0.95)")
    p.add_argument("--budget-usd", type=positive_float, default=None, metavar="USD",
                   help="hard cap on total spend (reserved before each call, settled with real usage)")
    p.add_argument("--min-items", type=positive_int, default=10, help="warm-up items per model (default 10)")
    p.add_argument("--max-items", type=positive_int, default=None, help="maximum items per model")
    p.add_argument("--output", metavar="DIR", help="folder for run.json, journal.jsonl, ranking.json/png")
    p.add_argument("--resume", metavar="DIR", default=None,
                   help="continue the run in DIR (crashed or interrupted): nothing is requested or paid twice")
    p.add_argument("--seed", type=int, default=0)
    add_task_arguments(p)
    add_live_arguments(p)
    p.set_defaults(func=cmd_rank)
    return p


# ----------------------------------------------------------------------------- command
def cmd_rank(args) -> int:
    from rich.console import Console

    console = Console(stderr=True)
    a = LiveSettings.from_mapping(vars(args))
    if a.dry_run:
        return forecast_rank(a, console)
    out_dir, journal, resumed = open_run(a)
    try:
        # every setting, the bank (against the task and metric) and every price are checked before
        # the run folder is created or any call is made
        check_settings(a)
        setup = Setup(a, a.bank)
        bank = setup.bank
        names = [s.name for s in setup.specs]
        ranker = rank_ranker(setup, a)
        if journal is None:
            settings = {k: getattr(a, k) for k in RUN_KEYS}
            settings["bank"] = str(Path(a.bank).resolve())
            settings["include_path"] = str(Path(a.include_path).resolve()) if a.include_path else None
            settings["item_field"] = setup.binding.item_field
            journal = start_run(out_dir, "rank", settings, {"command": "rank", "bank_id": bank.bank_id,
                                                            "models": names, "task": setup.task_name,
                                                            "budget_usd": a.budget_usd}, bank.bank_id)
        elif journal.header.get("bank_id") != bank.bank_id:
            raise InputError(f"the bank changed since the run started ({journal.header.get('bank_id')} → "
                             f"{bank.bank_id})", path=str(out_dir / JOURNAL_NAME))
        live = LiveRun(ranker, setup.scorers, upper_cost=setup.upper_cost, actual_cost=setup.actual_cost,
                       judge_cost=setup.judge_cost, scale=setup.scale, ledger=setup.ledger, journal=journal,
                       retry=RetryPolicy(max_attempts=a.max_attempts, base_s=a.backoff),
                       max_failures=a.max_failures, secrets=env_secrets())
        if resumed:
            info = live.resume_from(journal)
            console.print(f"resumed {out_dir}: {info['scores']} scored items replayed, {info['failures']} failures, "
                          f"{info['lost_in_flight']} call(s) lost in flight (not requested again), "
                          f"${info['spent_usd']:.4f} already spent")
        announce(console, setup, a)
        with LiveProgress(console, live, setup, enabled=not a.no_progress) as prog:
            live.on_progress = prog.update
            live.run()
        report = build_report(live, setup, a, command="rank")
        write_outputs(out_dir, report, live, setup)
        print_report(console, report)
        console.print(f"results: {out_dir / RANKING_FILE}, {out_dir / PLOT_FILE}; journal {out_dir / JOURNAL_NAME}")
        if live.interrupted:
            return 130
        return 0 if report["ranked"] else 1
    finally:
        if journal is not None:
            journal.close()


def write_outputs(out_dir: Path, report: dict, live, setup) -> None:

    res = live.ranker.result()
    rows = [r for r in report["rows"] if r["model"] in res.ranking]
    tmp = out_dir / (PLOT_FILE + ".tmp.png")
    plot_ranking(tmp, rows, res, title=f"{setup.task_name}: adaptive ranking ({setup.metric})")
    os.replace(tmp, out_dir / PLOT_FILE)
    write_json(out_dir / RANKING_FILE, report)


def print_misfits(console, rows) -> None:
    """One line per model the person-fit statistic flags (its scores scatter more than the bank's)."""
    for r in rows:
        note = misfit_note(r.get("person_fit"))
        if note:
            console.print(f"[yellow]misfit[/]: {r['model']}: {note}")


def print_report(console, report: dict) -> None:
    from rich.table import Table

    groups = {m: gi + 1 for gi, g in enumerate(report["tie_groups"]) for m in g}
    rows = {r["model"]: r for r in report["rows"]}
    judged = report.get("judge_cost_usd", 0.0) > 0
    t = Table(title=f"{report['task']}: adaptive ranking (γ = {report['confidence']:.2f})")
    cols = ["rank", "model", "θ̂ ± SE", f"est. full-task {report['metric']} [95%]", "items", "spent $"]
    cols += ["of it judge $"] if judged else []
    for c in cols + ["full run $", "tie group"]:
        t.add_column(c, justify="left" if c == "model" else "right")
    for i, e in enumerate(report["ranking"]):
        r = rows[e["model"]]
        g = groups.get(e["model"])
        t.add_row(str(i + 1), e["model"], f"{r['theta']:+.2f} ± {r['se']:.2f}",
                  f"{r['est']:.4f} [{r['est_lo']:.4f}, {r['est_hi']:.4f}]", str(r["items"]),
                  f"{r['cost']:.4f}", *([f"{r['judge_cost']:.4f}"] if judged else []),
                  f"{r['full_cost']:.4f}", f"T{g}" if g else "")
    for f in report["failed"]:
        t.add_row("-", f"{f['model']} (failed)", "", "", str(f["items"]), f"{f['cost_usd']:.4f}",
                  *([f"{f.get('judge_cost_usd', 0.0):.4f}"] if judged else []), "", "")
    console.print(t)
    if not report.get("ranked", True):
        console.print(f"[red]no ranking[/]: {len(report['ranking'])} model(s) left of "
                      f"{len(report['ranking']) + len(report['failed'])}; {len(report['failed'])} failed")
    else:
        adj = "  ".join(f"P({x['model']} > {y['model']}) = {p:.3f}" for x, y, p in
                        zip(report["ranking"], report["ranking"][1:], report["adjacent_confidence"]))
        console.print(f"adjacent pairs: {adj}")
        console.print("ties (order not settled at γ): " + "; ".join(" ≈ ".join(g) for g in report["tie_groups"])
                      if report["tie_groups"] else "ties: none — every adjacent pair is settled")
        if report.get("equivalent"):
            margin = report.get("signature", {}).get("tie_margin")
            console.print(f"settled as ties (difference confidently within ±{margin:g}): "
                          + "; ".join(" ≈ ".join(p) for p in report["equivalent"]))
    for f in report["failed"]:
        console.print(f"[red]failed[/]: {f['model']}: {f['error']}")
    print_misfits(console, report["rows"])
    full = report["full_run_cost_usd"]
    spent = report["total_cost_usd"]
    cap = report["budget_usd"]
    judge = f" (judge calls ${report['judge_cost_usd']:.4f} of it)" if judged else ""
    console.print(f"stopped because: {report['stopped_because']}; items: {report['total_items']}; spent ${spent:.4f}"
                  + judge + (f" of a ${cap:g} cap" if cap is not None else "")
                  + (f"; a full run would cost ${full:.4f} ({100 * spent / full:.1f}% of it)" if full > 0 else "")
                  + f"; retries: {report['calls']['retries']}")

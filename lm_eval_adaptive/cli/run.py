"""``lm-eval-adaptive run``: the harness's own ``run`` parser plus the adaptive argument group.

Without ``--adaptive`` the harness's ``run`` executes unchanged; with it
:func:`lm_eval_adaptive.harness.run.run_adaptive` runs with the adaptive settings gathered in an
:class:`~lm_eval_adaptive.harness.task_loop.AdaptiveRunConfig` (see docs/harness.md). Every adaptive
setting is checked while the command line is parsed (:mod:`.arguments`). The adaptive run is
shown on stderr (:class:`~lm_eval_adaptive.cli.progress.AdaptiveRunProgress`, off with
``--no-progress``) and, with ``--plot`` or ``--output_path``, drawn (θ̂ and its 95% interval as
documents accrue); its summary is printed on stdout once the files are written
(:func:`print_adaptive_run`, from the run's
:class:`~lm_eval_adaptive.harness.run.AdaptiveRunReport`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lm_eval_adaptive.display import shown
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.engine.cat.person_fit import misfit_note

from lm_eval_adaptive.cli.arguments import (
    add_redact_argument,
    nonnegative_float,
    positive_float,
    positive_int,
)
from lm_eval_adaptive.cli.logs import quiet_third_party
from lm_eval_adaptive.cli.progress import AdaptiveRunProgress
from lm_eval_adaptive.cli.report import note_on_stderr, report_console
from lm_eval_adaptive.cli.run_early_checks import check_display_options, check_run_outputs
from lm_eval_adaptive.harness.lm_eval_compat import add_harness_run_parser
from lm_eval_adaptive.harness.result_blocks import metric_blocks
from lm_eval_adaptive.harness.run import AdaptiveRunReport, execute_run
from lm_eval_adaptive.harness.scorer import DEFAULT_TIMEOUT_S
from lm_eval_adaptive.harness.task_loop import AdaptiveRunConfig
from lm_eval_adaptive.cli.live_output import print_forecast, print_forecast_written, stop_rule
from lm_eval_adaptive.live.cost_forecast import adaptive_run_forecast_folder, forecast_adaptive_run, write_forecast
from lm_eval_adaptive.live.run_journal import AdaptiveRunJournal

__all__ = ["add_run_parser", "split_run_arguments", "run_display", "plot_beside", "adaptive_run_summary",
           "print_adaptive_run", "RUN_EXAMPLE", "DISPLAY_KEYS"]

RUN_EXAMPLE = """\
example:
  lm-eval-adaptive run --model litellm --model_args model=openai/GPT-4 --tasks wmt24_en-de \\
      --include_path task_configs --apply_chat_template --adaptive --bank wmt24_en-de.bleu --max-items 100 \\
      --plot run.png
"""

#: Arguments of the adaptive group that say how the run is shown, not how it runs.
DISPLAY_KEYS = ("adaptive_plot", "adaptive_no_progress", "adaptive_redact")
#: Arguments of the adaptive group that say where the run starts (a journal to resume), not how it runs.
RESUME_KEYS = ("adaptive_resume",)


def split_run_arguments(args: argparse.Namespace) -> tuple[argparse.Namespace, AdaptiveRunConfig | None]:
    """(the harness's own ``run`` arguments, the adaptive settings or None without ``--adaptive``)."""
    ours = {k: v for k, v in vars(args).items() if k == "adaptive" or k.startswith("adaptive_")}
    harness = argparse.Namespace(**{k: v for k, v in vars(args).items() if k not in ours})
    check_display_options(bool(ours.get("adaptive")), bool(ours.get("adaptive_dry_run")), ours.get("adaptive_plot"))
    if not ours.get("adaptive"):
        if ours.get("adaptive_resume"):
            raise InputError("--resume goes on from an interrupted adaptive run: add --adaptive")
        return harness, None
    if ours.get("adaptive_resume") and (ours.get("adaptive_dry_run") or not getattr(harness, "output_path", None)):
        raise InputError("--resume reads the journal in the run's --output_path: give the --output_path of the "
                         "interrupted run" + (" (and no --dry-run)" if ours.get("adaptive_dry_run") else ""))
    ours = {k: v for k, v in ours.items() if k not in DISPLAY_KEYS + RESUME_KEYS}
    values = {k[len("adaptive_"):]: v for k, v in ours.items() if k != "adaptive"}
    for key in ("bank", "price"):
        values[key] = tuple(values.get(key) or ())
    return harness, AdaptiveRunConfig(**values)


def add_run_parser(subparsers) -> argparse.ArgumentParser:
    """Add the harness's own ``run`` subcommand, plus the adaptive argument group."""
    p, harness_execute = add_harness_run_parser(subparsers)
    p.description = ("Evaluate language models with lm-evaluation-harness; with --adaptive, generate "
                     "and score only the documents a computerized adaptive test picks.")
    # the harness's usage and examples, spelled with this command's name
    p.usage = (p.usage or "").replace("lm-eval run", "lm-eval-adaptive run") or None
    p.epilog = RUN_EXAMPLE + "\n" + (p.epilog or "").replace("$ lm-eval run", "$ lm-eval-adaptive run")
    p.set_defaults(func=lambda args: _execute(args, harness_execute))
    g = p.add_argument_group("adaptive (lm-eval-adaptive)")
    g.add_argument("--adaptive", action="store_true",
                   help="run a computerized adaptive test instead of every document")
    g.add_argument("--bank", dest="adaptive_bank", nargs="+", default=None, metavar="[TASK=]BANK",
                   help="item bank per task (TASK=PATH; a bare PATH when there is one task), or a shipped "
                        "bank's name (wmt24_en-de.bleu); several for one task (a bank per metric: --bank "
                        "wmt24_en-de.bleu wmt24_en-de.chrf): each document generated once and scored by every "
                        "metric; default: the task's shipped bank when only one fits the task and --metric")
    g.add_argument("--se-target", dest="adaptive_se_target", metavar="SE", type=nonnegative_float, default=0.2,
                   help="stop when the ability SE falls to this (default 0.2)")
    g.add_argument("--ci-width", dest="adaptive_ci_width", metavar="W", type=positive_float, default=None,
                   help="stop instead when the estimated full-task metric's 95%% interval is at most W wide "
                        "(upper - lower), in the metric's units (0.04: ±2 points of accuracy); replaces "
                        "--se-target. The same meaning with a bank and without one")
    g.add_argument("--min-items", dest="adaptive_min_items", metavar="N", type=positive_int, default=30,
                   help="minimum documents per task before the SE (or --ci-width) rule may stop (default 30)")
    g.add_argument("--max-items", dest="adaptive_max_items", metavar="N", type=positive_int, default=500,
                   help="maximum documents per task (default 500)")
    g.add_argument("--budget-usd", dest="adaptive_budget_usd", metavar="USD", type=positive_float, default=None,
                   help="cap on the spend per task: a document is given only while the spend so far plus "
                        "its estimate (the bank's token counts at the model's price) fits")
    g.add_argument("--price", dest="adaptive_price", nargs="+", action="extend", default=None,
                   metavar="[MODEL=]IN,OUT",
                   help="USD per million input,output tokens for a model litellm has no price for "
                        "(MODEL=IN,OUT, repeatable; a bare IN,OUT prices the model run; a judge model too)")
    g.add_argument("--batch-size-adaptive", dest="adaptive_batch_size", metavar="K", type=positive_int, default=1,
                   help="documents picked per step (the most informative ones; default 1)")
    g.add_argument("--metric", dest="adaptive_metric", metavar="METRIC", default=None,
                   help="per-document metric to feed the CAT (default: the bank's metric)")
    g.add_argument("--item-field", dest="adaptive_item_field", metavar="FIELD", default=None,
                   help="document field that holds the bank's item ids (doc_id: the harness doc id; "
                        "default: the field the bank records, else doc ids, refused when that reading is "
                        "ambiguous)")
    g.add_argument("--score-range", dest="adaptive_score_range", metavar="LO,HI", default=None,
                   help="a task with no bank: the lowest and highest score of one document (default: the metric's "
                        "own, known for bleu, chrf, rouge_l, acc, exact_match ...; docs/cold-start.md)")
    g.add_argument("--use-small-bank", dest="adaptive_use_small_bank", action="store_true",
                   help="use a bank calibrated from fewer than 20 models instead of running bank-free (its "
                        "intervals missed the full-task mean too often on the dev tables: docs/cold-start.md)")
    g.add_argument("--dry-run", dest="adaptive_dry_run", action="store_true",
                   help="build no model and call nothing: forecast the items and dollars per task (typical and "
                        "worst case) beside a full run's cost, from the bank's token counts and the price")
    g.add_argument("--plot", dest="adaptive_plot", metavar="FILE.png", default=None,
                   help="write a PNG of θ̂ and its 95%% interval as documents accrue, one panel per task "
                        "(default with --output_path: adaptive_DATE.png beside the results JSON)")
    g.add_argument("--no-progress", dest="adaptive_no_progress", action="store_true",
                   help="no progress on stderr (default: a live line per task on a terminal: documents, "
                        "θ̂ ± SE, the estimated full-task metric, dollars; a line now and then otherwise)")
    g.add_argument("--timeout", dest="adaptive_timeout", metavar="SECONDS", type=positive_float, default=None,
                   help=f"seconds one model or judge call may take (default: the model's timeout= "
                        f"argument, else {DEFAULT_TIMEOUT_S:g})")
    g.add_argument("--resume", dest="adaptive_resume", action="store_true",
                   help="go on from the journal an interrupted adaptive run left in its --output_path (give the "
                        "same command again, plus --resume): nothing it paid for is asked again")
    add_redact_argument(g, dest="adaptive_redact")
    return p


def plot_beside(results_file) -> Path | None:
    """The plot file of ``run --adaptive --output_path`` without ``--plot``: ``adaptive_DATE.png`` beside
    the results JSON ``results_DATE.json`` (``NAME_DATE.png`` beside ``NAME_DATE.json``)."""
    if results_file is None:
        return None
    f = Path(results_file)
    stem = "adaptive" + f.stem[len("results"):] if f.stem.startswith("results_") else f.stem
    return f.with_name(stem + ".png")


def run_display(args: argparse.Namespace) -> AdaptiveRunProgress:
    """The stderr display of the adaptive run ``args`` asks for (``--no-progress``, ``--plot``)."""
    plot = getattr(args, "adaptive_plot", None)
    return AdaptiveRunProgress(report_console(stderr=True), enabled=not getattr(args, "adaptive_no_progress", False),
                               plot=plot if plot else plot_beside)


def adaptive_run_summary(report: AdaptiveRunReport) -> list[str]:
    """The lines ``run --adaptive`` prints once its files are written: the model and settings, the
    harness's results table, per task (per metric) θ̂ ± SE, documents, the estimated full-task metric
    with its interval, dollars and the stop (and a misfit note), and where the results went."""
    c = report.config
    lines = [f"{report.model} ({report.model_args}), adaptive: {stop_rule(c.se_target, c.ci_width)}, "
             f"min_items={c.min_items}, max_items={c.max_items}, budget_usd={c.budget_usd}",
             report.table]
    for label, a in metric_blocks(report.results["adaptive"]):
        est = a["metric_estimate"]
        judge = f" (judge ${a['judge_cost_usd']:.4f})" if a["judge"]["calls"] else ""
        if a.get("mode") == "bank-free":  # no bank: documents in random order (harness/bank_free_run.py)
            lines += [f"{label}: mode: {a['mode_note']}",
                      f"{label}: {a['items']} of {a['task_docs']} documents ({a['pct_of_task']:.1f}%), in random "
                      f"order; full-task {a['metric']} = {est['estimate']:.4f} [{est['lower']:.4f}, {est['upper']:.4f}] "
                      f"(95%, valid whenever the run stops); ${a['cost_usd']:.4f}{judge}; stopped: {a['stopped_because']}"]
            continue
        lines.append(f"{label}: θ̂ = {a['theta']:+.3f} ± {a['se']:.3f}; {a['items']} of {a['task_docs']} documents "
                     f"({a['pct_of_task']:.1f}%); estimated full-task {a['metric']} = {est['estimate']:.4f} "
                     f"[{est['lower']:.4f}, {est['upper']:.4f}]; ${a['cost_usd']:.4f}{judge}; "
                     f"stopped: {a['stopped_because']}")
        note = misfit_note(a["person_fit"])
        if note:
            lines.append(f"{label}: misfit: {note}")
    if report.output_path:
        lines.append(f"results written under {report.output_path}")
    return lines


def print_adaptive_run(report: AdaptiveRunReport) -> None:
    """Print :func:`adaptive_run_summary` on stdout, names shown escaped (:func:`~lm_eval_adaptive.display.shown`)."""
    for line in adaptive_run_summary(report):
        print(shown(line, lines=True))


def _execute(args: argparse.Namespace, harness_execute) -> int:
    harness, adaptive = split_run_arguments(args)
    check_run_outputs(harness, getattr(args, "adaptive_plot", None))
    # each harness warning once, no litellm banner before the one useful line (an adaptive run quiets litellm
    # as it builds the model: importing litellm would slow every check before it)
    quiet_third_party(litellm_now=adaptive is None)
    if adaptive is None or adaptive.dry_run:
        return execute_run(harness, adaptive, harness_execute, forecast=_print_forecast, note=note_on_stderr)
    journal = AdaptiveRunJournal(resume=bool(getattr(args, "adaptive_resume", False)))
    with run_display(args) as display:
        report = execute_run(harness, adaptive, harness_execute, forecast=_print_forecast, display=display,
                             note=note_on_stderr, journal=journal)
    print_adaptive_run(report)
    return 0


def _print_forecast(plan, config) -> int:
    """``run --adaptive --dry-run``: the forecast of every task, printed (to stdout, as the report) and
    written into the run's output folder when there is one."""
    fc = forecast_adaptive_run(plan, config)
    console = report_console()
    print_forecast(console, fc)
    print_forecast_written(console, write_forecast(fc, adaptive_run_forecast_folder(plan)))
    return 0

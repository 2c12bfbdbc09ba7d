"""Command line: ``lm-eval-adaptive {demo,calibrate,backtest,run,rank,compare,leaderboard,refresh,replay-server,export-table}``.

Every command reports bad input as one ``error:`` line naming the file (and row) and
exits with status 2; nothing is left half-written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lm_eval_adaptive import __version__
from lm_eval_adaptive.atomic import atomic_write, write_json
from lm_eval_adaptive.cli.arguments import (
    accept_both_spellings,
    add_family_wise_argument,
    add_tie_margin_argument,
    confidence_level,
    explicit_options,
    guessing_value,
    int_at_least,
    nonnegative_float,
    nonnegative_int,
    positive_int,
)
from lm_eval_adaptive.cli.compare import add_compare_parser
from lm_eval_adaptive.cli.demo import run_demo
from lm_eval_adaptive.cli.leaderboard import add_leaderboard_parsers
from lm_eval_adaptive.cli.multi_metric import backtest_joint, metric_table_specs
from lm_eval_adaptive.cli.progress import BacktestProgress, table_progress
from lm_eval_adaptive.cli.rank import add_rank_parser
from lm_eval_adaptive.cli.replay_server import add_arguments as add_replay_arguments
from lm_eval_adaptive.cli.replay_server import serve
from lm_eval_adaptive.cli.report import (
    plot_backtest,
    pooled_any_wrong,
    print_backtest,
    print_calibration,
    report_console,
    table_label,
)
from lm_eval_adaptive.cli.run import add_run_parser
from lm_eval_adaptive.cli.run_early_checks import refuse_before_parsing, refused
from lm_eval_adaptive.data.files import check_outputs
from lm_eval_adaptive.data.price_map import load_costs_file, price_for
from lm_eval_adaptive.data.prices import DEFAULT_PRICE
from lm_eval_adaptive.data.progress import progress_hook
from lm_eval_adaptive.data.tables import item_field_file, load_any_table, table_item_field, write_item_field
from lm_eval_adaptive.display import shown
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig
from lm_eval_adaptive.engine.irt.calibration import (
    DEFAULT_METHOD,
    DEFAULT_SCALING,
    RESPONSE_MODELS,
)
from lm_eval_adaptive.engine.anytime.small_bank import calibrate_line, calibration_models, self_check_line
from lm_eval_adaptive.engine.irt.binary_calibration import is_binary_table
from lm_eval_adaptive.engine.evaluation.self_check import calibrate_checked
from lm_eval_adaptive.errors import InputError, check_text
from lm_eval_adaptive.harness.binding import record_item_field
from lm_eval_adaptive.harness.run import ModelCallError
from lm_eval_adaptive.harness.sample_logs import options_from_sample_logs
from lm_eval_adaptive.live.run_history import is_run_journal, table_from_history
from lm_eval_adaptive.redaction import redacting
from lm_eval_adaptive.sweep import check_ray_address, import_ray, run_backtests


# ---------------------------------------------------------------- calibrate
def cmd_calibrate(args) -> int:
    check_outputs([("--out", args.out)], inputs=[args.table, *(args.samples or [])])  # before any work
    if args.samples:
        if args.table:
            raise InputError("give either a response TABLE or --samples, not both")
        if not args.task or not args.metric:
            raise InputError("--samples needs --task (the harness task name) and --metric "
                             "(the per-document metric in the sample logs)")

        # sample logs, and the journals of rank runs with no bank (live/run_history.py): missing cells allowed
        table = table_from_history(args.samples, task=args.task, metric=args.metric,
                                   allow_outliers=args.allow_outliers)
        args.response_model, args.guessing = _multiple_choice_default(args, table)
    elif args.table:
        table = load_any_table(args.table, metric=args.metric, allow_outliers=args.allow_outliers)
    else:
        raise InputError("give a response TABLE or --samples PATH... (harness --log_samples output)")
    if args.exclude_models:
        names = [str(m) for m in table.models]
        unknown = [m for m in args.exclude_models if m not in names]
        if unknown:
            raise InputError(f"--exclude-models: not in the table: {', '.join(unknown)}", path=table.source)
        table = table.select_models([m for m in names if m not in args.exclude_models])
    bank = calibrate_checked(table, scaling=args.scaling, method=args.method, likelihood=args.likelihood,
                             check=not args.no_self_check, drop_negative=not args.keep_negative,
                             atlas_filters=args.atlas_filters, task=args.task, metric=args.metric or table.metric,
                             response_model=args.response_model, guessing=args.guessing)
    if args.table:  # a named table knows the document field its ids are values of: the bank says so
        record_item_field(bank, table_item_field(args.table))
    bank.save(args.out)

    print_calibration(report_console(), bank, args.out)
    few = calibrate_line(calibration_models(bank))  # a bank from too few models: what it can do (one line)
    if few:
        report_console().print(f"note: {few}", highlight=False)
    against = self_check_line(bank)  # the self-check against shared random (one line)
    if against:
        report_console().print(f"note: {against}", highlight=False)
    return 0


def _multiple_choice_default(args, table):
    """(response model, guessing) for a table from sample logs: a 0/1 metric of a multiple-choice task
    (k options per document) defaults to 3pl with c = 1/k per item (``--response-model 3pl`` without
    ``--guessing`` too); anything else keeps what was asked."""
    if args.guessing is not None or args.response_model not in (None, "3pl") or not is_binary_table(table):
        return args.response_model, args.guessing
    logs = [p for p in args.samples if not is_run_journal(p)]
    options = options_from_sample_logs(logs, task=args.task) if logs else {}
    if not options or any(str(i) not in options for i in table.items):
        return args.response_model, args.guessing
    return "3pl", {str(i): 1.0 / options[str(i)] for i in table.items}


# ----------------------------------------------------------------- backtest
def cmd_backtest(args) -> int:
    check_outputs([("--json", args.json), ("--plot", args.plot)], inputs=[*args.table, args.costs])  # before any work

    config = BacktestConfig(holdout_size=args.holdout_size, folds=args.folds, seeds=args.seeds,
                            confidence=args.confidence, min_items=args.min_items,
                            target_items=args.target_items, max_items=args.max_items,
                            scaling=args.scaling, method=args.method, likelihood=args.likelihood,
                            top_k=args.top_k,
                            partition_seed=args.partition_seed, bootstrap=args.bootstrap,
                            tie_margin=args.tie_margin, self_check=not args.no_self_check,
                            response_model=args.response_model, guessing=args.guessing,
                            family_wise=args.family_wise, anytime=args.anytime)
    if args.anytime and any(metric_table_specs(t) for t in args.table):
        raise InputError("--anytime backtests one metric's ranking as rank --anytime runs it; it does not go with "
                         "a joint multi-metric TABLE spec")
    if args.ray is not None and args.jobs is not None:
        raise InputError("give --jobs (local processes) or --ray (a Ray cluster), not both")
    if args.ray is not None:
        import_ray()  # no Ray installed: say so now, before any table is loaded
        check_ray_address(args.ray)  # nor a bad address
    if any(metric_table_specs(t) for t in args.table):  # prefix/m1,m2: a joint multi-metric run
        if len(args.table) > 1:
            raise InputError("a joint multi-metric backtest takes one TABLE spec (e.g. wmt25/en-de/xcomet,metricx)")
        # its folds run in --jobs processes or on Ray, as a single table's: the same figures as one by one
        return backtest_joint(args.table[0], config, prices_for=lambda ms: _prices_for(args, ms),
                              allow_outliers=args.allow_outliers, console=report_console(), json_path=args.json,
                              jobs=args.jobs, ray_address=args.ray, progress_console=report_console(stderr=True),
                              show_progress=not args.no_progress)
    tables = [load_any_table(t, allow_outliers=args.allow_outliers) for t in args.table]
    console = report_console()
    if args.history_models is not None:  # the history curve (issue 31): N = 0 is the bank-free ranker
        from lm_eval_adaptive.cli.history import backtest_history  # noqa: PLC0415 - scipy.stats: not at start-up

        return backtest_history(tables, args.history_models, config, prices_for=lambda ms: _prices_for(args, ms),
                                console=console, json_path=args.json, plot=args.plot)
    # progress on stderr: a bar on a terminal, a line per fold otherwise, nothing with --no-progress
    with BacktestProgress(report_console(stderr=True), len(tables), config.folds, config.seeds,
                          enabled=not args.no_progress) as prog:
        hooks = [prog.table(i, table_label(t.metric or t.source)) for i, t in enumerate(tables)]
        # every table × fold a unit, run in --jobs processes or on Ray: the same figures as one by one
        results = run_backtests(tables, config=config, prices=[_prices_for(args, t.models) for t in tables],
                                jobs=args.jobs, ray_address=args.ray, progress=hooks)
    print_backtest(console, results)
    if args.json:
        if len(results) == 1:
            out = results[0].to_dict()
        else:
            out = {"tables": [r.to_dict() for r in results], "mean": _mean_block(results)}
        write_json(args.json, out)
        console.print(f"wrote {args.json}")
    if args.plot:
        atomic_write(args.plot, lambda f: plot_backtest(f, results))
        console.print(f"wrote {args.plot}")
    return 0


def _mean_block(results) -> dict:
    """Means over tables of each method's figures (the ``mean`` block of ``--json``)."""
    import numpy as np

    from lm_eval_adaptive.engine.evaluation.backtest import METHODS

    out = {meth: {k: float(np.mean([getattr(r.method(meth), k) for r in results]))
                  for k in ("tau", "items", "pct_used", "cost")}
           for meth in METHODS}
    return out | {"confident_accuracy": float(np.mean([r.confident_accuracy for r in results])),
                  "any_wrong_share": pooled_any_wrong(results),
                  "discrimination": float(np.mean([r.discrimination for r in results])),
                  "full_task_coverage": float(np.mean([r.full_task_coverage for r in results])),
                  "share_abs_z_over_1_96": float(np.mean([r.se_calibration["share_abs_z_over_1_96"]
                                                          for r in results])),
                  "cost_share_of_full_run": float(np.mean([r.cost_share_of_full_run for r in results]))}


def _prices_for(args, models):

    overrides = load_costs_file(args.costs) if args.costs else {}
    if args.prices == "litellm":
        return {str(m): price_for(str(m), overrides=overrides, default=DEFAULT_PRICE) for m in models}
    return {str(m): overrides.get(str(m), DEFAULT_PRICE) for m in models}


# --------------------------------------------------------------------- demo
def cmd_demo(args) -> int:
    check_outputs([("--json", args.json), ("--plot", args.plot)], inputs=[args.table])  # before any work

    return run_demo(args, report_console())


# ------------------------------------------------------------- export-table
def cmd_export_table(args) -> int:
    check_outputs([("--out", args.out), ("--out", str(item_field_file(args.out)))],
                  inputs=[args.name])  # before the table is read
    table = load_any_table(args.name)
    path = table.write(args.out)
    print(f"wrote {shown(path)}: {table.n_models} models x {table.n_items} items, {table.n_obs} rows")
    field = table_item_field(args.name)
    if field and not Path(args.name).exists():  # leaderboard and calibrate read it: no --item-field needed
        side = write_item_field(path, field, args.name)
        print(f"wrote {shown(side)}: its item ids are the task's documents' {field!r} field")
    return 0


def cmd_replay_server(args) -> int:

    return int(serve(args) or 0)


def build_parser(with_run: bool = False) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lm-eval-adaptive",
                                description="Adaptive (CAT) evaluation and ranking of language models.")
    p.add_argument("--version", action="version", version=f"lm-eval-adaptive {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def common_model(sp):
        sp.add_argument("--scaling", choices=("global", "per_item"), default=None,
                        help="how raw scores are mapped into [0,1] (default: see docs/calibration.md)")
        sp.add_argument("--likelihood", choices=("quasi", "normal"), default="quasi",
                        help="likelihood used to update the ability posterior (default: quasi)")
        sp.add_argument("--method", choices=("joint", "moments"), default=None,
                        help="calibration: joint quasi-likelihood fit or METHOD.md's moments "
                             "(default: joint; see docs/calibration.md)")
        sp.add_argument("--allow-outliers", action="store_true",
                        help="accept scores far outside the bulk of the table (more than 10 x "
                             "(P99 - P1) beyond [P1, P99]; refused by default as likely corrupt)")

    def response_model_arguments(sp):
        sp.add_argument("--response-model", choices=RESPONSE_MODELS, default=None,
                        help="continuous (METHOD.md §1), or 2pl/3pl for 0/1 scores (accuracy, exact match, "
                             "win/lose) with a discrimination (and a guessing chance) per item "
                             "(default: 3pl with c = 1/k for --samples of a k-option multiple-choice task scored "
                             "0/1, 2pl or 3pl by held-out likelihood for any other table of 0/1 scores (2pl under "
                             "50 models), continuous otherwise; docs/binary.md)")
        sp.add_argument("--guessing", type=guessing_value, default=None, metavar="C",
                        help="3pl: every item's guessing chance c, e.g. 0.25 for four-option multiple choice "
                             "(default: 1/k from --samples of a multiple-choice task, else estimated per item)")

    d = sub.add_parser("demo", help="rank recorded real systems adaptively (offline, embedded data)",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog="example:\n  " + 'lm-eval-adaptive demo\n  lm-eval-adaptive demo --models GPT-4 Claude-3.5 Phi-3-Medium Llama3-70B --budget-usd 0.2 --plot rank.png')
    d.add_argument("--table", default="embedded:wmt24-en-de-chrf",
                   help="response table to replay (default: embedded WMT24 en-de chrF)")
    d.add_argument("--models", nargs="+", default=None,
                   help="systems to rank (default: the API systems in the table)")
    d.add_argument("--confidence", type=confidence_level, default=0.95,
                   help="confidence level for settling a pair, in (0.5, 1) (default: 0.95)")
    d.add_argument("--min-items", type=positive_int, default=10,
                   help="warm-up items per system (default: 10)")
    d.add_argument("--max-items", type=positive_int, default=None,
                   help="at most this many items per system (default: the whole bank)")
    d.add_argument("--budget-usd", type=nonnegative_float, default=None,
                   help="hard dollar cap (default: 10%% of what the full run would cost)")
    d.add_argument("--price", nargs="+", action="extend", default=None, metavar="MODEL=IN,OUT",
                   help="USD per million input,output tokens for MODEL; default=IN,OUT prices every system "
                        "without a known (litellm) price (the demo's default: default=1,3, named on its prices line)")
    d.add_argument("--json", default=None, help="also write the result as JSON here")
    d.add_argument("--plot", default=None, help="write a PNG of abilities with intervals here")
    d.add_argument("--verbose", action="store_true",
                   help="also the technical detail: θ̂ ± SE and its interval, why the rank and θ̂ may disagree, the "
                        "bank's self-check (model error)")
    d.add_argument("--seed", type=nonnegative_int, default=0)
    add_tie_margin_argument(d)
    add_family_wise_argument(d)
    common_model(d)
    d.set_defaults(func=cmd_demo)

    c = sub.add_parser("calibrate", help="build an item bank from full runs (a response table)",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog="example:\n  " + 'lm-eval-adaptive calibrate wmt24/en-de/bleu --out wmt24_en-de.bleu.json\n  lm-eval-adaptive calibrate --samples runs/ --task wmt24_en-de --metric bleu --out wmt24_en-de.bleu.json')
    c.add_argument("table", nargs="?", default=None,
                   help="CSV/JSONL/Parquet with model,item,score[,input_tokens,output_tokens], "
                        "or a named real table such as wmt24/en-de/bleu")
    c.add_argument("--samples", nargs="+", default=None, metavar="PATH",
                   help="harness sample logs of full runs (samples_<task>_*.jsonl files or folders "
                        "written by `run --log_samples --output_path`), instead of a TABLE; also those of "
                        "`run --adaptive` with no bank, and `rank` run folders made with no bank (their "
                        "journal): partial runs of random documents (docs/cold-start.md)")
    c.add_argument("--out", required=True, help="where to write the bank JSON")
    c.add_argument("--task", default=None, help="task name stored in the bank")
    c.add_argument("--metric", default=None, help="metric name stored in the bank")
    c.add_argument("--atlas-filters", action="store_true",
                   help="also drop items with SD<1%%, mean>95%% or point-biserial<0.1")
    c.add_argument("--keep-negative", action="store_true",
                   help="keep items whose scores correlate negatively with ability (continuous banks; a 2pl/3pl "
                        "bank keeps every item)")
    c.add_argument("--no-self-check", action="store_true",
                   help="skip the bank's self-check (leave-models-out cross-validation on this history "
                        "of how often its intervals and confident pairs hold)")
    c.add_argument("--exclude-models", nargs="+", default=None, metavar="MODEL",
                   help="leave these models out of the calibration (e.g. the ones about to be ranked)")
    common_model(c)
    response_model_arguments(c)
    c.set_defaults(func=cmd_calibrate)

    b = sub.add_parser("backtest", help="adaptive vs random vs fixed-length on held-out models (paper protocol)",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog="example:\n  " + 'lm-eval-adaptive backtest wmt24/en-de/bleu alpaca_eval/judge --prices uniform --seeds 5 --json backtest.json --plot backtest.png\n  lm-eval-adaptive backtest my_runs.parquet --costs prices.json --tie-margin 0.01')
    b.add_argument("table", nargs="+", help="response table file(s) or named real table(s); several metrics of one "
                   "task joined by commas (wmt25/en-de/xcomet,metricx) compare a joint multi-metric run, every "
                   "generation scored by each metric, with separate runs at the same total spend")
    b.add_argument("--holdout-size", type=int_at_least(2), default=4,
                   help="models held out and ranked per fold, at least 2 (default: 4)")
    b.add_argument("--folds", type=positive_int, default=5)
    b.add_argument("--seeds", type=positive_int, default=20)
    b.add_argument("--confidence", type=confidence_level, default=0.95,
                   help="confidence level for settling a pair, in (0.5, 1) (default: 0.95)")
    b.add_argument("--min-items", type=positive_int, default=10)
    b.add_argument("--target-items", type=positive_int, default=20,
                   help="budget = this many items per model at the average item cost")
    b.add_argument("--max-items", type=positive_int, default=None)
    b.add_argument("--top-k", type=positive_int, default=1,
                   help="randomesque selection among the top k items")
    b.add_argument("--costs", default=None, help="per-model prices (JSON or CSV); others use the default")
    b.add_argument("--prices", choices=("litellm", "uniform"), default="litellm",
                   help="litellm (default): API systems at litellm's prices (bundled offline map), "
                        "others at the default $1/$3 per M tokens; uniform: the default price for "
                        "every system (the paper-comparison setting)")
    b.add_argument("--partition-seed", type=nonnegative_int, default=42)
    add_tie_margin_argument(b)
    add_family_wise_argument(b)
    b.add_argument("--no-self-check", action="store_true",
                   help="rank with each fold's bank as calibrated, without the correction its self-check "
                        "(leave-models-out cross-validation on the fold's calibration models) measures")
    b.add_argument("--bootstrap", type=positive_int, default=10_000,
                   help="bootstrap resamples for ground-truth ties")
    b.add_argument("--jobs", type=positive_int, default=None, metavar="N",
                   help="run the tables' folds in N processes at once (default: the CPUs this process may "
                        "use; 1: one after another in this process); the figures are the same either way")
    b.add_argument("--ray", default=None, metavar="ADDRESS",
                   help="run the tables' folds as tasks on a Ray cluster instead: auto (the running cluster), "
                        "local (start one on this machine) or a cluster address as ray.init takes it; "
                        "needs the ray extra: pip install 'lm-eval-adaptive[ray]'; the same figures")
    b.add_argument("--history-models", default=None, metavar="N[,N...]",
                   help="the history curve: rank each hold-out set with a bank from only N of the other models "
                        "(0: no bank, the bank-free ranker; all: every other model), per N: tau against random "
                        "and shared random documents at the same spend, items, confident-pair accuracy, coverage")
    b.add_argument("--anytime", action="store_true",
                   help="rank each hold-out set as rank --anytime does: the anytime-valid (bank-free) ranker, the "
                        "fold's bank only ordering the pairs it leaves open (fixed-length CAT still runs on the bank)")
    b.add_argument("--json", default=None, help="write the summary as JSON here")
    b.add_argument("--plot", default=None, metavar="FILE.png",
                   help="write a PNG here: per table, Kendall τ of adaptive, random, shared random documents and fixed-length "
                        "(mean ± SD over folds × seeds) and the items each spent per hold-out set")
    b.add_argument("--no-progress", action="store_true",
                   help="no progress on stderr (default: a bar over tables × folds × seeds on a terminal, "
                        "a line per fold otherwise)")
    common_model(b)
    response_model_arguments(b)
    b.set_defaults(func=cmd_backtest)

    if with_run:  # the harness's own parser: only imported when `run` is asked for

        add_run_parser(sub)
    else:
        sub.add_parser("run", add_help=False,
                       help="lm-eval run, plus --adaptive: generate and score only the documents "
                            "the CAT picks (see `lm-eval-adaptive run --help`)")

    add_rank_parser(sub)
    add_compare_parser(sub)

    add_leaderboard_parsers(sub)

    r = sub.add_parser("replay-server", help="OpenAI-compatible endpoint answering with recorded real "
                                             "outputs (offline tests and demos)",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog="example:\n  lm-eval-adaptive replay-server --port 8123   "
                               "# then OPENAI_API_BASE=http://127.0.0.1:8123/v1 OPENAI_API_KEY=replay")
    add_replay_arguments(r)
    r.set_defaults(func=cmd_replay_server)

    e = sub.add_parser("export-table", help="write a named real table (e.g. wmt24/en-de/bleu) to a file",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog="example:\n  " + 'lm-eval-adaptive export-table wmt25/en-de/xcomet --out ende_xcomet.parquet')
    e.add_argument("name")
    e.add_argument("--out", required=True, help="output .csv/.csv.gz/.jsonl/.parquet")
    e.set_defaults(func=cmd_export_table)
    return accept_both_spellings(p)


def main(argv=None, *, checked_early: bool = False) -> int:
    """The command line. ``checked_early``: ``run --adaptive``'s checks that need no task were made already
    (by the console script, :mod:`lm_eval_adaptive.cli.entry`), so they are not made twice here."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # the secrets of this command line (and --redact values) never show: not in a file, not on
    # stdout or stderr, not in a log message or a parse error
    with redacting(argv):
        return _main(argv, checked_early)


def _main(argv: list, checked_early: bool = False) -> int:
    try:  # every name, model id and path is text: a byte that is not UTF-8 is refused before anything is done
        for k, a in enumerate(argv):
            check_text(a, f"argument {k + 1}")
    except InputError as e:
        return refused(e)
    if argv and argv[0] == "run" and not checked_early:  # the checks that need no task: before the task index
        try:
            refuse_before_parsing(argv[1:])
        except InputError as e:
            return refused(e)
    parser = build_parser(with_run=bool(argv) and argv[0] == "run")
    args = parser.parse_args(argv)
    if getattr(args, "resume", None):  # a resumed run compares what the command line set with its journal
        args.explicit = explicit_options(build_parser(with_run=False), argv)
    if getattr(args, "scaling", "x") is None:

        args.scaling = DEFAULT_SCALING
    if getattr(args, "method", "x") is None:

        args.method = DEFAULT_METHOD
    try:
        with progress_hook(table_progress):  # the data layer's long work (scoring a table) shown on stderr
            return int(args.func(args) or 0)
    except InputError as e:
        return refused(e)
    except RuntimeError as e:

        if not isinstance(e, ModelCallError):
            raise
        print(f"error: {shown(e, lines=True)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except OSError as e:  # disk full, a folder made read-only, ...: one line; the journal keeps what was paid
        where = f": {shown(e.filename)}" if getattr(e, "filename", None) else ""
        print(f"error: a file could not be written or read{where}: {shown(e.strerror or e)}"
              + (" (every paid call is in the run's journal: continue with --resume DIR once it can be written)"
                 if getattr(args, "output", None) or getattr(args, "resume", None) else ""), file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""``lm-eval-adaptive run``: the harness's own ``run`` parser plus the adaptive argument group.

Without ``--adaptive`` the harness's ``run`` executes unchanged; with it
:func:`lm_eval_adaptive.harness.run.run_adaptive` runs with the adaptive settings gathered in an
:class:`~lm_eval_adaptive.harness.run.AdaptiveRunConfig` (see docs/harness.md). Every adaptive
setting is checked while the command line is parsed (:mod:`.arguments`).
"""

from __future__ import annotations

import argparse

from lm_eval_adaptive.cli.arguments import (
    nonnegative_float,
    positive_float,
    positive_int,
)
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness.lm_eval_compat import add_harness_run_parser
from lm_eval_adaptive.harness.run import AdaptiveRunConfig, execute_run
from lm_eval_adaptive.harness.scorer import DEFAULT_TIMEOUT_S
from lm_eval_adaptive.live.cost_forecast import forecast_adaptive_run

__all__ = ["add_run_parser", "split_run_arguments", "RUN_EXAMPLE"]

RUN_EXAMPLE = """\
example:
  lm-eval-adaptive run --model litellm --model_args model=openai/GPT-4 --tasks wmt24_en-de \\
      --include_path task_configs --apply_chat_template --adaptive --bank wmt24_en-de.bleu --max-items 100
"""


def split_run_arguments(args: argparse.Namespace) -> tuple[argparse.Namespace, AdaptiveRunConfig | None]:
    """(the harness's own ``run`` arguments, the adaptive settings or None without ``--adaptive``)."""
    ours = {k: v for k, v in vars(args).items() if k == "adaptive" or k.startswith("adaptive_")}
    harness = argparse.Namespace(**{k: v for k, v in vars(args).items() if k not in ours})
    if not ours.get("adaptive"):
        if ours.get("adaptive_dry_run"):
            raise InputError("--dry-run forecasts an adaptive run: add --adaptive")
        return harness, None
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
    p.set_defaults(func=lambda args: execute_run(*split_run_arguments(args), harness_execute,
                                                 forecast=forecast_adaptive_run))
    g = p.add_argument_group("adaptive (lm-eval-adaptive)")
    g.add_argument("--adaptive", action="store_true",
                   help="run a computerized adaptive test instead of every document")
    g.add_argument("--bank", dest="adaptive_bank", nargs="+", default=None, metavar="[TASK=]BANK",
                   help="item bank per task (TASK=PATH; a bare PATH when there is one task), or a shipped "
                        "bank's name (wmt24_en-de.bleu); default: the task's shipped bank when only one fits "
                        "the task and --metric")
    g.add_argument("--se-target", dest="adaptive_se_target", metavar="SE", type=nonnegative_float, default=0.2,
                   help="stop when the ability SE falls to this (default 0.2)")
    g.add_argument("--min-items", dest="adaptive_min_items", metavar="N", type=positive_int, default=30,
                   help="minimum documents per task before the SE rule may stop (default 30)")
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
    g.add_argument("--dry-run", dest="adaptive_dry_run", action="store_true",
                   help="build no model and call nothing: forecast the items and dollars per task (typical and "
                        "worst case) beside a full run's cost, from the bank's token counts and the price")
    g.add_argument("--timeout", dest="adaptive_timeout", metavar="SECONDS", type=positive_float, default=None,
                   help=f"seconds one model or judge call may take (default: the model's timeout= "
                        f"argument, else {DEFAULT_TIMEOUT_S:g})")
    return p

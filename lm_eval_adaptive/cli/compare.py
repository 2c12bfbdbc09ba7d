"""``lm-eval-adaptive compare``: two or more single-model ``run --adaptive`` results, which pairs are ordered.

The runs must be of one task and one bank (:func:`~lm_eval_adaptive.harness.comparison.compare_runs`, else
one ``error:`` line naming the difference). For each model: θ̂ ± SE and the full-task estimate on the
metric's scale; for each pair: ordered at γ or not on the bank's scale, on the metric's scale, and on the
documents both runs scored (labelled as a statement about those documents); a pair not ordered gets the
``rank`` command line that ranks the two models together. The report goes to stdout (at most 120 columns
when it is not a terminal); ``--json FILE`` writes it as JSON (docs/outputs.md).
"""

from __future__ import annotations

import argparse

from lm_eval_adaptive.atomic import write_json
from lm_eval_adaptive.cli.arguments import confidence_level
from lm_eval_adaptive.cli.report import report_console
from lm_eval_adaptive.data.files import check_outputs
from lm_eval_adaptive.display import shown
from lm_eval_adaptive.harness.comparison import Comparison, compare_runs

__all__ = ["add_compare_parser", "cmd_compare", "print_comparison", "command_lines"]

COMPARE_EXAMPLES = """\
example:
  lm-eval-adaptive compare runs/openai__Mistral-Large/results_*.json runs/openai__GPT-4/results_*.json
  # each from a single-model run of one task and bank, such as
  lm-eval-adaptive run --model litellm --model_args model=openai/GPT-4 --tasks wmt24_en-de \\
      --include_path task_configs --apply_chat_template --output_path runs/ --adaptive --bank wmt24_en-de.bleu

A pair is ordered when both the bank's scale (θ̂ ± SE) and the metric's scale (the full-task estimates)
order it at γ. Two single-model runs stop at their own SE target and often overlap: for a pair that is not
ordered, the command prints the `rank` command line that ranks the two models together, spending on the
documents that separate them."""


def add_compare_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("compare", help="compare run --adaptive results of one task and bank: which pairs are "
                                       "ordered at γ",
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=COMPARE_EXAMPLES)
    p.add_argument("results", nargs="+", metavar="RESULTS.json",
                   help="results files of `run --adaptive` (runs/<model>/results_<date>.json), two or more")
    p.add_argument("--confidence", type=confidence_level, default=0.95, help="γ (default 0.95)")
    p.add_argument("--task", default=None, help="the task to compare when the files share several")
    p.add_argument("--bank", default=None, metavar="BANK",
                   help="the runs' bank (a file or a shipped bank's name) when it is no longer where they recorded it")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the comparison as JSON here")
    p.set_defaults(func=cmd_compare)
    return p


def cmd_compare(args) -> int:
    check_outputs([("--json", args.json)], inputs=args.results)
    c = compare_runs(args.results, confidence=args.confidence, task=args.task, bank=args.bank)
    print_comparison(report_console(), c)
    if args.json:
        write_json(args.json, c.to_dict())
    return 0


def _signed(x: float, fmt: str) -> str:
    return format(x, "+" + fmt)


def _range(m: dict) -> str:
    rng = m.get("items_to_settle_range")
    return f"; 80% range {rng[0]}–{rng[1]} documents" if rng and rng[1] > 0 else ""


def print_comparison(console, c: Comparison) -> None:
    """Each model, then each pair: ordered or not on each scale, and the rank command for those that are not."""
    g = c.confidence
    console.print(f"compare: {len(c.runs)} runs of {c.task} ({c.metric}), bank {c.bank_id} ({c.bank}); "
                  f"γ = {g:g}", highlight=False)
    for r in c.runs:
        e = c.estimates[r.model]
        console.print(f"  {shown(r.model)}: θ̂ {r.theta:+.3f} ± {r.se:.3f}; full-task {c.metric} {e['estimate']:.4f} "
                      f"[{e['lower']:.4f}, {e['upper']:.4f}] ({100 * e['level']:g}%, metric scale); "
                      f"{r.block['items']} of {r.block['task_docs']} documents", highlight=False)
    for p in c.pairs:
        a, b = shown(p.a), shown(p.b)
        verdict = "ordered" if p.ordered else "not ordered"
        console.print(f"{a} vs {b}: {verdict} at γ = {g:g}", highlight=False)
        t, m, s = p.theta, p.metric, p.shared
        console.print(f"  bank scale: θ̂ difference {_signed(t['difference'], '.3f')} ± {t['se']:.3f}, "
                      f"P({a} > {b}) = {t['p']:.3f}: {'ordered' if t['ordered'] else 'not ordered'}", highlight=False)
        console.print(f"  metric scale: full-task {c.metric} difference {_signed(m['difference'], '.4f')} ± {m['se']:.4f}, "
                      f"P({a} > {b}) = {m['p']:.3f}: {'ordered' if m['ordered'] else 'not ordered'}"
                      + (f" (about {m['items_to_settle']} more documents, ${m['cost_to_settle_usd']:.4f}, would "
                         "settle it at this difference" + _range(m) + ")" if not m["ordered"] and m["items_to_settle"]
                         else ""),
                      highlight=False)
        if s["difference"] is None:
            console.print(f"  shared documents: {s['documents']} (too few for a paired difference)", highlight=False)
        else:
            console.print(f"  on the {s['documents']} documents both runs scored (a statement about these documents, "
                          f"not the task): mean {c.metric} difference {_signed(s['difference'], '.4f')} "
                          f"[{s['lower']:.4f}, {s['upper']:.4f}]: "
                          + (f"{a} higher on them" if s["ordered"] and s["difference"] > 0 else
                             f"{b} higher on them" if s["ordered"] else "not ordered"), highlight=False)
        if p.rank_command:
            console.print("  to order them, rank the two together (it spends on the documents that separate them; a "
                          "pair it cannot order is reported as a tie):", highlight=False)
            console.print(command_lines(p.rank_command, console.width, indent="    "), highlight=False,
                          soft_wrap=True)


def command_lines(command: str, width: int, *, indent: str = "") -> str:
    """A shell command broken at argument boundaries into lines of at most ``width`` columns (a longer
    argument alone on its line), each but the last ending in `` \\``: it pastes into a shell as it is."""
    import shlex

    words = [shlex.quote(w) for w in shlex.split(command)]
    lines, line = [], indent
    for w in words:
        if line.strip() and len(line) + 1 + len(w) + 2 > width:
            lines.append(line + " \\")
            line = indent + "    " + w
        else:
            line = line + (" " if line.strip() else "") + w
    lines.append(line)
    return "\n".join(lines)

"""Two or more single-model ``run --adaptive`` results compared: which pairs are ordered at γ, and on what.

``lm-eval-adaptive compare A.json B.json …`` reads the results files ``run --adaptive`` writes (each task's
``adaptive`` block: θ̂ ± SE, and each administered document's bank item id, raw score and whether a random
slot chose it). The runs must be of the same task and the same bank. Every pair is judged three ways:

* **the bank's scale**: θ̂ ± SE of the two runs, ordered when P(θ_a > θ_b) = Φ(Δθ̂/√(SE_a² + SE_b²)) is
  outside [(1−γ)/2, 1 − (1−γ)/2] (the ranker's own rule,
  :class:`~lm_eval_adaptive.engine.ranking.pairs.rules.OrderConfidence`);
* **the metric's scale**: the full-task means (:class:`~lm_eval_adaptive.engine.ranking.pairs.metric_scale.MetricScale`:
  observed scores plus the bank's predictions, corrected by the random share's residuals), their
  difference and its SE, judged by :func:`~lm_eval_adaptive.engine.ranking.pairs.outcomes.judge_pairs` (Student's t
  at γ, two-sided), with the items and dollars more items would need to settle it;
* **the documents both runs scored**: the paired mean difference of the raw metric on those documents
  and its t interval at γ. It is a statement about those documents, not about the task: adaptive runs
  choose different documents for different models, and their common documents are not a sample of the
  task.

Two runs of different models each stop at their own SE target and mostly overlap: a pair neither scale
orders is pointed to ``rank``, which spends on the documents that separate the pair, with the command
line that ranks the two models (from the runs' own settings). Nothing here calls a model or prints.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.special import stdtrit

from lm_eval_adaptive.data.files import read_json
from lm_eval_adaptive.data.prices import Price
from lm_eval_adaptive.engine.ranking.pairs.metric_scale import MetricScale
from lm_eval_adaptive.engine.ranking.pairs.outcomes import ORDERED, judge_pairs
from lm_eval_adaptive.engine.ranking.pairs.rules import OrderConfidence
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness.bank_source import load_bank

__all__ = ["RunRecord", "PairComparison", "Comparison", "read_run", "compare_runs"]


@dataclass(frozen=True)
class RunRecord:
    """One ``run --adaptive`` results file's task: what the comparison reads of it."""

    path: str
    model: str
    model_type: str
    model_args: str
    block: dict

    @property
    def theta(self) -> float:
        return float(self.block["theta"])

    @property
    def se(self) -> float:
        return float(self.block["se"])


@dataclass(frozen=True)
class PairComparison:
    """One pair, ``a`` the higher full-task estimate: the three judgements and, when neither scale orders
    the pair, the ``rank`` command line that would."""

    a: str
    b: str
    theta: dict
    metric: dict
    shared: dict
    rank_command: str | None = None

    @property
    def ordered(self) -> bool:
        """Ordered at γ on both the bank's and the metric's scale."""
        return bool(self.theta["ordered"] and self.metric["ordered"])

    def to_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "ordered": self.ordered, "theta": dict(self.theta),
                "metric": dict(self.metric), "shared": dict(self.shared), "rank_command": self.rank_command}


@dataclass(frozen=True)
class Comparison:
    """The runs of one task and bank, each model's full-task estimate, and every pair."""

    task: str
    metric: str
    bank_id: str
    bank: str
    confidence: float
    runs: list
    estimates: dict
    pairs: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"task": self.task, "metric": self.metric, "bank_id": self.bank_id, "bank": self.bank,
                "confidence": self.confidence,
                "runs": [{"file": r.path, "model": r.model, "theta": r.theta, "se": r.se,
                          "items": int(r.block["items"]), "task_docs": int(r.block["task_docs"]),
                          "cost_usd": float(r.block.get("cost_usd") or 0.0), "metric_estimate": self.estimates[r.model]}
                         for r in self.runs],
                "pairs": [p.to_dict() for p in self.pairs]}


def _model_of(results: dict) -> tuple[str, str, str]:
    """(name, harness model type, model args as the command line spells them) of a results file."""
    cfg = results.get("config") or {}
    mtype = str(cfg.get("model") or results.get("model_source") or "litellm")
    args = cfg.get("model_args")
    if isinstance(args, dict):
        name = args.get("model") or args.get("pretrained")
        pairs = [(str(k), str(v)) for k, v in args.items()]
    else:
        pairs = [tuple(x.split("=", 1)) for x in str(args or "").split(",") if "=" in x]
        name = next((v for k, v in pairs if k.strip() in ("model", "pretrained")), None)
    # a redacted value (a key, a token: ***) is no use on a command line: the user's environment gives it
    spelled = ",".join(f"{k.strip()}={v}" for k, v in pairs if "***" not in v)
    return str(name or results.get("model_name") or mtype), mtype, spelled


def read_run(path, task: str | None = None) -> tuple[dict, list[str]]:
    """(the results file's ``adaptive`` blocks, its tasks); InputError when it is not a results file of
    ``run --adaptive``."""
    d = read_json(path, what="results file")
    blocks = d.get("adaptive") if isinstance(d, dict) else None
    if not isinstance(blocks, dict) or not blocks:
        raise InputError("not a `run --adaptive` results file (it has no \"adaptive\" block)", path=str(path))
    return d, list(blocks)


def _task_of(files: list, tasks: list, task: str | None) -> str:
    if task is not None:
        lacking = [f for f, t in zip(files, tasks) if task not in t]
        if lacking:
            raise InputError(f"--task {task}: {', '.join(map(str, lacking))} ran no such task (its tasks: "
                             f"{'; '.join(', '.join(t) for f, t in zip(files, tasks) if f in lacking)})")
        return task
    common = set(tasks[0]).intersection(*map(set, tasks[1:]))
    if not common:
        raise InputError("the runs are of different tasks (" + "; ".join(f"{f}: {', '.join(t)}" for f, t in
                         zip(files, tasks)) + "); compare takes runs of one task and bank")
    if len(common) > 1:
        raise InputError(f"the runs share the tasks {', '.join(sorted(common))}: name one with --task")
    return next(iter(common))


def _shared(a: dict, b: dict, confidence: float) -> dict:
    """The paired mean difference a − b of the raw metric on the documents both runs scored."""
    ra = {x["item_id"]: float(x["raw"]) for x in a["administered"]}
    rb = {x["item_id"]: float(x["raw"]) for x in b["administered"]}
    common = [i for i in ra if i in rb]
    n = len(common)
    out = {"documents": n, "difference": None, "se": None, "lower": None, "upper": None, "ordered": False,
           "about": "the documents both runs scored, not the task"}
    if n < 2:
        return out
    d = np.array([ra[i] - rb[i] for i in common])
    mean, se = float(d.mean()), float(d.std(ddof=1) / math.sqrt(n))
    h = float(stdtrit(n - 1, 1 - (1 - confidence) / 2)) * se
    out.update({"difference": mean, "se": se, "lower": mean - h, "upper": mean + h,
                "ordered": bool(se > 0 and (mean - h > 0 or mean + h < 0)) or (se == 0 and mean != 0)})
    return out


def _flag(name: str, value) -> list[str]:
    if value in (None, False, "", {}):
        return []
    if value is True:
        return [name]
    if isinstance(value, dict):
        value = ",".join(f"{k}={v}" for k, v in value.items())
    return [name, str(value)]


def _rank_command(a: RunRecord, b: RunRecord, bank: str, task: str, budget: float) -> str:
    """The ``rank`` command line that ranks the two runs' models on their task and bank, with their settings."""
    args = a.block.get("task_args") or {}
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{a.model.split('/')[-1]}_vs_{b.model.split('/')[-1]}")
    argv = ["lm-eval-adaptive", "rank", "--models", f"{a.model_type}:{a.model_args}", f"{b.model_type}:{b.model_args}",
            "--tasks", task, "--bank", bank]
    for flag, key in (("--include_path", "include_path"), ("--apply_chat_template", "apply_chat_template"),
                      ("--fewshot_as_multiturn", "fewshot_as_multiturn"), ("--num_fewshot", "num_fewshot"),
                      ("--gen_kwargs", "gen_kwargs"), ("--system_instruction", "system_instruction")):
        argv += _flag(flag, args.get(key))
    prices = [p for p in (a.block.get("priced_by_default"), b.block.get("priced_by_default")) if p]
    if prices:
        d = a.block["price"] if a.model in (a.block.get("priced_by_default") or []) else b.block["price"]
        argv += ["--price", f"default={d['input_per_mtok']:g},{d['output_per_mtok']:g}"]
    argv += ["--budget-usd", f"{budget:g}", "--output", f"runs/rank_{safe}"]
    return " ".join(shlex.quote(x) for x in argv)


def compare_runs(paths, *, confidence: float = 0.95, task: str | None = None, bank=None) -> Comparison:
    """Compare the ``run --adaptive`` results files ``paths`` (see the module docstring). ``task``: the task
    to compare when the files share several; ``bank``: the bank file or shipped name, when the one the runs
    recorded is not where they say. InputError (one line) naming what differs when the runs are not of one
    task and bank."""
    paths = [str(p) for p in paths]
    if len(paths) < 2:
        raise InputError("compare needs two or more results files of `run --adaptive`")
    if not (0.5 < confidence < 1):
        raise InputError(f"--confidence must be in (0.5, 1), got {confidence}")
    read = [read_run(p) for p in paths]
    task = _task_of(paths, [t for _, t in read], task)
    runs, seen = [], {}
    for p, (d, _) in zip(paths, read):
        block = d["adaptive"][task]
        if "metrics" in block:
            raise InputError(f"task {task!r} was run with a bank per metric (several banks); compare takes "
                             "single-bank runs", path=p)
        if "administered" not in block:
            raise InputError("the run records no administered documents (written by an older lm-eval-adaptive); "
                             "run it again to compare it", path=p)
        name, mtype, margs = _model_of(d)
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name = f"{name} ({Path(p).name})"
        runs.append(RunRecord(p, name, mtype, margs, block))
    ids = {r.block.get("bank_id") for r in runs}
    if len(ids) > 1:
        raise InputError("the runs used different banks (" + "; ".join(
            f"{r.path}: {r.block.get('bank_id')} ({r.block.get('bank') or r.block.get('bank_metric')})" for r in runs)
            + "); compare takes runs of one task and bank")
    bank_id = runs[0].block.get("bank_id")
    ref = bank if bank is not None else runs[0].block.get("bank")
    if not ref:
        raise InputError("the runs do not record where their bank is: give it with --bank FILE (or a shipped "
                         f"bank's name); its id is {bank_id}")
    the_bank = load_bank(ref)
    if the_bank.bank_id != bank_id:
        raise InputError(f"--bank {ref}: its id is {the_bank.bank_id}, the runs used {bank_id}")
    metric = runs[0].block.get("metric") or the_bank.metric or "metric"

    # the metric's scale: full-task means and their differences from the raw scores and the random slots
    K, N = len(runs), the_bank.n_items
    raw, rnd = np.full((K, N), np.nan), np.zeros((K, N), dtype=bool)
    for k, r in enumerate(runs):
        adm = r.block["administered"]
        idx = the_bank.index_of([x["item_id"] for x in adm])
        raw[k, idx] = [float(x["raw"]) for x in adm]
        rnd[k, idx] = [bool(x.get("random")) for x in adm]
    names = [r.model for r in runs]
    scale = MetricScale(the_bank, raw, rnd, np.array([r.theta for r in runs]), names=names,
                        se_theta=np.array([r.se for r in runs]), level=confidence)
    costs = np.stack([Price.per_million(r.block["price"]["input_per_mtok"], r.block["price"]["output_per_mtok"],
                                        "run").item_costs(the_bank.input_tokens, the_bank.output_tokens)
                      * np.ones(N) for r in runs])
    judged = judge_pairs(scale, confidence=confidence, item_costs=costs)
    estimates = {e.name: {"estimate": e.estimate, "lower": e.lower, "upper": e.upper, "se": e.se,
                          "level": e.level, "method": e.method, "items_seen": e.items_seen,
                          "items_random": e.items_random, "items_total": e.items_total} for e in scale.entries()}
    rule = OrderConfidence(confidence)
    by = {r.model: r for r in runs}
    pairs = []
    for rec in judged.to_records():
        a, b = by[rec["a"]], by[rec["b"]]
        p = float(rule.probability(a.theta, a.se, b.theta, b.se))
        theta = {"difference": a.theta - b.theta, "se": math.hypot(a.se, b.se), "p": p,
                 "ordered": bool(rule.ordered(a.theta, a.se, b.theta, b.se))}
        met = {"difference": rec["difference"], "se": rec["se"], "p": rec["p_order"],
               "ordered": rec["outcome"] == ORDERED, "items_to_settle": rec["items_to_settle"],
               "cost_to_settle_usd": rec["cost_to_settle_usd"],
               "items_to_settle_range": rec.get("items_to_settle_range")}
        pair = PairComparison(a.model, b.model, theta, met, _shared(a.block, b.block, confidence))
        if not pair.ordered:
            spent = float(a.block.get("cost_usd") or 0) + float(b.block.get("cost_usd") or 0)
            budget = max(2 * rec["cost_to_settle_usd"], spent, 0.01)
            budget = math.ceil(budget * 100) / 100
            pair = PairComparison(a.model, b.model, theta, met, pair.shared,
                                  _rank_command(a, b, str(ref), task, budget))
        pairs.append(pair)
    return Comparison(task=task, metric=str(metric), bank_id=str(bank_id), bank=str(ref), confidence=confidence,
                      runs=runs, estimates=estimates, pairs=pairs)

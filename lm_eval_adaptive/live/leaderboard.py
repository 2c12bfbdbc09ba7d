"""Leaderboards: create one from full runs, and refresh it by placing new models adaptively within a budget.

A leaderboard file (JSON, ``format: lm-eval-adaptive/leaderboard``, version 1)::

    {"format": "lm-eval-adaptive/leaderboard", "version": 1,
     "task": "wmt24_en-de", "metric": "bleu", "item_field": "id",
     "history": "wmt24/en-de/bleu",          # response table of the full runs (file path
                                             # relative to this file, or a named table)
     "confidence": 0.95,
     "entries": [{"model", "source": "full_run" | "adaptive", "rank", "theta", "se",
                  "theta_ci95", "metric": {"value" | "estimate", "lower", "upper"},
                  "items", "tie_group", ...}, ...]}

``refresh`` takes the models with ``source: full_run`` as the calibration history (their
per-item scores in ``history``) and as anchors: their abilities are estimated from every
item they answered, so their intervals are narrow. Each new model is then evaluated
live, adaptively (the ranker's allocation over unsettled adjacent pairs), until its order
against its neighbours is settled at γ or the dollar cap is hit, and is entered with its
interval, estimated full-task metric and tie group. The file is replaced atomically:
a failed or interrupted refresh leaves it as it was.

Several leaderboards of one task, one per metric (``refresh --leaderboard bleu.json chrf.json``),
are refreshed together: their full-run entries must be the same models; each new model's
documents are generated once and scored by every board's metric
(:class:`~lm_eval_adaptive.engine.multi_metric_ranker.MultiMetricRanker`, one bank per board),
under one cap and one journal, and each board gets its own entries.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from pathlib import Path

import numpy as np

from lm_eval_adaptive.atomic import write_json
from lm_eval_adaptive.data.files import read_json
from lm_eval_adaptive.data.tables import load_any_table, table_item_field
from lm_eval_adaptive.display import shown
from lm_eval_adaptive.engine.estimation import Z95
from lm_eval_adaptive.engine.multi_metric_ranker import MultiMetricRanker
from lm_eval_adaptive.engine.pair_rules import pair_rule_for
from lm_eval_adaptive.engine.person_fit import misfit_note
from lm_eval_adaptive.engine.ranker import AdaptiveRanker
from lm_eval_adaptive.engine.self_check import calibrate_checked
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness.binding import DOC_ID, record_item_field
from lm_eval_adaptive.harness.sample_logs import table_from_sample_logs
from lm_eval_adaptive.live.cost_forecast import forecast_refresh
from lm_eval_adaptive.live.driver import LiveRun, RetryPolicy
from lm_eval_adaptive.live.journal import JOURNAL_NAME, env_secrets
from lm_eval_adaptive.redaction import redact
from lm_eval_adaptive.live.session import (
    LiveProgress,
    LiveSettings,
    Setup,
    announce,
    check_live_settings,
    cheapest_call_check,
    journal_cap_change,
    live_prices,
    model_rows,
    note_default_prices,
    start_run,
)
from lm_eval_adaptive.live.terminal import styled

__all__ = ["LEADERBOARD_FORMAT", "REFRESH_KEYS", "load_leaderboard", "create_leaderboard", "history_beside", "refresh",
           "print_leaderboard", "new_models_stop"]

LEADERBOARD_FORMAT = "lm-eval-adaptive/leaderboard"
LEADERBOARD_VERSION = 1


def load_leaderboard(path) -> dict:
    """The leaderboard in ``path``, read under the input size limit and checked field by field:
    InputError naming the file and the field when it is not a leaderboard of this format."""
    p = Path(path)
    if not p.is_file():
        raise InputError("no such leaderboard file", path=str(p))
    d = read_json(p, what="leaderboard")
    if not isinstance(d, dict) or d.get("format") != LEADERBOARD_FORMAT:
        raise InputError(f"not a leaderboard file (expected \"format\": \"{LEADERBOARD_FORMAT}\")", path=str(p))
    if d.get("version") != LEADERBOARD_VERSION:
        raise InputError(f"leaderboard version {d.get('version')!r} is not supported", path=str(p))
    for k in ("task", "metric", "history", "entries"):
        if k not in d:
            raise InputError(f"the leaderboard has no {k!r}", path=str(p))
    _check_board(d, str(p))
    names = [e.get("model") for e in d["entries"]]
    if any(not isinstance(n, str) or not n for n in names) or len(set(names)) != len(names):
        raise InputError("every entry needs a unique \"model\" name", path=str(p))
    return redact(d, by_key=False)  # a board from elsewhere is shown (page, plot, report) without secrets


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _kind(x) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "true/false",
            type(None): "null"}.get(type(x), "a number" if isinstance(x, (int, float)) else type(x).__name__)


# the leaderboard's fields, and each entry's and refresh's: (name, check, what it must be); absent
# optional fields are allowed, present ones must be of their kind
_TEXT = (lambda v: isinstance(v, str) and v != "", "a non-empty string")
_OPT_TEXT = (lambda v: v is None or isinstance(v, str), "a string or null")
_NUMBER = (_is_number, "a finite number")
_OPT_NUMBER = (lambda v: v is None or _is_number(v), "a finite number or null")
_BOARD_FIELDS = {"task": _TEXT, "metric": _TEXT, "history": _TEXT, "item_field": _OPT_TEXT,
                 "confidence": (lambda v: _is_number(v) and 0 < v < 1, "a number between 0 and 1"),
                 "bank_id": _OPT_TEXT, "updated": _OPT_TEXT,
                 "entries": (lambda v: isinstance(v, list), "an array of entries"),
                 "refreshes": (lambda v: isinstance(v, list), "an array")}
_ENTRY_FIELDS = {"model": _TEXT, "source": _OPT_TEXT,
                 "rank": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "an integer >= 1"),
                 "theta": _NUMBER, "se": (lambda v: _is_number(v) and v >= 0, "a finite number >= 0"),
                 "theta_ci95": (lambda v: isinstance(v, list) and len(v) == 2 and all(map(_is_number, v)),
                                "an array of two finite numbers"),
                 "metric": (lambda v: v is None or (isinstance(v, dict) and all(
                     _is_number(v[k]) for k in ("value", "estimate", "lower", "upper") if k in v)
                     and ("estimate" not in v or ("lower" in v and "upper" in v))),
                     "an object of finite numbers (value, or estimate with lower and upper)"),
                 "items": (lambda v: v is None or (_is_number(v) and v >= 0), "a number >= 0"),
                 "tie_group": _OPT_TEXT, "cost_usd": _OPT_NUMBER, "judge_cost_usd": _OPT_NUMBER,
                 "full_run_cost_usd": _OPT_NUMBER, "added": _OPT_TEXT, "spec": _OPT_TEXT}
_REFRESH_FIELDS = {"at": _OPT_TEXT, "budget_usd": _OPT_NUMBER, "spent_usd": _OPT_NUMBER,
                   "judge_spent_usd": _OPT_NUMBER, "stopped_because": _OPT_TEXT,
                   "added": (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
                             "an array of model names"),
                   "failed": (lambda v: isinstance(v, dict), "an object"),
                   "confidence": _OPT_NUMBER,
                   "priced_by_default": (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
                                         "an array of model names")}


def _check_fields(obj: dict, fields: dict, where: str, path: str) -> None:
    for key, (ok, what) in fields.items():
        if key in obj and not ok(obj[key]):
            raise InputError(f"leaderboard field {where}{key} must be {what}, not {_kind(obj[key])} "
                             f"({json.dumps(obj[key], default=str)[:60]})", path=path)


def _check_board(d: dict, path: str) -> None:
    """Every field a leaderboard's reader uses is of its kind (see the module docstring)."""
    _check_fields(d, _BOARD_FIELDS, "", path)
    for i, e in enumerate(d["entries"]):
        if not isinstance(e, dict):
            raise InputError(f"leaderboard field entries[{i}] must be an object, not {_kind(e)}", path=path)
        if "model" not in e:
            raise InputError(f"leaderboard field entries[{i}].model is missing", path=path)
        _check_fields(e, _ENTRY_FIELDS, f"entries[{i}].", path)
    for i, r in enumerate(d.get("refreshes") or []):
        if not isinstance(r, dict):
            raise InputError(f"leaderboard field refreshes[{i}] must be an object, not {_kind(r)}", path=path)
        _check_fields(r, _REFRESH_FIELDS, f"refreshes[{i}].", path)


def _history_table(lb: dict, lb_path: Path):

    spec = str(lb["history"])
    cand = (lb_path.parent / spec)
    return load_any_table(str(cand) if cand.exists() else spec, metric=lb["metric"])


def _anchors(lb: dict, table, path) -> list[str]:
    names = [str(m) for m in table.models]
    full = [e["model"] for e in lb["entries"] if e.get("source") == "full_run"]
    missing = [m for m in full if m not in names]
    if missing:
        raise InputError(f"full-run entries {missing} have no scores in the history table {lb['history']!r}",
                         path=str(path))
    if len(full) < 2:
        raise InputError("a leaderboard needs at least 2 full-run entries (the calibration history)", path=str(path))
    return full


def _bank(lb: dict, table, anchors):

    bank = calibrate_checked(table.select_models(anchors), metric=lb["metric"], task=lb["task"])
    # a board whose history is a named table (wmt24/en-de/bleu) maps its ids by that table's field
    return record_item_field(bank, lb.get("item_field") or table_item_field(str(lb["history"])))


def _anchor_examinees(bank, table, anchors, ranker) -> None:
    """Give each anchor every item it answered (full run), at no cost; then nothing more to ask."""
    raw = table.mean_matrix()
    pos = {str(v): i for i, v in enumerate(np.asarray(table.items, dtype=object).tolist())}
    cols = np.array([pos[str(x)] for x in bank.item_ids])
    names = [str(m) for m in table.models]
    for m in anchors:
        row = raw[names.index(m), cols]
        items = np.flatnonzero(~np.isnan(row))
        y = np.clip(bank.scale(items, row[items]), 0.0, 1.0)
        ranker.record_many(m, items, y, costs=np.zeros(items.size))
        ranker.exclude(m, np.arange(bank.n_items))


def _joint_anchor_examinees(banks: dict, tables: dict, anchors, ranker) -> None:
    """:func:`_anchor_examinees` for a several-board refresh: each anchor's full-run scores under every
    board's metric, recorded on the joint items at no cost (NaN where a metric has none)."""
    ids = ranker.item_ids
    scores = {}
    for k, bank in banks.items():
        table = tables[k]
        raw = table.mean_matrix()
        pos = {str(v): i for i, v in enumerate(np.asarray(table.items, dtype=object).tolist())}
        cols = np.array([pos[i] for i in ids])
        names = [str(m) for m in table.models]
        idx = bank.index_of(ids)
        scores[k] = {}
        for m in anchors:
            row = raw[names.index(m), cols]
            y = np.full(row.size, np.nan)
            ok = ~np.isnan(row)
            y[ok] = np.clip(bank.scale(idx[ok], row[ok]), 0.0, 1.0)
            scores[k][m] = y
    every = np.arange(len(ids))
    for m in anchors:
        ys = {k: scores[k][m] for k in banks}
        have = np.flatnonzero(np.any([~np.isnan(y) for y in ys.values()], axis=0))
        ranker.record_many(m, have, {k: y[have] for k, y in ys.items()}, costs=np.zeros(have.size))
        ranker.exclude(m, every)


def _full_run_metric(table, model) -> float:
    raw = table.mean_matrix()
    return float(np.nanmean(raw[[str(m) for m in table.models].index(model)]))


# ---------------------------------------------------------------------------- create
def history_beside(out) -> str:
    """Where ``leaderboard --samples ... --out OUT`` writes the scores of the sample logs."""
    out = Path(out)
    return str(out.with_name(out.name.removesuffix(".json") + ".history.csv.gz"))


def create_leaderboard(history: str | None, *, task: str, metric: str, models=None, item_field=None,
                       confidence: float = 0.95, out, samples=None) -> dict:
    """Write a leaderboard of full runs: from a response table (``history``), or from harness
    sample logs (``samples``: their scores are written beside it as ``<name>.history.csv.gz``)."""

    out = Path(out)
    if (history is None) == (samples is None):
        raise InputError("give the full runs as --history TABLE or as --samples PATH... (not both)")
    if samples is not None:

        table = table_from_sample_logs(samples, task=task, metric=metric)
        item_field = item_field or DOC_ID  # sample logs name documents by their harness doc id
        history = history_beside(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        table.write(history)
    item_field = item_field or table_item_field(history)  # a named table says which field its ids are
    table = load_any_table(history, metric=metric)
    names = [str(m) for m in table.models]
    models = list(models) if models else names
    unknown = [m for m in models if m not in names]
    if unknown:
        raise InputError(f"--models: not in the history table: {', '.join(unknown)}", path=history)
    hist = history
    if Path(history).exists():  # store a path relative to the leaderboard file when possible
        hp = Path(history).resolve()
        try:
            hist = str(hp.relative_to(out.resolve().parent))
        except ValueError:
            hist = str(hp)
    lb = {"format": LEADERBOARD_FORMAT, "version": LEADERBOARD_VERSION, "task": task, "metric": metric,
          "item_field": item_field, "history": hist, "confidence": confidence,
          "entries": [{"model": m, "source": "full_run"} for m in models]}
    bank = _bank(lb, table, models)
    ranker = AdaptiveRanker(bank, models, confidence=confidence)
    _anchor_examinees(bank, table, models, ranker)
    res = ranker.result()
    lb["entries"] = _entries(res, ranker.examinees, {m: {"model": m, "source": "full_run",
                                               "metric": {"value": _full_run_metric(table, m)}} for m in models},
                             new={})
    lb["bank_id"] = bank.bank_id
    lb["updated"] = _now()
    _write(out, lb)
    return lb


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _write(path: Path, lb: dict) -> None:

    write_json(path, redact(lb, by_key=False))


def _entries(res, examinees, old: dict, new: dict) -> list[dict]:
    """Entries in rank order with θ, SE, interval and tie group (groups named by their best member);
    ``examinees``: model → its examinee on the board's bank."""
    group_of = {m: g[0] for g in res.tie_groups for m in g}
    out = []
    for k, m in enumerate(res.ranking):
        e = dict(old.get(m) or new.get(m) or {"model": m})
        ex = examinees[m]
        e.update({"rank": k + 1, "theta": ex.theta, "se": ex.se,
                  "theta_ci95": [ex.theta - Z95 * ex.se, ex.theta + Z95 * ex.se],
                  "items": ex.n, "tie_group": group_of.get(m)})
        out.append(e)
    return out


REFRESH_KEYS = ("leaderboard", "add", "budget_usd", "confidence", "min_items", "max_items", "concurrency",
                 "price", "metric", "item_field", "include_path", "num_fewshot", "apply_chat_template",
                 "fewshot_as_multiturn", "gen_kwargs", "system_instruction", "seed", "metadata", "tie_margin",
                "family_wise")


def refresh(settings: LiveSettings, console, out_dir, journal, resumed, *, report=None) -> int:
    """Place ``settings.add`` on the leaderboard ``settings.leaderboard`` live (see the module docstring; a
    list of leaderboards of one task, one per metric, are refreshed together); the exit status: 0 placed,
    3 placed but a new model failed every call (dropped), 1 no new model placed, 130 interrupted. The plan
    and progress go to ``console``, the result (the new leaderboard(s), what failed, why it stopped) to
    ``report`` (default: ``console``)."""
    report = report if report is not None else console

    given = settings.leaderboard
    paths = [Path(p) for p in (given if isinstance(given, (list, tuple)) else [given] if given else [])]
    if not paths:
        raise InputError("--leaderboard FILE: the leaderboard to refresh")
    boards = [load_leaderboard(p) for p in paths]
    joint = len(boards) > 1
    if joint:
        _check_joint_boards(paths, boards)
    if not settings.add:
        raise InputError("--add: give the new models as harness specs TYPE:ARGS")
    if settings.budget_usd is None or not (settings.budget_usd > 0 and math.isfinite(settings.budget_usd)):
        raise InputError("--budget-usd: a refresh needs a positive dollar cap")
    check_live_settings(settings)
    live_prices(settings)  # every new model without a price in one error, before the history is read
    if joint and settings.metric:
        raise InputError(f"--metric {settings.metric}: the {len(boards)} leaderboards say their metrics")
    if joint and settings.dry_run:
        raise InputError("--dry-run: the cost forecast of a refresh of several leaderboards is not available yet "
                         "(forecast each leaderboard alone for an upper bound)")
    tables = [_history_table(lb, p) for lb, p in zip(boards, paths)]
    anchors = _anchors(boards[0], tables[0], paths[0])
    for lb, table, p in zip(boards[1:], tables[1:], paths[1:]):
        other = _anchors(lb, table, p)
        if set(other) != set(anchors):
            raise InputError(f"the full-run entries of {p} ({', '.join(other)}) are not those of {paths[0]} "
                             f"({', '.join(anchors)}); leaderboards refreshed together share their full runs",
                             path=str(p))
    banks = [_bank(lb, table, anchors) for lb, table in zip(boards, tables)]
    lb, path, bank = boards[0], paths[0], banks[0]
    # the settings Setup and LiveRun read, from the leaderboard(s) and the command line
    settings.models, settings.tasks, settings.bank = settings.add, lb["task"], None
    settings.metric = None if joint else settings.metric or lb["metric"]
    settings.item_field = settings.item_field or lb.get("item_field")
    settings.confidence = settings.confidence or float(lb.get("confidence", 0.95))
    entries = {e["model"] for b in boards for e in b["entries"]}
    setup = Setup(settings, banks if joint else bank, anchors=sorted(entries))
    new = [s.name for s in setup.specs]
    models = anchors + new
    zeros = np.zeros(len(setup.item_ids))
    item_costs = {**{m: zeros for m in anchors}, **setup.bank_costs}
    mean_cost = {m: float(np.mean(c)) for m, c in setup.bank_costs.items()}
    lo = min(mean_cost.values()) or 1.0
    rel = {**{m: 1.0 for m in anchors}, **{m: (mean_cost[m] / lo if lo > 0 else 1.0) for m in new}}
    by_metric = {b.metric: (lb_, p, t) for b, lb_, p, t in zip(setup.bindings, boards, paths, tables)}

    def new_ranker():
        common = dict(item_costs=item_costs, relative_costs=rel, confidence=settings.confidence,
                      n_init=settings.min_items, n_max=settings.max_items, budget=settings.budget_usd,
                      seed=settings.seed, max_in_flight=settings.concurrency)
        if joint:
            ranker = MultiMetricRanker(setup.banks, models, **common, pair_rules={
                k: pair_rule_for(b, settings.confidence, settings.tie_margin, settings.family_wise)
                for k, b in setup.banks.items()})
            _joint_anchor_examinees(setup.banks, {k: v[2] for k, v in by_metric.items()}, anchors, ranker)
            return ranker
        ranker = AdaptiveRanker(bank, models, **common, pair_rule=pair_rule_for(
            bank, settings.confidence, settings.tie_margin, settings.family_wise))
        _anchor_examinees(bank, tables[0], anchors, ranker)
        return ranker

    if settings.dry_run:
        note_default_prices(console, setup.priced_by_default, setup.prices, setup.judges.prices)
        return forecast_refresh(settings, console, setup, new_ranker)
    ranker = new_ranker()
    if not resumed:
        cheapest_call_check(setup, settings, new)

    def anchor_call(item_id):  # pragma: no cover - anchors have no item left to ask
        raise RuntimeError("anchors are never asked")

    if out_dir is not None and journal is None:
        saved = {k: getattr(settings, k) for k in REFRESH_KEYS}
        saved["add"] = list(settings.models)
        saved["leaderboard"] = [str(p.resolve()) for p in paths] if joint else str(path.resolve())
        saved["include_path"] = str(Path(settings.include_path).resolve()) if settings.include_path else None
        saved["item_field"] = setup.binding.item_field
        journal = start_run(out_dir, "refresh", saved, {"command": "refresh",
                                                           "leaderboard": [str(p) for p in paths] if joint
                                                           else str(path),
                                                           "models": new, "bank_id": setup.bank_ids}, setup.bank_ids)
    elif journal is not None and journal.header.get("bank_id") != setup.bank_ids:
        raise InputError(f"the leaderboard's history changed since the refresh started (bank "
                         f"{journal.header.get('bank_id')} → {setup.bank_ids})", path=str(out_dir / JOURNAL_NAME))
    live = LiveRun(ranker, {**{m: anchor_call for m in anchors}, **setup.scorers},
                   upper_cost=setup.upper_cost, actual_cost=setup.actual_cost, judge_cost=setup.judge_cost,
                   scale=setup.scale,
                   ledger=setup.ledger, journal=journal,
                   retry=RetryPolicy(max_attempts=settings.max_attempts, base_s=settings.backoff),
                   max_failures=settings.max_failures, secrets=env_secrets())
    if resumed:
        info = live.resume_from(journal)
        console.print(f"resumed {out_dir}: {info['scores']} scored items replayed, {info['lost_in_flight']} "
                      f"call(s) lost in flight (not requested again), ${info['spent_usd']:.4f} already spent")
        journal_cap_change(journal, settings, setup.ledger, console)
    announce(console, setup, settings)
    console.print(f"anchors: {len(anchors)} full-run entries of {', '.join(map(str, paths))} (bank "
                  f"{setup.bank_ids}, {len(setup.item_ids)} items)")
    with LiveProgress(console, live, setup, enabled=not settings.no_progress) as prog:
        live.on_progress = prog.update
        live.run()
    result = ranker.result()
    if live.interrupted:
        console.print(styled("interrupted", "red", ": the leaderboard was not changed" +
                      (f"; continue with refresh --resume {out_dir}" if out_dir is not None else "")))
        return 130
    per = result.results if joint else {setup.metric: result}
    failed = next(iter(per.values())).failed
    placed = [m for m in new if m not in failed]
    if not placed:  # nothing to enter: the leaderboard is left as it was
        for m, why in failed.items():
            report.print(styled("failed", "red", f": {m}: {why}"))
        report.print(styled("no new model placed", "red", f": {len(failed)} of {len(new)} failed; spent "
                     f"${setup.ledger.spent:.4f} of a ${settings.budget_usd:g} cap; "
                     f"{', '.join(map(str, paths))} {'were' if joint else 'was'} not changed"
                     + (f"; the journal is in {out_dir}" if out_dir is not None else "")))
        return 1
    stops = []
    for metric, res in per.items():
        board, bpath, _ = by_metric[metric] if joint else (lb, path, tables[0])
        examinees = ranker.metric_examinees(metric) if joint else ranker.examinees
        stops.append(_enter(board, bpath, res, examinees, new, setup, settings, live, ranker, report,
                            metric if joint else None))
    stopped = stops[0] if len(set(stops)) == 1 else ", ".join(f"{k}: {x}" for k, x in zip(per, stops))
    report.print(f"stopped because: {stopped} (the new models: {', '.join(placed)}); spent "
                 f"${setup.ledger.spent:.4f} of a ${settings.budget_usd:g} cap; {', '.join(map(str, paths))} updated")
    if failed:  # placed the others; a model that failed every call is dropped: exit 3
        for m, why in failed.items():
            report.print(styled("dropped", "red", f": {m} after {live.failed_calls[m]} failed call(s), not placed: "
                                                  f"{why}"))
        return 3
    return 0


def new_models_stop(res, reason: str | None, new) -> str:
    """Why the placing of the ``new`` models stopped, of them alone: ``settled`` when no pair of theirs is
    left open (each ordered, equivalent, or closer than the bank can separate: a tie), else the ranker's
    ``reason`` (budget, max_items, bank_exhausted: the passes of the new models, the only ones asked).
    An anchor pair left open, or an anchor with no item left, is no reason of the new models'."""
    mine = set(new)
    if not any(mine & set(p) for p in res.open_pairs):
        return "settled"
    return reason or "running"


def _check_joint_boards(paths, boards) -> None:
    """Leaderboards refreshed together: one task, one board per metric."""
    tasks = {str(b["task"]) for b in boards}
    if len(tasks) > 1:
        raise InputError(f"--leaderboard: {', '.join(map(str, paths))} are of tasks {', '.join(sorted(tasks))}; "
                         "leaderboards refreshed together are of one task (one per metric)")
    metrics = [str(b["metric"]) for b in boards]
    dup = sorted({m for m in metrics if metrics.count(m) > 1})
    if dup:
        raise InputError(f"--leaderboard: two leaderboards of metric {dup[0]!r}; refresh one at a time")


def _enter(lb, path, res, examinees, new, setup, settings, live, ranker, report, metric) -> str:
    """Enter the placed new models on one leaderboard (``metric``: its metric in a several-board refresh),
    write it, print it; why its placement stopped."""
    pos = {m: k for k, m in enumerate(res.ranking)}
    placed = [m for m in new if m in pos]
    stopped = new_models_stop(res, ranker.stopped_because, new)
    rows = {r["model"]: r for r in model_rows(live, setup, placed, metric=metric)}
    old = {e["model"]: e for e in lb["entries"] if e.get("source") == "full_run"}
    added = {}
    for m in placed:
        r = rows[m]
        added[m] = {"model": m, "source": "adaptive", "added": _now(),
                    "spec": next(f"{s.type}:{s.model_id}" for s in setup.specs if s.name == m),
                    "metric": {"estimate": r["est"], "lower": r["est_lo"], "upper": r["est_hi"], "level": 0.95},
                    "cost_usd": r["cost"], "judge_cost_usd": r["judge_cost"], "full_run_cost_usd": r["full_cost"],
                    "person_fit": r["person_fit"]}
    entries = _entries(res, examinees, old, added)
    # earlier adaptive entries keep their stored place (same bank: the history is unchanged)
    earlier = [e for e in lb["entries"] if e.get("source") != "full_run" and e["model"] not in added]
    entries = sorted(entries + earlier, key=lambda e: -float(e.get("theta", -math.inf)))
    for k, e in enumerate(entries):
        e["rank"] = k + 1
    bank = setup.banks[metric] if metric is not None else setup.bank
    lb.update({"entries": entries, "bank_id": bank.bank_id, "updated": _now()})
    lb.setdefault("refreshes", []).append({
        "at": _now(), "added": list(added), "failed": dict(res.failed), "budget_usd": settings.budget_usd,
        "spent_usd": setup.ledger.spent, "judge_spent_usd": float(sum(live.judge_spent.values())),
        "stopped_because": stopped, "confidence": settings.confidence,
        "items": {m: res.items[m] for m in new}, "priced_by_default": setup.priced_by_default})
    _write(path, lb)
    print_leaderboard(report, lb, added, res.failed)
    for m, e in added.items():
        note = misfit_note(e["person_fit"])
        if note:
            report.print(styled("misfit", "yellow", f": {m}: {note}"))
    return stopped


def print_leaderboard(console, lb, added, failed) -> None:
    from rich.table import Table

    t = Table(title=f"{lb['task']} leaderboard ({lb['metric']})")
    for c in ("rank", "model", "source", "θ ± SE", f"{lb['metric']} [95%]", "items", "tie group"):
        t.add_column(c, justify="left" if c in ("model", "source") else "right",
                     overflow="fold" if c in ("model", "tie group") else "ellipsis")
    for e in lb["entries"]:
        met = e.get("metric") or {}
        val = (f"{met['value']:.4f}" if "value" in met else
               f"{met['estimate']:.4f} [{met['lower']:.4f}, {met['upper']:.4f}]" if "estimate" in met else "")
        style = "bold green" if e["model"] in added else None
        t.add_row(str(e["rank"]), shown(e["model"]), e.get("source", ""), f"{e['theta']:+.3f} ± {e['se']:.3f}", val,
                  str(e.get("items", "")), str(e.get("tie_group") or ""), style=style)
    console.print(t)
    for m, why in failed.items():
        console.print(styled("failed", "red", f": {m}: {why} (not entered)"))

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
(:class:`~lm_eval_adaptive.engine.ranking.multi_metric_ranker.MultiMetricRanker`, one bank per board),
under one cap and one journal, and each board gets its own entries.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from pathlib import Path

import numpy as np
from scipy.special import ndtri  # the normal quantile (scipy.stats' norm.ppf), without importing scipy.stats

from lm_eval_adaptive.atomic import write_json
from lm_eval_adaptive.data.files import read_json
from lm_eval_adaptive.data.tables import load_any_table, table_item_field
from lm_eval_adaptive.engine.cat.estimation import Z95
from lm_eval_adaptive.engine.ranking.pairs.outcomes import EQUIVALENT, ORDERED, judge_apart, rank_ranges
from lm_eval_adaptive.engine.ranking.ranker import AdaptiveRanker
from lm_eval_adaptive.engine.ranking.pairs.metric_judgement import ranking_order
from lm_eval_adaptive.engine.ranking.pairs.outcomes import equivalence_groups
from lm_eval_adaptive.engine.evaluation.self_check import calibrate_checked
from lm_eval_adaptive.errors import InputError, check_text
from lm_eval_adaptive.harness.binding import DOC_ID, record_item_field
from lm_eval_adaptive.harness.sample_logs import table_from_sample_logs
from lm_eval_adaptive.live.run_report import model_rows
from lm_eval_adaptive.redaction import redact

__all__ = ["LEADERBOARD_FORMAT", "REFRESH_KEYS", "load_leaderboard", "create_leaderboard", "history_beside",
           "history_table", "board_anchors", "board_bank", "anchor_examinees", "joint_anchor_examinees",
           "check_joint_boards", "enter_models", "new_models_stop"]

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
                 "rank_range": (lambda v: v is None or (isinstance(v, list) and len(v) == 2 and all(
                     isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in v) and v[0] <= v[1]),
                     "null or an array of two integers [best, worst], 1 <= best <= worst"),
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


def _check_text(obj, where: str, path: str) -> None:
    """Every string and key of the board is text (no lone surrogate, which JSON's ``\\ud800`` can write)."""
    if isinstance(obj, str):
        check_text(obj, f"leaderboard field {where or '(top)'}", path=path)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            check_text(k, f"a leaderboard key in {where or '(top)'}", path=path)
            _check_text(v, f"{where}.{k}" if where else k, path)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _check_text(v, f"{where}[{i}]", path)


def _check_board(d: dict, path: str) -> None:
    """Every field a leaderboard's reader uses is of its kind (see the module docstring); every name is text."""
    _check_text(d, "", path)
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


def history_table(lb: dict, lb_path: Path):

    spec = str(lb["history"])
    cand = (lb_path.parent / spec)
    return load_any_table(str(cand) if cand.exists() else spec, metric=lb["metric"])


def board_anchors(lb: dict, table, path) -> list[str]:
    names = [str(m) for m in table.models]
    full = [e["model"] for e in lb["entries"] if e.get("source") == "full_run"]
    missing = [m for m in full if m not in names]
    if missing:
        raise InputError(f"full-run entries {missing} have no scores in the history table {lb['history']!r}",
                         path=str(path))
    if len(full) < 2:
        raise InputError("a leaderboard needs at least 2 full-run entries (the calibration history)", path=str(path))
    return full


def board_bank(lb: dict, table, anchors):

    bank = calibrate_checked(table.select_models(anchors), metric=lb["metric"], task=lb["task"])
    # a board whose history is a named table (wmt24/en-de/bleu) maps its ids by that table's field
    return record_item_field(bank, lb.get("item_field") or table_item_field(str(lb["history"])))


def anchor_examinees(bank, table, anchors, ranker) -> None:
    """Give each anchor every item it answered (full run), at no cost; then nothing more to ask."""
    raw = table.mean_matrix()
    pos = {str(v): i for i, v in enumerate(np.asarray(table.items, dtype=object).tolist())}
    cols = np.array([pos[str(x)] for x in bank.item_ids])
    names = [str(m) for m in table.models]
    for m in anchors:
        row = raw[names.index(m), cols]
        items = np.flatnonzero(~np.isnan(row))
        y = np.clip(bank.scale(items, row[items]), 0.0, 1.0)
        ranker.record_many(m, items, y, costs=np.zeros(items.size), raws=row[items])
        ranker.exclude(m, np.arange(bank.n_items))


def joint_anchor_examinees(banks: dict, tables: dict, anchors, ranker) -> None:
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
    # a full run's value: its mean over every document of the task the history holds (the harness's full run,
    # 997 for WMT24 en-de), not over the bank's items (970: the bank drops some), which adaptive rows estimate too
    full, docs = full_run_values(table, models)
    entries = {m: {"model": m, "source": "full_run", "metric": {"value": full[m]}, "documents": docs[m]}
               for m in models}
    lb = {"format": LEADERBOARD_FORMAT, "version": LEADERBOARD_VERSION, "task": task, "metric": metric,
          "item_field": item_field, "history": hist, "confidence": confidence,
          "entries": [dict(entries[m]) for m in models]}
    bank = board_bank(lb, table, models)
    ranker = AdaptiveRanker(bank, models, confidence=confidence)
    anchor_examinees(bank, table, models, ranker)
    res = ranker.result()
    lb["entries"], lb["pairs"] = _entries(res, ranker.examinees, entries, new={}, confidence=confidence)
    lb["bank_id"] = bank.bank_id
    lb["updated"] = _now()
    _write(out, lb)
    return lb


def full_run_values(table, models) -> dict:
    """(model → its full run's metric value, model → the documents it averages): the mean of its scores over
    every document of the history table (the task's documents, as the harness's full run averages them), not
    over the bank's items."""
    raw = table.mean_matrix()
    names = [str(m) for m in table.models]
    rows = {m: raw[names.index(m)] for m in models}
    return ({m: float(np.nanmean(r)) for m, r in rows.items()},
            {m: int(np.count_nonzero(~np.isnan(r))) for m, r in rows.items()})


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _write(path: Path, lb: dict) -> None:

    write_json(path, redact(lb, by_key=False))


def _entries(res, examinees, old: dict, new: dict, earlier=(), *, confidence: float, tie_margin: float = 0.0):
    """The board's entries placed on the metric's scale, and its pairs: (entries best first with rank,
    ``rank_range`` [best, worst], tie group (equivalence only, groups named by their best member),
    θ, SE and interval on the bank; pair records). ``examinees``: model → its examinee on the board's
    bank; ``earlier``: adaptive entries of earlier refreshes, as stored (not in this run).

    Each entry's full-task metric is its estimate of record (a full run's is exact). Pairs of this
    run's models are the run's own judgement (``res.pairs``: paired on the items both answered); a
    pair with an earlier entry is judged on the two estimates made apart
    (:func:`~lm_eval_adaptive.engine.ranking.pairs.outcomes.judge_apart`). The order follows the estimates
    except that no settled pair is reversed; rank ranges come from the ordered pairs alone."""
    earlier = [dict(e) for e in earlier]
    names = list(res.ranking) + [e["model"] for e in earlier]
    points, ses = [], []
    for m in res.ranking:
        est = res.estimates.get(m)
        entry = old.get(m) or new.get(m) or {}
        stored = entry.get("metric") or {}
        if entry.get("source") == "full_run" and "value" in stored:  # exact: the task's documents' mean
            points.append(float(stored["value"]))
            ses.append(0.0)
        elif est is not None:
            points.append(float(est["estimate"]))
            ses.append(float(est["se"]))
        else:
            points.append(float(stored.get("value", stored.get("estimate", math.nan))))
            ses.append(0.0 if "value" in stored else _stored_se(stored))
    for e in earlier:
        points.append(float((e.get("metric") or {}).get("estimate", (e.get("metric") or {}).get("value", math.nan))))
        ses.append(_stored_se(e.get("metric") or {}))
    if not all(map(math.isfinite, points)):
        bad = [n for n, x in zip(names, points) if not math.isfinite(x)]
        raise InputError(f"leaderboard entries without a metric value or estimate: {', '.join(bad)}")
    apart = judge_apart(names, points, ses, confidence=confidence, tie_margin=tie_margin)
    records = {frozenset((r["a"], r["b"])): _pair_record(r, "apart") for r in apart.to_records()}
    full = {m for m in res.ranking if (old.get(m) or new.get(m) or {}).get("source") == "full_run"}
    for r in res.pairs:  # this run's own judgement of its models' pairs (two full runs: their exact values)
        if not (r["a"] in full and r["b"] in full):
            records[frozenset((r["a"], r["b"]))] = _pair_record(r, "run")
    pos = {m: k for k, m in enumerate(names)}
    ordered = [(pos[r["a"]], pos[r["b"]]) for r in records.values() if r["outcome"] == ORDERED]
    order = ranking_order(points, ordered)
    ranking = [names[u] for u in order]
    matrix = np.zeros((len(names), len(names)), dtype=np.int8)
    for a, b in ordered:
        matrix[a, b], matrix[b, a] = 1, -1
    best, worst = rank_ranges(matrix)
    groups = equivalence_groups(ranking, [(r["a"], r["b"]) for r in records.values() if r["outcome"] == EQUIVALENT])
    group_of = {m: g[0] for g in groups for m in g}
    stored = {e["model"]: e for e in earlier}
    out = []
    for k, m in enumerate(ranking):
        u = pos[m]
        if m in stored:
            e = stored[m]
        else:
            e = dict(old.get(m) or new.get(m) or {"model": m})
            ex = examinees[m]
            e.update({"theta": ex.theta, "se": ex.se, "theta_ci95": [ex.theta - Z95 * ex.se, ex.theta + Z95 * ex.se],
                      "items": int(e.get("documents", ex.n)) if e.get("source") == "full_run" else ex.n})
            if e.get("source") == "full_run":
                e["metric"] = {"value": points[u]}
        e.update({"rank": k + 1, "rank_range": [int(best[u]), int(worst[u])], "tie_group": group_of.get(m)})
        out.append(e)
    rank = {m: k for k, m in enumerate(ranking)}
    pairs = sorted(records.values(), key=lambda r: (rank[r["a"]], rank[r["b"]]))
    return out, pairs


def _stored_se(met: dict) -> float:
    """The SE of a stored metric: 0 for a full run's value, else from its interval (normal, its level)."""
    if "value" in met:
        return 0.0
    if "se" in met:
        return float(met["se"])
    z = float(ndtri(0.5 + float(met.get("level", 0.95)) / 2))
    return (float(met["upper"]) - float(met["lower"])) / (2 * z)


def _pair_record(r: dict, judged: str) -> dict:
    """A pair as a board stores it (issue 21's keys; ``a`` the higher where ordered; the cost to settle
    null where no run holds both models); ``judged``: "run" (paired, this run's judgement) or "apart"."""
    n, c = r.get("items_to_settle"), r.get("cost_to_settle_usd")
    unknown = n is None or n < 0 or c is None or not math.isfinite(c)
    rng = r.get("items_to_settle_range")
    return {"a": r["a"], "b": r["b"], "outcome": r["outcome"], "p_order": float(r["p_order"]),
            "items_to_settle": None if unknown else int(n), "cost_to_settle_usd": None if unknown else float(c),
            "items_to_settle_range": None if unknown or rng is None else [int(v) for v in rng], "judged": judged}


REFRESH_KEYS = ("leaderboard", "add", "budget_usd", "confidence", "min_items", "max_items", "concurrency",
                 "price", "metric", "item_field", "include_path", "num_fewshot", "apply_chat_template",
                 "fewshot_as_multiturn", "gen_kwargs", "system_instruction", "seed", "metadata", "tie_margin",
                "family_wise", "settle_share")


def new_models_stop(res, reason: str | None, new) -> str:
    """Why the placing of the ``new`` models stopped, of them alone: the ranker's ``reason`` (budget,
    max_items, bank_exhausted: the passes of the new models, the only ones asked) while a pair of theirs
    is left open; else ``cost_to_settle`` when the metric scale's stopping policy gave one of their
    unresolved pairs up (its cost to settle too high: no more items bought for it), else ``settled``
    (each pair ordered, equivalent, or on the θ scale closer than the bank can separate: a tie). An
    anchor pair left open, or an anchor with no item left, is no reason of the new models'."""
    mine = set(new)
    if any(mine & set(p) for p in res.open_pairs):
        return reason or "running"
    if any(p.get("beyond_policy") and mine & {p["a"], p["b"]} for p in (res.pairs or [])):
        return "cost_to_settle"
    return "settled"


def check_joint_boards(paths, boards) -> None:
    """Leaderboards refreshed together: one task, one board per metric."""
    tasks = {str(b["task"]) for b in boards}
    if len(tasks) > 1:
        raise InputError(f"--leaderboard: {', '.join(map(str, paths))} are of tasks {', '.join(sorted(tasks))}; "
                         "leaderboards refreshed together are of one task (one per metric)")
    metrics = [str(b["metric"]) for b in boards]
    dup = sorted({m for m in metrics if metrics.count(m) > 1})
    if dup:
        raise InputError(f"--leaderboard: two leaderboards of metric {dup[0]!r}; refresh one at a time")


def enter_models(lb, path, res, examinees, new, setup, settings, live, ranker, metric) -> tuple[str, dict]:
    """Enter the placed new models on one leaderboard (``metric``: its metric in a several-board refresh)
    and write it; (why their placement stopped, the entries added)."""
    pos = {m: k for k, m in enumerate(res.ranking)}
    placed = [m for m in new if m in pos]
    stopped = new_models_stop(res, ranker.stopped_because, new)
    rows = {r["model"]: r for r in model_rows(live, setup, placed, metric=metric, estimates=res.estimates)}
    old = {e["model"]: e for e in lb["entries"] if e.get("source") == "full_run"}
    added = {}
    for m in placed:
        r = rows[m]
        added[m] = {"model": m, "source": "adaptive", "added": _now(),
                    "spec": next(f"{s.type}:{s.model_id}" for s in setup.specs if s.name == m),
                    "metric": {"estimate": r["est"], "lower": r["est_lo"], "upper": r["est_hi"], "level": 0.95},
                    "cost_usd": r["cost"], "judge_cost_usd": r["judge_cost"], "full_run_cost_usd": r["full_cost"],
                    "person_fit": r["person_fit"]}
    # earlier adaptive entries keep their estimates (same bank: the history is unchanged) and are placed
    # against this run's models on them
    earlier = [e for e in lb["entries"] if e.get("source") != "full_run" and e["model"] not in added]
    entries, pairs = _entries(res, examinees, old, added, earlier, confidence=settings.confidence,
                              tie_margin=settings.tie_margin or 0.0)
    lb["pairs"] = pairs
    bank = setup.banks[metric] if metric is not None else setup.bank
    lb.update({"entries": entries, "bank_id": bank.bank_id, "updated": _now()})
    lb.setdefault("refreshes", []).append({
        "at": _now(), "added": list(added), "failed": dict(res.failed), "budget_usd": settings.budget_usd,
        "spent_usd": setup.ledger.spent, "judge_spent_usd": float(sum(live.judge_spent.values())),
        "stopped_because": stopped, "confidence": settings.confidence,
        "items": {m: res.items[m] for m in new}, "priced_by_default": setup.priced_by_default})
    _write(path, lb)
    return stopped, added

"""``refresh``: place new models on a leaderboard live, within a budget, and report it.

The board's format, its placement on the metric's scale and the writing of it are in
:mod:`lm_eval_adaptive.live.leaderboard`; this module runs the refresh (checks, the session, the
live driver, resume) and prints its plan, progress and result.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np

from lm_eval_adaptive.cli.live_output import (
    LiveProgress,
    announce,
    note_default_prices,
    print_cap_change,
    print_forecast,
    print_forecast_written,
    print_leaderboard,
    print_price_change,
)
from lm_eval_adaptive.cli.terminal import styled
from lm_eval_adaptive.engine.ranking.multi_metric_ranker import MultiMetricRanker
from lm_eval_adaptive.engine.ranking.pairs.rules import pair_rule_for
from lm_eval_adaptive.engine.cat.person_fit import misfit_note
from lm_eval_adaptive.engine.ranking.ranker import AdaptiveRanker
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness.scorer import parse_model_spec
from lm_eval_adaptive.live.cost_forecast import forecast_refresh, write_forecast
from lm_eval_adaptive.live.driver import LiveRun, RetryPolicy
from lm_eval_adaptive.live.journal import JOURNAL_NAME, env_secrets
from lm_eval_adaptive.display import shown
from lm_eval_adaptive.live.pair_prose import answer_paragraph, left_open_text
from lm_eval_adaptive.live.run_prices import check_resumed_prices, journal_price_change, price_records
from lm_eval_adaptive.live.leaderboard import (
    REFRESH_KEYS,
    anchor_examinees,
    board_anchors,
    board_bank,
    check_joint_boards,
    enter_models,
    history_table,
    joint_anchor_examinees,
    load_leaderboard,
)
from lm_eval_adaptive.live.stopping_policy import largest_reservation, live_judgement, mark_cap_to_buy
from lm_eval_adaptive.live.session import (
    LiveSettings,
    Setup,
    check_live_settings,
    check_model_names,
    cheapest_call_check,
    journal_cap_change,
    start_run,
    resolved_settings,
)

__all__ = ["refresh"]


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
        check_joint_boards(paths, boards)
    if not settings.add:
        raise InputError("--add: give the new models as harness specs TYPE:ARGS")
    if settings.budget_usd is None or not (settings.budget_usd > 0 and math.isfinite(settings.budget_usd)):
        raise InputError("--budget-usd: a refresh needs a positive dollar cap")
    check_live_settings(settings)
    check_model_names([parse_model_spec(s) for s in settings.add], "--add")
    settings = resolved_settings(settings)  # every new model without a price in one error, before the history is read
    if joint and settings.metric:
        raise InputError(f"--metric {settings.metric}: the {len(boards)} leaderboards say their metrics")
    if joint and settings.dry_run:
        raise InputError("--dry-run: the cost forecast of a refresh of several leaderboards is not available yet "
                         "(forecast each leaderboard alone for an upper bound)")
    tables = [history_table(lb, p) for lb, p in zip(boards, paths)]
    anchors = board_anchors(boards[0], tables[0], paths[0])
    for lb, table, p in zip(boards[1:], tables[1:], paths[1:]):
        other = board_anchors(lb, table, p)
        if set(other) != set(anchors):
            raise InputError(f"the full-run entries of {p} ({', '.join(other)}) are not those of {paths[0]} "
                             f"({', '.join(anchors)}); leaderboards refreshed together share their full runs",
                             path=str(p))
    banks = [board_bank(lb, table, anchors) for lb, table in zip(boards, tables)]
    lb, path, bank = boards[0], paths[0], banks[0]
    # the settings Setup and LiveRun read, resolved here from the leaderboard(s) and the command line
    settings = replace(settings, models=settings.add, tasks=lb["task"], bank=None,
                       metric=None if joint else settings.metric or lb["metric"],
                       item_field=settings.item_field or lb.get("item_field"),
                       confidence=settings.confidence or float(lb.get("confidence", 0.95)))
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
                      seed=settings.seed, max_in_flight=settings.concurrency,
                      judgement=live_judgement(settings.settle_share, settings.budget_usd))
        if joint:
            ranker = MultiMetricRanker(setup.banks, models, **common, pair_rules={
                k: pair_rule_for(b, settings.confidence, settings.tie_margin, settings.family_wise)
                for k, b in setup.banks.items()})
            joint_anchor_examinees(setup.banks, {k: v[2] for k, v in by_metric.items()}, anchors, ranker)
            return ranker
        ranker = AdaptiveRanker(bank, models, **common, pair_rule=pair_rule_for(
            bank, settings.confidence, settings.tie_margin, settings.family_wise))
        anchor_examinees(bank, tables[0], anchors, ranker)
        return ranker

    if settings.dry_run:
        note_default_prices(console, setup.priced_by_default, setup.prices, setup.judges.prices)
        fc = forecast_refresh(settings, setup, new_ranker)
        print_forecast(report, fc)  # the report, on stdout
        print_forecast_written(report, write_forecast(fc, settings.output))
        return 0
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
                                                           "models": new, "bank_id": setup.bank_ids,
                                                           "prices": price_records(setup)}, setup.bank_ids)
    elif journal is not None and journal.header.get("bank_id") != setup.bank_ids:
        raise InputError(f"the leaderboard's history changed since the refresh started (bank "
                         f"{journal.header.get('bank_id')} → {setup.bank_ids})", path=str(out_dir / JOURNAL_NAME))
    changes = check_resumed_prices(journal, setup, stated=settings.new_prices, where=out_dir / JOURNAL_NAME) \
        if resumed else None
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
        print_cap_change(console, journal_cap_change(journal, settings, setup.ledger), setup.ledger)
        print_price_change(console, changes)
        journal_price_change(journal, setup, changes)
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
    stops, left = [], []
    for metric, res in per.items():
        board, bpath, _ = by_metric[metric] if joint else (lb, path, tables[0])
        examinees = ranker.metric_examinees(metric) if joint else ranker.examinees
        stop, added = enter_models(board, bpath, res, examinees, new, setup, settings, live, ranker,
                                   metric if joint else None)
        report.print(answer_paragraph([e["model"] for e in board["entries"]], board.get("pairs"),
                                      confidence=float(board.get("confidence") or settings.confidence or 0.95),
                                      spent=setup.ledger.spent, items=sum(int(e.get("items") or 0) for e in added.values()),
                                      cap=settings.budget_usd), highlight=False)  # the answer first, in plain words
        print_leaderboard(report, board, added, res.failed, verbose=settings.verbose)
        for m, e in added.items():
            note = misfit_note(e["person_fit"])
            if note:
                report.print(styled("misfit", "yellow", f": {m}: {note}"))
        stops.append(stop)
        if stop in ("cost_to_settle", "budget"):  # each pair of the new models left open, its cost, what buys it
            mine = [dict(p) for p in res.pairs or [] if set(placed) & {p["a"], p["b"]}]
            mark_cap_to_buy(mine, spent=setup.ledger.spent, cap=settings.budget_usd,
                            reservation=largest_reservation(setup))
            text = left_open_text(mine, [e["model"] for e in board["entries"]])
            left.append(f"on {shown(metric)}, {text}" if joint and text else text)
    stopped = stops[0] if len(set(stops)) == 1 else ", ".join(f"{k}: {x}" for k, x in zip(per, stops))
    report.print(f"stopped because: {stopped} (the new models: {', '.join(placed)}); spent "
                 f"${setup.ledger.spent:.4f} of a ${settings.budget_usd:g} cap; {', '.join(map(str, paths))} updated"
                 + "".join(f"; {t}" for t in left if t))
    if failed:  # placed the others; a model that failed every call is dropped: exit 3
        for m, why in failed.items():
            report.print(styled("dropped", "red", f": {m} after {live.failed_calls[m]} failed call(s), not placed: "
                                                  f"{why}"))
        return 3
    return 0

"""A live run on a task with no item bank (issue 31; docs/cold-start.md): ``rank`` with the bank-free ranker.

When a task has no bank (none given, none shipped for it), or one calibrated from too few models to be used
(:mod:`~lm_eval_adaptive.engine.anytime.small_bank`), ``rank`` does not refuse: every model answers
the task's documents in one shared, seeded random order and every interval and pair decision is a
confidence sequence, valid whenever the run stops
(:class:`~lm_eval_adaptive.engine.anytime.driven_ranker.DrivenBankFreeRanker`). This module is that run's
session, the bank-free counterpart of :class:`~lm_eval_adaptive.live.session.Setup`: the harness task (its
documents are the items, named by doc id), one scorer per model, the prices, the dollar ledger, the
metric's known range (:func:`score_range_for`), and the report (:func:`build_bank_free_report`). The live
driver (:class:`~lm_eval_adaptive.live.driver.LiveRun`), the journal and ``--resume`` are the banked run's.
"""

from __future__ import annotations

import math
import os

import numpy as np

from lm_eval_adaptive.engine.anytime.driven_ranker import DrivenBankFreeRanker, IndexedReplayError
from lm_eval_adaptive.engine.cat.bank_prediction import BankPrediction
from lm_eval_adaptive.engine.ranking.replay import ReplayError
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness.bank_free_run import (
    BANK_FREE,
    DocBinding,
    mode_line,
    parse_score_range,
    score_range_for,
    task_metric,
)
from lm_eval_adaptive.harness.bank_source import load_bank, small_bank
from lm_eval_adaptive.harness.binding import DOC_ID, bind_bank
from lm_eval_adaptive.harness.judge_pricing import JudgePricing
from lm_eval_adaptive.harness.scorer import HarnessItemScorer, HarnessTask
from lm_eval_adaptive.live.ledger import BudgetLedger
from lm_eval_adaptive.live.stopping_policy import largest_reservation, live_policy, mark_cap_to_buy
from lm_eval_adaptive.live.session import (
    CHARS_PER_TOKEN,
    LiveSettings,
    PricedSession,
    quiet_libraries,
)
from lm_eval_adaptive.redaction import redact as redact_all

__all__ = ["BANK_FREE", "parse_score_range", "mode_line", "BankFreeSetup", "LiveBankFreeRanker", "bank_free_ranker", "build_bank_free_report",
           "open_pair_order"]


class BankFreeSetup(PricedSession):
    """Everything a bank-free live run needs (the counterpart of :class:`~lm_eval_adaptive.live.session.Setup`;
    the same attributes the driver, the progress table and the report read). Nothing is called or written."""

    joint = False
    bank = None
    bank_ids = BANK_FREE

    def __init__(self, a: LiveSettings):
        if not a.priced:
            raise TypeError("the settings were not resolved: the command line prices them once (resolved_settings)")
        os.environ.setdefault("TQDM_DISABLE", "1")
        quiet_libraries()
        self.specs = list(a.specs)
        names = [s.name for s in self.specs]
        self.prices, policy = dict(a.prices), a.price_policy
        self.task = HarnessTask(a.tasks, include_path=a.include_path, num_fewshot=a.num_fewshot,
                                gen_kwargs=a.gen_kwargs, apply_chat_template=a.apply_chat_template,
                                fewshot_as_multiturn=a.fewshot_as_multiturn,
                                system_instruction=a.system_instruction, metadata=a.task_metadata)
        loaded = self.task.load()
        bank = load_bank(a.bank) if a.bank is not None else None  # read once: the checks and the binding below
        small = small_bank(bank, what="ranking") if bank is not None else None  # a bank too small to use
        self.why = small.use.reason if small else None
        self.order_key, order_metric = None, None
        if a.anytime and bank is not None and small is None:  # --anytime: the bank orders the open pairs only
            self.order_key, order_metric = open_pair_order(a, bank, loaded)
            self.why = (f"anytime-valid ranking asked (--anytime; the bank {self.order_key.bank.describe()} orders "
                        "only the pairs left open)")
        self.metric = task_metric(loaded[0], loaded[1], a.metric or order_metric or (small.metric if small else None))
        self.score_range = score_range_for(self.metric, a.score_range)
        self.mode_note = mode_line(loaded[0], self.metric, self.score_range, why=self.why)
        n_docs = len(list(loaded[1].eval_docs))
        self.binding = DocBinding(loaded[0], self.metric, n_docs, self.score_range)
        self.task_name, self.n_docs = loaded[0], n_docs
        self.metrics = [self.metric]
        self.metric_label = self.metric
        self.item_ids = [str(i) for i in range(n_docs)]
        self.judges = JudgePricing(policy)
        self.judges.declare(self.task.judges)
        self.scorers = {}
        for s in self.specs:
            self.scorers[s.name] = HarnessItemScorer(s, self.task, self.binding, timeout=a.timeout, loaded=loaded)
            loaded = None
        self.ledger = BudgetLedger(a.budget_usd)
        # planned cost per document: the prompt's tokens (4 characters a token) in and as many out; the
        # ranker rescales it by what each model's answers cost (engine/anytime/driven_ranker.py)
        self.planned_costs = {}
        for m in names:
            chars = np.array([self.scorers[m].prompt_length(i) for i in self.item_ids], dtype=float)
            tokens = chars / CHARS_PER_TOKEN
            self.planned_costs[m] = self.prices[m].item_costs(tokens, tokens)

    def scale(self, item: int, raw) -> float:
        """The raw metric value itself (the bank-free ranker works in metric units), refused outside the
        stated range."""
        y = float(raw)
        lo, hi = self.score_range
        if not (math.isfinite(y) and lo <= y <= hi):
            raise InputError(f"task {self.task_name!r}, document {item}: metric {self.metric!r} gave {y!r}, "
                             f"outside its range [{lo:g}, {hi:g}] (give the right --score-range LO,HI)")
        return y


def open_pair_order(a: LiveSettings, bank, loaded) -> tuple[BankPrediction, str]:
    """``rank --anytime`` with ``bank`` (loaded): (the bank's full-task prediction keyed by harness doc id, its
    metric). The bank is bound to the task as a banked run binds it (its item ids matched to documents,
    ``--item-field``), and is read for nothing else: no interval, pair decision or allocation reads the order key."""
    binding = bind_bank(bank, loaded[0], loaded[1], metric=a.metric, item_field=a.item_field)
    ids = {str(doc): item for item, doc in binding.doc_of.items()}
    return BankPrediction(binding.bank, ids), binding.metric


class LiveBankFreeRanker(DrivenBankFreeRanker):
    """The driven bank-free ranker whose replay errors name the journal line (as the banked ranker's)."""

    def replay(self, events):
        try:
            return super().replay(events)
        except IndexedReplayError as e:
            raise ReplayError(e.index, e.reason) from None


def bank_free_ranker(setup: BankFreeSetup, a: LiveSettings) -> LiveBankFreeRanker:
    """A fresh bank-free ranker for the run: the settings' γ, tie margin, family-wise rule, item cap and seed;
    the dollar cap is the ledger's (each call reserved at its upper cost before it is made); the stopping policy
    on the cost to settle is a live run's (``--settle-share``, and with ``--budget-usd`` the pair's own cost rule:
    live/stopping_policy.py)."""
    return LiveBankFreeRanker([s.name for s in setup.specs], setup.item_ids, score_range=setup.score_range,
                              item_costs=setup.planned_costs, confidence=a.confidence,
                              tie_margin=a.tie_margin or 0.0, family_wise=a.family_wise, budget=None,
                              n_max=a.max_items, seed=a.seed, max_in_flight=a.concurrency,
                              order_key=setup.order_key, settle_policy=live_policy(a.settle_share, a.budget_usd,
                                                                                         bank_free=True))


def build_bank_free_report(live, setup: BankFreeSetup, a: LiveSettings, *, command: str = "rank") -> dict:
    """What ``ranking.json`` holds for a bank-free run: the ranking (each pair ordered, equivalent or
    unresolved with its cost to settle), per model its estimate and anytime-valid interval, items and
    dollars, and the mode and why."""
    r = live.ranker
    res = r.result()
    snap = setup.ledger.snapshot()
    d = res.to_dict()
    mark_cap_to_buy(d["pairs"], spent=snap["spent"], cap=a.budget_usd, reservation=largest_reservation(setup))
    full = {m: float(np.sum(r.expected_cost(m))) for m in r.models}
    rows = []
    for m in list(res.ranking) + list(res.failed):
        e = r.examinees[m]
        est = res.estimates.get(m) or {"estimate": float("nan"), "lower": setup.score_range[0],
                                       "upper": setup.score_range[1]}
        rows.append({"model": m, "theta": est["estimate"], "se": (est["upper"] - est["lower"]) / 2,
                     "est": est["estimate"], "est_lo": est["lower"], "est_hi": est["upper"], "items": e.n,
                     "cost": e.spent, "judge_cost": live.judge_spent.get(m, 0.0), "full_cost": full[m],
                     "person_fit": None})
    by = {x["model"]: x for x in rows}
    for entry in d["ranking"]:
        x = by[entry["model"]]
        entry["metric_estimate"] = {"estimate": x["est"], "lower": x["est_lo"], "upper": x["est_hi"],
                                    "level": a.confidence, "metric": setup.metric, "anytime_valid": True}
        entry["full_run_cost_usd"] = x["full_cost"]
        entry["cost_usd"] = x["cost"]
        p = setup.prices[entry["model"]]
        entry["price"] = {"input_per_mtok": p.input_per_mtok, "output_per_mtok": p.output_per_mtok,
                          "source": p.source}
    ranked = len(d["ranking"]) >= 2
    stopped = "interrupted" if live.interrupted else (d["stopped_because"] if ranked else "failed")
    d.update({
        "command": command, "mode": BANK_FREE, "mode_note": setup.mode_note,
        "open_pair_order": setup.order_key.name if setup.order_key is not None else None,
        "score_range": list(setup.score_range), "task": setup.task_name, "metric": setup.metric,
        "task_docs": setup.n_docs, "bank_id": None, "rows": rows, "ranked": ranked, "stopped_because": stopped,
        "total_cost_usd": snap["spent"], "budget_usd": a.budget_usd,
        "judge_cost_usd": float(sum(live.judge_spent.values())), "judge_prices": {},
        "priced_by_default": setup.priced_by_default, "full_run_cost_usd": float(sum(full.values())),
        "failed": [{"model": m, "error": why, "failed_calls": int(live.failed_calls[m]), "items": r.examinees[m].n,
                    "cost_usd": r.examinees[m].spent, "judge_cost_usd": live.judge_spent.get(m, 0.0)}
                   for m, why in res.failed.items()],
        "calls": {"attempts": live.attempts, "retries": live.retries, "billed_failures": live.billed_failures,
                  "billed_failures_usd": live.billed_failures_usd,
                  "failed_items": int(sum(live.failed_calls.values())),
                  "lost_in_flight": [{"model": m, "item_id": i, "charged_usd": u} for m, i, u in live.lost_in_flight]},
        "ledger": {k: snap[k] for k in ("spent", "reserved", "n_settled", "n_refused", "overshoot_usd")},
        "settings": {"confidence": a.confidence, "max_items": a.max_items, "concurrency": a.concurrency,
                     "seed": a.seed, "tie_margin": a.tie_margin, "family_wise": a.family_wise,
                     "settle_share": a.settle_share,
                     "timeout_s": {m: sc.timeout for m, sc in setup.scorers.items()},
                     "max_attempts": a.max_attempts, "backoff_s": a.backoff, "item_field": DOC_ID},
    })
    return redact_all(d, by_key=False)

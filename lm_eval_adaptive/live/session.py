"""One live session, shared by ``rank`` and ``refresh``: settings checked, models, prices, scorers, ledger, run folder, progress and report.

A session is built from the command's settings and an item bank, or several banks of one task
(one per metric: each document generated once and scored by every bank's metric, ranked by a
:class:`~lm_eval_adaptive.engine.ranking.multi_metric_ranker.MultiMetricRanker`). Before any model call it
binds the banks to the harness task (:func:`~lm_eval_adaptive.harness.binding.bind_banks`:
task, metric, item ids → documents), resolves each model's price (and a declared judge's)
once (:func:`~lm_eval_adaptive.data.price_map.model_price`), builds one harness document
scorer per model, and owns the dollar ledger; the live driver
(:mod:`lm_eval_adaptive.live.driver`) asks it what a call may cost at most, what it cost
(the model's calls and any judge's), and how a raw metric value maps into the bank's [0, 1]
scale. The run folder is created only once every setting has been checked.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np

from lm_eval_adaptive.atomic import write_json
from lm_eval_adaptive.data.files import check_output_folder
from lm_eval_adaptive.data.price_map import PricePolicy, price_policy, priced_by_default, resolve_prices
from lm_eval_adaptive.data.prices import actual_cost, upper_estimate
from lm_eval_adaptive.display import SHOWN_LOG_FILTER
from lm_eval_adaptive.engine.irt.bank import joint_item_ids
from lm_eval_adaptive.engine.ranking.multi_metric_ranker import MultiMetricRanker
from lm_eval_adaptive.engine.ranking.pairs.rules import pair_rule_for
from lm_eval_adaptive.engine.ranking.ranker import AdaptiveRanker
from lm_eval_adaptive.errors import InputError, check_text
from lm_eval_adaptive.harness.binding import bind_banks, check_banks
from lm_eval_adaptive.harness.judge_pricing import JudgePricing
from lm_eval_adaptive.harness.scorer import (
    HarnessItemScorer,
    HarnessTask,
    parse_gen_kwargs,
    parse_metadata,
    parse_model_spec,
)
from lm_eval_adaptive.live.journal import JOURNAL_NAME, Journal, env_secrets, redact
from lm_eval_adaptive.live.ledger import BudgetLedger
from lm_eval_adaptive.live.stopping_policy import LIVE_MIN_ITEMS, live_judgement
from lm_eval_adaptive.redaction import redact_text
from lm_eval_adaptive.writer_lock import run_folder_lock

__all__ = ["PricedSession", "LiveSettings", "resolved_settings", "resumed_settings", "Setup", "rank_ranker", "check_model_names", "RUN_FILE", "RANKING_FILE", "PLOT_FILE", "RUN_KEYS", "check_settings", "quiet_libraries",
           "live_prices", "check_before_loading", "refuse_existing_run",
           "open_run", "start_run", "journal_cap_change", "cap_text", "cheapest_call_check",
           "JUDGE_PROMPT_ALLOWANCE", "JUDGE_OUTPUT_ALLOWANCE",
           "CHARS_PER_TOKEN", "expected_item_costs"]

log = logging.getLogger("lm_eval_adaptive")
log.addFilter(SHOWN_LOG_FILTER)  # names in messages shown escaped

RUN_FILE = "run.json"
RANKING_FILE = "ranking.json"
PLOT_FILE = "ranking.png"

# settings a resumed run takes from its journal's header (given again on the command line they must
# be equal, --budget-usd excepted; the operational options -- timeout, retries, progress -- are the
# resume's own)
RUN_KEYS = ("models", "tasks", "bank", "confidence", "budget_usd", "min_items", "max_items", "concurrency",
            "price", "metric", "item_field", "include_path", "num_fewshot", "apply_chat_template",
            "fewshot_as_multiturn", "gen_kwargs", "system_instruction", "seed", "metadata", "tie_margin",
            "family_wise", "settle_share", "score_range", "anytime")

#: A judge call's part of an item's reservation: its prompt is taken as at most twice the
#: model's prompt plus four bytes per output token of the model plus this many bytes (rubric,
#: reference), its reply as at most JUDGE_OUTPUT_ALLOWANCE tokens. The judge's reply has no
#: token limit, so this is an allowance, not a bound: a dearer judge call is still charged,
#: and reported as the ledger's overshoot.
JUDGE_PROMPT_ALLOWANCE = 4096
JUDGE_OUTPUT_ALLOWANCE = 1024
#: Characters per token of the token estimates (the rule of the banks' own counts and of the replay endpoint).
CHARS_PER_TOKEN = 4


def expected_item_costs(price, bank, prompt_chars) -> np.ndarray:
    """USD each bank item is expected to cost: its input tokens the larger of the bank's count and the
    prompt's characters / :data:`CHARS_PER_TOKEN` (a bank may have counted the source text only,
    without the task's instruction or few-shot examples), its output tokens the bank's. The one rule
    of a run's full-run cost (``rank``/``refresh`` report, every ``--dry-run``) and of the forecast's charges."""
    inp = np.fmax(np.asarray(bank.input_tokens, dtype=float), np.asarray(prompt_chars, dtype=float) / CHARS_PER_TOKEN)
    return price.item_costs(inp, bank.output_tokens)


@dataclass(frozen=True)
class LiveSettings:
    """The settings of one live run (``rank`` or ``refresh``), resolved once by the command line and never
    changed after: field for field as their command lines spell them (:meth:`from_mapping`), a resume's
    taken from its journal (:func:`resumed_settings`), the models parsed and priced (:func:`resolved_settings`).
    Read by the session, the forecast, the driver's caller and the report; stored in ``run.json`` for
    ``--resume`` (:data:`RUN_KEYS`). Frozen: a value derived later is a new object
    (:func:`dataclasses.replace`), made by the command line only."""

    models: list | None = None
    tasks: str | None = None
    bank: str | list | None = None  # a list: one bank per metric of the task (one generation, every metric)
    confidence: float | None = 0.95
    budget_usd: float | None = None
    min_items: int = LIVE_MIN_ITEMS
    max_items: int | None = None
    concurrency: int = 1
    price: list | None = None
    metric: str | None = None
    item_field: str | None = None
    include_path: str | None = None
    num_fewshot: int | None = None
    apply_chat_template: bool = False
    fewshot_as_multiturn: bool = False
    gen_kwargs: str | None = None
    system_instruction: str | None = None
    seed: int = 0
    metadata: str | None = None
    timeout: float | None = None
    tie_margin: float | None = None
    family_wise: bool = False  # γ for the whole ranking (pair_rules.FamilyWise)
    settle_share: float | None = None  # rank: the stopping policy's share of a full run (None: its default)
    score_range: str | None = None  # rank with no bank: LO,HI of one document's score (live/bank_free_session.py)
    # rank with a bank: the anytime-valid (bank-free) ranker, the bank ordering only the pairs it leaves open
    anytime: bool = False
    max_attempts: int = 6
    max_failures: int = 3
    backoff: float = 0.5
    no_progress: bool = False
    verbose: bool = False  # the report's technical detail (θ̂, why the rank and θ̂ disagree)
    output: str | None = None
    resume: str | None = None
    leaderboard: str | list | None = None  # refresh: the leaderboard file (a list: one task's, one per metric)
    add: list | None = None  # refresh: the new models
    dry_run: bool = False  # forecast the cost, call nothing (live/cost_forecast.py)
    given: dict | None = None  # resume: the settings the command line gave, compared with the journal's
    cap_change: tuple | None = None  # resume: (old cap, new cap) stated with --budget-usd
    new_prices: bool = False  # resume: go on at the prices resolved now when they differ from the journal's
    # resolved by resolved_settings (not in run.json): the models parsed, each one's price, the run's price
    # policy, the task metadata parsed
    specs: tuple | None = None
    prices: Mapping | None = None
    price_policy: PricePolicy | None = None
    task_metadata: dict | None = None

    @classmethod
    def from_mapping(cls, values: Mapping, **resolved) -> LiveSettings:
        """The settings among ``values`` (e.g. ``vars()`` of parsed arguments; other keys are ignored), and
        ``resolved`` (e.g. ``given``)."""
        names = {f.name for f in fields(cls)}
        kw = {**{k: v for k, v in values.items() if k in names}, **resolved}
        if "min_items" in kw and kw["min_items"] is None:  # not given: the default warm-up, at most --max-items
            most = kw.get("max_items")
            kw["min_items"] = LIVE_MIN_ITEMS if most is None else min(LIVE_MIN_ITEMS, most)
        return cls(**kw)

    @property
    def priced(self) -> bool:
        """Whether the models were parsed and priced (:func:`resolved_settings`)."""
        return self.prices is not None


def resolved_settings(a: LiveSettings) -> LiveSettings:
    """``a`` with its models (``models``, else a refresh's ``add``) parsed and priced and its task metadata
    parsed, once, by the command line: a new object whose ``specs``, ``prices``, ``price_policy`` and
    ``task_metadata`` the layers below read (:func:`live_prices`: every model without a price named in one
    error). A model name given twice is refused first."""
    specs = tuple(parse_model_spec(s) for s in (a.models if a.models is not None else a.add or []))
    names = [s.name for s in specs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"{'--models' if a.models is not None else '--add'}: the name(s) {dup} appear twice; "
                         "name them NAME=TYPE:ARGS")
    prices, policy = live_prices(a, specs)
    return replace(a, specs=specs, prices=prices, price_policy=policy, task_metadata=parse_metadata(a.metadata))


def _priced(a: LiveSettings) -> LiveSettings:
    if not a.priced:
        raise TypeError("the settings were not resolved: the command line prices them once (resolved_settings)")
    return a


def check_settings(a: LiveSettings, *, need_models: int = 2) -> None:
    """Refuse bad settings (the command line's types refuse them too; run.json's are checked here)."""
    if not a.models or len(a.models) < need_models:
        raise InputError(f"--models needs at least {need_models} model specs")
    if not a.tasks:
        raise InputError("--tasks: name the harness task to rank on")
    if "," in a.tasks:
        raise InputError(f"--tasks {a.tasks!r}: rank runs on one task at a time")
    if not a.bank:
        raise InputError("--bank: the task's item bank is needed (build one with lm-eval-adaptive calibrate)")
    check_live_settings(a)


def check_live_settings(a: LiveSettings) -> None:
    """The settings rank and refresh share."""
    if a.confidence is not None and not (0.5 < a.confidence < 1):
        raise InputError(f"--confidence must be in (0.5, 1), got {a.confidence}")
    if a.budget_usd is not None and not (a.budget_usd > 0 and math.isfinite(a.budget_usd)):
        raise InputError(f"--budget-usd must be a positive number, got {a.budget_usd}")
    for flag, v in (("--concurrency", a.concurrency), ("--min-items", a.min_items),
                    ("--max-attempts", a.max_attempts), ("--max-failures", a.max_failures)):
        if not isinstance(v, int) or v < 1:
            raise InputError(f"{flag} must be an integer >= 1, got {v!r}")
    if a.max_items is not None and a.max_items < a.min_items:
        raise InputError("--max-items must be at least --min-items")
    backoff = a.backoff
    if not (isinstance(backoff, (int, float)) and math.isfinite(backoff) and backoff >= 0):
        raise InputError(f"--backoff must be a finite number >= 0, got {backoff!r}")
    parse_gen_kwargs(a.gen_kwargs)
    parse_metadata(a.metadata)
    timeout = a.timeout
    if timeout is not None and not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
        raise InputError(f"--timeout must be a finite number > 0, got {timeout!r}")


def live_prices(a: LiveSettings, specs=None) -> tuple[dict, PricePolicy]:
    """(name → price of each model of the run, the run's price policy): ``--price`` values, litellm's map,
    the bundled benchmark systems, else ``--price default``; every model without a price named in one
    error with the ``--price`` line to add (:func:`~lm_eval_adaptive.data.price_map.resolve_prices`).
    ``specs``: the models (default: ``a.models``, or a refresh's ``a.add``)."""
    if specs is None:
        specs = [parse_model_spec(s) for s in (a.models if a.models is not None else a.add or [])]
    policy = price_policy(a.price)
    return resolve_prices([(s.name, s.model_id, s.type) for s in specs], policy), policy


def check_model_names(specs, flag: str = "--models") -> None:
    """Refuse a model whose name or model id is not text (:func:`~lm_eval_adaptive.errors.check_text`) or
    holds a secret (anything the redaction would change: a key's shape, a ``--redact`` value, a
    credential of the environment). A name is a key of the journal and of every result, a model id is
    sent to the provider: neither may be ``***`` in one place and the secret in another (two names
    that redact alike would be one model's scores twice)."""
    for s in specs:
        for what, v in (("model name", s.name), ("model id", s.model_id)):
            check_text(v, f"{flag}: the {what}")
            if redact_text(v) != v:
                raise InputError(f"{flag}: the {what} {redact_text(v)!r} holds a secret, which every output and "
                                 f"the journal would show as ***; give the model a name that is none "
                                 f"(NAME=TYPE:ARGS) and its key as api_key=... or in the environment")


def refuse_existing_run(folder) -> None:
    """A run folder that holds a journal is never overwritten: InputError saying how to continue it."""
    d = Path(folder)
    if (d / JOURNAL_NAME).exists():
        raise InputError(f"a run already exists in {d}; continue it with --resume {d} or choose another --output")


def check_before_loading(a: LiveSettings) -> LiveSettings:
    """Every check of a new ``rank`` run that needs no harness task loaded, in order, each failing at once:
    the banks (a file or a shipped name, close matches offered; the task's metric read from its YAML
    under ``--include_path``; the bank's task and metric), the prices (every unpriced model in one
    error), the run folder; the settings priced (:func:`resolved_settings`), as the command line hands them down.
    (``refresh`` prices its new models as it starts, before it reads the leaderboard's history.)"""
    new_folder = a.output and not a.resume
    if new_folder:
        refuse_existing_run(a.output)
    check_model_names([parse_model_spec(s) for s in a.models or []])
    if a.bank:
        check_banks({a.tasks: a.bank if isinstance(a.bank, list) else [a.bank]}, metric=a.metric,
                    include_path=a.include_path)
    a = resolved_settings(a)
    if new_folder:
        check_output_folder(Path(a.output), "--output")
    return a


class PricedSession:
    """What a live session's items cost, read from its ``prices`` (model → Price), ``scorers`` (model →
    the harness scorer) and ``judges`` (``JudgePricing``): the one costing of the banked session
    (:class:`Setup`) and the bank-free one (``live/bank_free_session.py``)."""

    @property
    def priced_by_default(self) -> list[str]:
        """The models (and judges) priced by ``--price default``."""
        return priced_by_default(self.prices) + self.judges.priced_by_default

    def upper_cost(self, model: str, item_id: str) -> float:
        """The most the item may cost: the model's calls (prompt bytes, max output tokens) plus,
        when the task declared a judge, the judge allowance (JUDGE_PROMPT_ALLOWANCE)."""
        scorer = self.scorers[model]
        inp, out = scorer.upper_tokens(item_id)
        usd = upper_estimate(self.prices[model], inp, out)
        if self.judges.prices:
            j_in = 2 * scorer.prompt_chars(item_id) + 4 * out + JUDGE_PROMPT_ALLOWANCE
            usd += max(upper_estimate(p, j_in, JUDGE_OUTPUT_ALLOWANCE) for p in self.judges.prices.values())
        return usd

    def actual_cost(self, model: str, score) -> float:
        """What the item cost: the model's calls at its price plus the judge's calls at the judge's.
        ValueError when some call reported no usage."""
        if not score.usage and score.calls == 0:
            model_usd = 0.0
        else:
            model_usd = float(sum(actual_cost(self.prices[model], u) for u in score.usage))
        return model_usd + self.judge_cost(model, score)

    def judge_cost(self, model: str, score) -> float:
        """The judge's part of :meth:`actual_cost`."""
        return self.judges.cost(getattr(score, "judge", None) or [])


class Setup(PricedSession):
    """Everything a live run needs, built from the settings (shared by rank and refresh).

    ``bank`` is an :class:`~lm_eval_adaptive.engine.irt.bank.ItemBank` or a path to one, or a list of them
    (one per metric of the task: :attr:`joint`). Nothing is called and nothing is written here.
    """

    def __init__(self, a: LiveSettings, bank, *, anchors=None):

        a = _priced(a)
        os.environ.setdefault("TQDM_DISABLE", "1")  # the harness's per-call progress bars
        quiet_libraries(calls=not a.dry_run)
        self.specs = list(a.specs)
        check_model_names(self.specs, "--models" if a.add is None else "--add")
        names = [s.name for s in self.specs]
        clash = sorted(set(names) & set(anchors or ()))
        if clash:
            raise InputError(f"model(s) {clash} are already on the leaderboard")
        self.prices, policy = dict(a.prices), a.price_policy
        metadata = a.task_metadata
        self.task = HarnessTask(a.tasks, include_path=a.include_path, num_fewshot=a.num_fewshot,
                                gen_kwargs=a.gen_kwargs, apply_chat_template=a.apply_chat_template,
                                fewshot_as_multiturn=a.fewshot_as_multiturn,
                                system_instruction=a.system_instruction, metadata=metadata)
        loaded = self.task.load()
        self.bindings = bind_banks(bank, loaded[0], loaded[1], metric=a.metric, item_field=a.item_field)
        self.binding = self.bindings[0]
        self.bank = self.binding.bank
        #: metric → bank, in the order given; several: one generation per document, every metric scored
        self.banks = {b.metric: b.bank for b in self.bindings}
        self.metrics = list(self.banks)
        self.joint = len(self.bindings) > 1
        if self.joint:
            self.item_ids = joint_item_ids(self.banks)
            self._bank_index = {k: b.index_of(self.item_ids) for k, b in self.banks.items()}
            first = self._bank_index[self.metrics[0]]
        else:
            self.item_ids = [str(i) for i in self.bank.item_ids.tolist()]
            first = slice(None)
        self.judges = JudgePricing(policy)
        self.judges.declare(self.task.judges)  # a judge the task declared is priced before any call
        timeout = a.timeout
        self.scorers = {}
        for s in self.specs:
            self.scorers[s.name] = HarnessItemScorer(s, self.task, self.binding, timeout=timeout, loaded=loaded,
                                                     metrics=self.metrics if self.joint else None,
                                                     calls=not a.dry_run)
            loaded = None  # the first scorer takes the task object the bank was bound on
        self.task_name, self.metric, self.n_docs = self.binding.task, self.binding.metric, self.binding.n_docs
        #: how the report names the metric(s)
        self.metric_label = " + ".join(self.metrics)
        self.ledger = BudgetLedger(a.budget_usd)
        bank = self.bank
        n = bank.n_items
        inp = np.broadcast_to(np.asarray(bank.input_tokens, dtype=float), (n,))[first]
        out = np.broadcast_to(np.asarray(bank.output_tokens, dtype=float), (n,))[first]
        self.bank_costs = {m: self.prices[m].item_costs(inp, out) for m in names}
        ids = [str(x) for x in bank.item_ids]
        # what each item is expected to cost (the forecast's charges), and from it the full run the report
        # and the forecast show (a several-bank run: the joint items, in the first bank's order)
        self.expected_costs = {m: np.broadcast_to(expected_item_costs(
            self.prices[m], bank, [self.scorers[m].prompt_length(i) for i in ids]), (n,))[first] for m in names}
        self.full_cost = {m: float(np.mean(c)) * self.n_docs for m, c in self.expected_costs.items()}

    @property
    def bank_ids(self) -> str:
        """The run's bank id, or its banks' ids joined by ', '."""
        return ", ".join(b.bank_id for b in self.banks.values())

    def scale(self, item: int, raw):
        """The raw metric value of item ``item`` on the bank's [0, 1] scale; with a bank per metric, every
        metric's (``raw``: metric → value) by its own bank."""
        if not self.joint:
            return float(self.bank.scale(item, raw))
        return {k: float(self.banks[k].scale(int(self._bank_index[k][item]), v)) for k, v in raw.items()}


def rank_ranker(setup: Setup, a: LiveSettings) -> AdaptiveRanker:
    """A fresh ranker for a ``rank`` run: the setup's models and bank-estimated item costs, the settings' rules
    (a :class:`MultiMetricRanker` with a bank per metric, each metric under the same rules)."""
    bank = setup.bank
    judgement = live_judgement(a.settle_share, a.budget_usd)  # the default policy, with what the user said
    if setup.joint:
        return MultiMetricRanker(setup.banks, [s.name for s in setup.specs], item_costs=setup.bank_costs,
                                 confidence=a.confidence, n_init=a.min_items, n_max=a.max_items, budget=a.budget_usd,
                                 seed=a.seed, max_in_flight=a.concurrency, judgement=judgement,
                                 pair_rules={k: pair_rule_for(b, a.confidence, a.tie_margin, a.family_wise)
                                             for k, b in setup.banks.items()})
    return AdaptiveRanker(bank, [s.name for s in setup.specs], item_costs=setup.bank_costs, confidence=a.confidence,
                          n_init=a.min_items, n_max=a.max_items, budget=a.budget_usd, seed=a.seed,
                          max_in_flight=a.concurrency, pair_rule=pair_rule_for(bank, a.confidence, a.tie_margin,
                                                                                     a.family_wise),
                          judgement=judgement)


def quiet_libraries(*, calls: bool = True) -> None:
    """The harness's, litellm's and the HTTP libraries' loggers quiet; with ``calls`` (a run that calls models)
    litellm's debug banner off too, which imports litellm (seconds: a dry run, which calls nothing, skips it)."""
    for name in ("lm_eval", "LiteLLM", "litellm", "httpx", "urllib3"):
        lg = logging.getLogger(name)
        if lg.level < logging.ERROR:
            lg.setLevel(logging.CRITICAL)
    if not calls:
        return
    try:
        import litellm

        litellm.suppress_debug_info = True
    except ImportError:  # pragma: no cover
        pass




def resumed_settings(settings: LiveSettings, keys=RUN_KEYS, *, command: str = "rank") -> LiveSettings:
    """The settings of the run ``settings.resume`` continues, resolved once by the command line: its journal's
    (a new object; ``settings`` itself is left as it is), the cap stated with ``--budget-usd`` decided. Settings
    with no ``resume`` come back as they are.

    A resumed run is exact or refused: a setting the command line gave (``settings.given``) that
    differs from the journal's, or a ``run.json`` edited since the run started, is refused with one
    error naming each difference. The cap alone may change, and only when stated: ``--budget-usd``
    on resume sets ``cap_change`` (old, new), journaled when the run goes on; a cap under
    what the run already spent is refused. Nothing is written here.
    """
    if settings.resume and settings.dry_run:
        raise InputError("--dry-run forecasts a new run; it does not go with --resume")
    if not settings.resume:
        return settings
    d = Path(settings.resume)
    run_file = d / RUN_FILE
    if not run_file.is_file():
        raise InputError("no run to resume here (run.json is missing)", path=str(d))
    try:
        saved_run = json.loads(run_file.read_text())
        saved = saved_run["settings"]
        if not isinstance(saved, dict):
            raise TypeError("settings is not an object")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"unreadable run settings ({e})", path=str(run_file)) from None
    if saved_run.get("command", "rank") != command:
        raise InputError(f"this is a {saved_run.get('command')!r} run; resume it with that command",
                         path=str(run_file))
    if not (d / JOURNAL_NAME).is_file():
        raise InputError("no journal to resume (journal.jsonl is missing)", path=str(d))
    with Journal.open(d, writable=False) as peek:  # read and checked; nothing written yet
        recorded, cap, spent = _journaled_settings(peek, saved, keys, run_file)
    given = redact(dict(settings.given or {}), env_secrets())
    diffs = [f"{k}: journal {_shown(recorded.get(k))} vs given {_shown(v)}"
             for k, v in sorted(given.items()) if k in keys and k != "budget_usd"
             and not _same_setting(k, recorded.get(k), v, recorded)]
    if diffs:
        raise InputError("the resumed run differs from its journal: " + "; ".join(diffs) +
                         " (a resumed run keeps its settings; only --budget-usd may change its cap)",
                         path=str(d))
    names = {f.name for f in fields(LiveSettings)}
    taken = {k: recorded[k] for k in keys if k in recorded and k in names}
    cap_change = None
    budget = cap
    if "budget_usd" in given and given["budget_usd"] != cap:
        new = given["budget_usd"]
        if new is not None and new < spent:
            raise InputError(f"--budget-usd {new:g}: the run already spent ${spent:.6g} (its cap was "
                             f"{cap_text(cap)}); a cap under the spend is refused", path=str(d))
        cap_change, budget = (cap, new), new
    return replace(settings, **{**taken, "budget_usd": budget, "cap_change": cap_change})


def open_run(settings: LiveSettings, *, required: bool = True):
    """(output dir, journal or None, resumed?) of settings the command line resolved (a resume's by
    :func:`resumed_settings`, which read and checked its journal). A resumed run's journal is opened under
    the folder's writer lock; a new run's folder is checked, not created (:func:`start_run` creates it
    once every setting has been checked). Nothing is written here."""
    if settings.resume:
        if settings.dry_run:
            raise InputError("--dry-run forecasts a new run; it does not go with --resume")
        d = Path(settings.resume)
        lock = run_folder_lock(d).acquire()  # one writer: refused while another process writes the folder
        try:
            return d, Journal.open(d, secrets=env_secrets()).hold(lock), True
        except BaseException:
            lock.release()
            raise
    if not settings.output:
        if not required:
            return None, None, False
        raise InputError("--output DIR is needed (the journal, settings and results go there)")
    d = Path(settings.output)
    refuse_existing_run(d)
    check_output_folder(d, "--output")  # a folder, or one that can be created, and writable
    return d, None, False  # created by start_run, once every setting has been checked


def _journaled_settings(journal: Journal, saved: dict, keys, run_file: Path) -> tuple[dict, float | None, float]:
    """(the run's settings as its journal header records them, its cap now, what it spent); an
    InputError naming each setting of ``run.json`` (``saved``) that differs from the journal's."""
    header = journal.header
    recorded = header.get("settings")
    if isinstance(recorded, dict):
        names = sorted((set(recorded) | set(saved)) & set(keys))
        edited = [(k, recorded.get(k), saved.get(k)) for k in names if recorded.get(k) != saved.get(k)]
    else:  # a journal from before the header kept the settings: run.json's, checked where the header can
        recorded = dict(saved)
        edited = [(k, header[k], saved.get(k)) for k in ("budget_usd",) if k in header and header[k] != saved.get(k)]
    if edited:
        raise InputError("run.json was edited since the run started: " + "; ".join(
            f"{k}: journal {_shown(j)} vs run.json {_shown(r)}" for k, j, r in edited) +
            " (a resumed run takes the journal's settings; put run.json back, or state a new cap with "
            "--budget-usd)", path=str(run_file))
    cap = recorded.get("budget_usd")
    for rec in journal.records("cap"):
        cap = rec["budget_usd"]
    return recorded, cap, journal.spent_usd()


def _shown(v) -> str:
    return "none" if v is None else json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else repr(v)


def _same_setting(key: str, recorded, given, run: dict) -> bool:
    """Whether ``given`` (as the command line spells it) names the journal's setting ``recorded``."""
    if key in ("include_path", "leaderboard") and given is not None:
        given = [str(Path(g).resolve()) for g in (given if isinstance(given, list) else [given])]
        if key == "leaderboard":  # one board of those given, or (refreshed together) all of them
            return all(x in given for x in recorded) if isinstance(recorded, list) else recorded in given
        return given == [recorded]
    if key == "tasks" and isinstance(given, list):
        return recorded in given
    if key == "bank" and isinstance(given, list):
        from lm_eval_adaptive.data.shipped_banks import shipped_bank
        from lm_eval_adaptive.harness.bank_source import bank_reference

        task = run.get("tasks")
        named = [s for s in given if "=" in s and not Path(s).exists()]
        mine = [s.split("=", 1)[1] for s in named if s.split("=", 1)[0] == task]
        bare = [s for s in given if s not in named]
        if not mine:  # bare specs: a shipped bank of this task, or any bank file when they are all files
            mine = [s for s in bare if (shipped_bank(s) is not None and not Path(s).exists()
                                        and shipped_bank(s).task == task)] or (bare if bare == given else [])
        want = recorded if isinstance(recorded, list) else [recorded]
        return [bank_reference(b) for b in mine] == want
    if isinstance(recorded, (int, float)) and isinstance(given, (int, float)):
        return float(recorded) == float(given)
    if isinstance(recorded, list) or isinstance(given, list):
        return list(recorded or []) == list(given or [])
    return recorded == given


def start_run(out_dir: Path, command: str, settings: dict, header: dict, bank_id: str) -> Journal:
    """Create the run folder, its run.json (secrets redacted) and its journal, whose header records
    ``settings`` (what a resume takes); under the folder's writer lock, held by the journal until it is
    closed (:mod:`lm_eval_adaptive.writer_lock`)."""
    lock = run_folder_lock(out_dir).acquire()  # one writer: a second is refused before run.json is touched
    try:
        refuse_existing_run(out_dir)  # under the lock: a run that started meanwhile is not overwritten
        write_json(out_dir / RUN_FILE, redact({"command": command, "settings": settings, "bank_id": bank_id},
                                              env_secrets()))
        return Journal.create(out_dir, {**header, "settings": settings}, secrets=env_secrets()).hold(lock)
    except BaseException:
        lock.release()
        raise


def cap_text(v) -> str:
    """A dollar cap as the messages write it: ``$0.3``, or ``none``."""
    return "none" if v is None else f"${v:g}"


def journal_cap_change(journal: Journal, a: LiveSettings, ledger) -> tuple | None:
    """Journal the cap a resumed run was given with ``--budget-usd`` (``a.cap_change``); (old, new) cap,
    or None when it did not change."""
    if not a.cap_change:
        return None
    old, new = a.cap_change
    journal.append({"type": "cap", "budget_usd": new, "previous_usd": old, "spent_usd": ledger.spent})
    return old, new


def cheapest_call_check(setup: Setup, a: LiveSettings, models=None) -> None:
    """Refuse a cap under the cheapest first call's reservation (nothing could be bought)."""
    if a.budget_usd is None:
        return
    names = models or [s.name for s in setup.specs]
    cheapest = min(setup.upper_cost(m, str(i)) for m in names for i in setup.item_ids)
    spent = setup.ledger.spent
    if a.budget_usd - spent < cheapest:
        left = f" (${spent:.6g} of it already spent)" if spent else ""
        raise InputError(f"--budget-usd {a.budget_usd:g}{left} is below one call: the cheapest first call "
                         f"reserves ${cheapest:.6g} (its prompt and its request's most output tokens at the model's price)")

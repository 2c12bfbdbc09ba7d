"""Cost before spending: what ``rank``, ``refresh`` and ``run --adaptive`` are expected to spend, before any call.

``--dry-run`` sets a run up exactly as the real run would (settings checked, the bank bound
to the task, every price resolved, every prompt built) and then, instead of calling
anything, forecasts per model (per task for ``run --adaptive``):

* **typical**: the run simulated many times (:data:`RANKING_DRAWS` runs of ``rank`` and
  ``refresh``, :data:`DRAWS` per task of ``run --adaptive``). Each simulated run gives every
  model an ability drawn from the abilities of the bank's calibration models and a score for
  every item drawn from the bank's response model at that ability (the engine's simulation,
  :mod:`lm_eval_adaptive.engine.evaluation.simulation`; the anchors of a refresh keep their places), and
  charges each item its expected cost (:func:`~lm_eval_adaptive.live.session.expected_item_costs`:
  the bank's token counts, the input raised to the prompt the harness built where that is
  longer, at the model's price: the rule of the real report's full-run cost too). ``rank`` and
  ``refresh`` are run by the live driver itself (:class:`~lm_eval_adaptive.live.driver.LiveRun`:
  each call's upper estimate reserved against the cap in a
  :class:`~lm_eval_adaptive.live.ledger.BudgetLedger`, calls in flight, blocked models), its
  calls answered with their simulated scores one at a time, in the order sent; ``run --adaptive``'s test is run by the
  engine's driver (:func:`~lm_eval_adaptive.engine.evaluation.simulation.drive`). The table is consistent
  by construction (:func:`spreads`): the total's typical figure is the one most simulated runs
  come within :data:`TOLERANCE` of, taken inside the runs' 10%–90% range
  (:func:`most_likely_within`); the typical runs are those within the tolerance of it, and every
  typical figure, the total's and each row's items and dollars, is those same runs' median (inside its
  own range): no row is above the total.
  Not the median of all runs: a ranking's spend is often bimodal (the run ends when the cap's
  headroom cannot hold the next call of whichever model is still buying, a dear one or a cheap
  one) or has a long tail, and the median then sits on one mode or in the tail's pull.
* **worst case**: the most items the settings allow (``--max-items``, the whole bank without
  it), the dearest first, each at its expected cost, capped by the budget (``run --adaptive``:
  the budget plus one item's excess over the estimate its budget rule checks) and never above
  the full run: no simulated run can pass it. The hard bound is reported beside it: every call
  is reserved at its upper estimate (its prompt and the request's maximum output tokens, and a
  declared judge's allowance), so a ``rank`` or ``refresh`` never spends past the cap, and
  without a cap no more than the most items at their upper estimates.
* **full run**: every document of the task at the mean expected item cost, the figure the real
  ``rank``/``refresh`` report shows (:attr:`~lm_eval_adaptive.live.session.Setup.full_cost`).

LLM-judge calls are in the bound only (the bank holds no judge token counts). The table is
printed; with an output folder (``--output`` / ``--output_path``) it is also written there as
:data:`FORECAST_FILE`, and nothing else is.
"""

from __future__ import annotations

import concurrent.futures as cf
import copy
import os
import sys
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lm_eval_adaptive.atomic import write_json
from lm_eval_adaptive.data.prices import Price, upper_estimate
from lm_eval_adaptive.engine.irt.bank import joint_item_ids
from lm_eval_adaptive.engine.evaluation.simulation import AbilityPopulation, bank_scores, drive, joint_abilities
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness.scorer import TEMPLATE_TOKENS
from lm_eval_adaptive.live.driver import LiveRun
from lm_eval_adaptive.live.ledger import BudgetLedger
from lm_eval_adaptive.live.session import (
    JUDGE_OUTPUT_ALLOWANCE,
    JUDGE_PROMPT_ALLOWANCE,
    LiveSettings,
    Setup,
    expected_item_costs,
    rank_ranker,
)

__all__ = ["DRAWS", "RANKING_DRAWS", "TOLERANCE", "FORECAST_FILE", "Spread", "ModelForecast", "CostForecast",
           "SimulatedAnswer", "most_likely_within", "spreads", "simulated_live_run", "forecast_ranking",
           "forecast_test", "forecast_rank", "forecast_refresh", "live_arrays", "live_settings",
           "forecast_adaptive_run", "adaptive_run_forecast_folder", "write_forecast"]

#: Simulated runs per task of a ``run --adaptive`` forecast (its spends are narrow: one model, one stop rule).
DRAWS = 30
#: Simulated runs of a ``rank`` or ``refresh`` forecast: their spend is often bimodal or long-tailed, and
#: the typical figure of 30 draws moved by more than the tolerance with the seed (issue 12's dev cases).
RANKING_DRAWS = 100
#: How near the real spend a forecast's typical figure is meant to be, as a share of the real spend
#: (issue 12: "within 25% of what the real run then spends"); the typical figure is the one most
#: simulated runs come that near to.
TOLERANCE = 0.25
#: The file a forecast is written to in the run's output folder.
FORECAST_FILE = "cost_forecast.json"


def most_likely_within(values: Sequence[float], tolerance: float = TOLERANCE,
                       within: tuple[float, float] | None = None) -> tuple[float, float]:
    """(f, share): the figure f that the most of ``values`` come within ``tolerance`` of, relative to
    the value (|v - f| ≤ tolerance·v), and the share of them that do; with ``within`` = (lo, hi),
    the best such figure in [lo, hi].

    The point forecast that maximises the chance of a real figure drawn like ``values`` landing
    within the tolerance of it. Each v admits f in [(1 - tol)·v, (1 + tol)·v]; the most-covered
    point is found among those interval ends, the values, their median and the ends of
    ``within``, and among equally covered ones the nearest to the median is taken."""
    v = np.asarray(values, dtype=float)
    lo, hi = (1.0 - tolerance) * v, (1.0 + tolerance) * v
    cand = np.unique(np.concatenate([lo, hi, v, [np.median(v)], list(within or ())]))
    if within is not None:
        cand = cand[(cand >= within[0]) & (cand <= within[1])]
    eps = 1e-12 * max(float(np.max(np.abs(v))), 1e-300)  # interval ends count as covered
    count = np.sum((lo[None, :] <= cand[:, None] + eps) & (cand[:, None] <= hi[None, :] + eps), axis=1)
    best = cand[count == count.max()]
    f = float(best[np.argmin(np.abs(best - np.median(v)))])
    return f, float(count.max()) / v.size


def _share_within(v: np.ndarray, f: float) -> float:
    eps = 1e-12 * max(float(np.max(np.abs(v))), 1e-300)
    return float(np.mean(np.abs(v - f) <= TOLERANCE * v + eps))


@dataclass(frozen=True)
class Spread:
    """A figure of the simulated runs: ``typical``, the runs' 10%–90% range (``low``, ``high``; always
    ``low <= typical <= high``), and the share of runs within :data:`TOLERANCE` of the typical figure."""

    typical: float
    low: float
    high: float
    share_within: float = 1.0

    @classmethod
    def of(cls, values: Sequence[float], typical_runs: np.ndarray | None = None) -> Spread:
        """The spread of ``values`` (one per simulated run). Without ``typical_runs``, the typical
        figure is the one most runs come within the tolerance of, inside the 10%–90% range
        (:func:`most_likely_within`); with it (a mask of runs), the median of those runs, kept
        inside the range."""
        v = np.asarray(values, dtype=float)
        low, high = (float(q) for q in np.quantile(v, [0.1, 0.9]))
        if typical_runs is None:
            f, share = most_likely_within(v, within=(low, high))
            return cls(f, low, high, share)
        f = float(np.clip(np.median(v[np.asarray(typical_runs, dtype=bool)]), low, high))
        return cls(f, low, high, _share_within(v, f))

    def to_dict(self) -> dict:
        return {"typical": self.typical, "p10": self.low, "p90": self.high,
                f"share_within_{round(100 * TOLERANCE)}pct": self.share_within}


def spreads(usd_totals: Sequence[float], columns: Mapping[str, Sequence[float]]) -> tuple[Spread, dict]:
    """(the total dollars' spread, name → spread of each other column), consistent by construction.

    ``usd_totals[d]`` is simulated run d's total spend; each column holds one figure per run (a
    model's items or dollars, the total items). The *typical runs* are those within :data:`TOLERANCE`
    of :func:`most_likely_within` of the totals (inside their 10%–90% range); every typical figure,
    the total's and each column's, is the median of those same runs (kept inside its own 10%–90%
    range), so a row's items and dollars describe the same runs and no row's dollars (or items) are
    above the total's: each run's total is at least each of its parts."""
    v = np.asarray(usd_totals, dtype=float)
    most = Spread.of(v)
    eps = 1e-12 * max(float(np.max(np.abs(v))), 1e-300)
    typical = np.abs(v - most.typical) <= TOLERANCE * v + eps
    if not typical.any():  # pragma: no cover - the typical figure is within the tolerance of some run
        typical = np.ones(v.size, dtype=bool)
    # the total's typical figure is the median of the same runs as every row's: a run's total is at least
    # each of its parts, so the median (and any quantile) of the totals is at least each part's; clipped
    # into the range, monotone, it stays so (issue 30: the total was below one model's row)
    return Spread.of(v, typical), {k: Spread.of(col, typical) for k, col in columns.items()}


@dataclass(frozen=True)
class ModelForecast:
    """One model's (one task's, for ``run --adaptive``) forecast."""

    model: str
    task: str
    price: Price
    items: Spread
    usd: Spread
    worst_items: int
    worst_usd: float
    full_run_usd: float
    bound_usd: float = float("nan")  # the hard bound: the most items at their upper estimates, capped

    def to_dict(self) -> dict:
        return {"model": self.model, "task": self.task,
                "price": {"input_per_mtok": self.price.input_per_mtok, "output_per_mtok": self.price.output_per_mtok,
                          "source": self.price.source},
                "items": self.items.to_dict(), "cost_usd": self.usd.to_dict(),
                "worst_case": {"items": self.worst_items, "cost_usd": self.worst_usd, "bound_usd": self.bound_usd},
                "full_run_cost_usd": self.full_run_usd}


@dataclass
class CostForecast:
    """A dry run's forecast: per model, and in total."""

    command: str
    bank_id: str
    rows: list
    items: Spread  # total items of a run
    usd: Spread  # total dollars of a run
    worst_items: int
    worst_usd: float
    full_run_usd: float
    budget_usd: float | None
    draws: int
    seed: int
    abilities: str  # where the simulated abilities came from
    stopped_because: dict = field(default_factory=dict)  # how the simulated runs ended: counts
    settings: dict = field(default_factory=dict)
    bound_usd: float = float("nan")

    def to_dict(self) -> dict:
        return {"command": self.command, "dry_run": True, "calls_made": 0, "bank_id": self.bank_id,
                "models": [r.to_dict() for r in self.rows],
                "total": {"items": self.items.to_dict(), "cost_usd": self.usd.to_dict(),
                          "worst_case": {"items": self.worst_items, "cost_usd": self.worst_usd,
                                         "bound_usd": self.bound_usd},
                          "full_run_cost_usd": self.full_run_usd},
                "budget_usd": self.budget_usd, "settings": dict(self.settings),
                "method": {"draws": self.draws, "seed": self.seed, "abilities": self.abilities,
                           "typical": f"the medians of the typical runs: those within {TOLERANCE:.0%} of the total "
                                      f"most simulated runs come within {TOLERANCE:.0%} of, inside their 10%-90% "
                                      "range (p10-p90); the total's and each row's items and dollars alike, so no "
                                      "row is above the total; items charged at the bank's "
                                      "token counts (input: at least the built prompt's characters / 4) and the "
                                      "model's price",
                           "worst_case": "the most items the settings allow, the dearest first, at their expected "
                                         "cost, capped by the budget and never above a full run",
                           "bound": "the most items the settings allow at their upper estimates (prompt + max "
                                    "output tokens, and a declared judge's allowance), capped by the budget",
                           "judge_calls": "in the bound only"},
                "simulated_stops": dict(self.stopped_because)}


# ------------------------------------------------------------------------- simulation
@dataclass(frozen=True)
class SimulatedAnswer:
    """What a simulated call answers: its score, already on the bank's [0, 1] scale, and its cost."""

    raw: float
    usd: float
    usage: tuple = ()
    judge: tuple = ()
    calls: int = 1


class _Answer(cf.Future):
    """A simulated call's future: the driver taking its answer (``result``) lets the next call answer."""

    def __init__(self, on_taken: Callable[[], None]):
        super().__init__()
        self.on_taken: Callable[[], None] | None = on_taken

    def result(self, timeout=None):
        try:
            return super().result(timeout)
        finally:
            if self.on_taken is not None:
                taken, self.on_taken = self.on_taken, None
                taken()


class _AnsweringPool:
    """The live driver's pool for a simulated run, on the driver's own thread: calls answer one at a
    time, in the order they were sent (as a live run's calls of similar length do), each made (and
    charged in the ledger) once the driver has taken the answer before it; so the driver, between two
    answers, asks and reserves exactly as it would live, and a simulated run is the same each time."""

    def __init__(self):
        self.waiting: deque = deque()  # (future, call, arguments) not answered yet
        self.answered = 0  # answered, not yet taken by the driver

    def answer_next(self) -> None:
        if self.answered or not self.waiting:
            return
        f, fn, args = self.waiting.popleft()
        self.answered += 1
        try:
            f.set_result(fn(*args))
        except BaseException as e:  # noqa: BLE001 - handed to the driver as a call's error
            f.set_exception(e)

    def taken(self) -> None:
        self.answered -= 1
        self.answer_next()

    def submit(self, fn, *args) -> cf.Future:
        f = _Answer(self.taken)
        self.waiting.append((f, fn, args))
        self.answer_next()
        return f

    def shutdown(self, *, wait: bool = True, cancel_futures: bool = False) -> None:
        self.waiting.clear()


def simulated_live_run(ranker, score: Callable[[str, int], float], cost: Mapping[str, np.ndarray],
                       upper: Mapping[str, np.ndarray], cap: float | None) -> dict:
    """Run ``ranker`` to the end by the live driver (:class:`~lm_eval_adaptive.live.driver.LiveRun`),
    its calls answered one at a time in the order sent: model m's call for bank item i scores
    ``score(m, i)`` (scaled; or (scaled, raw) as a live run recorded them) and costs ``cost[m][i]``
    (at most its upper estimate ``upper[m][i]``, which the driver reserves in a ledger of ``cap``
    before the call). A call answers the raw metric value (the scaled score mapped back through the
    bank's range when ``score`` gives none) and the driver scales it back to that same scaled score,
    as a live run tells both. A ranker with no bank (the bank-free ranker: scores in metric units) is told
    ``score(m, i)`` as both. Returns items and dollars per model of ``cost`` and why the run stopped."""
    bank = getattr(ranker, "bank", None)
    index = {str(x): k for k, x in enumerate(bank.item_ids)} if bank is not None else None

    def position(item_id) -> int:  # the item's index in ``cost``, ``upper`` and ``score``
        return index[str(item_id)] if index is not None else ranker.item_index(item_id)

    scaled_of: dict[tuple[int, float], float] = {}  # (item, raw answered) -> its scaled score (the same for every model)

    def caller(m):
        def call(item_id):
            i = position(item_id)
            y = score(m, i)
            y, raw = (float(y[0]), float(y[1])) if isinstance(y, tuple) else \
                (float(y), float(y) if bank is None else float(bank.unscale(i, y)))
            scaled_of[(i, raw)] = y
            return SimulatedAnswer(raw=raw, usd=min(float(cost[m][i]), float(upper[m][i])))
        return call

    live = LiveRun(ranker, {m: caller(m) for m in ranker.models},
                   upper_cost=lambda m, item_id: float(upper[m][position(item_id)]),
                   actual_cost=lambda m, answer: answer.usd,
                   scale=lambda i, raw: scaled_of[(i, raw)], ledger=BudgetLedger(cap))
    live.run(pool=_AnsweringPool())
    ex = ranker.examinees
    return {"items": {m: ex[m].n for m in cost}, "usd": {m: ex[m].spent for m in cost},
            "stopped_because": ranker.stopped_because}


def _dearest(costs: np.ndarray, n: int) -> float:
    """The ``n`` dearest of ``costs``, summed."""
    u = np.sort(np.nan_to_num(np.asarray(costs, dtype=float)))[::-1]
    return float(np.sum(u[:n]))


def _capped(usd: float, *caps) -> float:
    return float(min([usd, *(c for c in caps if c is not None)]))


#: What the worker processes of :func:`_simulated_runs` read (set before they are forked).
_JOB: tuple | None = None


def _one_run(d: int) -> dict:
    first, scores, models, cost, upper, cap = _JOB
    y, row = scores[d], {m: j for j, m in enumerate(models)}
    r = simulated_live_run(copy.deepcopy(first), lambda m, i: float(y[row[m], i]), cost, upper, cap)
    return {"items": dict(r["items"]), "usd": dict(r["usd"]), "stopped_because": r["stopped_because"]}


def _simulated_runs(first, scores, models, cost, upper, cap) -> list:
    """One :func:`simulated_live_run` of a copy of ``first`` per simulated full run in ``scores``, in order.
    The runs are independent (their scores drawn beforehand), so they run in forked worker processes, one
    per CPU (at most 8), on Linux; else, or for a few runs, one after another here. Either
    way the same runs, the same results."""
    global _JOB
    import multiprocessing as mp  # noqa: PLC0415

    workers = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1), 8)
    _JOB = (first, scores, models, cost, upper, cap)
    try:
        # Linux only: forking a process that has loaded macOS system frameworks can crash the child
        forks = sys.platform.startswith("linux") and "fork" in mp.get_all_start_methods()
        if workers > 1 and len(scores) >= 8 and forks:
            with cf.ProcessPoolExecutor(workers, mp_context=mp.get_context("fork")) as pool:
                # one run per task: runs differ in length, and a chunk of them left to one worker at the end
                # would keep the others idle (the results come back in order either way)
                return list(pool.map(_one_run, range(len(scores)), chunksize=1))
        return [_one_run(d) for d in range(len(scores))]
    finally:
        _JOB = None


def forecast_ranking(new_ranker: Callable[[], object], models: Sequence[str], *, prices: Mapping[str, Price],
                     cost: Mapping[str, np.ndarray], upper: Mapping[str, np.ndarray], full_run: Mapping[str, float],
                     cap: float | None, task: str, command: str, seed: int = 0, draws: int | None = None,
                     settings: dict | None = None, bank=None, n_max: int | None = None,
                     to_metric: Callable[[np.ndarray], np.ndarray] | None = None) -> CostForecast:
    """Forecast a ``rank`` or ``refresh`` run: ``new_ranker()`` builds the run's ranker (anchors placed),
    ``models`` are the ones to be called; ``cost``/``upper`` give per model the expected and the
    upper USD of each bank item, ``full_run`` a full run's USD; ``draws`` simulated runs (default
    :data:`RANKING_DRAWS`), each run by :func:`simulated_live_run`. A ranker with no bank of its own (the bank-free
    ranker, its documents the bank's items) is forecast with ``bank`` (its response model simulates the scores),
    ``n_max`` (its most items per model) and ``to_metric`` (the simulated scores mapped to what the ranker is told)."""
    first = new_ranker()  # built once (a refresh places its anchors here), copied for each draw
    bank = first.bank if bank is None else bank
    population = AbilityPopulation.of_bank(bank)
    rng = np.random.default_rng(seed)
    scores = []
    for _ in range(RANKING_DRAWS if draws is None else draws):  # drawn here, in order: the same runs however run
        thetas = population.draw(len(models), rng)
        y = bank_scores(bank, thetas[:, None], rng)  # one simulated full run per model
        scores.append(y if to_metric is None else to_metric(y))
    runs = _simulated_runs(first, scores, models, {m: cost[m] for m in models}, upper, cap)
    usd, cols = spreads([sum(r["usd"].values()) for r in runs],
                        {"items": [sum(r["items"].values()) for r in runs],
                         **{("items", m): [r["items"][m] for r in runs] for m in models},
                         **{("usd", m): [r["usd"][m] for r in runs] for m in models}})
    n_max = first.n_max if n_max is None else n_max
    rows = []
    for m in models:
        full = float(full_run[m])
        rows.append(ModelForecast(
            model=m, task=task, price=prices[m], items=cols[("items", m)], usd=cols[("usd", m)], worst_items=n_max,
            worst_usd=_capped(_dearest(cost[m], n_max), full, cap), full_run_usd=full,
            bound_usd=_capped(_dearest(upper[m], n_max), cap)))
    full_total = float(sum(full_run[m] for m in models))
    return CostForecast(
        command=command, bank_id=bank.bank_id, rows=rows, items=cols["items"], usd=usd,
        worst_items=int(sum(r.worst_items for r in rows)),
        worst_usd=_capped(sum(r.worst_usd for r in rows), full_total, cap), full_run_usd=full_total,
        budget_usd=cap, draws=len(runs), seed=seed, abilities=population.source,
        stopped_because=dict(Counter(r["stopped_because"] for r in runs)), settings=dict(settings or {}),
        bound_usd=_capped(sum(r.bound_usd for r in rows), cap))


def _test_run(test, score: Callable, cost: np.ndarray, batch_size: int) -> dict:
    """Run a single-model test to the end with ``score(item)``, each item charged ``cost[item]``."""
    drive(test, score, cost=lambda i: cost[i], batch_size=batch_size)
    n = test.n if hasattr(test, "n") else test.examinee.n
    return {"items": int(n), "usd": float(test.spent), "stopped_because": test.stopped_because}


def forecast_test(new_test: Callable[[], object], *, model: str, task: str, price: Price, cost: np.ndarray,
                  upper: np.ndarray, full_run: float, budget: float | None, estimates: np.ndarray | None = None,
                  batch_size: int = 1, seed: int = 0, draws: int = DRAWS,
                  simulated_model: Callable | None = None) -> tuple[ModelForecast, list]:
    """Forecast one task of ``run --adaptive``: (its row, the simulated runs). ``new_test()`` builds the
    run's test (its budget rule checks ``estimates``, default ``cost``); each item is charged
    ``cost``. ``simulated_model(test, rng)`` gives one simulated model's ``score(item)`` (default: an
    ability drawn from the bank's calibration models and one simulated run of the bank)."""
    first = new_test()
    if simulated_model is None:
        population = AbilityPopulation.of_bank(first.bank)

        def simulated_model(test, rng):
            y = bank_scores(test.bank, float(population.draw(1, rng)[0]), rng)
            return lambda i: float(y[i])
    rng = np.random.default_rng(seed)
    runs = []
    for d in range(draws):
        test = first if d == 0 else new_test()
        runs.append(_test_run(test, simulated_model(test, rng), cost, batch_size))
    usd, cols = spreads([r["usd"] for r in runs], {"items": [r["items"] for r in runs]})
    n_max = first.max_items
    worst = _capped(_dearest(cost, n_max), full_run)
    bound = _dearest(upper, n_max)
    if budget is not None:  # the budget rule admits an item on its estimate: the last may cost more
        est = cost if estimates is None else estimates
        worst = min(worst, budget + max(0.0, float(np.max(np.nan_to_num(cost - est)))))
        bound = min(bound, budget + max(0.0, float(np.max(np.nan_to_num(upper - est)))))
    row = ModelForecast(model=model, task=task, price=price, items=cols["items"], usd=usd, worst_items=n_max,
                        worst_usd=worst, full_run_usd=full_run, bound_usd=bound)
    return row, runs


# ------------------------------------------------------------------------- commands
def live_arrays(setup: Setup, models: Sequence[str]) -> tuple[dict, dict, dict]:
    """Per model, the expected USD of each bank item and a full run's (the session's, as the real
    report shows them), and the upper estimate the live ledger reserves for each item."""
    ids = [str(x) for x in setup.bank.item_ids]
    cost = {m: setup.expected_costs[m] for m in models}
    upper = {m: np.array([setup.upper_cost(m, i) for i in ids]) for m in models}
    return cost, upper, {m: setup.full_cost[m] for m in models}


def live_settings(a: LiveSettings) -> dict:
    return {"confidence": a.confidence, "budget_usd": a.budget_usd, "min_items": a.min_items,
            "max_items": a.max_items, "concurrency": a.concurrency, "seed": a.seed, "tie_margin": a.tie_margin,
            "family_wise": a.family_wise, "settle_share": a.settle_share}


def forecast_rank(a: LiveSettings) -> CostForecast:
    """``rank --dry-run``: the run set up as :func:`~lm_eval_adaptive.cli.rank.cmd_rank` sets it up, then forecast
    (``a``: the settings the command line checked and resolved)."""
    if a.resume:
        raise InputError("--dry-run forecasts a new run; it does not go with --resume")
    setup = Setup(a, a.bank)
    names = [s.name for s in setup.specs]
    cost, upper, full = live_arrays(setup, names)
    fc = forecast_ranking(lambda: rank_ranker(setup, a), names, prices=setup.prices, cost=cost, upper=upper,
                          full_run=full, cap=a.budget_usd, task=setup.task_name, command="rank",
                          seed=a.seed, settings=live_settings(a))
    return fc


def forecast_refresh(settings: LiveSettings, setup: Setup, new_ranker: Callable[[], object]) -> CostForecast:
    """``refresh --dry-run``: the new models of ``setup`` placed by ``new_ranker()`` (anchors included), forecast."""
    names = [s.name for s in setup.specs]
    cost, upper, full = live_arrays(setup, names)
    fc = forecast_ranking(new_ranker, names, prices=setup.prices, cost=cost, upper=upper,
                          full_run=full, cap=settings.budget_usd, task=setup.task_name,
                          command="refresh", seed=settings.seed, settings=live_settings(settings))
    return fc


def forecast_adaptive_run(plan, config) -> CostForecast:
    """``run --adaptive --dry-run``: each task of the checked :class:`~lm_eval_adaptive.harness.run.AdaptivePlan`
    forecast with the run's own adaptive test (``config``: its
    :class:`~lm_eval_adaptive.harness.task_loop.AdaptiveRunConfig`; its budget rule checks the bank's
    token counts at the price, as the real run's does)."""
    from lm_eval_adaptive.harness.task_loop import adaptive_test, multi_metric_test

    rows, runs = [], []
    seed = 0
    abilities = AbilityPopulation.of_bank(plan.bound[0][2].bank).source
    for tname, task_obj, binding in plan.bound:
        bank = binding.bank
        chars = plan.prompt_lengths(task_obj, binding)
        cost = expected_item_costs(plan.price, bank, chars)
        est = plan.price.item_costs(bank.input_tokens, bank.output_tokens)  # what the real run's budget rule checks
        max_out = plan.max_output_tokens(task_obj)
        inp = np.fmax(np.nan_to_num(bank.input_tokens), chars + TEMPLATE_TOKENS)
        upper = np.array([upper_estimate(plan.price, x, max_out) for x in inp])
        if plan.judges.prices:  # as the live session allows for a judge: its prompt and reply
            j_in = 2 * 4 * inp + 4 * max_out + JUDGE_PROMPT_ALLOWANCE
            upper = upper + np.array([max(upper_estimate(p, x, JUDGE_OUTPUT_ALLOWANCE)
                                          for p in plan.judges.prices.values()) for x in j_in])
        full = float(np.mean(cost)) * binding.n_docs
        bindings = plan.metric_bindings.get(tname)
        if bindings:  # a bank per metric: one generation per joint item, every metric scored from it
            banks = {b.metric: b.bank for b in bindings}
            joint = bank.index_of(joint_item_ids(banks))  # the first bank's items, in joint order
            cost, upper, est = cost[joint], upper[joint], est[joint]
            draw, abilities = joint_abilities(banks)

            def simulated_model(test, rng, _draw=draw, _banks=banks):  # one simulated run of every bank
                thetas = _draw(rng)
                y = {m: bank_scores(b, thetas[m], rng) for m, b in _banks.items()}
                return lambda i: {m: float(v[test.bank_item(m, i)]) for m, v in y.items()}

            new_test = (lambda bs=bindings, c=est, t=tname: multi_metric_test(bs, c, config, t))
        else:
            simulated_model = None
            new_test = (lambda b=bank, c=est, t=tname: adaptive_test(b, c, config, t))
        row, task_runs = forecast_test(new_test, model=plan.model, task=tname, price=plan.price, cost=cost,
                                       upper=upper, full_run=full, budget=config.budget_usd, estimates=est,
                                       batch_size=config.batch_size, seed=seed, simulated_model=simulated_model)
        rows.append(row)
        runs.append(task_runs)
    usd, cols = spreads([sum(r[d]["usd"] for r in runs) for d in range(DRAWS)],
                        {"items": [sum(r[d]["items"] for r in runs) for d in range(DRAWS)]})
    if len(rows) > 1:  # each task's row from the same typical runs as the total
        _, per_task = spreads([sum(r[d]["usd"] for r in runs) for d in range(DRAWS)],
                              {(k, j): [r[d][k] for d in range(DRAWS)] for j, r in enumerate(runs)
                               for k in ("items", "usd")})
        rows = [ModelForecast(model=r.model, task=r.task, price=r.price, items=per_task[("items", j)],
                              usd=per_task[("usd", j)], worst_items=r.worst_items, worst_usd=r.worst_usd,
                              full_run_usd=r.full_run_usd, bound_usd=r.bound_usd) for j, r in enumerate(rows)]
    banks = sorted({b.bank.bank_id for _, _, b in plan.bound}
                   | {b.bank.bank_id for bs in plan.metric_bindings.values() for b in bs})
    fc = CostForecast(
        command="run --adaptive", bank_id=", ".join(banks), rows=rows, items=cols["items"], usd=usd,
        worst_items=int(sum(r.worst_items for r in rows)),
        worst_usd=float(sum(r.worst_usd for r in rows)), full_run_usd=float(sum(r.full_run_usd for r in rows)),
        budget_usd=config.budget_usd, draws=DRAWS, seed=seed, abilities=abilities,
        stopped_because=dict(Counter(r["stopped_because"] for task_runs in runs for r in task_runs)),
        # the stopping rule the simulated (and the real) tests use: --ci-width replaces the SE target
        settings={"se_target": config.se_target if config.ci_width is None else None, "ci_width": config.ci_width,
                  "min_items": config.min_items, "max_items": config.max_items,
                  "budget_usd_per_task": config.budget_usd, "batch_size": config.batch_size},
        bound_usd=float(sum(r.bound_usd for r in rows)))
    return fc


def adaptive_run_forecast_folder(plan) -> Path | None:
    """Where ``run --adaptive --dry-run`` writes its forecast: the run's ``--output_path`` folder (the
    folder of a ``.json`` path), or None."""
    out = plan.cfg.output_path
    if not out:
        return None
    p = Path(out)
    return p.parent if p.suffix == ".json" else p


# ------------------------------------------------------------------------- output
def write_forecast(fc: CostForecast, out_dir) -> Path | None:
    """Write the forecast into ``out_dir`` (nothing when None); the path written."""
    if not out_dir:
        return None
    return write_json(Path(out_dir) / FORECAST_FILE, fc.to_dict())

"""Backtest: the paper's evaluation protocol (METHOD.md §5) on any response table.

For each of ``folds`` disjoint hold-out sets of ``holdout_size`` models (a fixed random
partition): calibrate a bank on the other models; for each seed rank the hold-out models
with the adaptive ranker, with fixed-length CAT (every model gets as many items as the adaptive run's busiest
model, the paper's ``fixed``; and ``fixed_matched``, as many as the adaptive run's items of the set over its
models, :func:`matched_fixed_length`: the comparison at equal spend), with random sampling at the adaptive runs'
mean spend (documents drawn apart per model) and with ``shared_random`` at that spend (every model answers the
same random documents, ranked by its mean: the paired design a user would try first, issue 32);
compare each ranking with the full-data ranking (mean raw score over every item) by
Kendall τ. Hold-out scores are mapped into [0, 1] with the ranges stored in the bank and clipped,
exactly as a live model's would be, and told to the ranker with their raw values. With ``oracle_bank`` the bank is
calibrated on every model of the table, the hold-out set's included (in-sample): a bound on what this response
model can buy on the table, never a product figure.

The ground truth of a pair (issue 21): it is *truly tied at δ* when its full-task means differ by less
than δ = ``truth_margin_share`` × the range of the table's full-task means (every model's). Reported
per run and pooled: confident-order accuracy (pairs reported ordered, in the true order),
``equivalence_accuracy`` (pairs reported equivalent that are within the ranker's tie margin),
``tied_pairs_ordered_share`` (truly tied pairs reported ordered), the coverage of each model's
metric-scale interval (its full-task mean over the bank's items; ``metric_full_task_coverage``) and of the
θ-scale full-task interval (``theta_full_task_coverage``: the interval the bank's model error corrects, a
single-model run's), ``full_task_coverage`` being the metric scale's (the ranking's estimate of record), the
share of |z| > 1.96 for θ̂, tie recall under the bootstrap-overlap
truth (pairs whose 95% intervals of the mean overlap, the earlier definition; its precision is retired),
and for the unresolved pairs of ``settle_seeds`` seeds per fold their stated cost to settle against the
measured one (:func:`~lm_eval_adaptive.engine.evaluation.settle_check.run_on_to_settle`).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from typing import Mapping

import numpy as np

from lm_eval_adaptive.data.prices import DEFAULT_PRICE, Price
from lm_eval_adaptive.engine.anytime.bank_free_fold import fallback_runs
from lm_eval_adaptive.engine.anytime.small_bank import bank_use_of
from lm_eval_adaptive.engine.cat.bank_prediction import BankPrediction
from lm_eval_adaptive.engine.evaluation.baselines import fixed_length_cat, random_sampling, shared_random
from lm_eval_adaptive.engine.irt.calibration import calibrate, resolve_response_model
from lm_eval_adaptive.engine.cat.estimation import Z95
from lm_eval_adaptive.engine.evaluation.model_error import correction_from_records, single_model_check
from lm_eval_adaptive.engine.ranking.pairs.rules import pair_rule_for
from lm_eval_adaptive.engine.signature import format_signature, versions
from lm_eval_adaptive.engine.evaluation.simulation import drive
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig
from lm_eval_adaptive.engine.evaluation.backtest_figures import (
    confident_counts,
    holdout_sets,
    kendall_tau,
    tie_metrics,
)
from lm_eval_adaptive.engine.evaluation.fold_run import FoldRun
from lm_eval_adaptive.engine.evaluation.fold_parts import (
    fold_bank_costs,
    fold_ground_truth,
    fold_ranker,
    fold_selector,
    table_item_tokens,
    table_positions,
    table_range,
)
from lm_eval_adaptive.engine.evaluation.backtest_pooling import pooled, ratio, settle_summary, share_of, z_summary
from lm_eval_adaptive.engine.evaluation.run_records import (
    ability_on_every_item, confident_pair_records, honesty_record, pair_claims, settle_check_records,
)

__all__ = ["METHODS", "matched_fixed_length", "BacktestResult", "MethodSummary", "TieSummary", "backtest",
           "backtest_signature", "BacktestPlan", "FoldOutcome", "FoldRun", "plan_backtest", "plan_for_models",
           "backtest_fold", "assemble_backtest",
           "fold_bank", "pooled", "settle_summary", "self_check_backtest", "self_check_correction",
           "self_check_outcome", "self_check_taus",
           "SELF_CHECK_MIN_MODELS"]


@dataclass(frozen=True)
class MethodSummary:
    """One method's figures over every (fold, seed) run: mean Kendall τ (and its SD), items per
    hold-out set, their share of all (model, item) pairs in percent, and dollars per set."""

    tau: float
    tau_std: float
    items: float
    pct_used: float
    cost: float


@dataclass(frozen=True)
class TieSummary:
    """Reported ties against bootstrap ground-truth ties (percent of pairs; precision, recall, F1)."""

    adaptive_pct: float
    truth_pct: float
    precision: float
    recall: float
    f1: float


@dataclass(frozen=True)
class BacktestResult:
    """What a backtest of one table found (``to_dict()`` is the ``--json`` form).

    ``signature`` is a reproducibility signature, in the spirit of sacrebleu's: every
    setting that changes the figures, and the versions of this package and NumPy.
    """

    table: str
    n_items: int
    n_models: int
    discrimination: float
    k: float
    seconds: float
    runs: int
    confident_accuracy: float
    item_savings_vs_fixed: float
    cost_savings_vs_fixed: float
    ties: TieSummary
    adaptive: MethodSummary
    random: MethodSummary
    fixed: MethodSummary
    stopped_because: dict
    settings: dict
    folds: list
    signature: str
    full_task_coverage: float = float("nan")
    se_calibration: dict = field(default_factory=dict)
    person_misfit_flags: dict = field(default_factory=dict)
    cost_share_of_full_run: float = float("nan")
    folds_run: int = 0
    any_wrong_share: float = float("nan")  # share of runs with at least one confident pair in the wrong order
    counts: dict = field(default_factory=dict)  # the counts behind the shares, for pooling over tables
    records: list = field(default_factory=list, repr=False)  # per held-out model run (for the self-check)
    equivalence_accuracy: float = float("nan")  # share of equivalent claims within the tie margin
    tied_pairs_ordered_share: float = float("nan")  # share of truly tied pairs (|Δ| < δ) reported ordered
    theta_full_task_coverage: float = float("nan")  # the θ-scale full-task interval's coverage
    metric_full_task_coverage: float = float("nan")  # the metric-scale interval's coverage
    settle: dict = field(default_factory=dict)  # stated against measured cost to settle (see settle_summary)
    settle_records: list = field(default_factory=list, repr=False)  # per unresolved pair run on (for pooling)
    confident_pairs: list = field(default_factory=list, repr=False)  # per pair reported ordered (confident_pair_records)
    shared_random: MethodSummary | None = None  # every model on the same random documents, at the adaptive spend
    folds_fallen_back: int = 0  # folds ranked bank-free: the bank-use rule rejected the bank (bank_use_margin), or anytime
    fixed_matched: MethodSummary | None = None  # fixed-length CAT at the adaptive run's items (matched_fixed_length)

    def method(self, name: str) -> MethodSummary:
        """The summary of ``adaptive``, ``random``, ``shared_random``, ``fixed`` or ``fixed_matched``."""
        if name not in METHODS:
            raise KeyError(name)
        return getattr(self, name)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("records")
        d.pop("settle_records")
        d.pop("confident_pairs")
        return d


def backtest_signature(config: BacktestConfig, prices) -> str:
    """``key:value|...`` naming every setting behind a backtest's figures and the versions used."""
    c = asdict(config)
    if not c["oracle_bank"]:  # named only when set (older signatures stay as they were)
        del c["oracle_bank"]
    for key in ("response_model", "guessing"):  # named only when set (older signatures stay as they were)
        if c[key] is None:
            del c[key]
    if c["design"] == "individual":  # likewise: named only when paired
        del c["design"]
    if c["intervals"] == "fixed":  # named only when not today's (older signatures stay as they were)
        del c["intervals"]
    if c["bank_use_margin"] is None:  # likewise: named only when the bank-use rule applies
        del c["bank_use_margin"], c["fallback_order"]
    if not c["anytime"]:  # likewise: named only when set
        del c["anytime"]
    return format_signature({k: c[k] for k in sorted(c)} | {"prices": list(prices)} | versions())


#: The methods a backtest compares (:meth:`BacktestResult.method`).
METHODS = ("adaptive", "random", "shared_random", "fixed", "fixed_matched")


def matched_fixed_length(adaptive_items: int, n_models: int) -> int:
    """Items per model of fixed-length CAT at the adaptive run's spend: its items of the set over the set's
    models, rounded half up (``floor(x + 0.5)``). A model with fewer bank items it has scores for (the
    excluded ones never given) gets fewer, so the set's items are the adaptive run's within ± ``n_models``/2
    unless a model runs out."""
    return int(np.floor(adaptive_items / n_models + 0.5))


#: Fewest models a self-check can run on: a hold-out pair and two to calibrate on.
SELF_CHECK_MIN_MODELS = 4


def self_check_backtest(table, config: BacktestConfig) -> BacktestResult | None:
    """Leave-models-out cross-validation on ``table`` itself, as a bank calibrated on it checks
    itself: ``config``'s settings with hold-out sets of up to ``holdout_size`` models (fewer on a
    small table, at least 2), ``self_check_seeds`` seeds, a 200-resample bootstrap, the default
    partition and no further nesting. None when the table has too few models to hold some out."""
    n = int(table.n_models)
    if n < SELF_CHECK_MIN_MODELS:
        return None
    # the self-check ranks with the judgement the product ranks with (the metric scale, its default stopping
    # policy): the misses it measures are those of the runs the bank will serve; always out of sample (an oracle
    # bank's correction is measured as any bank's: on models its inner banks did not see)
    inner = replace(config, holdout_size=min(config.holdout_size, n - 2), seeds=config.self_check_seeds,
                    bootstrap=200, partition_seed=BacktestConfig.partition_seed, self_check=False, family_wise=False,
                    settle_seeds=0, tie_margin_share=None, intervals="fixed", bank_use_margin=None,
                    oracle_bank=False, anytime=False)
    return backtest(table, config=inner)


def self_check_correction(table, config: BacktestConfig) -> dict:
    """The model-error correction a bank calibrated on ``table`` gets from its self-check; {} when the table has
    too few models to hold some out (:func:`self_check_outcome`)."""
    return self_check_outcome(table, config)[0]


def self_check_outcome(table, config: BacktestConfig) -> tuple[dict, dict | None]:
    """(the model-error correction, the τ figures) a bank calibrated on ``table`` gets from its self-check
    (:func:`self_check_backtest`, and for a 2PL/3PL bank the single-model leg of
    :func:`~lm_eval_adaptive.engine.evaluation.model_error.single_model_check`); ({}, None) when the table has
    too few models to hold some out. The τ figures: :func:`self_check_taus`."""
    r = self_check_backtest(table, config)
    if r is None:
        return {}, None
    records = list(r.records)
    if resolve_response_model(table, config.response_model) != "continuous":
        records += single_model_check(table, lambda history: calibrate(
            history, scaling=config.scaling, method=config.method, likelihood=config.likelihood,
            metric=getattr(table, "metric", None), response_model=config.response_model, guessing=config.guessing))
    return correction_from_records(records), self_check_taus(r)


def self_check_taus(r: "BacktestResult") -> dict:
    """What the bank-use rule reads (engine/anytime/small_bank.py) of a self-check backtest ``r``: its pooled
    adaptive τ (``mean_tau``), the τ of shared random documents at the same spend on the same held-out sets
    (``shared_random_tau``) and the (set, seed) runs they rest on (``tau_runs``)."""
    return {"mean_tau": r.adaptive.tau, "shared_random_tau": r.method("shared_random").tau, "tau_runs": r.runs}


def _summary(vals) -> tuple[float, float]:
    a = np.asarray([v for v in vals if v is not None], dtype=float)
    return (float(a.mean()), float(a.std())) if a.size else (float("nan"), float("nan"))


@dataclass(frozen=True)
class BacktestPlan:
    """What a backtest of one table runs, fixed before any fold does: its settings, the models
    and their prices, and the hold-out set of each fold (:func:`plan_backtest`).

    Each fold is then an independent unit, :func:`backtest_fold`, a pure function of the
    table, the plan and the fold's index (its random streams are seeded from the partition
    seed, the fold and the seed), so folds may run in any order, in other processes or on
    other machines, and :func:`assemble_backtest` gives the same result as :func:`backtest`.
    """

    config: BacktestConfig
    models: tuple
    price: dict  # model name -> Price
    sets: tuple  # the hold-out set (a tuple of model names) of each fold that runs

    @property
    def n_folds(self) -> int:
        return len(self.sets)

    @property
    def runs(self) -> int:
        """Runs (fold × seed) of the whole backtest: a progress display's total."""
        return self.n_folds * self.config.seeds


@dataclass(frozen=True)
class FoldOutcome:
    """What one fold of a backtest found (:func:`backtest_fold`): its seeds' runs, its entry of
    the result's ``folds`` list, and the seconds it took."""

    fold: int
    runs: list
    summary: dict
    seconds: float


def plan_backtest(table, config: BacktestConfig = BacktestConfig(),
                  prices: Mapping[str, Price] | None = None) -> BacktestPlan:
    """Check ``config`` against ``table`` and fix the folds' hold-out sets (see :class:`BacktestPlan`)."""
    return plan_for_models(table.models, config, prices)


def plan_for_models(models, config: BacktestConfig = BacktestConfig(),
                    prices: Mapping[str, Price] | None = None) -> BacktestPlan:
    """:func:`plan_backtest` of a backtest over ``models`` (in order): the plan any backtest of
    those models runs on, one table's or several metric tables' of one task."""
    models = [str(m) for m in models]
    config.validate(len(models))
    prices = dict(prices or {})
    n_folds = config.folds_that_fit(len(models))  # fewer than asked on a small table, as the paper's code
    sets = holdout_sets(models, config.holdout_size, n_folds, config.partition_seed)
    return BacktestPlan(config=config, models=tuple(models),
                        price={m: prices.get(m, DEFAULT_PRICE) for m in models},
                        sets=tuple(tuple(s) for s in sets))


def backtest(table, *, config: BacktestConfig = BacktestConfig(),
             prices: Mapping[str, Price] | None = None, progress=None) -> BacktestResult:
    """Run the protocol on ``table`` and return its :class:`BacktestResult` (see module docstring).

    ``prices`` maps model names to :class:`~lm_eval_adaptive.data.prices.Price`; models not in
    it (or all, when None) cost :data:`~lm_eval_adaptive.data.prices.DEFAULT_PRICE`.
    ``progress`` is an optional callable ``progress(done, total)``, called for each of a fold's
    seeds when the fold is done. The folds run here one after another; to run them elsewhere
    (other processes, a cluster) see :class:`BacktestPlan`.
    """
    t0 = time.perf_counter()
    plan = plan_backtest(table, config, prices)
    outcomes = []
    for f in range(plan.n_folds):
        outcomes.append(backtest_fold(table, plan, f))
        if progress:
            done = sum(len(o.runs) for o in outcomes)
            for k in range(done - len(outcomes[-1].runs), done):
                progress(k + 1, plan.runs)
    return assemble_backtest(table, plan, outcomes, seconds=time.perf_counter() - t0)


def fold_bank(table, config: BacktestConfig, calib):
    """A fold's bank: calibrated on ``table``'s models ``calib`` with every calibration setting of
    ``config`` (scaling, method, likelihood, response model, guessing) and, as `calibrate` does,
    corrected by its own self-check on that history."""
    history = table.select_models(calib)
    bank = calibrate(history, scaling=config.scaling, method=config.method,
                     likelihood=config.likelihood, metric=getattr(table, "metric", None),
                     response_model=config.response_model, guessing=config.guessing)
    if config.self_check:  # the self-check checks the bank as built (a 2PL/3PL bank's kind, chosen once)
        inner = replace(config, response_model=bank.model.kind) if bank.model.per_item else config
        correction, taus = self_check_outcome(history, inner)
        bank.set_model_error(correction)
        if taus is not None:  # what the bank-use rule reads, as from a bank `calibrate` wrote
            bank.diagnostics["self_check"] = taus
    return bank


def backtest_fold(table, plan: BacktestPlan, f: int) -> FoldOutcome:
    """Fold ``f`` of ``plan`` on ``table``: calibrate a bank on the other models (and correct it by
    its own self-check; on every model with ``oracle_bank``), then for each seed rank the hold-out set adaptively,
    with fixed-length CAT (the busiest model's items, and the adaptive run's per model) and with random sampling
    and shared random documents at the adaptive runs' mean spend."""
    t0 = time.perf_counter()
    config = plan.config
    models = list(plan.models)
    price = plan.price
    hold = list(plan.sets[f])
    raw_all = table.mean_matrix()  # (M, N) raw mean score per pair, NaN = missing
    in_tok, out_tok, no_tokens = table_item_tokens(table)
    H = config.holdout_size
    # the oracle bank (a bound, never a product figure): calibrated on every model, the hold-out set's included
    calib = list(models) if config.oracle_bank else [m for m in models if m not in hold]
    bank = fold_bank(table, config, calib)
    tpos = table_positions(table, bank)  # table index of each bank item
    hidx = [models.index(m) for m in hold]
    raw_h = raw_all[hidx]  # (H, N)
    raw_bank = raw_h[:, tpos]  # (H, n_bank)
    scaled = bank.scale(np.arange(bank.n_items)[None, :], raw_bank)  # NaN stays NaN
    missing = {m: np.flatnonzero(np.isnan(raw_bank[j])) for j, m in enumerate(hold)}
    all_costs = {m: price[m].item_costs(in_tok, out_tok) for m in hold}
    bank_costs = fold_bank_costs(bank, price, all_costs, tpos, no_tokens)
    budget = float(np.mean([np.mean(all_costs[m]) for m in hold])) * H * config.target_items
    gt = fold_ground_truth(raw_h, hold, config, f)
    truth = gt["ranking"]
    row = {m: j for j, m in enumerate(hold)}
    truth_mean = {m: float(np.nanmean(raw_h[j])) for j, m in enumerate(hold)}
    full_run_cost = float(sum(np.sum(all_costs[m][~np.isnan(raw_h[j])]) for j, m in enumerate(hold)))
    se_all = {m: ability_on_every_item(bank, scaled[j]) for j, m in enumerate(hold)}

    def scaled_score(m, i):
        return float(scaled[row[m], i])

    spread = table_range(raw_all)
    margin = config.tie_margin if config.tie_margin_share is None else config.tie_margin_share * spread
    delta = config.truth_margin_share * spread
    bank_mean = {m: float(np.nanmean(raw_bank[j])) for j, m in enumerate(hold)}
    pair_rule = pair_rule_for(bank, config.confidence, margin, config.family_wise)

    def score_of(m, i):
        return float(scaled[row[m], i]), float(raw_bank[row[m], i])

    score_range = (float(np.nanmin(raw_all)), float(np.nanmax(raw_all)))
    use = None if config.bank_use_margin is None else bank_use_of(bank, margin=config.bank_use_margin)
    # ranked bank-free, as `rank` would: the rule rejects the bank, or `anytime` (the bank orders the open pairs)
    fallen = config.anytime or (use is not None and not use.use_bank)
    order_key = BankPrediction(bank) if config.anytime or config.fallback_order == "bank" else None
    fold_runs = fallback_runs(hold, table.items, raw_h, all_costs, config, f, gt=gt, score_range=score_range,
                              budget=budget, margin=margin, delta=delta, truth_mean=truth_mean,
                              full_run_cost=full_run_cost, order_key=order_key) if fallen else []
    def fixed_figures(seed: int, selector, busiest: int, items: int) -> dict:
        """Fixed-length CAT on the bank for seed ``seed``: as many items per model as the busiest model had
        (``fixed``) and at the run's own items (``fixed_matched``), as :class:`FoldRun` fields."""
        out = {}
        for name, n in (("fixed", busiest), ("fixed_matched", matched_fixed_length(items, H))):
            run = fixed_length_cat(bank, hold, n, scaled_score, item_costs=bank_costs, rng=np.random.default_rng(seed),
                                   selector=selector, exclude=missing)
            out |= {f"{name}_tau": kendall_tau(run.ranking, truth), f"{name}_items": run.total_items,
                    f"{name}_cost": run.total_cost}
        return out

    for seed in range(config.seeds):
        if fallen:  # ranked bank-free; fixed-length CAT still runs on the bank, with the seed's selector
            r = fold_runs[seed]
            for k, v in fixed_figures(seed, fold_selector(bank, config, f, seed), r.busiest_items,
                                      r.adaptive_items).items():
                setattr(r, k, v)
            continue
        ranker = fold_ranker(bank, hold, config, f, seed, item_costs=bank_costs, budget=budget, exclude=missing,
                             pair_rule=pair_rule, score_range=score_range)
        selector = ranker.selector
        res = drive(ranker, scaled_score, raw=lambda m, i: float(raw_bank[row[m], i]))
        honesty = honesty_record(ranker, res, bank, raw_bank, row, truth_mean, se_all, bank_mean)
        honesty["covered"] = honesty["covered_metric"]
        claims = pair_claims(res, truth_mean, margin or 0.0, delta)
        settle = settle_check_records(ranker, res, score_of, config, margin or 0.0, [config.partition_seed, f, seed],
                                bank_mean) \
            if seed < config.settle_seeds else []
        pred_ties = {frozenset(p) for p in res.ties}
        prec, rec, f1 = tie_metrics(pred_ties, gt["ties"])
        right, confident = confident_counts(res.ranking, truth, pred_ties)
        pairs = [p | {"fold": f, "seed": seed}
                 for p in confident_pair_records(ranker, res, bank, truth, pred_ties, truth_mean, bank_mean)]
        fold_runs.append(FoldRun(
            fold=f, seed=seed, adaptive_tau=kendall_tau(res.ranking, truth),
            adaptive_items=res.total_items, adaptive_cost=res.total_cost,
            adaptive_ties=len(pred_ties), stopped_because=res.stopped_because,
            **fixed_figures(seed, selector, max(res.items.values()), res.total_items),
            confident_accuracy=right / confident if confident else None,
            truth_ties=len(gt["ties"]), tie_precision=prec, tie_recall=rec, tie_f1=f1,
            cost_share=res.total_cost / full_run_cost if full_run_cost > 0 else float("nan"),
            confident=(right, confident),
            tie_counts=(len(pred_ties & gt["ties"]), len(pred_ties - gt["ties"]), len(gt["ties"] - pred_ties)),
            equivalent=claims["equivalent"], tied=claims["tied"], settle=settle, confident_pairs=pairs, **honesty))
    matched = float(np.mean([r.adaptive_cost for r in fold_runs]))
    available = {m: np.flatnonzero(~np.isnan(raw_h[j])) for j, m in enumerate(hold)}

    def raw_score(m, items):
        return raw_h[row[m], items]

    for r in fold_runs:
        rb = random_sampling(hold, available, raw_score, all_costs, matched,
                             np.random.default_rng([r.seed, f, 7]))
        r.random_tau = kendall_tau(rb.ranking, truth)
        r.random_items = rb.total_items
        r.random_cost = rb.total_cost
        sr = shared_random(hold, raw_h, all_costs, matched, np.random.default_rng([r.seed, f, 11]))
        r.shared_random_tau, r.shared_random_items = kendall_tau(sr["ranking"], truth), sr["items"]
        r.shared_random_cost = sr["cost"]
    summary = {"fold": f, "holdout": hold, "calibration_models": len(calib),
               "bank_items": bank.n_items, "response_model": bank.model.kind,
               "discrimination": bank.discrimination, "k": bank.k,
               "conformance_r2": bank.diagnostics.get("conformance_r2"),
               "budget_usd": budget, "matched_cost_usd": matched, "truth_ranking": truth,
               "tie_margin": margin, "truth_delta": delta,
               "truth_ties": sorted(sorted(t) for t in gt["ties"]),
               "adaptive_tau": _summary(r.adaptive_tau for r in fold_runs)[0],
               "random_tau": _summary(r.random_tau for r in fold_runs)[0],
               "shared_random_tau": _summary(r.shared_random_tau for r in fold_runs)[0],
               "fixed_tau": _summary(r.fixed_tau for r in fold_runs)[0],
               "fixed_matched_tau": _summary(r.fixed_matched_tau for r in fold_runs)[0],
               "bank_used": not fallen,
               "bank_use_reason": ("anytime: the bank orders the open pairs only" if config.anytime else use.reason)
               if fallen else None,
               "self_check_taus": bank.diagnostics.get("self_check")}
    return FoldOutcome(fold=f, runs=fold_runs, summary=summary, seconds=time.perf_counter() - t0)


def assemble_backtest(table, plan: BacktestPlan, outcomes, *, seconds: float) -> BacktestResult:
    """The :class:`BacktestResult` of ``plan`` on ``table`` from its folds' outcomes (in any order)."""
    outcomes = sorted(outcomes, key=lambda o: o.fold)
    if [o.fold for o in outcomes] != list(range(plan.n_folds)):
        raise ValueError(f"need one outcome of each of the {plan.n_folds} folds, "
                         f"got folds {[o.fold for o in outcomes]}")
    config = plan.config
    runs: list[FoldRun] = [r for o in outcomes for r in o.runs]
    folds = [o.summary for o in outcomes]
    price = plan.price
    N = table.n_items
    H = config.holdout_size
    n_pairs = H * (H - 1) // 2

    def block(prefix):
        tau, tau_sd = _summary(getattr(r, f"{prefix}_tau") for r in runs)
        items = _summary(getattr(r, f"{prefix}_items") for r in runs)[0]
        cost = _summary(getattr(r, f"{prefix}_cost") for r in runs)[0]
        return MethodSummary(tau=tau, tau_std=tau_sd, items=items, pct_used=100.0 * items / (H * N), cost=cost)

    def saving(a, b):
        return float(np.mean([1 - x / y if y > 0 else 0.0 for x, y in zip(a, b)]))

    stops = {}
    for r in runs:
        stops[r.stopped_because] = stops.get(r.stopped_because, 0) + 1
    settings = asdict(config) | {"prices": sorted({p.source for p in price.values()})}
    return BacktestResult(
        table=str(getattr(table, "metric", None) or getattr(table, "source", "table")),
        n_items=int(N), n_models=len(plan.models),
        discrimination=float(np.mean([f["discrimination"] for f in folds])),
        k=float(np.mean([np.nan if f["k"] is None else f["k"] for f in folds])),
        seconds=seconds, runs=len(runs),
        confident_accuracy=_summary(r.confident_accuracy for r in runs)[0],
        item_savings_vs_fixed=saving([r.adaptive_items for r in runs], [r.fixed_items for r in runs]),
        cost_savings_vs_fixed=saving([r.adaptive_cost for r in runs], [r.fixed_cost for r in runs]),
        ties=TieSummary(
            adaptive_pct=100.0 * _summary(r.adaptive_ties for r in runs)[0] / n_pairs,
            truth_pct=100.0 * _summary(r.truth_ties for r in runs)[0] / n_pairs,
            precision=_summary(r.tie_precision for r in runs)[0],
            recall=_summary(r.tie_recall for r in runs)[0],
            f1=_summary(r.tie_f1 for r in runs)[0]),
        adaptive=block("adaptive"), random=block("random"), fixed=block("fixed"),
        stopped_because=stops, settings=settings, folds=folds,
        signature=backtest_signature(config, settings["prices"]),
        full_task_coverage=share_of(c for r in runs for c in r.covered),
        theta_full_task_coverage=share_of(c for r in runs for c in r.covered_theta),
        metric_full_task_coverage=share_of(c for r in runs for c in r.covered_metric),
        equivalence_accuracy=ratio(sum(r.equivalent[0] for r in runs), sum(r.equivalent[1] for r in runs)),
        tied_pairs_ordered_share=ratio(sum(r.tied[0] for r in runs), sum(r.tied[1] for r in runs)),
        settle=settle_summary([x for r in runs for x in r.settle]),
        se_calibration=z_summary([z for r in runs for z in r.z]),
        person_misfit_flags={"share": share_of(x for r in runs for x in r.misfit),
                             "n": int(sum(len(r.misfit) for r in runs))},
        cost_share_of_full_run=_summary(r.cost_share for r in runs)[0],
        folds_run=plan.n_folds, folds_fallen_back=sum(not f.get("bank_used", True) for f in folds),
        any_wrong_share=share_of(r.confident[0] < r.confident[1] for r in runs),
        records=[x for r in runs for x in r.records],
        counts={"confident_right": sum(r.confident[0] for r in runs), "confident": sum(r.confident[1] for r in runs),
                "ties_tp": sum(r.tie_counts[0] for r in runs), "ties_fp": sum(r.tie_counts[1] for r in runs),
                "ties_fn": sum(r.tie_counts[2] for r in runs),
                "covered": sum(sum(r.covered) for r in runs), "models": sum(len(r.covered) for r in runs),
                "z_over_1_96": sum(int(abs(z) > Z95) for r in runs for z in r.z),
                "z": sum(len(r.z) for r in runs),
                "runs_any_wrong": sum(int(r.confident[0] < r.confident[1]) for r in runs), "runs": len(runs),
                "covered_theta": sum(sum(r.covered_theta) for r in runs),
                "covered_metric": sum(sum(r.covered_metric) for r in runs),
                "floored": sum(sum(r.floored) for r in runs),
                "floored_covered": sum(int(c) for r in runs for f, c in zip(r.floored, r.covered_metric) if f),
                "equivalent_right": sum(r.equivalent[0] for r in runs), "equivalent": sum(r.equivalent[1] for r in runs),
                "tied_ordered": sum(r.tied[0] for r in runs), "tied": sum(r.tied[1] for r in runs)},
        settle_records=[x for r in runs for x in r.settle],
        confident_pairs=[x for r in runs for x in r.confident_pairs], shared_random=block("shared_random"),
        fixed_matched=block("fixed_matched"),
    )

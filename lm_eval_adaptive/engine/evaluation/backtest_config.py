"""What a backtest is told: :class:`BacktestConfig`, its settings (folds, hold-out size, seeds, budget,
the ranker's confidence and tie margin, the judgement's stopping policy, the item design, the settle checks)."""

from __future__ import annotations

from dataclasses import dataclass
from lm_eval_adaptive.engine.irt.calibration import DEFAULT_METHOD, DEFAULT_SCALING
from lm_eval_adaptive.engine.cat.selection import DEFAULT_RANDOM_SHARE
from lm_eval_adaptive.engine.ranking.paired_design import DEFAULT_DESIGN, DESIGNS
from lm_eval_adaptive.engine.ranking.pairs.metric_judgement import DEFAULT_ORDER, ORDERS
from lm_eval_adaptive.engine.anytime.small_bank import BANK_USE_MARGIN
from lm_eval_adaptive.engine.ranking.pairs.settle_policy import (
    DEFAULT_BUDGET_SHARE,
    DEFAULT_FLOOR_ITEMS,
    DEFAULT_FULL_RUN_SHARE,
    DEFAULT_OPTIMISM,
    DEFAULT_PAIR_SHARE,
)
from lm_eval_adaptive.errors import InputError


__all__ = ["BacktestConfig", "INTERVALS", "FALLBACK_ORDERS"]

#: The banked ranker's intervals (:attr:`BacktestConfig.intervals`).
INTERVALS = ("fixed", "anytime", "anytime-plain")
#: What may order the pairs a fallen-back fold leaves open (:attr:`BacktestConfig.fallback_order`).
FALLBACK_ORDERS = ("pairs", "bank")


@dataclass(frozen=True)
class BacktestConfig:
    holdout_size: int = 4
    folds: int = 5
    seeds: int = 20
    confidence: float = 0.95
    min_items: int = 10
    target_items: int = 20
    max_items: int | None = None
    partition_seed: int = 42
    scaling: str = DEFAULT_SCALING
    method: str = DEFAULT_METHOD
    likelihood: str = "quasi"
    top_k: int = 1
    bootstrap: int = 10_000
    tie_margin: float | None = None  # metric units: a pair closer than this is settled as a tie
    self_check: bool = True  # each fold's bank corrected by its own self-check (nested cross-validation)
    self_check_seeds: int = 2
    response_model: str | None = None  # calibrate(response_model=...): None = by the table (0/1 → 2pl)
    guessing: float | None = None  # 3pl: every item's c (None: estimated)
    family_wise: bool = False  # the whole ranking at γ (pair_rules.FamilyWise) instead of each pair
    tie_margin_share: float | None = None  # the tie margin as a share of the range of the table's full-task means
    truth_margin_share: float = 0.02  # δ of the ground truth (truly tied pairs), the same kind of share
    full_run_share: float | None = DEFAULT_FULL_RUN_SHARE  # the stopping policy (engine/ranking/pairs/settle_policy.py)
    budget_share: float | None = DEFAULT_BUDGET_SHARE
    optimism: float = DEFAULT_OPTIMISM
    settle_floor_items: float | None = DEFAULT_FLOOR_ITEMS  # the policy's floor in items per model
    pair_share: float | None = DEFAULT_PAIR_SHARE  # the policy's pair rule: a share of a full run of the pair
    random_share: float = DEFAULT_RANDOM_SHARE  # the selector's share of items drawn from one shared random order
    settle_seeds: int = 1  # seeds per fold whose unresolved pairs are run on to settle (0: none)
    settle_runs: int = 1  # continuations per pair: the run's own, then fresh ones (the median is reported; 0: none)
    design: str = DEFAULT_DESIGN  # the ranker's item design: "individual" or "paired" (engine/ranking/paired_design.py)
    # "fixed": today's metric-scale intervals; "anytime": anytime-valid with the bank as control variate,
    # "anytime-plain": without it (engine/anytime/banked_intervals.py)
    intervals: str = "fixed"
    # what the final report orders the pairs it leaves unordered by: "prediction" or "point"
    # (engine/ranking/pairs/metric_judgement.py DEFAULT_ORDER)
    order: str = DEFAULT_ORDER
    steer: bool = False  # the banked allocation weighs each open pair by its chance of being in the wrong order
    # the bank-use rule (engine/anytime/small_bank.py): a fold whose bank's self-check τ is below its shared-random
    # τ by more than this (or whose bank comes from too few models) is ranked bank-free; None: never fall back.
    # Default: rank's own m (small_bank.BANK_USE_MARGIN), so the backtest measures what rank does
    bank_use_margin: float | None = BANK_USE_MARGIN
    # what orders the pairs a fallen-back fold leaves open: "pairs", the bank-free ranker's fit of its paired
    # differences (rank's), or "bank", the rejected bank's prediction (engine/cat/bank_prediction.py; an experiment
    # of stop 32 that the rule in docs/cold-start.md, *The open pairs' order*, did not adopt)
    fallback_order: str = "pairs"
    # the bank calibrated on every model of the table, the hold-out set's included: an in-sample bound, never a
    # product figure (issue 32: what this response model can buy on a table with a perfect bank)
    oracle_bank: bool = False
    # every fold ranked as `rank --anytime` ranks: the bank-free ranker (anytime-valid intervals and decisions), the
    # fold's bank's prediction ordering only the pairs it leaves open (docs/cold-start.md, *The anytime-valid ranker
    # with a bank*); fixed-length CAT still runs on the bank
    anytime: bool = False

    def folds_that_fit(self, n_models: int) -> int:
        """Complete hold-out sets that fit, ``n_models // holdout_size`` as the paper's code (at most
        ``folds``). Each fold calibrates on every model outside its own set, at least 2 (:meth:`validate`)."""
        return min(self.folds, n_models // self.holdout_size)

    def validate(self, n_models: int) -> None:
        if self.holdout_size < 2:
            raise InputError(f"--holdout-size must be at least 2, got {self.holdout_size}")
        if self.folds < 1 or self.seeds < 1:
            raise InputError("--folds and --seeds must be at least 1")
        if n_models < self.holdout_size + 2:
            raise InputError(f"a hold-out set of {self.holdout_size} models needs at least "
                             f"{self.holdout_size + 2} models (2 left to calibrate on); the table has {n_models}")
        if not (0.5 < self.confidence < 1):
            raise InputError(f"--confidence must be in (0.5, 1), got {self.confidence}")
        if self.min_items < 1 or self.target_items < 1:
            raise InputError("--min-items and --target-items must be at least 1")
        if self.settle_seeds < 0 or self.settle_runs < 0:
            raise InputError(f"--settle-seeds and --settle-runs must be at least 0, got {self.settle_seeds} "
                             f"and {self.settle_runs}")
        if self.design not in DESIGNS:
            raise InputError(f"the design is one of {', '.join(DESIGNS)}, got {self.design!r}")
        if self.order not in ORDERS:
            raise InputError(f"the order is one of {', '.join(ORDERS)}, got {self.order!r}")
        if self.fallback_order not in FALLBACK_ORDERS:
            raise InputError(f"the fallback order is one of {', '.join(FALLBACK_ORDERS)}, got {self.fallback_order!r}")
        if self.intervals not in INTERVALS:
            raise InputError(f"the intervals are one of {', '.join(INTERVALS)}, got {self.intervals!r}")

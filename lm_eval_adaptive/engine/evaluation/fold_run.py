"""One run of a backtest fold: :class:`FoldRun`, what :func:`~lm_eval_adaptive.engine.evaluation.backtest.backtest_fold`
records per seed and :func:`~lm_eval_adaptive.engine.evaluation.backtest.assemble_backtest` pools."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["FoldRun"]


@dataclass
class FoldRun:
    """One (fold, seed) run of a backtest: the adaptive ranking's figures and its baselines' (see
    :mod:`~lm_eval_adaptive.engine.evaluation.backtest`); in a fold whose bank the bank-use rule rejects
    (``BacktestConfig.bank_use_margin``) the "adaptive" figures are the bank-free ranker's."""

    fold: int
    seed: int
    adaptive_tau: float
    adaptive_items: int
    adaptive_cost: float
    adaptive_ties: int
    stopped_because: str
    fixed_tau: float
    fixed_items: int
    fixed_cost: float
    random_tau: float = float("nan")
    random_items: int = 0
    random_cost: float = 0.0
    shared_random_tau: float = float("nan")
    shared_random_items: int = 0
    shared_random_cost: float = 0.0
    fixed_matched_tau: float = float("nan")
    fixed_matched_items: int = 0
    fixed_matched_cost: float = 0.0
    confident_accuracy: float | None = None
    truth_ties: int = 0
    tie_precision: float = 0.0
    tie_recall: float = 0.0
    tie_f1: float = 0.0
    cost_share: float = float("nan")
    confident: tuple = (0, 0)  # (right, all) pairs reported as ordered
    tie_counts: tuple = (0, 0, 0)  # predicted ties: (true positives, false positives, false negatives)
    covered: list = field(default_factory=list)  # per hold-out model: full-task interval holds the truth
    z: list = field(default_factory=list)  # per model with SE_stop > SE_all: the SE-calibration z
    records: list = field(default_factory=list)  # per model: what the self-check needs (see honesty_record)
    misfit: list = field(default_factory=list)  # per model: flagged by the person-fit statistic
    covered_theta: list = field(default_factory=list)  # per model: the θ-scale full-task interval holds the truth
    covered_metric: list = field(default_factory=list)  # per model: the metric-scale interval holds the truth
    equivalent: tuple = (0, 0)  # (within the margin, all) pairs reported equivalent
    tied: tuple = (0, 0)  # (reported ordered, all) truly tied pairs
    settle: list = field(default_factory=list)  # per unresolved pair run on: stated and measured items
    confident_pairs: list = field(default_factory=list)  # per pair reported ordered: see confident_pair_records
    floored: list = field(default_factory=list)  # per model: its residual variance was raised to the floor
    busiest_items: int = 0  # a bank-free run (fold fallen back): the items of its busiest model

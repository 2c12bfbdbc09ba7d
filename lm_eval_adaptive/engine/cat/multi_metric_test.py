"""An adaptive test of one model under several metrics at once: one generation per item, every metric scored.

The single-model counterpart of :class:`~lm_eval_adaptive.engine.ranking.multi_metric_ranker.MultiMetricRanker`
(which needs at least two models): ``run --adaptive`` with a bank per metric of one task.

It is :class:`~lm_eval_adaptive.engine.cat.adaptive_test.AdaptiveTest` with the model under test an
:class:`~lm_eval_adaptive.engine.cat.examinee.Examinee` of several metrics (its part a
:class:`~lm_eval_adaptive.engine.cat.metric_set.MetricSet`):

* the test's items are the ids every bank has (:func:`~lm_eval_adaptive.engine.irt.bank.joint_item_ids`);
  each metric keeps a one-metric :class:`~lm_eval_adaptive.engine.cat.examinee.Examinee` on its own bank (θ̂, SE, items,
  scores, person fit), into which every scored generation is recorded (a metric that cannot score it
  excludes the item for that metric only);
* the next item (:class:`~lm_eval_adaptive.engine.cat.selection.JointInformationSelector`): every second
  slot the first untaken item of one seeded random permutation of the joint items; the others maximise
  the normalised summed information Σ_k m_k² · I_k(θ̂_k) over the metrics that still need items
  (measurement SE above ``se_target``; every metric without a target or once all meet it);
  ``item_weighting="summed"`` uses Σ_k I_k;
* it stops through :class:`AdaptiveTest`'s :class:`~lm_eval_adaptive.engine.cat.stopping.StoppingRule` s,
  checked in this order: ``bank_exhausted`` (no joint item left), ``max_items``, ``se_target`` (every
  metric's measurement SE ≤ the target after ``min_items``: the examinee's measurement SE is the
  largest of the metrics'), ``budget`` (the next item would overrun it), and any ``rules`` given.

Driven like :class:`AdaptiveTest`: ``next_items(k)`` then ``record(item, {metric: scaled score})`` for
each. Items are indices into :attr:`item_ids`.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping, Sequence

import numpy as np

from lm_eval_adaptive.engine.irt.bank import ItemBank, joint_item_ids
from lm_eval_adaptive.engine.cat.adaptive_test import AdaptiveTest, TestResult
from lm_eval_adaptive.engine.cat.examinee import Examinee
from lm_eval_adaptive.engine.cat.estimation import EstimatorFactory
from lm_eval_adaptive.engine.cat.selection import DEFAULT_RANDOM_SHARE, ITEM_WEIGHTINGS, JointInformationSelector
from lm_eval_adaptive.engine.signature import versions
from lm_eval_adaptive.engine.cat.stopping import StoppingRule

__all__ = ["MultiMetricTest"]


class MultiMetricTest(AdaptiveTest):
    """Adaptive test of one model under every metric of ``banks`` (metric → its bank).

    ``item_costs``: USD per joint item (aligned with :attr:`item_ids`; needed for ``budget``).
    The other settings are :class:`~lm_eval_adaptive.engine.cat.adaptive_test.AdaptiveTest`'s; ``se_target``
    applies to every metric.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, banks: Mapping[str, ItemBank], *, se_target: float | None = 0.2, min_items: int = 30,
                 max_items: int | None = 500, budget: float | None = None, item_costs: np.ndarray | None = None,
                 seed: int | None = 0, name: str = "model", item_weighting: str = "normalised",
                 random_share: float = DEFAULT_RANDOM_SHARE, estimator: EstimatorFactory | None = None,
                 rules: Sequence[StoppingRule] = ()):
        if not banks:
            raise ValueError("a multi-metric test needs at least one metric bank")
        if item_weighting not in ITEM_WEIGHTINGS:
            raise ValueError(f"item_weighting must be one of {ITEM_WEIGHTINGS}, got {item_weighting!r}")
        self._check_settings(se_target, min_items, max_items, budget, item_costs, rules)
        self._metrics = [str(k) for k in banks]
        self._banks = {str(k): b for k, b in banks.items()}
        self._bank = None
        ids = joint_item_ids(self._banks)
        if not ids:
            raise ValueError("the metric banks share no item id")
        if item_costs is not None:
            item_costs = np.asarray(item_costs, dtype=float)
            if item_costs.shape != (len(ids),):
                raise ValueError(f"{item_costs.size} item costs for {len(ids)} joint items")
        selector = JointInformationSelector(self._banks, ids, weighting=item_weighting, share=random_share, seed=seed)
        self._begin(Examinee(self._banks, selector, name, item_costs=item_costs, estimator=estimator), se_target=se_target,
                    min_items=min_items, max_items=max_items, budget=budget, seed=seed, rules=rules)

    # ----------------------------------------------------------------- reading
    @property
    def metrics(self) -> list[str]:
        return list(self._metrics)

    @property
    def banks(self) -> Mapping[str, ItemBank]:
        return MappingProxyType(self._banks)

    @property
    def item_ids(self) -> list[str]:
        """The joint items' ids (an item index is a position here)."""
        return self._examinee.item_ids

    @property
    def examinees(self) -> Mapping[str, Examinee]:
        """Metric → the model's state under it (read it; it changes only through :meth:`record`)."""
        return self._examinee.parts

    @property
    def items(self) -> list[int]:
        """Joint items generated and recorded, in order (each once, whatever the metrics)."""
        return self._examinee.items

    @property
    def n(self) -> int:
        return self._examinee.n

    def bank_item(self, metric: str, item: int) -> int:
        """Index in ``metric``'s bank of joint item ``item``."""
        return self._examinee.bank_item(metric, item)

    def needing(self) -> list[str]:
        """The metrics whose measurement SE is still above the target (every metric without one)."""
        if self._se_target is None:
            return list(self._metrics)
        parts = self._examinee.parts
        return [k for k in self._metrics if parts[k].measurement_se > self._se_target]

    def signature(self) -> dict:
        """What decides this test's numbers (banks, rules, seed, weighting, versions)."""
        sel = self._examinee.selector
        return {"banks": {k: b.bank_id for k, b in self._banks.items()}, "se_target": self._se_target,
                "min_items": self._min_items, "max_items": self._max_items, "budget": self._budget,
                "seed": None if self._seed is None else str(self._seed), "item_weighting": sel.weighting,
                "random_share": sel.share,
                "stop": [r.describe() if hasattr(r, "describe") else str(r.reason) for r in self._rules],
                **versions()}

    # ----------------------------------------------------------------- running
    def _focus(self) -> tuple:
        """The metrics whose information counts for the next item: those that need items, or all."""
        need = set(self.needing()) or set(self._metrics)
        return tuple(k in need for k in self._metrics)

    def _next_item(self, e) -> int:
        return e.next_item(self._rng, self._focus())

    def _candidates(self, e, k: int) -> list[int]:
        return [int(i) for i in e.candidates(k, self._focus())]

    def peek(self) -> int:
        """The item :meth:`next_item` would give next (-1: none left), without reserving it."""
        e = self._examinee
        focus = self._focus()
        if self._peeked is None or self._peeked[0] != (e.version, focus):
            self._peeked = ((e.version, focus), e.next_item(self._rng, focus))
        return self._peeked[1]

    def run(self, score_fn) -> dict:
        """Drive the test to the end with ``score_fn(joint item index) -> {metric: scaled score}``;
        the result of each metric (:meth:`result`)."""
        while (item := self.next_item()) is not None:
            self.record(item, score_fn(item))
        return self.result()

    def result(self) -> dict[str, TestResult]:
        """Metric → what the test found under it."""
        reason = self._stopped_because or "running"
        sig = self.signature()
        spent = self._examinee.spent
        return {k: TestResult(theta=e.theta, se=e.se, n_items=e.n, spent=spent, stopped_because=reason,
                              items=e.items, scores=e.scores, signature=sig)
                for k, e in self._examinee.parts.items()}

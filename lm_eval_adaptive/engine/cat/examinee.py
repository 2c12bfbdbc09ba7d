"""One model under test (METHOD.md §3): :class:`Examinee`, over one metric's bank or several metrics at once.

An examinee is the state of one model under test: the items it was given and what they cost (its
:class:`~lm_eval_adaptive.engine.cat.item_ledger.ItemLedger`), the scores told, and what they say of its
ability, kept by one part (:class:`AbilityPart`):

* one metric (a bank): :class:`~lm_eval_adaptive.engine.cat.bank_ability.BankAbility`, the ability
  estimator, each item's information at selection, the raw values and the person fit;
* several metrics of one generation (a bank per metric, each item generated once and scored by every
  metric): :class:`~lm_eval_adaptive.engine.cat.metric_set.MetricSet`, a one-metric examinee per metric's
  bank as its parts.

:class:`~lm_eval_adaptive.engine.cat.adaptive_test.AdaptiveTest` drives one examinee with stopping rules
(:mod:`lm_eval_adaptive.engine.cat.stopping`); the rankers keep one per model. Neither knows where scores
come from: ask for the next item, administer it however you like (simulation, the harness, an API), then
record the scaled score.

The parts are swappable: item selection is any :class:`~lm_eval_adaptive.engine.cat.selection.Selector`,
ability estimation any :class:`~lm_eval_adaptive.engine.cat.estimation.EstimatorFactory`. An examinee's
state changes only through its methods (its attributes are read-only), and every score and cost is
checked (:mod:`lm_eval_adaptive.engine.irt.checks`).
"""

from __future__ import annotations

import math
from types import MappingProxyType
from typing import Mapping, Protocol

import numpy as np

from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.irt.checks import check_cost
from lm_eval_adaptive.engine.cat.bank_ability import BankAbility
from lm_eval_adaptive.engine.cat.estimation import DEFAULT_PRIOR_SD, AbilityEstimator, DispersionEAP, EstimatorFactory
from lm_eval_adaptive.engine.cat.item_ledger import ItemLedger
from lm_eval_adaptive.engine.cat.metric_set import MetricSet
from lm_eval_adaptive.engine.cat.person_fit import PersonFit
from lm_eval_adaptive.engine.cat.selection import JointInformationSelector, Selector, shared_default_selector

__all__ = ["AbilityPart", "Examinee"]


class AbilityPart(Protocol):
    """What an :class:`Examinee` asks of the part that measures its ability: the metrics, what the
    selector reads (``ability``; ``no_ability`` at a slot that reads none), the SE more items reduce, the
    check of a told score, and the adding of scores (``add``, ``add_many``: checked first, nothing changed
    when refused; then told to the part, after which the examinee marks the items in its ledger)."""

    no_ability: object

    @property
    def metrics(self) -> tuple[str, ...]: ...

    @property
    def measurement_se(self) -> float: ...

    def ability(self, focus=None): ...

    def bank_item(self, metric: str, item: int) -> int: ...

    def checked_score(self, y, item_id: str): ...

    def checked_many(self, items: np.ndarray, scores, raws, ids: list[str]) -> tuple: ...

    def add(self, item: int, y, raw, cost: float, random: bool) -> None: ...

    def add_many(self, items: np.ndarray, y, raws, costs: np.ndarray) -> None: ...

    def told(self, y) -> list: ...

    def copy_scores(self, scores: list) -> list: ...

    def charge(self, usd: float) -> None: ...


class Examinee(ItemLedger):
    """One model's adaptive-testing state, over one bank or the joint items of a bank per metric.

    Parameters
    ----------
    bank:
        The item bank; or metric → bank for several metrics of one generation, then with ``selector`` the
        :class:`~lm_eval_adaptive.engine.cat.selection.JointInformationSelector` over those banks (an item
        is then a position among the joint items, a score is metric → scaled score).
    selector:
        The item :class:`~lm_eval_adaptive.engine.cat.selection.Selector` (shared between examinees: it
        keeps no per-model state).
    name:
        The model's name (in error messages).
    prior_sd:
        Prior SD of the default estimator (:class:`~lm_eval_adaptive.engine.cat.estimation.GridEAP`).
    item_costs:
        USD cost of each item for this model (None: items cost 0).
    estimator:
        An :class:`~lm_eval_adaptive.engine.cat.estimation.EstimatorFactory`; default
        ``DispersionEAP(prior_sd)`` (the grid posterior, its SE scaled by the model's own dispersion).

    An item is *taken* once it is reserved (asked, score not known yet), scored or excluded; the selector
    never offers a taken item. :attr:`n`, :attr:`items`, :attr:`scores`: what was recorded, in order (each
    generation once, whatever the metrics); :attr:`parts`: metric → the model's one-metric examinee (itself,
    for one bank). For one bank the examinee also reads as its bank's ability: :attr:`theta`; :attr:`se`, the
    estimator's :attr:`measurement_se` (which shrinks as items are added) and the bank's measured model error
    :attr:`model_error_sd` (which does not, its misfit class's when :attr:`person_fit` flags the model) in
    quadrature; and, for the full-task metric (:mod:`lm_eval_adaptive.engine.ranking.pairs.metric_scale`), in
    bank order, each scored item's raw metric value (:attr:`raw`) and whether a random slot chose it
    (:attr:`random_mask`: :meth:`reserve` asks ``selector.is_random_slot`` for the slot it fills; an item
    recorded without a reservation counts as random only when it is the random share's own next item, see
    :meth:`record`). Several metrics: :attr:`measurement_se` is the largest of the parts' (an SE target is
    met when every metric meets it) and the next item is chosen from every part's θ̂ and measurement SE
    (``focus``: only some metrics' information counts).
    """

    def __init__(self, bank: ItemBank | Mapping[str, ItemBank], selector: Selector, name: str = "model", *,
                 prior_sd: float = DEFAULT_PRIOR_SD, item_costs: np.ndarray | None = None,
                 estimator: EstimatorFactory | None = None):
        factory = estimator if estimator is not None else DispersionEAP(prior_sd)
        # a selector may say that a slot's choice does not depend on θ̂ (a random slot): θ̂ is then not
        # estimated for it
        self._uses_theta = getattr(selector, "uses_theta", None)
        if isinstance(bank, ItemBank):
            super().__init__(bank.item_ids, selector, name, item_costs=item_costs)
            self._one: BankAbility | None = BankAbility(bank, factory, name)
            self._part: AbilityPart = self._one
            self._estimator: AbilityEstimator | None = self._one.estimator
        else:
            if not isinstance(selector, JointInformationSelector) or tuple(bank) != selector.metrics or \
                    any(b is not s for b, s in zip(bank.values(), selector.banks)):
                raise ValueError("an examinee of several metrics needs the JointInformationSelector over its banks")
            super().__init__(selector.item_ids, selector, name, item_costs=item_costs, unit="joint")
            parts = {k: Examinee(b, shared_default_selector(b, seed=0), name, prior_sd=prior_sd, estimator=estimator)
                     for k, b in bank.items()}  # each metric's own examinee on its bank
            self._part = MetricSet(selector, parts, name)
            self._one = None
            self._estimator = None
        self._items: list[int] = []
        self._scores: list = []

    # ----------------------------------------------------------------- reading
    @property
    def metrics(self) -> list[str]:
        return list(self._part.metrics)

    @property
    def parts(self) -> Mapping[str, Examinee]:
        """Metric → this model's one-metric :class:`Examinee` under it (itself, for one bank; read it: it
        changes through this object)."""
        if self._one is not None:
            return MappingProxyType({self._one.metrics[0]: self})
        return self._part.parts

    @property
    def item_ids(self) -> list[str]:
        return list(self._item_ids)

    def bank_item(self, metric: str, item: int) -> int:
        """Index in ``metric``'s bank of item ``item``."""
        return self._part.bank_item(metric, item)

    @property
    def n(self) -> int:
        """Items recorded (generations, for several metrics)."""
        return len(self._items)

    @property
    def items(self) -> list[int]:
        """The recorded items (bank indices, or joint items), in the order recorded (a copy)."""
        return list(self._items)

    @property
    def scores(self) -> list:
        """Their scaled scores (several metrics: metric → score, None where the metric could not score; a copy)."""
        return self._part.copy_scores(self._scores)

    @property
    def measurement_se(self) -> float:
        """The SE more items reduce (several metrics: the largest of the parts')."""
        est = self._estimator
        return est.se if est is not None else self._part.measurement_se

    def ability(self, focus=None):
        """What the selector reads of this model: θ̂ (one bank), or every part's θ̂ and measurement SE and
        which metrics count (``focus``: one bool per metric; None: all)."""
        return self._part.ability(focus)

    def _bank_ability(self) -> BankAbility:
        one = self._one
        if one is None:
            raise AttributeError(f"model {self._name!r} is tested on the joint items of the metrics {self.metrics}: "
                                 "read its part under one of them (parts[metric])")
        return one

    @property
    def bank(self) -> ItemBank:
        return self._bank_ability().bank

    @property
    def estimator(self) -> AbilityEstimator:
        """The ability estimator (read it; change it only by recording scores)."""
        return self._bank_ability().estimator

    @property
    def estimator_name(self) -> str:
        return self._bank_ability().estimator_name

    @property
    def theta(self) -> float:
        est = self._estimator
        return est.theta if est is not None else self._bank_ability().theta

    @property
    def person_fit(self) -> PersonFit:
        """How this model's scores fit the bank
        (:func:`~lm_eval_adaptive.engine.cat.person_fit.dispersion_fit` at θ̂)."""
        return self._bank_ability().person_fit(self._items, self._scores)

    @property
    def misfit(self) -> bool:
        """The person-fit statistic flags this model."""
        return self.person_fit.flagged if self.bank.model_error else False

    @property
    def model_error_sd(self) -> float:
        """The bank's measured model error on θ (its misfit class's when :attr:`misfit`); 0 without one."""
        bank = self.bank
        return bank.ability_error_sd(self.misfit) if bank.model_error else 0.0

    @property
    def se(self) -> float:
        """The ability SE: :attr:`measurement_se` and :attr:`model_error_sd` in quadrature."""
        est = self._estimator
        m = est.se if est is not None else self._bank_ability().measurement_se
        t = self.model_error_sd
        return float(math.hypot(m, t)) if t else m

    @property
    def info_at_selection(self) -> list[float]:
        """Fisher information of each scored item at θ̂ just before it was recorded (NaN for items
        recorded in bulk by :meth:`record_many`).

        An item recorded while θ̂ was not estimated (a slot the selector chose without it) gets its
        figure here, on first read: a fresh estimator is told the scores again, in order, and read
        before each such item (the same posterior, so the same θ̂: the grid posterior's θ̂ depends on
        the scores told, not on when it is read; after scores given in bulk, equal up to rounding)."""
        return self._bank_ability().info_at_selection(self._items, self._scores)

    @property
    def raw(self) -> np.ndarray:
        """Bank-order raw metric of every scored item, NaN elsewhere (read-only view)."""
        return self._bank_ability().raw

    def next_item(self, rng: np.random.Generator | None = None, focus=None) -> int:
        """The selector's next item (-1 if none is left; several metrics: the information summed over
        ``focus``, one bool per metric, None: every metric); reserves nothing."""
        uses = self._uses_theta
        if uses is None or uses(self._n_taken):
            est = self._estimator  # one bank: its θ̂, read directly
            ability = est.theta if est is not None else self._part.ability(focus)
        else:
            ability = self._part.no_ability
        return self._selector.select(ability, self._mask, self._n_taken, rng)

    def candidates(self, k: int, focus=None) -> np.ndarray:
        """(Up to) ``k`` untaken items, in the order the selector would give them; reserves nothing."""
        return self._selector.candidates(self._part.ability(focus), self._mask, self._n_taken, k)

    # ---------------------------------------------------------------- changing
    def checked_scores(self, y, item_id: str):
        """A told score checked (one bank: a finite number in [0, 1]; several metrics: metric → a number in
        [0, 1], None or NaN where the metric could not score, returned as metric → float or None)."""
        return self._part.checked_score(y, item_id)

    def check_recordable(self, items: np.ndarray, y, ids) -> None:
        """ValueError, changing nothing, unless the scaled scores ``y`` of bank ``items`` (ids ``ids``) may be
        recorded: 0 or 1 on a 2PL/3PL bank, and no item already scored or excluded (what a several-metric
        examinee asks each part before it records anything)."""
        self._bank_ability().check_binary(y, ids)
        clash = items[self._scored[items] | self._excluded[items]]
        if clash.size:
            self._check_new(int(clash[0]))

    def record(self, item: int, y, *, cost: float | None = None, raw=None, random: bool | None = None) -> None:
        """Add the scaled score ``y`` ∈ [0, 1] of ``item`` (reserved or not); several metrics: ``y`` is metric →
        score (None or NaN: the metric could not score it; the item is excluded for that metric, which is
        charged its cost).

        ``cost``: USD charged for it (default: its item cost). ``raw``: the raw metric value the score
        was scaled from (several metrics: metric → raw value; default: ``y`` mapped back through the bank's
        range, which a scaled score clipped at 0 or 1 cannot restore). ``random``: whether a random slot
        chose it (default: as :meth:`reserve` noted it, or for an item not reserved, see
        :meth:`_random_unreserved`). ValueError, with nothing changed, for a score that is not a finite
        number in [0, 1], a negative or non-finite cost or raw value, an item already scored or excluded.
        """
        if not (type(item) is int and 0 <= item < self._n_items):  # the common case needs no more checking
            item = self._check_item(item)
        part = self._part
        if not (type(y) is float and 0.0 <= y <= 1.0):
            y = part.checked_score(y, self.item_id(item))
        if cost is not None:
            cost = check_cost(cost, model=self._name, item=self.item_id(item))
        else:
            cost = 0.0 if self._item_costs is None else float(self._item_costs[item])
        if self._scored[item] or self._excluded[item]:
            self._check_new(item)
        mask, pos = self._mask, self._selector.positions(item)
        if random is None:
            random = bool(self._random[item]) if mask[pos] else self._random_unreserved(item)
        part.add(item, y, raw, cost, random)  # checks the rest first (refused: nothing changed)
        self._set_random(item, random)
        if not mask[pos]:
            mask[pos] = True
            self._n_taken += 1
        self._items.append(item)
        self._scores.append(y)
        self._scored[item] = True
        self._spent += cost
        self._version += 1
        self._changes += 1

    def record_many(self, items, scores, *, costs=None, raws=None) -> None:
        """Add the scores of several items at once (one vectorised update; e.g. a full run); several
        metrics: ``scores`` is metric → one score per item (NaN: the metric has none; the item is then
        excluded for it).

        The items were not chosen one by one, so their information at selection is NaN and none
        counts as a random slot's. ``costs``: USD per item (default: the item costs); ``raws``: the raw
        metric values (several metrics: metric → raw values; default: the scores mapped back through the
        bank's ranges). Checked like :meth:`record`; nothing is changed when anything is refused.
        """
        items = self._check_items(items)
        ids = [self.item_id(i) for i in items.tolist()]
        c = self._costs_of(items, costs, ids)
        if np.unique(items).size != items.size:
            raise ValueError(f"model {self._name!r}: an item appears twice in one record_many")
        clash = items[self._scored[items] | self._excluded[items]]
        if clash.size:
            self._check_new(int(clash[0]))
        part = self._part
        y, r = part.checked_many(items, scores, raws, ids)
        if not items.size:
            return
        part.add_many(items, y, r, c)
        self._mark_many(items)
        self._items.extend(items.tolist())
        self._scores.extend(part.told(y))
        self._spent += float(np.sum(c))
        self._version += 1
        self._changes += 1

    def charge(self, usd: float) -> None:
        """Add money spent on this model without a score (a call lost in flight, a paid call whose scoring
        failed; several metrics: every metric's part counts it too). ValueError for a negative or
        non-finite amount."""
        if usd is None:
            raise ValueError(f"model {self._name!r}: a charge needs an amount (USD)")
        usd = check_cost(usd, model=self._name)
        self._spent += usd
        self._part.charge(usd)

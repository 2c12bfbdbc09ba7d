"""Computerized adaptive testing of one model (METHOD.md §3).

:class:`Examinee` is the state of one model under test: its ability estimate, the items it
was given and what they cost. :class:`AdaptiveTest` drives one examinee with stopping rules
(SE target, minimum and maximum length, dollar budget; see
:mod:`lm_eval_adaptive.engine.cat.stopping`). Neither knows where scores come from: ask for the
next item, administer it however you like (simulation, the harness, an API), then record
the scaled score.

The parts are swappable: item selection is any :class:`~lm_eval_adaptive.engine.cat.selection.Selector`,
ability estimation any :class:`~lm_eval_adaptive.engine.cat.estimation.EstimatorFactory`, and
the test's stopping rules any :class:`~lm_eval_adaptive.engine.cat.stopping.StoppingRule`.

An examinee's state changes only through its methods (its attributes are read-only), and
every score and cost is checked (:mod:`lm_eval_adaptive.engine.irt.checks`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Sequence

import numpy as np

from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.irt.checks import (
    check_cost,
    check_costs,
    check_raw,
    check_score,
    check_scores,
)
from lm_eval_adaptive.engine.cat.estimation import (
    DEFAULT_PRIOR_SD,
    AbilityEstimator,
    DispersionEAP,
    EstimatorFactory,
)
from lm_eval_adaptive.engine.cat.person_fit import PersonFit, dispersion_fit
from lm_eval_adaptive.engine.cat.selection import (
    JointAbility,
    JointInformationSelector,
    Selector,
    shared_default_selector,
)
from lm_eval_adaptive.engine.signature import component_name, format_signature, versions
from lm_eval_adaptive.engine.cat.stopping import (
    BankExhausted,
    Budget,
    MaxItems,
    SETarget,
    StoppingRule,
)

__all__ = ["Examinee", "JointExaminee", "AdaptiveTest", "TestResult"]


class Examinee:
    """One model's adaptive-testing state over a bank.

    Parameters
    ----------
    bank, selector:
        The item bank and the item :class:`~lm_eval_adaptive.engine.cat.selection.Selector`
        (shared between examinees: it keeps no per-model state).
    name:
        The model's name (in error messages).
    prior_sd:
        Prior SD of the default estimator (:class:`~lm_eval_adaptive.engine.cat.estimation.GridEAP`).
    item_costs:
        USD cost of each bank item for this model (None: items cost 0).
    estimator:
        An :class:`~lm_eval_adaptive.engine.cat.estimation.EstimatorFactory`; default
        ``DispersionEAP(prior_sd)`` (the grid posterior, its SE scaled by the model's own dispersion).

    The SE an examinee reports (:attr:`se`) is the estimator's (:attr:`measurement_se`, which
    shrinks as items are added) and the bank's measured model error (:attr:`model_error_sd`,
    which does not) in quadrature; the model error is the one for misfitting models when the
    person-fit statistic flags this one (:attr:`person_fit`).

    An item is *taken* once it is reserved (asked, score not known yet), scored or
    excluded; the selector never offers a taken item.

    For the full-task metric (:mod:`lm_eval_adaptive.engine.ranking.pairs.metric_scale`) an examinee also keeps,
    in bank order, each scored item's raw metric value (:attr:`raw`; told with the score, else the
    scaled score mapped back through the bank's range) and whether a random slot of the selector
    chose it (:attr:`random_mask`: :meth:`reserve` asks ``selector.is_random_slot`` for the slot it
    fills; an item recorded without a reservation counts as random only when it is the random
    share's own next item, see :meth:`record`).
    """

    def __init__(self, bank: ItemBank, selector: Selector, name: str = "model", *,
                 prior_sd: float = DEFAULT_PRIOR_SD, item_costs: np.ndarray | None = None,
                 estimator: EstimatorFactory | None = None):
        factory = estimator if estimator is not None else DispersionEAP(prior_sd)
        self._name = name
        self._bank = bank
        self._selector = selector
        # a selector may say that a slot's choice does not depend on θ̂ (a random slot): θ̂ is then not
        # estimated for it
        self._uses_theta = getattr(selector, "uses_theta", None)
        self._factory = factory
        self._estimator = factory(bank)
        self._estimator_name = component_name(factory)
        self._n_items = bank.n_items
        self._mask = selector.new_mask()
        self._n_taken = 0  # True entries of the mask (the selector's window size)
        self._excluded = np.zeros(bank.n_items, dtype=bool)
        self._scored = np.zeros(bank.n_items, dtype=bool)
        self._items: list[int] = []
        self._scores: list[float] = []
        self._info: list[float] = []
        self._item_costs = item_costs
        self._spent = 0.0
        self._version = 0
        self._fit: tuple[int, PersonFit] | None = None  # (items scored, person fit then)
        self._raw = np.full(bank.n_items, np.nan)  # raw metric of each scored item (bank order)
        self._random = np.zeros(bank.n_items, dtype=bool)  # taken by a random slot of the selector
        self._n_random_taken = 0  # True entries of _random
        self._is_random_slot = getattr(selector, "is_random_slot", None)
        self._changes = 0  # scores and exclusions recorded (what the metric scale reads changed)

    # ----------------------------------------------------------------- reading
    @property
    def name(self) -> str:
        return self._name

    @property
    def bank(self) -> ItemBank:
        return self._bank

    @property
    def selector(self) -> Selector:
        return self._selector

    @property
    def estimator(self) -> AbilityEstimator:
        """The ability estimator (read it; change it only by recording scores)."""
        return self._estimator

    @property
    def estimator_name(self) -> str:
        return self._estimator_name

    @property
    def theta(self) -> float:
        return self._estimator.theta

    @property
    def measurement_se(self) -> float:
        """The estimator's SE: what more items reduce."""
        return self._estimator.se

    @property
    def person_fit(self) -> PersonFit:
        """How this model's scores fit the bank (:func:`~lm_eval_adaptive.engine.cat.person_fit.dispersion_fit` at θ̂)."""
        n = len(self._items)  # the fit changes only with the scores (θ̂ too): reserving an item keeps it
        if self._fit is None or self._fit[0] != n:
            fit = dispersion_fit(self._bank, self._items, self._scores, self._estimator.theta)
            self._fit = (n, fit)
        return self._fit[1]

    @property
    def misfit(self) -> bool:
        """The person-fit statistic flags this model."""
        return self.person_fit.flagged if self._bank.model_error else False

    @property
    def model_error_sd(self) -> float:
        """The bank's measured model error on θ (its misfit class's when :attr:`misfit`); 0 without one."""
        if not self._bank.model_error:
            return 0.0
        return self._bank.ability_error_sd(self.misfit)

    @property
    def se(self) -> float:
        """The ability SE: :attr:`measurement_se` and :attr:`model_error_sd` in quadrature."""
        m = self._estimator.se
        t = self.model_error_sd
        return float(math.hypot(m, t)) if t else m

    @property
    def n(self) -> int:
        """Items scored."""
        return len(self._items)

    @property
    def n_items(self) -> int:
        """Items of the bank (the most this examinee can be given)."""
        return self._n_items

    @property
    def items(self) -> list[int]:
        """Bank indices of the scored items, in the order recorded (a copy)."""
        return list(self._items)

    @property
    def scores(self) -> list[float]:
        """Their scaled scores (a copy)."""
        return list(self._scores)

    @property
    def info_at_selection(self) -> list[float]:
        """Fisher information of each scored item at θ̂ just before it was recorded
        (NaN for items recorded in bulk by :meth:`record_many`).

        An item recorded while θ̂ was not estimated (a slot the selector chose without it) gets its
        figure here, on first read: a fresh estimator is told the scores again, in order, and read
        before each such item (the same posterior, so the same θ̂: the grid posterior's θ̂ depends on
        the scores told, not on when it is read; after scores given in bulk, equal up to rounding)."""
        if None in self._info:
            self._fill_info()
        return list(self._info)

    def _fill_info(self) -> None:
        bank, info = self._bank, self._info
        model = bank.model
        est = self._factory(bank)
        for k, (item, y) in enumerate(zip(self._items, self._scores)):
            params = bank.item_params(item) if model.per_item else {}
            if info[k] is None:
                info[k] = self._information(model, est.theta, float(bank.b[item]), params)
            est.update(model, float(bank.b[item]), y, **params)

    @staticmethod
    def _information(model, theta: float, b: float, params: dict | None) -> float:
        if params:
            return float(model.information(theta, b, **params))
        return model.item_information(theta, b)

    @property
    def spent(self) -> float:
        """USD spent on this model: the scored items' costs and every :meth:`charge`."""
        return self._spent

    @property
    def item_costs(self) -> np.ndarray | None:
        return self._item_costs

    @property
    def n_taken(self) -> int:
        """Items taken: reserved, scored or excluded."""
        return self._n_taken

    @property
    def version(self) -> int:
        """A counter that changes whenever what the selector sees changes (taken items, θ̂):
        a cached next item is valid while the version is the same."""
        return self._version

    @property
    def changes(self) -> int:
        """A counter that changes whenever a score or an exclusion is recorded (what the full-task
        metric reads: :attr:`raw`, :attr:`random_mask`, :attr:`population`, θ̂); reservations leave it."""
        return self._changes

    @property
    def raw(self) -> np.ndarray:
        """Bank-order raw metric of every scored item, NaN elsewhere (read-only view)."""
        v = self._raw.view()
        v.flags.writeable = False
        return v

    @property
    def random_mask(self) -> np.ndarray:
        """Bank-order: True for the items a random slot of the selector chose (read-only view; for a
        reserved item not scored yet it says what the slot was)."""
        v = self._random.view()
        v.flags.writeable = False
        return v

    @property
    def population(self) -> np.ndarray:
        """Bank-order: the items the model's full-task mean is over, every item except those excluded
        without a score (e.g. it has no recorded answer)."""
        return self._scored | ~self._excluded

    def item_id(self, item: int) -> str:
        return str(self._bank.item_ids[item])

    def is_taken(self, item: int) -> bool:
        """The item is reserved, scored or excluded (the selector will not offer it)."""
        return bool(self._mask[self._selector.positions(self._check_item(item))])

    def is_scored(self, item: int) -> bool:
        return bool(self._scored[self._check_item(item)])

    def is_excluded(self, item: int) -> bool:
        return bool(self._excluded[self._check_item(item)])

    def taken(self) -> np.ndarray:
        """Bank-order boolean array: True for every taken item (a copy)."""
        return self._mask[self._selector.positions(np.arange(self._bank.n_items))].copy()

    def cost_of(self, item: int) -> float:
        return 0.0 if self._item_costs is None else float(self._item_costs[item])

    def next_item(self, rng: np.random.Generator | None = None) -> int:
        """Bank index of the selector's next item (-1 if none is left); reserves nothing."""
        uses = self._uses_theta
        theta = self._estimator.theta if uses is None or uses(self._n_taken) else math.nan
        return self._selector.select(theta, self._mask, self._n_taken, rng)

    def candidates(self, k: int) -> np.ndarray:
        """Bank indices of (up to) ``k`` untaken items, best first; reserves nothing."""
        return self._selector.candidates(self._estimator.theta, self._mask, self._n_taken, k)

    # ---------------------------------------------------------------- changing
    def _check_item(self, item) -> int:
        if type(item) is int and 0 <= item < self._n_items:  # the common case
            return item
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, np.integer)):
            raise ValueError(f"model {self._name!r}: an item is a bank index (int), got {item!r}")
        if not 0 <= item < self._bank.n_items:
            raise ValueError(f"model {self._name!r}: item index {item} is outside the bank "
                             f"(0..{self._bank.n_items - 1})")
        return int(item)

    def _check_items(self, items) -> np.ndarray:
        arr = np.atleast_1d(np.asarray(items))
        if arr.size == 0:
            return np.zeros(0, dtype=np.int64)
        if arr.ndim != 1 or arr.dtype.kind not in "iu":
            raise ValueError(f"model {self._name!r}: items must be bank indices (ints), got {items!r}")
        arr = arr.astype(np.int64)
        bad = arr[(arr < 0) | (arr >= self._bank.n_items)]
        if bad.size:
            raise ValueError(f"model {self._name!r}: item index {int(bad[0])} is outside the bank "
                             f"(0..{self._bank.n_items - 1})")
        return arr

    def _mark(self, item: int) -> None:
        pos = self._selector.positions(item)
        if not self._mask[pos]:
            self._mask[pos] = True
            self._n_taken += 1

    def exclude(self, items) -> None:
        """Never select these bank items (e.g. the model has no score for them)."""
        items = self._check_items(items)
        pos = self._selector.positions(items)
        self._mask[pos] = True
        self._n_taken = int(self._mask.sum())
        self._excluded[items] = True
        self._version += 1
        self._changes += 1

    def reserve(self, item: int) -> None:
        """Mark an item as taken (so it is never selected twice), before its score is known; the slot it
        fills is noted as random when the selector says so (``is_random_slot``)."""
        item = item if type(item) is int and 0 <= item < self._n_items else self._check_item(item)
        pos = self._selector.positions(item)
        if not self._mask[pos]:
            is_random = self._is_random_slot
            if is_random is not None and is_random(self._n_taken):
                self._random[item] = True
                self._n_random_taken += 1
            self._mask[pos] = True
            self._n_taken += 1
        self._version += 1

    def _random_unreserved(self, item: int) -> bool:
        """Whether an item recorded without a reservation counts as a random slot's: it is the random
        share's next item (the first untaken item of the selector's permutation) and fewer items are
        marked random than there are random slots among the first ``n_taken + 1``. A run told its
        scores in another order than it asked them (a replay) marks its random items this way."""
        sel = self._selector
        head = getattr(sel, "random_item", None)
        if head is None or sel.random_slots(self._n_taken + 1) <= self._n_random_taken:
            return False
        return head(self._mask, self._n_taken) == item

    def unreserve(self, item: int) -> None:
        """Undo :meth:`reserve`: the item may be selected again (an excluded item stays excluded)."""
        item = self._check_item(item)
        if self._scored[item]:
            raise ValueError(f"model {self._name!r}, item {self.item_id(item)!r}: already scored, "
                             "it cannot be given back")
        if not self._excluded[item]:
            pos = self._selector.positions(item)
            if self._mask[pos]:
                self._mask[pos] = False
                self._n_taken -= 1
        if self._random[item]:
            self._random[item] = False
            self._n_random_taken -= 1
        self._version += 1

    def _check_binary(self, y, ids) -> None:
        """A 2PL/3PL bank takes 0/1 scores only: ValueError naming the first other one."""
        if not self._bank.model.per_item:
            return
        y = np.atleast_1d(np.asarray(y, dtype=float))
        bad = np.flatnonzero((y != 0.0) & (y != 1.0))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"model {self._name!r}, item {ids[i]!r}: score {float(y[i])!r}; the "
                             f"{self._bank.model.kind} bank {self._bank.describe()} takes scores 0 or 1 only")

    def _check_new(self, item: int) -> None:
        if self._scored[item]:
            raise ValueError(f"model {self._name!r}, item {self.item_id(item)!r}: already scored")
        if self._excluded[item]:
            raise ValueError(f"model {self._name!r}, item {self.item_id(item)!r}: excluded for this model")

    def record(self, item: int, y: float, *, cost: float | None = None, raw: float | None = None,
               random: bool | None = None) -> None:
        """Add the scaled score ``y`` ∈ [0, 1] of bank item ``item`` (reserved or not).

        ``cost``: USD charged for it (default: its item cost). ``raw``: the raw metric value the score
        was scaled from (default: ``y`` mapped back through the bank's range, which a scaled score
        clipped at 0 or 1 cannot restore). ``random``: whether a random slot chose it (default: as
        :meth:`reserve` noted it, or for an item not reserved, see :meth:`_random_unreserved`).
        ValueError, with nothing changed, for a score that is not a finite number in [0, 1], a
        negative or non-finite cost or raw value, an item already scored or excluded.
        """
        if not (type(item) is int and 0 <= item < self._n_items):  # the common case needs no more checking
            item = self._check_item(item)
        if not (type(y) is float and 0.0 <= y <= 1.0):
            y = check_score(y, model=self._name, item=self.item_id(item))
        if cost is not None:
            cost = check_cost(cost, model=self._name, item=self.item_id(item))
        bank = self._bank
        if raw is None:
            raw = float(bank.lo[item]) + y * (float(bank.hi[item]) - float(bank.lo[item]))
        elif not (type(raw) is float and math.isfinite(raw)):
            raw = check_raw(raw, model=self._name, item=self.item_id(item))
        model = bank.model
        if model.per_item:  # a 2PL/3PL bank: 0/1 scores only, and the item's a, c
            self._check_binary(y, [self.item_id(item)])
            params = bank.item_params(item)
        else:
            params = None  # a one-parameter bank has none
        if self._scored[item] or self._excluded[item]:
            self._check_new(item)
        if random is None:
            random = bool(self._random[item]) if self._mask[self._selector.positions(item)] \
                else self._random_unreserved(item)
        if bool(random) != bool(self._random[item]):
            self._random[item] = bool(random)
            self._n_random_taken += 1 if random else -1
        b = float(bank.b[item])
        estimator = self._estimator
        if getattr(estimator, "estimated", True):  # θ̂ known now: the information now, else on first read
            self._info.append(self._information(model, estimator.theta, b, params))
        else:
            self._info.append(None)
        mask, pos = self._mask, self._selector.positions(item)  # _mark, inline
        if not mask[pos]:
            mask[pos] = True
            self._n_taken += 1
        if params:
            estimator.update(model, b, y, **params)
        else:
            estimator.update(model, b, y)
        self._items.append(item)
        self._scores.append(y)
        self._scored[item] = True
        self._raw[item] = raw
        if cost is None:
            cost = 0.0 if self._item_costs is None else float(self._item_costs[item])
        self._spent += cost
        self._version += 1
        self._changes += 1

    def record_many(self, items, scores, *, costs=None, raws=None) -> None:
        """Add the scores of several items at once (one vectorised update; e.g. a full run).

        The items were not chosen one by one, so their information at selection is NaN and none
        counts as a random slot's. ``costs``: USD per item (default: the item costs); ``raws``: the raw
        metric values (default: the scores mapped back through the bank's ranges). Checked like
        :meth:`record`; nothing is changed when anything is refused.
        """
        items = self._check_items(items)
        ids = [self.item_id(i) for i in items]
        y = check_scores(scores, model=self._name, items=ids)
        if y.shape != items.shape:
            raise ValueError(f"model {self._name!r}: {items.size} items but {y.size} scores")
        if costs is not None:
            c = check_costs(costs, model=self._name, items=ids)
            if c.shape != items.shape:
                raise ValueError(f"model {self._name!r}: {items.size} items but {c.size} costs")
        if raws is None:
            r = self._bank.unscale(items, y) if items.size else np.zeros(0)
        else:
            r = np.atleast_1d(np.asarray(raws, dtype=float))
            if r.shape != items.shape:
                raise ValueError(f"model {self._name!r}: {items.size} items but {r.size} raw values")
            if not np.all(np.isfinite(r)):
                check_raw(float(r[~np.isfinite(r)][0]), model=self._name, item=ids[int(np.argmin(np.isfinite(r)))])
        if np.unique(items).size != items.size:
            raise ValueError(f"model {self._name!r}: an item appears twice in one record_many")
        self._check_binary(y, ids)
        clash = items[self._scored[items] | self._excluded[items]]
        if clash.size:
            self._check_new(int(clash[0]))
        if not items.size:
            return
        self._estimator.update_many(self._bank.model, self._bank.b[items], y, **self._bank.item_params(items))
        pos = self._selector.positions(items)
        self._n_taken += int(np.count_nonzero(~self._mask[pos]))
        self._mask[pos] = True
        self._items.extend(items.tolist())
        self._scores.extend(y.tolist())
        self._info.extend([math.nan] * items.size)
        self._scored[items] = True
        self._raw[items] = r
        was = self._random[items]
        if was.any():  # reserved at a random slot, then recorded in bulk: not a random slot's after all
            self._n_random_taken -= int(was.sum())
            self._random[items] = False
        if costs is not None:
            self._spent += float(np.sum(c))
        elif self._item_costs is not None:
            self._spent += float(np.sum(np.asarray(self._item_costs, dtype=float)[items]))
        self._version += 1
        self._changes += 1

    def charge(self, usd: float) -> None:
        """Add money spent on this model without a score (a call lost in flight, a paid call
        whose scoring failed). ValueError for a negative or non-finite amount."""
        if usd is None:
            raise ValueError(f"model {self._name!r}: a charge needs an amount (USD)")
        self._spent += check_cost(usd, model=self._name)


class JointExaminee:
    """One model under several metrics at once: each joint item is generated once and scored by every metric.

    The joint items are those every bank has (:func:`~lm_eval_adaptive.engine.irt.bank.joint_item_ids`, the
    ``selector``'s ``item_ids``); an item index here is a position among them. Each metric keeps its own
    :class:`Examinee` on its own bank (:attr:`parts`: θ̂, SE, person fit, items, scores), into which every
    generation's score under that metric is recorded; a metric that cannot score a generation (None or
    NaN) excludes the item for that metric only and is charged its cost. The joint side is what a
    single bank's examinee is to a test or a ranker: the items taken (reserved, scored or excluded), the
    generations (:attr:`n`, :attr:`items`), the spend (each generation counted once, and every
    :meth:`charge`), and the next item, chosen by the
    :class:`~lm_eval_adaptive.engine.cat.selection.JointInformationSelector` from every part's θ̂ and
    measurement SE (``focus``: only some metrics' information counts). Its :attr:`measurement_se` is the
    largest of the parts' (an SE target is met when every metric meets it).
    """

    def __init__(self, selector: JointInformationSelector, name: str = "model", *,
                 item_costs: np.ndarray | None = None, estimator: EstimatorFactory | None = None):
        self._name = name
        self._selector = selector
        self._metrics = selector.metrics
        self._ids = selector.item_ids
        self._index = selector.indices
        self._parts = {k: Examinee(bank, shared_default_selector(bank, seed=0), name, estimator=estimator)
                       for k, bank in zip(self._metrics, selector.banks)}
        self._part_list = tuple(self._parts.values())
        for p, index in zip(self._part_list, self._index):  # a bank's items no other bank has are never given
            other = np.ones(p.bank.n_items, dtype=bool)
            other[index] = False
            if other.any():
                p.exclude(np.flatnonzero(other))
        self._all = (True,) * len(self._metrics)
        n = len(self._ids)
        self._n_items = n
        self._mask = selector.new_mask()
        self._n_taken = 0
        self._excluded = np.zeros(n, dtype=bool)
        self._scored = np.zeros(n, dtype=bool)
        self._items: list[int] = []
        self._scores: list[dict] = []
        self._item_costs = item_costs
        self._spent = 0.0
        self._version = 0
        self._random = np.zeros(n, dtype=bool)  # joint items a random slot chose

    # ----------------------------------------------------------------- reading
    @property
    def name(self) -> str:
        return self._name

    @property
    def random_mask(self) -> np.ndarray:
        """Joint items a random slot of the joint selector chose (read-only view; each part's
        :attr:`Examinee.random_mask` holds the same items in its bank's order)."""
        v = self._random.view()
        v.flags.writeable = False
        return v

    @property
    def metrics(self) -> list[str]:
        return list(self._metrics)

    @property
    def parts(self) -> Mapping[str, Examinee]:
        """Metric → this model's :class:`Examinee` on that metric's bank (read it; it changes through this object)."""
        return MappingProxyType(self._parts)

    @property
    def selector(self) -> JointInformationSelector:
        return self._selector

    @property
    def item_ids(self) -> list[str]:
        return list(self._ids)

    def bank_item(self, metric: str, item: int) -> int:
        """Index in ``metric``'s bank of joint item ``item``."""
        return int(self._index[self._metrics.index(metric)][item])

    @property
    def n(self) -> int:
        """Generations recorded."""
        return len(self._items)

    @property
    def n_items(self) -> int:
        """Joint items (the most this examinee can be given)."""
        return self._n_items

    @property
    def items(self) -> list[int]:
        """Joint items generated and recorded, in order (a copy)."""
        return list(self._items)

    @property
    def scores(self) -> list[dict]:
        """Per generation, metric → scaled score (None: the metric could not score it)."""
        return [dict(x) for x in self._scores]

    @property
    def measurement_se(self) -> float:
        """The largest measurement SE of the parts (what more items reduce)."""
        return max(p.measurement_se for p in self._part_list)

    @property
    def spent(self) -> float:
        """USD spent on this model: each generation once, and every :meth:`charge`."""
        return self._spent

    @property
    def item_costs(self) -> np.ndarray | None:
        return self._item_costs

    @property
    def n_taken(self) -> int:
        return self._n_taken

    @property
    def version(self) -> int:
        """Changes whenever what the selector sees changes (taken items, a part's θ̂)."""
        return self._version

    def item_id(self, item: int) -> str:
        return str(self._ids[item])

    def is_taken(self, item: int) -> bool:
        return bool(self._mask[self._check_item(item)])

    def is_scored(self, item: int) -> bool:
        return bool(self._scored[self._check_item(item)])

    def is_excluded(self, item: int) -> bool:
        return bool(self._excluded[self._check_item(item)])

    def taken(self) -> np.ndarray:
        return self._mask.copy()

    def cost_of(self, item: int) -> float:
        return 0.0 if self._item_costs is None else float(self._item_costs[item])

    def ability(self, focus=None) -> JointAbility:
        """Every part's θ̂ and measurement SE, and which metrics count (``focus``: one bool per metric;
        None: all). θ̂ is read only for the metrics that count."""
        focus = self._all if focus is None else tuple(focus)
        parts = self._part_list
        return JointAbility(tuple(p.theta if on else math.nan for p, on in zip(parts, focus)),
                            tuple(p.measurement_se if on else math.nan for p, on in zip(parts, focus)), focus)

    def next_item(self, rng: np.random.Generator | None = None, focus=None) -> int:
        """The joint selector's next item (-1: none left), the information summed over ``focus``
        (one bool per metric; None: every metric); reserves nothing."""
        sel = self._selector
        ability = self.ability(focus) if sel.uses_theta(self._n_taken) else None
        return sel.select(ability, self._mask, self._n_taken, rng)

    def candidates(self, k: int, focus=None) -> np.ndarray:
        """Up to ``k`` untaken joint items, in the order the selector would give them."""
        return self._selector.candidates(self.ability(focus), self._mask, self._n_taken, k)

    # ---------------------------------------------------------------- changing
    def _check_item(self, item) -> int:
        if type(item) is int and 0 <= item < self._n_items:
            return item
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, np.integer)):
            raise ValueError(f"model {self._name!r}: an item is a joint item index (int), got {item!r}")
        if not 0 <= item < self._n_items:
            raise ValueError(f"model {self._name!r}: item index {item} is outside the joint items "
                             f"(0..{self._n_items - 1})")
        return int(item)

    def exclude(self, items) -> None:
        """Never give these joint items (every metric's parts keep theirs: nothing is recorded)."""
        arr = np.atleast_1d(np.asarray(items))
        if arr.size:
            if arr.ndim != 1 or arr.dtype.kind not in "iu":
                raise ValueError(f"model {self._name!r}: items must be joint item indices (ints), got {items!r}")
            for i in arr.tolist():
                self._check_item(i)
            self._mask[arr] = True
            self._excluded[arr] = True
        self._n_taken = int(self._mask.sum())
        self._version += 1

    def reserve(self, item: int) -> None:
        item = self._check_item(item)
        if not self._mask[item]:
            if self._selector.is_random_slot(self._n_taken):
                self._random[item] = True
            self._mask[item] = True
            self._n_taken += 1
        self._version += 1

    def unreserve(self, item: int) -> None:
        item = self._check_item(item)
        if self._scored[item]:
            raise ValueError(f"model {self._name!r}, item {self.item_id(item)!r}: already scored, "
                             "it cannot be given back")
        if not self._excluded[item] and self._mask[item]:
            self._mask[item] = False
            self._n_taken -= 1
        self._random[item] = False
        self._version += 1

    def checked_scores(self, scores, item_id: str) -> dict:
        """``scores`` (metric → scaled score in [0, 1], None or NaN where the metric could not score)
        checked: a mapping over the metrics only, each a number; returns metric → float or None."""
        if not isinstance(scores, Mapping):
            raise ValueError(f"model {self._name!r}, item {item_id!r}: the scores of a joint item are a mapping "
                             f"metric → scaled score, got {scores!r}")
        unknown = set(scores) - set(self._metrics)
        if unknown:
            raise ValueError(f"scores for unknown metrics {sorted(unknown)} (the run's: {list(self._metrics)})")
        out = {}
        for k in self._metrics:
            y = scores.get(k)
            if y is not None and not (isinstance(y, (int, float, np.floating, np.integer)) and
                                      (np.isnan(y) or 0.0 <= y <= 1.0)):
                raise ValueError(f"model {self._name!r}, item {item_id!r}, metric {k!r}: a scaled score is a "
                                 f"number in [0, 1], got {y!r}")
            out[k] = None if y is None or np.isnan(y) else float(y)
        return out

    def record(self, item: int, scores, *, cost: float | None = None, raw=None) -> None:
        """Record the generation of joint ``item``: ``scores`` metric → scaled score (None or NaN: the
        metric could not score it; the item is excluded for that metric, which is charged its cost).
        ``cost``: USD it cost (default: its item cost); ``raw``: metric → the raw value each score was
        scaled from (a metric absent or None: its score mapped back through its bank's range). The item
        counts as a random slot's as :meth:`Examinee.record` says, on the joint items. Nothing changes
        when anything is refused."""
        item = self._check_item(item)
        iid = self.item_id(item)
        if self._scored[item]:
            raise ValueError(f"model {self._name!r}, item {iid!r}: already scored")
        if self._excluded[item]:
            raise ValueError(f"model {self._name!r}, item {iid!r}: excluded for this model")
        ys = self.checked_scores(scores, iid)
        if cost is not None:
            cost = check_cost(cost, model=self._name, item=iid)
        else:
            cost = self.cost_of(item)
        raws = {}
        for k in self._metrics:
            v = None if raw is None else raw.get(k) if isinstance(raw, Mapping) else None
            if v is not None and ys[k] is not None:
                raws[k] = check_raw(v, model=self._name, item=iid)
        for k, p, index in zip(self._metrics, self._part_list, self._index):  # every check before any change
            y = ys[k]
            if y is not None:
                p._check_binary(y, [iid])
                i = int(index[item])
                if p._scored[i] or p._excluded[i]:
                    p._check_new(i)
        if self._mask[item]:
            random = bool(self._random[item])
        else:
            sel = self._selector
            random = sel.random_slots(self._n_taken + 1) > int(self._random.sum()) and \
                sel.random_item(self._mask, self._n_taken) == item
            self._random[item] = random
        for k, p, index in zip(self._metrics, self._part_list, self._index):
            y, i = ys[k], int(index[item])
            if y is None:
                p.exclude([i])
                p.charge(cost)
            else:
                p.record(i, y, cost=cost, raw=raws.get(k), random=random)
        if not self._mask[item]:
            self._mask[item] = True
            self._n_taken += 1
        self._scored[item] = True
        self._items.append(item)
        self._scores.append(ys)
        self._spent += cost
        self._version += 1

    def record_many(self, items, scores, *, costs=None, raws=None) -> None:
        """Record several generations at once (e.g. a full run): ``scores`` metric → one scaled score
        per item (NaN: the metric has none; the item is then excluded for it). ``costs``: USD per item
        (default: the item costs); ``raws``: metric → the raw values (default: the scores mapped back).
        Nothing changes when anything is refused."""
        arr = np.atleast_1d(np.asarray(items))
        if arr.size and (arr.ndim != 1 or arr.dtype.kind not in "iu"):
            raise ValueError(f"model {self._name!r}: items must be joint item indices (ints), got {items!r}")
        arr = arr.astype(np.int64)
        for i in arr.tolist():
            self._check_item(i)
        if np.unique(arr).size != arr.size:
            raise ValueError(f"model {self._name!r}: an item appears twice in one record_many")
        clash = arr[self._scored[arr] | self._excluded[arr]]
        if clash.size:
            raise ValueError(f"model {self._name!r}, item {self.item_id(int(clash[0]))!r}: already scored or excluded")
        if not isinstance(scores, Mapping) or set(scores) - set(self._metrics):
            raise ValueError(f"model {self._name!r}: record_many takes metric → scores over the metrics "
                             f"{list(self._metrics)}")
        c = np.zeros(arr.size) if costs is None and self._item_costs is None else (
            np.asarray(self._item_costs, dtype=float)[arr] if costs is None else
            check_costs(costs, model=self._name, items=[self.item_id(i) for i in arr.tolist()]))
        if c.shape != arr.shape:
            raise ValueError(f"model {self._name!r}: {arr.size} items but {c.size} costs")
        ys = {}
        for k in self._metrics:
            y = np.full(arr.size, np.nan) if k not in scores else np.asarray(scores[k], dtype=float)
            if y.shape != arr.shape:
                raise ValueError(f"model {self._name!r}, metric {k!r}: {arr.size} items but {y.size} scores")
            ys[k] = y
        for k, p, index in zip(self._metrics, self._part_list, self._index):  # checked by every part first
            y = ys[k]
            have = ~np.isnan(y)
            ids = [self.item_id(i) for i in arr[have].tolist()]
            check_scores(y[have], model=self._name, items=ids)
            p._check_binary(y[have], ids)
            bi = index[arr[have]]
            bad = bi[p._scored[bi] | p._excluded[bi]]
            if bad.size:
                p._check_new(int(bad[0]))
        rs = {}
        for k in self._metrics:
            if raws is not None and raws.get(k) is not None:
                r = np.asarray(raws[k], dtype=float)
                if r.shape != arr.shape:
                    raise ValueError(f"model {self._name!r}, metric {k!r}: {arr.size} items but {r.size} raw values")
                bad = np.flatnonzero(~np.isnan(ys[k]) & ~np.isfinite(r))
                if bad.size:
                    check_raw(float(r[bad[0]]), model=self._name, item=self.item_id(int(arr[bad[0]])))
                rs[k] = r
        for k, p, index in zip(self._metrics, self._part_list, self._index):
            y = ys[k]
            have = ~np.isnan(y)
            if have.any():
                p.record_many(index[arr[have]], y[have], costs=c[have],
                              raws=rs[k][have] if k in rs else None)
            if (~have).any():
                p.exclude(index[arr[~have]])
                p.charge(float(np.sum(c[~have])))
        self._n_taken += int(np.count_nonzero(~self._mask[arr]))
        self._mask[arr] = True
        self._scored[arr] = True
        self._random[arr] = False
        self._items.extend(arr.tolist())
        self._scores.extend({k: (None if np.isnan(ys[k][j]) else float(ys[k][j])) for k in self._metrics}
                            for j in range(arr.size))
        self._spent += float(np.sum(c))
        self._version += 1

    def charge(self, usd: float) -> None:
        """Add money spent on this model without a generation; every metric's part counts it too."""
        if usd is None:
            raise ValueError(f"model {self._name!r}: a charge needs an amount (USD)")
        usd = check_cost(usd, model=self._name)
        self._spent += usd
        for p in self._part_list:
            p.charge(usd)


@dataclass
class TestResult:
    """What an :class:`AdaptiveTest` found."""

    __test__ = False  # not a pytest test class

    theta: float
    se: float
    n_items: int
    spent: float
    stopped_because: str
    items: list
    scores: list
    signature: dict = field(default_factory=dict)  # what produced it (see AdaptiveTest.signature)

    @property
    def signature_string(self) -> str:
        return format_signature(self.signature)

    def __str__(self) -> str:
        """A short summary (``print(result)``), not the item list."""
        return (f"TestResult: θ̂ {self.theta:+.3f} ± {self.se:.3f} after {self.n_items} items, ${self.spent:.4f}, "
                f"stopped because {self.stopped_because}" + (f"\n  {self.signature_string}" if self.signature else ""))

    def to_dict(self) -> dict:
        return {"theta": self.theta, "se": self.se, "n_items": self.n_items, "spent_usd": self.spent,
                "stopped_because": self.stopped_because, "items": list(self.items), "scores": list(self.scores),
                "signature": dict(self.signature), "signature_string": self.signature_string}


class AdaptiveTest:
    """Adaptive test of a single model with the usual stopping rules.

    Stops when SE ≤ ``se_target`` (after ``min_items``), at ``max_items``, when the next
    item would overrun ``budget`` (needs ``item_costs``), or when the bank is exhausted
    (rules :class:`~lm_eval_adaptive.engine.cat.stopping.BankExhausted`,
    :class:`~lm_eval_adaptive.engine.cat.stopping.MaxItems`,
    :class:`~lm_eval_adaptive.engine.cat.stopping.SETarget`,
    :class:`~lm_eval_adaptive.engine.cat.stopping.Budget`, checked in that order); ``rules``
    adds more :class:`~lm_eval_adaptive.engine.cat.stopping.StoppingRule` objects after them.
    ``selector`` (default: maximum information with a random half seeded by ``seed``,
    randomesque with ``top_k`` > 1) and ``estimator`` (an estimator factory; default
    ``DispersionEAP``) swap the other parts.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, bank: ItemBank, *, se_target: float | None = 0.2, min_items: int = 30,
                 max_items: int | None = 500, budget: float | None = None,
                 item_costs: np.ndarray | None = None, top_k: int = 1, seed: int | None = None,
                 name: str = "model", selector: Selector | None = None,
                 estimator: EstimatorFactory | None = None, rules: Sequence[StoppingRule] = ()):
        self._check_settings(se_target, min_items, max_items, budget, item_costs, rules)
        self._bank = bank
        sel = selector if selector is not None else shared_default_selector(bank, top_k=top_k, seed=seed)
        self._begin(Examinee(bank, sel, name, item_costs=item_costs, estimator=estimator), se_target=se_target,
                    min_items=min_items, max_items=max_items, budget=budget, seed=seed, rules=rules)

    @staticmethod
    def _check_settings(se_target, min_items, max_items, budget, item_costs, rules) -> None:
        if se_target is None and max_items is None and budget is None and not tuple(rules):
            raise ValueError("give at least one stopping rule: se_target, max_items, budget or rules")
        if se_target is not None and not se_target >= 0:
            raise ValueError(f"se_target must be a number >= 0, got {se_target}")
        if min_items < 0:
            raise ValueError("min_items must be >= 0")
        if budget is not None and item_costs is None:
            raise ValueError("a budget needs item_costs")

    def _begin(self, examinee, *, se_target, min_items, max_items, budget, seed, rules) -> None:
        """Start the test of ``examinee`` (an :class:`Examinee`, or a :class:`JointExaminee` for a bank per
        metric) under the usual rules and ``rules``."""
        self._se_target = se_target
        self._min_items = int(min_items)
        n = examinee.n_items
        self._max_items = min(int(max_items), n) if max_items is not None else n
        self._budget = budget
        self._seed = seed
        self._rng = np.random.default_rng(seed)
        self._examinee = examinee
        built: list = [BankExhausted(), MaxItems(self._max_items)]
        if se_target is not None:
            built.append(SETarget(se_target, self._min_items))
        if budget is not None:
            built.append(Budget(budget))
        self._rules = tuple(built) + tuple(rules)
        self._stopped_because: str | None = None
        self._pending: set[int] = set()
        self._peeked: tuple[int, int] | None = None  # (examinee version, item) of peek()

    # ----------------------------------------------------------------- reading
    @property
    def bank(self) -> ItemBank:
        return self._bank

    @property
    def examinee(self) -> Examinee:
        """The model's state (read it; record scores through :meth:`record`)."""
        return self._examinee

    @property
    def se_target(self) -> float | None:
        return self._se_target

    @property
    def min_items(self) -> int:
        return self._min_items

    @property
    def max_items(self) -> int:
        return self._max_items

    @property
    def budget(self) -> float | None:
        return self._budget

    @property
    def spent(self) -> float:
        """USD spent: the scored items' costs and every :meth:`charge`."""
        return self._examinee.spent

    @property
    def seed(self):
        return self._seed

    @property
    def rules(self) -> tuple:
        """The stopping rules, in the order they are checked."""
        return self._rules

    @property
    def pending(self) -> frozenset:
        """Items handed out by :meth:`next_items` and not recorded yet."""
        return frozenset(self._pending)

    @property
    def stopped_because(self) -> str | None:
        """Why the test ended (a rule's reason), or None while it runs."""
        return self._stopped_because

    @property
    def done(self) -> bool:
        return self._stopped_because is not None

    def signature(self) -> dict:
        """What decides this test's numbers (bank, rules, seed, parts, versions)."""
        sel = self._examinee.selector
        return {"bank": self._bank.bank_id, "se_target": self._se_target, "min_items": self._min_items,
                "max_items": self._max_items, "budget": self._budget, "top_k": getattr(sel, "top_k", None),
                "seed": _seed_value(self._seed), "selector": component_name(sel),
                "estimator": self._examinee.estimator_name,
                "stop": [r.describe() if hasattr(r, "describe") else str(r.reason) for r in self._rules],
                **versions()}

    # ----------------------------------------------------------------- running
    def _check_stop(self) -> None:
        e = self._examinee
        for rule in self._rules:
            if rule.reached(e):
                self._stopped_because = str(rule.reason)
                return

    def peek(self) -> int:
        """The item :meth:`next_item` would give next (-1: none left), without reserving it.

        The choice is kept until the examinee changes, so peeking draws nothing extra from
        the random stream.
        """
        e = self._examinee
        if self._peeked is None or self._peeked[0] != e.version:
            self._peeked = (e.version, self._next_item(e))
        return self._peeked[1]

    def _next_item(self, e) -> int:
        """The examinee's next item (the selector's choice)."""
        return e.next_item(self._rng)

    def _candidates(self, e, k: int) -> list[int]:
        """The examinee's next ``k`` items, best first."""
        return [int(i) for i in e.candidates(k)]

    def exclude(self, items) -> None:
        """Never give these bank items."""
        self._examinee.exclude(items)

    def next_items(self, k: int = 1) -> list[int]:
        """Up to ``k`` items to administer next (the most informative at the current θ̂).

        They are reserved until recorded; an empty list means the test is over. ``k > 1``
        trades a little adaptivity for fewer round trips (items are picked together).
        """
        if self._pending:
            return sorted(self._pending)
        if self.done:
            return []
        self._check_stop()
        if self.done:
            return []
        e = self._examinee
        rooms = [rule.room(e) for rule in self._rules]
        tight = next((rule for rule, n in zip(self._rules, rooms) if n < 1), None)
        if tight is not None:  # a rule that allows no more items ends the test
            self._stopped_because = str(tight.reason)
            return []
        k = max(1, int(min(int(k), *rooms)))
        if k == 1:
            first = self.peek()
            self._peeked = None
            items = [] if first < 0 else [first]
        else:
            items = self._candidates(e, k)
        if not items:
            self._stopped_because = "bank_exhausted"
            return []
        for rule in self._rules:
            n_ok = int(rule.admit(e, items))
            if n_ok < len(items):
                items = items[:max(n_ok, 0)]
            if not items:
                self._stopped_because = str(rule.reason)
                return []
        for i in items:
            e.reserve(i)
        self._pending = set(items)
        return sorted(items)

    def next_item(self) -> int | None:
        """Bank index of the next item to administer, or None when the test is over."""
        items = self.next_items(1)
        return items[0] if items else None

    def record(self, item: int, y: float, *, cost: float | None = None) -> None:
        """Record the scaled score of an item returned by :meth:`next_items`.

        ValueError, with nothing changed, for an item not asked for, a score that is not
        a finite number in [0, 1], or a negative or non-finite cost.
        """
        if item not in self._pending:
            raise ValueError(f"item {item} was not asked for (pending: {sorted(self._pending)})")
        # the examinee checks the score (a 2PL/3PL bank's: 0 or 1) and the cost before anything changes
        self._examinee.record(item, y, cost=cost)
        self._pending.discard(item)
        if not self._pending:
            self._check_stop()

    def charge(self, usd: float) -> None:
        """Add money spent without a score (a failed call the provider may have billed): it
        counts toward the budget like a scored item's cost."""
        self._examinee.charge(usd)

    def stop(self, reason: str) -> None:
        """End the test now for ``reason`` (e.g. ``"budget"``: the caller's cap refused the next
        call): the pending items are given back unscored and nothing more is given."""
        for i in sorted(self._pending):
            self._examinee.unreserve(i)
        self._pending = set()
        self._stopped_because = str(reason)

    def run(self, score_fn) -> TestResult:
        """Drive the test to the end with ``score_fn(item_index) -> scaled score``."""
        while (item := self.next_item()) is not None:
            self.record(item, float(score_fn(item)))
        return self.result()

    def result(self) -> TestResult:
        e = self._examinee
        return TestResult(theta=e.theta, se=e.se, n_items=e.n, spent=e.spent,
                          stopped_because=self._stopped_because or "running",
                          items=e.items, scores=e.scores, signature=self.signature())


def _seed_value(seed):
    """A seed as it can be written in a signature (None: not reproducible)."""
    if seed is None or isinstance(seed, (int, np.integer)):
        return None if seed is None else int(seed)
    return str(seed)

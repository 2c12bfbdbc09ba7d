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

import numpy as np

from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.irt.checks import (
    check_cost,
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
from lm_eval_adaptive.engine.cat.item_ledger import ItemLedger
from lm_eval_adaptive.engine.cat.person_fit import PersonFit, dispersion_fit
from lm_eval_adaptive.engine.cat.selection import Selector
from lm_eval_adaptive.engine.signature import component_name

__all__ = ["Examinee"]


class Examinee(ItemLedger):
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
        # a selector may say that a slot's choice does not depend on θ̂ (a random slot): θ̂ is then not
        # estimated for it
        self._uses_theta = getattr(selector, "uses_theta", None)
        self._factory = factory
        self._estimator = factory(bank)
        self._estimator_name = component_name(factory)
        super().__init__(bank.item_ids, selector, name, item_costs=item_costs)
        self._bank = bank
        self._items: list[int] = []
        self._scores: list[float] = []
        self._info: list[float] = []
        self._fit: tuple[int, PersonFit] | None = None  # (items scored, person fit then)
        self._raw = np.full(bank.n_items, np.nan)  # raw metric of each scored item (bank order)

    # ----------------------------------------------------------------- reading
    @property
    def bank(self) -> ItemBank:
        return self._bank

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
    def raw(self) -> np.ndarray:
        """Bank-order raw metric of every scored item, NaN elsewhere (read-only view)."""
        v = self._raw.view()
        v.flags.writeable = False
        return v

    def next_item(self, rng: np.random.Generator | None = None) -> int:
        """Bank index of the selector's next item (-1 if none is left); reserves nothing."""
        uses = self._uses_theta
        theta = self._estimator.theta if uses is None or uses(self._n_taken) else math.nan
        return self._selector.select(theta, self._mask, self._n_taken, rng)

    def candidates(self, k: int) -> np.ndarray:
        """Bank indices of (up to) ``k`` untaken items, best first; reserves nothing."""
        return self._selector.candidates(self._estimator.theta, self._mask, self._n_taken, k)

    # ---------------------------------------------------------------- changing
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

    def check_recordable(self, items: np.ndarray, y, ids) -> None:
        """ValueError, changing nothing, unless the scaled scores ``y`` of bank ``items`` (ids ``ids``) may be
        recorded: 0 or 1 on a 2PL/3PL bank, and no item already scored or excluded (what a several-metric
        examinee asks each part before it records anything)."""
        self._check_binary(y, ids)
        clash = items[self._scored[items] | self._excluded[items]]
        if clash.size:
            self._check_new(int(clash[0]))

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
        self._set_random(item, random)
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
        c = self._costs_of(items, costs, ids)
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
        self.check_recordable(items, y, ids)
        if not items.size:
            return
        self._estimator.update_many(self._bank.model, self._bank.b[items], y, **self._bank.item_params(items))
        self._mark_many(items)
        self._items.extend(items.tolist())
        self._scores.extend(y.tolist())
        self._info.extend([math.nan] * items.size)
        self._raw[items] = r
        self._spent += float(np.sum(c))
        self._version += 1
        self._changes += 1

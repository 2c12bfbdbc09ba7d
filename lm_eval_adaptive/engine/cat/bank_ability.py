"""What one model's scores on one bank say of its ability: :class:`BankAbility`, the part an
:class:`~lm_eval_adaptive.engine.cat.examinee.Examinee` of one metric measures with.

It keeps the ability estimator (made by an
:class:`~lm_eval_adaptive.engine.cat.estimation.EstimatorFactory` for the bank), each scored item's Fisher
information at θ̂ when it was recorded, the raw metric value of each scored item (bank order) and the
person-fit statistic. Which items are taken, in what order and at what cost is the examinee's ledger
(:class:`~lm_eval_adaptive.engine.cat.item_ledger.ItemLedger`): the examinee checks an item there, has this
part check and add the score, then marks the item. The several-metric part is
:class:`~lm_eval_adaptive.engine.cat.metric_set.MetricSet`; both answer the examinee's
:class:`~lm_eval_adaptive.engine.cat.examinee.AbilityPart` protocol.
"""

from __future__ import annotations

import math

import numpy as np

from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.irt.checks import check_raw, check_score, check_scores
from lm_eval_adaptive.engine.cat.estimation import AbilityEstimator, EstimatorFactory
from lm_eval_adaptive.engine.cat.person_fit import PersonFit, dispersion_fit
from lm_eval_adaptive.engine.signature import component_name

__all__ = ["BankAbility"]


def information(model, theta: float, b: float, params: dict | None) -> float:
    """Fisher information of one item (difficulty ``b``; a 2PL/3PL item's ``params``) at ``theta``."""
    if params:
        return float(model.information(theta, b, **params))
    return model.item_information(theta, b)


class BankAbility:
    """One model's ability on ``bank``, from the scores its examinee records (errors name the model ``name``).

    The bank's metric (``bank.metric``; ``"score"`` when the bank names none) is its one metric. The scores
    told are scaled scores in [0, 1] (0 or 1 on a 2PL/3PL bank); the raw value kept with each is the one
    told, else the score mapped back through the bank's range.
    """

    no_ability = math.nan  # what a selector is given at a slot that does not read θ̂

    def __init__(self, bank: ItemBank, factory: EstimatorFactory, name: str) -> None:
        self._bank = bank
        self._name = name
        self._metrics = (bank.metric or "score",)
        self._factory = factory
        self._estimator = factory(bank)
        self._estimator_name = component_name(factory)
        self._info: list[float | None] = []  # per scored item; None: θ̂ was not estimated then (filled on read)
        self._fit: tuple[int, PersonFit] | None = None  # (items scored, person fit then)
        self._raw = np.full(bank.n_items, np.nan)  # raw metric of each scored item (bank order)

    # ----------------------------------------------------------------- reading
    @property
    def metrics(self) -> tuple[str, ...]:
        return self._metrics

    @property
    def bank(self) -> ItemBank:
        return self._bank

    @property
    def estimator(self) -> AbilityEstimator:
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

    def ability(self, focus=None) -> float:
        """What the selector reads: θ̂ (``focus``, one metric's, changes nothing)."""
        return self._estimator.theta

    def bank_item(self, metric: str, item: int) -> int:
        """Index in ``metric``'s bank of item ``item``: the item itself (the examinee's items are the bank's)."""
        if metric not in self._metrics:
            raise ValueError(f"unknown metric {metric!r} (this examinee's: {list(self._metrics)})")
        return int(item)

    def person_fit(self, items: list[int], scores: list[float]) -> PersonFit:
        """:func:`~lm_eval_adaptive.engine.cat.person_fit.dispersion_fit` of ``items``' ``scores`` at θ̂."""
        n = len(items)  # the fit changes only with the scores (θ̂ too): reserving an item keeps it
        if self._fit is None or self._fit[0] != n:
            self._fit = (n, dispersion_fit(self._bank, items, scores, self._estimator.theta))
        return self._fit[1]

    def info_at_selection(self, items: list[int], scores: list[float]) -> list[float]:
        """The information of each scored item at θ̂ before it was recorded (``items``, ``scores``: the
        examinee's, in order). An item recorded while θ̂ was not estimated gets its figure on first read:
        a fresh estimator is told the scores again, in order, and read before each such item."""
        info = self._info
        if None in info:
            bank = self._bank
            model = bank.model
            est = self._factory(bank)
            for k, (item, y) in enumerate(zip(items, scores)):
                params = bank.item_params(item) if model.per_item else {}
                if info[k] is None:
                    info[k] = information(model, est.theta, float(bank.b[item]), params)
                est.update(model, float(bank.b[item]), y, **params)
        return list(info)

    @property
    def raw(self) -> np.ndarray:
        """Bank-order raw metric of every scored item, NaN elsewhere (read-only view)."""
        v = self._raw.view()
        v.flags.writeable = False
        return v

    # --------------------------------------------------------------- checking
    def checked_score(self, y, item_id: str) -> float:
        """A told score checked: a finite number in [0, 1]."""
        return check_score(y, model=self._name, item=item_id)

    def check_binary(self, y, ids) -> None:
        """A 2PL/3PL bank takes 0/1 scores only: ValueError naming the first other one."""
        if not self._bank.model.per_item:
            return
        y = np.atleast_1d(np.asarray(y, dtype=float))
        bad = np.flatnonzero((y != 0.0) & (y != 1.0))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"model {self._name!r}, item {ids[i]!r}: score {float(y[i])!r}; the "
                             f"{self._bank.model.kind} bank {self._bank.describe()} takes scores 0 or 1 only")

    def checked_many(self, items: np.ndarray, scores, raws, ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The scores of ``items`` (ids ``ids``) told in bulk and their raw values, checked (one finite score
        in [0, 1] per item, 0/1 on a 2PL/3PL bank; ``raws`` None: the scores mapped back)."""
        y = check_scores(scores, model=self._name, items=ids)
        if y.shape != items.shape:
            raise ValueError(f"model {self._name!r}: {items.size} items but {y.size} scores")
        if raws is None:
            r = self._bank.unscale(items, y) if items.size else np.zeros(0)
        else:
            r = np.atleast_1d(np.asarray(raws, dtype=float))
            if r.shape != items.shape:
                raise ValueError(f"model {self._name!r}: {items.size} items but {r.size} raw values")
            if not np.all(np.isfinite(r)):
                check_raw(float(r[~np.isfinite(r)][0]), model=self._name, item=ids[int(np.argmin(np.isfinite(r)))])
        self.check_binary(y, ids)
        return y, r

    # ---------------------------------------------------------------- changing
    def add(self, item: int, y: float, raw, cost: float, random: bool) -> None:
        """Tell the estimator the score ``y`` of ``item`` (a checked finite score in [0, 1]), noting the
        item's information at θ̂ first (when θ̂ is estimated now; else on first read), and keep its raw
        value ``raw`` (checked; None: ``y`` mapped back through the bank's range, which a score clipped at
        0 or 1 cannot restore). ValueError, changing nothing, for a non-finite raw value or, on a 2PL/3PL
        bank, a score other than 0 or 1. ``cost``, ``random``: the examinee's ledger keeps them."""
        bank = self._bank
        if raw is None:
            raw = float(bank.lo[item]) + y * (float(bank.hi[item]) - float(bank.lo[item]))
        elif not (type(raw) is float and math.isfinite(raw)):
            raw = check_raw(raw, model=self._name, item=str(bank.item_ids[item]))
        model = bank.model
        if model.per_item:  # a 2PL/3PL bank: 0/1 scores only, and the item's a, c
            self.check_binary(y, [str(bank.item_ids[item])])
            params = bank.item_params(item)
        else:
            params = None  # a one-parameter bank has none
        b = float(bank.b[item])
        estimator = self._estimator
        if getattr(estimator, "estimated", True):  # θ̂ known now: the information now, else on first read
            self._info.append(information(model, estimator.theta, b, params))
        else:
            self._info.append(None)
        if params:
            estimator.update(model, b, y, **params)
        else:
            estimator.update(model, b, y)
        self._raw[item] = raw

    def add_many(self, items: np.ndarray, y: np.ndarray, raws: np.ndarray, costs: np.ndarray) -> None:
        """Tell the estimator the scores of ``items`` at once (checked by :meth:`checked_many`); they were not
        chosen one by one, so their information at selection is NaN."""
        bank = self._bank
        self._estimator.update_many(bank.model, bank.b[items], y, **bank.item_params(items))
        self._info.extend([math.nan] * items.size)
        self._raw[items] = raws

    @staticmethod
    def told(y: np.ndarray) -> list[float]:
        """The scores told in bulk, one per item, as the examinee lists them."""
        return y.tolist()

    @staticmethod
    def copy_scores(scores: list[float]) -> list[float]:
        return list(scores)

    def charge(self, usd: float) -> None:
        """Money spent without a score: the examinee's ledger counts it; the ability is not changed."""

"""The adaptive multi-model ranker (METHOD.md §4, the paper's Algorithm 1).

The ranker never sees a model or a metric. It is asked for the next administration
(:meth:`AdaptiveRanker.ask` → a :class:`Request` naming a model and an item) and told the
scaled score (:meth:`AdaptiveRanker.tell`). Simulation, the harness and live API calls
drive the same object; several requests may be in flight at once (one per model), their
cost reserved against the budget until told.

Algorithm
1. Warm-up: every model gets ``n_init`` items from the selector (by default every second one
   at random, the others by maximum information).
2. Judge the pairs on the full-task metric's own scale (the default,
   :class:`~lm_eval_adaptive.engine.ranking.pairs.metric_judgement.MetricScaleJudgement`; docs/metric-scale.md): each
   model's estimate of record is its full-task mean (its scores, the bank's predictions for the rest,
   the random half's correction; a full run is exact); a pair is ``ordered`` when the difference of
   the two is confidently not 0 at γ, ``equivalent`` when it is confidently within the pair rule's
   tie margin, else ``unresolved`` with its items and dollars to settle.
3. Candidates: models in unresolved pairs the stopping policy still buys for
   (:class:`~lm_eval_adaptive.engine.ranking.pairs.settle_policy.SettlePolicy`: a pair whose cost to settle is too
   high for its share of a full run or of the budget left gets no more items), under ``n_max``, with
   an unseen item whose cost fits in the budget. None → stop. Otherwise give the model whose next
   item removes the largest share of its open pairs' variance per unit of cost its next item.
4. Stop when every pair is settled or beyond the policy, or nothing more can be bought. Report the
   ranking by the estimates, every pair's outcome (with the cost to settle the unresolved ones) and
   each model's rank range.

The parts are swappable: ``selector`` (a :class:`~lm_eval_adaptive.engine.cat.selection.Selector`),
``estimator`` (an :class:`~lm_eval_adaptive.engine.cat.estimation.EstimatorFactory`),
``pair_rule`` (a :class:`~lm_eval_adaptive.engine.ranking.pairs.rules.PairRule`: its confidence, tie margin
and family-wise setting) and ``judgement``. Steps 1 and 3 are the allocation policy of
:mod:`lm_eval_adaptive.engine.ranking.allocation`; step 2 is a
:class:`~lm_eval_adaptive.engine.ranking.pairs.judgement.PairJudgement`. The judgement on the ability scale,
:class:`~lm_eval_adaptive.engine.ranking.pairs.theta_view.ThetaJudgement` (models ordered by θ̂, the pair rule on
P(θ_i > θ_j) for adjacent pairs, the futility stop for pairs the bank's model error keeps from
settling), is kept as an option (``judgement=ThetaJudgement``). The same core ranks by several metrics at
once (:class:`~lm_eval_adaptive.engine.ranking.multi_metric_ranker.MultiMetricRanker`: a judgement per metric,
one generation per administration).

The ranker owns its state: callers change it only through its methods — ``ask``/``tell``,
``cancel``, ``release``, ``fail``, ``block``/``unblock``, ``charge``, ``stop``,
``exclude``, ``record``/``record_many`` and ``replay`` — and read it through read-only
properties. Every score and cost it is told is checked (finite, score in [0, 1], cost ≥ 0).
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from lm_eval_adaptive.engine.ranking.allocation import adaptive_choice, stop_reason, warm_up_choice
from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.cat.examinee import Examinee
from lm_eval_adaptive.engine.irt.checks import check_cost, check_score
from lm_eval_adaptive.engine.cat.estimation import EstimatorFactory
from lm_eval_adaptive.engine.ranking.pairs.rules import EquivalenceMargin, FamilyWise, OrderConfidence, PairRule
from lm_eval_adaptive.engine.ranking.pairs.judgement import PairJudgement, pairwise_matrix, tie_groups
from lm_eval_adaptive.engine.ranking.pairs.theta_view import ThetaJudgement
from lm_eval_adaptive.engine.ranking.pairs.metric_judgement import MetricScaleJudgement
from lm_eval_adaptive.engine.cat.selection import Selector, shared_default_selector
from lm_eval_adaptive.engine.ranking.ranker_state import RankerState, Request
from lm_eval_adaptive.engine.ranking.replay import RankerReplay
from lm_eval_adaptive.engine.ranking.result import RankingResult
from lm_eval_adaptive.engine.signature import component_name, versions

__all__ = ["AdaptiveRanker", "STOP_REASONS", "pairwise_matrix", "tie_groups", "DEFAULT_FUTILITY", "default_judgement"]

#: With :class:`~lm_eval_adaptive.engine.ranking.pairs.theta_view.ThetaJudgement`: a pair stops drawing items when its
#: gap is below this share of the gap the bank's model error alone keeps it from settling
#: (docs/honesty.md; chosen on the tuning tables). The default judgement has no such stop.
DEFAULT_FUTILITY = 0.25

#: Why a ranking run ended (``AdaptiveRanker.stopped_because``; :meth:`AdaptiveRanker.stop` takes these).
#: ``cost_to_settle``: every pair not settled costs more to settle than the stopping policy allows.
STOP_REASONS = ("settled", "cost_to_settle", "budget", "max_items", "bank_exhausted", "failed")


def default_judgement(examinees, rule, futility, metric=None, **kwargs) -> PairJudgement:
    """The rankers' default judgement: :class:`~lm_eval_adaptive.engine.ranking.pairs.metric_judgement.MetricScaleJudgement`
    with the default :class:`~lm_eval_adaptive.engine.ranking.pairs.settle_policy.SettlePolicy` (``kwargs``: its
    ``policy`` and ``random_share``), applying the pair rule's confidence, tie margin and family-wise
    setting. A pair rule of another kind (a custom :class:`~lm_eval_adaptive.engine.ranking.pairs.rules.PairRule`
    deciding pairs from θ̂ and SE) is a θ-scale rule: it gets
    :class:`~lm_eval_adaptive.engine.ranking.pairs.theta_view.ThetaJudgement`, which applies it."""
    base = rule.base if isinstance(rule, FamilyWise) else rule
    if not isinstance(base, (OrderConfidence, EquivalenceMargin)):
        return ThetaJudgement(examinees, rule, futility, metric)
    return MetricScaleJudgement(examinees, rule, futility, metric, **kwargs)


class AdaptiveRanker(RankerState, RankerReplay):
    """Adaptive multi-model ranker over one item bank (see module docstring).

    Parameters
    ----------
    bank:
        The calibrated item bank.
    models:
        Names of the models to rank (at least 2).
    item_costs:
        Per model, the USD cost of each bank item (array aligned with the bank). Omitted:
        every item costs 0 and no budget applies.
    relative_costs:
        Per model cost weight c_m in the allocation rule; default: each model's mean item
        cost, normalised so the cheapest is 1 (all 1 without item costs).
    confidence:
        γ; with the default pair rule a pair is settled when P(order) > 1 - (1-γ)/2.
    n_init, n_max:
        Warm-up length and maximum items per model.
    budget:
        Hard cap on total spend in USD (None: no cap).
    top_k:
        1 for strict maximum information; > 1 for randomesque selection.
    seed:
        Seed of the ranker's random stream (randomesque selection) and of the default
        selector's random half.
    selector:
        The item :class:`~lm_eval_adaptive.engine.cat.selection.Selector` (default
        ``default_selector(bank.b, top_k, seed)``: maximum information with a random half).
    estimator:
        :class:`~lm_eval_adaptive.engine.cat.estimation.EstimatorFactory` of every model's
        ability estimator (default ``DispersionEAP()``: grid EAP, the SE scaled by the
        model's own dispersion).
    pair_rule:
        :class:`~lm_eval_adaptive.engine.ranking.pairs.rules.PairRule` (default ``OrderConfidence(confidence)``):
        the default judgement applies its confidence, its tie margin
        (:class:`~lm_eval_adaptive.engine.ranking.pairs.rules.EquivalenceMargin`) and whether it is family-wise
        (:class:`~lm_eval_adaptive.engine.ranking.pairs.rules.FamilyWise`: Holm over every pair's p-value) on the
        metric scale. With :class:`~lm_eval_adaptive.engine.ranking.pairs.theta_view.ThetaJudgement` (and for a rule of
        another kind) the rule itself decides pairs on the θ scale, in :meth:`ask` and :meth:`result`; a
        rule that judges pairs jointly (``family = True``) is given every pair of the ranking.
    exclude:
        Per model, bank items never to give it (e.g. it has no recorded answer).
    max_in_flight:
        Requests one model may have in flight at once (1: each item is chosen after the
        previous score; k > 1: the k most informative unseen items at the current θ̂).
    futility:
        A pair needs a gap of at least z · √(τ_a² + τ_b²) to settle however many items it gets
        (τ: the bank's measured model error, :attr:`Examinee.model_error_sd`, which no item
        removes). An adjacent pair whose gap |θ̂_a - θ̂_b| is below ``futility`` times that, or
        confidently below it (gap + z · √(m_a² + m_b²) with m the measurement SEs), is given no
        more items and is reported as a tie (``inseparable``). 0: off.
        Used by :class:`~lm_eval_adaptive.engine.ranking.pairs.theta_view.ThetaJudgement` only.
    judgement:
        ``judgement(examinees, pair_rule, futility, metric) -> PairJudgement``: what judges the
        ranking's pairs (default :func:`default_judgement`: the full-task metric's scale with the
        default stopping policy; ``ThetaJudgement``: the pair rule and the futility stop on the
        ability scale; ``functools.partial(MetricScaleJudgement, policy=SettlePolicy(...))``: another
        stopping policy).
    """

    def __init__(self, bank: ItemBank, models: Sequence[str], *,
                 item_costs: Mapping[str, np.ndarray] | None = None,
                 relative_costs: Mapping[str, float] | None = None,
                 confidence: float = 0.95, n_init: int = 10, n_max: int | None = None,
                 budget: float | None = None, top_k: int = 1, seed: int | None = None,
                 selector: Selector | None = None, estimator: EstimatorFactory | None = None,
                 pair_rule: PairRule | None = None,
                 exclude: Mapping[str, np.ndarray] | None = None, reserve_mean_cost: bool = True,
                 max_in_flight: int = 1, futility: float = DEFAULT_FUTILITY,
                 judgement: Callable[..., PairJudgement] | None = None):
        self._bank = bank
        self._item_ids = bank.item_ids
        costs = self._init_core(models, bank.n_items, item_costs=item_costs, relative_costs=relative_costs,
                                confidence=confidence, n_init=n_init, n_max=n_max, budget=budget, seed=seed,
                                futility=futility, max_in_flight=max_in_flight, reserve_mean_cost=reserve_mean_cost)
        self._selector = selector or shared_default_selector(bank, top_k=top_k, seed=seed)
        self._examinees = {m: Examinee(bank, self._selector, m, item_costs=costs[m], estimator=estimator)
                           for m in self._models}
        rule = pair_rule if pair_rule is not None else OrderConfidence(self._confidence)
        self._judge = (judgement or default_judgement)(self._examinees, rule, self._futility, None)
        self._judges = (self._judge,)
        for m, items in (exclude or {}).items():
            self._examinee(m).exclude(self._indices(items))

    #: what an item index counts, and where it is (in messages)
    _item_word = "bank item"
    _items_name = "the bank"

    # ------------------------------------------------------------ signature
    def signature(self) -> dict:
        """What decides this run's numbers: bank, settings, seed, parts and versions (see
        :mod:`lm_eval_adaptive.engine.signature`)."""
        return self._signature_for(self._bank, self._judge.rule, self._examinees.values())

    def _signature_for(self, bank: ItemBank, rule, examinees) -> dict:
        est = {e.estimator_name for e in examinees}
        return {"bank": bank.bank_id, "models": len(self._models), "confidence": self._confidence,
                "n_init": self._n_init, "n_max": self._n_max, "budget": self._budget,
                "top_k": getattr(self._selector, "top_k", None), "seed": _seed_value(self._seed),
                "max_in_flight": self._max_in_flight, "selector": component_name(self._selector),
                "estimator": "+".join(sorted(est)), "pair_rule": component_name(rule),
                "tie_margin": getattr(rule, "margin", None), "futility": self._futility,
                **_judgement_signature(self._judge), **versions()}

    # ------------------------------------------------------------------ reading
    def peek(self, model: str) -> int:
        """The item ``model`` would be given next (-1: none left), without reserving it.

        The choice is kept until the model's state changes, so peeking does not change
        what the ranker asks later.
        """
        self._examinee(model)
        return self._peek(model)

    def open_pairs(self) -> list[tuple[str, str]]:
        """The pairs (better first) more items should settle: not settled, and (the default judgement)
        within the stopping policy, or (the θ-scale judgement) adjacent and not inseparable; the pairs
        :meth:`ask` gives items to once the warm-up is over; a result's ``open_pairs``."""
        return self._open_pairs_of(self._judge)

    def _open_pairs_of(self, judge) -> list[tuple[str, str]]:
        models = self.active
        if len(models) < 2:
            return []
        op = judge.open_pairs(models, self._remaining())
        return [(models[a], models[b]) for a, b in op.pairs]

    def _remaining(self) -> float | None:
        """The budget left after what is spent and in flight (None: no budget)."""
        if self._budget is None:
            return None
        return max(0.0, self._budget - self.spent - self.reserved)

    # -------------------------------------------------------------------- internals
    def _peek(self, m: str, needs=None) -> int:
        """The model's next item (cached until its examinee changes); ``needs`` (the open pairs that make
        it a candidate) does not change a single bank's choice."""
        e = self._examinees[m]
        cached = self._next[m]
        version = e.version
        if cached is None or cached[0] != version:
            item = e.next_item(self._rng)
            self._next[m] = (version, item)
            return item
        return cached[1]

    def _affordable(self, m: str, item: int, committed: float | None = None) -> bool:
        """The item's cost fits in the remaining budget, and so does the model's typical item.

        Before a live call the real charge is unknown (output length), so a run plans with
        the model's mean item cost too: spending the last cents on whatever short items happen
        to be informative would let the budget, not the information, choose the items.
        """
        if self._budget is None:
            return True
        e = self._examinees[m]
        need = e.cost_of(item)
        if self._reserve_mean_cost and e.item_costs is not None:
            need = max(need, self._mean_cost[m])
        if committed is None:
            committed = self.spent + self.reserved
        return committed + need <= self._budget * (1 + 1e-12)

    def _fits(self, m: str, item: int) -> bool:
        """:meth:`_affordable` with what is spent and reserved read once per ask (it does not change
        while one ask weighs its candidates)."""
        if self._committed is None:
            self._committed = self.spent + self.reserved
        return self._affordable(m, item, self._committed)

    def _request(self, m: str, item: int, phase: str) -> Request:
        e = self._examinees[m]
        item = int(item)
        costs = e.item_costs
        req = Request(m, item, str(self._item_ids[item]), 0.0 if costs is None else float(costs[item]), phase)
        e.reserve(item)
        self._next[m] = None
        self._pending[(m, item)] = req
        return req

    # --------------------------------------------------------------------- ask/tell
    def ask(self) -> Request | None:
        """The next administration, or None (finished, or waiting for pending scores)."""
        if self._stopped_because is not None:
            return None
        active = self.active if self._failed else self._models
        if len(active) < 2:
            self._stop_if_idle("failed")
            return None
        ex = self._examinees
        flight = self._flight_counts() if self._pending else {}
        # 1. warm-up, round robin: fewest items first (a model with no unseen item left is done)
        if self._warm_up:
            n_warm = min(self._n_init, self._n_max)
            m, item = warm_up_choice(active, ex, n_warm, flight, self._blocked, self._max_in_flight, self._peek)
            if m is not None:
                if self._budget is not None and not self._affordable(m, item):
                    self._stop_if_idle("budget")
                    return None
                return self._request(m, item, "warmup")
            if self._pending:
                if any(ex[m].n < n_warm for (m, _) in self._pending):
                    return None  # warm-up items still in flight
            elif not self._blocked:  # every model was looked at: none needs warm-up items, now or later
                self._warm_up = False
        # 2. adaptive phase: each metric's judgement says which pairs more items should settle
        judges = self._judges
        remaining = None if self._budget is None else self._remaining()
        views = (judges[0].open_pairs(active, remaining),) if len(judges) == 1 else \
            [j.open_pairs(active, remaining) for j in judges]
        for v in views:
            if v.pairs:
                break
        else:
            self._stop_if_idle("cost_to_settle" if any(v.stopped for v in views) else "settled")
            return None
        self._committed = None
        best, item, passed = adaptive_choice(views, active, ex, flight, self._blocked, self._max_in_flight,
                                             self._n_max, self._peek, None if self._budget is None else self._fits,
                                             self._relative_costs)
        if best is None:
            reason = stop_reason(passed)
            if reason is not None:
                self._stop_if_idle(reason)
            return None
        return self._request(best, item, "adaptive")

    def _flight_counts(self) -> dict:
        """Requests in flight per model (models with none are absent)."""
        counts: dict[str, int] = {}
        for m, _ in self._pending:
            counts[m] = counts.get(m, 0) + 1
        return counts

    def _stop_if_idle(self, reason: str) -> None:
        if not self._pending:
            self._stopped_because = reason

    def _told(self, y, model: str, item_id: str):
        """A told score, checked (a finite number in [0, 1])."""
        return check_score(y, model=model, item=item_id)

    def tell(self, request: Request, y, *, cost: float | None = None, raw=None) -> None:
        """Record the scaled score y ∈ [0, 1] for a request from :meth:`ask`.

        ``cost`` is the real charge when it differs from the reserved estimate. ``raw`` is the raw
        metric value y was scaled from (the full-task metric is on that scale; None: y mapped back
        through the bank's range, which is the raw value unless the scaling clipped it). ValueError,
        with nothing changed, for a request not pending, a score that is not a finite number
        in [0, 1], or a negative or non-finite cost.
        """
        key = (request.model, request.item)
        pending = self._pending.get(key)
        if pending is not request and pending != request:
            raise ValueError(f"no pending request {request}")
        if not (type(y) is float and 0.0 <= y <= 1.0):  # the common case needs no more checking
            y = self._told(y, request.model, request.item_id)
        if cost is not None:
            cost = check_cost(cost, model=request.model, item=request.item_id)
        if raw is None:
            self._examinees[request.model].record(request.item, y, cost=cost)  # refused: nothing changed
        else:
            self._examinees[request.model].record(request.item, y, cost=cost, raw=raw)
        del self._pending[key]
        self._next[request.model] = None

    def cancel(self, request: Request) -> None:
        """Give up a pending request (e.g. the call failed for good); its item stays unused."""
        key = (request.model, request.item)
        if self._pending.get(key) == request:
            del self._pending[key]

    def release(self, request: Request) -> None:
        """Take back a pending request that was never made: its item may be asked again."""
        key = (request.model, request.item)
        if self._pending.get(key) != request:
            raise ValueError(f"no pending request {request}")
        del self._pending[key]
        self._examinees[request.model].unreserve(request.item)
        self._next[request.model] = None

    def fail(self, model: str, why: str) -> None:
        """Drop ``model`` from the ranking (it keeps failing); its requests in flight are cancelled."""
        self._examinee(model)
        self._failed[model] = str(why)
        for key in [k for k in self._pending if k[0] == model]:
            del self._pending[key]

    # ------------------------------------------------------- what the caller decides
    def block(self, model: str) -> None:
        """Do not ask for ``model`` for now (e.g. the caller cannot pay for its next call).

        :meth:`ask` treats it as over budget, and gives no items to a model whose only
        unsettled partners are blocked when the pair rule says they would be futile.
        """
        self._examinee(model)
        self._blocked.add(model)

    def unblock(self, model: str) -> None:
        """Undo :meth:`block` for ``model``."""
        self._examinee(model)
        self._blocked.discard(model)

    def unblock_all(self) -> None:
        """Undo every :meth:`block` (e.g. money was freed)."""
        self._blocked.clear()

    def charge(self, model: str, usd: float) -> None:
        """Count ``usd`` as spent on ``model`` without a score: a call lost in flight, a paid
        call whose scoring failed, a call that finished after the model was dropped.
        ValueError for a negative or non-finite amount."""
        self._examinee(model).charge(usd)

    def stop(self, reason: str) -> None:
        """End the run with ``reason`` (one of :data:`STOP_REASONS`): :meth:`ask` asks nothing
        more. A run that already ended keeps its first reason."""
        if reason not in STOP_REASONS:
            raise ValueError(f"unknown stop reason {reason!r}; expected one of {STOP_REASONS}")
        if self._stopped_because is None:
            self._stopped_because = reason

    def exclude(self, model: str, items) -> None:
        """Never give ``model`` these items (bank item ids or bank indices)."""
        e = self._examinee(model)
        e.exclude(self._indices(items))
        self._next[model] = None

    def record(self, model: str, item, y: float, *, cost: float | None = None, raw=None) -> None:
        """Administer ``item`` (an id or bank index) to ``model`` directly, with scaled score ``y``.

        For scores obtained outside :meth:`ask` (a full run, a replay). ``cost``: USD charged
        (default: the item's cost); ``raw``: as :meth:`tell`'s. ValueError, with nothing changed,
        for a bad score or cost, an item in flight, already scored or excluded for the model.
        """
        e = self._examinee(model)
        i = self._index(item)
        if (model, i) in self._pending:
            raise ValueError(f"model {model!r}, item {e.item_id(i)!r}: in flight; tell() its request")
        if raw is None:
            e.record(i, y, cost=cost)
        else:
            e.record(i, y, cost=cost, raw=raw)
        self._next[model] = None

    def record_many(self, model: str, items, scores, *, costs=None, raws=None) -> None:
        """Administer several items to ``model`` at once (one vectorised update; e.g. a full
        run's scores; ``raws``: their raw metric values, as :meth:`tell`'s ``raw``). Checked like
        :meth:`record`; nothing changes when anything is refused."""
        e = self._examinee(model)
        idx = self._indices(items)
        busy = [i for i in idx.tolist() if (model, i) in self._pending]
        if busy:
            raise ValueError(f"model {model!r}, item {e.item_id(busy[0])!r}: in flight; tell() its request")
        e.record_many(idx, scores, costs=costs, raws=raws)
        self._next[model] = None

    # ------------------------------------------------------------------------ run
    def run(self, score: Callable[[str, int], float]) -> RankingResult:
        """Drive to the end with ``score(model, bank_item_index) -> scaled score``."""
        while (req := self.ask()) is not None:
            self.tell(req, score(req.model, req.item))
        return self.result()

    # ------------------------------------------------------------------------ result
    def result(self) -> RankingResult:
        return self._ranking_result(self._judge, self._examinees, self._bank, self.signature())

    def _ranking_result(self, judge, examinees: Mapping[str, Examinee], bank: ItemBank, signature: dict) -> RankingResult:
        """One metric's result: ``judge``'s report of the active models' pairs, and what ``examinees`` (every
        model's on ``bank``) hold."""
        rep = judge.report(self.active, self._remaining())
        ranking = rep.ranking
        ex = examinees
        every = ranking + [m for m in self._models if m in self._failed]
        ids = bank.item_ids
        logs = {}
        for m in every:
            e = ex[m]
            items = e.items
            logs[m] = list(zip(map(str, ids[items].tolist() if items else []), e.scores))
        return RankingResult(
            ranking=ranking,
            theta={m: ex[m].theta for m in every},
            se={m: ex[m].se for m in every},
            items={m: ex[m].n for m in every},
            cost={m: ex[m].spent for m in every},
            pairwise=rep.pairwise, ties=rep.ties, tie_groups=rep.tie_groups,
            adjacent_confidence=rep.adjacent_confidence,
            stopped_because=self._stopped_because or "running",
            confidence=self._confidence, budget=self._budget, total_cost=self.spent,
            item_log=logs, failed=dict(self._failed), signature=signature, equivalent=rep.equivalent,
            inseparable=rep.inseparable, open_pairs=rep.open_pairs, pairs=rep.pairs, rank_range=rep.rank_range,
            estimates=rep.estimates, judgement=rep.judgement,
        )


def _judgement_signature(judge) -> dict:
    """What ``judge`` adds to a run's signature (its ``signature()``; nothing for a judgement without one)."""
    sig = getattr(judge, "signature", None)
    return sig() if callable(sig) else {}


def _seed_value(seed):
    """A seed as it can be written in a signature (None: not reproducible)."""
    if seed is None or isinstance(seed, (int, np.integer)):
        return None if seed is None else int(seed)
    return str(seed)

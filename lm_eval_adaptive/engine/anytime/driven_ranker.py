"""The bank-free ranker as the live driver drives it (issue 31: ``rank`` on a task with no bank).

:class:`DrivenBankFreeRanker` is a :class:`~lm_eval_adaptive.engine.anytime.bank_free_ranker.BankFreeRanker`
with the rest of the protocol that :class:`~lm_eval_adaptive.live.driver.LiveRun` and a resumed run's
journal replay use on the banked ranker: ``release``, ``block``/``unblock_all`` (a call the dollar cap
cannot reserve now), ``is_pending``, ``charge`` (money spent without a score), ``exclude``,
``item_index``, ``in_flight``, ``max_in_flight``, ``record`` (a score told outside ``ask``) and
``replay`` (a journal's outcomes, in order), and per-model ``examinees`` (items, count, dollars, and the
estimate and half-width shown as θ̂ ± SE).

Two rules differ from the banked ranker, both to keep the shared random design exact:

* ``exclude`` does not drop a document: a call lost in flight (its outcome unknown when the process died)
  is asked again on resume (its reservation still counts as spent). Dropping it would change the set of
  documents the model's interval is about, for a reason that is not random.
* Each model's per-document cost estimates (the allocation's relative cost, the dollars to settle a pair)
  start from the caller's planned costs and are rescaled after each answer by the ratio of what its
  answers cost to what they were planned to cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lm_eval_adaptive.engine.anytime.bank_free_ranker import BankFreeRanker
from lm_eval_adaptive.engine.irt.checks import check_cost
from lm_eval_adaptive.engine.ranking.ranker_state import Request

__all__ = ["DrivenBankFreeRanker", "ModelTally", "ReplayCounts", "IndexedReplayError", "STOP_ALIASES"]

#: Stop reasons of the banked ranker the driver may give, as the bank-free ranker names them.
STOP_ALIASES = {"bank_exhausted": "exhausted"}


@dataclass
class ModelTally:
    """One model's part of a driven bank-free run (what the progress table and the report read)."""

    items: list = field(default_factory=list)  # document indices scored, in the order told
    spent: float = 0.0
    theta: float = float("nan")  # the estimate of the full-task mean (metric units)
    se: float = float("nan")  # half the interval's width
    misfit: bool = False
    person_fit: object = None

    @property
    def n(self) -> int:
        return len(self.items)


@dataclass
class ReplayCounts:
    """What :meth:`DrivenBankFreeRanker.replay` did (the fields a resume reports)."""

    scores: int = 0
    failures: int = 0
    lost: int = 0


class DrivenBankFreeRanker(BankFreeRanker):
    """A :class:`BankFreeRanker` with the live driver's protocol (module docstring)."""

    def __init__(self, models, item_ids, **kwargs):
        super().__init__(models, item_ids, **kwargs)
        self._planned = {m: c.copy() for m, c in self._costs.items()}
        self._told_cost = {m: 0.0 for m in self._models}
        self._told_planned = {m: 0.0 for m in self._models}
        self._blocked: set[str] = set()
        self.examinees = {m: ModelTally() for m in self._models}

    # ------------------------------------------------------------------ the driver's protocol
    @property
    def max_in_flight(self) -> int:
        return self._most

    def item_index(self, item_id) -> int:
        try:
            return self._index[str(item_id)]
        except KeyError:
            raise ValueError(f"item {item_id!r} is not one of the run's documents") from None

    def in_flight(self, model: str) -> int:
        return sum(1 for m, _ in self._pending if m == model)

    def is_pending(self, request: Request) -> bool:
        return self._pending.get((request.model, int(request.item))) == request

    def release(self, request: Request) -> None:
        """Take back a request that was never made: its document is asked again."""
        self.cancel(request)

    def block(self, model: str) -> None:
        """Ask nothing of ``model`` for now (its next call does not fit under the cap)."""
        self._blocked.add(str(model))

    def unblock_all(self) -> None:
        self._blocked.clear()

    def _affordable(self, m: str, item: int) -> bool:
        return m not in self._blocked and super()._affordable(m, item)

    def charge(self, model: str, usd: float) -> None:
        """Count ``usd`` as spent on ``model`` with no score (a lost call, a paid failure)."""
        usd = float(check_cost(usd, model=model, item="(charge)"))
        self._spent += usd
        self.examinees[model].spent += usd

    def exclude(self, model: str, items) -> None:
        """Kept in the design (module docstring): a document lost in flight is asked again."""

    def stop(self, reason: str) -> None:
        if self._stopped is None:
            super().stop(STOP_ALIASES.get(reason, reason))

    # ------------------------------------------------------------------ scores
    def tell(self, request: Request, y, *, cost: float | None = None, raw=None) -> None:
        usd = request.cost if cost is None else float(cost)
        super().tell(request, y, cost=cost, raw=raw)
        self._counted(request.model, int(request.item), usd)

    def record(self, model: str, item, y: float, *, cost: float | None = None) -> None:
        """Score ``item`` (an id or index) for ``model`` outside :meth:`ask` (a replayed journal)."""
        i = self.item_index(item) if isinstance(item, str) else int(item)
        if self._asked[model][i]:
            raise ValueError(f"item {self._ids[i]!r} was already given to model {model!r}")
        req = Request(model, i, self._ids[i], float(self._costs[model][i]), "adaptive")
        self._asked[model][i] = True
        self._advance_next(model)
        self._pending[(model, i)] = req
        self._reserved += req.cost
        self.tell(req, y, cost=cost)

    def _counted(self, m: str, i: int, usd: float) -> None:
        e = self.examinees[m]
        e.items.append(i)
        e.spent += usd
        est = self._estimate(m)
        e.theta, e.se = est["estimate"], (est["upper"] - est["lower"]) / 2
        self._told_cost[m] += usd
        self._told_planned[m] += float(self._planned[m][i])
        if self._told_planned[m] > 0 and self._told_cost[m] > 0:
            self._costs[m] = self._planned[m] * (self._told_cost[m] / self._told_planned[m])

    def expected_cost(self, model: str) -> np.ndarray:
        """Each document's expected cost for ``model`` (planned, rescaled by its answers so far)."""
        return self._costs[model].copy()

    def replay(self, events) -> ReplayCounts:
        """A journal's outcomes, in order: scores recorded, failures skipped (the document is asked
        again), lost calls charged. ValueError naming the event's position for one that does not fit."""
        counts = ReplayCounts()
        for k, ev in enumerate(events):
            try:
                if ev.model not in self.examinees:
                    raise ValueError(f"model {ev.model!r} is not one of the run's models {self._models}")
                if ev.kind == "score":
                    self.record(ev.model, ev.item, ev.y, cost=ev.cost)
                    counts.scores += 1
                elif ev.kind == "failure":
                    counts.failures += 1
                elif ev.kind == "lost":
                    if ev.cost:
                        self.charge(ev.model, ev.cost)
                    counts.lost += 1
            except ValueError as err:
                raise IndexedReplayError(k, str(err)) from None
        return counts


class IndexedReplayError(ValueError):
    """A replayed event that does not fit; ``index`` is its position."""

    def __init__(self, index: int, reason: str):
        super().__init__(f"event {index}: {reason}")
        self.index, self.reason = index, reason

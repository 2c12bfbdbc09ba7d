"""Replaying a ranking run from its outcomes (a resumed live run feeds its journal back): the events
(:class:`ReplayEvent`: a score, a failure, a call lost in flight), the counts of each path taken
(:class:`ReplayStats`), the error naming the event that does not fit (:class:`ReplayError`), and
:class:`RankerReplay`, the ranker's part that replays them through its own ``ask``/``tell``/``record``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from lm_eval_adaptive.engine.irt.checks import check_cost
from lm_eval_adaptive.engine.ranking.ranker_state import Request

__all__ = ["RankerReplay", "ReplayEvent", "ReplayError", "ReplayStats", "REPLAY_KINDS"]

#: Kinds of :class:`ReplayEvent`.
REPLAY_KINDS = ("score", "failure", "lost")


@dataclass(frozen=True)
class ReplayEvent:
    """One past outcome for :meth:`AdaptiveRanker.replay` (already parsed from wherever it was kept).

    ``kind``:
      * ``"score"``: ``model`` was given ``item`` and scored ``y`` (scaled, in [0, 1]) at
        ``cost`` USD (None: the item's planned cost), ``raw`` the raw metric value it was scaled
        from (None: ``y`` mapped back through the bank's range; a mapping metric → value for a
        several-metric run);
      * ``"failure"``: the call for ``item`` failed for good (its request was cancelled;
        nothing charged, the item is not asked again unless a later score event names it);
      * ``"lost"``: the call was in flight when the run died and its outcome is unknown:
        the item is never asked again and ``cost`` (its reservation) counts as spent.

    ``item`` is a bank item id (str) or a bank index (int).
    """

    kind: str
    model: str
    item: str | int
    y: float | None = None
    cost: float | None = None
    raw: object = None

    def __post_init__(self):
        if self.kind not in REPLAY_KINDS:
            raise ValueError(f"replay event kind must be one of {REPLAY_KINDS}, got {self.kind!r}")

    @classmethod
    def score(cls, model: str, item, y: float, cost: float | None = None, raw=None) -> ReplayEvent:
        return cls("score", model, item, y, cost, raw)

    @classmethod
    def failure(cls, model: str, item) -> ReplayEvent:
        return cls("failure", model, item)

    @classmethod
    def lost(cls, model: str, item, cost: float | None = None) -> ReplayEvent:
        return cls("lost", model, item, None, cost)


class ReplayError(ValueError):
    """An event that does not fit the ranker; ``index`` is its position in the events given."""

    def __init__(self, index: int, reason: str):
        super().__init__(f"event {index}: {reason}")
        self.index = index
        self.reason = reason


@dataclass
class ReplayStats:
    """What :meth:`AdaptiveRanker.replay` did."""

    scores: int = 0  # score events replayed
    asked: int = 0  # ... reproduced through ask() + tell()
    direct: int = 0  # ... recorded directly (the run had told them in another order than asked)
    failures: int = 0  # failure events replayed as a cancelled request
    lost: int = 0  # lost-in-flight events (item excluded, its cost charged)


class RankerReplay:
    """The part of :class:`~lm_eval_adaptive.engine.ranking.ranker.AdaptiveRanker` that reproduces a run
    from its outcomes (:meth:`replay`), asking no model."""

    def replay(self, events: Iterable[ReplayEvent]) -> ReplayStats:
        """Reproduce a run from its outcomes, in the order they happened, asking no model.

        The ranker must be built as the original run's was (bank, models, costs, settings and
        seed) and have no request in flight (ValueError otherwise). For each score event:

        1. :meth:`ask`; if it returns the event's (model, item), that request is told
           (score and cost), exactly what the live run did. A run with one request at a
           time is replayed entirely this way, its random stream (``top_k > 1``) included.
        2. Otherwise (requests were in flight and completed in another order than asked)
           the ask is undone completely (the item's reservation, the cached next items, the
           random state and a stop it declared) and the item is recorded directly
           (:meth:`record`). With ``top_k = 1`` each model's items depend only on its own
           history, so every model ends exactly as in the live run; with randomesque
           selection the random stream is not the live run's (its ask order is not known).

        A failure event is replayed like the live run's :meth:`cancel` of it (the item stays
        unused for that model; a later score event for it, a retry that succeeded, is still
        recorded). A lost event excludes the item and :meth:`charge` s its cost.

        Raises :class:`ReplayError` (with the event's index) for an event that does not fit:
        an unknown model or item, a bad score or cost, an item already given to the model
        or excluded for it. Returns counts of each path taken.
        """
        if self._pending:
            raise ValueError("replay needs a ranker with no request in flight")
        stats = ReplayStats()
        failed: set[tuple[str, int]] = set()
        for k, ev in enumerate(events):
            m = ev.model
            if m not in self._examinees:
                raise ReplayError(k, f"model {m!r} is not one of the ranker's models {list(self._models)}")
            try:
                i = self._index(ev.item)
            except ValueError as err:
                raise ReplayError(k, f"item {ev.item!r} is not in {self._items_name} ({err})") from None
            e = self._examinees[m]
            item_id = e.item_id(i)
            if ev.kind == "lost":
                try:
                    cost = check_cost(ev.cost, model=m, item=item_id)
                except ValueError as err:
                    raise ReplayError(k, str(err)) from None
                e.exclude([i])
                if cost:
                    e.charge(cost)
                self._next[m] = None
                stats.lost += 1
                continue
            if ev.kind == "score":
                try:
                    y = self._told(ev.y, m, item_id)
                    cost = check_cost(ev.cost, model=m, item=item_id)
                except ValueError as err:
                    raise ReplayError(k, str(err)) from None
            req = self._ask_for(m, i)
            if ev.kind == "failure":
                if req is not None:
                    self.cancel(req)
                elif not e.is_taken(i):
                    e.reserve(i)
                    self._next[m] = None
                failed.add((m, i))
                stats.failures += 1
                continue
            if req is not None:
                self.tell(req, y, cost=cost, raw=ev.raw)
                stats.asked += 1
            else:
                if e.is_taken(i) and (m, i) not in failed:
                    raise ReplayError(k, f"item {item_id!r} was already given to model {m!r} or is excluded "
                                         "for it: the events do not match this ranker")
                try:
                    self.record(m, i, y, cost=cost, raw=ev.raw)
                except ValueError as err:
                    raise ReplayError(k, str(err)) from None
                stats.direct += 1
            stats.scores += 1
        return stats

    def _ask_for(self, model: str, item: int) -> Request | None:
        """:meth:`ask` if it yields (model, item); otherwise None, with the ask undone.

        Undoing restores everything ask() changes: the returned request (pending entry and
        the item's reservation), the cached next items, the random state and a stop it
        declared (an ask with nothing in flight may declare the run over).
        """
        rng_state = self._rng.bit_generator.state
        saved = dict(self._next)
        versions_before = {m: e.version for m, e in self._examinees.items()}
        stopped = self._stopped_because
        req = self.ask()
        if req is not None and req.model == model and req.item == item:
            return req
        if req is not None:
            del self._pending[(req.model, req.item)]
            self._examinees[req.model].unreserve(req.item)
        # every examinee is as it was before the ask: cached items chosen then are valid again
        self._next = {m: (c if c is None or c[0] != versions_before[m] else (self._examinees[m].version, c[1]))
                      for m, c in saved.items()}
        self._rng.bit_generator.state = rng_state
        self._stopped_because = stopped
        return None

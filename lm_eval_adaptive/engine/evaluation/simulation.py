"""Simulation: scores drawn from a response model, abilities drawn from a population, and one
driver for any ask/tell object.

Every simulated score of the project is drawn here: the simulated tables and banks of the tests
and benchmarks, the pinned runs, and the cost forecast of ``--dry-run``
(:mod:`lm_eval_adaptive.live.cost_forecast`).

* :func:`draw_scores`: scaled scores at abilities θ and difficulties b under a response model.
  A continuous model (METHOD.md §1) gives ``clip(N(μ, (noise·σ)²), 0, 1)`` with σ² = k·μ(1-μ),
  or with ``distribution="beta"`` a Beta score of the same mean and variance (the model's
  moments inside [0, 1], without clipping: a score distribution the model does not assume); a
  binary model (1PL, 2PL, 3PL) gives Bernoulli(μ). Vectorised: θ and b broadcast.
* :func:`bank_scores`: the same for a bank's items (its model, difficulties and per-item
  parameters): one simulated full run per ability.
* :class:`AbilityPopulation`: abilities for simulated models, by smoothed bootstrap of the
  abilities of a bank's calibration models; :func:`joint_abilities` draws one model's ability
  on several banks (the metrics of one task) together.
* :func:`drive`: runs an ask/tell object to its end with a score source, whatever the source
  is (a simulated run, a response table's recorded scores): the rankers
  (:class:`~lm_eval_adaptive.engine.ranking.ranker.AdaptiveRanker`,
  :class:`~lm_eval_adaptive.engine.ranking.multi_metric_ranker.MultiMetricRanker`: ``ask``/``tell``) and
  the single-model tests (:class:`~lm_eval_adaptive.engine.cat.adaptive_test.AdaptiveTest`,
  :class:`~lm_eval_adaptive.engine.cat.multi_metric_test.MultiMetricTest`: ``next_items``/``record``).

A live run is driven by the live driver (calls in flight, a dollar ledger, retries), not by
:func:`drive`; the cost forecast runs that driver itself with simulated answers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from lm_eval_adaptive.engine.irt.response_model import ContinuousResponseModel

__all__ = ["DISTRIBUTIONS", "draw_scores", "bank_scores", "AbilityPopulation", "joint_abilities", "drive"]

#: The score distributions of a continuous model :func:`draw_scores` can draw from.
DISTRIBUTIONS = ("normal", "beta", "t")


def draw_scores(model, theta, b, rng: np.random.Generator, *, noise=1.0, clip: bool = True,
                distribution: str = "normal", df: float = 1.5, **item_params) -> np.ndarray:
    """Scores drawn under ``model`` at abilities ``theta`` and difficulties ``b`` (broadcast).

    ``item_params``: the per-item parameters of a 2PL/3PL model (``a``, ``c``), as
    :meth:`~lm_eval_adaptive.engine.irt.bank.ItemBank.item_params` gives them. A binary model gives
    Bernoulli(μ) (``noise``, ``clip`` and ``distribution`` do not apply). A continuous model
    (noise parameter k) gives, with ``distribution="normal"``, N(μ, (noise·σ)²), σ² = k·μ(1-μ),
    clipped to [0, 1] unless ``clip`` is False (``noise`` > 1: a model that scatters more than the
    bank expects, broadcast against the scores); with ``"beta"``, Beta(μ·c, (1-μ)·c), c = 1/k - 1
    (each shape at least 1e-3), whose mean is μ and variance k·μ(1-μ); with ``"t"``, μ + noise·σ·T
    with T Student's t on ``df`` degrees of freedom (heavy tails the model does not assume), clipped
    like the normal.
    """
    mu = np.asarray(model.mean(theta, b, **item_params), dtype=float)
    if not isinstance(model, ContinuousResponseModel):
        return (rng.random(mu.shape) < mu).astype(float)
    k = model.k
    if distribution == "beta":
        conc = 1.0 / k - 1.0
        return rng.beta(np.maximum(mu * conc, 1e-3), np.maximum((1.0 - mu) * conc, 1e-3))
    if distribution == "t":
        y = mu + noise * np.sqrt(k * mu * (1.0 - mu)) * rng.standard_t(df, mu.shape)
    elif distribution == "normal":
        y = rng.normal(mu, np.sqrt(k * mu * (1.0 - mu)) * noise)
    else:
        raise ValueError(f"distribution must be one of {DISTRIBUTIONS}, got {distribution!r}")
    return np.clip(y, 0.0, 1.0) if clip else y


def bank_scores(bank, theta, rng: np.random.Generator, items=slice(None), **kwargs) -> np.ndarray:
    """Scaled scores on ``bank``'s ``items`` (default: all) at ``theta``: a scalar θ gives one
    simulated run (one score per item), a column of θ (shape (M, 1)) one row per model.
    ``kwargs`` go to :func:`draw_scores`."""
    return draw_scores(bank.model, theta, bank.b[items], rng, **bank.item_params(items), **kwargs)


@dataclass(frozen=True)
class AbilityPopulation:
    """Where simulated models' abilities come from.

    ``values`` are the abilities drawn around: a bank's calibration models' abilities when it
    records at least two (:meth:`of_bank`); ``source`` says which, in words. :meth:`draw` is a
    smoothed bootstrap: values picked without replacement while there are enough, plus normal
    noise of Silverman's rule-of-thumb bandwidth.
    """

    values: np.ndarray
    source: str

    @classmethod
    def of_bank(cls, bank) -> AbilityPopulation:
        """The bank's calibration models' abilities; without two of them, 200 draws of a standard
        normal around the bank's prior centre (the median difficulty)."""
        abilities = (bank.diagnostics or {}).get("abilities") or {}
        vals = np.array([float(v) for v in abilities.values() if v is not None and math.isfinite(float(v))])
        if vals.size >= 2:
            return cls(vals, f"the {vals.size} calibration models' abilities (smoothed bootstrap)")
        centre = bank.prior_mean
        return cls(centre + np.random.default_rng(0).standard_normal(200),
                   f"N({centre:+.2f}, 1): the bank records no calibration abilities")

    @cached_property
    def bandwidth(self) -> float:
        """Silverman's rule-of-thumb bandwidth of :attr:`values`."""
        pool = np.asarray(self.values, dtype=float)
        q75, q25 = np.quantile(pool, [0.75, 0.25])
        scale = min(float(np.std(pool, ddof=1)), float(q75 - q25) / 1.34) or float(np.std(pool, ddof=1))
        return 0.9 * scale * pool.size ** -0.2

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` abilities by smoothed bootstrap."""
        pool = np.asarray(self.values, dtype=float)
        picked = rng.choice(pool, size=n, replace=n > pool.size)
        return picked + self.bandwidth * rng.standard_normal(n)


def joint_abilities(banks: Mapping[str, object]) -> tuple[Callable[[np.random.Generator], dict], str]:
    """(``draw(rng)`` → one simulated model's ability on every bank, name → θ; how it draws).

    A model is good or poor on all of a task's metrics together, so the banks do not draw apart:
    one calibration model that every bank records is picked and its ability on each bank taken,
    each with that bank's smoothing noise; banks that share no calibration model take one
    quantile of every bank's population instead."""
    pops = {m: AbilityPopulation.of_bank(b) for m, b in banks.items()}
    noise = {m: p.bandwidth for m, p in pops.items()}
    named = {m: {k: float(v) for k, v in ((b.diagnostics or {}).get("abilities") or {}).items()
                 if v is not None and math.isfinite(float(v))} for m, b in banks.items()}
    common = sorted(set.intersection(*(set(v) for v in named.values()))) if named else []
    if len(common) >= 2:
        def draw(rng: np.random.Generator) -> dict:
            who = common[int(rng.integers(len(common)))]
            return {m: named[m][who] + noise[m] * float(rng.standard_normal()) for m in banks}

        return draw, f"one of the {len(common)} calibration models every bank records, on each bank (smoothed)"

    def draw(rng: np.random.Generator) -> dict:
        u = float(rng.random())
        return {m: float(np.quantile(pops[m].values, u)) + noise[m] * float(rng.standard_normal()) for m in banks}

    return draw, "one quantile of every bank's abilities (the banks share no calibration model)"


def drive(subject, score: Callable, *, cost: Callable | None = None, batch_size: int = 1,
          raw: Callable | None = None):
    """Run the ask/tell object ``subject`` to its end; its result (``subject.result()``), or
    ``subject`` itself when it has none.

    A ranker (``ask``/``tell``) is asked for one request at a time and told
    ``score(model, item)`` (a scaled score, or for a several-metric ranker a mapping metric →
    scaled score) and, with ``raw``, the raw metric value ``raw(model, item)`` it was scaled from
    (as a live run tells it; None: the ranker maps the scaled score back); a test
    (``next_items``/``record``) is asked for up to ``batch_size`` items at a time and each recorded
    with ``score(item)``. ``cost`` (same arguments as ``score``) is the USD each item is charged;
    None: the object's own item costs.
    """
    if hasattr(subject, "ask"):
        while (req := subject.ask()) is not None:
            y = score(req.model, req.item)
            told = {} if raw is None else {"raw": raw(req.model, req.item)}
            if cost is not None:
                told["cost"] = float(cost(req.model, req.item))
            subject.tell(req, y, **told)
    else:
        while items := subject.next_items(batch_size):
            for i in items:
                subject.record(i, score(i), cost=None if cost is None else float(cost(i)))
    result = getattr(subject, "result", None)
    return result() if callable(result) else subject

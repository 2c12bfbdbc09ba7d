"""Person fit: do a model's scores behave as the bank's response model says they should?

For the continuous model each scaled score has mean μ_i = logistic(θ - b_i) and variance
k·μ_i(1 - μ_i). The standardised residuals r_i = (y_i - μ_i) / √(k·μ_i(1 - μ_i)) of a
model that fits have mean 0 and variance 1, so the dispersion statistic D = Σ r_i² is
about χ² with n degrees of freedom. :func:`dispersion_fit` reports the ratio D / n (the
model's own noise relative to the bank's k, METHOD.md §7) and the one-sided z of D under
χ²_n (Wilson-Hilferty); a model whose z exceeds the flag level answers the bank's items
with more scatter around its curve than the calibration models did (item × model
interaction, a different curve, failures on one domain) and is flagged.

For the Bernoulli model k is 1/a² and the same formulas give the standard Pearson fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri  # the normal quantile (scipy.stats' norm.ppf), without importing scipy.stats

from lm_eval_adaptive.engine.irt.bank import ItemBank

__all__ = ["PersonFit", "dispersion_fit", "misfit_note", "FLAG_Z"]

#: z above which a model is flagged (one-sided p < 0.05). The flag also picks the model-error
#: correction a model gets (engine/evaluation/model_error.py): flagged models get the one measured on
#: flagged held-out runs.
FLAG_Z = float(ndtri(0.95))


@dataclass(frozen=True)
class PersonFit:
    """How a model's scores fit the bank: n items, dispersion ratio D/n, its z, and the flag."""

    n: int
    dispersion: float
    z: float
    flagged: bool

    def to_dict(self) -> dict:
        return {"n": self.n, "dispersion": self.dispersion, "z": self.z, "flagged": self.flagged}


def dispersion_fit(bank: ItemBank, items, scores, theta: float, *, flag_z: float = FLAG_Z) -> PersonFit:
    """Person fit of scaled ``scores`` on bank ``items`` at ability ``theta`` (see module docstring)."""
    items = np.asarray(items, dtype=np.int64)
    y = np.asarray(scores, dtype=float)
    n = int(items.size)
    if n == 0:
        return PersonFit(0, float("nan"), float("nan"), False)
    mu = np.asarray(bank.model.mean(theta, bank.b[items], **bank.item_params(items)), dtype=float)
    # a 2PL/3PL bank's scores are Bernoulli (variance P(1 - P)); otherwise k = 1/a²
    k = 1.0 if bank.model.per_item else 1.0 / bank.model.discrimination ** 2
    var = np.maximum(k * mu * (1.0 - mu), 1e-12)
    d = float(np.sum((y - mu) ** 2 / var))
    ratio = d / n
    # Wilson-Hilferty: (D/n)^(1/3) is about normal with mean 1 - 2/(9n) and variance 2/(9n)
    c = 2.0 / (9.0 * n)
    z = float((ratio ** (1.0 / 3.0) - (1.0 - c)) / np.sqrt(c))
    return PersonFit(n=n, dispersion=ratio, z=z, flagged=bool(z > flag_z))


def misfit_note(fit: dict) -> str | None:
    """The report line for a flagged model (a :meth:`PersonFit.to_dict`), None when it fits."""
    if not (fit or {}).get("flagged"):
        return None
    return (f"its scores scatter {fit['dispersion']:.2f}× the bank's noise around its curve "
            f"(z = {fit['z']:.1f}, {fit['n']} items): treat its interval with care")

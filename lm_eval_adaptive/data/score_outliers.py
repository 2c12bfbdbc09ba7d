"""The outlier rule of response tables: how far from the bulk of a table's scores a score may lie.

One corrupt value (``-12540`` in a table of [0, 1] scores, a bit-flipped ``1e300`` in a Parquet
file) would silently squash every other score into a sliver of the global [min, max] scaling
range.  So a score is refused when it lies more than :data:`OUTLIER_FENCE` times the table's
central spread beyond it: with ``P1`` and ``P99`` the 1st and 99th percentiles of all the table's
scores (taken as order statistics, never interpolated towards the extremes, so the single
smallest and largest value never shape them) and ``s = P99 - P1``, every score must lie in
``[P1 - 10 s, P99 + 10 s]``.  Scores that do not vary in their central 98 % (``s = 0``) are not
checked.  The rule never fires on the real tables (WMT24 BLEU/chrF, AlpacaEval judge: none of
their scores lies more than 0.08 s beyond ``[P1, P99]``).  ``allow_outliers=True`` (on the
command line ``--allow-outliers``) accepts such scores when they are genuine.

:func:`outlier_fences` is the rule; the long table applies it in
:func:`lm_eval_adaptive.data.responses.check_score_outliers`, the dense matrix in
:func:`lm_eval_adaptive.data.response_matrix.check_matrix_outliers`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["OUTLIER_QUANTILE", "OUTLIER_FENCE", "outlier_fences"]

#: The rule (module docstring): the central spread is ``P99 - P1`` ...
OUTLIER_QUANTILE = 0.01
#: ... and a score more than this many spreads beyond ``[P1, P99]`` is refused.
OUTLIER_FENCE = 10.0


def outlier_fences(score: np.ndarray, *, overwrite_input: bool = False) -> tuple[float, float] | None:
    """``(low, high)``: the range a score must lie in (rule in the module docstring).

    ``None`` when the scores' central spread ``P99 - P1`` is zero (nothing to
    measure against) or there are fewer than 3 finite scores.  ``overwrite_input``:
    ``score`` may be reordered in place (saves copying a large array).
    """
    x = np.asarray(score)
    if x.dtype not in (np.float32, np.float64):  # float32 stays (order statistics are exact)
        x = x.astype(np.float64)
    finite = np.isfinite(x)
    if not finite.all():
        x = x[finite]
    del finite
    if x.size < 3:
        return None
    # Order statistics, rounded inwards: in a table of up to 100 scores the single
    # smallest and largest value are never used, in a larger one the outer 1 %.
    own = overwrite_input or x is not score  # x is ours to reorder
    p_lo = float(np.quantile(x, OUTLIER_QUANTILE, method="higher", overwrite_input=own))
    p_hi = float(np.quantile(x, 1.0 - OUTLIER_QUANTILE, method="lower", overwrite_input=own))
    spread = p_hi - p_lo
    if not spread > 0:
        return None
    return p_lo - OUTLIER_FENCE * spread, p_hi + OUTLIER_FENCE * spread

"""The figures a backtest compares rankings with: the hold-out sets, Kendall τ, the ground truth (the
full-data ranking and the bootstrap intervals of the means), tie precision and recall, and the
accuracy of the confident pairs."""

from __future__ import annotations


import numpy as np



__all__ = ["holdout_sets", "kendall_tau", "ground_truth", "bootstrap_mean_ci", "tie_metrics",
           "confident_accuracy", "confident_counts"]


def holdout_sets(models, size: int, folds: int, seed: int) -> list[list[str]]:
    """Disjoint hold-out sets: consecutive blocks of one seeded shuffle of the sorted names.

    The shuffle is NumPy's legacy ``RandomState(seed).shuffle``, the partition scheme of
    the paper's reference code, so that with the same seed both evaluate the same
    hold-out sets and their figures can be compared set for set.
    """
    names = sorted(str(m) for m in models)
    np.random.RandomState(seed).shuffle(names)
    return [names[f * size:(f + 1) * size] for f in range(folds)]


def kendall_tau(predicted: list, truth: list) -> float:
    """Kendall τ-b between two rankings of the same models (lists, best first)."""
    pos = {m: i for i, m in enumerate(predicted)}
    from scipy.stats import kendalltau  # noqa: PLC0415 - scipy.stats takes ~0.4 s to import: not at start-up

    t, _ = kendalltau(np.arange(len(truth)), [pos[m] for m in truth])
    return 0.0 if np.isnan(t) else float(t)


def ground_truth(raw: np.ndarray, models: list, *, n_resamples: int, confidence: float,
                 rng: np.random.Generator) -> dict:
    """Full-data ranking by mean raw score, percentile bootstrap CIs, ties by CI overlap.

    ``raw`` is (models, items) with NaN where a model has no score.
    """
    means = np.nanmean(raw, axis=1)
    lo, hi = bootstrap_mean_ci(raw, n_resamples=n_resamples, confidence=confidence, rng=rng)
    order = np.argsort(-means, kind="stable")
    ranking = [models[i] for i in order]
    ties = set()
    for a in range(len(models)):
        for b in range(a + 1, len(models)):
            if lo[a] <= hi[b] and lo[b] <= hi[a]:
                ties.add(frozenset((models[a], models[b])))
    return {"ranking": ranking, "means": dict(zip(models, means.tolist())), "ties": ties,
            "ci": {m: (float(l), float(h)) for m, l, h in zip(models, lo, hi)}}


def bootstrap_mean_ci(x: np.ndarray, *, n_resamples: int, confidence: float,
                      rng: np.random.Generator, batch: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap CI of each row's mean (NaN = missing, ignored).

    A resample of the n columns is a vector of multinomial counts w (Σw = n), and the
    resampled row means are (w·x)/(w·present): one matrix product per batch instead of a
    gather of n_resamples × n values per row. This computes the same percentile interval
    as ``scipy.stats.bootstrap(method="percentile")`` (checked in the tests) about 30×
    faster, which keeps a whole backtest within seconds.
    """
    x = np.asarray(x, dtype=float)
    present = ~np.isnan(x)
    xz = np.where(present, x, 0.0)
    n = x.shape[1]
    means = []
    for start in range(0, n_resamples, batch):
        r = min(batch, n_resamples - start)
        idx = rng.integers(0, n, size=(r, n))
        w = np.bincount((idx + n * np.arange(r)[:, None]).ravel(), minlength=r * n).reshape(r, n)
        w = w.astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            means.append((w @ xz.T) / (w @ present.T.astype(float)))
    m = np.concatenate(means, axis=0)  # (n_resamples, rows)
    alpha = (1 - confidence) / 2
    lo, hi = np.nanpercentile(m, [100 * alpha, 100 * (1 - alpha)], axis=0)
    return lo, hi


def tie_metrics(predicted: set, truth: set) -> tuple[float, float, float]:
    """Precision, recall, F1 of predicted tie pairs (empty-set conventions of the paper's code)."""
    tp = len(predicted & truth)
    fp = len(predicted - truth)
    fn = len(truth - predicted)
    precision = (tp / (tp + fp)) if tp + fp else (0.0 if fn else 1.0)
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def confident_accuracy(predicted: list, truth: list, ties: set) -> float | None:
    """Share of non-tie pairs whose predicted order matches the truth (None if all tied)."""
    ok, n = confident_counts(predicted, truth, ties)
    return ok / n if n else None


def confident_counts(predicted: list, truth: list, ties: set) -> tuple[int, int]:
    """(right, all) non-tie pairs: how many of the pairs reported as ordered are in the true order."""
    p = {m: i for i, m in enumerate(predicted)}
    t = {m: i for i, m in enumerate(truth)}
    ok = n = 0
    for i, a in enumerate(predicted):
        for b in predicted[i + 1:]:
            if frozenset((a, b)) in ties:
                continue
            n += 1
            ok += (p[a] < p[b]) == (t[a] < t[b])
    return ok, n

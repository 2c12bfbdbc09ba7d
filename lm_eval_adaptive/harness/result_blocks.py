"""What ``run --adaptive`` adds to the harness's outputs: the ``adaptive`` block of each task in the
results JSON (:func:`adaptive_block`, :func:`multi_block`), the full-task estimate made the task's
metric (:func:`headline_estimate`: a number, and its ``_stderr`` the interval's half-width / 1.96, so the
harness's table shows Value ± Stderr as for any run), each metric's block of a results file (:func:`metric_blocks`), and the
``adaptive`` record of each kept sample row (:func:`annotate_samples`, :func:`annotate_multi_samples`)."""

from __future__ import annotations

import numpy as np

from lm_eval_adaptive.engine.cat.estimation import Z95
from lm_eval_adaptive.engine.cat.full_task import full_task_estimate
from lm_eval_adaptive.harness.sample_logs import ADAPTIVE_SAMPLE_KEY
from lm_eval_adaptive.harness.task_loop import MultiTaskOutcome, TaskOutcome

__all__ = ["ADMINISTERED_SUFFIX", "headline_estimate", "metric_blocks", "adaptive_block",
           "administered", "multi_block", "annotate_samples", "annotate_multi_samples"]

#: Suffix of the metrics that hold plain means over the administered documents only.
ADMINISTERED_SUFFIX = "_administered_mean"


def headline_estimate(results: dict, task: str, block: dict) -> None:
    """Make the full-task estimate the task's metric in the harness results.

    ``results["results"][task]["<metric>,<filter>"]`` becomes the estimate, and its
    ``_stderr`` the interval's half-width / 1.96. The harness's own values (plain means over
    the documents the CAT picked, biased toward them) move to ``<metric>_administered_mean``
    (and its ``_stderr``), every metric of the task alike: no biased number keeps a metric's
    own name.
    """
    row = results.get("results", {}).get(task)
    if row is None:
        return
    estimates = _estimates(block)
    hib = results.setdefault("higher_is_better", {}).setdefault(task, {})
    for key in [k for k in row if "," in k and k != "alias"]:
        name, _, filt = key.partition(",")
        if name.endswith("_stderr") or name.endswith(ADMINISTERED_SUFFIX):
            continue
        row[f"{name}{ADMINISTERED_SUFFIX},{filt}"] = row.pop(key)
        if f"{name}_stderr,{filt}" in row:
            row[f"{name}{ADMINISTERED_SUFFIX}_stderr,{filt}"] = row.pop(f"{name}_stderr,{filt}")
        if name in hib:
            hib[f"{name}{ADMINISTERED_SUFFIX}"] = hib[name]
        if name in estimates:
            est = estimates[name]
            row[key] = est["estimate"]
            row[f"{name}_stderr,{filt}"] = (est["upper"] - est["lower"]) / (2 * Z95)
    if len(estimates) == 1:
        (metric,) = estimates
        block["headline"] = (f"results[{task!r}][{metric!r}] is the full-task estimate; the plain mean of the "
                             f"administered documents is {metric}{ADMINISTERED_SUFFIX}")
    else:
        block["headline"] = (f"results[{task!r}][METRIC] is the full-task estimate for each of "
                             f"{', '.join(estimates)}; the plain mean of the administered documents is "
                             f"METRIC{ADMINISTERED_SUFFIX}")


def _estimates(block: dict) -> dict:
    """Metric → its full-task estimate in a task's ``adaptive`` block (one metric, or several)."""
    if "metrics" in block:
        return {m: b["metric_estimate"] for m, b in block["metrics"].items()}
    return {block["metric"]: block["metric_estimate"]}


def metric_blocks(adaptive: dict) -> list[tuple[str, dict]]:
    """(label, block) for each metric of each task of a results file's ``adaptive`` blocks: a
    single-bank task's block as it is (label: the task), a multi-metric task's per-metric blocks
    (label ``TASK [METRIC]``)."""
    out = []
    for task, block in (adaptive or {}).items():
        if "metrics" in block:
            out += [(f"{task} [{m}]", b) for m, b in block["metrics"].items()]
        else:
            out.append((task, block))
    return out


def _estimate_fields(bank, e, raw, n_docs: int) -> dict:
    """One metric's figures of an adaptive block: θ̂ ± SE, items, the full-task estimate, person fit."""
    est = full_task_estimate(bank, e.items, np.asarray(raw), e.theta, e.se, misfit=e.misfit)
    return {
        "theta": e.theta, "se": e.se, "theta_ci95": [e.theta - Z95 * e.se, e.theta + Z95 * e.se],
        "items": e.n, "task_docs": n_docs, "pct_of_task": 100.0 * e.n / max(n_docs, 1),
        "metric_estimate": {"estimate": est["estimate"], "lower": est["lower"], "upper": est["upper"],
                            "level": est["level"], "over_bank_items": est["items_total"]},
        "observed_mean": float(np.mean(raw)) if raw else None,
        "person_fit": e.person_fit.to_dict(),
    }


def _cost_fields(o, generations: int) -> dict:
    """What an adaptive run's generations cost, and where the figure comes from."""
    charged = o.usage["items_charged_by_usage"]
    return {
        "cost_source": ("provider usage" if charged == generations else
                        "bank estimate" if charged == 0 else "provider usage, partly estimated"),
        "cost_estimate_usd": o.estimated_usd,
        "usage": {k: o.usage[k] for k in ("prompt_tokens", "completion_tokens")},
        # attempts sent (each a paid call), retries among them, failed attempts charged as billed
        "calls": {k: o.usage.get(k, 0) for k in ("attempts", "retries", "billed_failures", "billed_failures_usd")},
        "price": {"input_per_mtok": o.price.input_per_mtok,
                  "output_per_mtok": o.price.output_per_mtok, "source": o.price.source},
    }


def administered(o: TaskOutcome) -> list[dict]:
    """Each administered document in the order it was given: the bank's item id, the harness doc id, the
    raw metric value, and whether a random slot of the selector chose it (the random share the
    full-task estimate's design-based correction rests on: docs/metric-scale.md)."""
    e = o.test.examinee
    is_random = getattr(e.selector, "is_random_slot", None)
    ids = o.bank.item_ids
    return [{"item_id": str(ids[i]), "doc_id": int(d), "raw": float(r),
             "random": bool(is_random(k)) if is_random is not None else False}
            for k, (i, d, r) in enumerate(zip(e.items, o.doc_ids, o.raw))]


def adaptive_block(o: TaskOutcome) -> dict:
    e = o.test.examinee
    return {
        "metric": o.binding.metric,
        **_estimate_fields(o.bank, e, o.raw, o.n_docs),
        "administered": administered(o),
        "cost_usd": e.spent,
        "judge_cost_usd": o.judge.get("cost_usd", 0.0),
        "judge": dict(o.judge),
        **_cost_fields(o, e.n),
        "stopped_because": o.test.stopped_because,
        "trajectory": dict(o.trajectory),
        "clipped_scores": o.clipped,
        "bank_id": o.bank.bank_id, "bank_task": o.bank.task, "bank_metric": o.bank.metric,
        "item_field": o.binding.item_field,
        "settings": {"se_target": o.test.se_target, "min_items": o.test.min_items,
                     "max_items": o.test.max_items, "budget_usd": o.test.budget},
    }


def multi_block(o: MultiTaskOutcome) -> dict:
    """The ``adaptive`` block of a multi-metric task: the run's shared figures (generations, cost,
    stop) and, under ``metrics``, one block per metric with its own θ̂, SE, interval and trajectory."""
    t = o.test
    n_docs = o.n_docs
    per = {}
    for b in o.bindings:
        e = t.examinees[b.metric]
        per[b.metric] = {
            "metric": b.metric,
            **_estimate_fields(b.bank, e, o.raw[b.metric], n_docs),
            "cost_usd": t.spent, "judge_cost_usd": o.judge.get("cost_usd", 0.0), "judge": dict(o.judge),
            "stopped_because": t.stopped_because,
            "se_target_met": t.se_target is not None and e.measurement_se <= t.se_target,
            "trajectory": dict(o.trajectory[b.metric]),
            "clipped_scores": o.clipped[b.metric],
            "bank_id": b.bank.bank_id, "bank_task": b.bank.task, "bank_metric": b.bank.metric,
            "item_field": b.item_field,
        }
    return {
        "metrics": per,
        "generations": t.n, "joint_items": len(t.item_ids), "task_docs": n_docs,
        "cost_usd": t.spent,
        "judge_cost_usd": o.judge.get("cost_usd", 0.0),
        "judge": dict(o.judge),
        **_cost_fields(o, t.n),
        "stopped_because": t.stopped_because,
        "signature": t.signature(),
        "settings": {"se_target": t.se_target, "min_items": t.min_items, "max_items": t.max_items,
                     "budget_usd": t.budget, "item_weighting": t.signature()["item_weighting"]},
    }


def _keep_generated(samples: dict, doc_ids, annotation) -> dict:
    """Keep the generated documents only, in generation order, each with ``annotation(k)`` (k: its
    0-based place in ``doc_ids``) under the sample key."""
    order = {d: k for k, d in enumerate(doc_ids)}
    out = {}
    for task, rows in samples.items():
        kept = []
        for s in rows:
            k = order.get(int(s["doc_id"]))
            if k is None:
                continue
            kept.append({**s, ADAPTIVE_SAMPLE_KEY: {"order": k + 1, **annotation(k)}})
        kept.sort(key=lambda s: s[ADAPTIVE_SAMPLE_KEY]["order"])
        out[task] = kept
    return out


def annotate_multi_samples(samples: dict, o: MultiTaskOutcome) -> dict:
    """Keep the generated documents only, each with its order, joint item id, and per metric its
    information at selection and scaled score."""
    t = o.test
    metrics = [b.metric for b in o.bindings]
    # position of each generation in each metric's examinee (a metric records every one of them)
    info = {m: t.examinees[m].info_at_selection for m in metrics}
    scaled = {m: t.examinees[m].scores for m in metrics}
    return _keep_generated(samples, o.doc_ids, lambda k: {
        "item_id": t.item_ids[t.items[k]], "information": {m: info[m][k] for m in metrics},
        "scaled_score": {m: scaled[m][k] for m in metrics}})


def annotate_samples(samples: dict, o: TaskOutcome) -> dict:
    """Keep the administered documents only, each with its selection order and information."""
    e = o.test.examinee
    return _keep_generated(samples, o.doc_ids, lambda k: {
        "item_id": str(o.bank.item_ids[e.items[k]]), "information": e.info_at_selection[k],
        "scaled_score": e.scores[k]})

"""``backtest --history-models N[,N...]``: the history curve (issue 31; the driver is
:mod:`lm_eval_adaptive.engine.anytime.history_backtest`).

For each table and each N, the backtest's hold-out sets ranked with a bank from N of the other models
(0: no bank, the bank-free ranker; ``all``: every other model, the usual backtest; a bank from too few
models is not used, as in ``rank``: those runs are the bank-free ranker's): Kendall τ against
random sampling and shared random documents at the same spend, items, confident-pair accuracy and the
coverage of each model's full-task interval.
"""

from __future__ import annotations

from lm_eval_adaptive.atomic import write_json
from lm_eval_adaptive.engine.anytime.history_backtest import history_backtest, parse_history, pooled_history
from lm_eval_adaptive.engine.anytime.small_bank import MIN_BANK_MODELS
from lm_eval_adaptive.errors import InputError

__all__ = ["backtest_history"]


def backtest_history(tables, history_text: str, config, *, prices_for, console, json_path=None, plot=None) -> int:
    """Run the curve on ``tables`` (loaded response tables), print it on ``console``, write ``json_path``
    (one process: ``--jobs`` and ``--ray`` do not apply; no ``--plot``)."""
    history = parse_history(history_text)
    if plot:
        raise InputError("--plot draws the usual backtest; --history-models writes its curve with --json only")
    results = [history_backtest(t, config=config, history=history, prices=prices_for(t.models)) for t in tables]
    head = f"{'table':<28}{'N':>5}{'tau':>8}{'random':>8}{'shared':>8}{'items':>8}{'conf acc':>10}{'pairs':>7}{'coverage':>10}"
    console.print("history curve: τ of each N against random and shared random documents at the same spend")
    console.print(head)
    for r in results:
        for n, c in r["curve"].items():
            console.print(f"{r['table'][:27]:<28}{n:>5}{c['tau']:>8.3f}{c['random_tau']:>8.3f}"
                          f"{c['shared_random_tau']:>8.3f}{c['items']:>8.1f}{c['confident_accuracy']:>10.3f}"
                          f"{c['confident']:>7d}{c['coverage']:>10.3f}")
    pooled = pooled_history(results)
    for n, c in pooled.items():  # which mode ran, and why
        fell = (c.get("modes") or {}).get("bank-free", 0)
        if n != "0" and fell:
            console.print(f"N = {n}: {fell} of {sum(c['modes'].values())} runs bank-free: a bank from fewer than "
                          f"{MIN_BANK_MODELS} models is not used (rank and run --adaptive fall back alike)")
    if len(results) > 1:
        for n, c in pooled.items():
            console.print(f"{'pooled':<28}{n:>5}{c['tau']:>8.3f}{c['random_tau']:>8.3f}{c['shared_random_tau']:>8.3f}"
                          f"{c['items']:>8.1f}{c['confident_accuracy']:>10.3f}{c['confident_pairs']:>7d}"
                          f"{c['coverage']:>10.3f}")
    if json_path:
        for r in results:
            for c in r["curve"].values():
                c.pop("runs_detail", None)
        write_json(json_path, {"tables": results, "pooled": pooled})
        console.print(f"wrote {json_path}")
    return 0

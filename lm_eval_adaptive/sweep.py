"""Backtest sweeps: many tables' backtests at once, in local processes or on a Ray cluster.

A backtest splits into independent units, one per table × fold
(:func:`~lm_eval_adaptive.engine.evaluation.backtest.backtest_fold`): each calibrates its fold's bank
(and runs the bank's self-check, most of a fold's time), then ranks the hold-out set once per
seed. The seeds of a fold stay together because they share that bank and because the random
baseline spends the mean of the fold's adaptive runs. Every unit is a pure function of the
table, the plan and the fold, with its random streams seeded from (partition seed, fold,
seed), so a sweep gives bit-identical figures however its units are run:

- ``jobs=1``: one after another in this process (:func:`~lm_eval_adaptive.engine.evaluation.backtest.backtest`);
- ``jobs=N``: in a pool of N local processes (``concurrent.futures``, the ``forkserver``
  start method where there is one, so no thread of this process is forked);
- ``ray_address=...``: as Ray tasks (``ray.init(address=...)``; ``auto`` joins the running
  cluster, ``local`` starts one on this machine), one CPU each. Ray is an optional extra
  (``pip install 'lm-eval-adaptive[ray]'``), imported only here and only when asked for; the
  cluster's workers need this package installed too.

Only a result's ``seconds`` differs: the wall time of its table when run serially, else the
sum of its folds' times.

The joint-vs-separate backtest of several metric tables of one task
(:mod:`~lm_eval_adaptive.engine.evaluation.multi_backtest`) splits the same way, one unit per fold
(:func:`~lm_eval_adaptive.engine.evaluation.multi_backtest.multi_backtest_fold`), and
:func:`run_multi_backtest` runs its folds on the same process pool or Ray path.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from collections.abc import Callable, Mapping, Sequence

from threadpoolctl import threadpool_limits

from lm_eval_adaptive.data.prices import Price
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig
from lm_eval_adaptive.engine.evaluation.backtest import (
    BacktestResult,
    assemble_backtest,
    backtest,
    backtest_fold,
    plan_backtest,
)
from lm_eval_adaptive.engine.evaluation.multi_backtest import (
    assemble_multi_backtest,
    backtest_multi,
    multi_backtest_fold,
    plan_multi_backtest,
)
from lm_eval_adaptive.errors import InputError

__all__ = ["check_ray_address", "default_jobs", "import_ray", "run_backtests", "run_multi_backtest", "RAY_EXTRA"]

#: The optional extra that installs Ray.
RAY_EXTRA = "ray"

Progress = Callable[[int, int], None]


def default_jobs() -> int:
    """The CPUs this process may run on (its affinity where the system has one, else ``os.cpu_count()``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def run_backtests(tables: Sequence, *, config: BacktestConfig = BacktestConfig(),
                  prices: Sequence[Mapping[str, Price] | None] | None = None, jobs: int | None = None,
                  ray_address: str | None = None,
                  progress: Sequence[Progress | None] | None = None) -> list[BacktestResult]:
    """The backtest of each of ``tables`` (in order), its folds run as ``jobs`` local processes
    (default: :func:`default_jobs`; 1 runs them here, one after another) or, with ``ray_address``,
    as Ray tasks. ``prices`` holds one price mapping per table (None: default prices);
    ``progress`` one ``progress(done, total)`` callable per table, called for each of a fold's
    seeds as the fold finishes (folds of different tables finish interleaved)."""
    tables = list(tables)
    prices = list(prices) if prices is not None else [None] * len(tables)
    progress = list(progress) if progress is not None else [None] * len(tables)
    if not (len(prices) == len(progress) == len(tables)):
        raise ValueError("give one prices mapping and one progress callable per table")
    jobs = _checked_jobs(jobs)
    ray = import_ray() if ray_address is not None else None
    started = _ray_connect(ray, ray_address) if ray is not None else False  # a bad address fails before any work
    try:
        return _run_backtests(tables, config, prices, progress, jobs, ray)
    finally:
        if started:
            ray.shutdown()


def run_multi_backtest(tables: Mapping[str, object], *, config: BacktestConfig = BacktestConfig(),
                       spends: Sequence[float] = (1.0,), prices: Mapping[str, Price] | None = None,
                       item_weighting: str = "normalised", jobs: int | None = None, ray_address: str | None = None,
                       progress: Progress | None = None) -> dict:
    """:func:`~lm_eval_adaptive.engine.evaluation.multi_backtest.backtest_multi` of ``tables`` (metric name →
    response table of one task), its folds run as ``jobs`` local processes (default:
    :func:`default_jobs`; 1 runs them here, one after another) or, with ``ray_address``, as Ray
    tasks: the same figures, only ``seconds`` differs. ``progress(done, total)`` is called for each
    (seed, spend) of a fold as the fold finishes."""
    jobs = _checked_jobs(jobs)
    ray = import_ray() if ray_address is not None else None
    started = _ray_connect(ray, ray_address) if ray is not None else False
    try:
        t0 = time.perf_counter()
        plan = plan_multi_backtest(tables, config, spends=spends, prices=prices, item_weighting=item_weighting)
        plan_seconds = time.perf_counter() - t0
        if ray is None and (jobs == 1 or plan.n_folds == 1):  # here, one after another
            return backtest_multi(tables, config=config, spends=spends, prices=prices,
                                  item_weighting=item_weighting, progress=progress)
        units = [(0, f) for f in range(plan.n_folds)]
        outcomes = []
        for _, outcome in (_on_ray(ray, multi_backtest_fold, [tables], [plan], units) if ray is not None
                           else _in_processes(multi_backtest_fold, [tables], [plan], units, jobs)):
            outcomes.append(outcome)
            _advance(progress, plan, len(outcomes))
        return assemble_multi_backtest(tables, plan, outcomes, seconds=plan_seconds + sum(o.seconds for o in outcomes))
    finally:
        if started:
            ray.shutdown()


def _checked_jobs(jobs: int | None) -> int:
    jobs = default_jobs() if jobs is None else jobs
    if jobs < 1:
        raise InputError(f"--jobs must be at least 1, got {jobs}")
    return jobs


def _advance(progress: Progress | None, plan, folds_done: int) -> None:
    """Report one more finished fold of ``plan`` (``folds_done`` of them now): one call per run it holds."""
    if progress:
        per_fold = plan.runs // plan.n_folds
        for k in range((folds_done - 1) * per_fold, folds_done * per_fold):
            progress(k + 1, plan.runs)


def _run_backtests(tables, config, prices, progress, jobs, ray) -> list[BacktestResult]:
    plans, plan_seconds = [], []
    for t, p in zip(tables, prices):  # bad settings fail here, before any work
        t0 = time.perf_counter()
        plans.append(plan_backtest(t, config, p))
        plan_seconds.append(time.perf_counter() - t0)
    units = [(i, f) for i, plan in enumerate(plans) for f in range(plan.n_folds)]
    if ray is None and (jobs == 1 or len(units) == 1):  # here, one after another (a pool would only cost)
        return [backtest(t, config=config, prices=p, progress=g) for t, p, g in zip(tables, prices, progress)]
    outcomes: list[list] = [[] for _ in tables]
    for i, outcome in (_on_ray(ray, backtest_fold, tables, plans, units) if ray is not None
                       else _in_processes(backtest_fold, tables, plans, units, jobs)):
        outcomes[i].append(outcome)
        _advance(progress[i], plans[i], len(outcomes[i]))
    return [assemble_backtest(t, plan, outs, seconds=s + sum(o.seconds for o in outs))
            for t, plan, outs, s in zip(tables, plans, outcomes, plan_seconds)]


def _pool_context():
    """``forkserver`` where the system has it (no fork of a process that may run threads), else ``spawn``."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    # the server (started once per process) imports the engine, so each worker forked from it starts
    # in a fraction of a second instead of importing NumPy, SciPy and pandas again (seconds)
    ctx.set_forkserver_preload(["__main__", backtest_fold.__module__, multi_backtest_fold.__module__])
    return ctx


def _one_thread_each() -> None:
    """A pool worker's start: one BLAS/OpenMP thread, as Ray gives each task, so N processes do not
    run N threads each on N CPUs."""
    threadpool_limits(1)


def _in_processes(fold, tables, plans, units, jobs):
    """(table index, fold outcome) of each unit, ``fold(table, plan, f)``, as it finishes, run in a pool of
    ``jobs`` processes."""
    with ProcessPoolExecutor(max_workers=min(jobs, len(units)), mp_context=_pool_context(),
                             initializer=_one_thread_each) as pool:
        pending = {pool.submit(fold, tables[i], plans[i], f): i for i, f in units}
        try:
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    yield pending.pop(fut), fut.result()
        finally:  # an error (or an interrupt): start no further unit
            for fut in pending:
                fut.cancel()


def import_ray():
    """The ``ray`` module, or an :class:`InputError` naming the extra that installs it."""
    try:
        import ray
    except ImportError as e:
        raise InputError(f"--ray needs Ray, an optional extra: pip install 'lm-eval-adaptive[{RAY_EXTRA}]' "
                         f"({e})") from None
    return ray


_RAY_ADDRESS = re.compile(r"(ray://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):([0-9]{1,5})")


def check_ray_address(address: str) -> None:
    """Refuse, before any work, a ``--ray`` value that is not a Ray address: ``auto``, ``local``,
    ``HOST:PORT`` or ``ray://HOST:PORT``."""
    m = _RAY_ADDRESS.fullmatch(str(address).strip())
    if str(address).strip() in ("auto", "local") or (m and 1 <= int(m.group(3)) <= 65535):
        return
    raise InputError(f"--ray {address!r} is not a Ray address: give auto (the running cluster), local "
                     f"(start one on this machine), HOST:PORT or ray://HOST:PORT")


def _ray_connect(ray, address: str) -> bool:
    """Join the Ray instance this process already runs (False), else ``ray.init(address=address)``
    (True: shut it down at the end); InputError naming the address when that fails."""
    check_ray_address(address)
    if ray.is_initialized():
        return False
    try:
        ray.init(address=address)
    except (ConnectionError, ValueError, RuntimeError, TimeoutError) as e:
        raise InputError(f"--ray {address}: cannot join or start a Ray cluster there ({' '.join(str(e).split())})") \
            from None
    return True


def _on_ray(ray, fold, tables, plans, units):
    """(table index, fold outcome) of each unit, ``fold(table, plan, f)``, as it finishes, run as Ray tasks
    (on the instance :func:`_ray_connect` joined)."""
    fold = ray.remote(num_cpus=1)(fold)
    table_refs = [ray.put(t) for t in tables]  # each table sent once, shared by its folds
    pending = {fold.remote(table_refs[i], plans[i], f): i for i, f in units}
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                yield pending.pop(ref), ray.get(ref)
    finally:
        for ref in pending:
            ray.cancel(ref)

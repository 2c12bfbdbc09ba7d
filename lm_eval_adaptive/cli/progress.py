"""Progress displays of the long commands, on stderr (rich): ``backtest``, ``run --adaptive``, and the
scoring of a named table (:func:`table_progress`, the data layer's progress hook).

On a terminal each is a live display; on anything else (a log file, a pipe, a captured stream)
it prints a plain line now and then instead (at the end of each fold; at every tenth of a
task's maximum length), so logs stay readable. ``--no-progress`` turns both off. Results stay
on stdout, untouched.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from typing import TYPE_CHECKING, Callable, Iterator

from lm_eval_adaptive.atomic import atomic_write
from lm_eval_adaptive.cli.report import plot_adaptive_run
from lm_eval_adaptive.display import shown

if TYPE_CHECKING:
    from lm_eval_adaptive.harness.task_loop import TaskProgress

__all__ = ["BacktestProgress", "AdaptiveRunProgress", "table_progress"]


@contextlib.contextmanager
def table_progress(description: str, total: int) -> Iterator[Callable[[], None]]:
    """A transient bar on stderr while the data layer scores a table (a
    :data:`~lm_eval_adaptive.data.progress.ProgressHook`), only when stderr is a terminal; gives
    ``advance()``."""
    if not sys.stderr.isatty():
        yield lambda: None
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import Progress

    bar = Progress(console=Console(stderr=True, markup=False, emoji=False), transient=True)
    bar.start()
    try:
        task = bar.add_task(escape(shown(description)), total=total)
        yield lambda: bar.advance(task)
    finally:
        bar.stop()


class BacktestProgress:
    """One bar over every table × fold × seed of a backtest.

    ``with BacktestProgress(console, tables, folds, seeds, enabled=...) as prog:`` then, per table,
    ``backtest(..., progress=prog.table(i, name))`` (or all tables' callables at once to
    :func:`~lm_eval_adaptive.sweep.run_backtests`, whose folds of different tables finish
    interleaved). A fold's seeds are reported when the fold is done; a small table may run
    fewer folds than asked (its first report says how many)."""

    def __init__(self, console, n_tables: int, folds: int, seeds: int, *, enabled: bool = True):
        self.console = console
        self.live = enabled and console.is_terminal
        self.lines = enabled and not console.is_terminal
        self.n_tables, self.per_table, self.seeds = n_tables, folds * seeds, seeds
        self.total = n_tables * folds * seeds
        self.done: dict = {}  # runs done so far of each table
        self._progress = self._task = None
        self.t0 = time.perf_counter()

    def __enter__(self):
        if self.live:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                                      TextColumn("runs (tables × folds × seeds)"), TimeElapsedColumn(),
                                      TimeRemainingColumn(), console=self.console, transient=True)
            self._progress.__enter__()
            self._task = self._progress.add_task("backtest", total=self.total)
        return self

    def table(self, index: int, name: str):
        """The ``progress(done, total)`` callable of table ``index`` (0-based) named ``name``."""
        label = f"backtest {index + 1}/{self.n_tables} {shown(name)}"
        state = {"adjusted": False}

        def progress(done: int, total: int) -> None:
            if not state["adjusted"]:  # fewer folds fit this table than asked: the overall total shrinks
                self.total -= self.per_table - total
                state["adjusted"] = True
            self.done[index] = done
            completed = sum(self.done.values())
            if self._progress is not None:
                self._progress.update(self._task, description=label, completed=completed, total=self.total)
            elif self.lines and (done % self.seeds == 0 or done == total):
                self.console.print(f"{label}: fold {math.ceil(done / self.seeds)} of {math.ceil(total / self.seeds)} "
                                   f"done ({completed}/{self.total} runs, "
                                   f"{time.perf_counter() - self.t0:.0f} s)", highlight=False, soft_wrap=True)

        return progress

    def __exit__(self, *exc):
        if self._progress is not None:
            self._progress.__exit__(*exc)


class AdaptiveRunProgress:
    """The display of ``run --adaptive`` (a :class:`~lm_eval_adaptive.harness.task_loop.RunDisplay`): per task,
    documents so far of the most the test may give, θ̂ ± SE, the estimated full-task metric with
    its 95% interval and the spend (a task with no bank: documents answered of the task's, and the mean with
    its anytime-valid interval; no θ̂); then, with ``plot`` (a file, or a callable of the results file
    giving one), the plot of θ̂ and its interval as documents accrued (:func:`~.report.plot_adaptive_run`)."""

    def __init__(self, console, *, enabled: bool = True, plot=None):
        self.console = console
        self.live = enabled and console.is_terminal
        self.lines = enabled and not console.is_terminal
        self.plot = plot
        self._progress = None
        self._tasks: dict = {}
        self._said: dict = {}
        self.written = None  # the plot file written, if any

    # the display is started at the first update (after the tasks are loaded) and stopped at done()
    def _start(self):
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self._progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                                  TextColumn("{task.fields[state]}", markup=False), TimeElapsedColumn(),
                                  console=self.console, transient=False)
        self._progress.__enter__()

    def _stop(self):
        if self._progress is not None:
            self._progress.__exit__(None, None, None)
            self._progress = None

    @staticmethod
    def state(p: TaskProgress) -> str:
        """θ̂ ± SE, the estimate with its interval, the spend (and the stop) of ``p`` as one line."""
        budget = f" of ${p.budget:g}" if p.budget is not None else ""
        stop = f"; stopped: {p.stopped_because}" if p.stopped_because else ""
        if not p.items:
            return f"no document yet; ${p.spent:.4f}{budget}{stop}"
        if p.mode == "bank-free":  # no bank: no θ̂, no SE; the mean of the documents in random order
            return (f"{p.metric} = {p.estimate:.4f} [{p.lower:.4f}, {p.upper:.4f}] (width {p.upper - p.lower:.4f}, "
                    f"valid whenever it stops); ${p.spent:.4f}{budget}{stop}")
        return (f"θ̂ {p.theta:+.2f} ± {p.se:.2f}; {p.metric} ≈ {p.estimate:.4f} [{p.lower:.4f}, {p.upper:.4f}]; "
                f"${p.spent:.4f}{budget}{stop}")

    def update(self, p: TaskProgress) -> None:
        if self.live:
            if self._progress is None:
                self._start()
            limit = p.task_docs if p.mode == "bank-free" else p.max_items  # bank-free: documents of the task
            if p.task not in self._tasks:
                self._tasks[p.task] = self._progress.add_task(shown(p.task), total=limit, state="")
            total = p.items if p.stopped_because else limit
            self._progress.update(self._tasks[p.task], completed=p.items, total=total, state=shown(self.state(p)))
        elif self.lines:  # the start, each tenth of the maximum length, the stop
            step = max(1, math.ceil(p.max_items / 10))
            last = self._said.get(p.task)  # items at the last line; None: none yet; -1: the stop was said
            if last == -1:
                return
            if p.stopped_because or last is None or p.items // step > last // step:
                self._said[p.task] = -1 if p.stopped_because else p.items
                self.console.print(f"{p.task}: {self.count(p)}; {self.state(p)}",
                                   highlight=False, soft_wrap=True)  # one step, one line

    @staticmethod
    def count(p: TaskProgress) -> str:
        """Documents so far: of the most the test may give, or with no bank the documents answered of the task's."""
        if p.mode == "bank-free":
            return f"{p.items} of {p.task_docs} documents answered (random order, bank-free)"
        return f"{p.items}/{p.max_items} documents"

    def done(self, results: dict, results_file) -> None:
        self._stop()
        path = self.plot(results_file) if callable(self.plot) else self.plot
        if path:
            from lm_eval_adaptive.harness.result_blocks import metric_blocks  # a multi-metric task: a panel per metric

            panels = dict(metric_blocks(results.get("adaptive") or {}))
            atomic_write(path, lambda f: plot_adaptive_run(f, panels,
                                                           title=_model_of(results)))
            self.written = path
            self.console.print(f"wrote {path}", highlight=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._stop()


def _model_of(results: dict) -> str:
    """The model a harness results dict is of: its ``model=``/``pretrained=`` argument, else its type."""
    cfg = results.get("config") or {}
    args = cfg.get("model_args")
    if isinstance(args, str):
        args = dict(kv.split("=", 1) for kv in args.split(",") if "=" in kv)
    if isinstance(args, dict) and (args.get("model") or args.get("pretrained")):
        return str(args.get("model") or args.get("pretrained"))
    return str(cfg.get("model") or "")

"""CPU of ``rank --dry-run`` (bench_dry_run.py's four-model case) by part, in this process: the main process's
before the simulated runs (imports, settings, the run set up as the real run would) and the worker processes'
(the simulated runs), from ``getrusage``. On a busy machine its wall time says little; the CPU does: on ``c``
idle cores the wall time is about main + workers / min(c, 8).

usage: python benchmarks/dry_run_cpu.py   (needs LM_EVAL_ADAPTIVE_DATA or ../shared/data; PYTHONPATH picks the checkout)
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_dry_run import COMMANDS  # noqa: E402


def cpu(who) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def main() -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    t = time.perf_counter()
    import lm_eval_adaptive.live.cost_forecast as cost_forecast
    from lm_eval_adaptive.cli.main import main as cli

    runs = cost_forecast.forecast_ranking
    mark = {}

    def timed(*a, **k):  # the forecast of the run set up: the simulated runs
        mark["setup"], mark["t"] = cpu(resource.RUSAGE_SELF), time.perf_counter()
        out = runs(*a, **k)
        mark["sim_wall"] = time.perf_counter() - mark["t"]
        return out

    cost_forecast.forecast_ranking = timed
    argv = next(v for k, v in COMMANDS.items() if k.startswith("rank"))
    with open(os.devnull, "w") as dn, contextlib.redirect_stdout(dn), contextlib.redirect_stderr(dn):
        code = cli(argv)
    if code != 0:
        sys.exit(f"exit {code}")
    main_cpu, workers = cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN)
    print(f"rank --dry-run: main process {mark['setup']:.1f} s CPU before the simulated runs ({main_cpu:.1f} s in "
          f"all), worker processes {workers:.1f} s CPU; wall {time.perf_counter() - t:.1f} s (the simulated runs "
          f"{mark['sim_wall']:.1f} s); load {os.getloadavg()[0]:.1f}; on 2 idle cores about "
          f"{main_cpu + workers / 2:.1f} s")


if __name__ == "__main__":
    main()

"""Which modules the settings of a ``rank`` run pass through (issue 29 item 3: settings resolved once, at the edge).

Runs ``rank`` in this process with the settings class (``live/session.LiveSettings``) instrumented: every read
of one of its fields is recorded with the module that read it, every write after construction with the module
that wrote it; and every call of a function that *resolves* a setting (prices, model specs, banks, the score
range, the metadata) with the module that called it. Three cases:

* ``dry-run``: ``rank --dry-run`` of the four-model case of ``bench_dry_run.py`` (shipped BLEU bank, real
  task; the forecast's simulated runs cut to 4, which the settings' path does not depend on);
* ``live``: ``rank`` of two systems against the replay endpoint under a small cap, then
* ``resume``: ``rank --resume`` of that run with a new ``--budget-usd`` (the journal's settings and a cap change).

Printed per case: the modules that read the settings, the path (the modules in the order they first read, consecutive repeats merged), its climbs (a
step to a higher layer: cli > live > harness/replay/sweep > engine > data) and returns (a step back to a
module already on the path); the same with the modules of the resolvers called on the way (the modules the
settings' values pass through, the issue's measure), the modules that mutate the settings, the resolver calls, and the functions below
``cli/`` that re-resolve a setting (a resolver called inside a function holding the settings that is not one of
the resolution functions the command line calls, :data:`RESOLUTION`).

usage: python benchmarks/settings_path.py [--cases dry-run,live,resume] [--json FILE]
(needs LM_EVAL_ADAPTIVE_DATA or ../shared/data). Compare two checkouts by PYTHONPATH (before → after).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sys
import tempfile
from dataclasses import fields, is_dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TASKS = str(REPO / "task_configs")
FOUR = ["Gemini-1.5-Pro", "Llama3-70B", "Aya23", "Unbabel-Tower70B"]
PKG = "lm_eval_adaptive"

#: (module, function) pairs that resolve a setting from what the command line gave
RESOLVERS = [
    ("lm_eval_adaptive.data.price_map", "price_policy"),
    ("lm_eval_adaptive.data.price_map", "resolve_prices"),
    ("lm_eval_adaptive.live.session", "live_prices"),
    ("lm_eval_adaptive.harness.scorer", "parse_model_spec"),
    ("lm_eval_adaptive.harness.scorer", "parse_metadata"),
    ("lm_eval_adaptive.harness.binding", "check_banks"),
    ("lm_eval_adaptive.harness.bank_source", "parse_banks"),
    ("lm_eval_adaptive.harness.bank_free_run", "parse_score_range"),
    ("lm_eval_adaptive.harness.bank_free_run", "score_range_for"),
]


def layer(module: str) -> int:
    """cli 5, live 4, harness/replay/sweep 3, engine 2, data 1, the bottom modules 0."""
    part = module.split(".")[1] if module.startswith(PKG + ".") else ""
    return {"cli": 5, "live": 4, "harness": 3, "replay": 3, "sweep": 3, "engine": 2, "data": 1}.get(part, 0)


#: The functions below cli/ that the command line calls to resolve (or check) the settings: a resolution made
#: inside one of them is made at the edge; one made inside another function holding the settings (a session,
#: the forecast, the report) re-resolves a setting below the edge.
RESOLUTION = {"resolved_settings", "resumed_settings", "check_before_loading", "check_settings", "check_live_settings",
              "live_prices", "open_run"}


class Trace:
    def __init__(self):
        self.reads: list[tuple[str, str]] = []  # (module, field), in order
        self.writes: list[tuple[str, str]] = []
        self.resolutions: list[tuple[str, str, str | None]] = []  # (function, caller module, consumer or None)
        self.flow: list[str] = []  # the modules the settings' values pass through: readers and resolvers, in order

    def summary(self) -> dict:
        readers = list(dict.fromkeys(m for m, _ in self.reads))
        path = []
        for m, _ in self.reads:
            if not path or path[-1] != m:
                path.append(m)
        climbs, returns = _climbs_returns(path)
        flow = [m for k, m in enumerate(self.flow) if k == 0 or self.flow[k - 1] != m]
        flow_climbs, flow_returns = _climbs_returns(flow)
        writers = sorted({m for m, _ in self.writes})
        below = sorted({f"{f} in {c}" for f, _, c in self.resolutions if c})
        counts = {}
        for f, _, _ in self.resolutions:
            counts[f] = counts.get(f, 0) + 1
        return {"modules": len(readers), "readers": readers, "path_steps": len(path) - 1, "climbs": climbs,
                "returns": returns, "flow_modules": list(dict.fromkeys(flow)), "flow_steps": len(flow) - 1,
                "flow_climbs": flow_climbs, "flow_returns": flow_returns, "mutated_in": writers,
                "mutations": sorted({f"{m}: {k}" for m, k in self.writes}),
                "resolutions_below_cli": below,
                "resolution_calls": counts}


def _climbs_returns(path: list[str]) -> tuple[int, int]:
    """(steps to a higher layer, steps back to a module already on the path) of a path of modules."""
    climbs = sum(layer(b) > layer(a) for a, b in zip(path, path[1:]))
    returns = sum(b in path[:k + 1] for k, b in enumerate(path[1:]))
    return climbs, returns


def _caller(depth: int = 2) -> tuple[str, object]:
    f = sys._getframe(depth)
    return f.f_globals.get("__name__", "?"), f.f_code


def _consumer(cls) -> str | None:
    """The function below cli/ on the current call stack (up to the first cli/ frame) that holds a settings
    object and is not one of the :data:`RESOLUTION` functions: where a setting is re-resolved below the edge."""
    f = sys._getframe(2)
    while f is not None:
        mod = f.f_globals.get("__name__", "")
        if mod.startswith(PKG + ".cli"):
            return None
        if mod.startswith(PKG) and f.f_code.co_name not in RESOLUTION and any(
                isinstance(v, cls) for v in list(f.f_locals.values())):
            return f"{mod.removeprefix(PKG + '.')}.{f.f_code.co_qualname}"
        f = f.f_back
    return None


@contextlib.contextmanager
def traced(trace: Trace):
    """Instrument LiveSettings and the resolvers while the block runs."""
    import importlib

    from lm_eval_adaptive.live import session

    cls = session.LiveSettings
    assert is_dataclass(cls)
    names = {f.name for f in fields(cls)}
    old_get, old_set = cls.__getattribute__, cls.__setattr__

    def get(self, name):
        if name in names:
            mod, code = _caller()
            if mod.startswith(PKG):
                trace.reads.append((mod, name))
                trace.flow.append(mod)
        return old_get(self, name)

    def set_(self, name, value):
        mod, code = _caller()
        if mod.startswith(PKG) and not (code.co_name == "__init__" and code.co_filename.startswith("<")):
            trace.writes.append((mod, name))
        return old_set(self, name, value)

    cls.__getattribute__, cls.__setattr__ = get, set_
    patched = []
    for modname, fname in RESOLVERS:
        try:
            mod = importlib.import_module(modname)
        except ImportError:
            continue
        fn = getattr(mod, fname, None)
        if fn is None:
            continue

        @functools.wraps(fn)
        def wrapper(*a, __fn=fn, __name=fname, **k):
            trace.resolutions.append((__name, _caller()[0], _consumer(cls)))
            trace.flow.append(__fn.__module__)
            return __fn(*a, **k)

        for m in list(sys.modules.values()):  # every module that imported it by name
            if getattr(m, "__name__", "").startswith(PKG) and getattr(m, fname, None) is fn:
                setattr(m, fname, wrapper)
                patched.append((m, fname, fn))
    try:
        yield trace
    finally:
        cls.__getattribute__, cls.__setattr__ = old_get, old_set
        for m, fname, fn in patched:
            setattr(m, fname, fn)


def run_cases(cases) -> dict:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import lm_eval_adaptive.cli.main as cli_main
    import lm_eval_adaptive.live.cost_forecast as cost_forecast

    cost_forecast.RANKING_DRAWS = 4  # the settings' path does not depend on how many runs are simulated
    common = ["--tasks", "wmt24_en-de", "--include_path", TASKS, "--apply_chat_template", "--bank",
              "wmt24_en-de.bleu", "--no-progress", "--price", "default=1,3"]
    out = {}
    with tempfile.TemporaryDirectory() as d, contextlib.ExitStack() as stack:
        run_dir = str(Path(d) / "run")
        argvs = {
            "dry-run": ["rank", "--models", *(f"litellm:model=openai/{m}" for m in FOUR), *common,
                        "--budget-usd", "0.05", "--dry-run"],
            "live": ["rank", "--models", *(f"litellm:model=openai/{m}" for m in FOUR[2:]), *common,
                     "--budget-usd", "0.004", "--output", run_dir],
            "resume": ["rank", "--resume", run_dir, "--budget-usd", "0.006", "--no-progress"],
        }
        if {"live", "resume"} & set(cases):
            from lm_eval_adaptive.replay.server import ReplayServer

            srv = stack.enter_context(ReplayServer())
            os.environ["OPENAI_API_BASE"], os.environ["OPENAI_API_KEY"] = srv.url, "replay"
        for name in cases:
            trace = Trace()
            with traced(trace), contextlib.redirect_stdout(open(os.devnull, "w")):
                code = cli_main.main(argvs[name])
            if code not in (0, 3):
                raise SystemExit(f"{name}: exit {code}")
            out[name] = trace.summary()
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--cases", default="dry-run,live,resume")
    p.add_argument("--json", default=None, help="also write the summaries here")
    args = p.parse_args()
    res = run_cases(args.cases.split(","))
    for name, s in res.items():
        short = [m.removeprefix(PKG + ".") for m in s["readers"]]
        print(f"{name}: the settings are read in {s['modules']} modules ({', '.join(short)}); path of "
              f"{s['path_steps']} steps, {s['climbs']} climbs back up, {s['returns']} returns; with the resolvers, "
              f"they pass through {len(s['flow_modules'])} modules ({s['flow_steps']} steps, {s['flow_climbs']} "
              f"climbs, {s['flow_returns']} returns); mutated in "
              f"{len(s['mutated_in'])} module(s) {s['mutations']}; re-resolved below cli: "
              f"{s['resolutions_below_cli'] or 'none'}; resolver calls {s['resolution_calls']}")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()

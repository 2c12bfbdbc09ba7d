"""The layout's rules, checked: imports point one way and nothing below cli/ imports argparse or rich (the
import-linter contracts in .importlinter, with one per engine subpackage), nothing below cli/ prints, no module
imports another module's private name, no modules import each other (no cycle), no module is over 600 lines
and no class over 400, and the engine is its named subpackages."""

from __future__ import annotations

import ast
import graphlib
import os
import shutil
import subprocess
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "lm_eval_adaptive"


def _private_imports(path: Path, root: Path = REPO) -> list[str]:
    bad = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lm_eval_adaptive"):
            bad += [f"{path.relative_to(root)}:{node.lineno}: {node.module}.{a.name}"
                    for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    return bad


def test_no_module_imports_a_private_name_of_another():
    files = [*PACKAGE.rglob("*.py"), *(REPO / "task_configs").rglob("*.py"), *(REPO / "benchmarks").glob("*.py"),
             *(REPO / "tests").glob("*.py")]
    bad = [b for f in files for b in _private_imports(f)]
    assert not bad, "private names imported across modules:\n" + "\n".join(bad)


def test_the_private_import_check_sees_one(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("from lm_eval_adaptive.live.journal import JOURNAL_NAME, _parse\nfrom os import _exit\n")
    assert _private_imports(f, tmp_path) == ["x.py:1: lm_eval_adaptive.live.journal._parse"]


def _is_private(name: str) -> bool:
    return len(name) > 1 and name.startswith("_") and not name.startswith("__")


def _engine_private_names() -> set[str]:
    """Private attributes (``self._x``), functions, classes and module names the engine defines."""
    names = set()
    for f in (PACKAGE / "engine").rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text(), filename=str(f))):
            if (isinstance(node, ast.Attribute) and _is_private(node.attr) and isinstance(node.value, ast.Name)
                    and node.value.id in ("self", "cls")):
                names.add(node.attr)
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and _is_private(node.name):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and _is_private(node.id):
                names.add(node.id)
    return names


def _private_engine_uses(path: Path, private: set[str], root: Path = REPO) -> list[str]:
    """``obj._name`` where ``_name`` is private to the engine and ``obj`` is not ``self``/``cls``."""
    bad = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if (isinstance(node, ast.Attribute) and node.attr in private
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
            bad.append(f"{path.relative_to(root)}:{node.lineno}: .{node.attr}")
    return bad


def test_nothing_outside_the_engine_reads_or_writes_its_private_state():
    private = _engine_private_names()
    assert {"_next", "_pending", "_rng", "_mask", "_stopped_because", "_ask_for"} <= private
    files = [f for f in PACKAGE.rglob("*.py") if (PACKAGE / "engine") not in f.parents]
    files += [*(REPO / "tests").glob("*.py"), *(REPO / "benchmarks").glob("*.py")]
    bad = [b for f in files for b in _private_engine_uses(f, private)]
    assert not bad, "engine internals used outside the engine (use its public methods):\n" + "\n".join(bad)


def test_the_private_use_check_sees_one(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("ranker._next['a'] = None\nself._next = 1\nranker.rng.bit_generator.state\n")
    assert _private_engine_uses(f, {"_next"}, tmp_path) == ["x.py:1: ._next"]


def test_import_contract_holds():
    assert shutil.which("lint-imports"), "import-linter (the test extra) is not installed"
    r = subprocess.run(["lint-imports", "--config", str(REPO / ".importlinter")], cwd=REPO,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "10 kept, 0 broken" in r.stdout


def _import_cycle(graph) -> list[str] | None:
    """One import cycle among ``graph``'s modules (grimp counts imports under TYPE_CHECKING too), or None."""
    try:
        graphlib.TopologicalSorter({m: graph.find_modules_directly_imported_by(m) for m in graph.modules}).prepare()
    except graphlib.CycleError as e:
        return list(e.args[1])
    return None


def test_no_import_cycle():
    graph = grimp.build_graph("lm_eval_adaptive")
    assert "lm_eval_adaptive.engine.ranking.pairs.rules" in graph.modules
    cycle = _import_cycle(graph)
    assert cycle is None, "modules import each other: " + " <- ".join(cycle)


def test_the_cycle_check_sees_one():
    graph = grimp.build_graph("lm_eval_adaptive")
    graph.add_import(importer="lm_eval_adaptive.engine.cat.stopping", imported="lm_eval_adaptive.engine.cat.adaptive_test")
    cycle = _import_cycle(graph)
    assert cycle is not None and {"lm_eval_adaptive.engine.cat.stopping", "lm_eval_adaptive.engine.cat.adaptive_test"} <= set(cycle)


# ----------------------------------------------------------------------------- printing
#: Modules below cli/ that print: none (issue 20 moved live/'s printing into cli/: cli/live_output.py,
#: cli/refresh.py, cli/terminal.py). A module added here must say why; the check fails for a listed
#: module that prints nothing.
STILL_PRINTING: set = set()
#: Not printing, but owning the streams: the bottom layer's redaction replaces sys.stdout/sys.stderr
#: with redacting ones and writes an uncaught exception's traceback, as Python's own hook would.
STREAM_OWNERS = {"lm_eval_adaptive/redaction.py"}

_PRINTING_CALLS = ("print", "pprint", "print_exc", "print_exception", "print_stack", "print_tb", "print_json")


def _prints(path: Path, root: Path = REPO) -> list[str]:
    """Every place ``path`` prints: ``print(...)``; any ``x.print(...)`` (a rich console's, a table's) or
    ``x.log(...)`` of a console; traceback/pprint printers; ``sys.stdout``/``sys.stderr`` (or their
    ``__stdout__``/``__stderr__``) named at all; ``os.write`` to fd 1 or 2."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        what = None
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else None
            if name in _PRINTING_CALLS:
                what = ast.unparse(fn)
            elif name == "log" and isinstance(fn, ast.Attribute) and "console" in ast.unparse(fn.value).lower():
                what = ast.unparse(fn)
            elif (ast.unparse(fn) == "os.write" and node.args and isinstance(node.args[0], ast.Constant)
                  and node.args[0].value in (1, 2)):
                what = "os.write"
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "sys"
              and node.attr in ("stdout", "stderr", "__stdout__", "__stderr__")):
            what = f"sys.{node.attr}"
        if what:
            found.append((node.lineno, f"{path.relative_to(root)}:{node.lineno}: {what}"))
    return [text for _, text in sorted(found)]


def _printing_modules(package: Path, root: Path) -> dict[str, list[str]]:
    """Each module of ``package`` outside cli/ that prints -> where."""
    out = {}
    for f in sorted(package.rglob("*.py")):
        if (package / "cli") in f.parents:
            continue
        found = _prints(f, root)
        if found:
            out[f.relative_to(root).as_posix()] = found
    return out


def _printing_violations(package: Path, root: Path, allowed: set = STILL_PRINTING) -> list[str]:
    printing = _printing_modules(package, root)
    bad = [line for m, lines in printing.items() if m not in allowed | STREAM_OWNERS for line in lines]
    bad += [f"{m}: listed in STILL_PRINTING but prints nothing any more: delete it from the list"
            for m in sorted(allowed) if (root / m).is_file() and m not in printing]
    return bad


def test_nothing_below_cli_prints():
    bad = _printing_violations(PACKAGE, REPO)
    assert not bad, ("only cli/ prints; below it, return what to show, or take a callback (a progress hook, a "
                     "note) the command gives:\n" + "\n".join(bad))


def test_the_print_check_sees_each_way_of_printing(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("import os, sys, traceback\n"
                 "print('a')\n"                       # 2
                 "sys.stderr.write('b')\n"            # 3
                 "console.print(table)\n"             # 4
                 "self.console.log('c')\n"            # 5
                 "traceback.print_exc()\n"            # 6
                 "out = sys.stdout\n"                 # 7
                 "os.write(2, b'd')\n"                # 8
                 "log.info('not printing'); f.write('e'); os.write(fd, b'f'); s = 'print(x)'\n")
    assert [line.split(": ", 1)[0] for line in _prints(f, tmp_path)] == [f"x.py:{n}" for n in range(2, 9)]


def test_the_print_check_fails_for_a_planted_print_and_a_stale_allowance(tmp_path):
    pkg = tmp_path / "lm_eval_adaptive"
    for rel, text in {"data/planted.py": "def f():\n    print('hello')\n",
                      "cli/main.py": "print('the command line may')\n",
                      "live/session.py": "console.print('still allowed')\n",
                      "live/leaderboard.py": "x = 1\n",  # listed, prints no more
                      "redaction.py": "import sys\nsys.stderr.write('traceback')\n"}.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    allowed = {"lm_eval_adaptive/live/session.py", "lm_eval_adaptive/live/leaderboard.py"}
    bad = _printing_violations(pkg, tmp_path, allowed)
    assert bad == ["lm_eval_adaptive/data/planted.py:2: print",
                   "lm_eval_adaptive/live/leaderboard.py: listed in STILL_PRINTING but prints nothing any more: "
                   "delete it from the list"]


def test_the_import_contract_fails_for_argparse_or_rich_below_cli(tmp_path):
    shutil.copytree(PACKAGE, tmp_path / "lm_eval_adaptive", ignore=shutil.ignore_patterns("__pycache__", "banks"))
    (tmp_path / "lm_eval_adaptive" / "data" / "planted.py").write_text("import argparse\n")
    (tmp_path / "lm_eval_adaptive" / "harness" / "planted.py").write_text("def f():\n    from rich.table import Table\n")
    shutil.copy(REPO / ".importlinter", tmp_path / ".importlinter")
    r = subprocess.run(["lint-imports", "--config", str(tmp_path / ".importlinter")], cwd=tmp_path,
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert r.returncode != 0 and "9 kept, 1 broken" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
    assert "lm_eval_adaptive.data.planted -> argparse" in r.stdout
    assert "lm_eval_adaptive.harness.planted -> rich" in r.stdout


# ----------------------------------------------------------------------------- log lines
#: Modules that still attach the display filter to their own logger; the package does it for every
#: logger now (display.install_shown_logs), so these lines are redundant: delete them (and the entry).
STILL_ADDING_THE_LOG_FILTER = {
    "lm_eval_adaptive/harness/scorer.py", "lm_eval_adaptive/harness/task_loop.py",
    "lm_eval_adaptive/live/driver.py", "lm_eval_adaptive/live/ledger.py", "lm_eval_adaptive/live/session.py",
    "lm_eval_adaptive/live/journal.py",
}


def test_one_place_shows_every_log_line_escaped():
    adding = {f.relative_to(REPO).as_posix() for f in PACKAGE.rglob("*.py")
              if "addFilter(SHOWN_LOG_FILTER)" in f.read_text() and f.name != "display.py"}
    assert adding <= STILL_ADDING_THE_LOG_FILTER, ("display.install_shown_logs serves every logger of the "
                                                   f"package; no module adds the filter: {sorted(adding - STILL_ADDING_THE_LOG_FILTER)}")


# ----------------------------------------------------------------------------- module size
#: No module of the package may pass this many lines (issue 20 split the edge by job, issue 29 the engine).
MAX_MODULE_LINES = 600
#: No class of the package may pass this many lines (its ``class`` line to its last; issue 29).
MAX_CLASS_LINES = 400


def _too_long(root: Path) -> tuple[dict, dict]:
    """Modules over MAX_MODULE_LINES and classes over MAX_CLASS_LINES under ``root``, with their sizes."""
    modules, classes = {}, {}
    for f in sorted(root.rglob("*.py")):
        text = f.read_text(encoding="utf-8")
        name = f.relative_to(root.parent).as_posix()
        if (n := len(text.splitlines())) > MAX_MODULE_LINES:
            modules[name] = n
        for node in ast.walk(ast.parse(text, filename=str(f))):
            if isinstance(node, ast.ClassDef) and (n := node.end_lineno - node.lineno + 1) > MAX_CLASS_LINES:
                classes[f"{name}:{node.name}"] = n
    return modules, classes


def test_no_module_is_over_600_lines_and_no_class_over_400():
    modules, classes = _too_long(PACKAGE)
    assert not modules, f"modules over {MAX_MODULE_LINES} lines (split them by job): {modules}"
    assert not classes, f"classes over {MAX_CLASS_LINES} lines (give them parts): {classes}"


def test_the_size_check_sees_a_long_module_and_a_long_class(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "long.py").write_text("x = 1\n" * 601)
    (pkg / "big.py").write_text("class Big:\n" + "    x = 1\n" * 400)
    (pkg / "fine.py").write_text("class Fine:\n" + "    x = 1\n" * 399)
    assert _too_long(pkg) == ({"pkg/long.py": 601}, {"pkg/big.py:Big": 401})


# ----------------------------------------------------------------------------- the engine's rooms
#: The engine's subpackages, in the order they may use each other (docs/architecture.md); anytime/ is
#: the room for the bank-free estimator and anytime-valid intervals (issue 31), present once it is built.
ENGINE_SUBPACKAGES = ("irt", "cat", "ranking", "evaluation")


def test_the_engine_is_its_named_subpackages():
    engine = PACKAGE / "engine"
    subpackages = {d.name for d in engine.iterdir() if (d / "__init__.py").is_file()}
    own = sorted(f.name for f in engine.glob("*.py"))
    assert set(ENGINE_SUBPACKAGES) <= subpackages and subpackages <= {*ENGINE_SUBPACKAGES, "anytime"}, subpackages
    assert len(own) <= 2, f"engine/ keeps at most 2 modules of its own (put the rest in a subpackage): {own}"
    contracts = (REPO / ".importlinter").read_text()
    for sub in ENGINE_SUBPACKAGES:  # each has a contract saying what it may use
        assert f"source_modules =\n    lm_eval_adaptive.engine.{sub}\n" in contracts, sub


def test_the_engine_contracts_fail_for_an_import_against_the_order(tmp_path):
    shutil.copytree(PACKAGE, tmp_path / "lm_eval_adaptive", ignore=shutil.ignore_patterns("__pycache__", "banks"))
    engine = tmp_path / "lm_eval_adaptive" / "engine"
    (engine / "irt" / "planted.py").write_text("from lm_eval_adaptive.engine.cat import stopping\n")
    (engine / "anytime").mkdir(exist_ok=True)
    (engine / "anytime" / "__init__.py").touch()
    (engine / "anytime" / "planted.py").write_text("from lm_eval_adaptive.engine.ranking import allocation\n")
    (engine / "cat" / "planted.py").write_text("from lm_eval_adaptive.engine.anytime import planted\n")
    shutil.copy(REPO / ".importlinter", tmp_path / ".importlinter")
    r = subprocess.run(["lint-imports", "--config", str(tmp_path / ".importlinter")], cwd=tmp_path,
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    out = " ".join(r.stdout.split())  # its lines wrap at 80 columns
    assert r.returncode != 0 and "6 kept, 4 broken" in out, out[-3000:] + r.stderr[-2000:]
    assert "lm_eval_adaptive.engine.irt.planted -> lm_eval_adaptive.engine.cat.stopping" in out
    assert "lm_eval_adaptive.engine.anytime.planted -> lm_eval_adaptive.engine.ranking.allocation" in out
    assert "lm_eval_adaptive.engine.cat.planted -> lm_eval_adaptive.engine.anytime.planted" in out

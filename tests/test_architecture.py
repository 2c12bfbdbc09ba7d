"""The layout's rules, checked: imports point one way (the import-linter contract in .importlinter),
no module imports another module's private name, and no modules import each other (no cycle)."""

from __future__ import annotations

import ast
import graphlib
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
    assert "2 kept, 0 broken" in r.stdout


def _import_cycle(graph) -> list[str] | None:
    """One import cycle among ``graph``'s modules (grimp counts imports under TYPE_CHECKING too), or None."""
    try:
        graphlib.TopologicalSorter({m: graph.find_modules_directly_imported_by(m) for m in graph.modules}).prepare()
    except graphlib.CycleError as e:
        return list(e.args[1])
    return None


def test_no_import_cycle():
    graph = grimp.build_graph("lm_eval_adaptive")
    assert "lm_eval_adaptive.engine.pair_rules" in graph.modules
    cycle = _import_cycle(graph)
    assert cycle is None, "modules import each other: " + " <- ".join(cycle)


def test_the_cycle_check_sees_one():
    graph = grimp.build_graph("lm_eval_adaptive")
    graph.add_import(importer="lm_eval_adaptive.engine.stopping", imported="lm_eval_adaptive.engine.cat")
    cycle = _import_cycle(graph)
    assert cycle is not None and {"lm_eval_adaptive.engine.stopping", "lm_eval_adaptive.engine.cat"} <= set(cycle)

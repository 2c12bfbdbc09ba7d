"""The layout's rules, checked: imports point one way (the import-linter contract in .importlinter)
and no module imports another module's private name."""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

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


def test_import_contract_holds():
    assert shutil.which("lint-imports"), "import-linter (the test extra) is not installed"
    r = subprocess.run(["lint-imports", "--config", str(REPO / ".importlinter")], cwd=REPO,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "2 kept, 0 broken" in r.stdout

"""Every access to lm-eval internals goes through harness/lm_eval_compat.py, which names the versions it is tested on."""

from __future__ import annotations

import ast
from importlib.metadata import version
from pathlib import Path

from lm_eval_adaptive.harness import lm_eval_compat

HARNESS = Path(__file__).resolve().parents[1] / "lm_eval_adaptive" / "harness"


def _private_uses(path: Path) -> list[str]:
    """Private names reached on other objects (``x._y`` with x not self) and imports from ``lm_eval._*``."""
    bad = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                bad.append(f"{path.name}:{node.lineno}: .{node.attr}")
        if isinstance(node, (ast.ImportFrom, ast.Import)):
            mods = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            bad += [f"{path.name}:{node.lineno}: import {m}" for m in mods
                    if m.startswith("lm_eval.") and any(p.startswith("_") for p in m.split(".")[1:])]
    return bad


def test_run_and_scorer_reach_lm_eval_internals_only_through_the_compat_module():
    for name in ("run.py", "task_loop.py", "attempts.py", "result_blocks.py", "sample_logs.py", "judge_pricing.py",
                 "scorer.py", "binding.py"):
        assert _private_uses(HARNESS / name) == [], name
    # ... which does reach them (so the check above would see them)
    assert _private_uses(HARNESS / "lm_eval_compat.py")


def test_the_compat_module_names_the_lm_eval_it_is_tested_on():
    installed = version("lm_eval")
    assert installed in lm_eval_compat.TESTED_LM_EVAL, (
        f"lm-eval {installed} is installed; run the harness tests on it and add it to TESTED_LM_EVAL")
    assert all(v in lm_eval_compat.__doc__ for v in lm_eval_compat.TESTED_LM_EVAL)
    assert lm_eval_compat.SUPPORTED_LM_EVAL in lm_eval_compat.__doc__

"""The README's Python API example runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_python_api_example_runs_as_written(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)
    (code,) = [b for b in blocks if "AdaptiveRanker(" in b]
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout.strip()
    assert all(m in out for m in ("GPT-4", "Claude-3.5", "Aya23")) and "bank:" in out

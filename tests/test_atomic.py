"""Atomic writes: a killed writer leaves nothing beside the target (O_TMPFILE), SIGTERM cleans up."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import lm_eval_adaptive.atomic as atomic_mod
from lm_eval_adaptive.atomic import atomic_write

REPO = Path(__file__).resolve().parents[1]

# Writes half the data, says "ready" and blocks until killed.
WRITER = textwrap.dedent("""
    import sys, time
    import lm_eval_adaptive.atomic as atomic
    atomic.USE_O_TMPFILE = sys.argv[2] == "unnamed"

    def write(f):
        f.write(b"x" * 100_000)
        f.flush()
        print("ready", flush=True)
        time.sleep(60)

    atomic.atomic_write(sys.argv[1], write)
""")


def _o_tmpfile_works(folder: Path) -> bool:
    if not hasattr(os, "O_TMPFILE"):
        return False
    try:
        os.close(os.open(folder, os.O_TMPFILE | os.O_RDWR, 0o600))
    except OSError:
        return False
    return True


def _kill_while_writing(folder: Path, target: Path, how: str, sig: int) -> int:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(target), how], stdout=subprocess.PIPE,
                            env=env, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        os.kill(proc.pid, sig)
        return proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("existing", [False, True])
def test_sigkill_mid_write_leaves_no_file(tmp_path, existing):
    if not _o_tmpfile_works(tmp_path):
        pytest.skip("O_TMPFILE is not supported here")
    target = tmp_path / "bank.json"
    if existing:
        target.write_text("old")
    rc = _kill_while_writing(tmp_path, target, "unnamed", signal.SIGKILL)
    assert rc == -signal.SIGKILL
    assert [p.name for p in tmp_path.iterdir()] == (["bank.json"] if existing else [])
    if existing:
        assert target.read_text() == "old"


@pytest.mark.parametrize("how", ["unnamed", "named"])
def test_sigterm_mid_write_removes_the_temp_file_and_still_terminates(tmp_path, how):
    if how == "unnamed" and not _o_tmpfile_works(tmp_path):
        pytest.skip("O_TMPFILE is not supported here")
    target = tmp_path / "bank.json"
    target.write_text("old")
    rc = _kill_while_writing(tmp_path, target, how, signal.SIGTERM)
    assert rc == -signal.SIGTERM
    assert [p.name for p in tmp_path.iterdir()] == ["bank.json"]
    assert target.read_text() == "old"


def test_sigkill_with_a_named_temp_file_leaves_it(tmp_path):
    """Why O_TMPFILE: without it, SIGKILL (which no handler sees) leaves the named temp file."""
    rc = _kill_while_writing(tmp_path, tmp_path / "bank.json", "named", signal.SIGKILL)
    assert rc == -signal.SIGKILL
    [left] = list(tmp_path.iterdir())
    assert left.name.startswith(".bank.json.") and left.name.endswith(".tmp")


@pytest.mark.parametrize("unnamed", [True, False])
def test_both_ways_write_complete_files_with_an_ordinary_mode(tmp_path, monkeypatch, unnamed):
    monkeypatch.setattr(atomic_mod, "USE_O_TMPFILE", unnamed)
    target = tmp_path / "out.bin"
    atomic_write(target, lambda f: f.write(b"first"))
    atomic_write(target, lambda f: f.write(b"second"))
    assert target.read_bytes() == b"second"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is put back


def test_without_proc_the_unnamed_file_is_copied(tmp_path, monkeypatch):
    if not _o_tmpfile_works(tmp_path):
        pytest.skip("O_TMPFILE is not supported here")

    def no_link(src, dst, **kw):
        raise FileNotFoundError(src)

    monkeypatch.setattr(atomic_mod.os, "link", no_link)
    target = tmp_path / "out.bin"
    atomic_write(target, lambda f: f.write(b"z" * 3_000_000))
    assert target.read_bytes() == b"z" * 3_000_000
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_a_failing_write_leaves_nothing(tmp_path):
    def fail(f):
        f.write(b"half")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        atomic_write(tmp_path / "x.bin", fail)
    assert list(tmp_path.iterdir()) == []

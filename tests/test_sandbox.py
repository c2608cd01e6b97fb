"""The sandbox keeps what the kernel needs to run when it lives under /tmp, which it replaces."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autograder import sandbox
from tests.hostile_cases import AID, HOSTILE


def test_a_course_and_venv_under_tmp_stay_visible(monkeypatch, tmp_path):
    clone = tmp_path / "clone"  # pytest's tmp_path is under /tmp on Linux, like a CI's fresh clone can be
    for folder in ("lib", ".venv/lib/site-packages", "work/w0"):
        (clone / folder).mkdir(parents=True)
    monkeypatch.setattr(sys, "prefix", str(clone / ".venv"))
    monkeypatch.setattr(sys, "exec_prefix", str(clone / ".venv"))
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    monkeypatch.setattr(sys, "path", [str(clone / "work" / "w0"), str(clone / ".venv/lib/site-packages"), "/usr/lib"])
    monkeypatch.setattr(sandbox, "__file__", str(clone / "autograder" / "sandbox.py"))
    real = str(clone.resolve())
    if real.startswith("/tmp/"):
        assert sandbox._under_tmp("/tmp/autograder-x/w0/nb") == [real]  # outermost folder only
        # a notebook folder inside the clone: the clone still comes back (the folder is bound over it, writable)
        assert sandbox._under_tmp(str((clone / "work" / "w0").resolve())) == [real]
    # folders inside the notebook's own folder are not bound separately
    assert sandbox._under_tmp(str(clone.resolve())) == []


NOBODY = 65534


def _as_nobody(args, cwd, **kwargs):
    env = dict(os.environ, HOME=str(cwd / "home"))
    return subprocess.run(args, cwd=cwd, env=env, user=NOBODY, group=NOBODY, extra_groups=[], capture_output=True,
                          text=True, **kwargs)


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0,
                    reason="needs Linux and root, to run the grader as another user")
def test_a_grader_without_root_isolates_kernels_too():
    """Run as an ordinary user, the grader's kernels get a user namespace of their own: a student's
    code cannot read the solutions (as root it cannot either; see tests/test_hostile.py)."""
    work = Path(tempfile.mkdtemp(prefix="rootless-"))
    try:
        work.chmod(0o777)
        if _as_nobody([sys.executable, "-c", "import autograder, lib"], work).returncode != 0:
            pytest.skip("an ordinary user cannot read this checkout or its Python")
        unshare = "import ctypes, sys; sys.exit(ctypes.CDLL(None).unshare(0x10000000) != 0)"
        if _as_nobody([sys.executable, "-c", unshare], work).returncode != 0:
            pytest.skip("user namespaces are switched off on this machine")
        case = next(c for c in HOSTILE if c.name.startswith("reading the solutions"))
        path = work / "sub" / f"{AID}.ipynb"
        path.parent.mkdir(mode=0o777)
        case.write(path)
        path.chmod(0o666)
        proc = _as_nobody([sys.executable, "-m", "autograder", "check", str(path), "--assignment", AID], work,
                          timeout=600)
        table = proc.stdout
        assert "limits only" not in table, table + proc.stderr
        assert re.search(r"softmax\s+0 / 3", table), table + proc.stderr  # the solutions were not there to copy
        assert re.search(r"SelfAttention\s+2 / 2", table), table + proc.stderr  # everything else runs as usual
        assert "exec" in table  # and the attempt is flagged for a human
    finally:
        shutil.rmtree(work, ignore_errors=True)

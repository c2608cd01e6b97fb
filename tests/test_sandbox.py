"""What a grading kernel can see and do: only what a student has (the release notebook, lib/ with the
references of earlier notebooks, the kernel side of the grader) and a small folder of its own."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from autograder import course
from autograder.grading import grade_many
from tests.hostile_cases import AID, FORGERY
from tests.submissions import make_submission, solution_sources

LOOK = f'''
import json, os
root = {str(course.ROOT)!r}
seen = {{"root": sorted(os.listdir(root)) if os.path.isdir(root) else None, "cwd": sorted(os.listdir("."))}}
for name in ("lib.self_attention", "lib.guard", "lib.testing", "autograder.checks", "autograder.probe"):
    try:
        __import__(name)
        seen[name] = True
    except ImportError:
        seen[name] = False
seen["solutions"] = os.path.exists(os.path.join(root, "solutions"))
seen["checks"] = os.path.exists(os.path.join(root, "autograder", "checks"))
try:
    with open("big.bin", "wb") as f:
        for _ in range(100):
            f.write(b"0" * 2**20)
    seen["wrote_mb"] = 100
except OSError:
    seen["wrote_mb"] = os.path.getsize("big.bin") // 2**20
os.remove("big.bin")
with open("/tmp/x", "w") as f:
    seen["tmp"] = f.write("x") == 1
print("SEEN" + json.dumps(seen))
'''


def _seen(tmp_path, env=None):
    path = make_submission(AID, tmp_path / "sub" / f"{AID}.ipynb", {"softmax": solution_sources(AID)["softmax"] + LOOK})
    keep = tmp_path / "kept"
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        result = grade_many([("you", AID, path)], keep_autograded=keep)[0]
    finally:
        os.environ.clear()
        os.environ.update(saved)
    nb = nbformat.read(keep / "you" / AID / f"{AID}.ipynb", as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    return result, json.loads(re.search(r"SEEN(\{.*\})", text).group(1))


def test_the_kernel_sees_what_a_student_has(tmp_path):
    result, seen = _seen(tmp_path)
    assert result.auto_score == result.auto_max, [(c.grade_id, c.message) for c in result.cells]
    assert seen["lib.guard"] and seen["lib.testing"] and seen["autograder.probe"]
    assert not seen["lib.self_attention"], "the reference solutions of the notebook being graded are visible"
    assert not seen["autograder.checks"], "the hidden tests are importable"
    if result.sandbox != "isolated":
        pytest.skip(f"no namespaces here ({result.sandbox}): only the view and the limits apply")
    assert not seen["solutions"] and not seen["checks"]
    assert set(seen["root"]) <= {".venv", "notebooks"}, seen["root"]
    assert seen["cwd"] == [], "the kernel's folder starts empty"
    assert seen["wrote_mb"] <= 64, "the kernel's folder has a size cap"
    assert seen["tmp"]


def test_without_namespaces_the_view_still_applies(tmp_path):
    result, seen = _seen(tmp_path, {"AUTOGRADER_NO_NAMESPACES": "1"})
    assert result.sandbox.startswith("limits only")
    assert result.auto_score == result.auto_max
    assert not seen["lib.self_attention"] and not seen["autograder.checks"]
    assert seen["cwd"] == []


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
        case = next(c for c in FORGERY if c.name.startswith("reading the hidden checks"))
        path = work / "sub" / f"{AID}.ipynb"
        path.parent.mkdir(mode=0o777)
        case.write(path)
        path.chmod(0o666)
        proc = _as_nobody([sys.executable, "-m", "autograder", "check", str(path), "--assignment", AID], work,
                          timeout=600)
        table = proc.stdout
        assert "limits only" not in table, table + proc.stderr
        assert re.search(r"SelfAttention\s+2 / 2", table), table + proc.stderr  # everything runs as usual
        assert "walking folders" in table  # and the attempt is flagged for a human
    finally:
        shutil.rmtree(work, ignore_errors=True)

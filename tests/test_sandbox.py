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
from autograder.runner import grade_many
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
import tempfile
with open(os.path.join(tempfile.gettempdir(), "x"), "w") as f:
    seen["tmp"] = f.write("x") == 1
print("SEEN" + json.dumps(seen))
'''


def _seen(tmp_path, env=None, look=LOOK):
    path = make_submission(AID, tmp_path / "sub" / f"{AID}.ipynb", {"softmax": solution_sources(AID)["softmax"] + look})
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


HOST = """
import json, os, socket
seen = {"uid": os.getuid(), "route": open("/proc/net/route").read().splitlines()[1:],
        "devices": sorted(line.split(":")[0].strip() for line in open("/proc/net/dev").read().splitlines()[2:])}
for folder in ("/root", "/home", "/opt", "/srv", "/var", "/run", "/work", "@COURSE@"):
    try:
        seen[folder] = sorted(os.listdir(folder))
    except OSError as e:
        seen[folder] = None
try:
    socket.create_connection(("127.0.0.1", @PORT@), timeout=2).close()
    seen["host_server"] = True
except OSError:
    seen["host_server"] = False
try:
    open("/sys/fs/cgroup/pids/cgroup.procs", "a").write(str(os.getpid()))
    seen["cgroup_escape"] = True
except OSError:
    seen["cgroup_escape"] = False
print("SEEN" + json.dumps(seen))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="namespaces are Linux's")
def test_the_kernel_has_no_network_and_none_of_the_hosts_files(tmp_path):
    """Its own network namespace with loopback only (a server on the host's loopback is out of reach), its
    own uid (not root), and no /root, /home, /opt, ..., nor the course folder, whatever COURSE_ROOT says."""
    import socket
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        look = HOST.replace("@COURSE@", str(course.ROOT)).replace("@PORT@", str(server.getsockname()[1]))
        result, seen = _seen(tmp_path, look=look)
    assert result.auto_score == result.auto_max, [(c.grade_id, c.message) for c in result.cells]
    assert result.sandbox == "isolated", result.sandbox
    assert seen["devices"] == ["lo"] and seen["route"] == [], seen
    assert not seen["host_server"], "the kernel reached a server on the host's loopback"
    assert seen["uid"] != 0, "the kernel runs as root"
    assert not seen["cgroup_escape"]
    for folder in ("/root", "/home", "/opt", "/srv", "/var", "/run", "/work"):
        assert not seen[folder] or set(seen[folder]) <= {".venv", "main", ".pyenv", "notebooks"}, (folder, seen[folder])
    assert not seen[str(course.ROOT)] or set(seen[str(course.ROOT)]) <= {".venv", "notebooks"}


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


CAP_SYS_ADMIN, PR_CAPBSET_DROP = 21, 24


def _without_sys_admin():
    """Run as root without CAP_SYS_ADMIN, as in a container started with Docker's defaults."""
    import ctypes
    if ctypes.CDLL(None, use_errno=True).prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0) != 0:
        os._exit(99)


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0,
                    reason="needs Linux and root, to take CAP_SYS_ADMIN away")
def test_root_without_sys_admin_isolates_through_a_user_namespace(tmp_path):
    """Root without CAP_SYS_ADMIN cannot make namespaces directly; the launcher then makes them inside a
    user namespace, and the kernel is isolated all the same, network included."""
    probe = [sys.executable, "-c", "import ctypes, sys; sys.exit(ctypes.CDLL(None).unshare(0x10000000) != 0)"]
    if subprocess.run(probe, preexec_fn=_without_sys_admin).returncode != 0:
        pytest.skip("user namespaces are switched off on this machine")
    path = make_submission(AID, tmp_path / "sub" / f"{AID}.ipynb")
    proc = subprocess.run([sys.executable, "-m", "autograder", "check", str(path), "--assignment", AID],
                          preexec_fn=_without_sys_admin, capture_output=True, text=True, timeout=600)
    assert "sandbox:" not in proc.stdout, proc.stdout + proc.stderr  # the table names the sandbox when not isolated
    assert re.search(r"autograded: 11 / 11", proc.stdout), proc.stdout + proc.stderr


def test_grade_refuses_a_class_where_kernels_cannot_be_isolated(tmp_path, monkeypatch):
    """With per-process limits only, one submission could reach the others: `grade` says so and stops,
    unless the instructor accepts it with --allow-unisolated."""
    from autograder.__main__ import main
    (tmp_path / "submitted").mkdir()
    monkeypatch.setenv("AUTOGRADER_NO_NAMESPACES", "1")
    args = ["grade", str(tmp_path / "submitted"), "--out", str(tmp_path / "out")]
    assert main(args) == 2
    assert not (tmp_path / "out").exists()
    assert main(args + ["--allow-unisolated"]) == 0
    assert (tmp_path / "out" / "grades.csv").is_file()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="namespaces are Linux's")
def test_a_course_elsewhere_stays_hidden(tmp_path):
    """COURSE_ROOT pointing at another copy of the course (here under /var/tmp, outside the checkout the
    grader runs from): its solutions/ are hidden from the kernel too. The submission's softmax exists
    only where it cannot see them."""
    copy = Path(tempfile.mkdtemp(prefix="course-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None))
    try:
        for name in ("solutions", "notebooks", "lib"):
            shutil.copytree(course.ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(course.ROOT / "pyproject.toml", copy)
        copy.chmod(0o755)
        sees = f'\nimport os\nif os.path.exists({str(copy / "solutions")!r}):\n    del softmax\n'
        path = make_submission(AID, tmp_path / "sub" / f"{AID}.ipynb", {"softmax": solution_sources(AID)["softmax"] + sees})
        proc = subprocess.run([sys.executable, "-m", "autograder", "check", str(path), "--assignment", AID],
                              env=dict(os.environ, COURSE_ROOT=str(copy)), capture_output=True, text=True, timeout=600)
        if "limits only" in proc.stdout:
            pytest.skip("no namespaces here: only the view and the limits apply")
        assert re.search(r"softmax\s+3 / 3", proc.stdout), proc.stdout + proc.stderr
    finally:
        shutil.rmtree(copy, ignore_errors=True)


FORKED = '''
import gc, json, os, sys
run = {run!r}
held = set()
for o in gc.get_objects():
    items = o.values() if isinstance(o, dict) else o if isinstance(o, (list, tuple)) else ()
    # its own folder and view, and this cell's code, it knows anyway
    held.update(x for x in items if isinstance(x, str) and run in x and x not in os.getcwd() and "/view/" not in x
                and "run = " not in x)
import matplotlib, matplotlib.texmanager
seen = {{"argv": sys.orig_argv, "held": sorted(held)[:5], "MPLCONFIGDIR": os.environ.get("MPLCONFIGDIR"),
        "matplotlib": [matplotlib.get_backend(), matplotlib.get_configdir(), matplotlib.get_cachedir(),
                       str(matplotlib.texmanager.TexManager._cache_dir.parent)],
        "modules": sorted(str(getattr(m, "__file__", "")) for n, m in list(sys.modules.items())
                          if n.split(".")[0] in ("autograder", "lib"))}}
print("SEEN" + json.dumps(seen))
'''


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the zygote forks kernels on Linux")
def test_kernels_forked_from_the_zygote_hold_nothing_of_the_graders(tmp_path):
    """Kernels start from a process that imported PyTorch once (autograder.zygote): each still imports the
    course's modules from its own view only, and holds no path of the grader's scratch folder; matplotlib,
    imported there too, has the kernel's backend and keeps its settings and caches in the kernel's own folder."""
    from autograder import scratch
    look = FORKED.format(run=scratch.PREFIX)
    paths = [make_submission(AID, tmp_path / f"s{i}" / f"{AID}.ipynb", {"softmax": solution_sources(AID)["softmax"]
                                                                         + look}) for i in range(2)]
    results = grade_many([(f"s{i}", AID, p) for i, p in enumerate(paths)], jobs=1, keep_autograded=tmp_path / "kept")
    seen = []
    for r in results:
        assert r.auto_score == r.auto_max, [(c.grade_id, c.message) for c in r.cells]
        if r.sandbox != "isolated":
            pytest.skip(f"no namespaces here ({r.sandbox}): kernels start as fresh processes")
        nb = nbformat.read(tmp_path / "kept" / r.student / AID / f"{AID}.ipynb", as_version=4)
        text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
        seen.append(json.loads(re.search(r"SEEN(\{.*\})", text).group(1)))
    for s in seen:
        assert "autograder.zygote" in s["argv"] and not any(scratch.PREFIX in a for a in s["argv"]), s["argv"]
        assert not s["held"], s["held"]
        assert all("/view/" in m or m == "None" for m in s["modules"]), s["modules"]
        folder = s["MPLCONFIGDIR"]
        assert s["matplotlib"] == ["module://autograder.nodisplay", folder, folder, folder], s


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the zygote forks kernels on Linux")
def test_a_forked_kernel_draws_its_own_numbers_is_timed_through_its_launcher_and_dies_with_its_spawn_process(
        tmp_path):
    """Kernels forked from one zygote get random generators of their own (a fork copies their state). The grader
    times a judge's request by the processor time of the kernel's process tree: for a forked kernel that is the
    launcher's tree, not the spawn process nbgrader started. Killing that process (as nbgrader does to stop a
    kernel) ends the launcher and the kernel."""
    import time

    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpec

    from autograder import proctree, spawn
    from autograder.zygote import Zygote
    folder = tmp_path / "run"
    folder.mkdir()
    zygote = Zygote(folder, dict(os.environ))
    spec = KernelSpec(argv=[*zygote.command, "-f", "{connection_file}"], display_name="forked", language="python")
    managers = [KernelManager(), KernelManager()]
    draws = []
    try:
        for km in managers:
            km._kernel_spec = spec
            km.start_kernel(cwd=str(tmp_path))
            kc = km.client()
            kc.start_channels()
            kc.wait_for_ready(timeout=120)
            said = []
            kc.execute_interactive("import random, numpy; print(random.random(), numpy.random.rand())", timeout=60,
                                   output_hook=lambda msg: said.append(msg["content"].get("text", "")))
            draws.append("".join(said).split())
        assert len(draws[0]) == 2 and all(a != b for a, b in zip(*draws)), draws
        stub = km.provisioner.pid
        launcher = spawn.launcher(stub)
        assert launcher != stub and proctree.read(launcher) is not None
        before = proctree.cpu(launcher)
        kc.execute_interactive("import time\nend = time.process_time() + 1.0\nwhile time.process_time() < end: pass",
                               timeout=60)
        assert proctree.cpu(launcher) - before >= 0.8
        kernels = set(proctree.below(launcher))
        assert kernels
        kc.stop_channels()
        os.kill(stub, 9)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(proctree.read(p) for p in kernels | {launcher}):
            time.sleep(0.1)
        left = [p for p in kernels | {launcher} if (r := proctree.read(p)) is not None and r.state != "Z"]
        assert not left, f"still running after their spawn process was killed: {left}"
    finally:
        for km in managers:
            if km.has_kernel:
                km.shutdown_kernel(now=True)
        zygote.close()


CAPS = '''
import ctypes, json, os
caps = {{line.split(":")[0]: int(line.split(":")[1], 16) for line in open("/proc/self/status")
        if line.startswith(("CapInh", "CapPrm", "CapEff", "CapAmb", "CapBnd"))}}
# what root's uid could change without a capability, asked of access(2), which changes nothing: a file in /dev
# (shared with the grader and every kernel), a host setting in /proc/sys, a message queue of the host's
writable = [p for p in ("/dev", "/dev/mqueue", "/proc/sys/kernel/core_pattern", "/proc/sys/vm/overcommit_memory",
                        "/proc/sysrq-trigger") if os.path.exists(p) and os.access(p, os.W_OK)]
print("SEEN" + json.dumps({{"caps": caps, "umount": ctypes.CDLL(None, use_errno=True).umount2({root!r}.encode(), 2),
                           "writable": writable, "uid": os.getuid()}}))
'''


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0,
                    reason="needs Linux and root, to take CAP_SYS_ADMIN away")
@pytest.mark.parametrize("user_namespace", [False, True], ids=["root", "user-namespace"])
def test_the_kernel_has_no_capability_and_cannot_take_a_cover_off(tmp_path, user_namespace):
    """Whether the launcher made the namespaces as root or inside a user namespace of its own (root without
    CAP_SYS_ADMIN, as in a container), the kernel has no capability left (an exec would empty the sets; a kernel
    forked from the zygote has none to empty them), so it cannot unmount the cover over the course. Inside a user
    namespace it is still the host's uid 0: /dev and the host's settings in /proc are read-only to it."""
    look = CAPS.format(root=str(course.ROOT))
    code = (f"import json; from pathlib import Path; from tests.test_sandbox import _seen; "
            f"r, seen = _seen(Path({str(tmp_path)!r}), look={look!r}); print('RESULT' + json.dumps([r.sandbox, seen]))")
    if user_namespace:
        probe = [sys.executable, "-c", "import ctypes, sys; sys.exit(ctypes.CDLL(None).unshare(0x10000000) != 0)"]
        if subprocess.run(probe, preexec_fn=_without_sys_admin).returncode != 0:
            pytest.skip("user namespaces are switched off on this machine")
    proc = subprocess.run([sys.executable, "-c", code], cwd=course.ROOT, capture_output=True, text=True, timeout=600,
                          preexec_fn=_without_sys_admin if user_namespace else None)
    found = re.search(r"RESULT(\[.*\])", proc.stdout)
    assert found, proc.stdout + proc.stderr
    sandbox, seen = json.loads(found.group(1))
    assert sandbox == "isolated", sandbox
    assert not any(seen["caps"].values()), seen["caps"]
    assert seen["umount"] != 0, "the kernel took the cover off the course"
    assert seen["writable"] == [], f"the kernel (uid {seen['uid']} in its namespace) may write {seen['writable']}"


def _memory_holds(pid: int, needle: bytes) -> bool:
    """Whether the writable memory of process ``pid`` (read from the host, as root) holds ``needle``."""
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            where, perms = line.split()[:2]
            start, end = (int(a, 16) for a in where.split("-"))
            if not perms.startswith("rw") or end - start > 2**30:
                continue
            try:
                mem.seek(start)
                if needle in mem.read(end - start):
                    return True
            except (OSError, ValueError, OverflowError):
                continue
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0,
                    reason="needs Linux, and root to read a kernel's memory from outside")
def test_no_variable_of_the_graders_environment_is_in_a_forked_kernels_memory(tmp_path):
    """A fork does not wipe memory as an exec does: a variable of the grader's environment (a token, say) that had
    reached the zygote or the launcher would still be in the kernel's memory, where student code can read it.
    The kernel waits while this test reads its memory from the host."""
    import threading
    import time

    from tests.processes import name
    canary = f"canary-{os.urandom(12).hex()}"
    look = "import time\ntime.sleep(8)\n"
    done, found, kernels = threading.Event(), [], set()

    def watch():
        while not done.is_set():
            for pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
                if pid not in kernels and name(pid) == "grader-kernel":
                    time.sleep(2)  # into its sleep: past start-up
                    kernels.add(pid)
                    try:
                        found.append(_memory_holds(pid, canary.encode()))
                    except OSError:
                        pass
            time.sleep(0.2)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        result, _ = _seen(tmp_path, env={"GRADER_TOKEN": canary}, look=look + LOOK)
    finally:
        done.set()
        watcher.join()
    if result.sandbox != "isolated":
        pytest.skip(f"no namespaces here ({result.sandbox}): kernels start as fresh processes")
    assert found, "no forked kernel was seen"
    assert not any(found), "the grader's environment is in the kernel's memory"

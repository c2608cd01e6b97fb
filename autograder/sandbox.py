"""Start a Jupyter kernel that sees what a student has, and nothing else.

nbgrader runs the student's code in a kernel. This module is that kernel's
launcher (the grading kernelspec runs ``python -m autograder.sandbox -f
CONNECTION_FILE ...``). Before it becomes the kernel it:

- limits memory (address space), the size of files it may write, and core dumps;
- points Python at the *view* the grader prepared for this notebook
  (``AUTOGRADER_VIEW``): ``lib/`` with the references of earlier notebooks
  only (what ``bundle --upto`` ships) and the kernel side of the grader
  (``autograder/probe.py``), nothing of the hidden tests;
- on Linux, moves into new mount and PID namespaces (as root directly; as
  another user inside a user namespace of its own, where the kernel allows
  that, as most Linux systems do), where
  * the kernel's folder is a fresh, small, writable file system of its own
    (``AUTOGRADER_SCRATCH_MB``): nothing it writes or links there reaches the
    grader, which writes its outputs elsewhere,
  * the course (``solutions/``, ``autograder/checks/``, ``tests/``, ``lib/``
    with every reference), the grader's folders and every path named in
    ``AUTOGRADER_HIDE`` (gradebooks, other students' submissions, the output
    folder) are covered by empty read-only folders; only the paths in
    ``AUTOGRADER_KEEP`` (the view, the release notebook) and Python itself
    come back, read-only,
  * every other file system is read-only, /tmp is a fresh, small one,
  * /proc shows only the kernel's own processes, and all of them die with it,
  * no capability is left, so nothing of this can be undone.

Where no namespace can be had (off Linux, or user namespaces switched off,
or ``AUTOGRADER_NO_NAMESPACES`` set, as a test does) only the limits and the view apply, and the kernel starts in an empty folder
of its own; ``AUTOGRADER_SANDBOX_LOG`` records which protections were in
force, and the report says so.
"""
import ctypes
import json
import os
import resource
import signal
import sys
import tempfile

CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWUSER = 0x00020000, 0x20000000, 0x10000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_NOATIME, MS_NODIRATIME, MS_RELATIME, MS_STRICTATIME = 1024, 2048, 1 << 21, 1 << 24
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_CAPBSET_DROP, PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 24, 1, 38
FILE_LIMIT = 512 * 2**20  # no file written by student code grows past 512 MiB
WRITABLE = ("/tmp", "/dev/shm")  # replaced by fresh, small file systems of the kernel's own

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret, what):
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source, target, fstype, flags, data=None):
    _check(_libc.mount(source.encode() if source else None, target.encode(),
                       fstype.encode() if fstype else None, ctypes.c_ulong(flags),
                       data.encode() if data else None), f"mount {target}")


def _mount_points():
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4].replace("\\040", " ") for line in f]
    return sorted(set(points), key=len)


def _limit(which, value):
    soft, hard = resource.getrlimit(which)
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(which, (value, value))


def apply_limits(memory: int) -> None:
    if memory > 0:
        _limit(resource.RLIMIT_AS, memory)
    _limit(resource.RLIMIT_FSIZE, FILE_LIMIT)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _isolate_files(workdir: str, hide, keep, scratch: int) -> None:
    """Runs in the new mount namespace. The kernel's folder becomes a fresh writable file system of
    ``scratch`` bytes; every other file system becomes read-only; /tmp and every path in ``hide`` are
    covered by empty folders, into which only the paths in ``keep`` (and Python) come back, read-only."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("none", workdir, "tmpfs", MS_NOSUID | MS_NODEV, f"size={scratch},mode=700")
    kept = []
    for path in sorted({os.path.realpath(p) for p in list(keep) + _python_dirs() if os.path.isdir(p)}, key=len):
        kept.append((path, os.open(path, os.O_PATH | os.O_DIRECTORY), False))
    kept.append((workdir, os.open(workdir, os.O_PATH | os.O_DIRECTORY), True))
    for point in _mount_points():
        if point == workdir or point.startswith(("/proc", "/sys", "/dev")):
            continue
        try:
            _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _kept_flags(point))
        except OSError:
            pass  # a mount that cannot be made read-only (rare) stays as it is
    for target in sorted({os.path.realpath(p) for p in [*WRITABLE, *hide] if os.path.lexists(p)}, key=len):
        _cover(target, kept, writable=target in WRITABLE)
    for _, fd, _ in kept:
        os.close(fd)
    os.chdir(workdir)


def _kept_flags(point: str) -> int:
    """The flags a read-only remount must keep: inside a user namespace, changing them is refused."""
    st = os.statvfs(point)
    flags = (MS_NOSUID if st.f_flag & os.ST_NOSUID else 0) | (MS_NODEV if st.f_flag & os.ST_NODEV else 0)
    flags |= MS_NOEXEC if st.f_flag & os.ST_NOEXEC else 0
    flags |= MS_NOATIME if st.f_flag & os.ST_NOATIME else 0
    flags |= MS_NODIRATIME if st.f_flag & os.ST_NODIRATIME else 0
    flags |= MS_RELATIME if st.f_flag & os.ST_RELATIME else 0
    return flags | (0 if st.f_flag & (os.ST_NOATIME | os.ST_RELATIME) else MS_STRICTATIME)


def _cover(target: str, kept, writable: bool = False) -> None:
    """Hide ``target`` under an empty file system (a file under /dev/null), then bind back the kept paths
    that lie inside it, from the file descriptors opened before anything was covered."""
    if any(path == target for path, _, _ in kept) or not os.path.lexists(target):
        return  # the target is itself kept, or already under a cover: nothing to hide
    if not os.path.isdir(target):
        _mount("/dev/null", target, None, MS_BIND)
        return
    size = "64m,mode=1777" if writable else "1m,mode=755"
    _mount("none", target, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size}")
    for path, fd, rw in kept:
        if path.startswith(target + "/"):
            os.makedirs(path, exist_ok=True)
            _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
            if not rw:
                _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    if not writable:
        _mount(None, target, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _python_dirs() -> list:
    """What the kernel needs to run Python: its installation and its virtual environment."""
    return [sys.prefix, sys.exec_prefix, sys.base_prefix] + [p for p in sys.path if p.endswith("-packages")]


def _course_dirs() -> list:
    """The course and the real ``lib`` and ``autograder`` packages, wherever they are installed: the kernel
    gets the view instead."""
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    found = [os.path.dirname(here), here]
    spec = importlib.util.find_spec("lib")
    found += list(spec.submodule_search_locations or []) if spec else []
    return found


def _enter_namespaces() -> None:
    """New mount and PID namespaces: as root directly, as another user inside a new user namespace
    in which this process maps to itself (same uid and gid, so files keep their owners)."""
    if os.geteuid() == 0:
        _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWPID), "unshare")
        return
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID), "unshare (user namespace)")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def _drop_capabilities() -> None:
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def _forward_signals(child: int) -> None:
    def forward(signum, _frame):
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, forward)


def main(argv) -> None:
    hide = [p for p in os.environ.get("AUTOGRADER_HIDE", "").split(os.pathsep) if p]
    keep = [p for p in os.environ.get("AUTOGRADER_KEEP", "").split(os.pathsep) if p]
    view = os.environ.get("AUTOGRADER_VIEW", "")
    memory = int(os.environ.get("AUTOGRADER_MEMORY", "0") or 0)
    scratch = int(os.environ.get("AUTOGRADER_SCRATCH_MB", "64") or 64) * 2**20
    log = _open_log(os.environ.get("AUTOGRADER_SANDBOX_LOG"))
    workdir = os.path.realpath(os.getcwd())
    kernel = [sys.executable, "-m", "ipykernel_launcher", *argv]
    env = dict(os.environ)
    for name in ("AUTOGRADER_HIDE", "AUTOGRADER_KEEP", "AUTOGRADER_VIEW", "AUTOGRADER_MEMORY", "AUTOGRADER_SCRATCH_MB",
                 "AUTOGRADER_SANDBOX_LOG", "AUTOGRADER_NOTES", "AUTOGRADER_SCRATCH_DIR", "AUTOGRADER_NO_NAMESPACES", "PWD",
                 "OLDPWD"):
        env.pop(name, None)
    env.update(PYTHONDONTWRITEBYTECODE="1")
    if view:  # the kernel imports lib/ and autograder.probe from the view, before anything installed
        env["PYTHONPATH"] = view
        keep.append(view)
    state = {"namespaces": False, "limits": True, "pid": os.getpid()}
    isolated = False
    if os.environ.get("AUTOGRADER_NO_NAMESPACES"):
        state["error"] = "namespaces switched off by AUTOGRADER_NO_NAMESPACES"
    elif sys.platform.startswith("linux"):
        try:
            connection = _private_connection_file(argv)
            fonts = _matplotlib_cache()
            covered = hide + (_course_dirs() if view else [])
            _enter_namespaces()
            state["user_namespace"] = os.geteuid() != 0
            _isolate_files(workdir, covered, keep, scratch)
            isolated = True
            kernel = [sys.executable, "-m", "ipykernel_launcher", *_replace_connection(argv, connection)]
        except OSError as e:
            state["error"] = str(e)
    if isolated:
        for name in ("HOME", "IPYTHONDIR", "XDG_CACHE_HOME", "TMPDIR"):
            env[name] = "/tmp"
        env["MPLCONFIGDIR"] = "/tmp/matplotlib"
        child = os.fork()
        if child == 0:  # PID 1 of the new namespace: the kernel itself
            try:
                _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
                try:
                    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
                except OSError:
                    if not state["user_namespace"]:
                        raise
                    # some containers refuse a new /proc in a user namespace: hide the old one instead
                    _mount("none", "/proc", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k")
                os.makedirs("/tmp/.kernel", exist_ok=True)
                with open(connection["path"], "w") as f:
                    f.write(connection["text"])
                os.makedirs("/tmp/matplotlib", exist_ok=True)
                for name, text in fonts.items():  # spares matplotlib rebuilding its font list
                    with open(os.path.join("/tmp/matplotlib", name), "w") as f:
                        f.write(text)
                _drop_capabilities()
                apply_limits(memory)
                os.execve(sys.executable, kernel, env)
            except BaseException as e:  # noqa: BLE001 - say why, then die: the grader sees a dead kernel
                sys.stderr.write(f"autograder.sandbox: the kernel could not start: {e!r}\n")
            finally:
                os._exit(127)
        state["namespaces"] = True
        _write_log(log, state)
        _forward_signals(child)
        while True:
            try:
                _, status = os.waitpid(child, 0)
                break
            except InterruptedError:
                continue
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    _write_log(log, state)
    # not the folder the grader writes its results to
    os.chdir(tempfile.mkdtemp(prefix="kernel-", dir=os.environ.get("AUTOGRADER_SCRATCH_DIR") or None))
    apply_limits(memory)
    os.execve(sys.executable, kernel, env)


def _private_connection_file(argv):
    """Read the connection file now: its folder will be hidden, a copy goes in the private /tmp."""
    path = argv[argv.index("-f") + 1]
    with open(path) as f:
        return {"text": f.read(), "path": "/tmp/.kernel/" + os.path.basename(path)}


def _matplotlib_cache():
    """The font-list cache of matplotlib, read before its folder becomes unreachable."""
    home = os.path.expanduser("~")
    folders = [os.environ.get("MPLCONFIGDIR", ""), os.path.join(home, ".config", "matplotlib"),
               os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.join(home, ".cache")), "matplotlib")]
    found = {}
    for folder in filter(None, folders):
        try:
            names = [n for n in os.listdir(folder) if n.startswith("fontlist") and n.endswith(".json")]
        except OSError:
            continue
        for name in names:
            with open(os.path.join(folder, name)) as f:
                found.setdefault(name, f.read())
    return found


def _replace_connection(argv, connection):
    argv = list(argv)
    argv[argv.index("-f") + 1] = connection["path"]
    return argv


def _open_log(path):
    """The log file, opened now: once isolated, the kernel's launcher cannot reach the grader's folders."""
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600) if path else None


def _write_log(log, state) -> None:
    if log is not None:
        os.write(log, (json.dumps(state) + "\n").encode())
        os.close(log)


if __name__ == "__main__":
    main(sys.argv[1:])

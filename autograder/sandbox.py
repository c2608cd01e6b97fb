"""Start a Jupyter kernel that cannot see or change anything but its own notebook.

nbgrader runs the student's code and the hidden tests in one kernel. This
module is that kernel's launcher (the grading kernelspec runs
``python -m autograder.sandbox -f CONNECTION_FILE ...``). Before it becomes
the kernel it:

- limits memory (address space), the size of files it may write, and core dumps;
- on Linux, moves into new mount and PID namespaces (as root directly; as
  another user inside a user namespace of its own, where the kernel allows
  that, as most Linux systems do), where
  * every path named in ``AUTOGRADER_HIDE`` (the gradebook, the course's
    sources, other students' submissions, other graders' folders) is covered
    by an empty read-only folder or by /dev/null,
  * every file system is read-only except the notebook's own folder and a
    fresh, small /tmp,
  * /proc shows only the kernel's own processes, and all of them die with it,
  * no capability is left, so nothing of this can be undone.

Where no namespace can be had (off Linux, or user namespaces switched off)
only the limits apply; ``AUTOGRADER_SANDBOX_LOG`` records which protections
were in force, and the report says so.

Settings come from environment variables set by the grader:
``AUTOGRADER_HIDE`` (paths, ``os.pathsep``-separated), ``AUTOGRADER_MEMORY``
(bytes), ``AUTOGRADER_SANDBOX_LOG`` (a file to append one JSON line to).
"""
import ctypes
import json
import os
import resource
import signal
import sys

CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWUSER = 0x00020000, 0x20000000, 0x10000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_NOATIME, MS_NODIRATIME, MS_RELATIME, MS_STRICTATIME = 1024, 2048, 1 << 21, 1 << 24
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_CAPBSET_DROP, PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 24, 1, 38
FILE_LIMIT = 512 * 2**20  # no file written by student code grows past 512 MiB

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


def _isolate_files(workdir: str, hide) -> None:
    """Runs in the new mount namespace: hide, make read-only, give a fresh /tmp
    that holds nothing but the notebook's own folder (writable)."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount(workdir, workdir, None, MS_BIND)  # a writable mount of the notebook's folder, kept aside
    own = os.open(workdir, os.O_PATH | os.O_DIRECTORY)
    for path in hide:
        if not os.path.lexists(path) or os.path.realpath(path) == os.path.realpath(workdir):
            continue
        if os.path.isdir(path):
            _mount("none", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k,mode=555")
        else:
            _mount("/dev/null", path, None, MS_BIND)
    for point in _mount_points():
        if point == workdir or point.startswith(("/proc", "/sys", "/dev")):
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        st = os.statvfs(point)
        flags |= (MS_NOSUID if st.f_flag & os.ST_NOSUID else 0) | (MS_NODEV if st.f_flag & os.ST_NODEV else 0)
        flags |= MS_NOEXEC if st.f_flag & os.ST_NOEXEC else 0
        # keep the access-time mode: inside a user namespace, changing it is refused
        flags |= MS_NOATIME if st.f_flag & os.ST_NOATIME else 0
        flags |= MS_NODIRATIME if st.f_flag & os.ST_NODIRATIME else 0
        flags |= MS_RELATIME if st.f_flag & os.ST_RELATIME else 0
        flags |= 0 if st.f_flag & (os.ST_NOATIME | os.ST_RELATIME) else MS_STRICTATIME
        try:
            _mount(None, point, None, flags)
        except OSError:
            pass  # a mount that cannot be made read-only (rare) stays as it is
    keep = [(path, os.open(path, os.O_PATH | os.O_DIRECTORY)) for path in _under_tmp(workdir)]
    _mount("none", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=256m,mode=1777")
    for path, fd in keep:  # the course and its Python, when they live under /tmp: back, read-only
        os.makedirs(path, exist_ok=True)
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)  # with what is hidden inside them
        _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        os.close(fd)
    if not workdir.startswith("/tmp/"):
        _mount("none", workdir, "tmpfs", MS_NOSUID | MS_NODEV, "size=4k")  # a place to bind it
    os.makedirs(workdir, exist_ok=True)
    _mount(f"/proc/self/fd/{own}", workdir, None, MS_BIND)  # the one writable folder
    os.close(own)
    os.chdir(workdir)


def _under_tmp(workdir: str) -> list:
    """The folders under /tmp that the kernel needs to run: the Python environment and the course's
    code (a virtual environment or a clone in /tmp), outermost only; the notebook's own folder is bound
    over them afterwards, writable."""
    needed = [sys.prefix, sys.exec_prefix, sys.base_prefix, os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
    needed += [p for p in sys.path if p and os.path.isdir(p)]
    found = sorted({os.path.realpath(p) for p in needed if os.path.realpath(p).startswith("/tmp/")}, key=len)
    keep = []
    for path in found:
        if any(path == k or path.startswith(k + "/") for k in keep):
            continue
        if path == workdir or path.startswith(workdir + "/"):  # the notebook's folder is bound writable anyway
            continue
        keep.append(path)
    return keep


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
    memory = int(os.environ.get("AUTOGRADER_MEMORY", "0") or 0)
    log = os.environ.get("AUTOGRADER_SANDBOX_LOG")
    workdir = os.getcwd()
    kernel = [sys.executable, "-m", "ipykernel_launcher", *argv]
    env = dict(os.environ)
    for name in ("AUTOGRADER_HIDE", "AUTOGRADER_MEMORY", "AUTOGRADER_SANDBOX_LOG"):
        env.pop(name, None)
    env.update(PYTHONDONTWRITEBYTECODE="1")
    state = {"namespaces": False, "limits": True, "pid": os.getpid()}
    isolated = False
    if sys.platform.startswith("linux"):
        try:
            connection = _private_connection_file(argv)
            fonts = _matplotlib_cache()
            _enter_namespaces()
            state["user_namespace"] = os.geteuid() != 0
            _isolate_files(workdir, hide)
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


def _write_log(log, state) -> None:
    if log:
        with open(log, "a") as f:
            f.write(json.dumps(state) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])

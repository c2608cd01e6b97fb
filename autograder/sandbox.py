"""Start a Jupyter kernel that sees what a student has, and nothing else.

nbgrader runs the student's code in a kernel. This module is that kernel's
launcher (the grading kernelspec runs ``python -m autograder.sandbox -f
CONNECTION_FILE ...``). Before it becomes the kernel it:

- points Python at the *view* the grader prepared for this notebook
  (``Sandbox.view``): ``lib/`` with the references of earlier notebooks
  only (what ``bundle --upto`` ships) and the kernel side of the grader
  (``autograder/probe.py``), nothing of the hidden tests;
- makes a control group for the kernel and everything it will start
  (``autograder.cgroup``): ``Sandbox.memory`` bytes and ``Sandbox.pids``
  processes and threads, counted together;
- on Linux, moves into new mount, PID, IPC, UTS and network namespaces (as
  root directly; where root lacks CAP_SYS_ADMIN, as in a container, or as
  another user, inside a user namespace of its own), where
  * the network is loopback only, with no route out: the kernel talks to the
    grader over Unix sockets (Jupyter's ``ipc`` transport, asked for by
    ``execute.SocketKernelManager``), which it binds in its own /tmp; the
    grader reaches them through links to the launcher's descriptors of those
    very sockets, so no kernel can see another's sockets or any service of
    the host, nor make the grader connect anywhere else,
  * the kernel's folder is a fresh, small, writable file system of its own
    (``Sandbox.scratch_mb``): nothing it writes or links there reaches the
    grader, which writes its outputs elsewhere,
  * every top-level folder of the host but the system's own (/usr, /etc, ...)
    is covered by an empty read-only folder (/root, /home, /opt, /var, /run,
    ...), as are the course (wherever ``COURSE_ROOT`` points), the grader's
    folders and every path in ``Sandbox.hide`` (gradebooks, other students'
    submissions, the output folder); only the paths in ``Sandbox.keep``
    (the view, the release notebook) and Python itself come back, read-only,
  * every other file system, /sys and /dev included, is read-only (device
    files still open for writing); /tmp and /dev/shm are fresh, small ones,
  * /proc shows only the kernel's own processes, and all of them die with it;
    its host settings (/proc/sys, /proc/sysrq-trigger, ...) are read-only,
  * no capability is left, and a root grader's kernel runs as a uid of its
    own (``UID_BASE`` + the launcher's pid), which owns no file of the host
    (inside a user namespace it stays the host's uid 0, with no capability:
    the read-only mounts above are then what keeps it off root's files),
  * no keyrings (a seccomp filter refuses their system calls, and /proc/keys
    is hidden) and no pseudo-terminals: both are shared across namespaces;
- keeps only an allow-list of the grader's environment (``ENVIRONMENT``);
- limits each process's address space, the size of files it may write, and
  core dumps; standard streams go to /dev/null and no other descriptor of the
  grader's stays open, so nothing the kernel writes can pass for the grading
  worker's answers.

A grading run forks each launcher from a process that has imported PyTorch
already (``autograder.zygote``): there the kernel runs on in the launcher's
fork, after every step above, where it would otherwise ``exec`` a fresh
Python (``main`` returns what to run). Nothing above changes.

Where no control group can be made (or ``settings.NO_CGROUP`` is set, as a
test does), the process count falls back to
``RLIMIT_NPROC`` of the kernel's own uid (a uid of its own, or a user
namespace of its own, counts this sandbox alone) and memory to the launcher
adding up the resident memory of the sandbox's processes every 0.2 s. Where no
namespace can be had (off Linux, user namespaces switched off, or
``settings.NO_NAMESPACES`` set, as a test does) only the limits and the view
apply, the kernel starts in an empty folder of its own, and ``grade`` refuses
to run unless told to accept that (``preflight``). ``Sandbox.log``
records which protections were in force, and the report says so.
"""
import ctypes
import json
import os
import resource
import signal
import stat
import sys
import tempfile
import time

from autograder import cgroup, course, settings
from autograder.spawn import die_with, forward_signals

CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWUSER = 0x00020000, 0x20000000, 0x10000000
CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS = 0x40000000, 0x08000000, 0x04000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 1
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_NOATIME, MS_NODIRATIME, MS_RELATIME, MS_STRICTATIME = 1024, 2048, 1 << 21, 1 << 24
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_CAPBSET_DROP, PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 24, 1, 38
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
PR_SET_DUMPABLE, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 4, 47, 4
FILE_LIMIT = 512 * 2**20  # no file written by student code grows past 512 MiB
WRITABLE = ("/tmp", "/dev/shm")  # replaced by fresh, small file systems of the kernel's own
UID_BASE = 1_500_000_000  # a root grader runs each kernel as UID_BASE + the launcher's pid: a uid no file has
# the top-level folders a kernel keeps (read-only): the system's programs, libraries and settings
SYSTEM_DIRS = {"usr", "lib", "lib32", "lib64", "libx32", "bin", "sbin", "etc", "dev", "proc", "sys", "tmp"}
# the parts of the kernel's own /proc that change the host (sysctls, interrupts, buses), made read-only
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")
STARTUP = 180  # seconds a kernel may take to bind its sockets
KERNEL_DIR = "/tmp/.kernel"  # in the kernel's own /tmp: its connection file and its sockets
SOCKET_BASE = KERNEL_DIR + "/ipc"
PORTS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
# what the kernel keeps of the grader's environment: locale, paths to Python, threads, devices, the course's
# own settings, and what Jupyter tells a kernel
ENVIRONMENT = {"PATH", "LANG", "LANGUAGE", "TZ", "MPLBACKEND", "NBGRADER_EXECUTION", "COURSE_DEVICE",
               "COURSE_DATA_DIR", "JPY_PARENT_PID", "JPY_SESSION_NAME", "PYTHONHASHSEED", "PYTHONUNBUFFERED"}
ENVIRONMENT_PREFIXES = ("LC_", "OMP_", "MKL_", "OPENBLAS_", "KMP_", "TORCH_", "PYTORCH_", "CUDA_", "NVIDIA_")
# system calls no answer needs and the namespaces do not separate: the kernel's keyrings (keyctl and
# friends), shared by every process of a uid and readable across sandboxes when a key allows it
SECCOMP_DENIED = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}  # add_key, request_key, keyctl

_libc = ctypes.CDLL(None, use_errno=True)
PRELOADED = False  # True in a launcher forked by autograder.zygote: the kernel runs on in this process


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


def apply_limits(memory: int, nproc: int = 0) -> None:
    """Per-process limits: address space, file size, no core dumps, and (where no control group counts
    the sandbox's processes) ``nproc`` processes and threads for the kernel's uid."""
    if memory > 0:
        _limit(resource.RLIMIT_AS, memory)
    if nproc > 0:
        _limit(resource.RLIMIT_NPROC, nproc)
    _limit(resource.RLIMIT_FSIZE, FILE_LIMIT)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _isolate_files(workdir: str, hide, keep, scratch: int, uid=None) -> None:
    """Runs in the new mount namespace. The kernel's folder becomes a fresh writable file system of
    ``scratch`` bytes (owned by ``uid``); every other file system becomes read-only; /tmp and every path in
    ``hide`` are covered by empty folders, into which only the paths in ``keep`` (and Python) come back,
    read-only."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    owner = f",uid={uid},gid={uid}" if uid is not None else ""
    _mount("none", workdir, "tmpfs", MS_NOSUID | MS_NODEV, f"size={scratch},mode=700{owner}")
    kept = []
    for path in sorted({os.path.realpath(p) for p in list(keep) + _python_dirs() if os.path.isdir(p)}, key=len):
        kept.append((path, os.open(path, os.O_PATH | os.O_DIRECTORY), False))
    kept.append((workdir, os.open(workdir, os.O_PATH | os.O_DIRECTORY), True))
    for point in _mount_points():  # /dev too: device files still open for writing, but no file can be added there
        if point == workdir or point.startswith("/proc"):
            continue
        try:
            _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _kept_flags(point))
        except OSError:
            pass  # a mount that cannot be made read-only (rare) stays as it is
    for target in sorted({os.path.realpath(p) for p in [*WRITABLE, *hide] if os.path.lexists(p)}, key=len):
        _cover(target, kept, writable=target in WRITABLE)
    for _, fd, _ in kept:
        os.close(fd)
    _no_terminals()
    os.chdir(workdir)


def _no_terminals() -> None:
    """No pseudo-terminal: /dev/pts is the host's (every sandbox would share it), and no answer needs one."""
    if os.path.isdir("/dev/pts"):
        _mount("none", "/dev/pts", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k")
    if os.path.exists("/dev/ptmx"):
        _mount("/dev/null", "/dev/ptmx", None, MS_BIND)


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


def kernel_environment(environ) -> dict:
    """The kernel's environment: the variables of ``ENVIRONMENT`` only. The grader's own (tokens, paths,
    its settings) stay out: whatever a kernel can read, it can print into its feedback."""
    env = {k: v for k, v in environ.items() if k in ENVIRONMENT or k.startswith(ENVIRONMENT_PREFIXES)}
    env.update(PYTHONDONTWRITEBYTECODE="1", USER="student", LOGNAME="student")
    return env


def _enter_namespaces(network: bool) -> bool:
    """New mount, PID, IPC and UTS namespaces, and a network namespace of its own when ``network``. As root
    directly; where that is refused (root in a container without CAP_SYS_ADMIN) or as another user, inside a
    new user namespace in which this process maps to itself (same uid and gid, so files keep their owners).
    Returns whether a user namespace was needed."""
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | (CLONE_NEWNET if network else 0)
    if os.geteuid() == 0 and _libc.unshare(flags) == 0:
        return False
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(CLONE_NEWUSER | flags), "unshare (user namespace)")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)
    return True


def _loopback_up() -> None:
    """In a new network namespace the loopback device exists but is down, and there is no other device and
    no route: bring loopback up, so that the kernel has 127.0.0.1 to itself and nothing else."""
    import fcntl
    import socket
    import struct
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack("16sH", fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sH14s", b"lo", 0, b""))[:18])[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | IFF_UP, b""))


def _deny_system_calls() -> None:
    """A seccomp filter: the system calls of ``SECCOMP_DENIED`` fail with EPERM (needs no_new_privs)."""
    import platform
    import struct
    arch = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}.get(platform.machine())
    if arch is None:
        return
    ld, jeq, ret = 0x20, 0x15, 0x06  # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET|BPF_K
    allow, deny, kill = 0x7FFF0000, 0x00050000 | 1, 0x80000000  # SECCOMP_RET_ALLOW, ERRNO(EPERM), KILL_PROCESS
    calls = SECCOMP_DENIED[platform.machine()]
    jge, x32 = 0x35, 0x40000000  # BPF_JMP|BPF_JGE|BPF_K; x86's x32 calls are numbered from 0x40000000
    prog = [(ld, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, kill), (ld, 0, 0, 0), (jge, len(calls) + 1, 0, x32)]
    prog += [(jeq, len(calls) - i, 0, nr) for i, nr in enumerate(calls)]  # each jumps to the deny below
    prog += [(ret, 0, 0, allow), (ret, 0, 0, deny)]
    code = b"".join(struct.pack("HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(code)
    fprog = struct.pack("HL", len(prog), ctypes.addressof(buf))
    fbuf = ctypes.create_string_buffer(fprog)
    ulong = ctypes.c_ulong
    _check(_libc.prctl(PR_SET_SECCOMP, ulong(SECCOMP_MODE_FILTER), ulong(ctypes.addressof(fbuf)), ulong(0), ulong(0)),
           "seccomp")


def _drop_capabilities() -> None:
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _deny_system_calls()


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _no_capabilities() -> None:
    """Empty the permitted, effective, inheritable and ambient sets, and make sure they are empty. An ``exec``
    empties them anyway (the bounding set is empty by now); a kernel forked from the zygote runs without one, and
    inside a user namespace of its own it would otherwise keep every capability there (enough to take the covers
    off the grader's folders)."""
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    _check(_libc.capset(ctypes.byref(_CapHeader(0x20080522, 0)), (_CapData * 2)()), "capset")  # version 3
    with open("/proc/self/status") as f:
        left = [line for line in f if line.startswith(("CapInh", "CapPrm", "CapEff", "CapAmb"))
                and int(line.split(":")[1], 16)]
    if left:
        raise OSError(f"capabilities left: {left}")


def _become(uid) -> None:
    """Run as ``uid`` (a number of its own, no supplementary groups): no longer root, so no file of root's
    and no control group setting can be written, and the process limit counts this sandbox alone."""
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)


def _to_nothing() -> None:
    """Standard streams to /dev/null and every other descriptor closed: the kernel talks to the grader only
    through its Jupyter sockets, and no pipe or file of the grader's stays open in it."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0])


def main(argv, stub=None):
    """Start the kernel (see the module's docstring). In a launcher forked by ``autograder.zygote`` (``stub``: the
    socket to the ``autograder.spawn`` process that stands for it), returns in the kernel only, with the
    (arguments, environment) to run ``ipykernel_launcher`` with; otherwise never returns."""
    parent = os.getppid()
    told = settings.Sandbox.from_environ(os.environ)
    hide, keep, view, memory, pids = told.hide, told.keep, told.view, told.memory, told.pids
    scratch = told.scratch_mb * 2**20
    log = _open_log(told.log)
    workdir = os.path.realpath(os.getcwd())
    env = kernel_environment(os.environ)
    if view:  # the kernel imports lib/ and autograder.probe from the view, before anything installed
        env["PYTHONPATH"] = view
        keep.append(view)
    linux = sys.platform.startswith("linux")
    # root hands the kernel a uid of its own; another user's kernel keeps that user's uid
    uid = UID_BASE + os.getpid() if linux and os.geteuid() == 0 else None
    group = cgroup.Group.make(memory, pids) if linux and not settings.switched_off(settings.NO_CGROUP) else None
    # the grader reads which limits were reached from the group, and removes it (see sandbox_log.sandbox_state):
    # the launcher itself is killed with its kernel when nbgrader is done
    state = {"namespaces": False, "network": False, "pid": os.getpid(), "uid": uid,
             "cgroup": group.data if group else None}
    connection = _read_connection(argv)
    sockets = _ipc_sockets(connection)
    # their folder, opened now: it is under /tmp, which the kernel's mount namespace replaces
    socket_dir = os.open(os.path.dirname(sockets[0]), os.O_PATH | os.O_DIRECTORY) if sockets else None
    isolated = False
    if settings.switched_off(settings.NO_NAMESPACES):
        state["error"] = f"namespaces switched off by {settings.NO_NAMESPACES}"
    elif linux:
        try:
            fonts = _matplotlib_cache()
            covered = hide + _host_dirs() + [str(course.ROOT)] + (_course_dirs() if view else [])
            user_namespace = _enter_namespaces(network=sockets is not None)
            if user_namespace:
                uid = state["uid"] = None  # only this process's own uid exists in its user namespace
            state["user_namespace"] = user_namespace
            if sockets is not None:
                _loopback_up()
            _isolate_files(workdir, covered, keep, scratch, uid)
            isolated = True
        except OSError as e:
            state["error"] = str(e)
    if isolated:
        # die with the grading worker that started this launcher (or the zygote that forked it), however it
        # ends: a kernel left behind would grade on for nobody. The kernel, in turn, dies with the launcher, and
        # every process of its PID namespace with the kernel (see _start_kernel). Set here: entering a user
        # namespace clears it.
        die_with(parent)
        state["namespaces"], state["network"] = True, sockets is not None
        kernel_argv = _private_connection(argv, connection, KERNEL_DIR)
        ready_r, ready_w = os.pipe()
        procfd = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY)  # the host's: the kernel mounts its own over it
        child = os.fork()
        if child == 0:  # PID 1 of the new namespace: the kernel itself
            job = None
            try:
                if stub is not None:
                    stub.close()
                os.close(ready_w)
                os.read(ready_r, 1)  # wait until it is in its control group and its sockets are linked
                job = _start_kernel(kernel_argv, env, connection, sockets, fonts, memory,
                                    pids if group is None else 0, uid, user_namespace)
            except BaseException as e:  # noqa: BLE001 - say why, then die: the grader sees a dead kernel
                sys.stderr.write(f"autograder.sandbox: the kernel could not start: {e!r}\n")
            if job is None:
                os._exit(127)
            return job
        os.close(ready_r)
        try:
            if group is not None:
                group.add(child)
        finally:
            os.close(ready_w)
        _write_log(log, state)
        forward_signals(child)
        if stub is not None:
            _end_with(stub, child)
        status = _link_sockets(socket_dir, sockets, child) if sockets is not None else None
        status, over = (status, []) if status is not None else _supervise(child, None if group else memory, procfd)
        _write_log(log, {"ended": True, "hits": over}, close=True)
        code = os.waitstatus_to_exitcode(status) & 0xFF
        if stub is not None:
            _tell(stub, str(code))
        os._exit(code)
    if stub is not None:  # a forked launcher: the spawn process starts a fresh one, which does what follows
        if group is not None:
            group.remove()
        _tell(stub, "usual")
        os._exit(0)
    # limits only: no namespace could be had
    _write_log(log, state, close=True)
    if group is not None:
        group.add(os.getpid())
    folder, private = (tempfile.mkdtemp(prefix=p, dir=told.scratch_dir or None)
                       for p in ("kernel-", "home-"))
    argv = _private_connection(argv, connection, private)
    with open(argv[argv.index("-f") + 1], "w") as f:  # a copy the kernel's uid can read
        json.dump(connection["info"], f)
    if uid is not None:
        for path in [folder, private, argv[argv.index("-f") + 1]] + ([os.path.dirname(sockets[0])] if sockets else []):
            os.chown(path, uid, uid)  # the kernel's own folder, and the folder it binds its sockets in
    os.chdir(folder)  # not the folder the grader writes its results to
    for name in ("HOME", "IPYTHONDIR", "XDG_CACHE_HOME", "MPLCONFIGDIR", "TMPDIR"):
        env[name] = private  # settings and caches in a folder of the kernel's own, not the grader's home
    if linux:
        _drop_capabilities()
    _become(uid)
    if linux:
        die_with(parent)  # after _become, which clears it
    apply_limits(memory, pids if group is None else 0)
    _to_nothing()
    os.execve(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *argv], env)


def _start_kernel(argv, env, connection, sockets, fonts, memory, nproc, uid, user_namespace) -> None:
    """In the new namespaces: a /proc of its own, the private copy of the connection file, then no
    capabilities, its own uid, the limits, no inherited descriptors, and the kernel."""
    try:
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except OSError:
        if not user_namespace:
            raise
        # some containers refuse a new /proc in a user namespace: hide the old one instead
        _mount("none", "/proc", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k")
    for name in ("/proc/keys", "/proc/key-users"):  # the host's keys, which no namespace separates
        if os.path.exists(name):
            _mount("/dev/null", name, None, MS_BIND)
    for name in PROC_READ_ONLY:  # the host's settings: inside a user namespace the kernel is the host's uid 0
        if os.path.exists(name):
            _mount(name, name, None, MS_BIND)
            _mount(None, name, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.makedirs(KERNEL_DIR, mode=0o700, exist_ok=True)
    private = dict(connection["info"])
    if sockets is not None:
        private["ip"] = SOCKET_BASE  # the kernel binds its sockets here, in its own /tmp
    path = os.path.join(KERNEL_DIR, os.path.basename(connection["path"]))
    with open(path, "w") as f:
        json.dump(private, f)
    os.makedirs("/tmp/matplotlib", exist_ok=True)
    for name, text in fonts.items():  # spares matplotlib rebuilding its font list
        with open(os.path.join("/tmp/matplotlib", name), "w") as f:
            f.write(text)
    if uid is not None:
        for p in (KERNEL_DIR, path, "/tmp/matplotlib", *(os.path.join("/tmp/matplotlib", n) for n in fonts)):
            os.chown(p, uid, uid)
    for name in ("HOME", "IPYTHONDIR", "XDG_CACHE_HOME", "TMPDIR"):
        env[name] = "/tmp"
    env["MPLCONFIGDIR"] = "/tmp/matplotlib"
    _drop_capabilities()
    _become(uid)
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # after _become, which clears it
    apply_limits(memory, nproc)
    _no_capabilities()
    _to_nothing()
    if PRELOADED:  # autograder.zygote runs the kernel in this process
        _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # as after an exec: its own /proc files are its own
        return argv, env
    os.execve(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *argv], env)


def _end_with(stub, child: int) -> None:
    """Kill the kernel (PID 1 of its namespace: all of it) when the spawn process standing for this launcher
    ends; nbgrader's kernel manager kills that process to stop the kernel. A signal (SIGIO) says when the
    socket to it closes: a process that made a PID namespace can start no thread."""
    import fcntl
    import socket

    def check(_signum=None, _frame=None):
        try:
            if stub.recv(64, socket.MSG_DONTWAIT):
                return
        except BlockingIOError:
            return
        except OSError:
            pass
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass
    signal.signal(signal.SIGIO, check)
    fd = stub.fileno()
    fcntl.fcntl(fd, fcntl.F_SETOWN, os.getpid())
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)
    check()  # it may have ended already


def _tell(stub, word: str) -> None:
    try:
        stub.sendall(word.encode() + b"\n")
    except OSError:
        pass


def _supervise(child: int, memory: int | None, procfd: int):
    """Wait for the kernel. Without a control group (``memory`` given), also add up the resident memory of
    every process of its PID namespace every 0.2 s, and kill the namespace past ``memory`` bytes."""
    if not memory:
        os.close(procfd)
        while True:
            try:
                return os.waitpid(child, 0)[1], []
            except InterruptedError:
                continue
    try:
        namespace = None
        while True:
            try:
                pid, status = os.waitpid(child, os.WNOHANG)
            except InterruptedError:
                continue
            if pid:
                return status, []
            namespace = namespace or _pid_namespace(procfd, child)
            if namespace and _resident(procfd, namespace) > memory:
                os.kill(child, signal.SIGKILL)  # PID 1 of the namespace: every process in it dies with it
                return os.waitpid(child, 0)[1], ["memory"]
            time.sleep(0.2)
    finally:
        os.close(procfd)


def _pid_namespace(procfd: int, pid: int) -> str:
    try:
        return os.readlink(f"{pid}/ns/pid_for_children", dir_fd=procfd)
    except OSError:
        return ""


def _resident(procfd: int, namespace: str) -> int:
    """Bytes of resident memory of every process in PID namespace ``namespace``."""
    total = 0
    for entry in os.listdir(procfd):
        if not entry.isdigit():
            continue
        try:
            if os.readlink(f"{entry}/ns/pid", dir_fd=procfd) != namespace:
                continue
            fd = os.open(f"{entry}/statm", os.O_RDONLY, dir_fd=procfd)
            try:
                total += int(os.read(fd, 200).split()[1]) * PAGE
            finally:
                os.close(fd)
        except (OSError, ValueError, IndexError):
            continue
    return total


def _host_dirs() -> list:
    """Every top-level folder of the host but the system's own (/usr, /etc, ...): /root, /home, /opt, /srv,
    /var, /run and any other are covered, and only Python and the view come back into them."""
    found = []
    for name in os.listdir("/"):
        path = os.path.join("/", name)
        real = os.path.realpath(path)
        if name in SYSTEM_DIRS or real.split("/")[1] in SYSTEM_DIRS or not os.path.isdir(path):
            continue
        found.append(real)
    return found


def preflight() -> str:
    """'' when kernels can be isolated here (namespaces, network included), else why not: tried in a
    short-lived process, as the launcher would (``python -m autograder.sandbox --preflight``)."""
    import subprocess
    try:
        proc = subprocess.run([sys.executable, "-m", "autograder.sandbox", "--preflight"], capture_output=True,
                              text=True, timeout=60, env=dict(os.environ))
    except (OSError, subprocess.SubprocessError) as e:
        return f"the sandbox could not be tried: {e}"
    return "" if proc.returncode == 0 else (proc.stdout.strip() or proc.stderr.strip()[-300:] or "unknown")


def _preflight() -> int:
    if settings.switched_off(settings.NO_NAMESPACES):
        print(f"namespaces switched off by {settings.NO_NAMESPACES}")
        return 1
    if not sys.platform.startswith("linux"):
        print(f"no namespaces on {sys.platform}: only per-process limits can be applied")
        return 1
    folder = tempfile.mkdtemp(prefix="preflight-")
    try:
        _enter_namespaces(network=True)
        _loopback_up()
        _mount("none", folder, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m")
    except OSError as e:
        print(f"no namespaces here ({e}): only per-process limits can be applied")
        return 1
    finally:
        _libc.umount2(folder.encode(), 2)  # MNT_DETACH; a no-op where nothing was mounted
        os.rmdir(folder)
    return 0


def _read_connection(argv) -> dict:
    """The connection file nbgrader's kernel manager wrote, read now: its folder will be hidden."""
    path = argv[argv.index("-f") + 1]
    with open(path) as f:
        return {"path": path, "info": json.load(f)}


def _ipc_sockets(connection) -> list | None:
    """The socket paths of a kernel that talks over Unix sockets (the ``ipc`` transport, as the grader's
    kernel manager asks): then the kernel can have a network namespace of its own. None for ``tcp``."""
    info = connection["info"]
    if info.get("transport") != "ipc" or not os.path.isabs(str(info.get("ip", ""))):
        return None
    return [f"{info['ip']}-{info[name]}" for name in PORTS]


def _link_sockets(folder: int, sockets, child: int):
    """Once the kernel has bound its sockets (in its own /tmp), open each (never through a link) and make
    each path the grader connects to (in ``folder``) a link to that descriptor of this launcher. The grader
    then reaches the very socket the kernel made at start-up, before any student code ran: nothing the
    kernel later puts at those paths (a link to a socket of the host, say) is ever followed. Returns the
    kernel's wait status if it ended before binding them all, else None."""
    try:
        kept = {}
        deadline = time.monotonic() + STARTUP
        while len(kept) < len(sockets) and time.monotonic() < deadline:
            pid, status = os.waitpid(child, os.WNOHANG)
            if pid:
                return status
            for path in sockets:
                port = path.rsplit("-", 1)[1]
                if port not in kept:
                    kept[port] = _open_socket(f"{SOCKET_BASE}-{port}")
                    kept = {k: v for k, v in kept.items() if v is not None}
            time.sleep(0.02)
        for path in sockets:
            fd = kept.get(path.rsplit("-", 1)[1])
            if fd is not None:
                os.symlink(f"/proc/{os.getpid()}/fd/{fd}", os.path.basename(path), dir_fd=folder)
    finally:
        os.close(folder)
    return None


def _open_socket(path: str):
    """A descriptor of the socket at ``path`` (not a link to one), or None while there is none."""
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW)
    except OSError:
        return None
    if stat.S_ISSOCK(os.fstat(fd).st_mode):
        return fd
    os.close(fd)
    return None


def _private_connection(argv, connection, folder: str) -> list:
    """The kernel's arguments, with its connection file in ``folder`` (the grader's copy is out of reach)."""
    argv = list(argv)
    argv[argv.index("-f") + 1] = os.path.join(folder, os.path.basename(connection["path"]))
    return argv


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


def _open_log(path):
    """The log file, opened now: once isolated, the kernel's launcher cannot reach the grader's folders."""
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600) if path else None


def _write_log(log, state, close: bool = False) -> None:
    if log is not None:
        os.write(log, (json.dumps(state) + "\n").encode())
        if close:
            os.close(log)


if __name__ == "__main__":
    if sys.argv[1:] == ["--preflight"]:
        sys.exit(_preflight())
    main(sys.argv[1:])

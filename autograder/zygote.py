"""Kernels that start without importing PyTorch again: one pre-imported process forks each launcher.

A grading kernel spends about two seconds of processor time importing
PyTorch, NumPy and IPython's kernel before the notebook's first cell runs,
as much as grading a short notebook costs otherwise. A ``Run`` starts this
process once (``start``): it imports those and nothing else of the grader's
(its environment is the kernel's allow-list, it has seen no submission, no
judge and no reference), then waits on a Unix socket in the run's folder,
which no kernel can see. For each kernel nbgrader starts, the kernelspec's
command (``autograder.spawn``, a few standard-library lines) connects, and
this process forks a child that becomes the sandbox launcher
(``autograder.sandbox.main``) with the request's arguments, folder,
environment and standard streams. The launcher isolates and limits the
kernel exactly as before; where it would ``exec`` a fresh Python, it
instead returns, and the forked kernel (already isolated, limited, its own
uid, every descriptor closed) forgets the grader's modules, takes the
kernel's environment and search path, reseeds its random generators, and
runs ``ipykernel_launcher``.

Ends: when the run closes the pipe it holds (or the grader dies), this
process exits, and the launchers it forked die with it (each one's parent
death signal), and their kernels with them. A launcher also ends its kernel
when the ``spawn`` process that stands for it in nbgrader's kernel manager
ends (killed, say, with the grading worker). Where a launcher cannot isolate
its kernel (no namespaces), it tells ``spawn``, which runs the usual launcher
instead: the fallback keeps every behaviour of a fresh process.
"""
import json
import os
import select
import socket
import subprocess
import sys
from pathlib import Path

from .proctree import reap, set_name

PRELOAD = ("torch", "numpy", "ipykernel.kernelapp", "ipykernel.ipkernel", "ipykernel_launcher",
           "matplotlib.pyplot")  # pyplot: half a second of a short notebook's first cell; see _fresh_matplotlib
# what ps and top show each as (/proc/PID/comm): their command lines all read `python -m autograder.zygote`
NAMES = {"zygote": b"grader-zygote", "launcher": b"grader-launcher", "kernel": b"grader-kernel"}
BASE_PATH: list = []  # the search path of a fresh Python, less its first entry (set in the zygote)


FRESH = [sys.executable, "-m", "autograder.sandbox"]  # a launcher in a fresh process: no zygote
SOCKET = "zygote.sock"  # in the run's folder


class Zygote:
    """A zygote for the kernels of one run (or one check service), listening in ``folder``, a folder no kernel
    sees; ``command`` is what a kernelspec's argv starts with (``-f CONNECTION_FILE`` follows)."""

    def __init__(self, folder: Path, environ: dict):
        from . import settings
        from .sandbox import ENVIRONMENT, ENVIRONMENT_PREFIXES
        self.socket = Path(folder) / SOCKET
        self.proc = start(Path(folder), environ)
        # the variables a launcher reads (its settings, the kernel's allow-list, where matplotlib's cache is):
        # spawn sends no other, so that nothing else of the grader's environment reaches the kernel's memory
        names = sorted({*settings.Sandbox.NAMES, settings.NO_CGROUP, settings.NO_NAMESPACES, "COURSE_ROOT", "HOME",
                        "XDG_CACHE_HOME", "MPLCONFIGDIR", *ENVIRONMENT})
        self.command = [sys.executable, "-I", "-S", str(Path(__file__).with_name("spawn.py")), str(self.socket),
                        ",".join(names), ",".join(ENVIRONMENT_PREFIXES)]

    @classmethod
    def where_possible(cls, folder: Path, environ: dict) -> "Zygote | None":
        """A zygote on Linux, unless namespaces are switched off (a launcher that cannot isolate its kernel
        falls back to a fresh process anyway); None elsewhere."""
        from . import settings
        if not sys.platform.startswith("linux") or settings.switched_off(settings.NO_NAMESPACES):
            return None
        zygote = cls(folder, environ)
        if zygote.proc.poll() is not None:  # it could not listen: fresh launchers
            return None
        return zygote

    def close(self) -> None:
        """End the zygote; the launchers it forked, and their kernels, end with it."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
            self.proc.kill()
            self.proc.wait()


def start(folder: Path, environ: dict) -> subprocess.Popen:
    """Start a zygote with the kernel's share of ``environ``, and wait until it listens in ``folder`` (spawn may
    connect at once then: it waits while the zygote imports). Its standard input is the run's end: closing it
    (or the grader's end) ends the zygote. The folder goes on that pipe, not on its command line, which every
    kernel it forks reads as its own (``sys.orig_argv``)."""
    from .sandbox import kernel_environment
    env = kernel_environment(environ)
    if environ.get("COURSE_ROOT"):  # where the course is: the launchers cover it
        env["COURSE_ROOT"] = environ["COURSE_ROOT"]
    proc = subprocess.Popen([sys.executable, "-m", "autograder.zygote"], cwd=Path(__file__).resolve().parent.parent,
                            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # a terminal's Ctrl-C goes to the grader, which ends it
    proc.stdin.write(os.fsencode(folder) + b"\n")
    proc.stdin.flush()
    if proc.stdout.readline().strip() != b"listening":
        proc.kill()
        proc.wait()
    proc.stdout.close()
    return proc


def _serve():
    """Listen, import, then fork a launcher for each connection; returns in a forked kernel only, with what it
    should run."""
    import importlib
    folder = sys.stdin.buffer.readline().rstrip(b"\n")
    os.chdir(folder)  # a socket's path is short (108 bytes): this process binds it by its name in the folder
    old = os.umask(0o077)
    try:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(SOCKET)
    finally:
        os.umask(old)
    listener.listen(64)
    os.write(1, b"listening\n")
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    backend = os.environ.pop("MPLBACKEND", None)  # each kernel sets its own (_fresh_matplotlib)
    for name in PRELOAD:
        importlib.import_module(name)
    if backend is not None:
        os.environ["MPLBACKEND"] = backend
    BASE_PATH[:] = sys.path[1:]
    _name("zygote")
    while True:
        ready = select.select([listener, 0], [], [], 1.0)[0]
        reap()
        if 0 in ready:  # the run closed its end, or the grader is gone
            sys.exit(0)
        if listener in ready:
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            try:
                if _peer_uid(conn) in (os.getuid(), 0) and os.fork() == 0:
                    listener.close()
                    return _launch(conn)
            except OSError:
                pass  # no fork (a limit reached): spawn sees the socket close and starts a fresh launcher
            conn.close()


def _name(which: str) -> None:
    set_name(NAMES[which])  # imported before a kernel forgets the grader's modules


def _peer_uid(conn: socket.socket) -> int:
    import struct
    return struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[1]


def _launch(conn: socket.socket):
    """In the forked child: become the launcher that ``spawn`` asked for."""
    import array
    import random
    from . import sandbox
    from .spawn import die_with
    die_with(os.getppid())  # the zygote
    os.setsid()  # as nbgrader starts a kernel: a session of its own
    _name("launcher")
    head = b""
    while len(head) < 8:
        chunk = conn.recv(8 - len(head))
        if not chunk:
            os._exit(1)
        head += chunk
    size = int.from_bytes(head, "big")
    fds = array.array("i")
    data, ancillary, _, _ = conn.recvmsg(size, socket.CMSG_SPACE(3 * fds.itemsize))
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:  # the spawn process is gone
            os._exit(1)
        data += chunk
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    request = json.loads(data)
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [sys.argv[0], *request["argv"]]
    random.seed()
    conn.sendall(json.dumps({"pid": os.getpid()}).encode() + b"\n")
    sandbox.PRELOADED = True
    return sandbox.main(request["argv"], stub=conn)


def run_kernel(argv, env) -> None:
    """In the isolated kernel: what ``python -m ipykernel_launcher ARGV`` with ``env`` would be, from here."""
    import gc
    import random
    import runpy

    import numpy
    for name in list(sys.modules):  # the grader's modules: the kernel imports its own, from its view
        if name.split(".")[0] in ("autograder", "lib"):
            del sys.modules[name]
    os.environ.clear()
    os.environ.update(env)
    sys.path[:] = [os.getcwd(), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep)), *BASE_PATH]
    sys.argv = [sys.executable, *argv]
    sys.dont_write_bytecode = bool(env.get("PYTHONDONTWRITEBYTECODE"))
    random.seed()
    numpy.random.seed()
    _fresh_matplotlib(env)
    _name("kernel")
    gc.collect()
    runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)


def _fresh_matplotlib(env) -> None:
    """matplotlib, imported in the zygote, as a fresh import in this kernel would leave it: the backend its
    environment names (read once, when matplotlib is imported), and its settings and cache folders looked up
    again (matplotlib remembers them), in the kernel's own folder. The font list stays the zygote's: the launcher
    gives each kernel a copy of the same file."""
    import matplotlib
    for name in ("get_configdir", "get_cachedir"):
        found = getattr(matplotlib, name)
        setattr(matplotlib, name, matplotlib._logged_cached(f"{name}: %s", found.__wrapped__))
    tex = sys.modules.get("matplotlib.texmanager")
    if tex is not None:  # its cache folder, taken when pyplot imported it
        tex.TexManager._cache_dir = Path(matplotlib.get_cachedir(), "tex.cache")
    if env.get("MPLBACKEND"):
        matplotlib.rcParams["backend"] = env["MPLBACKEND"]


if __name__ == "__main__":
    job = _serve()
    if job:
        run_kernel(*job)
    sys.exit(0)

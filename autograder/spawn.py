"""The grading kernelspec's command where a zygote runs (``autograder.zygote``):

    python -I -S spawn.py ZYGOTE_SOCKET NAMES PREFIXES -f CONNECTION_FILE

It asks the zygote to fork a sandbox launcher with this process's arguments,
folder and standard streams, and the variables of its environment that a
launcher reads (named in NAMES, or starting with one of PREFIXES, both
comma-separated: nothing else of the grader's environment may reach a
kernel's memory, which a fork does not wipe), then stands for it in nbgrader's
kernel manager: it passes on the signals it gets (an interrupt, say), ends
with the launcher's exit code, and when it is killed, the launcher sees its
socket close and ends the kernel. Where there is no zygote, or the launcher
cannot isolate the kernel, it runs the usual launcher, ``python -m
autograder.sandbox``, in its place. Standard library only: it starts in
milliseconds.
"""
import array
import ctypes
import json
import os
import signal
import socket
import sys

PR_SET_PDEATHSIG = 1
STARTUP = 120  # seconds the zygote may take to fork a launcher before a fresh one is started instead
LAUNCHERS = "launchers"  # beside the zygote's socket: a file per spawn process, named by its pid, holding its launcher's


def _record(where: str) -> str:
    return os.path.join(os.path.dirname(where), LAUNCHERS, str(os.getpid()))


def launcher(pid: int | None) -> int | None:
    """The process whose tree runs the kernel that nbgrader started as ``pid``: for a spawn process, the launcher
    the zygote forked for it (read from the file it wrote in the run's folder), else ``pid`` itself."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
        at = next(i for i, a in enumerate(args) if a.endswith(b"/autograder/spawn.py"))
        with open(os.path.join(os.path.dirname(os.fsdecode(args[at + 1])), LAUNCHERS, str(pid))) as f:
            return int(f.read())
    except (OSError, ValueError, TypeError, StopIteration, IndexError):
        return pid


def die_with(parent: int) -> None:
    """Be killed when ``parent`` ends, however it ends (the parent-death signal; a process that ended before it
    was set is seen at once)."""
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def forward_signals(pid: int) -> None:
    """Pass the signals that ask a kernel to stop or to interrupt (SIGINT, SIGTERM, SIGHUP, SIGQUIT) on to ``pid``."""
    def forward(signum, _frame):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, forward)


def _usual(argv) -> None:
    os.execv(sys.executable, [sys.executable, "-m", "autograder.sandbox", *argv])


def main(where: str, names: str, prefixes: str, argv: list) -> None:
    die_with(os.getppid())  # the grading worker
    try:
        cwd = os.getcwd()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        os.chdir(os.path.dirname(where))  # by its name in its folder: a socket's path is short (108 bytes)
        try:
            conn.connect(os.path.basename(where))
        finally:
            os.chdir(cwd)
        wanted, starts = set(names.split(",")), tuple(filter(None, prefixes.split(",")))
        env = {k: v for k, v in os.environ.items() if k in wanted or k.startswith(starts)}
        data = json.dumps({"argv": argv, "cwd": cwd, "env": env}).encode()
        conn.sendall(len(data).to_bytes(8, "big"))
        conn.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
        conn.settimeout(STARTUP)
        reader = conn.makefile("rb")
        pid = json.loads(reader.readline())["pid"]
        conn.settimeout(None)
        os.makedirs(os.path.dirname(_record(where)), exist_ok=True)
        with open(_record(where), "w") as f:  # for the grader's processor clock (``launcher``)
            f.write(str(pid))
    except (OSError, ValueError, KeyError):
        return _usual(argv)  # no zygote (yet): a fresh launcher
    forward_signals(pid)
    said = reader.readline()  # the launcher's last word: its exit code, or that it could not isolate
    if said.strip() == b"usual":
        os.unlink(_record(where))
        return _usual(argv)
    try:
        code = int(said)
    except ValueError:
        code = 1
    try:
        os.unlink(_record(where))
    except OSError:
        pass
    os._exit(code)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])

"""The machine's processes as Linux's /proc shows them: whose child each is, and the processor time it spent.

The grader reads them to stop the kernels a worker started (``autograder.worker``), to time what a kernel
spent on a judge's request (``autograder.execute``), and the tests to find what outlived the grader
(tests/processes.py). Where there is no /proc (macOS), there are no processes to read.
"""
import os
from typing import NamedTuple


class Proc(NamedTuple):
    ppid: int
    state: str  # 'R', 'S', ... 'Z' for a zombie: dead, its parent has yet to collect it
    start: int  # clock ticks after boot: with the pid, it names the process (pids are reused)
    ticks: int  # processor time of the process and of its children it collected (utime+stime+cutime+cstime)


def read(pid: int) -> Proc | None:
    """``pid``'s entry, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # after the command's name, which may hold anything
        return Proc(int(fields[1]), fields[0], int(fields[19]), sum(int(x) for x in fields[11:15]))
    except (OSError, IndexError, ValueError):
        return None


def table() -> dict:
    """pid -> Proc of every process now."""
    found = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if entry.isdigit() and (proc := read(int(entry))) is not None:
            found[int(entry)] = proc
    return found


def below(root: int, procs: dict | None = None) -> dict:
    """pid -> Proc of every process under ``root`` (its children, theirs, and so on)."""
    procs = table() if procs is None else procs
    found, frontier = {}, {root}
    while frontier:
        frontier = {pid for pid, p in procs.items() if p.ppid in frontier and pid not in found}
        found.update((pid, procs[pid]) for pid in frontier)
    return found


def set_name(name: bytes) -> None:
    """What ps and top show as this process's name (/proc/PID/comm; at most 15 bytes): for processes forked
    from another, whose command lines are all their parent's."""
    import ctypes
    ctypes.CDLL(None).prctl(15, ctypes.c_char_p(name), 0, 0, 0)  # PR_SET_NAME


def reap() -> None:
    """Collect every child of this process that has ended (a forking server's loop calls it now and then)."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


def cpu(root: int | None) -> float | None:
    """Processor seconds spent so far by ``root`` and every process under it (and the children they collected);
    None when ``root`` is gone or there is no /proc."""
    procs = table()
    if not root or root not in procs:
        return None
    return sum(p.ticks for p in [procs[root], *below(root, procs).values()]) / os.sysconf("SC_CLK_TCK")

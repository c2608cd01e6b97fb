"""Which processes a command started, and which of them outlive it: for the fault-injection tests and the soak
benchmark.

``Watch(pid)`` samples, every ``every`` seconds, the processes that descend from ``pid`` (the grader: its
workers, nbgrader's kernel launchers, the kernels and what they start, each seen from the host's /proc) and
remembers each by (pid, start time), so that a pid the system reuses later is not mistaken for a survivor.
"""
import threading
import time

from autograder import proctree


def _stat(pid: int):
    """(parent pid, start time) of ``pid``, or None when it is gone (or a zombie: it runs nothing)."""
    proc = proctree.read(pid)
    return None if proc is None or proc.state == "Z" else (proc.ppid, proc.start)


def descendants(root: int) -> set:
    """(pid, start time) of every living process below ``root``."""
    return {(pid, p.start) for pid, p in proctree.below(root).items() if p.state != "Z"}


def command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def name(pid: int) -> str:
    """What ps shows a process as (/proc/PID/comm): the zygote's forks name themselves (autograder.zygote)."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def kernels_below(worker: int) -> set:
    """The pids of the processes a grading worker's kernels run in: below the worker, or below the launcher
    that the zygote forked for one of its spawn processes."""
    from autograder import spawn
    found = {pid for pid, _ in descendants(worker)}
    for pid in list(found):
        launcher = spawn.launcher(pid)
        if launcher != pid:
            found |= {launcher} | {p for p, _ in descendants(launcher)}
    return found


class Watch:
    """Every process seen below ``root`` while it runs; ``peak`` is the most seen at once."""

    def __init__(self, root: int, every: float = 0.2):
        self.root, self.every, self.seen, self.peak = root, every, set(), 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            now = descendants(self.root)
            self.seen |= now
            self.peak = max(self.peak, len(now))
            self._stop.wait(self.every)

    def stop(self):
        self._stop.set()
        self._thread.join()

    def alive(self, grace: float = 5.0) -> list:
        """The processes seen that are still running ``grace`` seconds from now at the latest, with their
        command lines (a process told to die may take a moment)."""
        deadline = time.monotonic() + grace
        while True:
            left = [(pid, command(pid)) for pid, start in sorted(self.seen) if (_stat(pid) or (0, None))[1] == start]
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.2)


def as_in_a_terminal() -> None:
    """``preexec_fn`` for a command the test will stop with Ctrl-C: SIGINT as a terminal's foreground process has
    it. A shell that runs the suite in the background (``... &``) has it ignored, and Python keeps that."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)

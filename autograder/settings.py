"""Every limit and option of the grader, with its default, and every ``AUTOGRADER_*`` name: stated here once.

Three ways reach these settings, and each reads them from here:

- the command line: ``grade``, ``check``, ``live serve`` and the check service take their flags' defaults from
  ``Limits`` and ``Service``;
- the course's nbgrader configuration (``autograder/nbgrader_config.py``) sets nbgrader's Execute step from
  ``Limits``;
- the environment: the grader hands a kernel's launcher (``sandbox.py``) its limits and paths as
  ``Sandbox.environ()``, which the launcher reads back with ``Sandbox.from_environ``; the few switches a person
  may set are in ``ENVIRONMENT`` with the rest, each with what it does.

tests/test_settings.py fails when another file states another default or names an ``AUTOGRADER_*`` variable
this module does not define.
"""
import os
import resource
from dataclasses import dataclass, field

# The grader's own processes (the grading workers, the check services) run the notebooks' references on
# arguments a kernel chose: a request that would make them allocate without end fails with a MemoryError
# (a failed, flagged check) instead of taking the machine.
GRADER_MEMORY = 8 * 2**30


def cap_grader_memory() -> None:
    """Limit this grader process's address space to ``GRADER_MEMORY`` bytes."""
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    resource.setrlimit(resource.RLIMIT_AS, (GRADER_MEMORY if hard == resource.RLIM_INFINITY
                                            else min(GRADER_MEMORY, hard), hard))


def default_jobs() -> int:
    """Notebooks graded (or checks judged) at once when not told: one per core."""
    return os.cpu_count() or 1


@dataclass
class Limits:
    """What a kernel may use while it is graded or checked."""
    cell_timeout: int = 60  # seconds per cell (nbgrader's own default is 30; no test cell needs more than 2)
    notebook_timeout: int = 600  # seconds per notebook
    memory: int = 4 * 2**30  # bytes of memory for the kernel and what it starts, together
    output: int = 1_000_000  # bytes of output kept per cell
    scratch_mb: int = 64  # size of the kernel's own folder (and of its /tmp)
    pids: int = 512  # processes and threads of a kernel and everything it starts, together


@dataclass
class Service:
    """The in-notebook check: the class's service on a hub (``check_service.py``) and a student's own
    (``live.py``)."""
    port: int = 10102  # where the hub's service listens
    rate: int = 20  # checks a student may ask for in a minute
    notebooks: int = 4  # notebooks whose spare kernels the hub's service keeps warm
    own_notebooks: int = 2  # notebooks whose spare kernels a student's own service keeps warm
    mode: str = "full"  # what a check shows: full (messages and points), points, or off
    idle: float = 1800  # seconds a student's own service waits for a check before it ends


@dataclass
class Cluster:
    """Grading on Dask (``cluster.py``)."""
    poll: float = 2.0  # seconds between looks at the cluster while waiting for results
    stall: int = 600  # seconds with no matching worker at all before the remaining notebooks are given up
    pool_idle: int = 300  # seconds a worker's pool of grading processes is kept with nothing to grade


@dataclass
class Similar:
    """Looking for copies (``similar.py``): copydetect's winnowing, as MOSS does."""
    threshold: float = 0.7  # share of one submission's own code found in the other that reports a pair
    common: int = 10  # a passage more students than this wrote alike is left out (MOSS's -m, and its default)
    noise: int = 25  # k: the shortest match that counts, in characters of filtered code (copydetect's default)
    guarantee: int = 30  # every match this long is found (copydetect's default); window = guarantee - noise + 1


# The environment's names. The grader sets the first group for each kernel it starts; a person (or a test)
# may set the second; the third is set by the hub or by the notebook's side of the check (lib/checking.py,
# which runs in the student's kernel and names its two itself: a test holds them equal).
VIEW = "AUTOGRADER_VIEW"
KEEP = "AUTOGRADER_KEEP"
HIDE = "AUTOGRADER_HIDE"
MEMORY = "AUTOGRADER_MEMORY"
PIDS = "AUTOGRADER_PIDS"
SCRATCH_MB = "AUTOGRADER_SCRATCH_MB"
SCRATCH_DIR = "AUTOGRADER_SCRATCH_DIR"
SANDBOX_LOG = "AUTOGRADER_SANDBOX_LOG"
SOCKETS = "AUTOGRADER_SOCKETS"
NOTES = "AUTOGRADER_NOTES"
ANSWER_FD = "AUTOGRADER_ANSWER_FD"
NO_CGROUP = "AUTOGRADER_NO_CGROUP"
NO_NAMESPACES = "AUTOGRADER_NO_NAMESPACES"
LIVE_IDLE = "AUTOGRADER_LIVE_IDLE"
CHECK_URL = "AUTOGRADER_CHECK_URL"
LIVE_SOCKET = "AUTOGRADER_LIVE_SOCKET"

ENVIRONMENT = {
    VIEW: "set by the grader: the folder a kernel imports lib/ and the probe from (earlier notebooks' "
          "references only)",
    KEEP: "set by the grader: paths (joined by os.pathsep) the kernel may read although the sandbox covers "
          "their folder",
    HIDE: "set by the grader: paths the sandbox covers (gradebook, other submissions, output folder)",
    MEMORY: "set by the grader: bytes of memory for the kernel and what it starts (Limits.memory)",
    PIDS: "set by the grader: processes and threads for the kernel and what it starts (Limits.pids)",
    SCRATCH_MB: "set by the grader: size in MiB of the kernel's own folder and /tmp (Limits.scratch_mb)",
    SCRATCH_DIR: "set by the grader: where the sandbox makes the kernel's folders",
    SANDBOX_LOG: "set by the grader: file the launcher writes which protections were in force to",
    SOCKETS: "set by the grader: where a kernel's Unix sockets are made",
    NOTES: "set by the grader: file the Execute step writes a notebook's notes (time limits, lost kernels) to",
    ANSWER_FD: "set by the grader: descriptor a grading worker answers on (never its standard output)",
    NO_CGROUP: "set by a person or a test: make no control group; limits fall back to per-process ones",
    NO_NAMESPACES: "set by a person or a test: no namespaces; grade then refuses unless --allow-unisolated",
    LIVE_IDLE: "set by a person or a test: seconds a student's own check service waits before it ends "
               "(Service.idle)",
    CHECK_URL: "set by the hub for each server: the class's check service; check(...) asks it",
    LIVE_SOCKET: "set by a person or a test: the socket of a student's own check service",
}


@dataclass
class Sandbox:
    """What the grader tells a kernel's launcher (``sandbox.py``), through the environment."""
    view: str = ""
    keep: list = field(default_factory=list)
    hide: list = field(default_factory=list)
    memory: int = 0  # 0: no memory limit of the grader's (the launcher's own fallbacks still apply)
    pids: int = Limits.pids
    scratch_mb: int = Limits.scratch_mb
    scratch_dir: str = ""
    log: str = ""

    @classmethod
    def of(cls, limits: Limits, **paths) -> "Sandbox":
        return cls(memory=limits.memory, pids=limits.pids, scratch_mb=limits.scratch_mb, **paths)

    def environ(self) -> dict:
        values = {VIEW: self.view, KEEP: os.pathsep.join(map(str, self.keep)),
                  HIDE: os.pathsep.join(map(str, self.hide)), MEMORY: str(self.memory), PIDS: str(self.pids),
                  SCRATCH_MB: str(self.scratch_mb), SCRATCH_DIR: str(self.scratch_dir), SANDBOX_LOG: str(self.log)}
        return {k: v for k, v in values.items() if v}

    NAMES = (VIEW, KEEP, HIDE, MEMORY, PIDS, SCRATCH_MB, SCRATCH_DIR, SANDBOX_LOG)  # what environ() may set

    @classmethod
    def from_environ(cls, environ) -> "Sandbox":
        """Read back; started without the grader's settings (say, by stock nbgrader), the defaults apply."""
        def paths(name):
            return [p for p in environ.get(name, "").split(os.pathsep) if p]

        def number(name, default):
            return int(environ.get(name, "") or 0) or default
        return cls(view=environ.get(VIEW, ""), keep=paths(KEEP), hide=paths(HIDE), memory=number(MEMORY, 0),
                   pids=number(PIDS, Limits.pids), scratch_mb=number(SCRATCH_MB, Limits.scratch_mb),
                   scratch_dir=environ.get(SCRATCH_DIR, ""), log=environ.get(SANDBOX_LOG, ""))


def switched_off(name: str) -> bool:
    """Whether a person or a test set one of the switches (``NO_CGROUP``, ``NO_NAMESPACES``)."""
    return bool(os.environ.get(name))


def live_idle() -> float:
    return float(os.environ.get(LIVE_IDLE) or Service.idle)

"""What a kernel may use while it is graded, with every default stated here and nowhere else.

``grade``'s flags, the course's nbgrader configuration (``nbgrader_config.py``,
the Execute step in ``execute.py``) and the sandbox (``sandbox.py``) all take
their defaults from ``Limits``; tests/test_limits.py fails when one of them
states another.
"""
import resource
from dataclasses import dataclass

# The grader's own processes (the grading workers, the check services) run the notebooks' references on
# arguments a kernel chose: a request that would make them allocate without end fails with a MemoryError
# (a failed, flagged check) instead of taking the machine.
GRADER_MEMORY = 8 * 2**30


def cap_grader_memory() -> None:
    """Limit this grader process's address space to ``GRADER_MEMORY`` bytes."""
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    resource.setrlimit(resource.RLIMIT_AS, (GRADER_MEMORY if hard == resource.RLIM_INFINITY
                                            else min(GRADER_MEMORY, hard), hard))


@dataclass
class Limits:
    cell_timeout: int = 60  # seconds per cell (nbgrader's own default is 30; no test cell needs more than 2)
    notebook_timeout: int = 600  # seconds per notebook
    memory: int = 4 * 2**30  # bytes of memory for the kernel and what it starts, together
    output: int = 1_000_000  # bytes of output kept per cell
    scratch_mb: int = 64  # size of the kernel's own folder (and of its /tmp)
    pids: int = 512  # processes and threads of a kernel and everything it starts, together

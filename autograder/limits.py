"""What a kernel may use while it is graded, with every default stated here and nowhere else.

``grade``'s flags, the course's nbgrader configuration (``nbgrader_config.py``,
the Execute step in ``execute.py``) and the sandbox (``sandbox.py``) all take
their defaults from ``Limits``; tests/test_limits.py fails when one of them
states another.
"""
from dataclasses import dataclass


@dataclass
class Limits:
    cell_timeout: int = 60  # seconds per cell (nbgrader's own default is 30; no test cell needs more than 2)
    notebook_timeout: int = 600  # seconds per notebook
    memory: int = 4 * 2**30  # bytes of memory for the kernel and what it starts, together
    output: int = 1_000_000  # bytes of output kept per cell
    scratch_mb: int = 64  # size of the kernel's own folder (and of its /tmp)
    pids: int = 512  # processes and threads of a kernel and everything it starts, together

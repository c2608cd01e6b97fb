"""Pick the fastest device there is, share the CPU fairly, and make runs repeatable."""
import os
import random
import time

import torch


def get_device() -> torch.device:
    """CUDA if present, then Apple MPS, then CPU.

    Set the environment variable COURSE_DEVICE (say ``cpu``) to override.
    """
    forced = os.environ.get("COURSE_DEVICE")
    if forced:
        return torch.device(forced)
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def seed_everything(seed: int = 0) -> None:
    """Seed Python's, NumPy's (if installed) and PyTorch's random generators."""
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        return
    np.random.seed(seed)


def set_threads(threads: int | None = None) -> int:
    """Give PyTorch as many CPU threads as there are free cores, and return how many.

    PyTorch starts one thread per core. When other programs keep those cores
    busy, its threads wait for each other at every operation and a training
    step can take many times longer than with fewer threads. The environment
    variable OMP_NUM_THREADS, when set, decides instead (the grader and the
    test suite set it for each of their processes).
    """
    if threads is None:
        given = os.environ.get("OMP_NUM_THREADS", "")
        threads = int(given) if given.isdigit() and int(given) > 0 else free_cores()
    torch.set_num_threads(threads)
    return threads


def free_cores(seconds: float = 0.2) -> int:
    """The cores this process may use that nothing else is using now (at least 1)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    busy = _busy_cores(seconds)
    return max(1, min(cores, round(cores - busy))) if busy is not None else cores


def _busy_cores(seconds: float):
    """How many cores were busy over the next ``seconds``: from /proc/stat on Linux, else the load average."""
    try:
        before = _cpu_times()
        time.sleep(seconds)
        after = _cpu_times()
        total, idle = after[0] - before[0], after[1] - before[1]
        return (1 - idle / total) * (os.cpu_count() or 1) if total > 0 else None
    except OSError:
        try:
            return os.getloadavg()[0]
        except (AttributeError, OSError):  # Windows
            return None


def _cpu_times():
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    return sum(fields[:8]), fields[3] + fields[4]  # all time, idle time (idle + waiting for disk)

"""lib/device.py: the thread count the notebooks choose."""
import os
import subprocess
import sys
import time

import torch

from lib import device


def test_set_threads_takes_what_it_is_given(monkeypatch):
    before = torch.get_num_threads()
    try:
        assert device.set_threads(1) == 1 and torch.get_num_threads() == 1
        monkeypatch.setenv("OMP_NUM_THREADS", "2")
        assert device.set_threads() == 2 and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_free_cores_leaves_out_busy_ones():
    """With one core kept busy by another process, at most all cores but one are free (and at least one)."""
    cores = os.cpu_count() or 1
    assert 1 <= device.free_cores(0.5) <= cores
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)  # let it start spinning
        busy = device.free_cores(0.5)
    finally:
        hog.kill()
        hog.wait()
    assert 1 <= busy <= max(1, cores - 1), f"{busy} of {cores} cores counted free beside a busy process"

"""A grader's scratch folder, removed when its process is gone however it ended.

Grading (``grading.Run``) and the live check (``live.Service``) work in a
folder of their own under the system's temporary folder. The folder holds a
lock for as long as its process lives: a process killed before it could clean
up leaves a folder whose lock is free, and the next one to start removes it.
"""
import fcntl
import os
import shutil
import tempfile
from pathlib import Path

PREFIX, LOCK = "autograder-", "run.lock"


class Folder:
    """A fresh folder (``path``), locked until ``close``; the kernels, running as uids of their own, may pass
    through it (mode 0711) but not list it."""

    def __init__(self, kind: str = ""):
        sweep()
        self.path = Path(tempfile.mkdtemp(prefix=PREFIX + kind))
        self._held = os.open(self.path / "starting", os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._held, fcntl.LOCK_EX)
        os.rename(self.path / "starting", self.path / LOCK)  # a sweeping process sees the lock only once it is held
        self.path.chmod(0o711)

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        if self._held is not None:
            os.close(self._held)
            self._held = None


def sweep() -> None:
    """Remove the scratch folders of processes that are gone (killed before they could clean up)."""
    base = Path(tempfile.gettempdir())
    for folder in base.glob(PREFIX + "*"):
        try:
            fd = os.open(folder / LOCK, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue  # not a scratch folder, or not ours to remove
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # its process is alive
        finally:
            os.close(fd)
        shutil.rmtree(folder, ignore_errors=True)

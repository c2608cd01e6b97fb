"""A real Dask cluster on this machine, for the tests and the benchmark: a ``dask scheduler`` and named
``dask worker`` processes (one thread each), every process in a group of its own so it can be killed whole."""
import json
import os
import signal
import subprocess
import sys
import time

from distributed import Client

from autograder import course


def dask_env(**more):
    """The environment of every process: the scheduler retries a task whose worker died once (as deploy/dask/
    configures it), and each kernel of a one-thread worker gets one PyTorch thread."""
    return dict(os.environ, DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="1", OMP_NUM_THREADS="1",
                PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]), **more)


class Cluster:
    """A scheduler and named workers on localhost, each in a process group of its own."""

    def __init__(self, folder):
        self.folder, self.workers = folder, {}
        folder.mkdir(parents=True, exist_ok=True)
        self.file = folder / "scheduler.json"
        self.scheduler = self._start("scheduler", [sys.executable, "-m", "distributed.cli.dask_scheduler",
                                                   "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                                   "--scheduler-file", str(self.file)])
        deadline = time.monotonic() + 60
        while not self.file.is_file():
            assert time.monotonic() < deadline and self.scheduler.poll() is None, self._logs("scheduler")
            time.sleep(0.2)
        self.address = json.loads(self.file.read_text())["address"]
        self.client = Client(self.address, timeout="30s")

    def _start(self, name, argv, cwd=None, env=None):
        log = open(self.folder / f"{name}.log", "w")
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=cwd or course.ROOT,
                                env=env or dask_env(), start_new_session=True)

    def _logs(self, name):
        return (self.folder / f"{name}.log").read_text()[-3000:]

    def add_worker(self, name, cwd=None, env=None):
        self.workers[name] = self._start(name, [sys.executable, "-m", "distributed.cli.dask_worker", self.address,
                                                "--nthreads", "1", "--nworkers", "1", "--no-dashboard",
                                                "--name", name], cwd, env)
        deadline = time.monotonic() + 90
        while name not in self.names():
            assert time.monotonic() < deadline and self.workers[name].poll() is None, self._logs(name)
            time.sleep(0.3)

    def names(self) -> dict:
        """worker name -> address, as the scheduler sees them now."""
        return {w["name"]: a for a, w in self.client.scheduler_info()["workers"].items()}

    def kill(self, name):
        os.killpg(self.workers.pop(name).pid, signal.SIGKILL)

    def close(self):
        self.client.close()
        for p in [*self.workers.values(), self.scheduler]:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()

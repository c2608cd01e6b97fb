"""Grade on a Dask cluster: one task per submission, on workers that hold the same course.

    dask scheduler                                             # on one machine
    dask worker tcp://HOST:8786 --nthreads 1 --nworkers N      # on each grading machine, in the course's environment
    python -m autograder grade submitted --out graded --cluster tcp://HOST:8786

The client (``grade_on_cluster``) reads each submission once and sends its
bytes as one task. A worker grades it exactly as ``grade --jobs`` does on one
machine (``grading.Run``: the sandboxed kernel, the limits, the judges outside
the kernel), in course folders of its own that it keeps between tasks, and
sends back the result and the graded notebook. The client writes every output,
so grades.csv, the report and the feedback are those of ``--jobs``.

Only workers that hold this very course grade: the client asks each worker
for its ``fingerprint`` (a hash of every file of lib/, autograder/, the
notebooks and the configuration, and the versions of Python, PyTorch and
nbgrader), refuses by name one that differs, and gives each matching worker a
Dask *resource* named after the course's version, which every task requires.
Workers that join later are checked the same way; each task checks again.

A worker that dies mid-task loses nothing: the scheduler gives the task to
another worker, as many times as its ``distributed.scheduler.allowed-failures``
says (deploy/dask/ sets 1: retried once), then the notebook is reported as not
graded, with the reason, and the rest of the class goes on.
"""
import atexit
import functools
import hashlib
import importlib.metadata
import os
import queue
import shutil
import sys
import threading
import time
import uuid
from dataclasses import asdict
from pathlib import Path

from . import course, files, intake
from .grading import (CellResult, Limits, NotebookResult, Run, grader_failed, keep_graded, progress_bar,
                      zero_result)

SOURCES = ("lib/**/*.py", "autograder/**/*.py", "autograder/nbgrader_config.py", "nbgrader_config.py",
           "solutions/*/*.ipynb", "notebooks/*/*.ipynb")
PACKAGES = ("torch", "nbgrader", "numpy", "safetensors")
POLL = 2.0  # seconds between looks at the cluster while waiting for results
STALL = 600  # seconds with no matching worker at all before the remaining notebooks are given up


class WrongCourse(RuntimeError):
    """A worker holds another version of the course than the client."""


class ClusterError(RuntimeError):
    """The cluster cannot grade: no scheduler, or no worker that holds this course."""


@functools.lru_cache(maxsize=None)
def fingerprint() -> tuple:
    """What grading depends on here, as sorted (name, value) pairs: each course file's hash, package versions."""
    found = {}
    for pattern in SOURCES:
        for path in course.ROOT.glob(pattern):
            if path.is_file() and not {"__pycache__", ".ipynb_checkpoints"} & set(path.parts):
                found[path.relative_to(course.ROOT).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    found["python"] = "%d.%d" % sys.version_info[:2]
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return tuple(sorted(found.items()))


def version(prints: tuple) -> str:
    return hashlib.sha256(repr(prints).encode()).hexdigest()[:12]


def differences(ours: tuple, theirs: tuple) -> str:
    """How a worker's fingerprint differs from ours, in words."""
    ours, theirs = dict(ours), dict(theirs)
    said = [f"{name} {theirs.get(name, 'missing')} (here {ours.get(name, 'missing')})"
            for name in ("python", *PACKAGES) if ours.get(name) != theirs.get(name)]
    changed = sorted(n for n in ours.keys() | theirs.keys()
                     if "/" in n and ours.get(n) != theirs.get(n))
    if changed:
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        said.append(f"{len(changed)} course file(s) differ: {', '.join(changed[:3])}{more}")
    return "; ".join(said)


# ---- the worker's side ----

_pools: dict = {}
_pools_lock = threading.Lock()


class _Pool:
    """A grading Run in this worker process, with one course folder per thread of the worker."""

    def __init__(self, assignments, limits, threads):
        # kernels run as with --jobs: without the malloc setting a Dask nanny gives its worker
        os.environ.pop("MALLOC_TRIM_THRESHOLD_", None)
        # each kernel's PyTorch threads: the worker's OMP_NUM_THREADS (a Dask nanny sets 1), else a share of the cores
        kernel_threads = int(os.environ.get("OMP_NUM_THREADS") or 0) or None
        self.run = Run(assignments, threads, limits, threads=kernel_threads)
        self.free = queue.Queue()
        for folder in self.run.workers:
            self.free.put(folder)

    def idle(self) -> bool:
        return self.free.qsize() == len(self.run.workers)


def _pool(assignments, limits) -> _Pool:
    from distributed import get_worker
    key = (tuple(assignments), repr(limits))
    with _pools_lock:
        for other in [k for k, p in _pools.items() if k != key and p.idle()]:
            _pools.pop(other).run.close()
        if key not in _pools:
            _pools[key] = _Pool(assignments, limits, get_worker().state.nthreads)
        return _pools[key]


def grade_task(wanted: str, assignments, limits: Limits, hide, student: str, assignment: str, name: str,
               data: bytes):
    """On a worker: grade one submission (its file's bytes). Returns (the result as a dict, the graded notebook)."""
    if version(fingerprint()) != wanted:
        raise WrongCourse(f"this worker holds course version {version(fingerprint())}, not {wanted}")
    pool = _pool(assignments, limits)
    folder = pool.free.get()
    incoming = pool.run.dir / "incoming" / uuid.uuid4().hex
    try:
        incoming.mkdir(parents=True)
        path = incoming / name
        path.write_bytes(data)
        # the client's folders (its submissions, its outputs) are hidden from the kernel where this machine has them
        r, graded = pool.run.grade(folder, student, assignment, path, [h for h in hide if os.path.exists(h)])
        return asdict(r), graded and files.read(graded)
    finally:
        shutil.rmtree(incoming, ignore_errors=True)
        pool.free.put(folder)


def _close_pools():
    for p in _pools.values():
        p.run.close()


atexit.register(_close_pools)


async def _take(dask_worker, resource: str):
    """On a worker: offer its threads for tasks that need ``resource`` (the course's version)."""
    await dask_worker.set_resources(**{resource: dask_worker.state.nthreads})


# ---- the client's side ----

class _Workers:
    """The cluster's workers as this client sees them: those that hold this course, and those refused."""

    def __init__(self, client, prints: tuple, log=print, allow_unisolated: bool = False):
        self.client, self.prints, self.log, self.allow_unisolated = client, prints, log, allow_unisolated
        self.resource = f"course-{version(prints)}"
        self.good, self.refused = set(), {}

    def look(self) -> set:
        """Check workers not seen before; returns the matching workers now alive."""
        alive = set(self.client.scheduler_info()["workers"])
        for address in sorted(self.good - alive):
            self.good.discard(address)
            self.log(f"worker {address} left the cluster; a notebook it was grading goes to another worker",
                     file=sys.stderr)
        new = sorted(alive - self.good - set(self.refused))
        if new:
            answers = self.client.run(fingerprint, workers=new, on_error="return")
            for address, theirs in answers.items():
                if isinstance(theirs, BaseException):
                    why = f"it could not say which course it holds ({type(theirs).__name__}: {theirs})"
                elif tuple(map(tuple, theirs)) != self.prints:
                    why = f"it holds another version of the course: {differences(self.prints, tuple(map(tuple, theirs)))}"
                else:
                    why = "" if self.allow_unisolated else self._isolation(address)
                    if not why:
                        self.client.run(_take, resource=self.resource, workers=[address])
                        self.good.add(address)
                        continue
                self.refused[address] = why
                self.log(f"refusing worker {address}: {why}. Give it this course's checkout and environment "
                         f"(the same commit, `pip install -e .[cluster]`) on a machine where its kernels can be "
                         f"isolated, and restart it.", file=sys.stderr)
        return set(self.good)


    def _isolation(self, address) -> str:
        """'' when the worker can isolate its kernels (``sandbox.preflight``), else why it cannot."""
        from .sandbox import preflight
        answer = self.client.run(preflight, workers=[address], on_error="return")[address]
        if isinstance(answer, BaseException):
            return f"it could not say whether its kernels can be isolated ({type(answer).__name__}: {answer})"
        return f"its kernels cannot be isolated: {answer} (--allow-unisolated accepts that)" if answer else ""


def _allowed_failures(dask_scheduler=None) -> int:
    return dask_scheduler.allowed_failures


def _from_dict(d: dict) -> NotebookResult:
    cells = [CellResult(**c) for c in d.pop("cells")]
    return NotebookResult(**d, cells=cells)


def grade_on_cluster(address: str, submissions, keep: Path | None, limits: Limits, progress: bool, hide=(),
                     allow_unisolated: bool = False):
    """``grading.grade_many`` on the Dask cluster whose scheduler is at ``address``; workers that cannot
    isolate their kernels are refused unless ``allow_unisolated``."""
    try:
        from distributed import Client, wait
        from distributed.scheduler import KilledWorker
    except ImportError:
        raise ClusterError("grading on a cluster needs Dask: pip install -e .[cluster]") from None
    try:
        client = Client(address)  # waits distributed.comm.timeouts.connect (30 s)
    except OSError as e:
        raise ClusterError(f"no Dask scheduler answers at {address}: {e}") from None
    results = [None] * len(submissions)
    bar = None
    try:
        prints = fingerprint()
        workers = _Workers(client, prints, allow_unisolated=allow_unisolated)
        try:
            client.wait_for_workers(1, timeout=60)
        except TimeoutError:
            raise ClusterError(f"the scheduler at {address} has no workers") from None
        if not workers.look():
            raise ClusterError(f"no worker at {address} holds this course (version {version(prints)}); "
                               f"see the refusals above")
        retries = client.run_on_scheduler(_allowed_failures)
        print(f"grading on {address}: {len(workers.good)} worker(s) hold this course (version {version(prints)}); "
              f"a task whose worker dies is retried {retries} time(s)", file=sys.stderr)
        assignments = sorted({aid for _, aid, _ in submissions})
        hide = [str(Path(h).resolve()) for h in hide]
        run_id = uuid.uuid4().hex[:8]
        bar = progress_bar(len(submissions), progress)

        def submit(i):
            student, aid, path = submissions[i]
            data, notes = intake.read_bytes(path)
            if data is None:
                results[i] = zero_result(student, aid, path, notes[0], notes)
                return None
            return client.submit(grade_task, version(prints), assignments, limits, hide, student, aid,
                                 Path(path).name, data, key=f"grade-{run_id}-{i}", pure=False,
                                 resources={workers.resource: 1})

        pending = {}
        for i in range(len(submissions)):
            f = submit(i)
            if f is None:
                bar and bar.update(1)
            else:
                pending[f] = i
        lonely_since = None
        while pending:
            try:
                done = wait(list(pending), timeout=POLL, return_when="FIRST_COMPLETED").done
            except TimeoutError:
                done = set()
            if not done:
                if workers.look():
                    lonely_since = None
                elif lonely_since is None:
                    lonely_since = time.monotonic()
                elif time.monotonic() - lonely_since > STALL:
                    for f, i in pending.items():
                        student, aid, path = submissions[i]
                        results[i] = zero_result(student, aid, path, f"not graded: no worker holding this course "
                                                 f"was left on the cluster for {STALL} s; grade it again")
                    break
                continue
            for f in done:
                i = pending.pop(f)
                student, aid, path = submissions[i]
                if f.status == "finished":
                    d, graded = f.result()
                    r = _from_dict(d)
                    r.notebook = Path(path).name
                    keep_graded(r, graded, keep)
                    results[i] = r
                else:
                    e = f.exception()
                    if isinstance(e, KilledWorker):
                        results[i] = zero_result(student, aid, path, (
                            f"not graded: the grading worker died each time it graded this notebook "
                            f"({retries + 1} attempt(s)); grade it again"))
                    elif isinstance(e, WrongCourse):
                        results[i] = zero_result(student, aid, path, f"not graded: {e}")
                    else:
                        results[i] = grader_failed(student, aid, path, e)
                f.release()
                bar and bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        client.close()
    return results

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
import asyncio
import atexit
import os
import queue
import shutil
import sys
import threading
import time
import uuid
from pathlib import Path

from . import files, intake
from .fingerprint import differences, fingerprint, version
from .settings import Cluster, Limits
from .grading import Run, grade_once, grader_failed, keep_graded, progress_bar, zero_result
from .results import as_dict, from_dict

POLL = Cluster.poll  # the defaults, stated in autograder/settings.py
STALL = Cluster.stall


class WrongCourse(RuntimeError):
    """A worker holds another version of the course than the client."""


class ClusterError(RuntimeError):
    """The cluster cannot grade: no scheduler, or no worker that holds this course."""


# ---- the worker's side ----

_pools: dict = {}
_pools_lock = threading.Lock()
IDLE = Cluster.pool_idle


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
        self.last = time.monotonic()

    def idle(self, seconds: float = 0) -> bool:
        return self.free.qsize() == len(self.run.workers) and time.monotonic() - self.last >= seconds


def _take_folder(assignments, limits):
    """(pool, a free course folder of it) for this task. Taken under the lock: no other task can find the pool
    idle and close it in between. Pools of other runs that are idle are closed (their grading processes hold
    memory), and a pool left idle for IDLE seconds is closed by ``_close_idle``."""
    from distributed import get_worker
    key = (tuple(assignments), repr(limits))
    with _pools_lock:
        for other in [k for k, p in _pools.items() if k != key and p.idle()]:
            _pools.pop(other).run.close()
        if key not in _pools:
            _pools[key] = _Pool(assignments, limits, get_worker().state.nthreads)
            threading.Thread(target=_close_idle, args=(key, _pools[key]), daemon=True).start()
        pool = _pools[key]
        return pool, pool.free.get_nowait()  # a thread grades one task at a time: one folder is free


def _give_back(pool: _Pool, folder) -> None:
    with _pools_lock:
        pool.last = time.monotonic()
        pool.free.put(folder)


def _close_idle(key, pool: _Pool) -> None:
    """Close ``pool`` once it has been idle for IDLE seconds."""
    while True:
        time.sleep(min(IDLE, 30))
        with _pools_lock:
            if _pools.get(key) is not pool:
                return
            if pool.idle(IDLE):
                _pools.pop(key).run.close()
                return


def grade_task(wanted: str, assignments, limits: Limits, hide, student: str, assignment: str, name: str,
               data: bytes):
    """On a worker: grade one submission (its file's bytes). Returns (the result as a dict, the graded notebook)."""
    if version(fingerprint()) != wanted:
        raise WrongCourse(f"this worker holds course version {version(fingerprint())}, not {wanted}")
    pool, folder = _take_folder(assignments, limits)
    incoming = pool.run.dir / "incoming" / uuid.uuid4().hex
    try:
        incoming.mkdir(parents=True)
        path = incoming / name
        path.write_bytes(data)
        # the client's folders (its submissions, its outputs) are hidden from the kernel where this machine has them
        r, graded = grade_once(pool.run, folder, student, assignment, path, [h for h in hide if os.path.exists(h)])
        return as_dict(r), graded and files.read(graded)
    finally:
        shutil.rmtree(incoming, ignore_errors=True)
        _give_back(pool, folder)


def _close_pools():
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for p in pools:
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


def grade_on_cluster(address: str, submissions, keep: Path | None, limits: Limits, progress: bool, hide=(),
                     allow_unisolated: bool = False, on_result=None):
    """``runner.grade_many`` on the Dask cluster whose scheduler is at ``address``; workers that cannot
    isolate their kernels are refused unless ``allow_unisolated``.

    Every outcome is caught per task. Lost with the scheduler (a restart, a dropped connection), the tasks in
    flight are reported by name as not graded (the grader's fault: a resumed ``grade`` grades them), and every
    result that arrived before is kept."""
    try:
        from distributed import Client
    except ImportError:
        raise ClusterError("grading on a cluster needs Dask: pip install -e .[cluster]") from None
    try:
        client = Client(address)  # waits distributed.comm.timeouts.connect (30 s)
    except OSError as e:
        raise ClusterError(f"no Dask scheduler answers at {address}: {e}") from None
    results = [None] * len(submissions)
    bar = None

    def record(i, r):
        results[i] = r
        if on_result is not None:
            on_result(i, r)
        if bar is not None:
            bar.update(1)

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
        bar = progress_bar(len(submissions), progress)
        pending = {}
        try:
            _submit_all(client, workers, submissions, limits, hide, pending, record)
            _collect(client, workers, submissions, keep, retries, pending, record)
        except KeyboardInterrupt:
            try:
                client.cancel(list(pending))  # no worker grades on for nobody
            except Exception:  # noqa: BLE001
                pass
            raise
        except (Exception, asyncio.CancelledError) as e:  # noqa: BLE001 - the scheduler is gone: keep what arrived
            lost = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
            print(f"lost the Dask scheduler at {address} ({lost}); {len(pending)} notebook(s) in flight are "
                  f"reported as not graded: run the same command again to grade them", file=sys.stderr)
            for i in sorted(pending.values()):
                student, aid, path = submissions[i]
                print(f"  not graded: {student} {aid}", file=sys.stderr)
                record(i, grader_failed(student, aid, path, f"the Dask scheduler was lost ({lost})"))
    finally:
        if bar is not None:
            bar.close()
        try:
            client.close(timeout=10)
        except Exception:  # noqa: BLE001 - a client whose scheduler is gone may fail to close: nothing is lost
            pass
    return results


def _submit_all(client, workers: "_Workers", submissions, limits, hide, pending: dict, record) -> None:
    """One task per submission, each holding its notebook's bytes, into ``pending`` (future -> index)."""
    assignments = sorted({aid for _, aid, _ in submissions})
    hide = [str(Path(h).resolve()) for h in hide]
    run_id = uuid.uuid4().hex[:8]
    wanted = version(workers.prints)
    for i, (student, aid, path) in enumerate(submissions):
        data, notes = intake.read_bytes(path)
        if data is None:
            record(i, zero_result(student, aid, path, notes[0], notes))
            continue
        f = client.submit(grade_task, wanted, assignments, limits, hide, student, aid, Path(path).name, data,
                          key=f"grade-{run_id}-{i}", pure=False, resources={workers.resource: 1})
        pending[f] = i


def _collect(client, workers: "_Workers", submissions, keep, retries: int, pending: dict, record) -> None:
    """Record each task's result as it finishes; give up the rest when no worker is left for STALL seconds."""
    from distributed import wait
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
                for f, i in list(pending.items()):
                    student, aid, path = submissions[i]
                    del pending[f]
                    record(i, grader_failed(student, aid, path, f"no worker holding this course was left on the "
                                                                 f"cluster for {STALL} s"))
                return
            continue
        for f in done:
            i = pending[f]
            student, aid, path = submissions[i]
            r = _outcome(f, student, aid, path, keep, retries)
            del pending[f]
            record(i, r)


def _outcome(f, student, aid, path, keep, retries: int):
    """The result of one finished task, whatever became of it: graded, failed, cancelled, undecodable."""
    from distributed.scheduler import KilledWorker
    try:
        if f.status == "finished":
            d, graded = f.result(timeout=60)
            r = from_dict(d)
            r.notebook = Path(path).name
            keep_graded(r, graded, keep)
            return r
        if f.status == "cancelled":
            return grader_failed(student, aid, path, "its task was cancelled (the scheduler restarted or lost it)")
        e = f.exception(timeout=60)
        if isinstance(e, KilledWorker):
            return grader_failed(student, aid, path, f"the grading worker died each time it graded this notebook "
                                                     f"({retries + 1} attempt(s))")
        if isinstance(e, WrongCourse):
            return grader_failed(student, aid, path, str(e))
        return grader_failed(student, aid, path, e)
    except (Exception, asyncio.CancelledError) as e:  # noqa: BLE001 - one task's trouble costs that task only
        return grader_failed(student, aid, path, e)
    finally:
        try:
            f.release()
        except Exception:  # noqa: BLE001
            pass

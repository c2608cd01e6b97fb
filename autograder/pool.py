"""Grade a class on this machine: ``jobs`` grading workers take the submissions in turn.

Each worker is a thread of this process driving one ``autograder.worker``
process in its own scratch course folder of a ``grading.Run`` (its own
gradebook, its own sandboxed kernels), so no two nbgrader processes share a
database and one stuck submission holds up only its own worker.
``autograder.cluster`` is the same job on the workers of a Dask cluster;
``autograder.runner`` picks one of the two.
"""
import queue
import threading
from pathlib import Path

from .grading import Closed, Run, grade_once, keep_graded, progress_bar
from .settings import Limits


def grade_on_this_machine(submissions, jobs: int, keep: Path | None, limits: Limits, progress: bool, hide=(), on_result=None):
    """Grade ``submissions`` ((student, assignment, path) each) with ``jobs`` workers; the results in order.

    ``on_result(i, result)`` is called as each notebook is graded. Interrupted (Ctrl-C), every worker and kernel
    is stopped, the notebooks in flight get no result (None), and KeyboardInterrupt goes on up."""
    jobs = max(1, min(jobs, len(submissions)))
    run = Run(sorted({aid for _, aid, _ in submissions}), jobs, limits, hide)
    todo = queue.Queue()
    for i, sub in enumerate(submissions):
        todo.put((i, *sub))
    results = [None] * len(submissions)
    bar = progress_bar(len(submissions), progress)
    done = threading.Lock()

    def work(worker):
        while not run.closed:
            try:
                i, student, aid, path = todo.get_nowait()
            except queue.Empty:
                return
            try:
                r, graded = grade_once(run, worker, student, aid, Path(path))
                keep_graded(r, graded, keep)
            except Closed:
                return
            with done:
                if run.closed:  # interrupted: what the stopped worker answered is no grade
                    return
                results[i] = r
                if on_result is not None:
                    on_result(i, r)
                if bar is not None:
                    bar.update(1)

    threads = [threading.Thread(target=work, args=(w,), daemon=True) for w in run.workers]
    try:
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.5)  # in short waits: Ctrl-C reaches this thread between them
    finally:
        with done:
            run.closed = True
        if bar is not None:
            bar.close()
        run.close()
        for t in threads:
            t.join(30)
    return results

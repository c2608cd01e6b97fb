"""Grade many notebooks: on this machine's cores (``autograder.pool``) or on a Dask cluster
(``autograder.cluster``). The commands (``autograder.__main__``) and the tests call this, never a runner itself.

Both runners take the same arguments and keep the same promises: every outcome is caught per submission (a
notebook the grader fails on gets a result with its ``fault``, and the others grade on), each result is handed
to ``on_result`` as it arrives, and an interrupted run stops every worker and kernel and raises
KeyboardInterrupt.
"""
from pathlib import Path

from . import course
from .settings import Limits
from .pool import grade_on_this_machine
from .results import NotebookResult


def grade_many(submissions, jobs: int = 1, keep_autograded: Path | None = None, limits: Limits | None = None,
               progress: bool = False, hide=(), cluster: str | None = None, allow_unisolated: bool = True,
               on_result=None):
    """Grade ``submissions``, a list of (student_id, assignment_id, notebook path).

    Returns a list of NotebookResult in the same order. ``jobs`` workers grade
    at once on this machine, or, with ``cluster`` (a Dask scheduler's address),
    the workers of that cluster; with ``progress``, a bar on stderr counts
    finished notebooks. ``on_result(i, result)`` is called as each notebook is
    graded (its graded notebook already kept in ``keep_autograded``). The
    kernels see none of the folders in ``hide``.
    """
    if not submissions:
        return []
    limits = limits or Limits()
    if cluster:
        from .cluster import grade_on_cluster  # Dask is the `cluster` extra: imported only when asked for
        return grade_on_cluster(cluster, submissions, keep_autograded, limits, progress, hide, allow_unisolated,
                                on_result)
    return grade_on_this_machine(submissions, jobs, keep_autograded, limits, progress, hide, on_result)


def check_notebook(path: Path, assignment: str | None = None) -> NotebookResult:
    """Grade one notebook, wherever it lies, against its source in solutions/."""
    path = Path(path)
    aid = assignment or course.detect_assignment(path)
    return grade_many([("you", aid, path)])[0]

"""A long-lived nbgrader process that autogrades one submission per request.

Importing nbgrader takes seconds; a class of 30 notebooks would pay it 30
times with one ``nbgrader autograde`` process each. The pool (``autograder.pool``) starts one
worker per job instead, in that worker's scratch course folder, and sends it
requests on stdin, one JSON line each (it first releases the course's
assignments into its own gradebook, with nbgrader's generate_assignment, and
says which it could not release, and why):
``{"assignment": ..., "student": ..., "env": {...}}``. For each, the worker
sets the environment (read by the sandboxed kernel and the Execute step), runs
nbgrader's own autograde for that student, and answers with one line
``@@result {"success": ..., "log": ...}``, on a pipe of its own (the
descriptor named by ``settings.ANSWER_FD``), never on its standard output:
the kernels nbgrader starts inherit no descriptor of the worker's, and nothing
a kernel writes anywhere can pass for an answer. The grader kills and
replaces a worker that does not answer in time.

    python -m autograder.worker COURSE_ROOT
"""
import json
import os
import sys

from autograder import proctree
from autograder import settings
from autograder.settings import cap_grader_memory

MARK = "@@result "


def _warm_up() -> None:
    """Import what the judges need (PyTorch above all) while the first kernel starts and runs the notebook."""
    import safetensors.torch  # noqa: F401
    import autograder.checks  # noqa: F401


def _orphaned(parent: int) -> None:
    """End this worker, and the kernel it runs, when the grader that started it is gone (killed, say, with the
    Dask worker it served): grading on for nobody would only take a core from the rest of the class."""
    import signal
    import time
    while os.getppid() == parent:
        time.sleep(1)
    children = [pid for pid, p in proctree.table().items() if p.ppid == os.getpid()]
    for child in children:  # the kernels nbgrader started, each in a session (and group) of its own
        try:
            os.killpg(child, signal.SIGKILL)
        except OSError:
            pass
    if os.getpgrp() == os.getpid():  # the group the grader started it in: this worker and nbgrader's children
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os._exit(1)


def _last_error(answer: dict) -> str:
    """The last line of an nbgrader answer's log and error that names an error, for the report."""
    lines = [line.strip() for line in ((answer.get("log") or "") + "\n" + (answer.get("error") or "")).splitlines()
             if "rror" in line]
    return (lines[-1] if lines else "nbgrader gave no reason")[:300]


def main(root: str) -> None:
    import threading

    from nbgrader.apps import NbGraderAPI
    from traitlets.config.loader import PyFileConfigLoader

    from autograder.nbgrader_run import alembic_head_in_process

    cap_grader_memory()  # the judges run the notebook's references here, on arguments a kernel chose
    threading.Thread(target=_orphaned, args=(os.getppid(),), daemon=True).start()
    threading.Thread(target=_warm_up, daemon=True).start()
    os.chdir(root)
    alembic_head_in_process()
    config = PyFileConfigLoader("nbgrader_config.py", path=root).load_config()
    api = NbGraderAPI(config=config)
    fd = int(os.environ.pop(settings.ANSWER_FD))
    os.set_inheritable(fd, False)  # no process the worker starts gets it
    out = os.fdopen(fd, "w")
    failed = {}  # an assignment that cannot be released fails its own submissions, not the others'
    for aid in sorted(os.listdir(os.path.join(root, "solutions"))):
        release = api.generate_assignment(aid, force=True, create=True)
        if not release.get("success"):
            failed[aid] = _last_error(release)
    out.write(MARK + json.dumps({"ready": True, "failed": failed}) + "\n")
    out.flush()
    for line in sys.stdin:
        task = json.loads(line)
        os.environ.update(task["env"])
        result = api.autograde(task["assignment"], task["student"], force=True, create=True)
        answer = {"success": bool(result.get("success")), "log": (result.get("log") or "")[-4000:],
                  "error": (result.get("error") or "")[-2000:]}
        out.write(MARK + json.dumps(answer) + "\n")
        out.flush()


if __name__ == "__main__":
    main(sys.argv[1])

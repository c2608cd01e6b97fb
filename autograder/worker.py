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

A worker's imports (nbgrader, PyTorch and the judges: about three seconds of
processor time) are paid once per run, not once per worker: a run starts a
*template* (``Template``, ``python -m autograder.worker --template``) that
imports them and forks each worker it is asked for, with the pipes the grader
made for it; a forked worker then runs ``main`` as a started one would.

    python -m autograder.worker --template
"""
import json
import os
import select
import socket
import subprocess
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


def _imports() -> None:
    """What every worker imports: nbgrader and its API, what the course's nbgrader configuration imports (it is
    loaded here once), the judges and PyTorch."""
    import nbgrader.apps  # noqa: F401
    from traitlets.config.loader import PyFileConfigLoader

    from autograder import course
    from autograder.nbgrader_run import alembic_head_in_process
    alembic_head_in_process()
    PyFileConfigLoader(course.CONFIG.name, path=str(course.CONFIG.parent)).load_config()
    _warm_up()


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


class Template:
    """A process that has imported what a worker needs, and forks workers on request (see the module's doc).

    Its standard input is one end of a socket pair: the run sends each request on it (``fork``), and closing it
    (or the grader's death) ends the template; the workers it forked then end too (``_orphaned``)."""

    def __init__(self, env: dict):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "autograder.worker", "--template"], stdin=theirs,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                         start_new_session=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.sock = ours
        self.sock.settimeout(300)  # its imports take seconds; a template that hangs leaves fresh workers to start

    @staticmethod
    def possible() -> bool:
        return sys.platform.startswith("linux") and hasattr(os, "pidfd_open")

    def fork(self, root, env: dict, stdin: int, answers: int) -> "Forked | None":
        """A worker in course folder ``root`` with environment ``env``, reading requests on descriptor ``stdin``
        and answering on ``answers`` (both stay the caller's to close); None when the template is gone."""
        try:
            request = json.dumps({"root": str(root), "env": env}).encode()
            socket.send_fds(self.sock, [len(request).to_bytes(8, "big") + request], [stdin, answers])
            reply, fds, _, _ = socket.recv_fds(self.sock, 64, 1)
        except OSError:
            return None
        if not fds:
            return None
        return Forked(int(reply), fds[0])

    def close(self) -> None:
        self.sock.close()
        self.proc.kill()
        self.proc.wait()


class Forked:
    """A worker forked by the template, as ``Worker`` uses a ``subprocess.Popen``: its pid, and a descriptor
    that becomes readable when it ends (pidfd_open: the pid cannot be another process's by then)."""

    def __init__(self, pid: int, pidfd: int):
        self.pid, self._pidfd = pid, pidfd
        self.returncode, self.stdin = None, None  # the caller sets stdin: its end of the requests' pipe

    def poll(self):
        if self.returncode is None and select.select([self._pidfd], [], [], 0)[0]:
            self.returncode = -1  # its exit status is the template's to collect
            os.close(self._pidfd)
        return self.returncode

    def wait(self):
        while self.poll() is None:
            select.select([self._pidfd], [], [], 1.0)
        return self.returncode


def _serve() -> None:
    """The template: import, then fork a worker for each request on standard input (a socket)."""
    from autograder.proctree import reap, set_name
    _imports()
    set_name(b"grader-template")
    control = socket.socket(fileno=0)
    while True:
        ready = select.select([control], [], [], 1.0)[0]
        reap()  # the workers that ended
        if not ready:
            continue
        try:
            head, fds, _, _ = socket.recv_fds(control, 8, 2)
            if not head:
                os._exit(0)  # the run closed its end, or the grader is gone
            size, data = int.from_bytes(head, "big"), b""
            while len(data) < size:
                chunk = control.recv(size - len(data))
                if not chunk:
                    os._exit(0)
                data += chunk
            request = json.loads(data)
            pid = os.fork()
        except OSError:
            os._exit(1)  # the run starts its workers as fresh processes then
        if pid == 0:
            control.close()
            _forked(request, *fds)
        pidfd = os.pidfd_open(pid)
        for fd in fds:
            os.close(fd)
        socket.send_fds(control, [str(pid).encode()], [pidfd])
        os.close(pidfd)


def _forked(request: dict, stdin: int, answers: int) -> None:
    """In a forked worker: become what ``python -m autograder.worker ROOT`` is, with the request's pipes."""
    from autograder.proctree import set_name
    try:
        os.setsid()  # as the grader starts a worker: a session (and process group) of its own
        set_name(b"grader-worker")
        os.dup2(stdin, 0)
        os.close(stdin)
        os.environ.clear()
        os.environ.update(request["env"], **{settings.ANSWER_FD: str(answers)})
        os.chdir(request["root"])
        sys.argv = [sys.argv[0], request["root"]]
        sys.stdin = open(0, closefd=False)
        main(request["root"])
    except BaseException:  # noqa: BLE001 - a forked process never returns into the template's loop
        os._exit(1)
    os._exit(0)


if __name__ == "__main__":
    if sys.argv[1:] == ["--template"]:
        _serve()
    else:
        main(sys.argv[1])

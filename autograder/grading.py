"""Grade one notebook with stock ``nbgrader autograde`` and read back its result (``autograder.results``).

A ``Run`` is a scratch folder with one course folder per grading worker, each
with its own gradebook (into which the worker releases the assignments when it
starts), so no two nbgrader processes ever share a database. ``grade_once``
grades one submission in one of them: an ``nbgrader autograde --student``
request to that folder's ``autograder.worker`` process, with a time limit, its
kernel started by ``autograder.sandbox`` (forked, on Linux, from the run's
``autograder.zygote``, which has imported PyTorch once for all the run's
kernels); whatever goes wrong in the grader is
caught and reported as its fault. The runners, ``autograder.pool`` (this
machine) and ``autograder.cluster`` (Dask), drive many of these at once.
"""
import functools
import hashlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import nbformat

from . import course, files, intake, scratch, settings
from .bundle import student_view
from .course import exercise_of
from .settings import Limits
from .nbgrader_run import make_course
from .results import BLANK, CellResult, NotebookResult, failure_line
from .sandbox_log import limit_notes, sandbox_state
from .worker import MARK, Template
from .zygote import FRESH, Zygote

def _source_cells(assignment: str):
    """Solution cell ids and graded cells (id, points, manual?) of the source notebook."""
    nb = json.loads(course.source_notebook(assignment).read_text())
    solutions, graded = [], []
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution") and not meta.get("grade"):
            solutions.append(meta["grade_id"])
        if meta.get("grade"):
            graded.append((meta["grade_id"], float(meta.get("points", 0)), bool(meta.get("solution"))))
    return solutions, graded


def _failure_messages(autograded: Path) -> dict:
    """grade_id -> first line of the error each failing graded cell printed."""
    messages = {}
    if not autograded.is_file():
        return messages
    nb = nbformat.reads(files.read(autograded).decode(), as_version=4)
    for cell in nb["cells"]:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error" and gid and gid not in messages:
                messages[gid] = failure_line(out.get("ename", "Error"), out.get("evalue", ""))
            elif out.get("output_type") == "stream" and out.get("name") == "stderr" and gid and gid not in messages:
                messages[gid] = "the cell wrote to stderr: " + out.get("text", "").strip()[:200]
    return messages


def _read_results(root: Path, student: str, assignment: str, notebook: Path) -> NotebookResult | None:
    """The result nbgrader recorded in ``root``'s gradebook, or None when it recorded no submission."""
    from nbgrader.api import Gradebook, MissingEntry

    solution_ids, graded = _source_cells(assignment)
    result = NotebookResult(student, assignment, f"{assignment}.ipynb")
    messages = _failure_messages(notebook)
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        try:
            nb = gb.find_submission_notebook(assignment, assignment, student)
        except MissingEntry:
            return None
        grades = {g.name: g for g in nb.grades}
        for gid, points, manual in graded:
            g = grades.get(gid)
            score = 0.0 if g is None or g.score is None else float(g.score)
            # a written answer left as released: nbgrader scores it 0 and asks no person to grade it
            blank = manual and g is not None and g.auto_score == 0 and not g.needs_manual_grade
            result.cells.append(CellResult(gid, exercise_of(gid, solution_ids), score, points, manual,
                                           BLANK if blank else messages.get(gid, "") if score < points else "",
                                           graded=blank))
    return result


def grader_failed(student, assignment, path, e: BaseException | str) -> NotebookResult:
    """The grader's own failure (not the student's): every cell at 0, flagged, graded again by the next run."""
    why = e if isinstance(e, str) else f"{type(e).__name__}: {e}"
    return zero_result(student, assignment, path, f"not graded: the grader failed on this notebook ({why}); "
                                                  f"run grade again to grade it", fault=why)


def zero_result(student, assignment, path, error, notes=(), fault="") -> NotebookResult:
    """Every graded cell at 0 of its points: the notebook could not be run at all."""
    solution_ids, graded = _source_cells(assignment)
    r = NotebookResult(student, assignment, Path(path).name if path else "", error=error, notes=list(notes),
                       fault=fault)
    r.cells = [CellResult(gid, exercise_of(gid, solution_ids), 0.0, pts, manual, "" if manual else error)
               for gid, pts, manual in graded]
    return r


class Closed(Exception):
    """The run was closed (the grader is stopping): no more workers are started."""


class Run:
    """A grading run: a scratch folder with a sandbox kernelspec, the student's view of the course for each
    assignment, and one course folder per worker.

    The folder (``autograder.scratch``) is removed by the next run when this one is killed before it can."""

    def __init__(self, assignments, jobs: int, limits: Limits, hide=(), threads: int | None = None):
        self._folder = scratch.Folder()
        self.dir = self._folder.path
        self._lock = threading.Lock()
        self._processes, self.closed = {}, False
        try:
            self.limits, self.hide = limits, [str(Path(h).resolve()) for h in hide]
            # PyTorch threads of each kernel: one share of the cores per worker, unless the caller knows better
            self.threads = threads or max(1, settings.default_jobs() // jobs)
            spec = self.dir / "jupyter" / "kernels" / "course-sandbox"
            spec.mkdir(parents=True)
            # kernels forked from a process that has imported PyTorch already
            self._zygote = Zygote.where_possible(self.dir, self._environ())
            (spec / "kernel.json").write_text(json.dumps({
                "argv": [*(self._zygote.command if self._zygote else FRESH), "-f", "{connection_file}"],
                "display_name": "Python 3 (course grader)", "language": "python"}))
            self.views = {aid: student_view(aid, self.dir / "view" / aid) for aid in assignments}
            (self.dir / "scratch").mkdir()
            (self.dir / "s").mkdir()  # the kernels' Unix sockets: a short path, as socket paths must be
            # the workers' imports, once: each worker is forked from a process that has done them
            self._template = Template(self._worker_environ()) if Template.possible() else None
            self.workers = []
            for k in range(jobs):  # each worker releases the assignments into its own gradebook when it starts
                w = make_course(self.dir / f"w{k}", assignments, limits=limits)
                (w / "runtime").mkdir()
                self.workers.append(w)
        except BaseException:
            self.close()
            raise
        self._ids = 0

    def process(self, worker: Path) -> "Worker":
        """The worker process of this course folder, started (again) when needed."""
        with self._lock:
            if self.closed:
                raise Closed()
            proc = self._processes.get(worker)
            if proc is not None and proc.alive():
                return proc
            if proc is not None:
                proc.stop()  # it may be running still, only not ready
            env = dict(self._worker_environ(), JUPYTER_RUNTIME_DIR=str(worker / "runtime"))
            proc = self._processes[worker] = Worker(worker, env, self._template)
        proc.wait_ready()  # outside the lock: close() can stop it meanwhile
        return proc

    def _worker_environ(self) -> dict:
        return dict(self._environ(), JUPYTER_PATH=str(self.dir / "jupyter"), **{settings.SOCKETS: str(self.dir / "s")})

    def _environ(self) -> dict:
        """The environment of the workers, and of the kernels they start (of which they keep an allow-list)."""
        return dict(os.environ, OMP_NUM_THREADS=str(self.threads), MPLBACKEND="module://autograder.nodisplay",
                    PATH=course.python_first())

    def close(self):
        """Stop every worker (their kernels die with them: see ``autograder.sandbox``) and the zygote, and remove
        the folder."""
        with self._lock:
            self.closed = True
            procs = list(self._processes.values())
            zygote, self._zygote = getattr(self, "_zygote", None), None
            template, self._template = getattr(self, "_template", None), None
        for proc in procs:
            proc.stop()
        for process in (template, zygote):
            if process is not None:
                process.close()
        self._folder.close()

    def grade(self, worker: Path, student: str, assignment: str, path: Path, hide=()):
        """(NotebookResult, the graded notebook's path or None) for one submission, in ``worker``'s folder;
        the kernel sees none of the run's folders, of ``self.hide`` and of ``hide``."""
        # nbgrader reads student ids as patterns (f[1] would match f1): it gets a plain id of ours instead
        self._ids += 1
        sid = f"s{self._ids:05d}"
        for name in ("submitted", "autograded"):
            shutil.rmtree(worker / name, ignore_errors=True)
        target = worker / "submitted" / sid / assignment / f"{assignment}.ipynb"
        target.parent.mkdir(parents=True)
        ok, notes, flags = intake.prepare(path, assignment, target)
        if not ok:
            return zero_result(student, assignment, path, notes[0], notes), None
        (worker / "notes.json").unlink(missing_ok=True)
        log = worker / f"sandbox-{uuid.uuid4().hex}.log"
        view = self.views[assignment]
        env = settings.Sandbox.of(self.limits, view=str(view), keep=[course.release_notebook(assignment).parent],
                                  hide=[self.dir, *self.hide, *hide], scratch_dir=self.dir / "scratch",
                                  log=log).environ()
        env[settings.NOTES] = str(worker / "notes.json")
        proc = self.process(worker)
        if not proc.ready:
            raise WorkerLost("the grading process did not start")
        if assignment in proc.failed:
            return zero_result(student, assignment, path, f"not graded: the grader could not release {assignment} "
                               f"({proc.failed[assignment]})", notes, fault=f"release failed: "
                               f"{proc.failed[assignment]}"), None
        answer = proc.autograde(assignment, sid, env, self.limits.notebook_timeout + 120)
        graded = worker / "autograded" / sid / assignment / f"{assignment}.ipynb"
        r = _read_results(worker, sid, assignment, graded)
        r_sandbox, hits = sandbox_state(log)
        if r is None:
            why = answer.get("log", "") + "\n" + answer.get("error", "")
            errors = [line for line in why.splitlines() if "ERROR" in line or "Error" in line]
            raise WorkerLost(f"nbgrader recorded no grade ({errors[-1].strip() if errors else 'no error given'})")
        r.student, r.notebook = student, Path(path).name
        r.notes, r.flags = notes, flags
        if (worker / "notes.json").is_file():
            for n in json.loads(files.read(worker / "notes.json")):  # the executor's: a flag asks for a person
                (r.flags if n.get("flag") else r.notes).append(f"{n['grade_id'] or cell_name(n, assignment)}: "
                                                                f"{n['note']}")
        r.sandbox = r_sandbox
        r.notes += limit_notes(hits, self.limits)
        if not answer["success"] and not r.error:
            text = answer["log"] + "\n" + answer["error"]
            errors = [line for line in text.splitlines() if "ERROR" in line or "Error" in line]
            r.error = "nbgrader could not grade this notebook: " + (errors[-1].strip() if errors else "unknown error")
            for c in r.cells:
                if not c.manual and c.score == 0 and not c.message:
                    c.message = r.error
        return r, (graded if graded.is_file() else None)


class WorkerLost(Exception):
    """The grading worker did not start, died, or did not answer in time: the grader's fault, not the
    student's. ``grade_once`` grades the notebook again on a fresh worker, once."""


def keep_graded(r: NotebookResult, graded: Path | bytes | None, keep: Path | None) -> None:
    """Copy the graded notebook of ``r`` (a file, or its bytes) to <keep>/<student>/<assignment>/<assignment>.ipynb."""
    if keep is None or graded is None:
        return
    try:
        data = graded if isinstance(graded, bytes) else files.read(graded)
        files.write(keep / r.student / r.assignment / f"{r.assignment}.ipynb", data, root=keep)
    except OSError as e:
        r.notes.append(f"the graded notebook could not be kept: {e}")


def cell_name(note: dict, assignment: str) -> str:
    """Which cell an executor note is about, for a reader of the report: one of the notebook's own
    cells (given in the release, unchanged), one of them that the student edited, or one they added."""
    if "index" not in note:
        return "a cell of your own"
    where = f"cell {note['index'] + 1}"
    for i, cell in enumerate(_release_cells(assignment)):
        if cell.cell_type != "code":
            continue
        if hashlib.sha256(cell.source.encode()).hexdigest() == note.get("source_sha"):
            first = next((line for line in cell.source.splitlines() if line.strip()), "")[:70]
            return f"{where}, one of the notebook's own cells, not an answer of yours ({first!r})"
        if note.get("cell_id") and cell.get("id") == note["cell_id"]:
            return f"{where}, one of the notebook's own cells, which you changed"
    return f"{where}, a cell you added"


@functools.lru_cache(maxsize=None)
def _release_cells(assignment: str) -> tuple:
    try:
        return tuple(nbformat.read(course.release_notebook(assignment), as_version=4).cells)
    except (OSError, ValueError):
        return ()


PREFIX, LOCK = scratch.PREFIX, scratch.LOCK


class Worker:
    """One ``autograder.worker`` process (see there), and the pipe to it."""

    def __init__(self, root: Path, env: dict, template: Template | None = None):
        answers, write = os.pipe()  # the worker's answers come on a pipe of their own (see autograder.worker)
        try:
            self.proc = self._forked(template, root, env, write) or subprocess.Popen(
                [sys.executable, "-m", "autograder.worker", str(root)], cwd=root,
                env=dict(env, **{settings.ANSWER_FD: str(write)}), pass_fds=(write,), stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        except BaseException:
            os.close(answers)
            raise
        finally:
            os.close(write)
        self.answers = os.fdopen(answers, "rb", buffering=0)
        self.buffer = b""
        self.ready, self.failed = False, {}

    @staticmethod
    def _forked(template, root, env, write):
        """The worker, forked by the run's template (None without one, or when it is gone)."""
        if template is None:
            return None
        read, requests = os.pipe()
        try:
            proc = template.fork(root, env, read, write)
        finally:
            os.close(read)
        if proc is None:
            os.close(requests)
            return None
        proc.stdin = os.fdopen(requests, "wb")
        return proc

    def wait_ready(self, timeout: float = 300) -> None:
        """Wait for the worker to say it started, and which assignments it could not release (and why)."""
        answer = self._answer(timeout)
        self.ready = bool(answer and answer.get("ready"))
        self.failed = dict(answer.get("failed") or {}) if answer else {}
        if not self.ready:
            self.stop()

    def alive(self) -> bool:
        return self.ready and self.proc.poll() is None

    def autograde(self, assignment, student, env, timeout) -> dict:
        """nbgrader's answer for this submission; raises ``WorkerLost`` when the worker ends first or takes
        longer than ``timeout`` seconds (it is stopped then)."""
        try:
            self.proc.stdin.write((json.dumps({"assignment": assignment, "student": student, "env": env}) + "\n").encode())
            self.proc.stdin.flush()
        except (OSError, ValueError):
            self.stop()
            raise WorkerLost("the grading process had ended") from None
        answer = self._answer(timeout)
        if answer is None:
            ended = self.proc.poll() is not None or not self.ready
            self.stop()
            raise WorkerLost("the grading process ended while grading this notebook" if ended else
                             f"grading did not finish within {timeout} s; the grading process was stopped")
        return answer

    def _answer(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                if line.startswith(MARK.encode()):
                    return json.loads(line[len(MARK):])
            left = deadline - time.monotonic()
            try:
                if left <= 0 or not select.select([self.answers], [], [], left)[0]:
                    return None
                chunk = os.read(self.answers.fileno(), 65536)
            except (OSError, ValueError):  # stopped meanwhile, by another thread
                chunk = b""
            if not chunk:  # the process ended
                self.ready = False
                return None
            self.buffer += chunk

    def stop(self):
        """Kill the worker and nbgrader's processes (its group); each kernel launcher dies with the worker."""
        self.ready = False
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self.answers.close()
        try:
            self.proc.stdin.close()
        except OSError:  # its reader is gone: what is left unwritten is lost anyway
            pass

def progress_bar(total: int, progress: bool):
    """A bar on stderr that counts graded notebooks and shows the time left, or None."""
    if not progress:
        return None
    from tqdm import tqdm
    return tqdm(total=total, unit="notebook", desc="grading", file=sys.stderr)


def grade_once(run: Run, worker: Path, student: str, aid: str, path: Path, hide=()):
    """``run.grade``, whatever happens: a worker lost on the way is replaced and the notebook graded again,
    once; a second loss, or any other failure of the grader, is reported as the grader's fault."""
    start = time.monotonic()
    for attempt in (1, 2):
        try:
            r, graded = run.grade(worker, student, aid, path, hide)
            r.seconds = round(time.monotonic() - start, 2)
            return r, graded
        except Closed:
            raise
        except WorkerLost as e:
            if attempt == 2 or run.closed:
                return grader_failed(student, aid, path, f"{e}, twice"), None
        except Exception as e:  # noqa: BLE001 - one broken submission must not stop the class
            return grader_failed(student, aid, path, e), None

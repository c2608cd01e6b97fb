"""Grade notebooks with stock ``nbgrader autograde`` and read back the results.

A result has one row per graded cell: its points, its maximum, and the first
line of the error it raised (the failure message the checks wrote), plus the
notes of what went wrong around the student's code (a repaired notebook, a
dead kernel, a time limit) and the flags a human should look at.

Class-sized runs (``grade_many``): each submission is one job; ``jobs``
workers take them in turn, each in its own scratch course folder with its own
gradebook (into which it releases the assignments when it starts), so no two
nbgrader processes ever share a database. Each job is one
``nbgrader autograde --student`` process with a time limit, its kernel started
by ``autograder.sandbox``.
"""
import functools
import hashlib
import json
import os
import queue
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from . import cgroup, course, files, intake, sandbox
from .bundle import student_view
from .course import exercise_of
from .nbgrader_run import make_course
from .worker import MARK

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class CellResult:
    grade_id: str
    exercise: str
    score: float
    max_score: float
    manual: bool  # a written answer, graded by a person
    message: str = ""


@dataclass
class NotebookResult:
    student: str
    assignment: str
    notebook: str
    cells: list[CellResult] = field(default_factory=list)
    error: str = ""  # the whole notebook could not be graded
    notes: list[str] = field(default_factory=list)  # repairs and limits, for the report
    flags: list[str] = field(default_factory=list)  # code a human should read
    sandbox: str = ""  # which protections the kernel ran under

    @property
    def auto_score(self) -> float:
        return sum(c.score for c in self.cells if not c.manual)

    @property
    def auto_max(self) -> float:
        return sum(c.max_score for c in self.cells if not c.manual)

    @property
    def score(self) -> float:
        return sum(c.score for c in self.cells)

    @property
    def max_score(self) -> float:
        return sum(c.max_score for c in self.cells)

    @property
    def full_marks(self) -> bool:
        return not self.error and self.auto_max > 0 and self.auto_score == self.auto_max


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
                text = ANSI.sub("", f"{out.get('ename', 'Error')}: {out.get('evalue', '')}")
                messages[gid] = text.strip().splitlines()[0] if text.strip() else out.get("ename", "error")
            elif out.get("output_type") == "stream" and out.get("name") == "stderr" and gid and gid not in messages:
                messages[gid] = "the cell wrote to stderr: " + out.get("text", "").strip()[:200]
    return messages


def _read_results(root: Path, student: str, assignment: str, notebook: Path) -> NotebookResult:
    from nbgrader.api import Gradebook, MissingEntry

    solution_ids, graded = _source_cells(assignment)
    result = NotebookResult(student, assignment, f"{assignment}.ipynb")
    messages = _failure_messages(notebook)
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        try:
            nb = gb.find_submission_notebook(assignment, assignment, student)
        except MissingEntry:
            result.error = "nbgrader recorded no submission for this notebook"
            return result
        grades = {g.name: g for g in nb.grades}
        for gid, points, manual in graded:
            g = grades.get(gid)
            score = 0.0 if g is None or g.score is None else float(g.score)
            result.cells.append(CellResult(gid, exercise_of(gid, solution_ids), score, points, manual,
                                           messages.get(gid, "") if score < points else ""))
    return result



@dataclass
class Limits:
    cell_timeout: int = 60  # seconds per cell
    notebook_timeout: int = 600  # seconds per notebook
    memory: int = 4 * 2**30  # bytes of address space for the kernel
    output: int = 1_000_000  # bytes of output kept per cell
    scratch_mb: int = 64  # size of the kernel's own folder (and of its /tmp)
    pids: int = sandbox.PIDS  # processes and threads of a kernel and everything it starts, together


def grader_failed(student, assignment, path, e: BaseException) -> NotebookResult:
    return zero_result(student, assignment, path, f"the grader failed on this notebook: {type(e).__name__}: {e}")


def zero_result(student, assignment, path, error, notes=()) -> NotebookResult:
    """Every graded cell at 0: the notebook could not be run at all."""
    solution_ids, graded = _source_cells(assignment)
    r = NotebookResult(student, assignment, Path(path).name if path else "", error=error, notes=list(notes))
    r.cells = [CellResult(gid, exercise_of(gid, solution_ids), 0.0, pts, manual, "" if manual else error)
               for gid, pts, manual in graded]
    return r


class Run:
    """A grading run: a scratch folder with a sandbox kernelspec, the student's view of the course for each
    assignment, and one course folder per worker."""

    def __init__(self, assignments, jobs: int, limits: Limits, hide=(), threads: int | None = None):
        self.dir = Path(tempfile.mkdtemp(prefix="autograder-"))
        self.dir.chmod(0o711)  # a kernel running as a uid of its own must reach its view inside
        self.limits, self.hide = limits, [str(Path(h).resolve()) for h in hide]
        # PyTorch threads of each kernel: one share of the cores per worker, unless the caller knows better
        self.threads = threads or max(1, (os.cpu_count() or 1) // jobs)
        spec = self.dir / "jupyter" / "kernels" / "course-sandbox"
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-m", "autograder.sandbox", "-f", "{connection_file}"],
            "display_name": "Python 3 (course grader)", "language": "python"}))
        self.views = {aid: student_view(aid, self.dir / "view" / aid) for aid in assignments}
        (self.dir / "scratch").mkdir()
        (self.dir / "s").mkdir()  # the kernels' Unix sockets: a short path, as socket paths must be
        self.workers, self._processes = [], {}
        for k in range(jobs):  # each worker releases the assignments into its own gradebook when it starts
            w = make_course(self.dir / f"w{k}", assignments, limits=limits)
            (w / "runtime").mkdir()
            self.workers.append(w)
        self._ids = 0

    def process(self, worker: Path) -> "Worker":
        """The worker process of this course folder, started (again) when needed."""
        proc = self._processes.get(worker)
        if proc is None or not proc.alive():
            env = dict(os.environ, JUPYTER_PATH=str(self.dir / "jupyter"), JUPYTER_RUNTIME_DIR=str(worker / "runtime"),
                       AUTOGRADER_MEMORY=str(self.limits.memory),
                       AUTOGRADER_PIDS=str(self.limits.pids), AUTOGRADER_SCRATCH_MB=str(self.limits.scratch_mb),
                       AUTOGRADER_SCRATCH_DIR=str(self.dir / "scratch"), AUTOGRADER_SOCKETS=str(self.dir / "s"),
                       OMP_NUM_THREADS=str(self.threads),
                       MPLBACKEND="module://autograder.nodisplay",
                       PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
            proc = self._processes[worker] = Worker(worker, env)
        return proc

    def close(self):
        for proc in self._processes.values():
            proc.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

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
        env = {"AUTOGRADER_HIDE": os.pathsep.join([str(self.dir), *self.hide, *map(str, hide)]),
               "AUTOGRADER_NOTES": str(worker / "notes.json"), "AUTOGRADER_SANDBOX_LOG": str(log),
               "AUTOGRADER_VIEW": str(view), "AUTOGRADER_KEEP": str(course.release_notebook(assignment).parent)}
        answer = self.process(worker).autograde(assignment, sid, env, self.limits.notebook_timeout + 120)
        if answer is None:
            notes.append(f"grading did not finish within {self.limits.notebook_timeout + 120} s and was stopped")
            answer = {"success": False, "log": "", "error": "the grading process was stopped"}
        graded = worker / "autograded" / sid / assignment / f"{assignment}.ipynb"
        r = _read_results(worker, sid, assignment, graded)
        r.student, r.notebook = student, Path(path).name
        r.notes, r.flags = notes, flags
        if (worker / "notes.json").is_file():
            for n in json.loads(files.read(worker / "notes.json")):  # the executor's: a flag asks for a person
                (r.flags if n.get("flag") else r.notes).append(f"{n['grade_id'] or cell_name(n, assignment)}: "
                                                                f"{n['note']}")
        r.sandbox, hits = _sandbox_state(log)
        r.notes += limit_notes(hits, self.limits)
        if not answer["success"] and not r.error:
            text = answer["log"] + "\n" + answer["error"]
            errors = [line for line in text.splitlines() if "ERROR" in line or "Error" in line]
            r.error = "nbgrader could not grade this notebook: " + (errors[-1].strip() if errors else "unknown error")
            for c in r.cells:
                if not c.manual and c.score == 0 and not c.message:
                    c.message = r.error
        return r, (graded if graded.is_file() else None)


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


class Worker:
    """One ``autograder.worker`` process (see there), and the pipe to it."""

    def __init__(self, root: Path, env: dict):
        answers, write = os.pipe()  # the worker's answers come on a pipe of their own (see autograder.worker)
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "autograder.worker", str(root)], cwd=root,
                                         env=dict(env, AUTOGRADER_ANSWER_FD=str(write)), pass_fds=(write,),
                                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, start_new_session=True)
        except BaseException:
            os.close(answers)
            raise
        finally:
            os.close(write)
        self.answers = os.fdopen(answers, "rb", buffering=0)
        self.buffer = b""
        answer = self._answer(300)
        self.ready = bool(answer and answer.get("ready"))

    def alive(self) -> bool:
        return self.ready and self.proc.poll() is None

    def autograde(self, assignment, student, env, timeout):
        """nbgrader's answer for this submission, or None when it took longer than ``timeout`` seconds."""
        if not self.ready:
            return {"success": False, "log": "", "error": "the grading process did not start"}
        try:
            self.proc.stdin.write((json.dumps({"assignment": assignment, "student": student, "env": env}) + "\n").encode())
            self.proc.stdin.flush()
        except OSError:
            self.stop()
            return {"success": False, "log": "", "error": "the grading process ended unexpectedly"}
        answer = self._answer(timeout)
        if answer is None:
            self.stop()
        return answer

    def _answer(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                if line.startswith(MARK.encode()):
                    return json.loads(line[len(MARK):])
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.answers], [], [], left)[0]:
                return None
            chunk = os.read(self.answers.fileno(), 65536)
            if not chunk:  # the process ended
                self.ready = False
                return None
            self.buffer += chunk

    def stop(self):
        self.ready = False
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self.answers.close()

def _sandbox_state(log: Path) -> tuple[str, list]:
    """Which protections the kernel ran under ('isolated', or 'limits only (why)'), and the limits of the
    sandbox it reached ('memory', 'processes'), from the launcher's log (see autograder.sandbox)."""
    try:
        lines = files.read(log, 2**16).decode().splitlines()
        log.unlink()
        states = [json.loads(line) for line in lines]
    except (OSError, UnicodeDecodeError, ValueError):
        return "unknown (the kernel did not start)", []
    state = states[0] if states else {}
    hits = [h for s in states[1:] for h in s.get("hits", [])]
    group = cgroup.Group.reopen(state["cgroup"]) if state.get("cgroup") else None
    if group is not None:  # the sandbox is gone by now: read which limits it reached, then remove its group
        hits += group.hits()
        group.remove()
    if state.get("namespaces") and state.get("network"):
        return "isolated", hits
    if state.get("namespaces"):
        return "isolated files, shared network (the kernel did not use Unix sockets)", hits
    return "limits only" + (f" ({state['error']})" if state.get("error") else " (not Linux)"), hits


def limit_notes(hits, limits: "Limits") -> list:
    """What the report says of each sandbox limit a kernel reached."""
    said = {"memory": f"the kernel and the processes it started reached their memory limit "
                      f"({limits.memory // 2**20} MiB together) and were stopped",
            "processes": f"the kernel and the processes it started reached their limit of {limits.pids} "
                         f"processes and threads together; starting more failed"}
    return [said[h] for h in dict.fromkeys(hits) if h in said]


def progress_bar(total: int, progress: bool):
    """A bar on stderr that counts graded notebooks and shows the time left, or None."""
    if not progress:
        return None
    from tqdm import tqdm
    return tqdm(total=total, unit="notebook", desc="grading", file=sys.stderr)


def grade_many(submissions, jobs: int = 1, keep_autograded: Path | None = None, limits: Limits | None = None,
               progress: bool = False, hide=(), cluster: str | None = None, allow_unisolated: bool = True):
    """Grade ``submissions``, a list of (student_id, assignment_id, notebook path).

    Returns a list of NotebookResult in the same order. ``jobs`` workers grade
    at once on this machine, or, with ``cluster`` (a Dask scheduler's address),
    the workers of that cluster (``autograder.cluster``); with ``progress``, a
    bar on stderr counts finished notebooks.
    """
    if not submissions:
        return []
    limits = limits or Limits()
    if cluster:
        from .cluster import grade_on_cluster
        return grade_on_cluster(cluster, submissions, keep_autograded, limits, progress, hide, allow_unisolated)
    jobs = max(1, min(jobs, len(submissions)))
    run = Run(sorted({aid for _, aid, _ in submissions}), jobs, limits, hide)
    todo = queue.Queue()
    for i, sub in enumerate(submissions):
        todo.put((i, *sub))
    results = [None] * len(submissions)
    bar = progress_bar(len(submissions), progress)

    def work(worker):
        while True:
            try:
                i, student, aid, path = todo.get_nowait()
            except queue.Empty:
                return
            try:
                results[i], graded = run.grade(worker, student, aid, Path(path))
                keep_graded(results[i], graded, keep_autograded)
            except Exception as e:  # noqa: BLE001 - one broken submission must not stop the class
                results[i] = grader_failed(student, aid, path, e)
            if bar is not None:
                bar.update(1)

    try:
        threads = [threading.Thread(target=work, args=(w,)) for w in run.workers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        if bar is not None:
            bar.close()
        run.close()
    return results


def check_notebook(path: Path, assignment: str | None = None) -> NotebookResult:
    """Grade one notebook, wherever it lies, against its source in solutions/."""
    path = Path(path)
    aid = assignment or course.detect_assignment(path)
    return grade_many([("you", aid, path)])[0]

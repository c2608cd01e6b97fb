"""Grade notebooks with stock ``nbgrader autograde`` and read back the results.

A result has one row per graded cell: its points, its maximum, and the first
line of the error it raised (the failure message the checks wrote).
"""
import json
import re
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from . import course
from .nbgrader_run import generate, make_course, nbgrader

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


def exercise_of(grade_id: str, solution_ids) -> str:
    """Test cells are named ``<exercise>_<what>``: map a test cell to its exercise."""
    hits = [s for s in solution_ids if grade_id == s or grade_id.startswith(s + "_")]
    return max(hits, key=len) if hits else grade_id


def _failure_messages(autograded: Path) -> dict:
    """grade_id -> first line of the error each failing graded cell printed."""
    messages = {}
    if not autograded.is_file():
        return messages
    nb = nbformat.reads(autograded.read_text(), as_version=4)
    for cell in nb["cells"]:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error" and gid and gid not in messages:
                text = ANSI.sub("", f"{out.get('ename', 'Error')}: {out.get('evalue', '')}")
                messages[gid] = text.strip().splitlines()[0] if text.strip() else out.get("ename", "error")
            elif out.get("output_type") == "stream" and out.get("name") == "stderr" and gid and gid not in messages:
                messages[gid] = "the cell wrote to stderr: " + out.get("text", "").strip()[:200]
    return messages


def _read_results(root: Path, student: str, assignment: str) -> NotebookResult:
    from nbgrader.api import Gradebook, MissingEntry

    solution_ids, graded = _source_cells(assignment)
    result = NotebookResult(student, assignment, f"{assignment}.ipynb")
    messages = _failure_messages(root / "autograded" / student / assignment / f"{assignment}.ipynb")
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


def grade_many(submissions, jobs: int = 1, keep_autograded: Path | None = None):
    """Grade ``submissions``, a list of (student_id, assignment_id, notebook path).

    Returns a list of NotebookResult in the same order. The submissions are
    split into ``jobs`` shares, each graded in its own scratch course with its
    own gradebook, at the same time.
    """
    shares = [submissions[i::jobs] for i in range(max(1, min(jobs, len(submissions))))]
    if len(shares) == 1:
        return _grade_share(submissions, keep_autograded)
    with ThreadPoolExecutor(len(shares)) as pool:
        graded = list(pool.map(lambda share: _grade_share(share, keep_autograded), shares))
    by_key = {(r.student, r.assignment): r for share in graded for r in share}
    return [by_key[(s, a)] for s, a, _ in submissions]


def _grade_share(submissions, keep_autograded: Path | None):
    with tempfile.TemporaryDirectory(prefix="grade-") as tmp:
        root = Path(tmp)
        ids = sorted({aid for _, aid, _ in submissions})
        make_course(root, ids)
        for aid in ids:
            generate(root, aid)
        for student, aid, path in submissions:
            target = root / "submitted" / student / aid / f"{aid}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        errors = {}
        for aid in ids:
            try:
                nbgrader(root, "autograde", aid, "--force")
            except RuntimeError as e:
                errors[aid] = str(e).splitlines()[0]
        results = []
        for student, aid, path in submissions:
            r = _read_results(root, student, aid)
            r.notebook = Path(path).name
            if errors.get(aid) and not r.cells:
                r.error = errors[aid]
            results.append(r)
        if keep_autograded is not None and (root / "autograded").is_dir():
            shutil.copytree(root / "autograded", keep_autograded, dirs_exist_ok=True)
        return results


def check_notebook(path: Path, assignment: str | None = None) -> NotebookResult:
    """Grade one notebook, wherever it lies, against its source in solutions/."""
    path = Path(path)
    aid = assignment or course.detect_assignment(path)
    return grade_many([("you", aid, path)])[0]

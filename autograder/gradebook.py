"""One gradebook: what ``grade`` found, in the nbgrader gradebook of a course directory, where the Formgrader reads it.

``register`` releases the assignments into the course's ``gradebook.db`` as ``nbgrader generate_assignment`` does
(in a scratch copy of the course, so the committed notebooks are not written again): the assignments, their
notebooks and graded cells. ``record`` puts each graded notebook there: the student, the submission, the
autograded points the judges gave outside the kernel, the judges' first message of each exercise as the cell's
automatic comment, a flag on notebooks a person should review, and the graded notebook in ``autograded/`` (the
Formgrader shows it). Written answers are left to the Formgrader: a grade a person gave is never overwritten,
so grading again keeps it. ``read_written`` brings those grades back into the results, for grades.csv, the
report, the class page, the feedback pages and ``export``.
"""
import shutil
import tempfile
from pathlib import Path

from . import files
from .nbgrader_run import generate, make_course
from .report import needs_review
from .results import NotebookResult


GRADEBOOK_LINK = "gradebook.txt"  # in grade's output folder: the course directory grade --gradebook recorded into


def linked(graded: Path) -> Path | None:
    """The course directory whose gradebook ``grade --gradebook`` filled from the output folder ``graded``."""
    link = Path(graded) / GRADEBOOK_LINK
    return Path(link.read_text().strip()) if link.is_file() else None


def db_url(course_dir: Path) -> str:
    return f"sqlite:///{Path(course_dir).resolve() / 'gradebook.db'}"


def register(course_dir: Path, assignments) -> None:
    """The course's gradebook knows ``assignments`` (again, if it did: their cells are brought up to date)."""
    with tempfile.TemporaryDirectory(prefix="register-") as tmp:
        root = make_course(Path(tmp), list(assignments))
        with open(root / "nbgrader_config.py", "a") as f:
            f.write(f"c.CourseDirectory.db_url = {db_url(course_dir)!r}\n")
        generate(root, list(assignments))


def record(course_dir: Path, results: list, autograded: Path) -> int:
    """Put ``results`` into the course's gradebook (registered first) and their graded notebooks into its
    autograded/ folder; returns how many notebooks were recorded. Notebooks the grader failed on are left out."""
    from nbgrader.api import Gradebook, MissingEntry

    results = [r for r in results if not r.fault]
    register(course_dir, sorted({r.assignment for r in results}))
    with Gradebook(db_url(course_dir)) as gb:
        for r in results:
            gb.update_or_create_student(r.student)
            try:
                gb.find_submission(r.assignment, r.student)
            except MissingEntry:
                gb.add_submission(r.assignment, r.student)
            nb = gb.find_submission_notebook(r.assignment, r.assignment, r.student)
            nb.flagged = needs_review(r)
            said = {}
            for c in r.cells:
                grade = gb.find_grade(c.grade_id, r.assignment, r.assignment, r.student)
                if c.manual:  # the Formgrader's to grade (0 if left blank); a person's grade stays
                    grade.auto_score = 0.0 if c.graded else None
                    grade.needs_manual_grade = grade.manual_score is None and not c.graded
                else:
                    grade.auto_score, grade.needs_manual_grade = c.score, False
                    if c.message and c.exercise not in said:
                        said[c.exercise] = c.message
            for exercise, message in said.items():
                try:
                    gb.find_comment(exercise, r.assignment, r.assignment, r.student).auto_comment = message
                except MissingEntry:  # an exercise whose answer cell is not a solution cell of its own
                    pass
            gb.db.commit()
            _keep_graded(course_dir, r, autograded)
    return len(results)


def _keep_graded(course_dir: Path, r: NotebookResult, autograded: Path) -> None:
    source = Path(autograded) / r.student / r.assignment / f"{r.assignment}.ipynb"
    target = Path(course_dir) / "autograded" / r.student / r.assignment / f"{r.assignment}.ipynb"
    if source.is_file():
        files.write(target, files.read(source), root=Path(course_dir) / "autograded")
    else:
        shutil.rmtree(target.parent, ignore_errors=True)  # not gradable: no notebook to show


def read_written(course_dir: Path, results: list) -> int:
    """Set each written answer's score to the grade a person gave it in the Formgrader (``graded``), and keep the
    comments a person wrote there (``comments``); returns how many written grades were found."""
    from nbgrader.api import Gradebook, MissingEntry

    if not (Path(course_dir) / "gradebook.db").is_file():
        return 0
    found = 0
    with Gradebook(db_url(course_dir)) as gb:
        for r in results:
            for c in r.cells:
                if not c.manual:
                    continue
                try:
                    grade = gb.find_grade(c.grade_id, r.assignment, r.assignment, r.student)
                except MissingEntry:
                    continue
                if grade.manual_score is not None:
                    c.score, c.graded, c.message = float(grade.manual_score), True, ""
                    found += 1
            for exercise in dict.fromkeys(c.exercise for c in r.cells):
                try:
                    text = gb.find_comment(exercise, r.assignment, r.assignment, r.student).manual_comment
                except MissingEntry:
                    continue
                if text and text.strip():
                    r.comments[exercise] = text.strip()
    return found


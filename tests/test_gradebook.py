"""One gradebook (autograder/gradebook.py): grade --gradebook fills the course's nbgrader gradebook with the judges'
scores, a grade given there to a written answer survives grading again and reaches grades.csv, the report, the
feedback and export, and nbgrader's own export agrees. tests/test_formgrader_browser.py does the same through the
Formgrader in a browser."""
import csv
import shutil
import subprocess
import sys

import pytest

from autograder import course
from autograder.nbgrader_run import nbgrader
from tests.hostile_cases import FORGERY
from tests.submissions import make_submission

AID = "01_self_attention"
WRITTEN = {"question_permutation": 1.5, "question_scaling": 2.0}  # what a person gives ada's written answers (2 + 2)


def course_copy(root):
    """A course directory as an instructor has it: solutions, nbgrader's configuration, no gradebook yet."""
    shutil.copytree(course.SOLUTIONS / AID, root / "solutions" / AID)
    shutil.copy(course.ROOT / "nbgrader_config.py", root)
    (root / "autograder").mkdir()
    shutil.copy(course.CONFIG, root / "autograder")
    return root


def a_small_class(submitted):
    """ada solves the notebook; eve's softmax is wrong and her notebook forges its verdicts in the kernel (stock
    autograde without this course's judges gives it full marks); cy's softmax returns its input."""
    make_submission(AID, submitted / "ada" / AID / f"{AID}.ipynb")
    forge = next(c for c in FORGERY if c.name.startswith("IPython: a post_run_cell event"))
    forge.write(submitted / "eve" / AID / f"{AID}.ipynb")
    make_submission(AID, submitted / "cy" / AID / f"{AID}.ipynb", {"softmax": "def softmax(x, dim=-1):\n    return x\n"})


def grade(submitted, out, gradebook):
    proc = subprocess.run([sys.executable, "-m", "autograder", "grade", str(submitted), "--out", str(out),
                           "--jobs", "2", "--gradebook", str(gradebook)], capture_output=True, text=True,
                          cwd=course.ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def written_grades(gradebook_dir, student) -> dict:
    from nbgrader.api import Gradebook
    from autograder.gradebook import db_url
    with Gradebook(db_url(gradebook_dir)) as gb:
        return {cell: gb.find_grade(cell, AID, AID, student).manual_score for cell in WRITTEN}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gradebook")
    root = course_copy(tmp / "course")
    a_small_class(tmp / "submitted")
    proc = grade(tmp / "submitted", tmp / "out", root)
    return tmp, root, proc


def test_grade_fills_the_course_gradebook_with_the_judges_scores(graded):
    from nbgrader.api import Gradebook
    from autograder.gradebook import db_url
    tmp, root, proc = graded
    assert "recorded 3 notebook(s)" in proc.stderr
    with Gradebook(db_url(root)) as gb:
        assert [a.name for a in gb.assignments] == [AID] and sorted(s.id for s in gb.students) == ["ada", "cy", "eve"]
        nb = {s: gb.find_submission_notebook(AID, AID, s) for s in ("ada", "cy", "eve")}
        # the Formgrader's score column: the judges' points, written answers not yet graded
        assert (nb["ada"].score, nb["ada"].max_score, nb["ada"].needs_manual_grade) == (11.0, 15.0, True)
        assert nb["eve"].score == 8.0 and nb["cy"].score == 8.0  # softmax's 3 points lost, forged or not
        assert nb["eve"].flagged and not nb["ada"].flagged  # eve's notebook reaches into IPython: a person looks
        grade = gb.find_grade("softmax_reference", AID, AID, "cy")
        assert (grade.auto_score, grade.needs_manual_grade) == (0.0, False)
        comment = gb.find_comment("softmax", AID, AID, "cy").auto_comment
        assert "softmax" in comment and "AssertionError" in comment  # the judge's message, for the grader
    assert (root / "autograded" / "ada" / AID / f"{AID}.ipynb").is_file()  # the notebook the Formgrader shows


def test_a_written_grade_given_in_the_gradebook_survives_grading_again_and_reaches_every_output(graded):
    from nbgrader.api import Gradebook
    from autograder.gradebook import db_url
    tmp, root, _ = graded
    with Gradebook(db_url(root)) as gb:  # what the Formgrader does when a person grades ada's written answers
        for cell, points in WRITTEN.items():
            g = gb.find_grade(cell, AID, AID, "ada")
            g.manual_score, g.needs_manual_grade = points, False
        g = gb.find_grade("question_scaling", AID, AID, "cy")  # cy: one of two graded so far, with a comment
        g.manual_score, g.needs_manual_grade = 1.0, False
        gb.find_comment("question_scaling", AID, AID, "cy").manual_comment = "Name the variance: it grows with d_k."
        gb.db.commit()
    proc = grade(tmp / "submitted", tmp / "out", root)  # nothing changed: the results are kept, not graded again
    assert "kept 3 notebook(s)" in proc.stderr and "3 written answer(s) graded there" in proc.stderr
    assert written_grades(root, "ada") == WRITTEN
    rows = {r["student_id"]: r for r in csv.DictReader(open(tmp / "out" / "grades.csv"))}
    assert (rows["ada"]["score"], rows["ada"]["written"], rows["ada"]["written_max"]) == ("14.5", "3.5", "4")
    assert (rows["eve"]["score"], rows["eve"]["written"]) == ("8", "")  # awaiting a person
    assert (rows["cy"]["score"], rows["cy"]["written"]) == ("9", "1")  # one answer graded so far
    report = (tmp / "out" / "report.txt").read_text()
    assert "1.5 / 2    written answer, graded by a person" in report
    assert "written answers: 1 / 2 graded so far (2 more points await a person); total 9 / 15" in report
    assert "3 written answer(s) in 2 notebook(s) await a human grader" in report
    feedback = (tmp / "out" / "feedback" / "ada" / f"{AID}.html").read_text()
    assert "in all, with the written answers, 14.5 / 15" in feedback
    feedback = (tmp / "out" / "feedback" / "cy" / f"{AID}.html").read_text()
    assert "in all, with the written answers graded so far, 9 / 15" in feedback
    assert "the grader&#x27;s comment on question_scaling: Name the variance: it grows with d_k." in feedback
    # nbgrader's own export and ours agree, notebook by notebook
    nbgrader(root, "export", "--to", str(tmp / "nbgrader.csv"))
    theirs = {r["student_id"]: float(r["raw_score"]) for r in csv.DictReader(open(tmp / "nbgrader.csv"))}
    proc = subprocess.run([sys.executable, "-m", "autograder", "export", str(tmp / "out"), "--out",
                           str(tmp / "ours.csv")], capture_output=True, text=True, cwd=course.ROOT)
    assert proc.returncode == 0, proc.stderr
    ours = {r["student_id"]: float(r[AID]) for r in csv.DictReader(open(tmp / "ours.csv"))}
    assert ours == theirs == {"ada": 14.5, "cy": 9.0, "eve": 8.0}


def test_a_gradebook_that_cannot_be_written_costs_no_output(graded):
    """The grades are kept in results.jsonl before the gradebook is touched: when it cannot be written (here its
    folder is a file), grade says so and still writes every output."""
    tmp, _, _ = graded
    (tmp / "not-a-course").write_text("a file, not a folder")
    (tmp / "out" / "grades.csv").unlink()
    proc = subprocess.run([sys.executable, "-m", "autograder", "grade", str(tmp / "submitted"), "--out",
                           str(tmp / "out"), "--gradebook", str(tmp / "not-a-course")], capture_output=True,
                          text=True, cwd=course.ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "could not be updated" in proc.stderr and "run the same command again" in proc.stderr
    rows = {r["student_id"]: r for r in csv.DictReader(open(tmp / "out" / "grades.csv"))}
    assert rows["ada"]["autograded"] == "11" and rows["eve"]["score"] == "8"

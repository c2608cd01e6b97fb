"""Stock nbgrader commands work on this layout through the project's own
nbgrader_config.py: generate, autograde (with the judges outside the kernel), feedback, export."""
import csv
import os
import shutil
import subprocess
import sys

from autograder import course
from autograder.nbgrader_run import nbgrader  # runs stock `nbgrader ARGS` in a folder, raises if it fails
from tests.hostile_cases import FORGERY
from tests.test_release import without_patch
from tests.submissions import make_submission

AID = "01_self_attention"


def test_stock_nbgrader_round_trip(tmp_path):
    root = tmp_path / "course"  # a copy of the course directory, as an instructor has it
    shutil.copytree(course.SOLUTIONS / AID, root / "solutions" / AID)
    shutil.copy(course.ROOT / "nbgrader_config.py", root)
    (root / "autograder").mkdir()
    shutil.copy(course.CONFIG, root / "autograder")

    nbgrader(root, "generate_assignment", AID)
    released = root / "notebooks" / AID / f"{AID}.ipynb"
    # the same bytes, but for the patch number of the Python that released the committed notebook
    assert without_patch(released.read_text()) == without_patch(course.release_notebook(AID).read_text())

    make_submission(AID, root / "submitted" / "ada" / AID / f"{AID}.ipynb")
    # a wrong softmax whose notebook hides its errors from IPython: the judge, outside the kernel, is not fooled
    forge = next(c for c in FORGERY if c.name.startswith("IPython: a post_run_cell event"))
    forge.write(root / "submitted" / "eve" / AID / f"{AID}.ipynb")
    nbgrader(root, "autograde", AID)
    nbgrader(root, "generate_feedback", AID)
    assert (root / "feedback" / "ada" / AID / f"{AID}.html").is_file()
    nbgrader(root, "export", "--to", str(root / "grades.csv"))
    rows = {row["student_id"]: row for row in csv.DictReader(open(root / "grades.csv"))}
    assert (float(rows["ada"]["raw_score"]), float(rows["ada"]["max_score"])) == (11.0, 15.0)
    assert float(rows["eve"]["raw_score"]) == 8.0  # softmax's 3 points lost


def test_the_workers_alembic_revision_is_the_one_the_alembic_command_gives():
    """The grading worker stamps new gradebooks with the revision alembic's library reads
    (nbgrader_run.alembic_head_in_process), not by running the `alembic` command: the same revision."""
    code = ("import nbgrader.api as api\n"
            "by_command = api.get_alembic_version()\n"
            "from autograder.nbgrader_run import alembic_head_in_process\n"
            "alembic_head_in_process()\n"
            "assert api.get_alembic_version() == by_command, (api.get_alembic_version(), by_command)\n"
            "print(by_command)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, PATH=course.python_first()))
    assert proc.returncode == 0 and len(proc.stdout.strip()) == 12, proc.stdout + proc.stderr

"""Stock nbgrader commands work on this layout through the project's own
nbgrader_config.py: generate, autograde, feedback, export."""
import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

from autograder import course
from tests.submissions import make_submission

AID = "01_self_attention"


def nbgrader(root, *args):
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=root, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_stock_nbgrader_round_trip(tmp_path):
    root = tmp_path / "course"  # a copy of the course directory, as an instructor has it
    shutil.copytree(course.SOLUTIONS / AID, root / "solutions" / AID)
    shutil.copy(course.ROOT / "nbgrader_config.py", root)
    (root / "autograder").mkdir()
    shutil.copy(course.CONFIG, root / "autograder")

    nbgrader(root, "generate_assignment", AID)
    released = root / "notebooks" / AID / f"{AID}.ipynb"
    assert released.read_bytes() == course.release_notebook(AID).read_bytes()

    make_submission(AID, root / "submitted" / "ada" / AID / f"{AID}.ipynb")
    nbgrader(root, "autograde", AID)
    nbgrader(root, "generate_feedback", AID)
    assert (root / "feedback" / "ada" / AID / f"{AID}.html").is_file()
    nbgrader(root, "export", "--to", str(root / "grades.csv"))
    row = next(csv.DictReader(open(root / "grades.csv")))
    assert (row["student_id"], float(row["raw_score"]), float(row["max_score"])) == ("ada", 11.0, 15.0)

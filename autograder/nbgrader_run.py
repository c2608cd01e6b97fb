"""Run stock nbgrader in a scratch course directory.

The project never forks nbgrader: it lays out a throwaway course folder with
the course's configuration and calls nbgrader's own commands in it.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

from . import course


def make_course(root: Path, assignment_ids, limits=None) -> Path:
    """A course folder at ``root`` whose solutions/ holds the given assignments.

    With ``limits`` (an ``autograder.settings.Limits``), nbgrader runs the
    notebooks in the sandboxed kernel with those time and output limits.
    """
    root.mkdir(parents=True, exist_ok=True)
    config = ("c = get_config()\n"
              f"load_subconfig({str(course.CONFIG)!r})\n"
              "c.CourseDirectory.root = __import__('os').path.dirname(__import__('os').path.abspath(__file__))\n")
    if limits is not None:
        config += ("c.Execute.kernel_name = 'course-sandbox'\n"
                   f"c.Execute.timeout = {int(limits.cell_timeout)}\n"
                   f"c.GuardedExecute.notebook_timeout = {int(limits.notebook_timeout)}\n"
                   f"c.GuardedExecute.output_limit = {int(limits.output)}\n")
    (root / "nbgrader_config.py").write_text(config)
    for aid in assignment_ids:
        shutil.copytree(course.SOLUTIONS / aid, root / "solutions" / aid, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    return root


def nbgrader(root: Path, *args: str, timeout: float | None = None) -> subprocess.CompletedProcess:
    """Run ``nbgrader ARGS`` in course folder ``root``; raise with its log if it fails."""
    # nbgrader runs the `alembic` command by name: put this Python's scripts first on PATH,
    # so that it is found even when the virtual environment is not activated.
    env = dict(os.environ, PATH=course.python_first())
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=root, capture_output=True,
                          text=True, timeout=timeout, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def alembic_head_in_process() -> None:
    """Make nbgrader ask alembic's library, not the ``alembic`` command, for its schema's revision.

    nbgrader stamps each gradebook it creates with the revision that ``alembic heads`` prints: a new Python process
    each time (a second of processor time, and four on a busy machine, per grading worker). The library reads the
    same migration scripts in a millisecond. Call it in a process that imports nbgrader anyway."""
    import nbgrader.api
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import ALEMBIC_DIR

    head = ScriptDirectory(ALEMBIC_DIR).get_current_head()
    nbgrader.api.get_alembic_version = lambda: head


# nbgrader's generate_assignment for several assignments in one process (importing nbgrader takes seconds)
GENERATE = """import sys
from autograder.nbgrader_run import alembic_head_in_process
alembic_head_in_process()
from nbgrader.apps import NbGraderAPI
from traitlets.config.loader import PyFileConfigLoader
api = NbGraderAPI(config=PyFileConfigLoader("nbgrader_config.py", path=".").load_config())
for aid in sys.argv[1:]:
    done = api.generate_assignment(aid, force=True, create=True)
    if not done["success"]:
        sys.exit(" ".join([aid, str(done["error"]), str(done["log"])]))
"""


def generate(root: Path, assignments) -> list[Path]:
    """Release assignments as ``nbgrader generate_assignment`` does, all in one process; return the student
    notebooks."""
    env = dict(os.environ, PATH=course.python_first())  # nbgrader runs `alembic` by name
    proc = subprocess.run([sys.executable, "-c", GENERATE, *assignments], cwd=root, capture_output=True, text=True,
                          env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"nbgrader generate_assignment failed:\n{proc.stdout}\n{proc.stderr}")
    return [root / "notebooks" / aid / f"{aid}.ipynb" for aid in assignments]

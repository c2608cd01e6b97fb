"""The release step: notebooks/ is exactly what nbgrader generates from solutions/."""
import shutil
import tempfile
from pathlib import Path

from . import course
from .nbgrader_run import generate, make_course


def release(out_dir: Path = course.NOTEBOOKS, assignment_ids=None) -> list[Path]:
    """Generate the student notebooks of ``assignment_ids`` (default: all) into ``out_dir``."""
    ids = assignment_ids or course.assignments()
    written = []
    with tempfile.TemporaryDirectory(prefix="release-") as tmp:
        root = make_course(Path(tmp), ids)
        for aid, generated in zip(ids, generate(root, ids)):
            target = Path(out_dir) / aid / f"{aid}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(generated, target)
            written.append(target)
    return written

"""The release step: notebooks/ is exactly what nbgrader generates from solutions/.

nbgrader's generate_assignment runs ``KernelLanguageInfo`` last (``nbgrader_config.py``), so a released notebook
carries the kernel's own ``language_info``: JupyterLab writes the kernel's language_info into a notebook when its
kernel starts and marks the notebook unsaved if that changed anything (nbgrader alone leaves ``{"name": "python"}``).
"""
import shutil
import tempfile
from pathlib import Path

from nbconvert.preprocessors import Preprocessor

from . import course
from .nbgrader_run import generate, make_course


def kernel_language_info() -> dict:
    """What this Python's ipykernel reports in its kernel_info_reply (name, version, mimetype, lexer, ...)."""
    from ipykernel.ipkernel import IPythonKernel
    return dict(IPythonKernel.language_info)


class KernelLanguageInfo(Preprocessor):
    """Set the notebook's ``language_info`` to what its kernel will report."""

    enabled = True  # nbconvert's preprocessors are off unless enabled

    def preprocess(self, nb, resources):
        nb.metadata["language_info"] = kernel_language_info()
        return nb, resources


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

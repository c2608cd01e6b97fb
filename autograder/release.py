"""The release step: notebooks/ is exactly what nbgrader generates from solutions/, with the kernel's own
``language_info`` (JupyterLab rewrites a notebook's language_info when its kernel starts and marks the
notebook unsaved if that changed anything; nbgrader leaves only ``{"name": "python"}``)."""
import tempfile
from pathlib import Path

import nbformat

from . import course
from .nbgrader_run import generate, make_course


def kernel_language_info() -> dict:
    """What this Python's ipykernel reports in its kernel_info_reply (name, version, mimetype, lexer, ...)."""
    from ipykernel.ipkernel import IPythonKernel
    return dict(IPythonKernel.language_info)


def release(out_dir: Path = course.NOTEBOOKS, assignment_ids=None) -> list[Path]:
    """Generate the student notebooks of ``assignment_ids`` (default: all) into ``out_dir``."""
    ids = assignment_ids or course.assignments()
    written = []
    with tempfile.TemporaryDirectory(prefix="release-") as tmp:
        root = make_course(Path(tmp), ids)
        for aid, generated in zip(ids, generate(root, ids)):
            target = Path(out_dir) / aid / f"{aid}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            nb = nbformat.read(generated, as_version=4)
            nb.metadata["language_info"] = kernel_language_info()
            nbformat.write(nb, target)
            written.append(target)
    return written

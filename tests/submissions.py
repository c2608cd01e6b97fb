"""Make student submissions for the tests: the release notebook with the
solution cells filled in, some of them replaced by other code."""
import json
import re
from pathlib import Path

from autograder import course

SOLUTION_MARKERS = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)


def solution_sources(assignment: str) -> dict:
    """grade_id -> the source's solution cell, markers removed."""
    nb = json.loads(course.source_notebook(assignment).read_text())
    out = {}
    for cell in nb["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("solution"):
            out[meta["grade_id"]] = SOLUTION_MARKERS.sub("", "".join(cell["source"]))
    return out


def make_submission(assignment: str, path: Path, replace: dict | None = None, solve: bool = True) -> Path:
    """Write a filled-in copy of the release notebook to ``path``.

    ``replace`` maps a solution cell's grade_id to the code to put there
    instead; with ``solve=False`` the other cells stay as released.
    """
    replace = replace or {}
    nb = json.loads(course.release_notebook(assignment).read_text())
    solutions = solution_sources(assignment)
    for cell in nb["cells"]:
        gid = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if gid in replace:
            cell["source"] = replace[gid]
        elif solve and gid in solutions and cell["metadata"]["nbgrader"].get("solution"):
            cell["source"] = solutions[gid]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb, indent=1))
    return path


# Four ways to normalise a softmax over the wrong dimension, as students write them: one mistake, in four wordings
# (notebook 01's class page must count them as one; benchmarks/bench_class_page.py, tests/test_grading.py).
WRONG_DIM_SOFTMAX = {
    "erin": "def softmax(x, dim=-1):\n    e = (x - x.amax(dim=0, keepdim=True)).exp()\n    return e / e.sum(dim=0, keepdim=True)\n",
    "femi": "def softmax(x, dim=-1):\n    e = torch.exp(x - x.max())\n    return e / e.sum(0)\n",
    "gus": "def softmax(x, dim=-1):\n    e = (x - x.amax(-1, keepdim=True)).exp()\n    return e / e.sum(-1, keepdim=True)\n",
    "hana": "def softmax(x, dim=-1):\n    return x.exp() / x.exp().sum(dim=0, keepdim=True)\n",
}

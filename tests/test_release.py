"""notebooks/ is exactly what the release step makes from solutions/, and
nothing of the solutions or hidden tests leaks into it."""
import json

import pytest

from autograder import course
from autograder.release import kernel_language_info, release

ALL = sorted(course.ROOT.glob("solutions/*/*.ipynb")) + sorted(course.ROOT.glob("notebooks/*/*.ipynb"))


@pytest.fixture(scope="module")
def fresh_release(tmp_path_factory):
    out = tmp_path_factory.mktemp("release")
    release(out)
    return out


def test_every_assignment_is_released():
    assert [p.name for p in sorted(course.NOTEBOOKS.iterdir()) if p.is_dir()] == course.assignments()


@pytest.mark.parametrize("aid", course.assignments())
def test_notebooks_are_up_to_date(fresh_release, aid):
    """Byte for byte, but for the patch number of the Python that released them (3.11.7 here, 3.11.9 there)."""
    committed = course.release_notebook(aid).read_text()
    generated = (fresh_release / aid / f"{aid}.ipynb").read_text()
    assert without_patch(committed) == without_patch(generated), \
        f"notebooks/{aid} is out of date: run `python -m autograder release`"


def without_patch(text):
    """A notebook's text with language_info's version cut to major.minor (3.11.7 -> 3.11)."""
    version = json.loads(text)["metadata"]["language_info"]["version"]
    return text.replace(f'"version": "{version}"', '"version": "%s"' % version.rsplit(".", 1)[0], 1)


@pytest.mark.parametrize("aid", course.assignments())
def test_released_notebooks_carry_the_kernels_language_info(aid):
    """So that JupyterLab, which writes the kernel's language_info into the notebook when the kernel starts,
    finds nothing to change and does not open the notebook marked unsaved (on the same Python; the pinned
    Python is checked in test_versions)."""
    meta = json.loads(course.release_notebook(aid).read_text())["metadata"]
    kernel = kernel_language_info()
    assert {k: v for k, v in meta["language_info"].items() if k != "version"} == \
        {k: v for k, v in kernel.items() if k != "version"}
    assert meta["kernelspec"] == {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


@pytest.mark.parametrize("aid", course.assignments())
def test_release_hides_solutions_and_hidden_tests(aid):
    text = course.release_notebook(aid).read_text()
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "autograder.checks", "Model answer"):
        assert marker not in text, f"{marker!r} leaked into notebooks/{aid}"
    nb = json.loads(text)
    for cell in nb["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("solution") and cell["cell_type"] == "code":
            assert "raise NotImplementedError()" in "".join(cell["source"])


@pytest.mark.parametrize("path", ALL, ids=[str(p.relative_to(course.ROOT)) for p in ALL])
def test_committed_without_outputs(path):
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert not cell["outputs"] and cell["execution_count"] is None, f"{path} has outputs: clear them"


@pytest.mark.parametrize("aid", course.assignments())
def test_graded_cells_follow_the_naming_rule(aid):
    """Test cells are named <exercise>_<what>, so reports can group them by exercise."""
    nb = json.loads(course.source_notebook(aid).read_text())
    metas = [c["metadata"]["nbgrader"] for c in nb["cells"] if "nbgrader" in c["metadata"]]
    solutions = [m["grade_id"] for m in metas if m.get("solution") and not m.get("grade")]
    for m in metas:
        if m.get("grade") and not m.get("solution"):
            assert any(m["grade_id"].startswith(s + "_") for s in solutions), m["grade_id"]
            assert m["points"] > 0
    ids = [m["grade_id"] for m in metas]
    assert len(ids) == len(set(ids)), "grade ids must be unique"

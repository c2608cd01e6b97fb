"""A notebook may use the lib references of earlier notebooks only: a student
who has the references up to notebook NN-1 can run notebook NN, and nothing
in lib gives away the solution of the notebook being worked on."""
import json

import pytest

from autograder import bundle, course
from autograder.bundle import lib_imports, needs

LIB = course.ROOT / "lib"
OWNER = bundle.OWNER


def test_every_reference_module_exists_and_belongs_to_a_notebook():
    assert set(course.REFERENCE_MODULES) <= set(course.assignments())
    for module in OWNER:
        assert (LIB / f"{module}.py").is_file(), module


@pytest.mark.parametrize("module", sorted(OWNER))
def test_a_reference_uses_no_later_notebook(module):
    for used in needs(module):
        assert OWNER[used] <= OWNER[module], f"lib/{module}.py ({OWNER[module]}) uses lib/{used}.py ({OWNER[used]})"


@pytest.mark.parametrize("aid", course.assignments())
def test_a_notebook_uses_only_earlier_references(aid):
    nb = json.loads(course.source_notebook(aid).read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"
                     and "BEGIN HIDDEN TESTS" not in "".join(c["source"]))
    code = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("%", "!")))
    for module in lib_imports(code):
        for used in needs(module):
            assert OWNER[used] < aid, f"{aid} uses lib/{used}.py, the reference of {OWNER[used]}"

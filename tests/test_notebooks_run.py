"""Every solution notebook runs top to bottom on the CPU with no error, and what its prose says of
the printed numbers holds (tests/claims/)."""
import time

import nbformat
import pytest
from nbclient import NotebookClient

from autograder import course
from tests import claims


@pytest.mark.parametrize("aid", course.assignments())
def test_solution_runs_top_to_bottom(aid, tmp_path):
    path = course.source_notebook(aid)
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    seconds = time.perf_counter() - start
    print(f"{aid}: {seconds:.1f} s")
    stderr = [o.text for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "stream" and o.name == "stderr" and "TCP without encryption" not in o.text]
    assert not stderr, f"{aid} writes to stderr: {stderr[:2]}"
    claims.check(aid, nb)

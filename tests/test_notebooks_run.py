"""Every solution notebook runs top to bottom on the CPU with no error, what its prose says of
the printed numbers holds (tests/claims/), and each exercise's check("...") call gives full points."""
import os
import re
import time

import nbformat
import pytest
from nbclient import NotebookClient

from autograder import course
from lib import checking
from tests import claims


@pytest.fixture(scope="module")
def live_socket(tmp_path_factory):
    """One check service for the notebooks of this test process, stopped at the end."""
    path = str(tmp_path_factory.mktemp("live") / "live.sock")
    os.environ["AUTOGRADER_LIVE_SOCKET"] = path  # the kernels inherit it
    yield path
    os.environ.pop("AUTOGRADER_LIVE_SOCKET", None)
    try:
        checking._exchange(path, {"op": "stop"}, 30)
    except (OSError, checking.CheckUnavailable):
        pass


@pytest.mark.parametrize("aid", course.assignments())
def test_solution_runs_top_to_bottom(aid, live_socket):
    path = course.source_notebook(aid)
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    seconds = time.perf_counter() - start
    for cell in nb.cells:  # the hidden tests, asked from inside the notebook, give the solution full points
        if cell.metadata.get("nbgrader", {}).get("grade_id", "").endswith("_hidden_check"):
            text = "".join(o.get("text", "") for o in cell.outputs)
            got = re.match(r"\w+: (\S+) / (\S+) points", text)
            assert got and got.group(1) == got.group(2), f"{aid}: {cell.source}: {text}"
    print(f"{aid}: {seconds:.1f} s")
    stderr = [o.text for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "stream" and o.name == "stderr" and "TCP without encryption" not in o.text]
    assert not stderr, f"{aid} writes to stderr: {stderr[:2]}"
    claims.check(aid, nb)

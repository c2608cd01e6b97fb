"""No reference solution of the notebook being graded ever reaches its kernel.

The judges grade a later exercise with the trusted references of the earlier
ones; those are the notebook's answers, so they run in the grader and the
kernel only gets stand-ins that ask for them (``autograder.checks.kernel.Here``).
Here a spy solves each notebook and records, from its first answer on,
everything its kernel receives: every source compiled and the string constants
(docstrings included) of every code object run that is not a file the kernel
has, the data of every request, every module added to ``sys.modules``. A cell
it adds at the end prints the record (compressed: a cell keeps 1000 lines and
1 MB of output). All notebooks are graded in one ``grade`` run; neither the
graded notebooks nor the feedback may show a line of the notebook's own lib
modules that the kernel does not hold already.
"""
import base64
import html
import json
import zlib

import pytest

from autograder import course
from autograder.__main__ import grade_class
from autograder.bundle import LIB, lib_modules_for
from autograder.settings import Limits
from tests.submissions import make_submission, solution_sources

SPY = r'''
import base64 as _b64, json as _json, os as _os, re as _re, sys as _sys

_SEEN, _MODULES, _COUNT = [], set(_sys.modules), [len(_sys.modules)]


def _strings(code):
    for c in code.co_consts:
        if isinstance(c, str):
            _SEEN.append(c)
        elif hasattr(c, "co_consts"):
            _strings(c)


def _spy(event, args):
    if event == "compile" and isinstance(args[0], (str, bytes)):
        text = args[0].decode(errors="replace") if isinstance(args[0], bytes) else args[0]
        requests = _re.findall(r"b64decode\('([A-Za-z0-9+/=]+)'\)", text)
        for request in requests:  # the grader's requests: their data, without the tensors
            message = _json.loads(_b64.b64decode(request))
            message.pop("tensors", None)
            _SEEN.append(_json.dumps(message))
        if not requests:
            _SEEN.append(text)
    elif event == "exec" and hasattr(args[0], "co_consts") and not _os.path.isfile(args[0].co_filename):
        _strings(args[0])
    if len(_sys.modules) != _COUNT[0]:  # cheap on every event; a module is added at an event of its own import
        _COUNT[0] = len(_sys.modules)
        new = set(_sys.modules) - _MODULES
        _MODULES.update(new)
        _SEEN.extend(sorted(new))


_sys.addaudithook(_spy)
'''
PRINT = ("import zlib as _zlib\n"  # one line, compressed: a cell keeps 1000 lines and 1 MB of output
         "_SEEN.extend(sorted(set(_sys.modules) - _MODULES))\n"
         "print('SPY RECORD', _b64.b64encode(_zlib.compress(_json.dumps(list(dict.fromkeys(_SEEN))).encode(), 9))"
         ".decode())\n")


def _spy_notebook(aid, path):
    """The solved notebook, with the spy in its first answer cell and a cell at the end that prints the record."""
    first = next(gid for gid in solution_sources(aid) if not gid.startswith("question"))
    make_submission(aid, path, {first: SPY + solution_sources(aid)[first]})
    nb = json.loads(path.read_text())
    nb["cells"].append({"cell_type": "code", "execution_count": None, "id": "spy-record", "metadata": {},
                        "outputs": [], "source": PRINT})
    path.write_text(json.dumps(nb))


def _secret_lines(aid, notebook_text):
    """Lines of the notebook's own lib modules (its answers) that neither the notebook nor the lib modules
    its kernel has (``bundle.student_view``) hold already."""
    given = notebook_text + "".join((LIB / f"{m}.py").read_text() for m in lib_modules_for(aid))
    out = []
    for module in course.REFERENCE_MODULES[aid]:
        for line in (LIB / f"{module}.py").read_text().splitlines():
            line = line.strip()
            if len(line) >= 30 and line not in given:
                out.append(line)
    return out


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("spy")
    for aid in course.assignments():
        _spy_notebook(aid, tmp / "submitted" / "spy" / aid / f"{aid}.ipynb")
    results, _ = grade_class(tmp / "submitted", tmp / "out", jobs=2, limits=Limits(), progress=False)
    return tmp, {r.assignment: r for r in results}


@pytest.mark.parametrize("aid", course.assignments())
def test_a_kernel_that_records_everything_learns_no_reference_of_its_notebook(graded, aid):
    tmp, results = graded
    result = results[aid]
    assert result.auto_score == sum(c.max_score for c in result.cells if not c.manual), \
        [(c.grade_id, c.message) for c in result.cells if c.score < c.max_score]
    notebook = json.loads((tmp / "submitted" / "spy" / aid / f"{aid}.ipynb").read_text())
    notebook_text = "\n".join("".join(c["source"]) for c in notebook["cells"])
    graded_nb = json.loads((tmp / "out" / "autograded" / "spy" / aid / f"{aid}.ipynb").read_text())
    outputs = "\n".join(o.get("text", "") if isinstance(o.get("text"), str) else "".join(o.get("text", []))
                        for c in graded_nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", []))
    assert "the grader dropped the rest" not in outputs
    blob = outputs[outputs.index("SPY RECORD") + 11:].splitlines()[0]
    record = "\n".join(json.loads(zlib.decompress(base64.b64decode(blob))))
    assert '"op": "call"' in record  # it saw the requests
    feedback = (tmp / "out" / "feedback" / "spy" / f"{aid}.html").read_text()
    secrets = _secret_lines(aid, notebook_text)
    assert secrets, "no line of the notebook's own lib modules to look for"
    leaked = [line for line in secrets if line in record]
    assert not leaked, f"{len(leaked)} lines of {aid}'s references reached its kernel, such as {leaked[:3]}"
    leaked = [line for line in secrets if html.escape(line) in feedback]
    assert not leaked, f"{len(leaked)} lines of {aid}'s references are in its feedback, such as {leaked[:3]}"

"""Hostile and malformed submissions of notebook 01, and the grade each must get.

Each case is a submission (the solution, with some cells replaced, or a
broken file) and the points it must score per exercise, the flag its code must
raise for a human, and any side effect that must not have happened. Honest
students are graded in the same run, to show that nobody else's grades move.

HOSTILE tries the kernel's limits; FORGERY tries to change verdicts, read what
the grader knows, or reach other students and the course's files (issue E);
MALFORMED are broken files.
Exercises of 01: softmax 3, simple_self_attention 2,
scaled_dot_product_attention 4, SelfAttention 2 (11 autograded points).
"""
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import nbformat

from autograder import course
from tests.submissions import make_submission, solution_sources

AID = "01_self_attention"
FULL = {"softmax": 3, "simple_self_attention": 2, "scaled_dot_product_attention": 4, "SelfAttention": 2}
SOL = solution_sources(AID)
WRONG_SOFTMAX = "import torch\n\ndef softmax(x, dim=-1):\n    return torch.zeros_like(x)\n"


def scores(**changed):
    return {**FULL, **changed}


NOTHING = {k: 0 for k in FULL}


@dataclass
class Case:
    name: str
    write: Callable[[Path], None]  # writes the submission at this path
    expect: dict  # exercise -> points
    note: str = ""  # must appear in the result's notes or error
    flag: str = ""  # must appear in the result's flags
    error: str = ""  # must appear in the result's error
    check: Callable[[], None] | None = None  # a side effect that must not have happened


def code(replace):
    return lambda path: make_submission(AID, path, replace)


def _nb(path, edit):
    """The solved submission, then ``edit(cells)``."""
    make_submission(AID, path)
    nb = json.loads(path.read_text())
    edit(nb["cells"])
    path.write_text(json.dumps(nb))


def _index(cells, gid):
    return next(i for i, c in enumerate(cells) if c["metadata"].get("nbgrader", {}).get("grade_id") == gid)


def _before(gid, cell, answer):
    """The solved notebook with ``answer`` in answer cell ``gid`` and a code cell of the student's own before it."""
    def write(path):
        make_submission(AID, path, {gid: answer})
        nb = json.loads(path.read_text())
        nb["cells"].insert(_index(nb["cells"], gid), {"cell_type": "code", "id": "own-cell", "metadata": {},
                                                      "execution_count": None, "outputs": [], "source": cell})
        path.write_text(json.dumps(nb))
    return write


def _raw(text):
    return lambda path: path.write_bytes(text)


GRADEBOOK_ATTACK = '''
import sqlite3, glob
for db in glob.glob("../../../*.db") + glob.glob("/tmp/autograder-*/*/gradebook.db"):
    con = sqlite3.connect(db)
    con.execute("update grade set auto_score = 100")
    con.commit()
'''
LIB_TESTING = course.ROOT / "lib" / "testing.py"


def _lib_untouched():
    assert "HACKED" not in LIB_TESTING.read_text()


HOSTILE = [
    Case("os._exit in an answer cell", code({"scaled_dot_product_attention": SOL["scaled_dot_product_attention"]
                                            + "\nimport os\nos._exit(0)\n"}),
         scores(scaled_dot_product_attention=0, SelfAttention=0), note="the kernel died", flag="os._exit"),
    Case("sys.exit in an answer cell", code({"simple_self_attention": SOL["simple_self_attention"]
                                            + "\nimport sys\nsys.exit(0)\n"}), scores(), flag="sys.exit"),
    Case("kernel crash (segfault)", code({"SelfAttention": SOL["SelfAttention"]
                                         + "\nimport ctypes\nctypes.string_at(0)\n"}),
         scores(SelfAttention=0), note="the kernel died", flag="ctypes"),
    Case("infinite loop", code({"softmax": SOL["softmax"] + "\nwhile True:\n    pass\n"}), scores(),
         note="was interrupted"),
    Case("loop that ignores the interrupt", code({"SelfAttention": SOL["SelfAttention"]
                                                  + "\nimport signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                                    "while True:\n    pass\n"}),
         scores(SelfAttention=0), note="did not answer an interrupt", flag="signal"),
    Case("memory bomb", code({"simple_self_attention": SOL["simple_self_attention"]
                              + "\nhog = [bytearray(2**28) for _ in range(64)]\n"}), scores()),
    Case("100 MB of output", code({"softmax": SOL["softmax"] + "\nfor _ in range(100_000):\n    print('x' * 1000)\n"}),
         scores(), note="printed more than"),
    Case("a correct answer that warns on stderr", code({"softmax": SOL["softmax"].replace(
        "def softmax(", "import sys, warnings\n\n\ndef _noisy():\n    warnings.warn('softmax: careful')\n"
                        "    print('debug', file=sys.stderr)\n\n\ndef _softmax(") +
        "\n\ndef softmax(x, dim=-1):\n    _noisy()\n    return _softmax(x, dim)\n"}), scores()),
    Case("monkeypatched torch.isclose and torch.allclose", code({"softmax": WRONG_SOFTMAX +
        "torch.isclose = lambda *a, **k: torch.ones(torch.broadcast_shapes(a[0].shape, a[1].shape), dtype=torch.bool)\n"
        "torch.allclose = lambda *a, **k: True\ntorch.testing.assert_close = lambda *a, **k: None\n"}),
         scores(softmax=0), flag="changing torch.isclose"),
    Case("monkeypatched course test helpers", code({"softmax": WRONG_SOFTMAX +
        "import lib.testing, autograder.checks.self_attention as c\n"
        "lib.testing.assert_close = lambda *a, **k: None\n"
        "c.softmax_reference = lambda *a, **k: None\nc.softmax_stable = lambda *a, **k: None\n"}),
         scores(softmax=0), flag="the grader's own code"),
    Case("an output whose comparisons always succeed", code({"softmax":
        "import torch\n\nclass Liar(torch.Tensor):\n    def __eq__(self, other):\n        return True\n\n"
        "    @classmethod\n    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
        "        return torch.ones((), dtype=torch.bool) if 'close' in func.__name__ else "
        "super().__torch_function__(func, types, args, kwargs)\n\n"
        "def softmax(x, dim=-1):\n    return torch.zeros_like(x).as_subclass(Liar)\n"}),
         scores(softmax=0), flag="redefines __eq__"),
    Case("reading the solutions and the gradebook", code({"softmax":
        f"import json\nnb = json.load(open({str(course.source_notebook(AID))!r}))\n"
        "src = [c for c in nb['cells'] if c['metadata'].get('nbgrader', {}).get('grade_id') == 'softmax'][0]\n"
        "exec(''.join(src['source']))\n"}), scores(softmax=0), flag="exec"),
    Case("writing the gradebook and the course's lib", code({"softmax": WRONG_SOFTMAX + GRADEBOOK_ATTACK +
        f"try:\n    open({str(LIB_TESTING)!r}, 'a').write('# HACKED')\nexcept OSError:\n    pass\n"}),
         scores(softmax=0), flag="a database", check=_lib_untouched),
]

def _after(cell: str, extra: str):
    """The solved notebook with ``extra`` appended to answer cell ``cell``."""
    return code({cell: SOL[cell] + "\n" + extra})


def _wrong_softmax_and(extra: str):
    return code({"softmax": WRONG_SOFTMAX + extra})


def _victim(path: Path) -> Path:
    """Another student's submitted notebook, beside this one in the class's submitted/ folder."""
    return path.parent.parent.parent / "honest1" / AID / f"{AID}.ipynb"


def _links(path: Path):
    """Replace the kernel's own notebook (and more) with links to another student's file and to course files."""
    targets = [str(_victim(path)), str(course.release_notebook(AID)), str(course.ROOT / "lib" / "testing.py"),
               str(course.ROOT / "autograder" / "checks" / "__init__.py")]
    make_submission(AID, path, {"SelfAttention": SOL["SelfAttention"] + f"""
import os
targets = {targets!r}
for name in os.listdir("."):
    try:
        os.remove(name)
    except OSError:
        pass
for link, target in zip(["{AID}.ipynb", "release.ipynb", "testing.py", "checks.py"], targets):
    for where in (".", "..", "../..", "../../.."):
        try:
            os.symlink(target, os.path.join(where, link))
        except OSError:
            pass
"""})


PICKLE_MARKER = Path(tempfile.gettempdir()) / "autograder-hostile-pickle-ran"
PAYLOAD = f"""
import os


class Payload:
    def __reduce__(self):
        return (os.system, ("touch {PICKLE_MARKER}",))
"""
CAPTURE = """
import sys


def _capture(event, args):
    # the grader's references of this notebook, should they come into the kernel as source: run them here,
    # without their guard, so that the exercises left unwritten are the course's own
    source = args[0].decode() if event == "compile" and isinstance(args[0], bytes) else ""
    if "def scaled_dot_product_attention(" in source and "@reference" in source:
        exec(source.replace("@reference", ""), get_ipython().user_ns)


sys.addaudithook(_capture)
"""
HIDDEN_TEXT = ("def softmax_reference", "BEGIN SOLUTION", "the parameter-free version has no scaling")

FORGERY = [
    Case("IPython: a post_run_cell event clears the error", _wrong_softmax_and(
        "ip = get_ipython()\n\ndef forge(result):\n    result.error_in_exec = None\n    result.error_before_exec = None\n\n"
        "ip.events.register('post_run_cell', forge)\n"), scores(softmax=0), flag="IPython's events"),
    Case("IPython: tracebacks switched off", _wrong_softmax_and(
        "ip = get_ipython()\nip.showtraceback = lambda *a, **k: None\n"
        "ip.set_custom_exc((BaseException,), lambda *a, **k: None)\n"), scores(softmax=0), flag="IPython's tracebacks"),
    Case("IPython: run_cell rewrites what the grader sends", _wrong_softmax_and(
        "ip = get_ipython()\n_run = ip.run_cell\n\ndef run_cell(raw_cell, *a, **k):\n"
        "    if 'autograder' in raw_cell or 'grade_here' in raw_cell:\n        raw_cell = 'pass'\n"
        "    return _run(raw_cell, *a, **k)\n\nip.run_cell = run_cell\n"), NOTHING,
        flag="IPython's cell runner"),  # the grader's requests get no answer: every exercise fails
    Case("the kernel side replaced by a forger", _wrong_softmax_and(
        "import json\nimport autograder.probe as probe\nfrom IPython.display import publish_display_data\n\n"
        "def serve(text):\n    publish_display_data({probe.MIME: json.dumps({'ok': True, 'passed': True, 'v': None})})\n\n"
        "probe.serve = serve\n"), NOTHING, flag="the grader's own code"),
    Case("the kernel side answers with a pickle", code({"softmax": SOL["softmax"] + PAYLOAD +
        "import base64, pickle\nimport autograder.probe as probe\nfrom IPython.display import publish_display_data\n\n"
        "def serve(text):\n    publish_display_data({probe.MIME: base64.b64encode(pickle.dumps(Payload())).decode()})\n\n"
        "probe.serve = serve\n"}), NOTHING, flag="__reduce__", check=lambda: _no_pickle_ran()),
    Case("a returned value that runs code when unpickled", code({"softmax": PAYLOAD +
        "\ndef softmax(x, dim=-1):\n    return Payload()\n"}), scores(softmax=0), flag="__reduce__",
        check=lambda: _no_pickle_ran()),
    Case("import hooks and sys.modules entries", _wrong_softmax_and(
        "import sys, types\nfake = types.ModuleType('autograder.checks')\nfake.grade_here = lambda *a, **k: None\n"
        "sys.modules['autograder.checks'] = fake\nsys.modules['lib.testing'] = fake\n\n"
        "class Finder:\n    def find_spec(self, name, path=None, target=None):\n        return None\n\n"
        "sys.meta_path.insert(0, Finder())\n"), scores(softmax=0), flag="sys.modules"),
    Case("frame introspection for the expected values", code({"softmax":
        "import sys\nimport torch\n\ndef softmax(x, dim=-1):\n    f = sys._getframe(1)\n    while f is not None:\n"
        "        for v in list(f.f_locals.values()):\n            if torch.is_tensor(v) and v.shape == x.shape and v is not x:\n"
        "                return v\n        f = f.f_back\n    return torch.zeros_like(x)\n"}), scores(softmax=0),
        flag="frame introspection"),
    Case("the garbage collector searched for the expected values", code({"softmax":
        "import gc\nimport torch\n\ndef softmax(x, dim=-1):\n    for obj in gc.get_objects():\n"
        "        if torch.is_tensor(obj) and obj.shape == x.shape and obj is not x and torch.allclose(obj.sum(dim), "
        "torch.ones(())):\n            return obj\n    return torch.zeros_like(x)\n"}), scores(softmax=0), flag="gc"),
    Case("the course's reference unwrapped", code({"softmax":
        "import lib.self_attention as ref\nsoftmax = ref.softmax.__wrapped__\n"}), scores(softmax=0),
        flag="__wrapped__"),
    Case("torch.softmax re-trusted with the course's guard (passes, flagged)", code({"softmax":
        "import torch\nfrom lib.guard import trusted\n\n@trusted\ndef softmax(x, dim=-1):\n"
        "    return torch.softmax(x, dim)\n"}), scores(), flag="lib.guard"),
    Case("the dispatcher ban switched off with torch._C (passes, flagged)", code({"softmax":
        "import torch\n\ndef softmax(x, dim=-1):\n    with torch._C._DisableTorchDispatch():\n"
        "        return torch.softmax(x, dim)\n"}), scores(), flag="PyTorch's internals"),
    Case("the dispatcher's modes switched off (passes, flagged)", code({"softmax":
        "import torch\nfrom torch.utils._python_dispatch import _disable_current_modes\n\n"
        "def softmax(x, dim=-1):\n    with _disable_current_modes():\n        return torch.softmax(x, dim)\n"}),
        scores(), flag="private module"),
    Case("comparison functions patched at call time", code({"softmax":
        "import torch\nimport lib.testing\n\ndef softmax(x, dim=-1):\n    torch.allclose = lambda *a, **k: True\n"
        "    torch.isclose = lambda a, b, *r, **k: torch.ones_like(a, dtype=torch.bool)\n"
        "    torch.equal = lambda *a, **k: True\n    lib.testing.assert_close = lambda *a, **k: None\n"
        "    return torch.zeros_like(x)\n"}), scores(softmax=0), flag="changing torch.allclose"),
    Case("links to another student's file and to course files", _links, scores(), flag="making a link"),
    Case("reading the hidden checks and the solutions", code({"softmax": SOL["softmax"] +
        "\nimport os\nimport autograder\n"
        f"for root in [os.path.dirname(autograder.__file__), {str(course.ROOT / 'autograder')!r}, "
        f"{str(course.ROOT / 'solutions')!r}, {str(course.ROOT / 'lib')!r}]:\n"
        "    for folder, _, names in os.walk(root):\n        for name in names:\n            try:\n"
        "                print(open(os.path.join(folder, name)).read()[:20000])\n            except (OSError, UnicodeDecodeError):\n"
        "                pass\n"}), scores(), flag="walking folders"),
    Case("the notebook's references captured as they reach the kernel, and run (audit hook on compile)",
         code({"softmax": SOL["softmax"] + CAPTURE, "scaled_dot_product_attention": "# left to the grader\n",
               "SelfAttention": "# left to the grader\n"}),
         scores(scaled_dot_product_attention=0, SelfAttention=0), flag="exec"),
    Case("filling the disk", _after("softmax", "try:\n    with open('big.bin', 'wb') as f:\n        for _ in range(400):\n"
                                                "            f.write(b'0' * 2**20)\nexcept OSError as e:\n    print('full:', e)\n"),
         scores(), flag="opening a file"),
    Case("a pathological markdown answer", lambda p: _nb(p, lambda cells: cells[_index(cells, "question_permutation")]
                                                         .update(source="[" * 40_000 + "]" * 40_000)), scores()),
] + [  # the ban holds on the calling thread only: work done elsewhere fails, flagged (autograder/probe.py)
    Case("torch.softmax on a ThreadPoolExecutor made in the call", code({"softmax":
        "import torch\nfrom concurrent.futures import ThreadPoolExecutor\n\ndef softmax(x, dim=-1):\n"
        "    with ThreadPoolExecutor(1) as pool:\n        return pool.submit(torch.softmax, x, dim).result()\n"}),
        scores(softmax=0), flag="ran work on another thread (ThreadPoolExecutor)"),
    Case("torch.softmax on a ThreadPoolExecutor made in an earlier cell", _before("softmax",
        "from concurrent.futures import ThreadPoolExecutor\n\nPOOL = ThreadPoolExecutor(2)\n",
        "import torch\n\ndef softmax(x, dim=-1):\n    return POOL.submit(torch.softmax, x, dim).result()\n"),
        scores(softmax=0), flag="ran work on another thread (ThreadPoolExecutor)"),
    Case("torch.softmax on a threading.Thread", code({"softmax":
        "import threading\nimport torch\n\ndef softmax(x, dim=-1):\n    out = []\n"
        "    worker = threading.Thread(target=lambda: out.append(torch.softmax(x, dim)))\n"
        "    worker.start()\n    worker.join()\n    return out[0]\n"}),
        scores(softmax=0), flag="ran work on another thread (Thread"),
    Case("torch.softmax in a multiprocessing pool made in an earlier cell", _before("softmax",
        "import multiprocessing\n\nPOOL = multiprocessing.get_context('fork').Pool(1)\n",
        "import torch\n\ndef softmax(x, dim=-1):\n    return POOL.apply(torch.softmax, (x, dim))\n"),
        scores(softmax=0), flag="ran work on another thread (multiprocessing)"),
    Case("a correct softmax computed in an os.fork child", code({"softmax": SOL["softmax"].replace(
        "def softmax(", "def _softmax(") + "\n\nimport os\n\ndef softmax(x, dim=-1):\n    read, write = os.pipe()\n"
        "    if os.fork() == 0:\n        try:\n            os.write(write, _softmax(x, dim).numpy().tobytes())\n"
        "        finally:\n            os._exit(0)\n    os.close(write)\n    data = b''\n"
        "    while chunk := os.read(read, 65536):\n        data += chunk\n    os.wait()\n"
        "    return torch.frombuffer(bytearray(data), dtype=x.dtype).reshape(x.shape)\n"}),
        scores(softmax=0), flag="ran work on another process (os.fork)"),
]


def _no_pickle_ran():
    assert not PICKLE_MARKER.exists(), "a pickle from the kernel ran in the grader"


# students whose ids are odd but valid: graded like anyone else
SPECIAL_IDS = ["f[1]", "a*b?", "-rf", "名前", "two words", "x'y\"z", "{braces}"]
# folders that cannot be student ids: reported by name, never silently lost
REFUSED_IDS = {" padded ": "white space", ".hidden": "hidden folders"}


MALFORMED = [
    Case("invalid JSON (a truncated file)", lambda p: p.write_text(course.release_notebook(AID).read_text()[:5000]),
         scores(softmax=0, simple_self_attention=0, scaled_dot_product_attention=0, SelfAttention=0),
         error="not valid JSON"),
    Case("an empty file", _raw(b""), {k: 0 for k in FULL}, error="empty"),
    Case("nbformat version 5", lambda p: p.write_text(json.dumps({"nbformat": 5, "nbformat_minor": 0, "cells": [],
                                                                  "metadata": {}})),
         {k: 0 for k in FULL}, error="format version 5"),
    Case("JSON that is not a notebook", _raw(b"[1, 2, 3]"), {k: 0 for k in FULL}, error="not a Jupyter notebook"),
    Case("a test cell deleted", lambda p: _nb(p, lambda cells: cells.pop(_index(cells, "softmax_reference"))),
         scores(), note="softmax_reference was deleted"),
    Case("a test cell deleted, wrong answer", lambda p: (make_submission(AID, p, {"softmax": WRONG_SOFTMAX}), _nb_edit(
        p, lambda cells: cells.pop(_index(cells, "softmax_reference")))), scores(softmax=0), note="was deleted"),
    Case("a test cell duplicated", lambda p: _nb(p, lambda cells: cells.insert(
        _index(cells, "softmax_stable"), dict(cells[_index(cells, "softmax_stable")]))), scores(),
        note="appears twice"),
    Case("an answer cell duplicated, the copy fixed", lambda p: (make_submission(AID, p, {"SelfAttention":
        "class SelfAttention:\n    pass\n"}), _nb_edit(p, lambda cells: cells.insert(
            _index(cells, "SelfAttention") + 1, {**cells[_index(cells, "SelfAttention")], "id": "copy",
                                                 "source": SOL["SelfAttention"]}))),
         scores(), note="SelfAttention appears twice"),
    Case("a test cell edited to pass", lambda p: (make_submission(AID, p, {"softmax": WRONG_SOFTMAX}), _nb_edit(
        p, lambda cells: cells[_index(cells, "softmax_reference")].update(source="print('all good')"))),
         scores(softmax=0), note="softmax_reference was edited"),
    Case("an answer cell turned into markdown", lambda p: _nb(p, lambda cells: _to_markdown(
        cells[_index(cells, "softmax")])), scores(), note="changed from code to markdown"),
    Case("a test cell turned into markdown", lambda p: _nb(p, lambda cells: _to_markdown(
        cells[_index(cells, "scaled_dot_product_attention_mask")])), scores(), note="was changed from code"),
    Case("an answer cell deleted", lambda p: _nb(p, lambda cells: cells.pop(_index(cells, "softmax"))),
         scores(softmax=0), note="answer cell softmax is missing"),
    Case("an old notebook format (v3)", lambda p: (make_submission(AID, p), p.write_text(
        nbformat.writes(nbformat.convert(nbformat.read(p, as_version=4), 3)))), scores(),
         note="converted from format version 3"),
]


def _nb_edit(path, edit):
    nb = json.loads(path.read_text())
    edit(nb["cells"])
    path.write_text(json.dumps(nb))


def _to_markdown(cell):
    cell["cell_type"] = "markdown"
    cell.pop("outputs", None)
    cell.pop("execution_count", None)

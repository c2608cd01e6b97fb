"""Hostile and malformed submissions of notebook 01, and the grade each must get.

Each case is a submission (the solution, with some cells replaced, or a
broken file) and the points it must score per exercise. A clean student is
graded in the same run, to show that nobody else's grades move.
Exercises of 01: softmax 3, simple_self_attention 2,
scaled_dot_product_attention 4, SelfAttention 2 (11 autograded points).
"""
import json
from dataclasses import dataclass, field
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

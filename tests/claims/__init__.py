"""What the notebooks' prose says about the numbers they print, checked on a real run.

A paragraph that quotes a result ("pre-norm reaches a loss well under 0.1",
"most words are one token") relies on what a code cell printed. Each notebook
has a module here, ``nbNN.py``, with a ``check(run)`` that asserts those claims
on the outputs of one top-to-bottom run of the solution notebook (the run that
``tests/test_notebooks_run.py`` does anyway). If a change of code, seed or
machine makes the prose untrue, this fails and names the paragraph.
"""
import importlib
import re

import nbformat


class Run:
    """The stdout a notebook printed, cell by cell, with small helpers to read numbers from it."""

    def __init__(self, nb: nbformat.NotebookNode):
        self.cells = ["".join(o.get("text", "") for o in c.get("outputs", [])
                              if o.get("output_type") == "stream" and o.get("name") == "stdout")
                      for c in nb.cells]
        self.text = "\n".join(self.cells)

    def match(self, pattern: str) -> re.Match:
        """The first match of ``pattern`` in everything printed; fails clearly when nothing matches."""
        found = re.search(pattern, self.text)
        assert found, f"the notebook printed nothing that matches {pattern!r}"
        return found

    def number(self, pattern: str) -> float:
        """The number captured by the first group of ``pattern``."""
        return float(self.match(pattern).group(1))

    def numbers(self, pattern: str) -> list[float]:
        """Every number captured by the first group of ``pattern``, in printed order."""
        found = [float(m.group(1)) for m in re.finditer(pattern, self.text)]
        assert found, f"the notebook printed nothing that matches {pattern!r}"
        return found


def check(aid: str, nb: nbformat.NotebookNode) -> None:
    """Assert the prose claims of notebook ``aid`` on its executed notebook."""
    importlib.import_module(f"tests.claims.nb{aid[:2]}").check(Run(nb))

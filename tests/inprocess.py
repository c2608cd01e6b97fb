"""Grade a submission's hidden checks inside this process: the fast way to
try a whole catalogue of mistakes (tests/test_mistakes.py checks on a sample
that nbgrader gives the same verdicts).

The solution notebook runs once (as nbgrader would run it while grading, with
NBGRADER_EXECUTION set); each submission then starts from a copy of that
namespace, puts its code in one answer cell, and runs the judges of the graded
cells from there on, with the kernel side in this process (``LocalTransport``:
the same requests and replies as through a kernel, without one).
"""
import contextlib
import io
import json
import os
import warnings
from dataclasses import dataclass

import matplotlib.pyplot as plt

from autograder import checks, course
from autograder.course import exercise_of


@dataclass
class Verdict:
    grade_id: str
    exercise: str
    passed: bool
    message: str


def _code(cell) -> str:
    lines = "".join(cell["source"]).splitlines()
    return "\n".join(line for line in lines if not line.lstrip().startswith(("%", "!")))


@contextlib.contextmanager
def _withheld(aid: str):
    """While the answer runs, the lib modules a grading kernel does not have cannot be imported (as in the
    kernel's view of the course: autograder.bundle.student_view)."""
    import sys
    from autograder.bundle import withheld

    blocked = {f"lib.{m}": why for m, why in withheld(aid).items()}

    class Block:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name in blocked:
                raise ImportError(blocked[name])
            return None

    saved = {name: sys.modules.pop(name) for name in list(sys.modules) if name in blocked}
    sys.meta_path.insert(0, Block)
    try:
        yield
    finally:
        sys.meta_path.remove(Block)
        sys.modules.update(saved)


def _bound(code: str) -> set:
    """The functions and classes a cell defines at its top level."""
    import ast
    return {node.name for node in ast.parse(code).body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


class Notebook:
    """A solution notebook, run once, ready to grade variants of one answer cell."""

    def __init__(self, aid: str):
        self.aid = aid
        nb = json.loads(course.source_notebook(aid).read_text())
        self.cells = [(c["metadata"].get("nbgrader", {}), _code(c)) for c in nb["cells"] if c["cell_type"] == "code"]
        self.solutions = [m["grade_id"] for m, _ in self.cells if m.get("solution")]
        self.namespace = {"__name__": "__main__", "display": print}
        saved_cwd, saved_env = os.getcwd(), os.environ.get("NBGRADER_EXECUTION")
        os.chdir(course.source_notebook(aid).parent)
        os.environ["NBGRADER_EXECUTION"] = "autograde"
        try:
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                for meta, code in self.cells:
                    if not self._is_test(meta):
                        exec(compile(code, f"<{aid}>", "exec"), self.namespace)
                        plt.close("all")
        finally:
            os.chdir(saved_cwd)
            if saved_env is None:
                os.environ.pop("NBGRADER_EXECUTION", None)
            else:
                os.environ["NBGRADER_EXECUTION"] = saved_env

    @staticmethod
    def _is_test(meta) -> bool:
        return bool(meta.get("grade")) and not meta.get("solution")

    def visible(self, cell: str, code: str) -> str:
        """What the visible check cell under answer cell ``cell`` (grade_id ``<cell>_check``) says of ``code``: ''
        when it passes, else the first line of the error it stops with."""
        ns = dict(self.namespace)
        start = next(i for i, (m, _) in enumerate(self.cells) if m.get("grade_id") == cell)
        for name in _bound(self.cells[start][1]):
            ns.pop(name, None)
        checks = [source for meta, source in self.cells[start:] if meta.get("grade_id") == f"{cell}_check"]
        try:
            with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings(), _withheld(self.aid):
                warnings.simplefilter("ignore")
                exec(compile(code, "<answer>", "exec"), ns)
                for source in checks:
                    exec(compile(source, "<check>", "exec"), ns)
        except Exception as e:  # noqa: BLE001 - whatever stops the check cell is what the student sees
            return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        finally:
            plt.close("all")
        return ""

    def grade(self, cell: str, code: str) -> list[Verdict]:
        """Verdicts of the graded cells after answer cell ``cell`` (earlier ones cannot change). The answer runs in
        the notebook's own namespace, as in a kernel, so that the later cells' functions see its names (and the
        names a judge puts in for a call); the namespace is as it was again afterwards."""
        ns = self.namespace
        saved = dict(ns)
        try:
            return self._grade(ns, cell, code)
        finally:
            ns.clear()
            ns.update(saved)

    def _grade(self, ns: dict, cell: str, code: str) -> list[Verdict]:
        verdicts = []
        start = next(i for i, (m, _) in enumerate(self.cells) if m.get("grade_id") == cell)
        for name in _bound(self.cells[start][1]):  # what the solution's cell defined is not there in a kernel
            ns.pop(name, None)
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                with _withheld(self.aid):
                    exec(compile(code, "<answer>", "exec"), ns)
            except Exception:  # noqa: BLE001 - a broken answer cell is part of the submission
                pass
            for meta, source in self.cells[start:]:
                if not self._is_test(meta):
                    continue
                message = checks.judge(self.aid, meta["grade_id"], checks.LocalTransport(ns)) or ""
                if message:
                    message = "AssertionError: " + message.splitlines()[0]
                verdicts.append(Verdict(meta["grade_id"], exercise_of(meta["grade_id"], self.solutions),
                                        not message, message))
                plt.close("all")
        return verdicts

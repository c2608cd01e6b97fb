"""Hidden tests: one package per notebook, one module per exercise, one function per graded cell.

A graded test cell ``softmax_reference`` of notebook ``01_self_attention`` is
judged by the function ``softmax_reference(k)`` in
``autograder/checks/self_attention/`` (the notebook's id without its number).
The function is the *judge side* of the test: it runs in the grader's process,
builds the inputs, computes the expected values with trusted references,
sends the student's code the inputs through ``k`` (a ``Kernel``, see
``kernel.py``) and raises ``AssertionError`` with a message in the student's
terms when the answer is wrong. The *kernel side* (``autograder/probe.py``)
only runs the student's code on those inputs.

Each notebook's package says, in its ``__init__``, what graded code may not
call (``BANS``) and which references belong to which exercise
(``REFERENCES``): a test of exercise X may inject the trusted references of
exercises before X (so a mistake in ``softmax`` does not cost the points of
``scaled_dot_product_attention``), never those of X or later ones.

The checks live here, not in ``lib``: ``lib`` is what students receive.
"""
import importlib
import importlib.util
import json
import pkgutil
from functools import lru_cache

from autograder import course
from autograder.course import exercise_of

from .kernel import Kernel, LocalTransport, ProbeFailure


def has_package(aid: str) -> bool:
    """Whether the assignment has a checks package (looked for, not imported: importing it may fail)."""
    name = aid.partition("_")[2]
    return name.isidentifier() and importlib.util.find_spec(f"autograder.checks.{name}") is not None


def package(aid: str):
    """The checks package of an assignment: ``01_self_attention`` -> ``autograder.checks.self_attention``."""
    return importlib.import_module(f"autograder.checks.{aid.split('_', 1)[1]}")


@lru_cache(maxsize=None)
def judges(aid: str) -> dict:
    """grade_id -> judge function, for every graded test cell of the assignment."""
    pkg = package(aid)
    found = {}
    for info in pkgutil.iter_modules(pkg.__path__):
        module = importlib.import_module(f"{pkg.__name__}.{info.name}")
        for name, fn in vars(module).items():
            if callable(fn) and getattr(fn, "__module__", None) == module.__name__ and name in graded_cells(aid):
                found[name] = fn
    return found


@lru_cache(maxsize=None)
def graded_cells(aid: str) -> tuple:
    """grade_ids of the graded test cells (not written answers) of the source notebook, in order."""
    nb = json.loads(course.source_notebook(aid).read_text())
    return tuple(gid for gid in map(course.graded_test, nb["cells"]) if gid)


@lru_cache(maxsize=None)
def exercises(aid: str) -> tuple:
    """grade_ids of the answer cells (the exercises), in order."""
    nb = json.loads(course.source_notebook(aid).read_text())
    return tuple(c["metadata"]["nbgrader"]["grade_id"] for c in nb["cells"]
                 if c["metadata"].get("nbgrader", {}).get("solution"))


@lru_cache(maxsize=None)
def _fixtures(aid: str) -> tuple:
    """(module name, source) of the kernel-side helpers the judges build (the package's FIXTURES). They hold
    no answers: the notebook's reference modules never go to the kernel (``kernel.Here``)."""
    out = []
    for name in getattr(package(aid), "FIXTURES", ()):
        spec = importlib.util.find_spec(name)
        out.append((name, open(spec.origin).read()))
    return tuple(out)


def kernel_for(aid: str, grade_id: str, transport) -> Kernel:
    """The Kernel a judge of ``grade_id`` works with: the notebook's bans, and trusted references of the
    exercises before this one only (run in the grader)."""
    pkg = package(aid)
    owners = pkg.REFERENCES  # exercise -> the names of its references
    exercise = exercise_of(grade_id, exercises(aid))
    order = list(owners)
    later = order[order.index(exercise):] if exercise in order else order
    withheld = [name for ex in later for name in owners[ex]]
    own = [f"lib.{m}" for m in course.REFERENCE_MODULES.get(aid, ())]
    return Kernel(transport, pkg.BANS, _fixtures(aid), own, withheld)


def judge(aid: str, grade_id: str, transport, flags: list | None = None) -> str | None:
    """Run the judge of one graded cell: None when it passes, else the failure message. What a person
    should review (a call that ran work where the kernel could not check it) fails the cell whatever the
    judge made of it, and goes to ``flags`` too.

    Raises ``ProbeFailure`` when the kernel stopped answering (the caller says why).
    """
    fn = judges(aid)[grade_id]
    k = kernel_for(aid, grade_id, transport)
    message = None
    try:
        fn(k)
    except AssertionError as e:
        message = str(e) or "the check failed"
    finally:
        try:
            k.reset()
        except ProbeFailure:
            pass
    if k.flags and flags is not None:
        flags += k.flags[:1]
    return k.flags[0] if k.flags else message


def grade_here(aid: str, grade_id: str, namespace: dict) -> None:
    """Judge a graded cell inside the student's own kernel (what a hidden test cell does when stock
    nbgrader runs it without the course's configuration): raises AssertionError when it fails.

    Here the judge shares a process with the student's code, which could tamper with it; the course's
    own grading (``python -m autograder check`` / ``grade``, and nbgrader with the course's
    configuration) runs the judge outside the kernel instead.
    """
    message = judge(aid, grade_id, LocalTransport(namespace))
    if message is not None:
        raise AssertionError(message)

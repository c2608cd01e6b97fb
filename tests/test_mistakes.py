"""Every catalogued mistake loses points with a message that names it, and
costs nothing outside its own exercise; every correct alternative keeps full marks."""
import importlib
import os
import pkgutil

import pytest

import tests.mistakes as catalogue
from autograder.grading import grade_many
from tests.submissions import make_submission

MODULES = [importlib.import_module(f"tests.mistakes.{m.name}") for m in pkgutil.iter_modules(catalogue.__path__)]
MISTAKES = [(m.ASSIGNMENT, x) for m in MODULES for x in m.MISTAKES]
ALTERNATIVES = [(m.ASSIGNMENT, x) for m in MODULES for x in m.ALTERNATIVES]


@pytest.fixture(scope="module")
def graded(request, tmp_path_factory):
    """Grade, in one class-sized run, every mistake and alternative of the
    notebooks whose tests were selected (so `-k 02_positions` grades only 02)."""
    wanted = {item.callspec.params["aid"] for item in request.session.items
              if getattr(item, "callspec", None) and "aid" in item.callspec.params}
    todo = [(aid, item) for aid, item in MISTAKES + ALTERNATIVES if aid in wanted]
    tmp = tmp_path_factory.mktemp("catalogue")
    subs = []
    for i, (aid, item) in enumerate(todo):
        student = f"s{i:03d}"
        subs.append((student, aid, make_submission(aid, tmp / student / f"{aid}.ipynb", {item.cell: item.code})))
    results = grade_many(subs, jobs=os.cpu_count() or 1)
    return {(aid, item.name): r for (aid, item), r in zip(todo, results)}


def test_catalogue_is_large_enough():
    for module in MODULES:
        assert len(module.MISTAKES) >= 8, f"{module.ASSIGNMENT}: at least 8 mistakes"


@pytest.mark.parametrize("aid,mistake", MISTAKES, ids=[f"{a}:{m.name}" for a, m in MISTAKES])
def test_mistake_loses_points_with_its_message(graded, aid, mistake):
    result = graded[(aid, mistake.name)]
    cells = {c.grade_id: c for c in result.cells}
    for gid in mistake.loses:
        assert cells[gid].score < cells[gid].max_score, f"{gid} kept its points"
    message = cells[mistake.loses[0]].message
    assert mistake.message in message, f"message of {mistake.loses[0]} does not name the mistake: {message!r}"
    for cell in result.cells:  # tests isolate exercises: nothing else is lost
        if not cell.manual and cell.exercise != mistake.cell:
            assert cell.score == cell.max_score, f"a mistake in {mistake.cell} cost points in {cell.grade_id}: {cell.message}"


@pytest.mark.parametrize("aid,alt", ALTERNATIVES, ids=[f"{a}:{x.name}" for a, x in ALTERNATIVES])
def test_alternative_gets_full_marks(graded, aid, alt):
    result = graded[(aid, alt.name)]
    lost = [f"{c.grade_id}: {c.message}" for c in result.cells if not c.manual and c.score < c.max_score]
    assert not lost, lost

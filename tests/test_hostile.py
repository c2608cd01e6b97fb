"""Hostile and malformed submissions (tests/hostile_cases.py) are graded as if the
trick were not there, or flagged, and never move anybody else's grade.

All cases and two honest students go through one class-sized run of
``grade_many`` (sandboxed kernels, short time limits so the loops end soon).
"""
import pytest

from autograder import course
from autograder.grading import Limits, grade_many
from autograder.scan import suspicious
from tests.hostile_cases import AID, FULL, HOSTILE, MALFORMED
from tests.submissions import make_submission, solution_sources

CASES = HOSTILE + MALFORMED


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    subs = []
    for i, case in enumerate(CASES):
        path = tmp / f"s{i:02d}" / AID / f"{AID}.ipynb"
        path.parent.mkdir(parents=True)
        case.write(path)
        subs.append((f"s{i:02d}", AID, path))
    for name in ("honest1", "honest2"):
        subs.append((name, AID, make_submission(AID, tmp / name / AID / f"{AID}.ipynb")))
    results = grade_many(subs, jobs=2, limits=Limits(cell_timeout=10, notebook_timeout=120))
    return dict(zip([s for s, _, _ in subs], results))


def per_exercise(result):
    points = {}
    for c in result.cells:
        if not c.manual:
            points[c.exercise] = points.get(c.exercise, 0) + c.score
    return points


@pytest.mark.parametrize("i", range(len(CASES)), ids=[c.name for c in CASES])
def test_case_gets_exactly_its_grade(graded, i):
    case, result = CASES[i], graded[f"s{i:02d}"]
    assert per_exercise(result) == case.expect, (result.error, result.notes, [(c.grade_id, c.message)
                                                                               for c in result.cells])
    if case.note:
        assert any(case.note in n for n in result.notes), result.notes
    if case.flag:
        assert any(case.flag in f for f in result.flags), result.flags
    if case.error:
        assert case.error in result.error, result.error
    if case.check:
        case.check()


def test_honest_students_are_untouched(graded):
    for name in ("honest1", "honest2"):
        r = graded[name]
        assert per_exercise(r) == FULL and not r.error and not r.flags and not r.notes, (r.notes, r.flags)


def test_kernels_ran_isolated_where_possible(graded):
    import subprocess
    import sys
    unshare = "import ctypes, os, sys; sys.exit(os.geteuid() != 0 and ctypes.CDLL(None).unshare(0x10000000) != 0)"
    if sys.platform.startswith("linux") and subprocess.run([sys.executable, "-c", unshare]).returncode == 0:
        assert graded["honest1"].sandbox == "isolated"  # as root, or in a user namespace
    else:
        assert graded["honest1"].sandbox.startswith("limits only")


@pytest.mark.parametrize("aid", course.assignments())
def test_no_correct_answer_is_flagged(aid):
    for gid, code in solution_sources(aid).items():
        assert suspicious(code) == [], (gid, suspicious(code))

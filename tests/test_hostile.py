"""Hostile and malformed submissions (tests/hostile_cases.py) are graded as if the
trick were not there, or flagged, and never move anybody else's grade or touch a
file outside the kernel's own folder.

Every case, two honest students and students with odd ids go through one
``grade`` run of a whole class folder (sandboxed kernels, judges outside them,
short time limits so the loops end soon), exactly as an instructor runs it.
"""
import csv
import hashlib
import os

import pytest

from autograder import course, intake
from autograder.__main__ import grade_class
from autograder.settings import Limits
from autograder.scan import suspicious
from tests.hostile_cases import (AID, FORGERY, FULL, HIDDEN_TEXT, HOSTILE, MALFORMED, REFUSED_IDS, SPECIAL_IDS)
from tests.processes import Watch
from tests.submissions import make_submission, solution_sources

CASES = HOSTILE + FORGERY + MALFORMED
HONEST = ["honest1", "honest2"] + SPECIAL_IDS


def _hashes(*roots):
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for root in roots for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()
            and "__pycache__" not in p.parts and ".ipynb_checkpoints" not in p.parts}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    submitted = tmp / "submitted"
    for name in HONEST + list(REFUSED_IDS):
        make_submission(AID, submitted / name / AID / f"{AID}.ipynb")
    for i, case in enumerate(CASES):
        path = submitted / f"s{i:02d}" / AID / f"{AID}.ipynb"
        path.parent.mkdir(parents=True)
        case.write(path)
    course_files = [course.ROOT / name for name in ("solutions", "notebooks", "lib", "autograder")]
    before = _hashes(submitted, *course_files)
    out = tmp / "out"
    watch = Watch(os.getpid())
    results, refused = grade_class(submitted, out, jobs=2, limits=Limits(cell_timeout=10, notebook_timeout=120),
                                   progress=False)
    watch.stop()
    after = _hashes(submitted, *course_files)
    return {"results": {r.student: r for r in results}, "refused": refused, "out": out, "before": before,
            "after": after, "left": watch.alive()}


def test_no_process_outlives_the_class(graded):
    """No kernel, launcher or worker is left once grade returns: not those of kernels that ignored the
    interrupt, ran out of time, or started processes of their own."""
    assert graded["left"] == [], graded["left"]


def per_exercise(result):
    points = {}
    for c in result.cells:
        if not c.manual:
            points[c.exercise] = points.get(c.exercise, 0) + c.score
    return points


@pytest.mark.parametrize("i", range(len(CASES)), ids=[c.name for c in CASES])
def test_case_gets_exactly_its_grade(graded, i):
    case, result = CASES[i], graded["results"][f"s{i:02d}"]
    assert per_exercise(result) == case.expect, (result.error, result.notes, [(c.grade_id, c.message)
                                                                               for c in result.cells])
    if case.note:
        assert any(case.note in n for n in result.notes), result.notes
    if case.flag:
        assert any(case.flag in f for f in result.flags), result.flags
        row = _csv(graded)[f"s{i:02d}"]
        assert row["needs_review"] == "yes"
    if case.error:
        assert case.error in result.error, result.error
    if case.check:
        case.check()


def test_no_submitted_or_course_file_changed(graded):
    """Links planted by a kernel, disk filling, writes to lib/: every submitted file and every course file
    has the sha256 it had before grading."""
    changed = sorted(p for p in graded["before"] if graded["after"].get(p) != graded["before"][p])
    assert not changed, changed
    assert set(graded["after"]) == set(graded["before"]), set(graded["after"]) ^ set(graded["before"])


def test_only_notebooks_come_back_from_kernels(graded):
    """What a kernel writes stays in its own folder: the output holds the graded notebooks and the grader's
    own files, no link and nothing large."""
    out = graded["out"]
    for p in out.rglob("*"):
        assert not p.is_symlink(), p
        if p.is_file():
            assert p.stat().st_size < 5 * 2**20, p
    for folder in (out / "autograded").glob("*/*"):
        assert [p.name for p in folder.iterdir()] == [f"{AID}.ipynb"], folder


def test_hidden_checks_never_reach_feedback(graded):
    i = next(i for i, c in enumerate(CASES) if c.name.startswith("reading the hidden checks"))
    page = (graded["out"] / "feedback" / f"s{i:02d}" / f"{AID}.html").read_text()
    for text in HIDDEN_TEXT:
        assert text not in page, text


def test_pathological_markdown_is_cut_in_feedback(graded):
    i = next(i for i, c in enumerate(CASES) if c.name == "a pathological markdown answer")
    page = (graded["out"] / "feedback" / f"s{i:02d}" / f"{AID}.html").read_text()
    assert "is not shown in this feedback" in page


def test_honest_students_are_untouched(graded):
    for name in HONEST:
        r = graded["results"][name]
        assert per_exercise(r) == FULL and not r.error and not r.flags and not r.notes, (name, r.notes, r.flags)


def _csv(graded):
    with open(graded["out"] / "grades.csv", newline="", encoding="utf-8") as f:
        return {row["student_id"]: row for row in csv.DictReader(f)}


def test_odd_student_ids_are_graded_under_their_own_names(graded):
    rows = _csv(graded)
    for name in SPECIAL_IDS:
        assert rows[name]["autograded"] == "11", (name, rows.get(name))
        assert (graded["out"] / "feedback" / name / f"{AID}.html").is_file()


def test_ids_nbgrader_cannot_take_are_reported_by_name(graded):
    refused = {folder.name: why for folder, why in graded["refused"]}
    report = (graded["out"] / "report.txt").read_text()
    assert "NOT GRADED" in report
    for name, words in REFUSED_IDS.items():
        assert words in refused[name]
        assert ascii(name)[1:-1] in report, name
        assert name not in _csv(graded)


def test_kernels_ran_isolated_where_possible(graded):
    import subprocess
    import sys
    unshare = "import ctypes, os, sys; sys.exit(os.geteuid() != 0 and ctypes.CDLL(None).unshare(0x10000000) != 0)"
    if sys.platform.startswith("linux") and subprocess.run([sys.executable, "-c", unshare]).returncode == 0:
        assert graded["results"]["honest1"].sandbox == "isolated"  # as root, or in a user namespace
    else:
        assert graded["results"]["honest1"].sandbox.startswith("limits only")


@pytest.mark.parametrize("aid", course.assignments())
def test_no_correct_answer_is_flagged(aid, tmp_path):
    """Neither the solutions nor the course's own cells raise a flag: flags are about the student's code."""
    for gid, code in solution_sources(aid).items():
        assert suspicious(code) == [], (gid, suspicious(code))
    nb, _ = intake.read_submission(make_submission(aid, tmp_path / f"{aid}.ipynb"))
    assert intake.rebuild(nb, aid)[2] == []


"""python -m autograder similar: a disguised copy is found, thirty independent correct solutions are not, and
the course's own code never counts as copied."""
import re
import subprocess
import sys

import pytest

from autograder import course, similar
from autograder.settings import Similar
from tests.independent import AID, SOLUTIONS, disguise
from tests.inprocess import Notebook
from tests.submissions import make_submission


def _class(folder, answers: dict):
    """Submissions of notebook 01 with these answer cells (student -> {grade id: code}); the rest as released."""
    subs = []
    for student, cells in answers.items():
        path = make_submission(AID, folder / student / AID / f"{AID}.ipynb", cells, solve=False)
        subs.append((student, AID, path))
    return subs


def _lost(notebook, cells: dict) -> list:
    """What a whole submission of these answer cells loses, graded in this process: its cells run in order
    where the first answer cell is (a cell may use a helper an earlier one of its own defined)."""
    first = next(iter(cells))
    return [f"{v.grade_id}: {v.message}" for v in notebook.grade(first, "\n\n".join(cells.values())) if not v.passed]


def test_the_independent_solutions_are_thirty_correct_ones():
    assert len(SOLUTIONS) == 30 and all(list(s) == list(SOLUTIONS[0]) for s in SOLUTIONS)
    notebook = Notebook(AID)
    for i, cells in enumerate(SOLUTIONS):
        assert not _lost(notebook, cells), (i, _lost(notebook, cells))


def test_independent_solutions_are_not_flagged_and_a_disguised_copy_is(tmp_path):
    answers = {f"student{i:02d}": cells for i, cells in enumerate(SOLUTIONS)}
    answers["copier"] = disguise(SOLUTIONS[7], seed=1)
    pairs, empty = similar.compare(_class(tmp_path, answers))
    assert [(p.a.student, p.b.student) for p in pairs] == [("copier", "student07")], \
        [(p.a.student, p.b.student, round(p.similarity, 2)) for p in pairs]
    assert empty == []
    everything, _ = similar.compare(_class(tmp_path, answers), threshold=0.0)
    highest = max(p.similarity for p in everything if "copier" not in (p.a.student, p.b.student))
    assert highest < Similar.threshold <= pairs[0].similarity
    print(f"most alike of the independent pairs: {highest:.0%}; the copy: {pairs[0].similarity:.0%}")
    # the marks: in order, whole tokens, and most of each side's code (copydetect's own slices ran backwards
    # after a class name, started mid-word and left shared code unmarked)
    for w, (starts, ends) in zip((pairs[0].a, pairs[0].b), pairs[0].slices):
        assert all(a < b for a, b in zip(starts, ends)) and list(starts) == sorted(starts)
        assert all(a == 0 or not (w.code[a - 1].isalnum() and w.code[a].isalnum()) for a in starts)
        assert all(b == len(w.code) or not (w.code[b - 1].isalnum() and w.code[b].isalnum()) for b in ends)
        marked = sum(b - a for a, b in zip(starts, ends))
        assert marked > 0.8 * len(w.code.strip()), (w.student, marked, len(w.code))


def test_the_course_s_code_is_not_copying(tmp_path):
    """Untouched notebooks share everything, all of it the course's: they have no code of their own. Two
    students who both wrote the course's own solution are a pair."""
    subs = _class(tmp_path, {"ann": {}, "ben": {}})
    assert similar.compare(subs) == ([], [("ann", AID), ("ben", AID)])
    both = [(s, AID, make_submission(AID, tmp_path / "solved" / s / AID / f"{AID}.ipynb")) for s in ("cat", "dan")]
    pairs, _ = similar.compare(both)
    assert [(p.a.student, p.b.student, p.similarity) for p in pairs] == [("cat", "dan", 1.0)]


def test_the_command_writes_a_page_that_shows_the_pair_side_by_side(tmp_path):
    answers = {f"student{i:02d}": cells for i, cells in enumerate(SOLUTIONS[:6])}
    answers["copier"] = disguise(SOLUTIONS[2], seed=3)
    answers["<b>odd&"] = {}
    _class(tmp_path / "submitted", answers)
    out = tmp_path / "similarity.html"
    run = subprocess.run([sys.executable, "-m", "autograder", "similar", str(tmp_path / "submitted"), "--out",
                          str(out)], cwd=course.ROOT, capture_output=True, text=True, check=True)
    assert re.search(r"^01_self_attention\s+copier\s+student02\s+\d+%$", run.stdout, re.M), run.stdout
    assert "8 submissions, 1 pairs" in run.stdout and "no code of their own: <b>odd& (01_self_attention)" in run.stdout
    page = out.read_text()
    assert page.count("<mark>") >= 4 and "copier" in page and "student02" in page
    assert "&lt;b&gt;odd&amp;" in page and "<b>odd" not in page  # names are escaped
    assert not re.search(r"(src|href)=\"(https?:)?//", page)  # self-contained: nothing fetched


@pytest.mark.parametrize("seed", range(3))
def test_a_disguised_copy_keeps_its_marks(seed):
    """The disguise changes only what a copier can: the copy still earns every point."""
    assert not _lost(Notebook(AID), disguise(SOLUTIONS[seed * 9], seed=seed))


def test_broken_notebooks_are_read_or_listed_never_a_crash(tmp_path):
    """A cell whose source is a number is read as text (intake, as for grading); a notebook nbformat cannot read
    (a source of numbers) or an empty file has no code of its own."""
    import json
    subs = _class(tmp_path, {"ann": SOLUTIONS[0], "ben": SOLUTIONS[1], "cat": SOLUTIONS[2]})
    for (_, _, path), source in zip(subs, (5, [1, 2])):
        nb = json.loads(path.read_text())
        nb["cells"].append({"cell_type": "code", "metadata": {}, "source": source, "outputs": [],
                            "execution_count": None})
        path.write_text(json.dumps(nb))
    subs[2][2].write_text("")
    assert similar.written_code(subs[0][2], AID).endswith("\n\n5")
    assert similar.compare(subs) == ([], [("ben", AID), ("cat", AID)])

"""The check and grade commands, end to end through stock nbgrader."""
import csv
import os
import re
import shutil
import subprocess
import sys

import nbformat
import pytest

from autograder import course
from tests.submissions import WRONG_DIM_SOFTMAX, make_submission

AID = "01_self_attention"


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "autograder", *args], capture_output=True, text=True,
                          cwd=cwd or course.ROOT)


def test_check_untouched_release_gets_zero(tmp_path):
    # a student's copy, anywhere on disk, named as a browser download would name it
    copy = tmp_path / "downloads" / f"{AID[:2]} (1).ipynb"
    copy.parent.mkdir()
    shutil.copyfile(course.release_notebook(AID), copy)
    proc = run("check", str(copy), cwd=tmp_path)
    print(proc.stdout)
    assert proc.returncode == 1
    assert "autograded: 0 / 11" in proc.stdout
    assert "not implemented yet" in proc.stdout


def _auto_max(aid):
    from autograder.grading import _source_cells
    return sum(points for _, points, manual in _source_cells(aid)[1] if not manual)


def _progress(stdout):
    """assignment -> (score, max, done?) from the progress table of `check FOLDER`."""
    rows = {}
    for line in stdout.split("\nprogress\n", 1)[1].splitlines():
        name, score, _, most, mark = line.split()[:5]
        rows[name] = (float(score), float(most), mark == "done")
    return rows


def test_check_a_folder_of_solved_and_untouched_notebooks(tmp_path):
    """`check FOLDER` grades every notebook in it, in one run: solved ones get full marks, untouched releases
    zero, and the progress table says which assignments are done (test_references_stay_out grades every
    solution through `grade`, test_notebooks_run asks for every exercise's check from inside the notebook)."""
    mine = course.assignments()[:4]
    solved = mine[::2]
    for aid in mine:
        source = course.source_notebook(aid) if aid in solved else course.release_notebook(aid)
        shutil.copyfile(source, tmp_path / f"{aid}.ipynb")
    proc = run("check", str(tmp_path))
    print(proc.stdout)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "autograded: 11 / 11" in proc.stdout  # 01's table
    assert "awaiting a human grader" in proc.stdout
    assert "not implemented yet" in proc.stdout
    assert "notes:" not in proc.stdout, "the course's own notebooks need no repair"
    rows = _progress(proc.stdout)
    assert set(rows) == {*mine, "all"}, rows
    for aid in mine:
        full = _auto_max(aid)
        assert rows[aid] == ((full, full, True) if aid in solved else (0.0, full, False)), aid
    assert "all" in rows


def test_check_unknown_notebook_is_a_clear_error(tmp_path):
    odd = tmp_path / "homework.ipynb"
    shutil.copyfile(course.release_notebook(AID), odd)
    proc = run("check", str(odd))
    assert proc.returncode == 2
    assert "cannot tell which assignment" in proc.stderr and AID in proc.stderr


def test_grade_a_class(tmp_path):
    sub = tmp_path / "submitted"
    make_submission(AID, sub / "alice" / AID / f"{AID}.ipynb")
    make_submission(AID, sub / "bob" / AID / f"{AID}.ipynb", {"softmax": ""}, solve=False)  # softmax's cell emptied
    make_submission(AID, sub / "carol" / AID / "renamed.ipynb", {"softmax": "def softmax(x, dim=-1):\n    return x\n"})
    (sub / "dave" / AID).mkdir(parents=True)
    for student, code in WRONG_DIM_SOFTMAX.items():  # one mistake in four wordings, for the class page
        make_submission(AID, sub / student / AID / f"{AID}.ipynb", {"softmax": code})
    out = tmp_path / "out"
    proc = run("grade", str(sub), "--out", str(out), "--jobs", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {r["student_id"]: r for r in csv.DictReader(open(out / "grades.csv"))}
    assert list(next(csv.reader(open(out / "grades.csv")))) == [
        "student_id", "assignment", "notebook", "score", "max_score", "autograded", "autograded_max", "written",
        "written_max", "needs_review"]
    assert (rows["alice"]["score"], rows["alice"]["max_score"]) == ("11", "15")
    assert (rows["alice"]["autograded"], rows["alice"]["autograded_max"]) == ("11", "11")
    assert (rows["alice"]["written"], rows["alice"]["written_max"]) == ("", "4")  # awaiting a person
    assert (rows["bob"]["score"], rows["bob"]["written"]) == ("0", "0")  # written answers left as released
    assert (rows["carol"]["score"], rows["carol"]["notebook"]) == ("8", "renamed.ipynb")
    assert rows["dave"]["score"] == "0"
    assert rows["dave"]["needs_review"] == "yes" and rows["alice"]["needs_review"] == ""
    assert (out / "autograded" / "alice" / AID / f"{AID}.ipynb").is_file()
    # the class summary: carol's softmax is the exercise failed most, after bob's empty notebook
    summary = (out / "summary.txt").read_text()
    assert "01_self_attention softmax" in summary and "1 / 8" in summary
    assert (out / "summary.png").stat().st_size > 1000
    report = (out / "report.txt").read_text()
    assert "4 notebook(s) flagged" not in report and "written answer(s) in" in report
    # feedback: scores and messages, hidden tests redacted
    carol = (out / "feedback" / "carol" / f"{AID}.html").read_text()
    assert "autograded 8 / 11" in carol and "softmax" in carol
    assert "hidden tests: their code is not shown" in carol
    assert "grade_here" not in carol and "BEGIN HIDDEN TESTS" not in carol
    assert "Traceback (most recent call last)" not in carol and "autograder/checks" not in carol
    assert "autograder.probe" not in carol  # the grader's requests to the kernel are not cells of the notebook
    # the notebook's text cells are rendered, not shown as tags
    assert "<h1" in carol and "<p>" in carol and "&lt;h1" not in carol and "&lt;p&gt;" not in carol
    # an emptied answer cell is named as missing, not as a cell that stopped with an error
    bob = (out / "feedback" / "bob" / f"{AID}.html").read_text()
    assert "no answer: the cell was left as released (0 points)" in bob  # not "awaiting a human grader"
    assert "no cell that ran defines it; write softmax in its answer cell" in bob
    assert "did the cell stop with an error" not in bob
    # the class page: the four wrong-dim softmaxes are one mistake, counted 4, linking to each student's feedback
    page = (out / "class.html").read_text()
    row = re.search(r"<tr><td>softmax</td>.*?</tr>", page, re.S).group(0)
    assert re.search(r"<b>4</b> &times; softmax\(x of shape [^<]* along dim [^<]*<span class=\"id\">\[softmax:", row), row
    assert all(f'href="feedback/{s}/{AID}.html"' in row for s in WRONG_DIM_SOFTMAX)
    assert "1 / 8" in row and 'src="data:image/png;base64,' in page
    assert re.search(r"<td>01_self_attention</td><td class=num>8</td><td class=num>\d+\.\d</td>", page)


@pytest.mark.parametrize("path,expected", [
    ("x/01_self_attention/anything.ipynb", AID),
    ("x/01_self_attention.ipynb", AID),
    ("x/01_self_attention (2).ipynb", AID),
])
def test_detect_assignment(path, expected):
    assert course.detect_assignment(path) == expected


def test_notes_name_the_cell_and_whose_it_is():
    """A note about a cell says which cell, and whether it is one of the notebook's own (a slow experiment
    cell, say) or one the student added or changed."""
    import hashlib

    from autograder.grading import cell_name
    cells = nbformat.read(course.release_notebook(AID), as_version=4).cells
    index = next(i for i, c in enumerate(cells) if c.cell_type == "code" and "import torch" in c.source)

    def note(source, cell_id):
        return {"index": index, "cell_id": cell_id, "source_sha": hashlib.sha256(source.encode()).hexdigest()}

    given = cell_name(note(cells[index].source, cells[index].id), AID)
    first = next(line for line in cells[index].source.splitlines() if line.strip())
    assert given == f"cell {index + 1}, one of the notebook's own cells, not an answer of yours ({first[:70]!r})"
    assert cell_name(note(cells[index].source + "\nx = 1", cells[index].id), AID) == \
        f"cell {index + 1}, one of the notebook's own cells, which you changed"
    assert cell_name(note("while True:\n    pass", "a-new-id"), AID) == f"cell {index + 1}, a cell you added"


def test_feedback_keeps_the_html_of_text_and_drops_what_could_act():
    """A student's markdown and outputs reach a feedback page with headings, paragraphs, tables, links and inline
    images, and without scripts, styles, frames, forms, event handlers, script links or images fetched from
    elsewhere."""
    from autograder.report import clean_html
    page = clean_html(
        '<h2 id="x">Title</h2><p>Some <strong>text</strong> and <a href="https://example.org/">a link</a></p>'
        '<table><thead><tr><th>a</th></tr></thead><tbody><tr><td>1</td></tr></tbody></table>'
        '<img alt="plot" src="data:image/png;base64,iVBORw0KGgo=">'
        '<script>alert(1)</script><style>body {display: none}</style><iframe src="https://example.org/"></iframe>'
        '<img src="https://example.org/pixel.png"><img src="x" onerror="alert(2)">'
        '<a href="javascript:alert(3)">js</a><form action="https://example.org/"><input name="q"></form>'
        '<p style="position: fixed" onclick="alert(4)">styled</p>')
    for kept in ('<h2 id="x">Title</h2>', "<strong>text</strong>", '<a href="https://example.org/">a link</a>',
                 "<th>a</th>", "<td>1</td>", '<img alt="plot" src="data:image/png;base64,iVBORw0KGgo=">'):
        assert kept in page, (kept, page)
    for dropped in ("<script", "<style", "<iframe", "pixel.png", "onerror", "javascript:", "<form", "<input",
                    "style=", "onclick"):
        assert dropped not in page, (dropped, page)


LAYOUT = '''
import matplotlib.pyplot as plt
fig, ax = plt.subplots()
ax.set_ylabel("a label long enough to move the axes\\nover two lines")
plt.tight_layout()
print(fig.subplotpars.left, plt.rcParams["figure.subplot.left"])
plt.show()
'''


@pytest.mark.parametrize("backend,laid_out", [("module://autograder.nodisplay", False), ("Agg", True)])
def test_graded_kernels_draw_no_figure_and_lay_none_out(backend, laid_out):
    """The grading kernels' backend (autograder.nodisplay) neither renders figures nor lays them out: tight_layout
    measures every label with the renderer (0.2 s a figure) for a picture nobody sees. Agg, for comparison, does."""
    out = subprocess.run([sys.executable, "-c", LAYOUT], capture_output=True, text=True, cwd=course.ROOT, check=True,
                         env={**os.environ, "MPLBACKEND": backend}).stdout.split()
    left, default = map(float, out)
    assert (left != default) == laid_out, (backend, left, default)

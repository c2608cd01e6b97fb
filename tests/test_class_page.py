"""class.html (autograder/class_page.py) and the mistake ids it counts by (results.mistake_id), on results made
here; tests/test_grading.py::test_grade_a_class checks the page a real grading run writes, and
tests/test_formgrader_browser.py looks at it in the browser."""
import re

from autograder.class_page import class_page, mistakes_by_exercise
from autograder.results import CellResult, NotebookResult, cause, mistake_id

AID = "01_self_attention"
WRONG_DIM = ("softmax(x of shape ({shape}), dim={dim}) is wrong: the values sum to 1 along dim {other}, not along "
             "dim={dim}: take the max and the sum over the `dim` argument")
OVERFLOW = ("softmax gives NaN or inf for large inputs such as [1000, 1001, 1002]: exp(1000) overflows. Subtract the "
            "maximum along `dim` before exp; the result does not change")
HOSTILE = '<img src=x onerror="alert(1)">'


def notebook(student, softmax="", sdpa="", notes=(), flags=(), fault="", seconds=12.5) -> NotebookResult:
    """A graded notebook of 01: softmax's two cells (2 + 1 points), scaled_dot_product_attention's (3), a written
    answer (2). A message makes its cell fail."""
    cells = [CellResult("softmax_reference", "softmax", 0.0 if softmax else 2.0, 2.0, False,
                        f"AssertionError: {softmax}" if softmax else ""),
             CellResult("softmax_stable", "softmax", 0.0 if softmax == OVERFLOW else 1.0, 1.0, False,
                        f"AssertionError: {OVERFLOW}" if softmax == OVERFLOW else ""),
             CellResult("sdpa_reference", "scaled_dot_product_attention", 0.0 if sdpa else 3.0, 3.0, False,
                        f"AssertionError: {sdpa}" if sdpa else ""),
             CellResult("why_scale", "why_scale", 0.0, 2.0, True)]
    return NotebookResult(student, AID, f"{AID}.ipynb", cells, notes=list(notes), flags=list(flags), fault=fault,
                          seconds=seconds)


def class_of_six() -> list:
    """Two students with full marks, four who normalise softmax over the wrong dim (each failing on another
    case: other shapes and dims in the message), one of whom also has a flagged cell."""
    return [notebook("ada"), notebook("bo", seconds=30.0),
            notebook("erin", WRONG_DIM.format(shape="4, 4", dim=-1, other=0)),
            notebook("femi", WRONG_DIM.format(shape="2, 3, 6", dim=1, other=2)),
            notebook("gus", WRONG_DIM.format(shape="4, 4", dim=0, other=1),
                     sdpa="scaled_dot_product_attention(q, k, v) is wrong: the scores are not divided by sqrt(d_k)"),
            notebook(HOSTILE, WRONG_DIM.format(shape="4, 4", dim=-1, other=0),
                     flags=["softmax: opens a socket"],
                     notes=["softmax_stable: the kernel died in this cell (os._exit, a crash, or more memory ...)"])]


def test_a_cause_in_other_numbers_is_one_mistake_and_other_causes_are_not():
    a = WRONG_DIM.format(shape="4, 4", dim=-1, other=0)
    b = WRONG_DIM.format(shape="2, 3, 6", dim=1, other=2)
    assert cause(a) == cause(b) == ("the values sum to # along dim #, not along dim=#: take the max and the sum over "
                                    "the `dim` argument")
    assert mistake_id("softmax", a) == mistake_id("softmax", "AssertionError: " + b)
    assert mistake_id("softmax", a) != mistake_id("softmax", OVERFLOW)
    assert mistake_id("softmax", a) != mistake_id("SelfAttention", a)  # another exercise
    # stable from run to run (not Python's salted hash): a fixed value
    assert mistake_id("softmax", a) == "softmax:2ae4a063"
    assert cause("bpe_tokenize('lower') should be ['low', 'er</w>'], got ['l', 'ower</w>']") == \
        cause("bpe_tokenize('newest') should be ['new', 'est</w>'], got ['n', 'ewest</w>']")
    assert cause("uses 1e-9 in place of -inf") == cause("uses -1e4 in place of -inf")
    # a message that starts with the call it made: the call's arguments are not the cause
    assert cause("softmax(x of shape (5,), dim=-1) is not implemented yet") == \
        cause("softmax([[1000, 1001, 1002]]) is not implemented yet") == "softmax(…) is not implemented yet"
    assert cause("w_q has no bias") != cause("w_k has no bias")  # names with digits and underscores are kept


def test_one_cause_in_two_cells_of_an_exercise_is_one_mistake():
    same = notebook("carol", OVERFLOW)  # softmax_reference and softmax_stable fail with the same message
    assert same.cells[0].mistake == same.cells[1].mistake == mistake_id("softmax", OVERFLOW)
    [(_, _, students)] = mistakes_by_exercise([same])[AID, "softmax"]["mistakes"]
    assert [s.student for s in students] == ["carol"]


def test_cells_with_full_marks_have_no_mistake():
    full = CellResult("softmax_reference", "softmax", 2.0, 2.0, False, "")
    assert full.mistake == ""
    assert CellResult("softmax_reference", "softmax", 0.0, 2.0, False, "AssertionError: x").mistake


def test_mistakes_are_counted_by_cause_once_per_student():
    table = mistakes_by_exercise(class_of_six())
    softmax = table[AID, "softmax"]
    assert (softmax["students"], softmax["full"], softmax["lost"], softmax["max"]) == (6, 2, 8.0, 18.0)
    [(mid, message, students)] = softmax["mistakes"]
    assert mid == "softmax:2ae4a063" and len(students) == 4
    assert "along dim" in message
    sdpa = table[AID, "scaled_dot_product_attention"]
    assert [len(s) for _, _, s in sdpa["mistakes"]] == [1] and sdpa["lost"] == 3.0
    assert (AID, "why_scale") not in table  # written answers are a person's to grade


def test_the_class_page_names_counts_links_and_escapes():
    page = class_page(class_of_six())
    row = re.search(r"<tr><td>softmax</td>.*?</tr>", page, re.S).group(0)
    assert "<b>4</b> &times; softmax(x of shape" in row and "[softmax:2ae4a063]" in row
    assert "2 / 6" in row and "8 of 18" in row  # full marks, points lost
    assert 'href="feedback/erin/01_self_attention.html"' in row
    # a student id is text, never markup, in the page and in its links
    assert HOSTILE not in page and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
    assert 'href="feedback/%3Cimg%20src%3Dx%20onerror%3D%22alert%281%29%22%3E/01_self_attention.html"' in page
    # self-contained: the plot is inline, nothing is fetched
    assert page.count('src="data:image/png;base64,') == 1
    assert not re.search(r"(src|href)=\"(https?:)?//", page) and "<script" not in page
    # flagged, with why; how grading went
    review = page[page.index('id="review"'):page.index('id="running"')]
    assert "opens a socket" in review and "kernel died" in review and "erin" not in review
    running = page[page.index('id="running"'):]
    assert "<td class=num>6</td><td class=num>12.5</td><td class=num>30.0</td>" in running
    assert "kernel died: 1" in running


def test_a_grader_fault_and_an_empty_class_read_right():
    broken = notebook("zed", fault="WorkerLost: twice", seconds=0.0)
    broken.error = "not graded: the grader failed on this notebook"
    page = class_page([broken])
    assert "1 by the grader&#x27;s fault (grade again)" in page and "the grader failed on it: WorkerLost" in page
    assert not mistakes_by_exercise([broken])  # its zeros are not the student's mistakes
    assert "Class report" in class_page([])

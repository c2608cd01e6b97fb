"""Faults of the grader's own cost the student nothing silently: a judge that raises, or judges that cannot be
imported, fail their cell flagged for a person, named; and a kernel that floods the probe's channel cannot make
the grader keep more than its limit.

The course's Execute step (``autograder/execute.py``) runs here, in this process, on a plain ``python3``
kernel, so that monkeypatch can break a judge; the gradebook and the sandbox around it in ``grade`` change
nothing of this (tests/test_hostile.py grades through them).
"""
import json
import time
from pathlib import Path

import nbformat
import pytest

from autograder import checks, course, execute, judging, probe
from autograder.checks.self_attention import softmax as softmax_judges
from tests.submissions import make_submission, solution_sources

AID = "01_self_attention"
FLOOD = f"""import torch
from IPython.display import publish_display_data


def softmax(x, dim=-1):
    if x.shape == (5,):  # the judge's first input: 80 MiB of replies on the probe's channel before the real one
        for _ in range(5):
            publish_display_data({{{probe.MIME!r}: "x" * 2**24}})
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    return e / e.sum(dim=dim, keepdim=True)
"""


class Keeping(execute.GuardedExecute):
    """The Execute step, remembering the most bytes of probe replies it held at once."""
    most = 0

    def output(self, outs, msg, display_id, cell_index):
        out = super().output(outs, msg, display_id, cell_index)
        if self._probing is not None:
            Keeping.most = max(Keeping.most, sum(map(len, self._probing)))
        return out


def grade(tmp_path, monkeypatch, replace=None, step=execute.GuardedExecute, aid=AID, timeout=60):
    """(graded notebook, the Execute step's notes) for the filled-in notebook, answers ``replace``-d."""
    path = make_submission(aid, tmp_path / aid / f"{aid}.ipynb", replace)
    monkeypatch.setenv("AUTOGRADER_NOTES", str(tmp_path / "notes.json"))
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    nb = nbformat.read(path, as_version=4)
    step(kernel_name="python3", timeout=timeout).preprocess(nb, {"nbgrader": {"assignment": aid},
                                                                 "metadata": {"path": str(path.parent)}})
    return nb, json.loads((tmp_path / "notes.json").read_text())


def failures(nb) -> dict:
    """grade_id -> the error each graded test cell shows ('' when it passed)."""
    return {course.graded_test(c): " ".join(o.evalue for o in c.outputs if o.output_type == "error")
            for c in nb.cells if c.cell_type == "code" and course.graded_test(c)}


def test_a_judge_that_raises_is_flagged_as_the_graders_fault(tmp_path, monkeypatch):
    def seeded(seed):
        raise TypeError("a bug in the judge")

    monkeypatch.setattr(softmax_judges, "seeded", seeded)  # softmax_reference's own helper breaks
    nb, notes = grade(tmp_path, monkeypatch)
    failed = failures(nb)
    assert [gid for gid, error in failed.items() if error] == ["softmax_reference"]  # the others keep their points
    assert "flagged for a person to review" in failed["softmax_reference"]
    flags = [n for n in notes if n.get("flag")]
    assert [n["grade_id"] for n in flags] == ["softmax_reference"], notes
    source = Path(softmax_judges.__file__).read_text().splitlines()
    line = next(i for i, text in enumerate(source, 1) if "seeded(1)" in text)
    for said in ("autograder.checks.self_attention.softmax.softmax_reference", "TypeError: a bug in the judge",
                 f"at autograder/checks/self_attention/softmax.py:{line}", "a fault in the grader's check"):
        assert said in flags[0]["note"], flags[0]["note"]


@pytest.mark.parametrize("code, said", [
    ("from ..common import no_such_helper\n",
     "ImportError: cannot import name 'no_such_helper' from 'autograder.checks.common'"),
    ("def no_such_helper(:\n", "SyntaxError: "),
])
def test_judges_that_cannot_be_imported_are_flagged_as_the_graders_fault(tmp_path, monkeypatch, code, said):
    broken = tmp_path / "judges"
    broken.mkdir()
    (broken / "zz_broken.py").write_text('"""A judge module that does not import."""\n' + code)
    package = checks.package(AID)  # autograder.checks.self_attention, with one more module
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(broken)])
    checks.judges.cache_clear()
    try:
        nb, notes = grade(tmp_path, monkeypatch)
    finally:
        checks.judges.cache_clear()
    failed = failures(nb)
    assert all(failed.values()), failed  # no judge ran, so no cell passed: none ran in the kernel either
    flags = {n["grade_id"]: n["note"] for n in notes if n.get("flag")}
    assert set(flags) == set(failed), notes
    for part in (f"the judges of {AID} could not be imported", said, f"{broken / 'zz_broken.py'}:2",
                 "a fault in the grader's check"):
        assert part in flags["softmax_reference"], flags["softmax_reference"]


def test_a_cell_without_a_judge_is_not_a_fault():
    """An assignment with no checks package, or a graded cell its package has no judge for (one an instructor
    added in nbgrader's usual style), runs in the kernel as before, with a note, not a flag."""
    step = execute.GuardedExecute()
    step._assignment = AID
    assert step._has_judge("softmax_reference") and not step._has_judge("an_instructors_own_test")
    step._assignment = "99_no_such_notebook"
    assert not step._has_judge("softmax_reference")


def test_a_flood_on_the_probes_channel_fails_the_cell_and_is_not_kept(tmp_path, monkeypatch):
    Keeping.most = 0
    nb, _ = grade(tmp_path, monkeypatch, {"softmax": FLOOD}, step=Keeping)
    failed = failures(nb)
    assert "the kernel's answer was larger than" in failed["softmax_reference"], failed
    assert not failed["softmax_stable"]  # its requests got honest answers
    limit = judging.PROBE_REPLY_LIMIT
    assert failed["softmax_reference"] == f"the kernel's answer was larger than {limit // 2**20} MiB"
    assert 0 < Keeping.most <= limit


# bpe_tokenize, with the grader's train_bpe (handed to the kernel by the judge, as a stand-in that runs in the
# grader) asked for 2000 merges of 20000 words: minutes of the grader's time, on arguments the kernel picked
SLOW_REFERENCE = solution_sources("07_bpe")["bpe_tokenize"] + """
import random
_own_bpe_tokenize = bpe_tokenize


def bpe_tokenize(word, merges):
    if (train_bpe.__doc__ or "").startswith("The course's"):
        rnd = random.Random(0)
        train_bpe(" ".join("".join(rnd.choice("abcdefghij") for _ in range(8)) for _ in range(20000)), 2000)
    return _own_bpe_tokenize(word, merges)
"""


def test_a_reference_run_for_the_kernel_stops_at_the_cells_time(tmp_path, monkeypatch):
    """The red team's hold on grading: a judge's stand-in runs the grader's reference on arguments the kernel
    picks. That run is stopped at the cell's time limit, as in the live check: the cell fails as a time-out,
    and the notebook goes on (the grader's worker is not held until it is killed)."""
    start = time.monotonic()
    nb, notes = grade(tmp_path, monkeypatch, {"bpe_tokenize": SLOW_REFERENCE}, aid="07_bpe", timeout=10)
    seconds = time.monotonic() - start
    failed = failures(nb)
    timed_out = [gid for gid, error in failed.items() if "ran past the time limit (10 s)" in error]
    assert timed_out and all(gid.startswith("bpe_tokenize") for gid in timed_out), failed
    assert not any(error for gid, error in failed.items() if not gid.startswith("bpe_tokenize")), failed  # as usual
    assert seconds < 60 + 15 * len(timed_out), f"{seconds:.0f} s for {len(timed_out)} timed-out cells"
    assert not any(n.get("flag") for n in notes), notes  # a time-out, not the grader's fault

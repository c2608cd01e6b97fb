"""What grading found, as plain data, and the file that keeps it as it arrives.

A result has one row per graded cell: its points, its maximum, and the first
line of the error it raised (the failure message the checks wrote), plus the
notes of what went wrong around the student's code (a repaired notebook, a
dead kernel, a time limit), the flags a human should look at, and ``fault``:
what went wrong in the grader itself (a judge that raised, a release that
failed, a worker that died), never the student's doing.

``Store`` is ``results.jsonl`` in ``grade``'s output folder: one line per
graded notebook, appended and written through to the disk the moment the
notebook is graded. An interrupted run loses only the notebooks in flight;
``grade`` run again reads the store and grades only what is missing, what
changed (the submission, the course or the limits) and what the grader failed
on. The grades, the report and the feedback are built from it.
"""
import hashlib
import json
import os
import re
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path


ANSI = re.compile(r"\x1b\[[0-9;]*m")
# what a student reads on a graded cell whose judge broke (the grader's fault, flagged for a person)
# a written answer handed in as released: 0 points, and no person needs to grade it (nbgrader's rule)
BLANK = "no answer: the cell was left as released (0 points)"
JUDGE_BROKE = "the grader's check of this cell broke (not necessarily your code's fault): flagged for a person to review"


def failure_line(ename: str, evalue: str) -> str:
    """A failing graded cell's message in the report, the feedback and the live check: the first line of its
    error ('AssertionError: softmax(x, dim=0) should sum to 1 along dim 0 ...')."""
    text = ANSI.sub("", f"{ename}: {evalue}").strip()
    return text.splitlines()[0] if text else ename


_CALL = re.compile(r"^.*? is wrong: ")  # 'softmax(x of shape (4, 4), dim=-1) is wrong: <the diagnosis>'
_ERROR = re.compile(r"^\w*(Error|Exception): ")
_NUMBER = re.compile(r"(?<![\w.])[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?(?![\w])", re.IGNORECASE)
_QUOTED = re.compile(r"'[^'\n]{0,60}'|\"[^\"\n]{0,60}\"")
_TUPLE = re.compile(r"[(\[](#|'…'|, )+[)\]]")


def cause(message: str) -> str:
    """A failure message with what varies between students taken out: the call a judge describes before its
    diagnosis (or the arguments of the call it starts with), numbers, shapes and quoted values. 'softmax(x of shape (4, 4), dim=-1) is wrong: the values sum to 1
    along dim 0, not along dim=-1: ...' -> 'the values sum to # along dim #, not along dim=#: ...'."""
    text = _ERROR.sub("", ANSI.sub("", message).strip())
    text = _CALL.sub("", text)
    text = _arguments_out(text)
    text = _NUMBER.sub("#", _QUOTED.sub("'…'", text))
    return _TUPLE.sub("(#)", text)


def _arguments_out(text: str) -> str:
    """'softmax([[1000, 1001]]) is not implemented yet' -> 'softmax(…) is not implemented yet': the arguments of
    the call a message starts with, whatever they were."""
    head = re.match(r"\w+\(", text)
    if not head:
        return text
    depth = 0
    for i in range(head.end() - 1, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return text[:head.end()] + "…" + text[i:]
    return text


def mistake_id(exercise: str, message: str) -> str:
    """A failure's stable name, '<exercise>:<8 hex digits>': the same for every student whose failure in that
    exercise has the same cause (see ``cause``), whichever of its graded cells failed, and the same from run to
    run, so a class's failures can be counted by cause."""
    return f"{exercise}:{hashlib.blake2b(cause(message).encode(), digest_size=4).hexdigest()}"


@dataclass
class CellResult:
    grade_id: str
    exercise: str
    score: float
    max_score: float
    manual: bool  # a written answer, graded by a person
    message: str = ""
    graded: bool = False  # a written answer a person has graded in the Formgrader: its score is theirs

    @property
    def mistake(self) -> str:
        """The failure's stable id (``mistake_id``); '' for a cell with full marks or no message."""
        return mistake_id(self.exercise, self.message) if self.message and self.score < self.max_score else ""


@dataclass
class NotebookResult:
    student: str
    assignment: str
    notebook: str
    cells: list[CellResult] = field(default_factory=list)
    error: str = ""  # the whole notebook could not be graded
    notes: list[str] = field(default_factory=list)  # repairs and limits, for the report
    flags: list[str] = field(default_factory=list)  # code a human should read
    comments: dict = field(default_factory=dict)  # exercise -> what a person wrote about it in the Formgrader
    sandbox: str = ""  # which protections the kernel ran under
    fault: str = ""  # the grader's own failure on this notebook (graded again when grade runs again)
    seconds: float = 0.0  # how long grading it took, start of the kernel to the last judge

    @property
    def auto_score(self) -> float:
        return sum(c.score for c in self.cells if not c.manual)

    @property
    def auto_max(self) -> float:
        return sum(c.max_score for c in self.cells if not c.manual)

    @property
    def score(self) -> float:
        return sum(c.score for c in self.cells)

    @property
    def max_score(self) -> float:
        return sum(c.max_score for c in self.cells)

    @property
    def written_score(self) -> float | None:
        """The points of the written answers graded so far; None while none is."""
        graded = [c.score for c in self.cells if c.manual and c.graded]
        return sum(graded) if graded else None

    @property
    def written_graded(self) -> bool:
        """Every written answer has a person's grade (True when there is none to grade)."""
        return all(c.graded for c in self.cells if c.manual)

    @property
    def full_marks(self) -> bool:
        return not self.error and self.auto_max > 0 and self.auto_score == self.auto_max


def as_dict(r: NotebookResult) -> dict:
    return asdict(r)


def from_dict(d: dict) -> NotebookResult:
    d = dict(d)
    cells = [CellResult(**c) for c in d.pop("cells")]
    return NotebookResult(**d, cells=cells)


class Store:
    """``results.jsonl``: (student, assignment) -> the latest result recorded for it, and the key of what was
    graded (see ``autograder.__main__.submission_key``). Lines a killed run left half-written are skipped."""

    def __init__(self, path: Path):
        self.path, self._lock = Path(path), threading.Lock()

    def load(self) -> dict:
        found = {}
        try:
            lines = self.path.read_bytes().splitlines()
        except FileNotFoundError:
            return found
        for line in lines:
            try:
                record = json.loads(line)
                r = from_dict(record["result"])
            except (ValueError, KeyError, TypeError):
                continue  # the end of a line a killed run was writing
            found[(r.student, r.assignment)] = (record["key"], r)
        return found

    def add(self, r: NotebookResult, key: str) -> None:
        """Append ``r`` and wait until it is on the disk."""
        line = json.dumps({"key": key, "result": as_dict(r)}) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "ab") as f:
                if f.tell() and not self._ends_a_line():
                    f.write(b"\n")  # after a half-written line: start a line of our own
                f.write(line.encode())
                f.flush()
                os.fsync(f.fileno())

    def _ends_a_line(self) -> bool:
        with open(self.path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1) == b"\n"

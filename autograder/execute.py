"""nbgrader's Execute step, with the hidden tests judged outside the student's kernel.

Stock nbgrader runs the hidden tests in the kernel, after the student's code,
and counts a test cell as passed when it shows no error. Student code can
forge that (IPython's events and traceback machinery decide what a cell
shows) and can read the tests' expected values. Here a graded test cell is
never sent to the kernel. Its judge (``autograder.checks``) runs in this
process, the grader's: it sends the student's code inputs and reads back
outputs through the kernel's messages (``judging.py``), computes the
expected values itself, and this step writes the cell's outcome: nothing
when it passed, an ``AssertionError`` output with the judge's message when it
failed. nbgrader then scores the cell from that output, as usual.

The rest is about surviving hostile and broken notebooks. Stock nbgrader
gives up on the whole notebook when the kernel dies (``os._exit``, a crash,
the memory limit) or stops answering, and has no limit on a notebook's total
time or on the output it keeps. This step runs the cells one by one and:

- gives each cell (or each judge) ``timeout`` seconds, and the notebook
  ``notebook_timeout`` seconds; a cell past its time is interrupted;
- when the kernel dies or does not answer an interrupt, stops there: that
  cell and every later code cell get an error output that says why (so they
  score 0), and the cells before keep their points;
- keeps at most ``output_limit`` bytes of output per cell;
- writes what happened (``notes``, some of them ``flag``-ged for a person
  to review) to the JSON file named by the ``settings.NOTES`` environment
  variable, for the grading report.

A graded cell with no judge in ``autograder.checks`` (one an instructor
added in nbgrader's usual style) runs in the kernel as stock nbgrader would;
the report says so. A judge that raises, or judges that cannot be imported,
are the grader's fault, not the student's: the cell scores 0 and is flagged
for a person to review, with the judge and its exception named.

The course's nbgrader_config.py puts it in place of nbgrader's Execute.
"""
import hashlib
import json
import os
import signal
from time import monotonic

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Integer

from . import settings
from .channel import DIED, HUNG, SocketKernelManager
from .course import graded_test
from .judging import Judging, error_output, raised
from .settings import Limits


class CappedOutput(Execute):
    """nbgrader's Execute, keeping at most ``output_limit`` bytes of each cell's output (a note says when)."""
    output_limit = Integer(Limits.output, help="Bytes of output kept per cell").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        self._cell_bytes, self._cut = 0, False
        return super().preprocess_cell(cell, resources, index)

    def output(self, outs, msg, display_id, cell_index):
        content = msg.get("content", {})
        size = len(content.get("text", "")) + len(json.dumps(content.get("data", {})))
        self._cell_bytes = getattr(self, "_cell_bytes", 0) + size
        if self._cell_bytes <= self.output_limit:
            return super().output(outs, msg, display_id, cell_index)
        if not self._cut:
            self._cut = True
            cell = self.nb.cells[cell_index]
            self._note(cell, f"this cell printed more than {self.output_limit // 1000} kB; the rest was dropped")
            out = NotebookNode(output_type="stream", name="stdout",
                               text=f"\n[the grader dropped the rest of this cell's output: over "
                                    f"{self.output_limit // 1000} kB]\n")
            outs.append(out)
            return out
        return None


class GuardedExecute(Judging, CappedOutput):
    """The Execute step (see the module's docstring): judged test cells (``Judging``), capped output
    (``CappedOutput``), and here the time limits and the kernels that die or hang."""
    notebook_timeout = Integer(Limits.notebook_timeout, help="Seconds for the whole notebook").tag(config=True)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", SocketKernelManager)  # nbgrader's Execute sets its own
        super().__init__(*args, **kwargs)

    def preprocess(self, nb, resources, retries=None):
        self._deadline = monotonic() + self.notebook_timeout
        self._judge_deadline = self._judge_budget = None
        self._stopped = ""
        self._notes = []
        self._probing = None
        self._assignment = (resources or {}).get("nbgrader", {}).get("assignment", "")
        try:
            return super().preprocess(nb, resources, retries)
        finally:
            path = os.environ.get(settings.NOTES)
            if path:
                with open(path, "w") as f:
                    json.dump(self._notes, f)

    def _note(self, cell, text: str, flag: bool = False) -> None:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
        index = next((i for i, c in enumerate(self.nb.cells) if c is cell), None)
        where = {} if index is None else {"index": index, "cell_id": str(cell.get("id", "")),
                                          "source_sha": hashlib.sha256(cell.source.encode()).hexdigest()}
        self._notes.append({"grade_id": gid, "note": text, **where, **({"flag": True} if flag else {})})

    def _get_timeout(self, cell):
        end = self._deadline if self._judge_deadline is None else min(self._deadline, self._judge_deadline)
        return max(1, min(self.timeout or self.notebook_timeout, int(end - monotonic()) + 1))

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        if not self._stopped and monotonic() >= self._deadline:
            self._stopped = f"the notebook ran past its time limit ({self.notebook_timeout} s)"
            self._note(cell, self._stopped + "; this cell and the ones after it were not run")
        if self._stopped:
            cell.outputs = [error_output("NotRun", f"not run: {self._stopped}")]
            return cell, resources
        gid = graded_test(cell)
        if gid:
            try:
                judged = self._has_judge(gid)
            except Exception as e:  # noqa: BLE001 - broken judges are the grader's fault, and say so
                return self._grader_fault(cell, f"the judges of {self._assignment} could not be imported "
                                                f"({raised(e)})"), resources
            if judged:
                return self._judge(cell, gid, index), resources
            self._note(cell, "this graded cell has no judge in autograder/checks; it ran inside the student's "
                             "kernel, where student code could change its outcome")
        budget = self._get_timeout(cell)
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            self._died(cell)
        except CellTimeoutError:
            self._unresponsive(cell)
        else:
            if any(o.get("ename") == "CellTimeoutError" for o in cell.outputs if o.output_type == "error"):
                which = "the notebook's" if budget < (self.timeout or 0) else "the per-cell"
                self._note(cell, f"this cell ran past {which} time limit ({budget} s) and was interrupted")
        return cell, resources

    def _died(self, cell) -> None:
        self._stopped = "the kernel died in an earlier cell"
        self._note(cell, "the kernel died in this cell (os._exit, a crash, or more memory than the "
                         "limit); the cells after it were not run")
        cell.outputs.append(error_output("DeadKernelError", DIED))

    def _unresponsive(self, cell) -> None:
        self._stopped = "the kernel stopped answering in an earlier cell"
        self._note(cell, "the kernel did not answer an interrupt after the time limit; it was stopped, "
                         "and the cells after it were not run")
        cell.outputs.append(error_output("CellTimeoutError", HUNG))
        self._kill_kernel()

    def _kill_kernel(self) -> None:
        pid = getattr(getattr(self.km, "provisioner", None), "pid", None)
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

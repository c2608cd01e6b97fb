"""nbgrader's Execute step, made to survive hostile and broken notebooks.

Stock nbgrader gives up on the whole notebook when the kernel dies
(``os._exit``, a crash, the memory limit) or stops answering, and has no
limit on a notebook's total time or on the output it keeps. This subclass
runs the cells one by one as nbgrader does and:

- gives each cell ``timeout`` seconds, and the whole notebook
  ``notebook_timeout`` seconds; a cell past its time is interrupted;
- when the kernel dies or does not answer an interrupt, stops there: that
  cell and every later code cell get an error output that says why (so they
  score 0), and the cells before keep their points;
- keeps at most ``output_limit`` bytes of output per cell;
- writes what happened (``notes``) to the JSON file named by the
  ``AUTOGRADER_NOTES`` environment variable, for the grading report.

The course's nbgrader_config.py puts it in place of nbgrader's Execute.
"""
import json
import os
import signal
from time import monotonic

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Integer


def error_output(ename: str, evalue: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


class GuardedExecute(Execute):
    notebook_timeout = Integer(900, help="Seconds for the whole notebook").tag(config=True)
    output_limit = Integer(1_000_000, help="Bytes of output kept per cell").tag(config=True)

    def preprocess(self, nb, resources, retries=None):
        self._deadline = monotonic() + self.notebook_timeout
        self._stopped = ""
        self._notes = []
        try:
            return super().preprocess(nb, resources, retries)
        finally:
            path = os.environ.get("AUTOGRADER_NOTES")
            if path:
                with open(path, "w") as f:
                    json.dump(self._notes, f)

    def _note(self, cell, text: str) -> None:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
        self._notes.append({"grade_id": gid, "note": text})

    def _get_timeout(self, cell):
        return max(1, min(self.timeout or self.notebook_timeout, int(self._deadline - monotonic()) + 1))

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        if not self._stopped and monotonic() >= self._deadline:
            self._stopped = f"the notebook ran past its time limit ({self.notebook_timeout} s)"
            self._note(cell, self._stopped + "; this cell and the ones after it were not run")
        if self._stopped:
            cell.outputs = [error_output("NotRun", f"not run: {self._stopped}")]
            return cell, resources
        self._cell_bytes, self._cut = 0, False
        budget = self._get_timeout(cell)
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            self._stopped = "the kernel died in an earlier cell"
            self._note(cell, "the kernel died in this cell (os._exit, a crash, or more memory than the "
                             "limit); the cells after it were not run")
            cell.outputs.append(error_output("DeadKernelError", "the kernel died while running this cell "
                                             "(os._exit, a crash, or more memory than the limit allows)"))
        except CellTimeoutError:
            self._stopped = "the kernel stopped answering in an earlier cell"
            self._note(cell, "the kernel did not answer an interrupt after the time limit; it was stopped, "
                             "and the cells after it were not run")
            cell.outputs.append(error_output("CellTimeoutError", "this cell ran past its time limit and did "
                                             "not stop when interrupted"))
            self._kill_kernel()
        else:
            if any(o.get("ename") == "CellTimeoutError" for o in cell.outputs if o.output_type == "error"):
                which = "the notebook's" if budget < (self.timeout or 0) else "the per-cell"
                self._note(cell, f"this cell ran past {which} time limit ({budget} s) and was interrupted")
        return cell, resources

    def _kill_kernel(self) -> None:
        pid = getattr(getattr(self.km, "provisioner", None), "pid", None)
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

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

"""nbgrader's Execute step, with the hidden tests judged outside the student's kernel.

Stock nbgrader runs the hidden tests in the kernel, after the student's code,
and counts a test cell as passed when it shows no error. Student code can
forge that (IPython's events and traceback machinery decide what a cell
shows) and can read the tests' expected values. Here a graded test cell is
never sent to the kernel. Its judge (``autograder.checks``) runs in this
process, the grader's: it sends the student's code inputs and reads back
outputs through the kernel's messages (``RemoteTransport``), computes the
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
import asyncio
import hashlib
import json
import os
import signal
from time import monotonic

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import ensure_async, run_sync
from nbformat import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Integer

from . import probe, proctree, settings
from .channel import DIED, HUNG, PROBE_REPLY_LIMIT, KernelStopped, SocketKernelManager, reply_of, request_code
from .settings import Limits
from .course import graded_test
from .results import JUDGE_BROKE

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # where the autograder package lies


def error_output(ename: str, evalue: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


class RemoteTransport:
    """Carries a judge's requests to the kernel being graded, through the executor's kernel client; the
    kernel's questions in the middle of a request (input requests) are answered by ``answer``."""

    def __init__(self, executor: "GuardedExecute", cell_index: int):
        self.executor, self.cell_index = executor, cell_index

    def __call__(self, text: str, answer=None) -> str:
        return self.executor.probe(text, self.cell_index, answer)

    def cpu(self) -> float | None:
        """Processor seconds used so far by the kernel and every process below its launcher, read by the grader
        from /proc (the kernel cannot change them), or None where they cannot be read."""
        return proctree.cpu(getattr(getattr(self.executor.km, "provisioner", None), "pid", None))


class GuardedExecute(Execute):
    notebook_timeout = Integer(Limits.notebook_timeout, help="Seconds for the whole notebook").tag(config=True)
    output_limit = Integer(Limits.output, help="Bytes of output kept per cell").tag(config=True)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", SocketKernelManager)  # nbgrader's Execute sets its own
        super().__init__(*args, **kwargs)

    def preprocess(self, nb, resources, retries=None):
        self._deadline = monotonic() + self.notebook_timeout
        self._judge_deadline = None
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
                                                f"({_raised(e)})"), resources
            if judged:
                return self._judge(cell, gid, index), resources
            self._note(cell, "this graded cell has no judge in autograder/checks; it ran inside the student's "
                             "kernel, where student code could change its outcome")
        self._cell_bytes, self._cut = 0, False
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

    # -- judging ----------------------------------------------------------------------------------

    def _has_judge(self, gid: str) -> bool:
        """Whether a judge in ``autograder.checks`` decides this graded cell: False when the assignment has no
        checks package or the package no judge of that name. Raises when importing the judges fails."""
        from . import checks
        return checks.has_package(self._assignment) and gid in checks.judges(self._assignment)

    def _grader_fault(self, cell, what: str):
        """Fail a graded cell because the grader broke (``what``), and flag it: the submission is not to blame."""
        self._note(cell, f"{what}: a fault in the grader's check, not necessarily in the submission; the cell "
                         f"scored 0 until a person reviews it", flag=True)
        cell.outputs = [error_output("AssertionError", JUDGE_BROKE)]
        return cell

    def _judge(self, cell, gid: str, index: int):
        """Run the judge of a graded cell in this process; the cell's outputs say what it decided."""
        from . import checks
        budget = self._get_timeout(cell)
        self._judge_deadline = monotonic() + budget
        cell.outputs, cell.execution_count = [], None
        flags = []
        try:
            message = checks.judge(self._assignment, gid, RemoteTransport(self, index), flags)
        except KernelStopped:
            return cell  # the outputs and notes are written
        except checks.ProbeFailure as e:
            message = str(e)
            if "time limit" in message:
                self._note(cell, f"this cell ran past the per-cell time limit ({budget} s) and was interrupted")
        except Exception as e:  # noqa: BLE001 - a judge that raises is the grader's fault, even on odd data
            fn = checks.judges(self._assignment)[gid]
            return self._grader_fault(cell, f"the judge of {self._assignment}'s {gid} "
                                            f"({fn.__module__}.{fn.__qualname__}) raised {_raised(e)}")
        finally:
            self._judge_deadline = None
        for text in flags:
            self._note(cell, text, flag=True)
        if message is not None:
            cell.outputs = [error_output("AssertionError", message)]
        return cell

    def probe(self, text: str, index: int, answer=None) -> str:
        """Send one request to the kernel and return its reply (see ``autograder.probe``). While it runs, the
        kernel may ask questions (a stand-in for one of the notebook's references, through the stdin channel):
        ``answer`` gives the reply to each."""
        code = request_code(text)
        request = NotebookNode(cell_type="code", source=code, metadata={}, outputs=[], execution_count=None)
        cell = self.nb.cells[index]
        self._probing, self._probe_bytes = [], 0
        try:
            run_sync(self._async_probe_cell)(request, index, answer)
        except DeadKernelError:
            self._died(cell)
            raise KernelStopped() from None
        except CellTimeoutError:
            self._unresponsive(cell)
            raise KernelStopped() from None
        finally:
            replies, self._probing = self._probing, None
            self.nb.cells[index] = cell  # nbclient puts the cell it ran in the notebook: the test cell goes back
        error = next(({"ename": o.get("ename"), "evalue": o.get("evalue")} for o in request.outputs
                      if o.get("output_type") == "error"), None)
        return reply_of(replies, self._probe_bytes, error, self._get_timeout(None))

    async def _async_probe_cell(self, request, index: int, answer) -> None:
        """Run a request cell with the stdin channel open, answering each input request with ``answer``."""
        async def questions():
            while True:
                msg = await ensure_async(self.kc.stdin_channel.get_msg())
                if msg.get("msg_type") == "input_request":
                    prompt = str(msg.get("content", {}).get("prompt", ""))
                    self.kc.input(answer(prompt) if answer else probe.pack({"ok": False, "fault": "no answer"}, {}))

        asking = asyncio.ensure_future(questions())
        self.kc.allow_stdin = True
        try:
            await self.async_execute_cell(request, index, store_history=False)
        finally:
            self.kc.allow_stdin = False
            asking.cancel()

    def output(self, outs, msg, display_id, cell_index):
        content = msg.get("content", {})
        if self._probing is not None:  # a judge's request: keep its reply only, drop what student code printed
            data = content.get("data") or {}
            if msg.get("msg_type") == "display_data" and isinstance(data.get(probe.MIME), str):
                self._probe_bytes += len(data[probe.MIME])
                if self._probe_bytes <= PROBE_REPLY_LIMIT:
                    self._probing.append(data[probe.MIME])
                else:  # too much: keep nothing, and the request fails (``probe``)
                    self._probing.clear()
            return None
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

    def clear_output(self, outs, msg, cell_index):
        if self._probing is not None:
            return
        super().clear_output(outs, msg, cell_index)

    def _kill_kernel(self) -> None:
        pid = getattr(getattr(self.km, "provisioner", None), "pid", None)
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _raised(e: BaseException) -> str:
    """An exception, and where in the checks it was raised: the innermost line of a module of
    ``autograder.checks`` in its traceback, or the line a syntax error names ('TypeError: ... at
    autograder/checks/self_attention/softmax.py:27, in autograder.checks.self_attention.softmax')."""
    where = ""
    tb = e.__traceback__
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__", "")
        if module == "autograder.checks" or module.startswith("autograder.checks."):
            where = f" at {_path(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}, in {module}"
        tb = tb.tb_next
    if isinstance(e, SyntaxError) and e.filename:
        where = f" at {_path(e.filename)}:{e.lineno}"
    return f"{type(e).__name__}: {str(e)[:300]}{where}"


def _path(filename: str) -> str:
    """A file of the grader as 'autograder/checks/...py'; any other file as it is."""
    path = os.path.abspath(filename)
    return os.path.relpath(path, SOURCE) if path.startswith(os.path.join(SOURCE, "autograder") + os.sep) else filename

"""The judging part of the Execute step (``execute.GuardedExecute``): a graded test cell is decided by its judge
in ``autograder.checks``, here in the grader's process, never by code in the kernel.

The judge sends the student's code inputs and reads back outputs through the kernel's messages
(``RemoteTransport``: each request runs as a cell of its own, and its reply is the only output kept), computes
the expected values itself, and the cell's outputs then say what it decided: nothing when it passed, an
``AssertionError`` with the judge's message when it failed. A judge that raises, or judges that cannot be
imported, are the grader's fault: the cell scores 0 and is flagged, with the judge and its exception named.
"""
import asyncio
import os
from time import monotonic

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import ensure_async, run_sync
from nbformat import NotebookNode

from . import probe, proctree, spawn
from .channel import PROBE_REPLY_LIMIT, KernelStopped, probe_timeout, reply_of, request_code, within
from .results import JUDGE_BROKE

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # where the autograder package lies


def error_output(ename: str, evalue: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


class RemoteTransport:
    """Carries a judge's requests to the kernel being graded, through the executor's kernel client; the
    kernel's questions in the middle of a request (input requests) are answered by ``answer``."""

    def __init__(self, executor: "Judging", cell_index: int):
        self.executor, self.cell_index = executor, cell_index

    def __call__(self, text: str, answer=None) -> str:
        return self.executor.probe(text, self.cell_index, answer)

    def cpu(self) -> float | None:
        """Processor seconds used so far by the kernel and every process below its launcher, read by the grader
        from /proc (the kernel cannot change them), or None where they cannot be read."""
        return proctree.cpu(spawn.launcher(getattr(getattr(self.executor.km, "provisioner", None), "pid", None)))


class Judging:
    """Mixed into the Execute step: it provides ``_note``, ``_get_timeout``, ``_died``, ``_unresponsive``,
    ``_assignment``, and nbclient's ``nb``, ``km`` and ``kc``."""
    _probing = None  # the replies of the request running now, or None when no judge's request runs

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
        self._judge_budget = budget = self._get_timeout(cell)
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
                                            f"({fn.__module__}.{fn.__qualname__}) raised {raised(e)}")
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
        self._probing, self._probe_bytes, self._overran = [], 0, False
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
        if self._overran:  # the grader's reference, run on the kernel's arguments, took the kernel's time
            raise probe_timeout(self._judge_budget)
        error = next(({"ename": o.get("ename"), "evalue": o.get("evalue")} for o in request.outputs
                      if o.get("output_type") == "error"), None)
        return reply_of(replies, self._probe_bytes, error, self._judge_budget)

    async def _async_probe_cell(self, request, index: int, answer) -> None:
        """Run a request cell with the stdin channel open, answering each input request with ``answer``, which
        runs in the time the request has left (as in the live check: ``channel.within``). When it runs past that
        time, the request is interrupted and fails as a time-out."""
        async def questions():
            while True:
                msg = await ensure_async(self.kc.stdin_channel.get_msg())
                if msg.get("msg_type") == "input_request":
                    prompt = str(msg.get("content", {}).get("prompt", ""))
                    finished, reply = within(answer, prompt, self._get_timeout(None)) if answer else (True, None)
                    if not finished:
                        self._overran = True
                        await ensure_async(self.km.interrupt_kernel())
                    self.kc.input(reply or probe.pack({"ok": False, "fault": "no answer"}, {}))

        asking = asyncio.ensure_future(questions())
        self.kc.allow_stdin = True
        try:
            await self.async_execute_cell(request, index, store_history=False)
        finally:
            self.kc.allow_stdin = False
            asking.cancel()

    def output(self, outs, msg, display_id, cell_index):
        if self._probing is None:
            return super().output(outs, msg, display_id, cell_index)
        # a judge's request: keep its reply only, drop what student code printed
        data = msg.get("content", {}).get("data") or {}
        if msg.get("msg_type") == "display_data" and isinstance(data.get(probe.MIME), str):
            self._probe_bytes += len(data[probe.MIME])
            if self._probe_bytes <= PROBE_REPLY_LIMIT:
                self._probing.append(data[probe.MIME])
            else:  # too much: keep nothing, and the request fails (``probe``)
                self._probing.clear()
        return None

    def clear_output(self, outs, msg, cell_index):
        if self._probing is None:
            super().clear_output(outs, msg, cell_index)


def raised(e: BaseException) -> str:
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

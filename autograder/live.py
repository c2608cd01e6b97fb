"""Check one exercise from inside the notebook: the hidden judges' verdict, decided outside the student's kernel.

``check("softmax")`` in a notebook (``lib/checking.py``) sends this service
the notebook's id, the exercise, and the code cells the student's kernel has
run, in order (IPython's input history). The service

1. picks what the exercise needs from that history (``needed_code``): the
   exercise's own cell as it last ran, whole, and the top-level definitions of
   every other cell (imports, functions, classes, constants), in the order they
   ran; demo cells' other statements (plots, training runs) are left out;
2. runs it in a sandboxed kernel, as grading does (``autograder.sandbox``, with
   the notebook's view of ``lib``: the references of earlier notebooks only).
   It keeps a spare kernel per notebook started, with the notebook's imports
   done (``Spares``), so that a check waits neither for a kernel nor for PyTorch;
3. runs the exercise's judges (``autograder.checks``) here, in this process, as
   grading does, and answers with each graded part's points and message. The
   message is the one ``grade`` and ``check`` give for the same code
   (``results.failure_line``); a correct part says what was verified.

Later exercises are judged as in grading: an earlier exercise's reference
stands in for the student's version of it. The student's kernel only sends
code and prints the answer; the judges and their expected values never reach
it, and nothing it does changes the verdict on the code it sent. The kernel
the code ran in is thrown away after each check.

The service listens on a Unix socket (one JSON line in, one out) in a folder
that only its user may open; the first ``checker(...)`` of a notebook starts
it, and it ends after ``settings.Service.idle`` seconds (``settings.LIVE_IDLE`` overrides) without
a request.

    python -m autograder.live serve SOCKET          the service (lib/checking.py starts it)
    python -m autograder.live ask NOTEBOOK EXERCISE judge a saved notebook's exercise, as check() would
"""
import ast
import json
import os
import socket
import sys
import threading
import time
import traceback
from collections import defaultdict, deque
from functools import lru_cache
from pathlib import Path

from . import course, scratch, settings
from .channel import DIED, HUNG, KernelStopped, SandboxedKernel, probe_timeout, reply_of, request_code
from .course import exercise_of
from .settings import Limits
from .results import JUDGE_BROKE, failure_line
from .sandbox_log import limit_notes, sandbox_state
from .scan import suspicious
from .zygote import FRESH, Zygote

MODES = ("full", "points", "off")  # what a check shows: messages and points, points only, nothing
MAX_REQUEST = 16 * 2**20  # bytes of one request (the history is cut to fit, oldest cells first, by the client)
IDLE = settings.live_idle()
DEFINITIONS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


# --- what an exercise needs -------------------------------------------------------------------

def _parse(code: str):
    lines = [line for line in code.splitlines() if not line.lstrip().startswith(("%", "!"))]
    try:
        return ast.parse("\n".join(lines)), "\n".join(lines)
    except (SyntaxError, ValueError):
        return None, "\n".join(lines)


def _bound(tree) -> set:
    """Names a cell binds at its top level: functions, classes, imports and plain assignments."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


def _constant(node) -> bool:
    """An assignment of a literal (``d_model = 8``): a definition, cheap to run again."""
    if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
        return False
    try:
        ast.literal_eval(node.value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def definitions(code: str) -> str:
    """The top-level imports, functions, classes and literal constants of a cell, as source."""
    tree, text = _parse(code)
    if tree is None:
        return ""
    lines = text.splitlines(keepends=True)
    return "\n".join(_segment(lines, node) for node in tree.body if isinstance(node, DEFINITIONS) or _constant(node))


def _segment(lines: list, node) -> str:
    """A top-level statement's source (its decorators included), from the cell's lines: ast.get_source_segment
    splits the whole cell again for each statement, which a cell of many thousand lines makes quadratic."""
    decorators = getattr(node, "decorator_list", [])
    first, start = (decorators[0].lineno, 0) if decorators else (node.lineno, node.col_offset)
    part = lines[first - 1:node.end_lineno]
    if not part:
        return ""
    if len(part) == 1:
        return part[0][start:node.end_col_offset]
    return "".join([part[0][start:], *part[1:-1], part[-1][:node.end_col_offset]])


def needed_code(exercise: str, history: list) -> list | None:
    """The code cells to run before judging ``exercise``: every cell's definitions in the order they ran, and
    the last cell that defined ``exercise`` whole. None when no cell of the history defined it."""
    last = None
    for i, code in enumerate(history):
        tree, _ = _parse(code)
        if tree is not None and exercise in _bound(tree):
            last = i
    if last is None:
        return None
    return [code if i == last else definitions(code) for i, code in enumerate(history[:last + 1])] + \
        [definitions(code) for code in history[last + 1:]]


@lru_cache(maxsize=None)
def _source(aid: str) -> dict:
    return json.loads(course.source_notebook(aid).read_text())


def first_code(aid: str) -> str:
    """The notebook's first code cell (its imports), as released."""
    return next("".join(c["source"]) for c in _source(aid)["cells"] if c["cell_type"] == "code")


@lru_cache(maxsize=None)
def verified(aid: str) -> dict:
    """grade_id -> what its hidden test verifies, from the comment that opens the test cell ('equals
    torch.softmax on random shapes, for every `dim`, in float32 and float64.')."""
    found = {}
    for cell in _source(aid)["cells"]:
        gid = course.graded_test(cell)
        if not gid:
            continue
        lines = []
        for line in "".join(cell["source"]).splitlines():
            if not line.startswith("# ") or line.startswith("### "):
                break
            lines.append(line[2:].strip())
        text = " ".join(lines)
        found[gid] = text.split(":", 1)[1].strip() if text.startswith("Graded") and ":" in text else text
    return found


def parts_of(aid: str, exercise: str) -> list:
    """(grade_id, points) of the graded test cells of one exercise, in order."""
    from . import checks
    points = {c["metadata"]["nbgrader"]["grade_id"]: float(c["metadata"]["nbgrader"].get("points", 0))
              for c in _source(aid)["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade")}
    exercises = checks.exercises(aid)
    return [(gid, points[gid]) for gid in checks.graded_cells(aid) if exercise_of(gid, exercises) == exercise]


# --- the kernels ------------------------------------------------------------------------------

class Spares:
    """Sandboxed kernels started ahead of time, per notebook, with the notebook's imports done. Threads that
    live as long as the service start them: a launcher dies with the thread that started it."""

    def __init__(self, make, count: int = 1, notebooks: int = 2):
        """``count`` spares per notebook, for the ``notebooks`` most recently checked (a spare holds about
        250 MB)."""
        self.make, self.count, self.notebooks = make, count, notebooks
        self.ready, self.failed, self.recent = defaultdict(list), {}, []
        self.wanted, self.making, self.cond, self.closed = deque(), [], threading.Condition(), False
        for _ in range(count):  # ``count`` spares per notebook, started ``count`` at a time
            threading.Thread(target=self._loop, daemon=True, name="spares").start()

    def want(self, aid: str) -> None:
        with self.cond:
            self.recent = [a for a in self.recent if a != aid] + [aid]
            old = [k for a in self.recent[:-self.notebooks] for k in self.ready.pop(a, [])]
            self.recent = self.recent[-self.notebooks:]
            if len(self.ready[aid]) + self.wanted.count(aid) + self.making.count(aid) < self.count:
                self.wanted.append(aid)
                self.cond.notify_all()
        for k in old:
            k.close()

    def take(self, aid: str, timeout: float):
        """A ready kernel for ``aid`` (one more is started at once for the next check)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            self.failed.pop(aid, None)
        self.want(aid)
        with self.cond:
            while not self.ready[aid]:
                if aid in self.failed:
                    raise KernelStopped(f"the kernel did not start ({self.failed.pop(aid)})")
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    raise KernelStopped("no kernel started in time")
                self.cond.wait(min(left, 1.0))
            kernel = self.ready[aid].pop(0)
        self.want(aid)
        return kernel

    def _loop(self) -> None:
        while True:
            with self.cond:
                while not self.wanted and not self.closed:
                    self.cond.wait()
                if self.closed:
                    return
                aid = self.wanted.popleft()
                self.making.append(aid)
            try:
                kernel, failed = self.make(aid), None
            except Exception as e:  # noqa: BLE001 - said to the check that waits for it
                kernel, failed = None, f"{type(e).__name__}: {e}"
            with self.cond:
                self.making.remove(aid)
                if failed:
                    self.failed[aid] = failed
                elif self.closed:
                    kernel.close()
                    return
                else:
                    self.ready[aid].append(kernel)
                self.cond.notify_all()

    def close(self) -> None:
        with self.cond:
            self.closed = True
            kernels = [k for ks in self.ready.values() for k in ks]
            self.ready.clear()
            self.cond.notify_all()
        for k in kernels:
            k.close()


class Transport:
    """A judge's requests to a live check's kernel, within the judge's ``seconds`` (as in grading)."""

    def __init__(self, kernel: SandboxedKernel, seconds: int):
        self.kernel, self.seconds, self.deadline = kernel, seconds, time.monotonic() + seconds

    def __call__(self, text: str, answer=None) -> str:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise probe_timeout(self.seconds)
        out = self.kernel.run(request_code(text), left, answer)
        return reply_of(out.replies, out.nbytes, out.error, self.seconds)

    def cpu(self) -> float | None:
        return self.kernel.cpu()


# --- the service ------------------------------------------------------------------------------

class Service:
    """Judges exercises for the students' kernels (see the module's docstring)."""

    def __init__(self, limits: Limits | None = None, modes: dict | None = None, jobs: int = 1, threads: int = 1,
                 notebooks: int = settings.Service.own_notebooks):
        """``jobs`` checks are judged at once (and as many spare kernels kept for each of the ``notebooks``
        notebooks last checked); each kernel gets ``threads`` PyTorch threads."""
        self.limits, self.modes, self.threads = limits or Limits(), dict(modes or {}), threads
        self.folder = scratch.Folder("live-")
        self.dir = self.folder.path
        (self.dir / "s").mkdir()
        (self.dir / "scratch").mkdir()
        self._views, self._lock = {}, threading.Lock()
        self.judging = threading.Semaphore(jobs)
        self.zygote = Zygote.where_possible(self.dir, self._environ())  # kernels forked, PyTorch imported once
        self.spares = Spares(self._start, jobs, notebooks)

    def mode(self, aid: str) -> str:
        mode = self.modes.get(aid, self.modes.get("default", settings.Service.mode))
        return mode if mode in MODES else settings.Service.mode

    def _view(self, aid: str) -> Path:
        from .bundle import student_view
        with self._lock:
            if aid not in self._views:
                self._views[aid] = student_view(aid, self.dir / "view" / aid)
            return self._views[aid]

    def _start(self, aid: str) -> SandboxedKernel:
        """A sandboxed kernel for ``aid``, its imports done."""
        log = self.dir / f"sandbox-{os.urandom(8).hex()}.log"
        env = dict(self._environ(), **settings.Sandbox.of(
                       self.limits, view=str(self._view(aid)), keep=[course.release_notebook(aid).parent],
                       hide=[self.dir], scratch_dir=self.dir / "scratch", log=log).environ())
        kernel = SandboxedKernel(env, str(course.release_notebook(aid).parent), str(self.dir / "s"),
                                 launch=self.zygote.command if self.zygote else FRESH)
        kernel.log = log
        try:
            warm = kernel.run(definitions(first_code(aid)) + "\nimport autograder.probe, lib.guard\n", 120)
        except KernelStopped:
            sandbox_state(log)
            raise
        if warm.error:
            kernel.close()
            sandbox_state(log)
            raise RuntimeError(f"the notebook's imports failed: {warm.error['ename']}: {warm.error['evalue']}")
        return kernel

    def warm(self, aid: str) -> dict:
        if aid not in course.assignments():
            return {"error": f"no notebook {aid!r} in this course"}
        if self.mode(aid) != "off":
            self.spares.want(aid)
        return {"ok": True}

    def check(self, aid: str, exercise: str, history: list) -> dict:
        """The verdict on one exercise: {"points", "max", "parts": [{grade_id, points, max, message,
        verified}], "notes"}, or {"error": ...} when there is nothing to judge."""
        from . import checks
        if aid not in course.assignments():
            return {"error": f"no notebook {aid!r} in this course"}
        if self.mode(aid) == "off":
            return {"off": f"the instructor has turned off checks for {aid}"}
        answers = checks.exercises(aid)
        parts = parts_of(aid, exercise) if exercise in answers else []
        if not parts:
            known = ", ".join(e for e in answers if parts_of(aid, e))
            written = exercise in answers
            return {"error": f"{exercise!r} is a written answer: a person grades it" if written else
                    f"{aid} has no exercise {exercise!r}; its exercises are: {known}"}
        code = needed_code(exercise, [str(h) for h in history])
        if code is None:
            return {"error": f"this kernel has not run a cell that defines {exercise}: run your {exercise} cell, "
                             f"then check again (the check judges the code your kernel last ran)"}
        with self.judging:
            try:
                kernel = self.spares.take(aid, 180)
            except KernelStopped:  # a kernel that failed to start (a busy machine): the grader's fault, once
                kernel = self.spares.take(aid, 180)
            try:
                results, notes = self._judge(kernel, aid, parts, code)
            finally:
                kernel.close()
                state, hits = sandbox_state(kernel.log)
        notes += limit_notes(hits, self.limits)
        notes += [f"grading will flag this for a person to read: {why}" for piece in code for why in suspicious(piece)]
        return self._answer(aid, exercise, results, notes, state)

    def _judge(self, kernel, aid: str, parts: list, code: list):
        """[(grade_id, points, None or (message line, full message))] and notes, as grading would give them."""
        from . import checks
        results, notes, stopped = [], [], None
        # the code runs within one cell's time, all of it together: a check holds a kernel and a judging slot
        # for at most (1 + its graded parts) cell times, whatever the history holds
        deadline = time.monotonic() + self.limits.cell_timeout
        for piece in code:
            if not piece.strip():
                continue
            left = deadline - time.monotonic()
            try:
                out = kernel.run(piece, left) if left > 0 else None
            except KernelStopped as e:
                stopped = _stopped(e)
                break
            if out is None or out.timed_out:
                notes.append(f"your cells ran past the time limit ({self.limits.cell_timeout} s for all of them) "
                             f"and were interrupted; the cells after were not run")
                break
        for gid, points in parts:
            if stopped is None:
                try:
                    message = checks.judge(aid, gid, Transport(kernel, self.limits.cell_timeout), [])
                except KernelStopped as e:
                    stopped = _stopped(e)
                except checks.ProbeFailure as e:
                    message = str(e)
                except Exception:  # noqa: BLE001 - the grader's fault, as in grading: said, and logged here
                    traceback.print_exc()
                    message = JUDGE_BROKE
            if stopped is not None:
                results.append((gid, points, stopped))
                why = "stopped answering" if stopped[0].startswith("CellTimeoutError") else "died"
                stopped = _failed("NotRun", f"not run: the kernel {why} in an earlier cell")
            else:
                results.append((gid, points, None if message is None else _failed("AssertionError", message)))
        return results, notes

    def _answer(self, aid, exercise, results, notes, state) -> dict:
        mode, said = self.mode(aid), verified(aid)
        parts = []
        for gid, points, failed in results:
            part = {"grade_id": gid, "max": points, "points": 0.0 if failed else points}
            if mode == "full" and failed is None:
                part["verified"] = said.get(gid, "")
            elif mode == "full":
                part["message"] = failed[0]
                detail = failed[1].strip().splitlines()[1:]
                if detail:
                    part["detail"] = "\n".join(detail)
            parts.append(part)
        return {"assignment": aid, "exercise": exercise, "points": sum(p["points"] for p in parts),
                "max": sum(p["max"] for p in parts), "parts": parts, "mode": mode,
                "notes": notes if mode == "full" else [], "sandbox": state}

    def _environ(self) -> dict:
        """The kernels' environment, less their sandbox's settings (of which they keep an allow-list)."""
        return dict(os.environ, OMP_NUM_THREADS=str(self.threads), MPLBACKEND="module://autograder.nodisplay",
                    NBGRADER_EXECUTION="autograde", PATH=course.python_first())

    def close(self) -> None:
        self.spares.close()
        if self.zygote is not None:
            self.zygote.close()
        self.folder.close()


def _failed(ename: str, text: str) -> tuple:
    """A failed part: (its line in the report, as ``grade`` writes it; the whole message)."""
    return failure_line(ename, text), text


def _stopped(e: KernelStopped) -> tuple:
    """A dead or hung kernel, worded as grading words it."""
    text = str(e)
    return _failed({HUNG: "CellTimeoutError", DIED: "DeadKernelError"}.get(text, "KernelStopped"), text)


def modes_of(values) -> dict:
    """``["off", "08_encoder_decoder=points"]`` -> {"default": "off", "08_encoder_decoder": "points"}."""
    modes = {}
    for value in values or ():
        aid, _, mode = value.rpartition("=")
        if mode not in MODES:
            raise ValueError(f"--mode {value}: the mode is one of {', '.join(MODES)}")
        modes[aid or "default"] = mode
    return modes


# --- the socket ------------------------------------------------------------------------------

def handle(service: Service, line: bytes) -> dict:
    """The answer to one request line."""
    try:
        request = json.loads(line)
        op = request.get("op") if isinstance(request, dict) else None
        aid = str(request.get("assignment", "")) if op else ""
        exercise, history = str(request.get("exercise", "")) if op else "", request.get("history") if op else None
    except (ValueError, TypeError, AttributeError, RecursionError, MemoryError) as e:
        return {"error": f"a request this service cannot read ({type(e).__name__})"}
    try:
        if op == "check":
            if not isinstance(history, list):
                return {"error": "the request has no history"}
            return service.check(aid, exercise, history)
        if op == "warm":
            return service.warm(aid)
        if op == "ping":
            return {"ok": True, "pid": os.getpid()}
        return {"error": f"unknown request {op!r}"}
    except KernelStopped as e:
        return {"error": f"the check could not run: {e}"}
    except (RecursionError, MemoryError) as e:  # a cell too deep or too large for Python's parser
        return {"error": f"the code sent could not be read ({type(e).__name__})"}
    except Exception as e:  # noqa: BLE001 - the service's own fault: said, logged, and the service goes on
        traceback.print_exc()
        return {"error": f"the check could not run ({type(e).__name__}: {e}); run it again"}


def serve(path: str, service: Service | None = None) -> None:
    """Answer requests on the Unix socket ``path`` until ``IDLE`` seconds pass without one (or a "stop")."""
    import fcntl
    lock = os.open(path + ".lock", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # another service already answers on this path
    service = service or Service()
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chmod(path, 0o600)
    server.listen(64)
    last, stop = [time.monotonic()], threading.Event()

    def one(conn):
        with conn:
            data = b""
            while b"\n" not in data and len(data) <= MAX_REQUEST:
                chunk = conn.recv(1 << 20)
                if not chunk:
                    break
                data += chunk
            last[0] = time.monotonic()
            if data.strip() == b'{"op": "stop"}':
                stop.set()
                answer = {"ok": True}
            else:
                answer = handle(service, data.split(b"\n", 1)[0]) if len(data) <= MAX_REQUEST else \
                    {"error": "the request is too large"}
            last[0] = time.monotonic()
            try:
                conn.sendall(json.dumps(answer).encode() + b"\n")
            except OSError:
                pass

    server.settimeout(1.0)
    try:
        while not stop.is_set() and time.monotonic() - last[0] < IDLE:
            try:
                conn, _ = server.accept()
            except socket.timeout:
                continue
            conn.settimeout(None)
            threading.Thread(target=one, args=(conn,), daemon=True).start()
    finally:
        server.close()
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        service.close()
        os.close(lock)


def history_of(notebook: Path) -> list:
    """A saved notebook's code cells, as the history of a kernel that ran it top to bottom."""
    nb = json.loads(Path(notebook).read_text())
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def main(argv) -> int:
    import argparse
    parser = argparse.ArgumentParser(prog="python -m autograder.live", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("serve", help="answer checks on a Unix socket")
    p.add_argument("socket")
    p.add_argument("--mode", action="append", default=[],
                   help=f"[NOTEBOOK=]full|points|off (default {settings.Service.mode})")
    p.add_argument("--cell-timeout", type=int, default=Limits.cell_timeout, help="seconds per cell and per judge")
    p = sub.add_parser("ask", help="judge one exercise of a saved notebook, as check() in it would")
    p.add_argument("notebook", type=Path)
    p.add_argument("exercise")
    p.add_argument("--assignment")
    args = parser.parse_args(argv)
    if args.command == "serve":
        import torch

        from .settings import cap_grader_memory
        cap_grader_memory()  # the judges run references here, on arguments a kernel chose
        torch.set_num_threads(1)  # the judges' tensors are small; the cores are the students'
        serve(args.socket, Service(Limits(cell_timeout=args.cell_timeout), modes=modes_of(args.mode)))
        return 0
    service = Service()
    try:
        aid = args.assignment or course.detect_assignment(args.notebook)
        answer = service.check(aid, args.exercise, history_of(args.notebook))
    finally:
        service.close()
    print(json.dumps(answer, indent=1))
    return 0 if answer.get("points") == answer.get("max") and "error" not in answer else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

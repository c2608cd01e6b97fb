"""``check("softmax")``: the hidden tests' verdict on one exercise, from inside the notebook.

Each notebook's first cell makes the function for that notebook::

    from lib.checking import checker
    check = checker("01_self_attention")

and a cell under each exercise calls it: ``check("softmax")`` prints the
exercise's points, and for each hidden test either what it verified or the
message that names the mistake (the message ``grade`` gives for the same
code). It judges the code this kernel last ran for the exercise: no need to
save first. The judges never run in this kernel; where they run:

- in a copy of the course's repository: a service on this machine
  (``python -m autograder.live``), which ``checker`` starts in the background;
- on a class's JupyterHub: the instructor's check service, at the address in
  ``AUTOGRADER_CHECK_URL``, reached with this server's Hub token;
- in a student bundle that has neither: nowhere, and ``check`` says so.

It never changes the notebook or the grade, and does nothing while a notebook
is being graded (``NBGRADER_EXECUTION`` is set then).
"""
import hashlib
import importlib.util
import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

MAX_HISTORY = 8 * 2**20  # characters of code sent with a check; the oldest cells go first
WAIT = 300  # seconds a check waits for its verdict (the judges have their own time limits, well below)
START = 90  # seconds to wait for a service that is starting


def checker(assignment: str):
    """The ``check`` function of one notebook; starts the judges in the background, so the first check is quick."""
    where = _where()

    def check(exercise: str) -> None:
        """Print the hidden tests' verdict on ``exercise`` (its name in the notebook, such as "softmax")."""
        if os.environ.get("NBGRADER_EXECUTION"):
            return  # the notebook is being graded: the grader runs every hidden test itself
        try:
            answer = where.check(assignment, str(exercise), _history())
        except CheckUnavailable as e:
            print(f"check({exercise!r}): {e}")
            return
        print(describe(answer, exercise))

    check.__qualname__ = check.__name__ = "check"
    if not os.environ.get("NBGRADER_EXECUTION"):
        where.warm(assignment)
    return check


class CheckUnavailable(Exception):
    """No judge can be reached; the message says why and what to do instead."""


def describe(answer: dict, exercise: str) -> str:
    """A check's answer as the lines it prints."""
    if "error" in answer:
        return f"check({exercise!r}): {answer['error']}"
    if "off" in answer:
        return f"check({exercise!r}): {answer['off']}"
    lines = [f"{exercise}: {_n(answer['points'])} / {_n(answer['max'])} points from the hidden tests"]
    width = max(len(p["grade_id"]) for p in answer["parts"])
    for p in answer["parts"]:
        mark = "ok  " if p["points"] == p["max"] else "FAIL"
        text = p.get("message") or p.get("verified") or ""
        lines.append(f"  {mark}  {p['grade_id']:<{width}}  {_n(p['points'])} / {_n(p['max'])}  {text}".rstrip())
        if p.get("detail"):
            lines += [f"        {line}" for line in p["detail"].splitlines()[:20]]
    lines += [f"  note: {n}" for n in answer.get("notes", [])]
    if answer.get("mode") == "points":
        lines.append("  (your instructor shows points only for this notebook)")
    return "\n".join(lines)


def _n(x) -> str:
    return f"{x:g}"


def _history() -> list:
    """The code cells this kernel ran, oldest first, cut to ``MAX_HISTORY`` characters (the newest kept)."""
    try:
        cells = list(get_ipython().history_manager.input_hist_raw)  # noqa: F821 - IPython's own global
    except NameError:
        return []
    kept, size = [], 0
    for code in reversed(cells):
        size += len(code)
        if size > MAX_HISTORY:
            break
        kept.append(code)
    return kept[::-1]


# --- where the judges are ---------------------------------------------------------------------

def _where():
    if os.environ.get("AUTOGRADER_CHECK_URL"):
        return HubService(os.environ["AUTOGRADER_CHECK_URL"])
    if importlib.util.find_spec("autograder") is None or importlib.util.find_spec("autograder.live") is None:
        return Nowhere(BUNDLE)
    try:
        return LocalService(socket_path())
    except CheckUnavailable as e:
        return Nowhere(str(e))


BUNDLE = ("the hidden tests are not in this bundle: your instructor runs them when grading (or through a check "
          "service, if your class has one). The check cell above runs the visible checks.")


class Nowhere:
    """No judges to reach (a student bundle); ``why`` says so."""

    def __init__(self, why: str):
        self.why = why

    def warm(self, assignment):
        pass

    def check(self, assignment, exercise, history):
        raise CheckUnavailable(self.why)


class LocalService:
    """The course's judges on this machine: ``python -m autograder.live serve`` on a Unix socket of this user's."""

    def __init__(self, path: str):
        self.path = path

    def warm(self, assignment) -> None:
        threading.Thread(target=self._quietly, args=({"op": "warm", "assignment": assignment},), daemon=True).start()

    def _quietly(self, request):
        try:
            self.ask(request, START)
        except (CheckUnavailable, OSError, ValueError):
            pass  # the check itself will say what is wrong

    def check(self, assignment, exercise, history):
        return self.ask({"op": "check", "assignment": assignment, "exercise": exercise, "history": history}, WAIT)

    def ask(self, request: dict, timeout: float) -> dict:
        deadline, started = time.monotonic() + START, False
        while True:
            try:
                return _exchange(self.path, request, timeout)
            except (FileNotFoundError, ConnectionRefusedError):
                if not started:
                    self._start()
                    started = True
                if time.monotonic() > deadline:
                    raise CheckUnavailable(f"the judges did not start within {START} s (their log: "
                                           f"{self.path}.log)") from None
                time.sleep(0.1)
            except socket.timeout:
                raise CheckUnavailable(f"no verdict within {timeout} s; run the check again") from None

    def _start(self) -> None:
        """Start the service, detached: a shell starts it and exits, so it is no process of this kernel's (a
        kernel that is restarted keeps it, and the kernel's own process tree stays the notebook's)."""
        root = Path(importlib.util.find_spec("autograder").origin).parent.parent
        subprocess.run(["sh", "-c", '"$0" -m autograder.live serve "$1" >>"$1.log" 2>&1 </dev/null &',
                        sys.executable, self.path], cwd=root, start_new_session=True, check=False,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _exchange(path: str, request: dict, timeout: float) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall(json.dumps(request).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(1 << 20)
            if not chunk:
                raise CheckUnavailable("the judges stopped before answering; run the check again")
            data += chunk
    return json.loads(data)


def socket_path() -> str:
    """Where this user's service for this course and this Python listens: ``AUTOGRADER_LIVE_SOCKET``, or a
    file in a folder only this user may open."""
    if os.environ.get("AUTOGRADER_LIVE_SOCKET"):
        return os.environ["AUTOGRADER_LIVE_SOCKET"]
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    folder = os.path.join(base, f"transformers-course-{os.getuid()}")
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise CheckUnavailable(f"{folder} is not a private folder of yours: remove it, then check again")
    root = str(Path(__file__).resolve().parent.parent)
    digest = hashlib.sha256(f"{root}\0{sys.executable}".encode()).hexdigest()[:12]
    return os.path.join(folder, f"{digest}.sock")


class HubService:
    """The class's check service on JupyterHub (``deploy/``), reached with this server's own Hub token: the
    service judges the code as this student's, and keeps the hidden tests on its side."""

    def __init__(self, url: str):
        self.url = url.rstrip("/")

    def warm(self, assignment) -> None:
        pass

    def check(self, assignment, exercise, history):
        import urllib.error
        import urllib.request
        body = json.dumps({"assignment": assignment, "exercise": exercise, "history": history}).encode()
        request = urllib.request.Request(self.url + "/check", data=body, method="POST", headers={
            "Content-Type": "application/json",
            "Authorization": f"token {os.environ.get('JUPYTERHUB_API_TOKEN', '')}"})
        try:
            with urllib.request.urlopen(request, timeout=WAIT) as reply:
                return json.loads(reply.read())
        except urllib.error.HTTPError as e:
            try:
                return json.loads(e.read())
            except ValueError:
                raise CheckUnavailable(f"the class's check service answered {e.code} {e.reason}") from None
        except (urllib.error.URLError, OSError) as e:
            raise CheckUnavailable(f"the class's check service cannot be reached ({e}); try again later") from None

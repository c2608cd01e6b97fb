"""check("<exercise>") in a notebook: the hidden judges' verdict on the code the kernel last ran, decided
outside the kernel (autograder/live.py, lib/checking.py).

The catalogue's verdicts must be the ones grading gives (tests/test_mistakes.py ties the in-process verdicts
to nbgrader's); a sample runs here, the whole catalogue with COURSE_FULL_CATALOGUE=1.
"""
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from autograder import checks, course, live
from lib import checking
from tests.test_mistakes import ALTERNATIVES, FULL, MISTAKES, SAMPLE, verdicts

AID = "01_self_attention"
WRONG_DIM = '''
def softmax(x, dim=-1):
    e = (x - x.amax(dim=0, keepdim=True)).exp()
    return e / e.sum(dim=0, keepdim=True)
'''


class Served:
    """The service as a student's kernel reaches it: a process of its own, on a Unix socket, started the way
    lib/checking.py starts it (detached: no child of this process, whose process watch in the in-process
    verdicts would see its kernels at work)."""

    def __init__(self, path):
        self.path = str(path)
        subprocess.run(["sh", "-c", '"$0" -m autograder.live serve "$1" --cell-timeout 10 >"$1.log" 2>&1 &',
                        sys.executable, self.path], cwd=course.ROOT, check=True)
        deadline = time.monotonic() + 120
        while True:  # up: else the first check would start a service of its own (lib/checking.py), not this one
            try:
                checking._exchange(self.path, {"op": "ping"}, 10)
                break
            except (OSError, checking.CheckUnavailable):
                assert time.monotonic() < deadline, open(self.path + ".log").read()
                time.sleep(0.2)

    def check(self, aid, exercise, history):
        return self.ask({"op": "check", "assignment": aid, "exercise": exercise, "history": history})

    def ask(self, request):
        return checking.LocalService(self.path).ask(request, 300)

    def close(self):
        _stop(self.path)
        deadline = time.monotonic() + 30
        while os.path.exists(self.path) and time.monotonic() < deadline:
            time.sleep(0.1)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    s = Served(tmp_path_factory.mktemp("live") / "live.sock")
    yield s
    s.close()


def history(aid: str, replace: dict | None = None) -> list:
    """The code cells a student's kernel ran top to bottom (the hidden test cells are not in a student's
    notebook), with answer cells replaced by ``replace`` (grade_id -> code)."""
    nb = json.loads(course.source_notebook(aid).read_text())
    out = []
    for c in nb["cells"]:
        meta = c["metadata"].get("nbgrader", {})
        if c["cell_type"] != "code" or course.graded_test(c):
            continue
        out.append((replace or {}).get(meta.get("grade_id"), "".join(c["source"])))
    return out


def lines(answer: dict) -> dict:
    return {p["grade_id"]: (p["points"] == p["max"], p.get("message", "")) for p in answer["parts"]}


def test_every_exercise_has_its_check_call():
    for aid in course.assignments():
        for path in (course.source_notebook(aid), course.release_notebook(aid)):
            sources = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
            assert f'check = checker("{aid}")' in sources[0], f"{path.name}: the first cell makes no check"
            for exercise in checks.exercises(aid):
                if live.parts_of(aid, exercise):
                    assert any(s.startswith(f'check("{exercise}")') for s in sources), f"{path.name}: {exercise}"
            text = path.read_text()
            assert "python -m autograder" not in text, f"{path.name} tells a student to run a command a bundle lacks"


def test_wrong_dim_loses_softmax_points_only_in_a_running_notebook(tmp_path):
    """The bar: notebook 01, correct but for a softmax over dim 0, run as a student runs it (nbclient, a real
    kernel): the softmax check shows fewer points and names the dimension; every other check shows full points."""
    nb = nbformat.read(course.source_notebook(AID), as_version=4)
    nb.cells = [c for c in nb.cells if not (c.metadata.get("nbgrader", {}).get("grade")  # the hidden tests:
                                            and not c.metadata["nbgrader"].get("solution"))]  # not a student's
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid == "softmax":
            cell.source = WRONG_DIM
    path = str(tmp_path / "live.sock")
    os.environ["AUTOGRADER_LIVE_SOCKET"] = path
    try:
        NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,  # the visible check fails too
                       resources={"metadata": {"path": str(course.source_notebook(AID).parent)}}).execute()
    finally:
        os.environ.pop("AUTOGRADER_LIVE_SOCKET")
        _stop(path)
    shown = {c.metadata["nbgrader"]["grade_id"][:-len("_hidden_check")]: "".join(o.get("text", "") for o in c.outputs)
             for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id", "").endswith("_hidden_check")}
    assert set(shown) == {"softmax", "simple_self_attention", "scaled_dot_product_attention", "SelfAttention"}
    assert shown["softmax"].startswith("softmax: 0 / 3 points"), shown["softmax"]
    assert "along dim 0" in shown["softmax"], shown["softmax"]
    for exercise, text in shown.items():
        if exercise != "softmax":
            points = text.split(" points")[0].split(": ")[1]
            assert points.split(" / ")[0] == points.split(" / ")[1], text


def _stop(path):
    try:
        checking._exchange(path, {"op": "stop"}, 10)
    except (OSError, checking.CheckUnavailable):
        pass


def test_it_judges_the_code_the_kernel_last_ran(service):
    right = history(AID)
    edited_wrong = right + [WRONG_DIM]  # the student edits the cell and runs it again: not saved
    assert lines(service.check(AID, "softmax", edited_wrong))["softmax_reference"][0] is False
    assert service.check(AID, "softmax", edited_wrong + [right[1 + 0]])["points"] < 3  # a demo cell changes nothing
    fixed = edited_wrong + [next(c for c in right if c.startswith("def softmax"))]
    answer = service.check(AID, "softmax", fixed)
    assert answer["points"] == answer["max"] == 3, answer
    assert all(p["verified"] for p in answer["parts"]), answer  # a correct part says what was verified


def test_a_later_exercise_is_judged_with_the_reference_of_an_earlier_one(service):
    answer = service.check(AID, "scaled_dot_product_attention", history(AID, {"softmax": WRONG_DIM}))
    assert answer["points"] == answer["max"], answer


def test_what_it_says_when_there_is_nothing_to_judge(service):
    assert "run your softmax cell" in service.check(AID, "softmax", ["import torch"])["error"]
    assert "written answer" in service.check(AID, "question_permutation", history(AID))["error"]
    assert "exercises are: softmax" in service.check(AID, "softmax_reference", history(AID))["error"]
    assert "no notebook" in service.check("../../etc", "softmax", [])["error"]


@pytest.mark.parametrize("aid,item", SAMPLE if not FULL else MISTAKES + ALTERNATIVES,
                         ids=[f"{a}:{x.name}" for a, x in (SAMPLE if not FULL else MISTAKES + ALTERNATIVES)])
def test_the_check_gives_grading_s_verdicts(service, aid, item):
    """Each part's points and message are the ones grading gives the same code (the in-process verdicts,
    which tests/test_mistakes.py holds equal to nbgrader's)."""
    expected = {v.grade_id: (v.passed, v.message) for v in verdicts(aid, item)}
    answer = service.check(aid, item.cell, history(aid, {item.cell: item.code}))
    assert "error" not in answer, answer
    got = lines(answer)
    for gid, verdict in got.items():
        if gid.endswith("_speed") and not verdict[0] and not expected[gid][0]:
            continue  # a timed judge says "too slow" or "wrong" first depending on the machine's load: both fail
        assert verdict == expected[gid], f"{gid}: the check says {verdict}, grading {expected[gid]}"


# --- what a hostile kernel can do -----------------------------------------------------------------

def test_the_code_cannot_read_the_judges(service):
    spy = f'''
import glob, pathlib
FOUND = []
for pattern in ("{course.ROOT}/autograder/checks/**/*.py", "{course.ROOT}/solutions/*/*.ipynb", "/proc/*/cwd/*.py"):
    for name in glob.glob(pattern, recursive=True)[:5]:
        try:
            FOUND.append(pathlib.Path(name).read_text()[:80])
        except OSError:
            pass
try:
    import autograder.checks.self_attention
    FOUND.append("imported the judges")
except ImportError:
    pass

def softmax(x, dim=-1):
    raise ValueError("found: " + repr(FOUND))
'''
    answer = service.check(AID, "softmax", history(AID, {"softmax": spy}))
    text = json.dumps(answer)
    assert "found: []" in text, text
    assert "def softmax_reference" not in text and "expected" not in text.split("found")[0]


def test_a_hanging_or_dying_kernel_gets_a_message_in_time(service):
    hang = "def softmax(x, dim=-1):\n    while True:\n        pass\n"
    answer = service.check(AID, "softmax", history(AID, {"softmax": hang}))
    assert answer["points"] == 0 and "time limit (10 s)" in answer["parts"][0]["message"], answer
    die = "import os\ndef softmax(x, dim=-1):\n    os._exit(3)\n"
    answer = service.check(AID, "softmax", history(AID, {"softmax": die}))
    assert answer["points"] == 0 and "kernel died" in answer["parts"][0]["message"], answer
    assert "not run" in answer["parts"][1]["message"], answer
    answer = service.check(AID, "softmax", history(AID))  # the service goes on
    assert answer["points"] == answer["max"], answer


def test_slow_definitions_cannot_hold_the_service_past_one_cell_time(service):
    """A class body runs when the class is defined: ten of them sleeping 8 s each would hold a kernel (and, on a
    hub, a judging slot) for 80 s. All the code of a check runs within one cell time (10 s here)."""
    slow = "class Slow{}:\n    import time\n    time.sleep(8)\n"
    start = time.monotonic()
    answer = service.check(AID, "softmax", history(AID) + [slow.format(i) for i in range(10)])
    assert time.monotonic() - start < 40, answer
    assert any("ran past the time limit (10 s for all of them)" in n for n in answer["notes"]), answer


FLOOD = '''
import time, hmac, hashlib
def softmax(x, dim=-1):
    return x
_k = get_ipython().kernel
_sock, _key = _k.iopub_thread.socket, _k.session.key
_parent = _k.session.pack(_k.get_parent()["header"])
_content = b'{"name": "stdout", "text": "x"}'
_end, _i = time.time() + 40, 0
while time.time() < _end:
    _i += 1
    h = b'{"msg_id": "%d", "msg_type": "stream", "username": "u", "session": "s", "version": "5.3"}' % _i
    sig = hmac.new(_key, h + _parent + b"{}" + _content, hashlib.sha256).hexdigest().encode()
    _sock.send_multipart([b"<IDS|MSG>", sig, h, _parent, b"{}", _content])
'''


def test_a_kernel_flooding_its_output_is_stopped_in_time(service):
    """The red team's flood: signed messages sent straight on the kernel's output socket, faster than the
    service reads them. The service looks at the clock between batches: the check ends near its 10 s."""
    start = time.monotonic()
    answer = service.check(AID, "softmax", ["import torch", FLOOD])
    assert time.monotonic() - start < 30, answer
    assert answer.get("points") == 0, answer


def test_a_reference_run_for_the_kernel_stops_at_the_kernel_s_time(service):
    """The red team's other hold: a later exercise may call the notebook's earlier references, which run in
    the service, on arguments it picks (here train_bpe on 20000 words, 2000 merges: minutes). The call is
    stopped at the judge's time, and the check ends near it."""
    slow = ('''
import random
def bpe_tokenize(word, merges):
    rnd = random.Random(0)
    corpus = " ".join("".join(rnd.choice("abcdefghij") for _ in range(8)) for _ in range(20000))
    train_bpe(corpus, 2000)
    return []
''')
    start = time.monotonic()
    answer = service.check("07_bpe", "bpe_tokenize", history("07_bpe", {"bpe_tokenize": slow}))
    assert time.monotonic() - start < 25 * len(answer.get("parts", [1])), answer
    assert answer["points"] == 0 and "time limit" in json.dumps(answer), answer


def test_code_grading_would_flag_is_flagged_in_the_check(service):
    """The red team lifted the ban on torch.softmax (lib.guard.trusted): the kernel cannot tell, so the check
    gives the points, as grading would, and says, as grading's report does, that a person will read it."""
    lifted = "import torch\nfrom lib.guard import trusted\nsoftmax = trusted(lambda x, dim=-1: torch.softmax(x, dim))\n"
    answer = service.check(AID, "softmax", history(AID, {"softmax": lifted}))
    assert any("flag this for a person" in n for n in answer["notes"]), answer


@pytest.mark.parametrize("request_line", [
    b"not json\n",
    b'{"op": "check", "assignment": "01_self_attention", "exercise": "softmax", "history": "import os"}\n',
    b'{"op": "check", "assignment": {"a": 1}, "exercise": ["softmax"], "history": [1, 2]}\n',
    b'{"op": "../../judges"}\n',
    b"[]\n",
    b"[" * 100000 + b"\n",  # too deep for the JSON parser
    b'{"op": "check", "assignment": "01_self_attention", "exercise": "softmax", "history": ["'
    + b"-" * 500000 + b'"]}\n',  # too deep for Python's parser
])
def test_crafted_requests_get_an_error_and_nothing_else(service, request_line):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(60)
        s.connect(service.path)
        s.sendall(request_line)
        answer = json.loads(s.makefile("rb").readline())
    assert set(answer) == {"error"}, answer


# --- where there are no judges ------------------------------------------------------------------

def test_a_bundle_says_the_hidden_tests_are_not_there(tmp_path):
    from autograder.bundle import bundle
    bundle("01", tmp_path / "b.zip")
    with zipfile.ZipFile(tmp_path / "b.zip") as z:
        z.extractall(tmp_path / "b")
    code = ("from lib.checking import checker\ncheck = checker('01_self_attention')\n"
            "def softmax(x, dim=-1):\n    return x\ncheck('softmax')\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # -S: no site-packages, where this checkout's own autograder is installed; a bundle has none
    out = subprocess.run([sys.executable, "-S", "-c", code], cwd=tmp_path / "b", env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and not out.stderr, out.stderr
    assert "not in this bundle" in out.stdout, out.stdout


def test_check_does_nothing_while_grading(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    monkeypatch.setenv("AUTOGRADER_LIVE_SOCKET", str(tmp_path / "none.sock"))
    checking.checker(AID)("softmax")
    assert capsys.readouterr().out == ""
    assert not (tmp_path / "none.sock").exists()


# --- the lab a student opens ----------------------------------------------------------------------

@pytest.mark.parametrize("folder", ["self-learner", "student"])
def test_a_students_lab_shows_no_instructor_tools_and_no_validate_button(folder):
    """course.py lab (deploy/self-learner/) and the class's servers (deploy/student/): nbgrader's formgrader,
    Create Assignment and Validate (which runs the hidden tests in the student's own kernel, and passed a
    notebook the grader takes points from) are switched off; the check cells take Validate's place."""
    env = dict(os.environ, JUPYTER_CONFIG_PATH=str(course.ROOT / "deploy" / folder))
    if folder == "self-learner":  # what course.py lab runs JupyterLab with
        spec = importlib.util.spec_from_file_location("course_script", course.ROOT / "course.py")
        script = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(script)
        env = script.environment(Path(sys.executable), dict(os.environ), lab=True)
        assert env["PATH"].startswith(str(Path(sys.executable).parent))  # the lab's terminals run the course's python
    listed = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"], env=env, capture_output=True,
                            text=True, timeout=120)
    disabled = listed.stdout + listed.stderr
    disabled = disabled[disabled.index("Disabled extensions:"):]
    for plugin in ("formgrader", "create-assignment", "validate-assignment"):
        assert f"@jupyter/nbgrader:{plugin}" in disabled, (folder, plugin)

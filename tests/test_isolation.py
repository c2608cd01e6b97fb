"""No submission reaches another student, the grader or the network (issue O).

One class is graded with ``--jobs 2``, as an instructor runs it: honest students
between attackers, so that some are graded beside an attacker and some after it
on the same worker. Each attacker tries one way out of its kernel:

- forging the grading worker's answers by writing on every descriptor it has;
- finding the other kernels' ports on loopback, reading what they publish and
  killing them with a malformed message;
- starting thousands of threads in forked children (past the sandbox's 512);
- using many times its memory limit through forked children.

Every honest student must keep exactly the grade a clean run gives, nothing
published by an honest kernel may reach an attacker, and the attacker's
sandbox never holds more memory at once than one kernel's allowance.
"""
import json
import os
import re

import nbformat
import pytest

from autograder.__main__ import grade_class
from autograder.settings import Limits
from tests.hostile_cases import AID, FULL, SOL
from tests.processes import Watch
from tests.test_hostile import per_exercise
from tests.submissions import make_submission

MARKER = "HONEST_MARKER_7f3a"  # in every honest student's code: must never reach an attacker

FORGE = '''
import json, os
_forged = ("@@result " + json.dumps({"success": True, "log": "", "error": ""}) + "\\n").encode() * 3
for _fd in range(64):
    try:
        if not os.readlink(f"/proc/self/fd/{_fd}").startswith("socket:"):  # not the kernel's own channels
            os.write(_fd, _forged)
    except OSError:
        pass
'''

# Find listening TCP ports (other kernels', the grader's), subscribe to each, and send each a ZMTP
# greeting and a frame header that claims 2 GiB; report what was found and what was read.
PORTS = '''
import socket, struct, time, zmq
def _mine():
    import os
    links = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd") if fd.isdigit()
             and os.path.islink(f"/proc/self/fd/{fd}")]
    return {link[8:-1] for link in links if link.startswith("socket:[")}
def _listening():
    found, mine = set(), _mine()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = open(name).read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if cols[3] == "0A" and cols[9] not in mine:  # listening, and not this kernel's own
                found.add(int(cols[1].rsplit(":", 1)[1], 16))
    return found
_seen, _read, _subs = set(), [], []
_ctx = zmq.Context()
_end = time.time() + 25
while time.time() < _end:
    for _port in _listening() - _seen:
        _seen.add(_port)
        _s = _ctx.socket(zmq.SUB)
        _s.setsockopt(zmq.SUBSCRIBE, b"")
        _s.connect(f"tcp://127.0.0.1:{_port}")
        _subs.append(_s)
        try:
            _c = socket.create_connection(("127.0.0.1", _port), timeout=0.5)
            _c.sendall(b"\\xff" + b"\\0" * 8 + b"\\x7f\\x03\\x00" + b"NULL" + b"\\0" * 16 + b"\\0" + b"\\0" * 31)
            _c.sendall(b"\\x02" + struct.pack(">Q", 2**31))
        except OSError:
            pass
    for _s in _subs:
        while True:
            try:
                _read.append(_s.recv(zmq.NOBLOCK))
            except zmq.Again:
                break
    time.sleep(0.2)
print("ATTACK", json.dumps({"ports": len(_seen), "read": sum(b"HONEST" in m for m in _read)}))
'''

# Ten forked children of 1.5 GiB each; the kernel adds up the proportional memory (Pss: shared pages split
# among their sharers) of every process it can see (its own PID namespace) every 0.1 s, and reports the most
# it saw at once beyond what it held itself before the children: the children's allocations. (The kernel's own
# share depends on how it started: pages it shares with the zygote it was forked from are charged to the grader.)
MEMORY = '''
import os, time
def _resident():
    total = 0
    for _p in os.listdir("/proc"):
        try:
            _rows = open(f"/proc/{_p}/smaps_rollup").read().splitlines()
            total += next(int(r.split()[1]) * 1024 for r in _rows if r.startswith("Pss:"))
        except (OSError, ValueError, IndexError, StopIteration):
            pass
    return total
_before = _resident()
for _ in range(10):
    try:
        _pid = os.fork()
    except OSError:
        break
    if _pid == 0:
        try:
            _b = bytearray(1536 * 2**20)
            for _i in range(0, len(_b), 4096):
                _b[_i] = 1
            time.sleep(12)
        finally:
            os._exit(0)
_most, _end = 0, time.time() + 15
while time.time() < _end:
    _most = max(_most, _resident() - _before)
    time.sleep(0.1)
print("ATTACK", json.dumps({"most": _most, "before": _before}))
'''

# Threads started in forked children, counted: each child sends its count to the kernel on a pipe.
COUNT_THREADS = '''
import os, threading, time
threading.stack_size(32768)
_r, _w = os.pipe()
for _ in range(3):
    try:
        _pid = os.fork()
    except OSError:
        break
    if _pid == 0:
        _n = 0
        try:
            for _ in range(2000):
                threading.Thread(target=time.sleep, args=(20,), daemon=True).start()
                _n += 1
        except BaseException:
            pass
        os.write(_w, f"{_n}\\n".encode())
        time.sleep(20)
        os._exit(0)
time.sleep(10)
os.close(_w)
print("ATTACK", json.dumps({"threads": sum(int(n) for n in os.read(_r, 4096).split())}))
'''

ATTACKS = {"forge": FORGE, "ports": PORTS, "fork": COUNT_THREADS, "memory": MEMORY, "count": COUNT_THREADS}


# student folders, graded in this order (by name): each attacker has honest students beside it and after it
ORDER = {name: f"s{i}_{name}" for i, name in enumerate(
    ["honest0", "forge", "honest1", "ports", "honest2", "honest3", "fork", "honest4", "memory", "honest5"])}


def _honest_source():
    return SOL["softmax"] + f"\n# {MARKER}: my own work\n"


def _attacker_source(attack):
    return SOL["softmax"] + "\nimport json\n" + ATTACKS[attack]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("isolation")
    submitted = tmp / "submitted"
    for name in ORDER:
        source = _attacker_source(name) if name in ATTACKS else _honest_source()
        make_submission(AID, submitted / ORDER[name] / AID / f"{AID}.ipynb", {"softmax": source})
    watch = Watch(os.getpid())
    results, _ = grade_class(submitted, tmp / "out", jobs=2, progress=False,
                             limits=Limits(cell_timeout=45, notebook_timeout=150))
    watch.stop()
    names = {folder: name for name, folder in ORDER.items()}
    return {"results": {names[r.student]: r for r in results}, "out": tmp / "out", "left": watch.alive()}


def _printed(graded, student) -> str:
    nb = nbformat.read(graded["out"] / "autograded" / ORDER[student] / AID / f"{AID}.ipynb", as_version=4)
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


@pytest.mark.parametrize("student", [f"honest{i}" for i in range(6)])
def test_honest_students_keep_their_grades(graded, student):
    result = graded["results"][student]
    assert per_exercise(result) == FULL, (result.error, result.notes, [(c.grade_id, c.message) for c in result.cells])
    assert result.sandbox == "isolated", result.sandbox


def test_no_process_outlives_the_class(graded):
    """Every worker, kernel launcher, kernel and process a kernel started (the fork and thread bombs' included)
    is gone once grade returns."""
    assert graded["left"] == [], graded["left"]


def test_forged_answers_move_no_grade(graded):
    """Lines that look like the worker's answers, written on every descriptor the kernel holds but its own
    sockets, reach no pipe the grader reads."""
    assert per_exercise(graded["results"]["forge"]) == FULL  # its own code is right: it is graded as it is


def test_no_kernel_finds_or_reads_another(graded):
    attack = json.loads(re.search(r"ATTACK (\{.*\})", _printed(graded, "ports")).group(1))
    assert attack["read"] == 0, "an attacker read what an honest kernel published"
    assert attack["ports"] == 0, "a kernel sees listening TCP ports: it shares a network with others"


def test_a_thread_bomb_hits_its_own_process_limit(graded):
    """Three forked children start 2000 threads each: together they get no more than the sandbox's 512."""
    attack = json.loads(re.search(r"ATTACK (\{.*\})", _printed(graded, "fork")).group(1))
    assert attack["threads"] <= Limits().pids, f"{attack['threads']} threads started in one sandbox"


def test_memory_is_capped_per_sandbox_not_per_process(graded):
    """Ten forked children of 1.5 GiB each (15 GiB with a limit per process): together they stay within the
    sandbox's 4 GiB. The kernel's own sum is not taken at one instant and counts the pages of shared
    libraries that other processes loaded first (and are charged for): it may read a little over the limit."""
    limit = Limits().memory
    attack = json.loads(re.search(r"ATTACK (\{.*\})", _printed(graded, "memory")).group(1))
    assert attack["most"] <= 1.25 * limit, f"the sandbox held {attack['most'] / 2**30:.1f} GiB at once"
    result = graded["results"]["memory"]
    assert any("memory limit" in n for n in result.notes), result.notes


@pytest.fixture(scope="module")
def without_cgroups(tmp_path_factory):
    """The same limits where no control group can be made: the kernel's own uid with RLIMIT_NPROC, and the
    launcher adding up the sandbox's memory."""
    tmp = tmp_path_factory.mktemp("fallback")
    submitted = tmp / "submitted"
    order = {name: f"s{i}_{name}" for i, name in enumerate(["honest0", "count", "honest1", "memory", "honest2"])}
    for name, folder in order.items():
        source = _attacker_source(name) if name in ATTACKS else _honest_source()
        make_submission(AID, submitted / folder / AID / f"{AID}.ipynb", {"softmax": source})
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AUTOGRADER_NO_CGROUP", "1")
        results, _ = grade_class(submitted, tmp / "out", jobs=2, progress=False,
                                 limits=Limits(cell_timeout=45, notebook_timeout=150))
    names = {folder: name for name, folder in order.items()}
    return {"results": {names[r.student]: r for r in results}, "out": tmp / "out", "order": order}


def test_without_cgroups_the_limits_still_hold(without_cgroups):
    results = without_cgroups["results"]
    for name in ("honest0", "honest1", "honest2"):
        assert per_exercise(results[name]) == FULL, (name, results[name].error, results[name].notes)
    nb = nbformat.read(without_cgroups["out"] / "autograded" / without_cgroups["order"]["count"] / AID /
                       f"{AID}.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    threads = json.loads(re.search(r"ATTACK (\{.*\})", printed).group(1))["threads"]
    assert threads <= Limits().pids, f"{threads} threads started in one sandbox"
    assert any("memory limit" in n for n in results["memory"].notes), results["memory"].notes

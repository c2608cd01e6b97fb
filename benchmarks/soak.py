"""Soak run of ``grade``: a whole class through the real command line, with the machine watched.

Grades N submissions of notebook 01 (default 200), a share of them hostile or broken (default 10 %),
with ``python -m autograder grade SUBMITTED --out OUT --jobs 2`` and its default limits. Notebook 01
is the one to use: it is the quickest of the nine under ``check`` in docs/benchmarks.md's table (14 s), and
the notebook tests/hostile_cases.py attacks.

The class, in nbgrader's layout ``<student>/01_self_attention/01_self_attention.ipynb``:

- honest students (tests/submissions.py): in turn the solution or one of the catalogue's correct
  alternatives, then two of the catalogued mistakes (tests/mistakes/self_attention.py), and now and
  then a notebook handed in as released, nothing filled in;
- hostile or broken ones, spread evenly among them: a varied pick of tests/hostile_cases.py (kernels
  that exit or segfault, loops, a memory bomb, a flood of output, forged verdicts, links, a full
  disk, malformed files) and the fork attacks of tests/test_isolation.py (threads in forked
  children, past the sandbox's 512; forked children of 1.5 GiB each; no grade is expected of these).

Expected grades of honest students are known without grading them twice: a notebook left as
released scores 0, and every other variant is graded once in this process by tests/inprocess.py
(the solution notebook run once, then each variant's answer and the judges after it, a second or
so each): the verdicts tests/test_mistakes.py compares nbgrader's with. A mismatch therefore means
that ``grade``, at scale and among hostile neighbours, disagrees with the judges on that answer.

While ``grade`` runs, every 0.5 s, the processes of this run are counted: the grade command and its
descendants, and processes that look like the grader's (a sandbox uid, >= 1,500,000,000, or
``ipykernel_launcher`` / ``autograder.sandbox`` / ``autograder.worker`` / ``autograder.zygote`` /
``autograder/spawn.py`` in their command line)
hanging from no other process tree (orphans, born during the run). Other runs on the machine are
not counted. ``grade`` gets a fresh, empty TMPDIR: whatever is left in it afterwards was left by this
run; so are new control groups named ``autograder-*`` (but those of another run's live launcher).

Prints the wall time, notebooks per minute, the peak process count, the processes, temporary
files and control groups left once ``grade`` returned (processes at once and 5 s later: what is
still dying as it returns is gone by then; zombies, dead and waiting for pid 1 to collect them,
are shown apart), and whether every honest grade matched; exits 1 when anything is left 5 s
later, an honest grade differs or ``grade`` failed. How hostile notebooks
scored against tests/hostile_cases.py is printed for information only (its grades are those of
tests/test_hostile.py's shorter time limits).

    python benchmarks/soak.py [--n 200] [--hostile-share 0.1] [--jobs 2] [--keep]
    python benchmarks/soak.py --quick        # 20 notebooks, 2 of them hostile
"""
import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autograder import course  # noqa: E402
from tests import hostile_cases as hc  # noqa: E402
from tests.mistakes import self_attention as catalogue  # noqa: E402
from tests.submissions import make_submission  # noqa: E402
from tests.test_isolation import _attacker_source  # noqa: E402

AID = hc.AID
SANDBOX_UID = 1_500_000_000
GRADER_COMMANDS = (b"ipykernel_launcher", b"autograder.sandbox", b"autograder.worker", b"autograder.zygote",
                   b"autograder/spawn.py")


@dataclass
class Student:
    kind: str  # "honest" or "hostile"
    variant: str
    write: object  # path -> None
    expect: float | None = None  # autograded points


# --- the class --------------------------------------------------------------------------------------

def graded_points() -> dict:
    """grade_id -> points of each autograded test cell of notebook 01."""
    nb = json.loads(course.source_notebook(AID).read_text())
    return {m["grade_id"]: m["points"] for c in nb["cells"] if (m := c["metadata"].get("nbgrader", {})).get("grade")
            and not m.get("solution")}


def honest_variants() -> tuple[list, list]:
    """(correct, wrong) honest variants of notebook 01, each with its expected points (see the docstring)."""
    from tests.inprocess import Notebook
    points = graded_points()
    full = sum(points.values())
    notebook = Notebook(AID)

    def variant(name, cell=None, code=None):
        if cell is None:
            return Student("honest", name, lambda p: make_submission(AID, p), full)
        lost = sum(points[v.grade_id] for v in notebook.grade(cell, code) if not v.passed)
        return Student("honest", name, lambda p: make_submission(AID, p, {cell: code}), full - lost)

    correct = [variant("the solution")] + [variant(a.name, a.cell, a.code) for a in catalogue.ALTERNATIVES]
    wrong = [variant(m.name, m.cell, m.code) for m in catalogue.MISTAKES]
    wrong.append(Student("honest", "nothing filled in", lambda p: make_submission(AID, p, solve=False), 0))
    return correct, wrong


def hostile_variants() -> list:
    """A varied pick of the hostile and broken cases, one kind after another."""
    cases = {c.name: c for c in hc.HOSTILE + hc.FORGERY + hc.MALFORMED}
    picked = [cases[name] for name in (
        "os._exit in an answer cell", "invalid JSON (a truncated file)", "memory bomb",
        "IPython: a post_run_cell event clears the error", "infinite loop", "an empty file",
        "kernel crash (segfault)", "links to another student's file and to course files", "100 MB of output",
        "nbformat version 5", "loop that ignores the interrupt", "the kernel side replaced by a forger",
        "filling the disk", "sys.exit in an answer cell", "a returned value that runs code when unpickled",
        "an answer cell deleted", "a pathological markdown answer", "writing the gradebook and the course's lib")]
    hostile = [Student("hostile", c.name, c.write, sum(c.expect.values())) for c in picked]
    for attack, name in (("fork", "threads in forked children (tests/test_isolation.py)"),
                         ("memory", "forked children of 1.5 GiB each (tests/test_isolation.py)")):
        hostile.insert(len(hostile) // 2 if attack == "fork" else 1, Student(  # no grade expected of these
            "hostile", name, lambda p, a=attack: make_submission(AID, p, {"softmax": _attacker_source(a)})))
    return hostile


def make_class(n: int, share: float, submitted: Path) -> dict:
    """student id -> Student, written under ``submitted``; hostile ones spread evenly."""
    correct, wrong = honest_variants()
    hostile = hostile_variants()
    h = round(n * share)
    hostile_at = {int((k + 0.5) * n / h) for k in range(h)} if h else set()
    students, j, k = {}, 0, 0
    for i in range(n):
        if i in hostile_at:
            s, k = hostile[k % len(hostile)], k + 1
        else:
            s = correct[(j // 3) % len(correct)] if j % 3 == 0 else wrong[(j - j // 3 - 1) % len(wrong)]
            j += 1
        path = submitted / f"s{i:03d}" / AID / f"{AID}.ipynb"
        path.parent.mkdir(parents=True)
        s.write(path)
        students[f"s{i:03d}"] = s
    return students


# --- the machine ------------------------------------------------------------------------------------

class Proc(NamedTuple):
    ppid: int
    start: int  # clock ticks after boot: with the pid, names a process even once its pid is reused
    uid: int
    state: str  # Z: a zombie, dead and waiting for its parent to collect it
    cmdline: bytes


def processes() -> dict:
    """pid -> Proc of every process on the machine."""
    procs = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            status = Path(f"/proc/{name}/status").read_text()
            uid = int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
        except (OSError, ValueError, StopIteration):
            continue  # gone meanwhile
        procs[int(name)] = Proc(int(fields[1]), int(fields[19]), uid, fields[0], cmdline)
    return procs


def looks_like_grader(proc: Proc) -> bool:
    return proc.uid >= SANDBOX_UID or any(c in proc.cmdline for c in GRADER_COMMANDS)


def ours(procs: dict, root: int | None, before: set) -> set:
    """(pid, start time) of the processes of this run: ``root`` and its descendants, and trees hanging from
    pid 1 whose top looks like the grader's, is alive, and was not there ``before``."""
    found = set()
    for pid, proc in procs.items():
        top, chain = pid, set()
        while top in procs and top != root and procs[top].ppid not in (0, 1) and top not in chain:
            chain.add(top)
            top = procs[top].ppid
        if top == root or (top in procs and procs[top].ppid in (0, 1) and procs[top].state != "Z"
                           and looks_like_grader(procs[top]) and (top, procs[top].start) not in before):
            found.add((pid, proc.start))
    return found


def grader_tops(procs: dict) -> set:
    return {(pid, p.start) for pid, p in procs.items() if p.ppid in (0, 1) and looks_like_grader(p)}


def left_over(seen: set, before: set) -> dict:
    """pid -> Proc of the run's processes still there: seen during the run, or orphans of the grader's."""
    procs = processes()
    left = {pid for pid, p in procs.items() if (pid, p.start) in seen} | {pid for pid, _ in ours(procs, None, before)}
    return {pid: procs[pid] for pid in sorted(left)}


class Watch(threading.Thread):
    """Counts the run's processes every 0.5 s while ``grade`` runs; keeps the peak and every one seen, and
    says how it goes once a minute."""

    def __init__(self, root: int, before: set):
        super().__init__(daemon=True)
        self.root, self.before, self.peak, self.seen = root, before, 0, set()
        self.folders = {}  # launcher pid -> the folder it grades in (which notebook), for a group left behind
        self.done = threading.Event()

    def run(self):
        start = time.monotonic()
        said = start
        while not self.done.is_set():
            procs = processes()
            now = ours(procs, self.root, self.before)
            self.peak = max(self.peak, len(now))
            self.seen |= now
            for pid, _ in now:
                if pid not in self.folders and (b"autograder.sandbox" in procs[pid].cmdline
                                                or b"autograder/spawn.py" in procs[pid].cmdline):
                    try:
                        self.folders[pid] = os.readlink(f"/proc/{pid}/cwd")
                    except OSError:
                        pass
            if time.monotonic() - said >= 60:
                said = time.monotonic()
                print(f"  {said - start:4.0f} s: {len(now)} processes, peak {self.peak}", flush=True)
            self.done.wait(0.5)


def command_line(proc: Proc) -> str:
    return proc.cmdline.replace(b"\0", b" ").decode(errors="replace")[:150] or "(no command line)"


def launcher(group: str) -> int:
    """The pid a control group autograder-<pid> is named after (its launcher's), or 0."""
    pid = group.rsplit("-", 1)[1]
    return int(pid) if pid.isdigit() else 0


def another_runs(group: str, procs: dict, seen: set) -> bool:
    """Whether a control group is that of another run's launcher, alive."""
    pid = launcher(group)
    return pid in procs and (pid, procs[pid].start) not in seen


def cgroups() -> set:
    """The control groups named autograder-* (v1 pids and memory, v2), as paths."""
    found = set()
    for base in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"):
        if not os.path.isfile(os.path.join(base, "cgroup.procs")):
            continue
        for folder, subs, _ in os.walk(base):
            found |= {os.path.join(folder, s) for s in subs if s.startswith("autograder")}
    return found


# --- the run ----------------------------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=200, help="submissions (default 200)")
    parser.add_argument("--hostile-share", type=float, default=0.1, help="share hostile or broken (default 0.1)")
    parser.add_argument("--jobs", type=int, default=2, help="grade --jobs (default 2)")
    parser.add_argument("--quick", action="store_true", help="20 submissions, to try the benchmark out")
    parser.add_argument("--keep", action="store_true", help="keep the class, the outputs and grade's log")
    args = parser.parse_args()
    n = 20 if args.quick else args.n
    work = Path(tempfile.mkdtemp(prefix="soak-"))
    submitted, out, tmp = work / "submitted", work / "out", work / "tmp"
    tmp.mkdir()
    t0 = time.perf_counter()
    students = make_class(n, args.hostile_share, submitted)
    hostile = sorted(s for s, v in students.items() if v.kind == "hostile")
    print(f"{n} submissions of {AID}, {len(hostile)} hostile or broken; expected grades computed; "
          f"{time.perf_counter() - t0:.0f} s. {os.cpu_count()} cores, grade --jobs {args.jobs}", flush=True)

    groups_before = cgroups()
    before = grader_tops(processes())
    command = [sys.executable, "-m", "autograder", "grade", str(submitted), "--out", str(out), "--jobs",
               str(args.jobs)]
    print(f"grading, output in {work / 'grade.log'}", flush=True)
    with open(work / "grade.log", "wb") as log:
        t0 = time.perf_counter()
        grade = subprocess.Popen(command, cwd=course.ROOT, stdout=log, stderr=subprocess.STDOUT,
                                 env=dict(os.environ, TMPDIR=str(tmp)))
        watch = Watch(grade.pid, before)
        watch.start()
        rc = grade.wait()
        wall = time.perf_counter() - t0
        watch.done.set()
        watch.join()

    at_once = left_over(watch.seen, before)
    time.sleep(5)  # what is still dying when grade returns has gone by then; what is left then, stays
    left = left_over(watch.seen, before)
    alive = {pid: p for pid, p in left.items() if p.state != "Z"}
    left_files = sorted(p.name for p in tmp.iterdir())
    procs = processes()
    left_groups = sorted(g for g in cgroups() - groups_before if not another_runs(g, procs, watch.seen))

    rows = {}
    if (out / "grades.csv").is_file():
        with open(out / "grades.csv", newline="", encoding="utf-8") as f:
            rows = {r["student_id"]: float(r["autograded"]) for r in csv.DictReader(f)}
    wrong = [(s, v, rows.get(s)) for s, v in students.items() if v.kind == "honest" and rows.get(s) != v.expect]
    judged = [s for s, v in students.items() if v.kind == "hostile" and v.expect is not None]
    odd = [(s, students[s], rows.get(s)) for s in judged if rows.get(s) != students[s].expect]

    print(f"grade exited with {rc} after {wall:.1f} s: {n / wall * 60:.1f} notebooks per minute")
    print(f"peak processes of the run (sampled every 0.5 s): {watch.peak}")
    print(f"processes left after grade returned: {len(at_once)} at once, {len(alive)} 5 s later"
          + (f" (and {len(left) - len(alive)} zombies, dead, that their parent has not collected yet)"
             if len(left) > len(alive) else ""))
    for pid, p in left.items():
        print(f"  {pid} ({p.state}, parent {p.ppid}, uid {p.uid}): {command_line(p)}")
    print(f"temporary files and folders left in grade's TMPDIR: {len(left_files)} {left_files[:10]}")
    print(f"control groups left: {len(left_groups)}")
    for g in left_groups[:10]:
        print(f"  {g} (its launcher worked in {watch.folders.get(launcher(g), '?')})")
    print(f"honest grades as expected: {n - len(hostile) - len(wrong)} of {n - len(hostile)}")
    for s, v, got in wrong:
        print(f"  {s} ({v.variant}): expected {v.expect:g}, got {got}")
    print(f"hostile or broken graded as tests/hostile_cases.py expects (information): "
          f"{len(judged) - len(odd)} of {len(judged)}")
    for s, v, got in odd:
        print(f"  {s} ({v.variant}): expected {v.expect:g}, got {got}")
    failed = rc != 0 or alive or left_files or left_groups or wrong
    if args.keep or failed:
        print(f"kept {work} (grade's output in grade.log)")
    else:
        shutil.rmtree(work, ignore_errors=True)
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

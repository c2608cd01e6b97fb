"""Faults lose nothing (issue P): interrupted and failing runs keep every grade and leave no process behind.

Each test injects one fault into a real ``grade`` of a small class of notebook 01
(honest, mistaken and untouched notebooks, graded with ``--jobs 2``), then asserts
that every other student's grade is exactly what a clean run gives, and that no
process the grader started (workers, kernel launchers, kernels and what they
started) outlives it:

- Ctrl-C (SIGINT) and SIGTERM in the middle: what was graded is kept and
  written; run again, ``grade`` completes the class without regrading it;
- the grading process killed outright (SIGKILL): nothing it started lives on,
  its scratch folder is removed by the next run, which completes the class;
- a grading worker killed in the middle of a notebook: the notebook is graded
  again on a fresh worker;
- a kernel killed in the middle of a notebook: only that student is affected;
- an assignment whose release fails: its notebooks are flagged as the grader's
  fault, every other assignment grades normally;
- no space left in the grader's scratch folder;
- ``check`` interrupted (Ctrl-C, SIGTERM) or killed in the middle of a notebook: nothing it started lives on.
"""
import csv
import fcntl
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from autograder import course, grading
from autograder.settings import Limits
from autograder.runner import grade_many
from autograder.sandbox import UID_BASE
from tests.hostile_cases import AID, FULL, SOL, WRONG_SOFTMAX
from autograder.report import needs_review
from tests.test_hostile import per_exercise
from tests.processes import Watch, as_in_a_terminal, command, descendants, kernels_below
from tests.processes import name as process_name
from tests.submissions import make_submission

SLOW = "import time\ntime.sleep({})\n"
CLASS = ["ann", "ben", "cat", "dan", "eve", "fay"]


def make_class(folder: Path, slow: dict | None = None) -> Path:
    """Six students: full marks, one mistake, untouched; ``slow`` adds a sleep (seconds) to a student's answer."""
    slow = slow or {}
    for k, name in enumerate(CLASS):
        replace = {"softmax": WRONG_SOFTMAX} if k % 3 == 1 else {}
        if name in slow:
            replace["softmax"] = replace.get("softmax", SOL["softmax"]) + SLOW.format(slow[name])
        make_submission(AID, folder / name / AID / f"{AID}.ipynb", replace, solve=k % 3 != 2)
    return folder


def start(sub: Path, out: Path, *more) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "autograder", "grade", str(sub), "--out", str(out), "--jobs", "2",
                             *more], cwd=course.ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=as_in_a_terminal)


def grades(out: Path) -> dict:
    with open(out / "grades.csv") as f:
        return {row["student_id"]: (row["score"], row["max_score"], row["needs_review"]) for row in csv.DictReader(f)}


def recorded(out: Path) -> int:
    try:
        return len((out / "results.jsonl").read_text().splitlines())
    except FileNotFoundError:
        return 0


def wait_for(what, timeout=240, every=0.2):
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(every)


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """The grades of a clean run, to compare every faulty run with."""
    tmp = tmp_path_factory.mktemp("clean")
    sub = make_class(tmp / "submitted")
    proc = start(sub, tmp / "out")
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, out + err
    found = grades(tmp / "out")
    assert found["ann"][0] == "11" and found["ben"][0] == "8" and found["cat"][0] == "0", found
    return found


def _interrupted(tmp, how):
    # dan's answer is right but takes 15 s more: the class is still being graded when the signal comes, however
    # slowly this machine gets to sending it. Then dan resubmits it without the wait (the run was stopped before
    # his notebook was graded), so that the rerun does not wait for it again.
    sub = make_class(tmp / "submitted", slow={"dan": 15})
    out = tmp / "out"
    proc = start(sub, out)
    watch = Watch(proc.pid)
    wait_for(lambda: recorded(out) >= 2 or proc.poll() is not None)
    proc.send_signal(how)
    stdout, stderr = proc.communicate(timeout=120)
    watch.stop()
    assert '"student": "dan"' not in (out / "results.jsonl").read_text(), "dan was graded before the signal came"
    make_class(sub)
    return sub, out, proc, stdout + stderr, watch


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_class_keeps_its_grades_and_a_rerun_completes_it(tmp_path, clean, how):
    sub, out, proc, said, watch = _interrupted(tmp_path, how)
    assert proc.returncode == 130, said
    assert watch.alive() == [], "processes outlived the interrupted grade"
    kept = recorded(out)
    assert 2 <= kept < len(CLASS), said
    partial = grades(out)
    assert len(partial) == kept and all(clean[s] == g for s, g in partial.items()), (partial, clean)
    assert "INCOMPLETE" in (out / "report.txt").read_text()
    assert "run the same command again" in said

    again = start(sub, out)
    stdout, stderr = again.communicate(timeout=600)
    assert again.returncode == 0, stdout + stderr
    assert f"kept {kept} notebook(s)" in stderr and f"grading {len(CLASS) - kept}" in stderr, stderr
    assert grades(out) == clean
    assert "INCOMPLETE" not in (out / "report.txt").read_text()


def _our_folders(before: set) -> list:
    return sorted(set(Path(tempfile.gettempdir()).glob(grading.PREFIX + "*")) - before)


def _abandoned(folder: Path) -> bool:
    """A run's scratch folder whose run is gone (its lock is free)."""
    try:
        fd = os.open(folder / grading.LOCK, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def test_a_killed_grader_leaves_no_process_and_the_next_run_cleans_up_and_completes(tmp_path, clean):
    before = set(Path(tempfile.gettempdir()).glob(grading.PREFIX + "*"))
    sub, out, proc, said, watch = _interrupted(tmp_path, signal.SIGKILL)
    assert watch.alive(grace=10) == [], "processes outlived the killed grader"
    # the killed run's folder is left, unlocked (other tests running beside this one may leave theirs too)
    killed = [f for f in _our_folders(before) if _abandoned(f)]
    assert killed, "the killed run's folder should be left, unlocked"
    kept = recorded(out)
    again = start(sub, out)
    stdout, stderr = again.communicate(timeout=600)
    assert again.returncode == 0, stdout + stderr
    assert f"kept {kept} notebook(s)" in stderr, stderr
    assert grades(out) == clean
    assert not [f for f in killed if f.exists()], "the next run did not clean up"


def _kernels(root: int) -> list:
    return [pid for pid, _ in descendants(root)
            if "ipykernel_launcher" in command(pid) or process_name(pid) == "grader-kernel"]  # exec'd, or forked


def _workers(root: int) -> list:
    """The grading workers below ``root``: started, or forked from the run's template (autograder.worker)."""
    return [pid for pid, _ in descendants(root)
            if "autograder.worker" in command(pid) and process_name(pid) != "grader-template"]


class Ages:
    """How long each kernel below ``root`` has been seen running."""

    def __init__(self, root: int):
        self.root, self.born = root, {}

    def older_than(self, seconds: float):
        for k in _kernels(self.root):
            self.born.setdefault(k, time.monotonic())
            if time.monotonic() - self.born[k] > seconds:
                return k
        return None


def test_a_worker_killed_mid_notebook_is_replaced_and_the_notebook_graded_again(tmp_path, clean):
    sub = make_class(tmp_path / "submitted", slow={"ann": 8})
    out = tmp_path / "out"
    proc = start(sub, out)
    watch, ages = Watch(proc.pid), Ages(proc.pid)
    wait_for(lambda: ages.older_than(4) or proc.poll() is not None)
    kernel = ages.older_than(4)
    assert kernel, "no kernel was running when expected"
    [worker] = [w for w in _workers(proc.pid) if kernel in kernels_below(w)]
    os.kill(worker, signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=600)
    watch.stop()
    assert proc.returncode == 0, stdout + stderr
    assert grades(out) == clean
    assert watch.alive() == []


def test_a_kernel_killed_mid_notebook_costs_only_its_student(tmp_path, clean):
    sub = make_class(tmp_path / "submitted", slow={"dan": 40})
    out = tmp_path / "out"
    proc = start(sub, out)
    watch, ages = Watch(proc.pid), Ages(proc.pid)
    wait_for(lambda: ages.older_than(15) or proc.poll() is not None)  # the others take seconds: this is dan's
    victim = ages.older_than(15)
    assert victim, "no kernel was running when expected"
    if os.geteuid() == 0:
        assert os.stat(f"/proc/{victim}").st_uid >= UID_BASE, "not a kernel's uid"
    os.kill(victim, signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=600)
    watch.stop()
    assert proc.returncode == 0, stdout + stderr
    found = grades(out)
    assert {s: g for s, g in found.items() if s != "dan"} == {s: g for s, g in clean.items() if s != "dan"}
    assert found["dan"][2] == "yes", "a kernel that died must be reviewed"
    assert watch.alive() == []


def test_an_assignment_that_fails_to_release_fails_only_its_own_notebooks(tmp_path, monkeypatch):
    other = "03_feed_forward"
    real = grading.make_course

    def broken(root, assignments, limits=None):
        folder = real(root, assignments, limits)
        (folder / "solutions" / other / f"{other}.ipynb").write_text("{ not a notebook")
        return folder
    monkeypatch.setattr(grading, "make_course", broken)
    make_submission(AID, tmp_path / "a.ipynb")
    make_submission(other, tmp_path / "b.ipynb")
    ok, failed = grade_many([("ann", AID, tmp_path / "a.ipynb"), ("ben", other, tmp_path / "b.ipynb")], jobs=1,
                            limits=Limits(cell_timeout=60, notebook_timeout=300))
    assert per_exercise(ok) == FULL and not ok.fault, (ok.error, ok.notes)
    assert failed.fault.startswith("release failed"), failed
    assert failed.auto_max > 0 and failed.auto_score == 0, "a notebook not graded still counts its points"
    assert other in failed.error and "not graded" in failed.error


def test_no_space_in_the_scratch_folder_is_the_graders_fault_not_the_students(tmp_path, monkeypatch):
    """The scratch folder fills up while notebooks are graded (here: a 3 MiB file system): the notebooks it
    costs are reported as the grader's fault (flagged, graded again by the next run), never as 0 points."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(small)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        monkeypatch.setenv("TMPDIR", str(small))
        monkeypatch.setattr(tempfile, "tempdir", None)
        make_submission(AID, tmp_path / "a.ipynb")
        stuffing = small / "stuffing"

        def fill(*_):  # once the run is set up, leave almost nothing
            free = os.statvfs(small).f_bavail * os.statvfs(small).f_frsize
            with open(stuffing, "wb") as f:
                f.write(b"\0" * max(0, free - 16 * 1024))
        real = grading.Run.process
        monkeypatch.setattr(grading.Run, "process", lambda self, w: (fill(), real(self, w))[1])
        [r] = grade_many([("ann", AID, tmp_path / "a.ipynb")], jobs=1, limits=Limits(notebook_timeout=300))
        assert r.fault, (r.error, r.notes)
        assert r.auto_max > 0 and r.auto_score == 0
    finally:
        subprocess.run(["umount", "-l", str(small)])


def test_a_worker_that_does_not_start_is_the_graders_fault(tmp_path, monkeypatch):
    """Not "0 out of 0" and not the submission's fault: every cell at 0 of its points, flagged, the cause named,
    and each failed worker stopped (it may be running still, only not ready)."""
    started = []

    class Mute(grading.Worker):
        """Starts, but never says it is ready."""
        def wait_ready(self, timeout=300):
            self._answer(timeout)
            self.ready = False
            started.append(self)
    monkeypatch.setattr(grading, "Worker", Mute)
    make_submission(AID, tmp_path / "a.ipynb")
    [r] = grade_many([("ann", AID, tmp_path / "a.ipynb")], jobs=1)
    assert r.fault == "the grading process did not start, twice", r.fault
    assert r.auto_max == sum(FULL.values()) and r.auto_score == 0
    assert needs_review(r)
    assert len(started) == 2 and all(w.proc.poll() is not None for w in started), "a worker was left running"


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["ctrl-c", "sigterm", "sigkill"])
def test_check_stopped_mid_notebook_leaves_no_process(tmp_path, how):
    """A student's ``check`` stopped while its kernel runs their code: Ctrl-C and SIGTERM end it with 130 and a
    line saying so (no traceback), SIGKILL at once; in every case its worker, launcher and kernel are gone."""
    path = make_submission(AID, tmp_path / f"{AID}.ipynb", {"softmax": SOL["softmax"] + SLOW.format(120)})
    proc = subprocess.Popen([sys.executable, "-m", "autograder", "check", str(path)], cwd=course.ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=as_in_a_terminal)
    watch, ages = Watch(proc.pid), Ages(proc.pid)
    wait_for(lambda: ages.older_than(3) or proc.poll() is not None)
    assert ages.older_than(3), "no kernel was running when expected"
    proc.send_signal(how)
    stdout, stderr = proc.communicate(timeout=120)
    watch.stop()
    assert watch.alive(grace=10) == [], "processes outlived the stopped check"
    if how != signal.SIGKILL:
        assert proc.returncode == 130 and "interrupted" in stderr and "Traceback" not in stderr, stdout + stderr

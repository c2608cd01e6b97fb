"""Grading on a real Dask cluster on this machine: a ``dask scheduler`` and two ``dask worker`` processes.

A mixed class (honest students, catalogued mistakes, hostile and broken
notebooks) is graded with ``grade --cluster`` and must get exactly the
grades.csv, report and feedback of ``grade --jobs 2``; then again while one
worker is killed in the middle of a notebook; a worker that holds another
version of the course is refused by name.
"""
import csv
import os
import re
import signal
import shutil
import subprocess
import sys
import time

import pytest

from autograder import cluster, course
from tests.hostile_cases import HOSTILE, MALFORMED, SOL
from tests.mistakes.self_attention import ALTERNATIVES, MISTAKES
from tests.submissions import make_submission

pytest.importorskip("distributed")
from tests.local_cluster import Cluster, dask_env  # noqa: E402
AID = "01_self_attention"


@pytest.fixture(scope="module")
def local_cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        c.add_worker("w0")
        c.add_worker("w1")
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    """A mixed class of notebook 01: honest, mistaken, hostile, broken."""
    sub = tmp_path_factory.mktemp("class") / "submitted"
    make_submission(AID, sub / "alice" / AID / f"{AID}.ipynb")
    make_submission(AID, sub / "bob" / AID / f"{AID}.ipynb", solve=False)
    for name, item in [("carol", MISTAKES[0]), ("erin", MISTAKES[5])]:
        make_submission(AID, sub / name / AID / f"{AID}.ipynb", {item.cell: item.code})
    make_submission(AID, sub / "frank" / AID / f"{AID}.ipynb", {ALTERNATIVES[0].cell: ALTERNATIVES[0].code})
    hostile = {"os._exit in an answer cell": "grace", "kernel crash (segfault)": "heidi",
               "invalid JSON (a truncated file)": "ivan"}
    for case in HOSTILE + MALFORMED:
        if case.name in hostile:
            path = sub / hostile[case.name] / AID / f"{AID}.ipynb"
            path.parent.mkdir(parents=True)
            case.write(path)
    assert len(list(sub.iterdir())) == 8
    return sub


def grade(sub, out, *how):
    proc = subprocess.run([sys.executable, "-m", "autograder", "grade", str(sub), "--out", str(out), *how],
                          cwd=course.ROOT, capture_output=True, text=True, env=dask_env(), timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def outputs(out):
    """Everything grading wrote that must not depend on where it ran."""
    found = {"grades.csv": (out / "grades.csv").read_text(), "summary.txt": (out / "summary.txt").read_text()}
    report = (out / "report.txt").read_text()
    found["report.txt"] = report
    for page in sorted((out / "feedback").rglob("*.html")):
        # a page's head: points and messages per exercise (below it, the notebook's own outputs, timings and all)
        head = re.search(r"<h1>Feedback.*?</pre>", page.read_text(), re.DOTALL)
        found[str(page.relative_to(out))] = head and head.group(0)
    found["autograded"] = sorted(str(p.relative_to(out)) for p in (out / "autograded").rglob("*.ipynb"))
    return found


@pytest.fixture(scope="module")
def on_one_machine(klass, tmp_path_factory):
    out = tmp_path_factory.mktemp("jobs") / "out"
    grade(klass, out, "--jobs", "2")
    return outputs(out)


def test_cluster_grades_exactly_like_jobs(local_cluster, klass, on_one_machine, tmp_path):
    out = tmp_path / "out"
    proc = grade(klass, out, "--cluster", local_cluster.address)
    assert "2 worker(s) hold this course" in proc.stderr and "retried 1 time(s)" in proc.stderr, proc.stderr
    found = outputs(out)
    rows = {r["student_id"]: r for r in csv.DictReader(open(out / "grades.csv"))}
    assert (rows["alice"]["autograded"], rows["frank"]["autograded"], rows["bob"]["autograded"]) == ("11", "11", "0")
    assert float(rows["carol"]["autograded"]) < 11 and float(rows["erin"]["autograded"]) < 11
    assert rows["ivan"]["needs_review"] == "yes"
    for name in on_one_machine:
        assert found[name] == on_one_machine[name], f"{name} differs between --cluster and --jobs 2"


def test_a_worker_killed_mid_notebook_loses_nothing(local_cluster, klass, on_one_machine, tmp_path):
    out = tmp_path / "out"
    grading = subprocess.Popen([sys.executable, "-m", "autograder", "grade", str(klass), "--out", str(out),
                                "--cluster", local_cluster.address], cwd=course.ROOT, env=dask_env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        local_cluster.kill(_busy_with(local_cluster))  # a worker two seconds into a notebook
        stdout, stderr = grading.communicate(timeout=900)
    finally:
        if grading.poll() is None:
            grading.kill()
    assert grading.returncode == 0, stdout + stderr
    assert len(local_cluster.names()) == 1
    assert "left the cluster; a notebook it was grading goes to another worker" in stderr, stderr
    found = outputs(out)
    for name in on_one_machine:
        assert found[name] == on_one_machine[name], f"{name} differs after a worker died mid-run"


def _executing(dask_worker):
    return [str(key) for key, ts in dask_worker.state.tasks.items() if ts.state == "executing"]


def _busy_with(c, index=None):
    """The name of the worker that has been running submission ``index`` (any, by default) for two seconds:
    its kernel is running the student's code. (The scheduler's ``processing`` also lists tasks a worker
    holds while its thread is busy with another.)"""
    deadline, since = time.monotonic() + 300, {}
    while time.monotonic() < deadline:
        for address, keys in c.client.run(_executing, on_error="return").items():
            if isinstance(keys, list) and any(index is None or key.endswith(f"-{index}") for key in keys):
                since.setdefault(address, time.monotonic())
                if time.monotonic() - since[address] > 2:
                    return {a: n for n, a in c.names().items()}[address]
        time.sleep(0.2)
    raise AssertionError(f"no worker ran submission {index}")


def test_a_notebook_whose_worker_dies_twice_is_reported(tmp_path):
    """Retried once on another worker, then reported as not graded; the rest of the class is graded."""
    c = Cluster(tmp_path / "cluster")
    try:
        c.add_worker("w0")
        c.add_worker("w1")
        sub = tmp_path / "submitted"
        make_submission(AID, sub / "alice" / AID / f"{AID}.ipynb")
        # bob's answer takes a minute: each attempt is still running when the test, polling the workers (slowly on
        # a busy machine, and more slowly while the scheduler still lists the dead one), looks for it
        make_submission(AID, sub / "bob" / AID / f"{AID}.ipynb", {"softmax": SOL["softmax"] + "\nimport time\n"
                                                                                "time.sleep(60)\n"})
        out = tmp_path / "out"
        grading = subprocess.Popen([sys.executable, "-m", "autograder", "grade", str(sub), "--out", str(out),
                                    "--cluster", c.address], cwd=course.ROOT, env=dask_env(),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            c.kill(_busy_with(c, 1))  # bob's notebook, on its first worker ...
            c.kill(_busy_with(c, 1))  # ... and on the worker it was given next
            stdout, stderr = grading.communicate(timeout=300)
        finally:
            if grading.poll() is None:
                grading.kill()
        assert grading.returncode == 0, stdout + stderr
        rows = {r["student_id"]: r for r in csv.DictReader(open(out / "grades.csv"))}
        assert (rows["alice"]["autograded"], rows["bob"]["autograded"]) == ("11", "0")
        report = (out / "report.txt").read_text()
        assert "bob 01_self_attention: the grading worker died each time it graded this notebook (2 attempt(s))" \
            in report, report
        assert rows["bob"]["needs_review"] == "yes"
    finally:
        c.close()


def test_a_scheduler_lost_mid_run_keeps_what_was_graded_and_a_resumed_run_completes(tmp_path):
    """The scheduler dies while the class is graded: every notebook graded before is kept, those in flight are
    reported by name as not graded (the grader's fault), and the same command on a new cluster grades only
    those."""
    sub = tmp_path / "submitted"
    students = ["alice", "bob", "carol", "dave", "erin", "fred"]
    for k, student in enumerate(students):
        make_submission(AID, sub / student / AID / f"{AID}.ipynb", solve=k % 2 == 0)
    out = tmp_path / "out"
    c = Cluster(tmp_path / "cluster")
    try:
        c.add_worker("w0")
        grading = subprocess.Popen([sys.executable, "-m", "autograder", "grade", str(sub), "--out", str(out),
                                    "--cluster", c.address], cwd=course.ROOT, env=dask_env(),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 300
            while not (out / "results.jsonl").is_file() or not (out / "results.jsonl").read_text().count("\n") >= 2:
                assert time.monotonic() < deadline and grading.poll() is None, "no result arrived"
                time.sleep(0.2)
            os.killpg(c.scheduler.pid, signal.SIGKILL)
            stdout, stderr = grading.communicate(timeout=300)
        finally:
            if grading.poll() is None:
                grading.kill()
    finally:
        c.close()
    assert grading.returncode == 0, stdout + stderr
    rows = {r["student_id"]: r for r in csv.DictReader(open(out / "grades.csv"))}
    graded = {s for s, r in rows.items() if not r["needs_review"]}
    lost = set(students) - graded
    assert len(graded) >= 2 and lost, (rows, stderr)
    assert "lost the Dask scheduler" in stderr or "cancelled" in (out / "report.txt").read_text(), stderr
    for s in graded:
        assert rows[s]["autograded"] == ("11" if students.index(s) % 2 == 0 else "0"), rows[s]

    c = Cluster(tmp_path / "again")
    try:
        c.add_worker("w0")
        proc = grade(sub, out, "--cluster", c.address)
    finally:
        c.close()
    assert f"kept {len(graded)} notebook(s)" in proc.stderr and f"grading {len(lost)}" in proc.stderr, proc.stderr
    rows = {r["student_id"]: r for r in csv.DictReader(open(out / "grades.csv"))}
    assert {s: r["autograded"] for s, r in rows.items()} == {s: "11" if k % 2 == 0 else "0"
                                                            for k, s in enumerate(students)}
    assert not any(r["needs_review"] for r in rows.values()), rows


def test_a_worker_of_another_course_version_is_refused(local_cluster, klass, tmp_path):
    """A worker on a checkout where one judge differs is named and given nothing; grading goes on without it."""
    other = tmp_path / "other"
    for folder in ("lib", "autograder", "solutions", "notebooks"):
        shutil.copytree(course.ROOT / folder, other / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(course.ROOT / "nbgrader_config.py", other)
    judge = other / "autograder" / "checks" / "self_attention" / "softmax.py"
    judge.write_text(judge.read_text() + "\n# changed\n")
    local_cluster.add_worker("stale", cwd=other, env=dask_env(PYTHONPATH=str(other)))
    stale = local_cluster.names()["stale"]
    assert local_cluster.client.run(lambda: __import__("autograder").__file__, workers=[stale])[stale] \
        == str(other / "autograder" / "__init__.py")
    sub = tmp_path / "submitted"
    make_submission(AID, sub / "alice" / AID / f"{AID}.ipynb")
    out = tmp_path / "out"
    proc = grade(sub, out, "--cluster", local_cluster.address)
    assert f"refusing worker {stale}: it holds another version of the course: 1 course file(s) differ: " \
           f"autograder/checks/self_attention/softmax.py" in proc.stderr, proc.stderr
    rows = {r["student_id"]: r for r in csv.DictReader(open(out / "grades.csv"))}
    assert rows["alice"]["autograded"] == "11"
    assert local_cluster.client.run(lambda dask_worker: dict(dask_worker.state.total_resources),
                                     workers=[stale])[stale] == {}
    local_cluster.kill("stale")


def test_a_worker_that_cannot_isolate_kernels_is_refused(local_cluster, tmp_path):
    """A worker whose kernels would get per-process limits only (no namespaces) is named and given nothing,
    as `grade` refuses such a machine; grading goes on with the others."""
    local_cluster.add_worker("open", env=dask_env(AUTOGRADER_NO_NAMESPACES="1"))
    name = local_cluster.names()["open"]
    sub = tmp_path / "submitted"
    make_submission(AID, sub / "alice" / AID / f"{AID}.ipynb")
    out = tmp_path / "out"
    proc = grade(sub, out, "--cluster", local_cluster.address)
    assert f"refusing worker {name}: its kernels cannot be isolated: namespaces switched off" in proc.stderr, \
        proc.stderr
    rows = {r["student_id"]: r for r in csv.DictReader(open(out / "grades.csv"))}
    assert rows["alice"]["autograded"] == "11"
    assert local_cluster.client.run(lambda dask_worker: dict(dask_worker.state.total_resources),
                                     workers=[name])[name] == {}
    local_cluster.kill("open")


def test_check_a_folder_on_the_cluster(local_cluster, tmp_path):
    make_submission(AID, tmp_path / "mine" / AID / f"{AID}.ipynb")
    proc = subprocess.run([sys.executable, "-m", "autograder", "check", str(tmp_path / "mine"), "--cluster",
                           local_cluster.address], cwd=course.ROOT, capture_output=True, text=True, env=dask_env(),
                          timeout=600)
    assert proc.returncode == 0 and "11 / 11   done" in proc.stdout, proc.stdout + proc.stderr


def test_fingerprint_differences_in_words():
    ours = cluster.fingerprint()
    theirs = tuple((k, "0" if k == "lib/self_attention.py" else ("2.0.0" if k == "torch" else v)) for k, v in ours)
    said = cluster.differences(ours, theirs)
    assert said.startswith("torch 2.0.0 (here ") and said.endswith("1 course file(s) differ: lib/self_attention.py")
    assert cluster.differences(ours, ours) == ""


def test_no_scheduler_is_a_clear_error(tmp_path):
    sub = tmp_path / "submitted"
    make_submission(AID, sub / "alice" / AID / f"{AID}.ipynb", solve=False)
    proc = subprocess.run([sys.executable, "-m", "autograder", "grade", str(sub), "--out", str(tmp_path / "out"),
                           "--cluster", "tcp://127.0.0.1:9"], cwd=course.ROOT, capture_output=True, text=True,
                          env=dask_env(DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="3s"), timeout=120)
    assert proc.returncode == 2 and "no Dask scheduler answers at tcp://127.0.0.1:9" in proc.stderr, proc.stderr

"""The smaller faults of issue P, each on its own, without a kernel: a feedback page that cannot be rendered,
a course folder that cannot be set up, half-written lines in results.jsonl, and the pools of grading
processes a Dask worker keeps (two runs on one multi-threaded worker, pools left idle); and a timed judge
that a busy machine's stall must not fail.

tests/test_faults.py injects the larger faults into real class runs.
"""
import csv
import json
import shutil
import tempfile
import threading
import time
import types
import uuid
from pathlib import Path

import distributed
import pytest

from autograder import __main__ as cli, cluster, grading
from autograder.grading import zero_result
from autograder.settings import Limits
from autograder.results import NotebookResult, Store

AID = "01_self_attention"


def test_a_feedback_page_that_cannot_be_rendered_costs_nobody_else_theirs(tmp_path, monkeypatch, capsys):
    results = [zero_result(s, AID, f"{AID}.ipynb", "no notebook submitted") for s in ("ann", "ben", "cat")]
    real = cli.write_feedback

    def write_feedback(r, *args, **kwargs):
        if r.student == "ben":
            raise RecursionError("a notebook nested too deep to render")
        return real(r, *args, **kwargs)
    monkeypatch.setattr(cli, "write_feedback", write_feedback)
    cli.write_outputs(results, tmp_path)
    pages = sorted(p.parent.name for p in (tmp_path / "feedback").glob(f"*/{AID}.html"))
    assert pages == ["ann", "cat"], pages  # ben's broke; cat's, after it, is written all the same
    with open(tmp_path / "grades.csv") as f:
        assert [row["student_id"] for row in csv.DictReader(f)] == ["ann", "ben", "cat"]
    report = (tmp_path / "report.txt").read_text()
    assert "its feedback page could not be written (RecursionError: a notebook nested too deep" in report, report
    assert "feedback for ben 01_self_attention could not be written" in capsys.readouterr().err


@pytest.fixture
def own_tmp(tmp_path, monkeypatch):
    """A temporary folder of this test's own, as the grader's scratch base (other tests run beside it)."""
    base = tmp_path / "tmp"
    base.mkdir()
    monkeypatch.setenv("TMPDIR", str(base))
    monkeypatch.setattr(tempfile, "tempdir", None)
    return base


def test_a_run_whose_course_folder_cannot_be_set_up_leaves_nothing(own_tmp, monkeypatch):
    def make_course(root, assignments, limits=None):
        Path(root).mkdir(parents=True)
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(grading, "make_course", make_course)
    with pytest.raises(OSError, match="No space left"):
        grading.Run([AID], 2, Limits())
    assert list(own_tmp.iterdir()) == []


def _result(student: str, score: float) -> NotebookResult:
    r = zero_result(student, AID, f"{AID}.ipynb", "")
    r.cells[0].score = score
    return r


def test_the_store_skips_a_half_written_line_and_keeps_the_latest_result(tmp_path):
    store = Store(tmp_path / "results.jsonl")
    store.add(_result("ann", 0), "k1")
    store.add(_result("ben", 1), "k2")
    with open(store.path, "ab") as f:  # a run killed while it wrote cat's line
        f.write(json.dumps({"key": "k3", "result": {"student": "cat"}}).encode()[:30])
    store.add(_result("ann", 2), "k4")  # the next run: ann graded again, on a line of its own
    found = Store(store.path).load()
    assert sorted(found) == [("ann", AID), ("ben", AID)]
    assert (found[("ann", AID)][0], found[("ann", AID)][1].cells[0].score) == ("k4", 2)
    assert found[("ben", AID)][0] == "k2"
    assert len(store.path.read_bytes().splitlines()) == 4


# ---- the pools of grading processes a Dask worker keeps (autograder/cluster.py) ----

class FakeRun:
    """Stands for grading.Run in a pool: its course folders, whether it was closed, and an honest check that
    no two tasks grade in one folder at once and that no task grades in a closed run."""
    busy, problems, made = set(), [], []

    def __init__(self, assignments, jobs, limits, hide=(), threads=None):
        self.dir = Path(tempfile.mkdtemp(prefix="fake-run-"))
        self.workers = [self.dir / f"w{k}" for k in range(jobs)]
        self.closed = False
        FakeRun.made.append(self)

    def grade(self, worker, student, assignment, path, hide=()):
        if self.closed:
            FakeRun.problems.append(f"{student} graded in a closed run")
        if worker in FakeRun.busy:
            FakeRun.problems.append(f"{student} graded in a folder in use")
        FakeRun.busy.add(worker)
        time.sleep(0.05)
        FakeRun.busy.discard(worker)
        if self.closed:
            FakeRun.problems.append(f"{student}'s run was closed while it graded")
        return zero_result(student, assignment, path, ""), None

    def close(self):
        self.closed = True
        shutil.rmtree(self.dir, ignore_errors=True)


class SlowQueue(cluster.queue.Queue):
    """Hands out a free folder a little slowly: wide enough a window for another task to slip in."""

    def get(self, *args, **kwargs):
        time.sleep(0.1)
        return super().get(*args, **kwargs)


@pytest.fixture
def worker_pools(monkeypatch, tmp_path):
    """A worker of two threads, with fake grading runs."""
    FakeRun.busy, FakeRun.problems, FakeRun.made = set(), [], []
    monkeypatch.setattr(cluster, "Run", FakeRun)
    monkeypatch.setattr(cluster, "_pools", {})
    monkeypatch.setattr(cluster.queue, "Queue", SlowQueue)
    monkeypatch.setattr(cluster, "fingerprint", lambda: ())
    monkeypatch.setattr(cluster, "version", lambda prints: "v")
    monkeypatch.setattr(distributed, "get_worker", lambda: types.SimpleNamespace(state=types.SimpleNamespace(nthreads=2)))

    def task(student, limits):
        return cluster.grade_task("v", [AID], limits, [], student, AID, f"{AID}.ipynb", b"{}")
    yield task
    cluster._close_pools()


def test_two_runs_on_one_worker_never_close_each_others_pool_in_use(worker_pools):
    """Two grading runs (other limits) share a worker of two threads: a task of one run must not find the other
    run's pool idle, and close it, while a task of that run is about to grade in it."""
    a, b = Limits(notebook_timeout=100), Limits(notebook_timeout=200)
    for round_ in range(3):
        threads = [threading.Thread(target=worker_pools, args=(f"a{round_}", a)),
                   threading.Thread(target=worker_pools, args=(f"b{round_}", b))]
        threads[0].start()
        time.sleep(0.02)  # a's task has found its pool and waits for a folder
        threads[1].start()
        for t in threads:
            t.join(10)
    assert FakeRun.problems == [], FakeRun.problems


def test_many_tasks_of_two_runs_share_a_worker_safely(worker_pools):
    limits = [Limits(notebook_timeout=100), Limits(notebook_timeout=200)]
    slots = threading.Semaphore(2)  # the worker's two threads

    def one(k):
        with slots:
            worker_pools(f"s{k}", limits[k % 3 % 2])
    threads = [threading.Thread(target=one, args=(k,)) for k in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert FakeRun.problems == [], FakeRun.problems


def test_a_pool_left_idle_is_closed(worker_pools, monkeypatch):
    """Its grading processes hold memory: closed once idle for IDLE seconds, not only when the worker exits."""
    monkeypatch.setattr(cluster, "IDLE", 0.3)
    worker_pools("ann", Limits())
    [run] = FakeRun.made
    deadline = time.monotonic() + 10
    while not run.closed and time.monotonic() < deadline:
        time.sleep(0.1)
    assert run.closed and cluster._pools == {}


# ---- a timed judge on a busy machine (autograder/checks/bpe/train_bpe.py) ----

@pytest.mark.parametrize("seconds, passes, runs", [
    ([4.0, 0.2], True, 2),  # one run slowed (a busy machine): the next one counts
    ([4.0, 4.0, 4.0], False, 3),  # slow every time: the fastest of three is over the limit
    ([40.0], False, 1),  # far over the limit: not run again
])
def test_the_speed_judge_times_again_before_it_fails(monkeypatch, seconds, passes, runs):
    from lib import bpe
    from autograder.checks.bpe import train_bpe as judges
    corpus = judges.zipf_corpus(judges.random.Random(75), 2000, 250)
    merges = bpe.train_bpe(corpus, 200)
    calls = []

    def train(k, corpus, n, what, hint="", timed=False):
        calls.append(timed)
        return types.SimpleNamespace(value=merges, seconds=99.0, cpu=seconds[len(calls) - 1])
    monkeypatch.setattr(judges, "_train", train)
    monkeypatch.setattr(judges, "no_tokenizers", lambda k, name: None)
    monkeypatch.setattr(judges, "_reference", lambda corpus, n: merges)  # the reference is timed: limit 3 s
    if passes:
        judges.train_bpe_speed(None)
    else:
        with pytest.raises(AssertionError, match="took 4.0 s \\(the fastest of 3 runs\\)" if runs == 3 else "took 40.0 s"):
            judges.train_bpe_speed(None)
    assert calls == [True] * runs  # timed by the kernel's processor time, not the wall clock (99 s here)


def test_the_kernels_processor_time_is_read_from_proc_for_its_whole_tree():
    """``proctree.cpu``: what a process and the processes below it spent, a grandchild's work included, while
    processes that only wait add nothing. The grandchild says when it is ready, works 0.6 s of processor time
    when told to, says so, then waits: no wall-clock guess, so a busy machine changes nothing."""
    import subprocess
    import sys

    from autograder.proctree import cpu as tree_cpu
    spin = ("import sys, time\nprint('ready', flush=True)\nsys.stdin.readline()\n"
            "end = time.process_time() + 0.6\nwhile time.process_time() < end: pass\n"
            "print('done', flush=True)\ntime.sleep(60)")
    waiter = subprocess.Popen([sys.executable, "-c", f"import subprocess, sys, time\n"
                               f"subprocess.Popen([sys.executable, '-c', {spin!r}])\ntime.sleep(60)"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert waiter.stdout.readline() == "ready\n"
        first = tree_cpu(waiter.pid)
        waiter.stdin.write("go\n")
        waiter.stdin.flush()
        assert waiter.stdout.readline() == "done\n"
        spent = tree_cpu(waiter.pid) - first
        assert 0.55 <= spent < 1.0, spent
        time.sleep(0.5)
        assert tree_cpu(waiter.pid) - first - spent < 0.05  # all of them wait now
    finally:
        subprocess.run(["pkill", "-KILL", "-P", str(waiter.pid)])
        waiter.kill()
        waiter.wait()
    assert tree_cpu(waiter.pid) is None

"""Grading a class: this course's grader against stock ``nbgrader autograde``.

Makes N synthetic submissions (default 30) spread over every notebook of the
course: solved notebooks, some with a mistake from the catalogue in one
answer cell. Grades them twice in one run, on the same machine:

- stock: one course folder, ``nbgrader generate_assignment`` then
  ``nbgrader autograde`` for every assignment (nbgrader grades one
  submission after another; its stock Execute step, no sandbox);
- ours: ``autograder.runner.grade_many`` with ``--jobs`` workers (default:
  the number of cores), sandboxed kernels, limits and all.

Prints both wall times and their ratio, and checks that both give every
submission the same score.

With ``--cluster``, the comparison is instead the cost of the Dask engine:
``grade --jobs 2`` against ``grade --cluster`` on a scheduler and two
single-thread workers started on this same machine (before the clock starts,
as a class's cluster would be; each worker's grading processes start inside
the timed run, as ``--jobs`` workers do). The two runs alternate, ``--rounds``
times each. It prints both times, their ratio (the bar: at most 1.15), and
the time to grade 600 students x every notebook on 64 worker cores, projected
from the measured time per notebook per worker core.

    python benchmarks/bench_grading.py [--n 30] [--jobs 2]
    python benchmarks/bench_grading.py --cluster [--n 30] [--rounds 2]
"""
import argparse
import importlib
import os
import pkgutil
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autograder import course  # noqa: E402
from autograder.runner import grade_many  # noqa: E402
from tests import mistakes  # noqa: E402
from tests.submissions import make_submission  # noqa: E402


def synthetic(n: int, folder: Path):
    """(student, assignment, path) for ``n`` submissions over all notebooks."""
    catalogue = {}
    for info in pkgutil.iter_modules(mistakes.__path__):
        module = importlib.import_module(f"tests.mistakes.{info.name}")
        catalogue[module.ASSIGNMENT] = module.MISTAKES
    aids = course.assignments()
    subs = []
    for i in range(n):
        aid = aids[i % len(aids)]
        wrong = catalogue.get(aid, [])
        replace = {}
        if i % 3 and wrong:  # two students in three make one catalogued mistake
            m = wrong[(i // len(aids)) % len(wrong)]
            replace = {m.cell: m.code}
        student = f"student{i:03d}"
        subs.append((student, aid, make_submission(aid, folder / student / aid / f"{aid}.ipynb", replace)))
    return subs


def stock(subs, root: Path) -> dict:
    """Stock nbgrader, as an instructor would run it: one course, generate, autograde each assignment."""
    for sub in ("source", "submitted"):
        (root / sub).mkdir(parents=True)
    for aid in sorted({a for _, a, _ in subs}):
        shutil.copytree(course.SOLUTIONS / aid, root / "source" / aid)
    for student, aid, path in subs:
        target = root / "submitted" / student / aid
        target.mkdir(parents=True)
        shutil.copy(path, target / f"{aid}.ipynb")
    (root / "nbgrader_config.py").write_text(
        "c = get_config()\nc.CourseDirectory.course_id = 'bench'\nc.Execute.timeout = 60\n")
    env = dict(os.environ, PATH=course.python_first())
    run = lambda *a: subprocess.run([sys.executable, "-m", "nbgrader", *a], cwd=root, env=env,  # noqa: E731
                                    capture_output=True, text=True, check=True)
    run("generate_assignment", "*", "--force")
    for aid in sorted({a for _, a, _ in subs}):
        run("autograde", aid, "--force")
    from nbgrader.api import Gradebook
    scores = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for student, aid, _ in subs:
            nb = gb.find_submission_notebook(aid, aid, student)
            scores[(student, aid)] = sum(g.auto_score for g in nb.grades if g.cell.cell_type == "code")
    return scores


def cluster_overhead(subs, rounds: int, tmp: Path) -> None:
    """--jobs 2 against a local Dask cluster of two single-thread workers, alternating."""
    from tests.local_cluster import Cluster
    times = {"jobs": [], "cluster": []}
    scores = {}
    for k in range(rounds):
        for how in ("jobs", "cluster"):
            cluster = None
            if how == "cluster":  # a fresh cluster each round: its workers start with nothing cached
                cluster = Cluster(tmp / f"cluster{k}")
                cluster.add_worker("w0")
                cluster.add_worker("w1")
            try:
                t0 = time.perf_counter()
                results = grade_many(subs, jobs=2, cluster=cluster and cluster.address)
                times[how].append(time.perf_counter() - t0)
            finally:
                if cluster is not None:
                    cluster.close()
            scores[how] = {(r.student, r.assignment): r.auto_score for r in results}
            print(f"round {k + 1}: {'--jobs 2' if how == 'jobs' else '--cluster (1 scheduler, 2 workers x 1 thread)'}"
                  f": {times[how][-1]:7.1f} s", flush=True)
    jobs, on_cluster = min(times["jobs"]), min(times["cluster"])
    print(f"best of {rounds}: --jobs 2 {jobs:.1f} s, --cluster {on_cluster:.1f} s; "
          f"ratio cluster / jobs = {on_cluster / jobs:.3f} (bar: at most 1.15) "
          f"{'PASS' if on_cluster / jobs <= 1.15 else 'FAIL'}")
    print("same autograded scores for every submission" if scores["jobs"] == scores["cluster"]
          else "scores DIFFER between --jobs and --cluster")
    per_core = on_cluster * 2 / len(subs)
    notebooks = len(course.assignments())
    class_size = 600 * notebooks
    print(f"measured: {per_core:.1f} s per notebook per worker core ({100 * per_core / 60:.0f} min per 100 notebooks "
          f"per core); 600 students x {notebooks} notebooks = {class_size} notebooks on 64 worker cores: "
          f"about {class_size * per_core / 64 / 60:.0f} min")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=30, help="submissions (default 30)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="our workers (default: cores)")
    parser.add_argument("--cluster", action="store_true", help="measure the Dask engine's cost instead")
    parser.add_argument("--rounds", type=int, default=2, help="with --cluster: runs of each (default 2)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        tmp = Path(tmp)
        subs = synthetic(args.n, tmp / "submitted")
        print(f"{len(subs)} submissions over {len({a for _, a, _ in subs})} notebooks, {os.cpu_count()} cores")
        if args.cluster:
            return cluster_overhead(subs, args.rounds, tmp)
        t0 = time.perf_counter()
        theirs = stock(subs, tmp / "stock")
        t_stock = time.perf_counter() - t0
        print(f"stock nbgrader autograde (one after another): {t_stock:7.1f} s")
        t0 = time.perf_counter()
        results = grade_many(subs, jobs=args.jobs)
        t_ours = time.perf_counter() - t0
        print(f"python -m autograder grade (--jobs {args.jobs}):        {t_ours:7.1f} s")
        print(f"ratio: ours is {t_stock / t_ours:.2f}x faster")
        ours = {(r.student, r.assignment): r.auto_score for r in results}
        differ = [k for k in theirs if abs(theirs[k] - ours[k]) > 1e-9]
        print("same autograded scores for every submission" if not differ else f"scores differ for {differ}")


if __name__ == "__main__":
    main()

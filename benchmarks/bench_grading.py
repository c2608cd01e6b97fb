"""Grading a class: this course's grader against stock ``nbgrader autograde``.

Makes N synthetic submissions (default 30) spread over every notebook of the
course: solved notebooks, some with a mistake from the catalogue in one
answer cell. Grades them twice in one run, on the same machine:

- stock: one course folder, ``nbgrader generate_assignment`` then
  ``nbgrader autograde`` for every assignment (nbgrader grades one
  submission after another; its stock Execute step, no sandbox);
- ours: ``autograder.grading.grade_many`` with ``--jobs`` workers (default:
  the number of cores), sandboxed kernels, limits and all.

Prints both wall times and their ratio, and checks that both give every
submission the same score.

    python benchmarks/bench_grading.py [--n 30] [--jobs 2]
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
from autograder.grading import grade_many  # noqa: E402
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
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=30, help="submissions (default 30)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="our workers (default: cores)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        tmp = Path(tmp)
        subs = synthetic(args.n, tmp / "submitted")
        print(f"{len(subs)} submissions over {len({a for _, a, _ in subs})} notebooks, {os.cpu_count()} cores")
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

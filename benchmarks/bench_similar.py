"""How long does ``python -m autograder similar`` take for a class of 200 submissions of notebook 01?

Writes 200 submissions into a temporary folder: each student's four answer cells are drawn (seeded) from the
30 independent solutions of tests/independent.py, cell by cell, so most pairs share little; five of the
students then hand in a copy of another's notebook with every name changed, comments added and lines moved
apart. Runs the command as an instructor would (a new process: imports included) and prints its wall time,
the pairs it reports and whether the five copies are among them.

Bar (from the issue that added it): at most 60 s on 2 cores. The exit status is 0 when the bar is met and
the five copies are found.

    .venv/bin/python benchmarks/bench_similar.py
"""
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.independent import AID, SOLUTIONS, disguise  # noqa: E402
from tests.submissions import make_submission  # noqa: E402

STUDENTS, COPIES, SECONDS_BAR = 200, 5, 60.0


def main() -> int:
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        submitted = Path(tmp) / "submitted"
        answers = {}
        for i in range(STUDENTS - COPIES):
            answers[f"s{i:03d}"] = {cell: rng.choice(SOLUTIONS)[cell] for cell in SOLUTIONS[0]}
        copied = []
        for j in range(COPIES):
            source = f"s{rng.randrange(STUDENTS - COPIES):03d}"
            answers[f"copy{j}"] = disguise(answers[source], seed=j)
            copied.append((source, f"copy{j}"))
        for student, cells in answers.items():
            make_submission(AID, submitted / student / AID / f"{AID}.ipynb", cells, solve=False)
        start = time.perf_counter()
        run = subprocess.run([sys.executable, "-m", "autograder", "similar", str(submitted), "--out",
                              str(Path(tmp) / "similarity.html")], cwd=ROOT, capture_output=True, text=True,
                             env=dict(os.environ, PYTHONPATH=str(ROOT)))
        seconds = time.perf_counter() - start
    if run.returncode != 0:
        print(run.stdout, run.stderr)
        return 1
    pairs = [tuple(sorted(m.groups())) for m in re.finditer(r"^\S+\s+(\S+)\s+(\S+)\s+\d+%$", run.stdout, re.M)]
    found = [c for c in copied if tuple(sorted(c)) in pairs]
    print(f"{STUDENTS} submissions of {AID} on {os.cpu_count()} cores: {seconds:.1f} s (bar {SECONDS_BAR:.0f} s)")
    print(f"{len(pairs)} pairs reported; the {COPIES} disguised copies found: {len(found)}")
    print(run.stdout.splitlines()[-2] if len(run.stdout.splitlines()) > 1 else run.stdout)
    return 0 if seconds <= SECONDS_BAR and len(found) == COPIES else 1


if __name__ == "__main__":
    sys.exit(main())

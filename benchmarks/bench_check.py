"""``check`` on one solved notebook: this grader against an earlier version of it, side by side.

The judges of the hidden tests run outside the student's kernel and talk to it
through requests (``autograder/probe.py``); this measures what that costs
against the grader of an earlier commit (default: the last one that ran the
hidden tests inside the kernel). The earlier version is checked out into a
temporary git worktree and run from there with the same Python; the two are
timed in turns, ``--repeat`` times each, and the medians compared.

    python benchmarks/bench_check.py [--baseline c3dc161] [--notebook 01_self_attention] [--repeat 3]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed_check(root: Path, notebook: str) -> tuple[float, str]:
    path = root / "solutions" / notebook / f"{notebook}.ipynb"
    env = dict(os.environ, PYTHONPATH=str(root), COURSE_ROOT=str(root))
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "autograder", "check", str(path)], cwd=root, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    summary = next((line.strip() for line in proc.stdout.splitlines() if "autograded:" in line), proc.stdout[-300:])
    if proc.returncode != 0:
        raise SystemExit(f"check failed in {root}:\n{proc.stdout}\n{proc.stderr}")
    return seconds, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default="c3dc161", help="the commit to compare with (default c3dc161)")
    parser.add_argument("--notebook", default="01_self_attention")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-check-") as tmp:
        old = Path(tmp) / "baseline"
        subprocess.run(["git", "worktree", "add", "--detach", str(old), args.baseline], cwd=ROOT, check=True,
                       capture_output=True)
        try:
            times = {"baseline": [], "now": []}
            for _ in range(args.repeat):
                for name, root in (("baseline", old), ("now", ROOT)):
                    seconds, summary = timed_check(root, args.notebook)
                    times[name].append(seconds)
                    print(f"{name:<9} {seconds:6.1f} s   {summary}", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT, capture_output=True)
    old_t, new_t = statistics.median(times["baseline"]), statistics.median(times["now"])
    print(f"\ncheck {args.notebook}, median of {args.repeat}: baseline ({args.baseline}) {old_t:.1f} s, "
          f"now {new_t:.1f} s, ratio now/baseline {new_t / old_t:.2f} ({os.cpu_count()} cores)")


if __name__ == "__main__":
    main()

"""How long each notebook takes, as a student runs it and as the grader checks it: the table in docs/benchmarks.md.

For every solution notebook, in one run on this machine:

- *top to bottom*: the notebook executed in a fresh kernel, as a student's
  "Run all" does (its full experiments and training);
- *check*: ``python -m autograder check`` on it, as a self-learner grades their
  work (the experiments run their short versions under the grader).

It prints a Markdown table with the machine it was measured on, ready to paste
into docs/benchmarks.md. ``--busy N`` runs N CPU-bound processes beside it, as on a
student's busy laptop.

    .venv/bin/python benchmarks/bench_notebooks.py [--busy 2] [--only 06_residual_layernorm ...]
"""
import argparse
import os
import platform
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autograder import course  # noqa: E402


@contextmanager
def busy(n: int):
    """``n`` processes that keep one core each fully busy, ended on the way out."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        if hogs:
            time.sleep(1.0)  # let them take their cores before a notebook counts the free ones
        yield
    finally:
        for p in hogs:
            p.kill()
            p.wait()


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import torch
    return f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}, PyTorch {torch.__version__}"


def top_to_bottom(aid: str) -> tuple[nbformat.NotebookNode, float]:
    """The solution notebook of ``aid`` executed in a fresh kernel, and the seconds it took."""
    path = course.source_notebook(aid)
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=1800, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    return nb, time.perf_counter() - start


def check(aid: str) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "autograder", "check", str(course.source_notebook(aid))],
                          cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    summary = next((line.split("autograded:", 1)[1].split(";")[0].strip() for line in proc.stdout.splitlines()
                    if "autograded:" in line), f"exit {proc.returncode}")
    return seconds, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--busy", type=int, default=0, help="CPU-bound processes running beside it (default 0)")
    parser.add_argument("--only", nargs="*", help="assignment ids (default: all)")
    args = parser.parse_args()
    ids = args.only or course.assignments()
    rows = []
    with busy(args.busy):
        for aid in ids:
            _, run = top_to_bottom(aid)
            seconds, summary = check(aid)
            rows.append((aid, run, seconds, summary))
            print(f"{aid}: top to bottom {run:.0f} s, check {seconds:.0f} s ({summary})", file=sys.stderr)
    load = f"with {args.busy} busy processes beside it" if args.busy else "otherwise idle"
    print(f"Measured on {machine()}, {load}, by `benchmarks/bench_notebooks.py`"
          f"{f' --busy {args.busy}' if args.busy else ''}:\n")
    print("| notebook | top to bottom | `check` | autograded score of the solution |")
    print("|---|---|---|---|")
    for aid, run, seconds, summary in rows:
        print(f"| {aid} | {run:.0f} s | {seconds:.0f} s | {summary} |")
    print(f"| all | {sum(r[1] for r in rows) / 60:.1f} min | {sum(r[2] for r in rows) / 60:.1f} min | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

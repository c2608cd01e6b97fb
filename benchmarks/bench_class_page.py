"""Does ``class.html`` name a mistake four students made four ways, with the count 4?

Grades a class of six submissions of notebook 01 as an instructor would (``python -m autograder grade``, a new
process): two students solve it, four normalise their softmax over the wrong dimension, each in their own way
(a fixed dim 0; a sum over dim 0 without keepdim; always the last dimension; exp without the max, over dim 0).
Prints the softmax rows of the class page, the wall time, and how long each notebook took.

Bar (from the issue that added the page): the page names that mistake under softmax with the count 4. The exit
status is 0 when it does.

    .venv/bin/python benchmarks/bench_class_page.py
"""
import html
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.submissions import WRONG_DIM_SOFTMAX, make_submission  # noqa: E402

AID = "01_self_attention"


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        submitted, out = Path(tmp) / "submitted", Path(tmp) / "out"
        for student in ("ada", "bo"):
            make_submission(AID, submitted / student / AID / f"{AID}.ipynb")
        for student, code in WRONG_DIM_SOFTMAX.items():
            make_submission(AID, submitted / student / AID / f"{AID}.ipynb", {"softmax": code})
        start = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "autograder", "grade", str(submitted), "--out", str(out),
                               "--jobs", "2"], cwd=ROOT, capture_output=True, text=True)
        wall = time.monotonic() - start
        if proc.returncode:
            print(proc.stdout, proc.stderr)
            return 1
        page = (out / "class.html").read_text()
    rows = re.findall(r"<tr><td>softmax</td>.*?</tr>", page, re.S)
    items = re.findall(r"<li><b>(\d+)</b> &times; (.*?) <span class=\"id\">\[(.*?)\]</span>", rows[0] if rows else "")
    print(f"graded 6 notebooks of {AID} in {wall:.1f} s (2 jobs)")
    print("softmax on class.html:")
    for count, message, mid in items:
        print(f"  {count} x [{mid}] {html.unescape(message)}")
    met = any(count == "4" and "along dim" in message for count, message, _ in items)
    print(f"bar: the wrong-dim mistake named under softmax with the count 4: {'met' if met else 'NOT met'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())

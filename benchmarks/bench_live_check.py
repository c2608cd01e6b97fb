"""How long check("<exercise>") takes in a notebook, beside the terminal's `python -m autograder check`.

For notebooks 01 and 06 this starts a Jupyter kernel as a student's notebook
would, with no check service running, and runs the notebook's first cell
(which starts the service in the background), then every exercise cell, then
the check of one exercise: that is the *first* call. It then runs the
exercise cell again and checks it ``--n`` times, pausing ``--pause`` seconds
between checks (a student reads the verdict and edits): the *warm* calls. A
call's time is the check cell's, from the request to the kernel's idle
message. Last, in the same run, the terminal command grades the whole
notebook, which was the only way to get the hidden tests' verdict before.

    python benchmarks/bench_live_check.py [--n 10] [--pause 2]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autograder import checks, course  # noqa: E402
from lib import checking  # noqa: E402

CASES = [("01_self_attention", "softmax"), ("06_residual_layernorm", "EncoderLayer")]


def cells(aid: str) -> tuple[str, list, dict]:
    """The notebook's first code cell, its exercise cells in order, and exercise -> its cell."""
    nb = json.loads(course.source_notebook(aid).read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    answers = {c["metadata"]["nbgrader"]["grade_id"]: "".join(c["source"]) for c in code
               if c["metadata"].get("nbgrader", {}).get("solution")}
    return "".join(code[0]["source"]), [answers[e] for e in checks.exercises(aid) if e in answers], answers


def run(kc, code: str, timeout: float = 600) -> tuple[float, str]:
    """Seconds the cell took, and what it printed."""
    printed = []

    def keep(msg):
        if msg["msg_type"] == "stream":
            printed.append(msg["content"]["text"])

    start = time.perf_counter()
    reply = kc.execute_interactive(code, timeout=timeout, output_hook=keep)
    if reply["content"]["status"] != "ok":
        raise RuntimeError(f"the cell failed: {reply['content'].get('evalue')}")
    return time.perf_counter() - start, "".join(printed)


def bench(aid: str, exercise: str, n: int, pause: float, folder: Path) -> list:
    from jupyter_client import KernelManager
    sock = str(folder / f"{aid}.sock")
    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(course.source_notebook(aid).parent), env=dict(os.environ, AUTOGRADER_LIVE_SOCKET=sock))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        first, answers, by_name = cells(aid)
        run(kc, first)
        for code in answers:
            run(kc, code)
        times = []
        for i in range(n + 1):
            if i:
                time.sleep(pause)
                run(kc, by_name[exercise])  # the student edits the cell and runs it again
            seconds, printed = run(kc, f'check("{exercise}")')
            if " points" not in printed or printed.split(": ")[1].split(" points")[0].split(" / ")[0] != \
                    printed.split(" / ")[1].split(" ")[0]:
                raise RuntimeError(f"the check of a correct answer did not give full points: {printed}")
            times.append(seconds)
        return times
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        try:
            checking._exchange(sock, {"op": "stop"}, 30)
        except (OSError, checking.CheckUnavailable):
            pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10, help="warm calls per notebook")
    parser.add_argument("--pause", type=float, default=2.0, help="seconds between warm calls")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs; {args.n} warm calls per notebook, {args.pause:g} s apart")
    print(f"{'notebook':<24}{'exercise':<14}{'first':>8}{'median':>9}{'max':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for aid, exercise in CASES:
            times = bench(aid, exercise, args.n, args.pause, Path(tmp))
            warm = times[1:]
            print(f"{aid:<24}{exercise:<14}{times[0]:>7.2f}s{statistics.median(warm):>8.2f}s{max(warm):>7.2f}s",
                  flush=True)
    for aid, _ in CASES:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "autograder", "check", str(course.source_notebook(aid))], cwd=ROOT,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        whole = time.perf_counter() - start
        print(f"terminal: python -m autograder check {aid} (the whole notebook): {whole:.1f} s")


if __name__ == "__main__":
    main()

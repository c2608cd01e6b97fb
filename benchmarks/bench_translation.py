"""Does notebook 08, as a student runs it, learn to translate, and how fast?

Runs the solution notebook of 08_encoder_decoder top to bottom (its default
training budget, on the device it picks), then prints what the notebook
printed: training steps and seconds, test BLEU and exact match (greedy and
beam search), and the whole notebook's wall time. Bars from the issue: test
BLEU >= 90 and exact match >= 80 % after at most 3 minutes of training, the
notebook in at most 5 minutes on a 2-core CPU.

    .venv/bin/python benchmarks/bench_translation.py
"""
import re
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autograder import course  # noqa: E402


def printed(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
                   if o.output_type == "stream" and o.name == "stdout")


def main() -> int:
    path = course.source_notebook("08_encoder_decoder")
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    wall = time.perf_counter() - start
    text = printed(nb)
    device = re.search(r"PyTorch \S+ on (\S+)", text).group(1)
    steps, seconds = re.search(r"(\d+) steps in (\d+) s", text).groups()
    bleu = float(re.search(r"test BLEU: ([\d.]+)", text).group(1))
    exact = float(re.search(r"exact match: ([\d.]+)%", text).group(1))
    beam = re.search(r"beam search \(k = 4\).*?BLEU ([\d.]+), exact match ([\d.]+)%", text)
    print(f"device {device}: {steps} training steps in {seconds} s")
    print(f"greedy: test BLEU {bleu:.1f}, exact match {exact:.1f}%")
    if beam:
        print(f"beam 4: test BLEU {float(beam.group(1)):.1f}, exact match {float(beam.group(2)):.1f}%")
    print(f"whole notebook: {wall:.0f} s")
    ok = bleu >= 90 and exact >= 80 and int(seconds) <= 180 and wall <= 300
    print("bars (BLEU >= 90, exact match >= 80%, training <= 180 s, notebook <= 300 s):", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # `tests.*` helpers importable
os.environ.setdefault("MPLBACKEND", "Agg")

# Each pytest-xdist worker (and every kernel it starts, which inherits the variable) gets its share of the
# cores: PyTorch's default of one thread per core in every process crawls on a busy machine. Only the workers
# know how many they are (the controller, which imports this file first, must leave the variable alone).
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    os.environ.setdefault("OMP_NUM_THREADS",
                          str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))))

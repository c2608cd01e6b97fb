"""Where the course lives and which assignments it has."""
import os
import re
import sys
from pathlib import Path

ROOT = Path(os.environ.get("COURSE_ROOT", Path(__file__).resolve().parent.parent))
SOLUTIONS = ROOT / "solutions"
NOTEBOOKS = ROOT / "notebooks"
CONFIG = Path(__file__).resolve().parent / "nbgrader_config.py"

# The lib modules that hold each notebook's reference solutions. A student
# working on notebook NN may use those of earlier notebooks only (the checks
# in tests/test_lib_order.py keep it so, and a student bundle ships no more).
REFERENCE_MODULES = {
    "01_self_attention": ("self_attention",),
    "02_positions": ("positions",),
    "03_feed_forward": ("feed_forward",),
    "04_masking": ("masking",),
    "05_multi_head": ("multi_head",),
    "06_residual_layernorm": ("layer_norm", "encoder"),
    "07_bpe": ("bpe",),
    "08_encoder_decoder": ("decoder", "transformer"),
    "09_long_sequences": ("local_attention", "linformer", "rotary", "kv_cache"),
    "10_gpt": ("gpt", "sampling"),
    "11_efficient_attention": ("tiled_attention", "grouped_query"),
}


def python_first(environ=None) -> str:
    """``PATH`` with this Python's folder first, so that the ``jupyter``, nbgrader and kernels a grader or a
    lab starts are this environment's."""
    environ = os.environ if environ is None else environ
    return os.pathsep.join([str(Path(sys.executable).parent), environ.get("PATH", "")])


def assignments() -> list[str]:
    """Assignment ids, in order: the folders of solutions/."""
    return sorted(p.name for p in SOLUTIONS.iterdir() if (p / f"{p.name}.ipynb").is_file())


def source_notebook(assignment: str) -> Path:
    return SOLUTIONS / assignment / f"{assignment}.ipynb"


def release_notebook(assignment: str) -> Path:
    return NOTEBOOKS / assignment / f"{assignment}.ipynb"


def detect_assignment(path: Path) -> str:
    """The assignment a notebook belongs to: its folder's name, else its file name,
    else the two-digit number its file name starts with (``01 (1).ipynb``)."""
    known = assignments()
    path = Path(path)
    for name in (path.parent.name, path.stem):
        if name in known:
            return name
    match = re.match(r"(\d\d)", path.stem) or re.match(r"(\d\d)", path.parent.name)
    if match:
        hits = [a for a in known if a.startswith(match.group(1) + "_")]
        if len(hits) == 1:
            return hits[0]
    raise ValueError(
        f"cannot tell which assignment {path} belongs to: put it in a folder named after the assignment "
        f"or name the file after it. Known assignments: {', '.join(known)}")


def graded_test(cell) -> str:
    """The grade id of a hidden test cell (graded, not a written answer), else ''."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta.get("grade_id", "") if meta.get("grade") and not meta.get("solution") else ""


def exercise_of(grade_id: str, solution_ids) -> str:
    """Test cells are named ``<exercise>_<what>``: map a test cell to its exercise."""
    hits = [s for s in solution_ids if grade_id == s or grade_id.startswith(s + "_")]
    return max(hits, key=len) if hits else grade_id

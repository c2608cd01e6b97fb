"""The student bundle: what a class receives up to notebook NN.

``python -m autograder bundle --upto 04 out.zip`` packs the release notebooks
01..04, and ``lib/`` with the reference solutions of notebooks 01..03 only
(plus the support modules: device, plots, testing, ...). No solutions, no
hidden tests, no autograder.
"""
import ast
import functools
import shutil
import zipfile
from pathlib import Path

from . import course

LIB = course.ROOT / "lib"
OWNER = {module: aid for aid, modules in course.REFERENCE_MODULES.items() for module in modules}

STUDENT_README = """# Transformers from scratch: notebooks {first} to {last}

Install once (PyTorch at the version the course is tested with, pinned in constraints.txt; pip picks
the build for your machine, which on Linux is a CUDA build of a few GB), then open the notebooks:

    python3 -m venv .venv && . .venv/bin/activate
    pip install -c constraints.txt torch    # or, CPU only and much smaller:
                                            # pip install -c constraints.txt torch --index-url https://download.pytorch.org/whl/cpu
    pip install -c constraints.txt -e .
    jupyter lab notebooks

Fill in the cells marked `YOUR CODE HERE` and run the check cell below each one.
Your instructor grades the notebooks with hidden tests as well; the `check("...")`
cell under each exercise asks for their verdict where your class has a check
service, and says so where it has none.
"""

STUDENT_PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "transformers-from-scratch-student"
version = "{version}"
requires-python = ">=3.10"
dependencies = {dependencies}

[tool.setuptools]
packages = ["lib"]
"""


def pyproject() -> dict:
    """The course's pyproject.toml."""
    try:
        import tomllib  # novermin: Python 3.10 takes tomli, below
    except ModuleNotFoundError:
        import tomli as tomllib
    return tomllib.loads((course.ROOT / "pyproject.toml").read_text())


@functools.lru_cache(maxsize=256)  # keyed by the text itself: a changed file is parsed again
def lib_imports(source: str) -> frozenset:
    """Names of the lib modules that Python source imports."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and (node.module == "lib" or node.module.startswith("lib.")):
            found |= {a.name for a in node.names} if node.module == "lib" else {node.module.split(".")[1]}
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("lib.")}
    return frozenset(found)


def needs(module: str, seen=None) -> set:
    """The reference modules that lib/``module``.py uses, directly or through other lib modules."""
    seen = set() if seen is None else seen
    if module in seen or not (LIB / f"{module}.py").is_file():
        return set()
    seen.add(module)
    direct = lib_imports((LIB / f"{module}.py").read_text())
    out = {m for m in direct if m in OWNER} | ({module} & set(OWNER))
    for m in direct:
        out |= needs(m, seen)
    return out


def lib_modules_for(upto: str) -> list[str]:
    """lib modules a student working up to notebook ``upto`` gets: every module
    whose references all belong to notebooks before ``upto``."""
    names = sorted(p.stem for p in LIB.glob("*.py") if p.stem != "__init__")
    return ["__init__"] + [m for m in names if all(OWNER[r] < upto for r in needs(m))]


KERNEL_SIDE = ("probe.py", "nodisplay.py")  # what of the grader runs in the student's kernel
VIEW_README = ('"""The grader, as the student\'s kernel sees it: only the side that runs student code on the '
               'grader\'s inputs (probe) and the plotting backend. The hidden tests are not here."""\n')


WITHHELD = ("lib.{module} holds reference solutions of notebook {owner}, which are not available while "
            "{assignment} is graded: write the exercise yourself")


def withheld(assignment: str) -> dict:
    """lib module -> why it cannot be imported while ``assignment`` is graded (it holds references of this
    notebook or a later one)."""
    given = set(lib_modules_for(assignment))
    return {m: WITHHELD.format(module=m, owner=OWNER.get(m) or sorted(OWNER[r] for r in needs(m))[-1],
                               assignment=assignment)
            for m in sorted(p.stem for p in LIB.glob("*.py")) if m not in given}


def student_view(assignment: str, folder: Path) -> Path:
    """The folder a kernel grading ``assignment`` imports from (``PYTHONPATH``): ``lib/`` as the student
    has it (the references of earlier notebooks only; the other modules say why they are missing) and the
    kernel side of ``autograder``."""
    folder = Path(folder)
    (folder / "lib").mkdir(parents=True, exist_ok=True)
    for m in lib_modules_for(assignment):
        shutil.copyfile(LIB / f"{m}.py", folder / "lib" / f"{m}.py")
    for m, why in withheld(assignment).items():
        (folder / "lib" / f"{m}.py").write_text(f"raise ImportError({why!r})\n")
    (folder / "autograder" / "checks").mkdir(parents=True, exist_ok=True)
    (folder / "autograder" / "__init__.py").write_text(VIEW_README)
    (folder / "autograder" / "checks" / "__init__.py").write_text(
        "raise ImportError('the hidden tests run in the grader, not in the kernel')\n")
    for name in KERNEL_SIDE:
        shutil.copyfile(Path(__file__).parent / name, folder / "autograder" / name)
    return folder


def _student_dependencies() -> list[str]:
    deps = pyproject()["project"]["dependencies"]
    return [d for d in deps if not d.startswith(("nbgrader", "nbformat", "nbclient", "safetensors", "tomli"))]


def bundle(upto: str, out: Path) -> list[str]:
    """Write the zip for notebooks up to ``upto`` (an id or its two digits); return its file names."""
    ids = course.assignments()
    hits = [a for a in ids if a == upto or a.startswith(f"{upto}_")]
    if len(hits) != 1:
        raise ValueError(f"no single assignment matches {upto!r}; known: {', '.join(ids)}")
    last = hits[0]
    chosen = ids[: ids.index(last) + 1]
    files = {f"notebooks/{a}/{a}.ipynb": course.release_notebook(a).read_bytes() for a in chosen}
    files |= {f"lib/{m}.py": (LIB / f"{m}.py").read_bytes() for m in lib_modules_for(last)}
    files["README.md"] = STUDENT_README.format(first=chosen[0], last=last).encode()
    files["constraints.txt"] = (course.ROOT / "constraints.txt").read_bytes()
    version = pyproject()["project"]["version"]
    deps = "[" + ", ".join(f'"{d}"' for d in _student_dependencies()) + "]"
    files["pyproject.toml"] = STUDENT_PYPROJECT.format(version=version, dependencies=deps).encode()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name in sorted(files):
            z.writestr(name, files[name])
    return sorted(files)

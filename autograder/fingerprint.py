"""Which course this is: a hash of every file grading depends on, and the versions of the packages.

A Dask worker grades only when its fingerprint is the client's (``autograder.cluster``), and a result kept
from an earlier ``grade`` run is reused only when the course is the same (``autograder.results``).
"""
import functools
import hashlib
import importlib.metadata
import sys

from . import course

SOURCES = ("lib/**/*.py", "autograder/**/*.py", "autograder/nbgrader_config.py", "nbgrader_config.py",
           "solutions/*/*.ipynb", "notebooks/*/*.ipynb")
PACKAGES = ("torch", "nbgrader", "numpy", "safetensors")

def package_version(name: str) -> str:
    """An installed package's release, without the build's local label: the image's ``2.13.0+cpu`` and
    ``course.py``'s ``2.13.0`` (a CUDA build) are the same PyTorch code, and grade alike."""
    return importlib.metadata.version(name).split("+")[0]


@functools.lru_cache(maxsize=None)
def fingerprint() -> tuple:
    """What grading depends on here, as sorted (name, value) pairs: each course file's hash, package versions."""
    found = {}
    for pattern in SOURCES:
        for path in course.ROOT.glob(pattern):
            if path.is_file() and not {"__pycache__", ".ipynb_checkpoints"} & set(path.parts):
                found[path.relative_to(course.ROOT).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    found["python"] = "%d.%d" % sys.version_info[:2]
    for name in PACKAGES:
        try:
            found[name] = package_version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return tuple(sorted(found.items()))


def version(prints: tuple) -> str:
    return hashlib.sha256(repr(prints).encode()).hexdigest()[:12]


def differences(ours: tuple, theirs: tuple) -> str:
    """How a worker's fingerprint differs from ours, in words."""
    ours, theirs = dict(ours), dict(theirs)
    said = [f"{name} {theirs.get(name, 'missing')} (here {ours.get(name, 'missing')})"
            for name in ("python", *PACKAGES) if ours.get(name) != theirs.get(name)]
    changed = sorted(n for n in ours.keys() | theirs.keys()
                     if "/" in n and ours.get(n) != theirs.get(n))
    if changed:
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        said.append(f"{len(changed)} course file(s) differ: {', '.join(changed[:3])}{more}")
    return "; ".join(said)

#!/usr/bin/env python3
"""Set up and run the course; needs nothing but Python 3.10 or newer.

    python3 course.py lab     set up (the first time) and open the notebooks in JupyterLab
    python3 course.py test    set up (the first time) and run the whole test suite
    python3 course.py setup   only set up: a virtual environment in .venv with everything installed

Set COURSE_TORCH to choose another PyTorch, for example
COURSE_TORCH="torch --index-url https://download.pytorch.org/whl/cpu" for a CPU-only build.
"""
import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
# What gets installed, in order: the PyTorch release the course is tested with
# (pip picks the build for your machine), then the course itself.
# environment.yml installs exactly the same list (a test checks it).
PIP_STEPS = [["torch==2.13.0"], ["-e", ".[dev]"]]


def python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def sh(*args, **kwargs):
    print("+", " ".join(str(a) for a in args), flush=True)
    subprocess.run([str(a) for a in args], check=True, **kwargs)


def setup() -> Path:
    if not python().exists():
        print(f"creating a virtual environment in {VENV}")
        venv.create(VENV, with_pip=True)
    steps = [os.environ["COURSE_TORCH"].split()] + PIP_STEPS[1:] if os.environ.get("COURSE_TORCH") else PIP_STEPS
    stamp = VENV / ".course-installed"
    wanted = hashlib.sha256(((ROOT / "pyproject.toml").read_bytes() + repr(steps).encode())).hexdigest()
    if stamp.exists() and stamp.read_text() == wanted:
        return python()
    for step in steps:
        sh(python(), "-m", "pip", "install", "--disable-pip-version-check", *step, cwd=ROOT)
    stamp.write_text(wanted)
    return python()


def install_browser() -> None:
    """The browser test (tests/test_formgrader_browser.py) needs Debian's chromium; install it where we may."""
    if shutil.which("chromium") or shutil.which("chromium-browser"):
        return
    if sys.platform != "linux" or not shutil.which("apt-get") or os.geteuid() != 0:
        print("no chromium: the browser test will be skipped (on Debian or Ubuntu: apt-get install chromium)")
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for attempt in (1, 2):  # a package mirror can fail once
        try:
            sh("apt-get", "update", "-q", env=env)
            sh("apt-get", "install", "-y", "-q", "chromium", env=env)
            return
        except subprocess.CalledProcessError as e:
            print(f"installing chromium failed (attempt {attempt}): {e}")


def main(argv) -> int:
    command = argv[1] if len(argv) > 1 else "help"
    if command not in ("setup", "lab", "test"):
        print(__doc__)
        return 0 if command in ("help", "-h", "--help") else 2
    py = setup()
    env = dict(os.environ, PATH=os.pathsep.join([str(py.parent), os.environ.get("PATH", "")]))
    if command == "lab":
        return subprocess.call([str(py), "-m", "jupyter", "lab", "notebooks"] + argv[2:], cwd=ROOT, env=env)
    if command == "test":
        install_browser()
        return subprocess.call([str(py), "-m", "pytest", "-n", "2", "--dist", "loadfile"] + argv[2:], cwd=ROOT, env=env)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

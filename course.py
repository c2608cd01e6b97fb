#!/usr/bin/env python3
"""Set up and run the course; needs nothing but Python 3.10 or newer.

    python3 course.py lab     set up (the first time) and open the notebooks in JupyterLab
    python3 course.py test    set up (the first time) and run the whole test suite (what CI runs)
    python3 course.py test --quick   only the quick tier: the library, the judges in this process, the
                              channel, settings, docs and release (about a minute)
    python3 course.py setup   only set up: a virtual environment in .venv with everything installed
                              (and JupyterHub's proxy in .venv/node, when npm is here)

Set COURSE_TORCH to choose another build of the pinned PyTorch (constraints.txt), for example
COURSE_TORCH="torch --index-url https://download.pytorch.org/whl/cpu" for the CPU-only one.
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
# What gets installed, in order: PyTorch (pip picks the build for your machine), then the course itself,
# each at the version constraints.txt pins, the one the course is tested with. environment.yml installs
# exactly the same list (a test checks it).
CONSTRAINTS = ["-c", "constraints.txt"]
PIP_STEPS = [["torch"], ["-e", ".[dev]"]]
# JupyterHub's proxy, from the npm registry, for the hub tests (tests/test_jupyterhub.py) and
# deploy/local/: installed into .venv/node (git-ignored). 4.6.3 asks for Node 10 or newer, so it also
# runs on Debian 12's nodejs 18, which `apt-get install npm` brings (5.x asks for Node 20).
PROXY = "configurable-http-proxy@4.6.3"
PROXY_DIR = VENV / "node"


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
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + (ROOT / "constraints.txt").read_bytes()
                            + repr(steps).encode()).hexdigest()
    if stamp.exists() and stamp.read_text() == wanted:
        return python()
    for step in steps:
        sh(python(), "-m", "pip", "install", "--disable-pip-version-check", *CONSTRAINTS, *step, cwd=ROOT)
    stamp.write_text(wanted)
    return python()


def install_system_packages() -> None:
    """The browser tests need Debian's chromium, the hub tests npm (for the proxy): install them where we may."""
    wanted = {"chromium": not (shutil.which("chromium") or shutil.which("chromium-browser")),
              # Debian's npm brings its nodejs; nothing else (the proxy has no native code to compile)
              "npm": not shutil.which("npm")}
    wanted = [name for name, missing in wanted.items() if missing]
    if not wanted:
        return
    if sys.platform != "linux" or not shutil.which("apt-get") or os.geteuid() != 0:
        print(f"no {' or '.join(wanted)}: the tests that need them will be skipped "
              f"(on Debian or Ubuntu: apt-get install {' '.join(wanted)})")
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for attempt in (1, 2):  # a package mirror can fail once
        try:
            sh("apt-get", "update", "-q", env=env)
            sh("apt-get", "install", "-y", "-q", *wanted, env=env)
            return
        except subprocess.CalledProcessError as e:
            print(f"installing {' '.join(wanted)} failed (attempt {attempt}): {e}")


def proxy_command() -> Path:
    """Where install_proxy puts JupyterHub's proxy."""
    return PROXY_DIR / "node_modules" / ".bin" / ("configurable-http-proxy.cmd" if os.name == "nt" else
                                                  "configurable-http-proxy")


def install_proxy() -> None:
    """configurable-http-proxy, pinned, from the npm registry into .venv/node, when npm is here."""
    name, version = PROXY.rsplit("@", 1)
    installed = PROXY_DIR / "node_modules" / name / "package.json"
    if proxy_command().exists() and installed.exists() and f'"version": "{version}"' in installed.read_text():
        return
    npm = shutil.which("npm")
    if not npm:
        print(f"no npm: the JupyterHub tests will be skipped (install Node.js and npm, then: "
              f"npm install --prefix {PROXY_DIR} {PROXY})")
        return
    for attempt in (1, 2):  # the registry can fail once
        try:
            sh(npm, "install", "--prefix", PROXY_DIR, "--no-audit", "--no-fund", PROXY, cwd=ROOT)
            return
        except subprocess.CalledProcessError as e:
            print(f"installing {PROXY} failed (attempt {attempt}): {e}")


def environment(py: Path, environ, lab: bool = False) -> dict:
    """The commands' environment: this .venv's programs first (what a notebook tells you to type in the lab's
    terminal runs here). The lab is a student's (deploy/self-learner/): no instructor tools, and no Validate
    button, whose nbgrader runs the hidden tests in your own kernel (the notebooks' check("...") cells judge
    them outside it)."""
    env = dict(environ, PATH=os.pathsep.join([str(py.parent), environ.get("PATH", "")]))
    if lab:
        env["JUPYTER_CONFIG_PATH"] = os.pathsep.join([str(ROOT / "deploy" / "self-learner")] + (
            [environ["JUPYTER_CONFIG_PATH"]] if environ.get("JUPYTER_CONFIG_PATH") else []))
    return env


def lab_flags(given) -> list:
    """JupyterLab refuses to start as root without --allow-root: pass it there (a container or a cloud machine
    often runs as root), and say so once."""
    if hasattr(os, "geteuid") and os.geteuid() == 0 and "--allow-root" not in given:
        print("running as root: JupyterLab is started with --allow-root")
        return ["--allow-root"]
    return []


def main(argv) -> int:
    command = argv[1] if len(argv) > 1 else "help"
    if command not in ("setup", "lab", "test"):
        print(__doc__)
        return 0 if command in ("help", "-h", "--help") else 2
    py = setup()
    quick = command == "test" and "--quick" in argv[2:]
    if command == "test" and not quick:
        install_system_packages()
    if command == "setup" or command == "test" and not quick:
        install_proxy()
    env = environment(py, os.environ, lab=command == "lab")
    if command == "lab":
        return subprocess.call([str(py), "-m", "jupyter", "lab", "notebooks", *lab_flags(argv[2:])] + argv[2:],
                               cwd=ROOT, env=env)
    if command == "test":
        args = [a for a in argv[2:] if a != "--quick"]
        tier = ["-m", "quick"] if quick else ["--durations=15"]
        return subprocess.call([str(py), "-m", "pytest", "-n", str(test_workers()), "--dist", "loadfile", *tier] + args,
                               cwd=ROOT, env=env)
    return 0


def test_workers() -> int:
    """How many test processes (pytest-xdist) run at once: one per core, at least two, and no more than one per
    3 GiB of memory (a worker grading a class holds a few kernels). The suite is about 3,700 processor-seconds
    of work, so two cores take about half an hour, six about twelve minutes. `-n N` after `test` overrides it."""
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        memory = 0
    cap = max(2, memory // (3 * 2**30)) if memory > 0 else 2
    return max(2, min(os.cpu_count() or 2, cap))


if __name__ == "__main__":
    sys.exit(main(sys.argv))

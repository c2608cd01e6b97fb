"""The conda and pip paths install the same thing; CI runs the README's command."""
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import course as setup_script  # noqa: E402  the repository's course.py
from autograder.bundle import pyproject  # noqa: E402


def env_yml():
    """environment.yml's conda packages, and its pip section."""
    deps = yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
    conda = [d for d in deps if isinstance(d, str)]
    pip = next(d["pip"] for d in deps if isinstance(d, dict))
    return conda, pip


def test_conda_pip_section_equals_the_setup_script():
    _, pip = env_yml()
    assert pip == [" ".join(setup_script.CONSTRAINTS)] + [" ".join(step) for step in setup_script.PIP_STEPS]


def test_conda_python_fits_the_package():
    conda, _ = env_yml()
    version = next(d.split("=")[1] for d in conda if d.startswith("python="))
    requires = pyproject()["project"]["requires-python"]
    assert requires.startswith(">=") and tuple(map(int, version.split("."))) >= tuple(map(int, requires[2:].split(".")))
    assert set(conda) == {f"python={version}", "pip"}, "everything else comes through pip"


def test_package_keeps_torch_a_range():
    deps = pyproject()["project"]["dependencies"]
    assert any(re.fullmatch(r"torch>=[\d.]+", d) for d in deps)


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    command = "python3 course.py test"
    assert re.search(rf"^{re.escape(command)}(\s+#.*)?$", readme, re.M), "the README shows no test command"
    assert command in (ROOT / ".ci" / "run").read_text()


def test_the_code_runs_on_the_oldest_python_it_promises():
    """pyproject.toml promises Python 3.10: vermin finds any construct or module that needs a newer one."""
    requires = pyproject()["project"]["requires-python"]
    target = requires.removeprefix(">=")
    vermin = Path(sys.executable).parent / "vermin"  # the command pip installs beside this Python (dev extra)
    proc = subprocess.run([str(vermin), f"--target={target}-", "--violations", "--no-tips",
                           "--eval-annotations", "--backport", "typing", "lib", "autograder", "tests", "benchmarks",
                           "course.py"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_course_py_lab_opens_jupyterlab_also_as_root(tmp_path):
    """As root (a container, a cloud machine) JupyterLab refuses to start without --allow-root: course.py passes
    it, and says so. The lab must answer on its port."""
    import os
    import socket
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "lab.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, str(ROOT / "course.py"), "lab", "--no-browser", f"--port={port}",
                                 "--ServerApp.port_retries=0", "--IdentityProvider.token=tok"], cwd=tmp_path,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env=dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime")))
    try:
        deadline, answer = time.monotonic() + 120, None
        while time.monotonic() < deadline and proc.poll() is None and answer is None:
            time.sleep(1)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token=tok", timeout=5) as r:
                    answer = r.status
            except OSError:
                pass
        text = log.read_text()
        assert answer == 200, text[-3000:]
        if os.geteuid() == 0:
            assert text.count("running as root: JupyterLab is started with --allow-root") == 1, text[-3000:]
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(30)

"""Each version the course is tested with is pinned once, in constraints.txt: course.py, environment.yml, the
image and a student bundle install with it, this environment has it, and builds of one release grade alike."""
import importlib.metadata
import re
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import course as setup_script  # noqa: E402  the repository's course.py

from autograder import bundle, fingerprint  # noqa: E402


def pins() -> dict:
    text = (ROOT / "constraints.txt").read_text()
    found = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", text, re.M))
    found["python"] = re.search(r"^# python (\d+\.\d+)", text, re.M).group(1)
    return found


def test_the_pins_are_the_tested_versions():
    assert set(pins()) == {"torch", "jupyterhub", "python"}
    for name in ("torch", "jupyterhub"):
        assert fingerprint.package_version(name) == pins()[name], f"this environment's {name} is not the pinned one"


def test_course_py_and_environment_yml_install_with_the_pins_and_state_no_version_of_their_own():
    assert setup_script.CONSTRAINTS == ["-c", "constraints.txt"]
    for step in setup_script.PIP_STEPS:
        assert not any(re.search(r"[=<>]", a) for a in step), step
    yml = (ROOT / "environment.yml").read_text()
    assert re.search(rf"^\s+- python={re.escape(pins()['python'])}\b", yml, re.M)
    assert "- -c constraints.txt" in yml


def test_the_image_uses_the_pinned_python_and_states_no_other_version():
    text = (ROOT / "deploy" / "Dockerfile").read_text()
    assert re.search(rf"^FROM python:{re.escape(pins()['python'])}-", text, re.M)
    assert "constraints.txt" in text
    for name in ("torch", "jupyterhub"):
        assert not re.search(rf"{name}==", text), f"the Dockerfile pins {name} itself"


def test_a_build_of_the_same_release_has_the_same_fingerprint(monkeypatch):
    """A Dask worker in the image (PyTorch 2.13.0+cpu) and a client set up by course.py (2.13.0) accept each
    other: the local label names the build, not the code."""
    real = importlib.metadata.version
    fingerprint.fingerprint.cache_clear()
    try:
        monkeypatch.setattr(importlib.metadata, "version", lambda n: real(n).split("+")[0] + "+cpu")
        image = fingerprint.fingerprint()
        fingerprint.fingerprint.cache_clear()
        monkeypatch.setattr(importlib.metadata, "version", lambda n: real(n).split("+")[0])
        assert fingerprint.fingerprint() == image
        fingerprint.fingerprint.cache_clear()
        monkeypatch.setattr(importlib.metadata, "version", lambda n: "9.9.9" if n == "torch" else real(n))
        assert "torch 9.9.9" in fingerprint.differences(image, fingerprint.fingerprint())
    finally:
        fingerprint.fingerprint.cache_clear()


def test_a_student_bundle_installs_the_pinned_pytorch(tmp_path):
    """Its README installs with constraints.txt, which it ships: no newer PyTorch than the course is tested
    with, and the CPU-only build offered, as course.py offers it."""
    out = tmp_path / "b.zip"
    bundle.bundle("02", out)
    with zipfile.ZipFile(out) as z:
        shipped = z.read("constraints.txt").decode()
        readme = z.read("README.md").decode()
    assert f"torch=={pins()['torch']}" in shipped
    assert "pip install -c constraints.txt" in readme and "download.pytorch.org/whl/cpu" in readme
    assert "pip install -e .\n" not in readme


def test_the_notebooks_are_released_with_the_pinned_python():
    """Their language_info names the Python that released them; JupyterLab compares it with its kernel's."""
    import json
    from autograder import course
    for aid in course.assignments():
        info = json.loads(course.release_notebook(aid).read_text())["metadata"]["language_info"]
        assert info["version"].startswith(pins()["python"] + "."), f"{aid} was released with Python {info['version']}"

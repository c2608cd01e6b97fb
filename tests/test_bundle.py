"""`python -m autograder bundle` gives students what they need up to notebook
NN and nothing that gives away a solution."""
import json
import subprocess
import sys
import zipfile

import pytest

from autograder import course
from autograder.__main__ import main
from autograder.bundle import OWNER, lib_imports


@pytest.mark.parametrize("aid", course.assignments())
def test_bundle_up_to_each_notebook(aid, tmp_path):
    out = tmp_path / "bundle.zip"
    assert main(["bundle", "--upto", aid[:2], str(out)]) == 0
    with zipfile.ZipFile(out) as z:
        z.extractall(tmp_path / "b")
        names = z.namelist()
    ids = course.assignments()
    expected = {f"notebooks/{a}/{a}.ipynb" for a in ids[: ids.index(aid) + 1]}
    assert {n for n in names if n.startswith("notebooks/")} == expected
    for name in expected:
        assert (tmp_path / "b" / name).read_bytes() == (course.ROOT / name).read_bytes()
    modules = {n[4:-3] for n in names if n.startswith("lib/")}
    for module in modules & set(OWNER):
        assert OWNER[module] < aid, f"the bundle up to {aid} gives away lib/{module}.py"
    assert not any(n.startswith(("solutions/", "autograder/", "tests/")) for n in names)
    for name in names:
        text = (tmp_path / "b" / name).read_text()
        for secret in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "Model answer"):
            assert secret not in text, f"{secret!r} in {name}"
    for name in expected:  # every lib module the notebooks import is in the bundle...
        nb = json.loads((tmp_path / "b" / name).read_text())
        code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
        code = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("%", "!")))
        assert lib_imports(code) <= modules, f"{name} imports lib modules missing from the bundle"
    script = (  # ...and imports from there (an editable install of the course would also answer `import lib.x`)
        "import sys\n" + "".join(f"import lib.{m}\n" for m in sorted(modules - {"__init__"})) +
        "bad = [n for n, m in sys.modules.items() if n.startswith('lib.') and not m.__file__.startswith(sys.argv[1])]\n"
        "assert not bad, f'imported from outside the bundle: {bad}'\n")
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "b")], cwd=tmp_path / "b", check=True,
                   env={"PYTHONPATH": str(tmp_path / "b"), "PATH": ""})

def test_bundle_refuses_an_unknown_notebook(tmp_path, capsys):
    assert main(["bundle", "--upto", "99", str(tmp_path / "x.zip")]) == 2
    assert "no single assignment" in capsys.readouterr().err

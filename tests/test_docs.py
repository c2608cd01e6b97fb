"""The documentation: a short front page, and docs/ built as a site with no warning and no broken link."""
import re
import shutil
import subprocess
import sys

import pytest

from autograder import course

ROOT = course.ROOT
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def _build(source, out) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(source),
                           str(out)], capture_output=True, text=True, timeout=300)


def test_the_readme_is_a_front_page_whose_links_all_lead_somewhere():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    for target, _anchor in LINK.findall(text):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), f"README.md links to {target}, which is not there"
    for heading in ("## Students", "## Self-learners", "## Instructors"):
        assert heading in text


def test_the_docs_build_without_a_warning(tmp_path):
    pytest.importorskip("myst_parser")
    proc = _build(ROOT / "docs", tmp_path / "html")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "WARNING" not in proc.stderr, proc.stderr[-3000:]
    pages = {p.stem for p in (ROOT / "docs").glob("*.md")}
    built = {p.stem for p in (tmp_path / "html").glob("*.html")}
    assert pages <= built, pages - built


def test_a_broken_link_in_the_docs_fails_the_build(tmp_path):
    """The build above could not pass with a link to a page or a section that is not there."""
    pytest.importorskip("myst_parser")
    for broken in ("[a page](nowhere.md)", "[a section](grading.md#no-such-section)"):
        docs = tmp_path / "docs"
        shutil.rmtree(docs, ignore_errors=True)
        shutil.copytree(ROOT / "docs", docs, ignore=shutil.ignore_patterns("_build"))
        (tmp_path / "deploy").mkdir(exist_ok=True)
        shutil.copy(ROOT / "deploy" / "README.md", tmp_path / "deploy" / "README.md")
        with open(docs / "testing.md", "a") as f:
            f.write(f"\nSee {broken}.\n")
        proc = _build(docs, tmp_path / "html")
        assert proc.returncode != 0 and "testing.md" in proc.stderr, (broken, proc.stderr[-2000:])

"""JupyterLab with nbgrader's extensions, on a copy of this course, in a real
browser: headless Chromium (Debian's package) driven by Playwright opens a
course notebook and the formgrader, which lists every assignment.

`python3 course.py test` installs both (Chromium with apt-get when it runs as
root on Debian or Ubuntu). Elsewhere the test is skipped, except in CI, where a
missing browser is a failure.
"""
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from autograder import course
from tests.test_gradebook import AID, WRITTEN, a_small_class, written_grades
from tests.test_gradebook import grade as grade_into

CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)
try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    sync_playwright = None

if not (CHROMIUM and sync_playwright) and os.environ.get("CI") != "true":
    pytest.skip("needs Debian's chromium and playwright (python3 course.py test installs them)",
                allow_module_level=True)

TOKEN = "course-browser-test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on a copy of the course directory, whose gradebook holds a small class of notebook 01
    graded by ``grade --gradebook`` (tests/test_gradebook.py); yields its base URL and the course's folder."""
    assert CHROMIUM, "no chromium on PATH: python3 course.py test installs it (apt-get install chromium)"
    assert sync_playwright, "playwright is not installed: pip install -e .[dev]"
    tmp = tmp_path_factory.mktemp("lab")
    root = tmp / "course"
    for folder in ("solutions", "notebooks"):
        shutil.copytree(course.ROOT / folder, root / folder)
    shutil.copy(course.ROOT / "nbgrader_config.py", root)
    (root / "autograder").mkdir()
    shutil.copy(course.CONFIG, root / "autograder")
    a_small_class(tmp / "submitted")
    grade_into(tmp / "submitted", tmp / "out", root)
    port = free_port()
    # nbgrader runs `alembic` from PATH when it opens the gradebook: the environment's scripts come first
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    env = dict(os.environ, PATH=path, JUPYTER_CONFIG_DIR=str(root / ".jupyter"),
               JUPYTER_RUNTIME_DIR=str(root / ".runtime"))
    log = open(root / "lab.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         "--allow-root", f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={root}"],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("JupyterLab did not start:\n" + (root / "lab.log").read_text()[-3000:])
                time.sleep(0.5)
        yield url, root
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


def test_lab_opens_a_course_notebook(lab, browser, tmp_path):
    url, _ = lab
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{url}/lab/tree/notebooks/01_self_attention/01_self_attention.ipynb?token={TOKEN}")
    notebook = page.locator(".jp-NotebookPanel")
    expect(notebook.locator(".jp-Cell").first).to_be_visible(timeout=60_000)
    expect(notebook).to_contain_text("Self-attention", timeout=30_000)
    expect(notebook).to_contain_text("def softmax")  # the exercise cell, with its stub
    expect(notebook).to_contain_text("YOUR CODE HERE")
    expect(page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader")).to_be_visible()  # lab extension
    expect(page.locator("#jp-main-statusbar")).to_contain_text("Idle", timeout=60_000)  # the kernel started
    page.screenshot(path=tmp_path / "notebook.png")


def test_formgrader_lists_the_assignments(lab, browser, tmp_path):
    url, _ = lab
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{url}/formgrader?token={TOKEN}")
    names = page.locator("#main-table td.name")
    expect(names).to_have_count(len(course.assignments()), timeout=60_000)
    assert sorted(names.all_inner_texts()) == course.assignments()
    page.screenshot(path=tmp_path / "formgrader.png")


def test_a_feedback_page_shows_the_notebooks_text_rendered(browser, tmp_path):
    """A student's feedback page, as the grader renders it (sanitized), read in the browser: headings are
    headings and paragraphs paragraphs, not tags shown as text."""
    import nbformat

    from autograder.report import render_pages
    nb = nbformat.read(course.ROOT / "notebooks" / "01_self_attention" / "01_self_attention.ipynb", as_version=4)
    [body] = render_pages([(nb, "<h1>Feedback: 01_self_attention</h1>")])
    (tmp_path / "feedback.html").write_text(body)
    page = browser.new_page(viewport={"width": 1000, "height": 1400})
    page.goto((tmp_path / "feedback.html").as_uri())
    text = page.locator("body").inner_text()
    assert "<h1" not in text and "<p>" not in text and "</h2>" not in text, text[:500]
    heading = page.locator("h1", has_text="Self-attention").first
    expect(heading).to_be_visible()
    sizes = page.evaluate("""() => ['.text_cell h1', '.text_cell p'].map(
        (css) => getComputedStyle(document.querySelector(css)).fontSize)""")
    assert float(sizes[0].rstrip("px")) > 1.5 * float(sizes[1].rstrip("px")), sizes
    page.screenshot(path=tmp_path / "feedback.png")


def test_the_class_page_reads_right_in_the_browser(browser, tmp_path):
    """class.html, as grade writes it, in the browser: the score plot is drawn, the wrong-dim softmax reads as one
    mistake of four students with links to their feedback, a student id made of markup is shown as text, and the
    page asks for nothing outside itself."""
    from autograder.class_page import write_class_page
    from tests.test_class_page import HOSTILE, class_of_six

    write_class_page(class_of_six(), tmp_path / "class.html")
    page = browser.new_page(viewport={"width": 1300, "height": 1000})
    asked = []
    page.on("request", lambda request: asked.append(request.url))
    page.on("dialog", lambda dialog: asked.append(f"dialog: {dialog.message}"))
    page.goto((tmp_path / "class.html").as_uri())
    plot = page.locator("img").first
    expect(plot).to_be_visible()
    assert page.evaluate("() => document.images[0].complete && document.images[0].naturalWidth") > 300
    row = page.locator("tr").filter(has_text="along dim").first
    expect(row).to_contain_text("4 × softmax(x of shape")
    assert sorted(row.locator("a").all_inner_texts()) == sorted(["erin", "femi", "gus", HOSTILE])
    expect(page.locator("#review").locator("xpath=following-sibling::table[1]")).to_contain_text("opens a socket")
    assert [u for u in asked if not u.startswith(("file:", "data:"))] == [], asked
    page.screenshot(path=os.environ.get("CLASS_PAGE_SHOT", tmp_path / "class.png"), full_page=True)


def test_the_formgrader_shows_the_judges_scores_and_takes_a_written_grade(lab, browser, tmp_path):
    """After grade --gradebook, the Formgrader lists each submission with the judges' points (eve's forged
    notebook at 8, its wrong softmax found outside the kernel); a written grade typed there is saved in the
    gradebook, where grade reads it back."""
    url, root = lab
    # the formgrader's own requests carry the token too (a token in the page's address covers that page only)
    page = browser.new_page(viewport={"width": 1400, "height": 900},
                            extra_http_headers={"Authorization": f"token {TOKEN}"})
    page.goto(f"{url}/formgrader/gradebook/{AID}/{AID}")
    rows = page.locator("#main-table tr")
    expect(rows).to_have_count(3, timeout=60_000)
    expect(rows.first.locator(".score")).not_to_be_empty()
    scores = {row.locator("a.name-shown").text_content(): row.locator(".score").text_content()
              for row in rows.all()}
    assert scores == {"ada": "11 / 15", "cy": "8 / 15", "eve": "8 / 15"}, scores
    page.screenshot(path=tmp_path / "formgrader-scores.png")
    ada = rows.filter(has=page.locator("a.name-shown", has_text="ada")).locator("a.name-shown")
    page.goto(url + ada.get_attribute("href"))
    for cell, points in WRITTEN.items():
        box = page.locator(f"input.score#{cell}")
        expect(box).to_be_visible(timeout=60_000)
        box.fill(str(points))
        box.press("Tab")  # a change event: the Formgrader saves the grade
        deadline = time.monotonic() + 30  # one save at a time: the next box waits until this grade is stored
        while written_grades(root, "ada")[cell] != points and time.monotonic() < deadline:
            time.sleep(0.5)
    assert written_grades(root, "ada") == WRITTEN
    page.screenshot(path=tmp_path / "formgrader-written.png", full_page=False)
    page.goto(f"{url}/formgrader/gradebook/{AID}/{AID}")
    row = page.locator("#main-table tr").filter(has=page.locator("a.name-shown", has_text="ada"))
    expect(row.locator(".score")).to_have_text("14.5 / 15", timeout=30_000)


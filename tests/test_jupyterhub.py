"""A class on a real local JupyterHub (deploy/local/jupyterhub_config.py), round trip.

The hub from PyPI and its proxy, configurable-http-proxy, from the npm registry (`python3 course.py
test` installs it into .venv/node) run on free ports of 127.0.0.1 with two students and an
instructor. The instructor releases 01_self_attention to nbgrader's exchange; each student logs in,
starts a server through the hub's REST API, fetches the assignment, works and submits through the
nbgrader extension of their own server (ada hands in the solution, ben the release untouched); the
instructor collects and grades with `python -m autograder grade`: full marks and zero. The formgrader
is a hub service that only the instructors group may open. Then Chromium (the browser test's set-up
in tests/test_formgrader_browser.py) logs a student in on the hub's login page and opens the notebook.

Without the proxy (or the browser) these tests are skipped, except in CI, where that is a failure.
"""
import csv
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import requests
import yaml

import course as setup_script  # the repository's course.py: where it installs the proxy
from autograder import nbgrader_run
from tests.submissions import solution_sources

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "deploy" / "local" / "jupyterhub_config.py"
COURSE_ID = "transformers-from-scratch"
AID = "01_self_attention"
USERS = {"instructors": {"ines": "ines-secret"}, "students": {"ada": "ada-secret", "ben": "ben-secret"}}
IN_CI = os.environ.get("CI") == "true"
PROXY = (str(setup_script.proxy_command()) if setup_script.proxy_command().exists()
         else shutil.which("configurable-http-proxy"))

if not PROXY and not IN_CI:
    pytest.skip(f"needs JupyterHub's proxy: python3 course.py test installs it from npm "
                f"(or: npm install --prefix {setup_script.PROXY_DIR} {setup_script.PROXY})", allow_module_level=True)

CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)
try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    sync_playwright = None


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def poll(what: str, check, timeout: float, log: Path | None = None, interval: float = 0.25):
    """Call ``check`` until it returns something true; fail with ``what`` (and the hub's log) after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            tail = log.read_text()[-4000:] if log and log.exists() else ""
            raise AssertionError(f"{what}: not after {timeout} s\n{tail}")
        time.sleep(interval)


class Tree:
    """A process and what it starts, remembered as it goes: the hub's proxy, service, servers and kernels run
    in sessions of their own, and outlive the hub if it dies, so a process group is not enough."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.known = proc, {}
        self.look()

    def look(self) -> None:
        """Remember every process now under the ones known (psutil tells a reused pid apart)."""
        roots = [self.proc.pid] if self.proc.poll() is None else []
        for pid in roots + list(self.known):
            try:
                p = self.known.get(pid) or psutil.Process(pid)
                for q in [p] + p.children(recursive=True):
                    self.known.setdefault(q.pid, q)
            except psutil.NoSuchProcess:
                pass

    def stop(self, grace: float = 15) -> None:
        """SIGTERM to all (the hub would stop its servers itself, but waits 10 s or more for one that
        ignores SIGINT), then SIGKILL after ``grace`` seconds."""
        self.look()
        procs = list(self.known.values())
        for p in procs:
            try:
                p.terminate()
            except psutil.NoSuchProcess:
                pass
        _, alive = psutil.wait_procs(procs, timeout=grace)
        self.look()  # anything started meanwhile
        alive = [p for p in self.known.values() if p.is_running()]
        for p in alive:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(alive, timeout=5)
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass


class Hub:
    def __init__(self, url: str, state: Path, log: Path, tree: Tree):
        self.url, self.state, self.log, self.tree, self.pid = url, state, log, tree, tree.proc.pid
        self.course = state / "course"
        self.tokens = {}

    def login(self, name: str, password: str | None = None) -> requests.Session:
        """Log in on the hub's login form, as a browser does; return the session (its cookies)."""
        session = requests.Session()
        session.get(f"{self.url}/hub/login", timeout=30)
        password = password or {**USERS["students"], **USERS["instructors"]}[name]
        r = session.post(f"{self.url}/hub/login", allow_redirects=False, timeout=30,
                         data={"username": name, "password": password, "_xsrf": session.cookies.get("_xsrf")})
        assert r.status_code == 302, f"{name} could not log in: {r.status_code}"
        return session

    def token(self, name: str) -> dict:
        """Headers with an API token the user asked the hub for, logged in (cached)."""
        if name not in self.tokens:
            session = self.login(name)
            session.get(f"{self.url}/hub/home", timeout=30)  # the login gives a new XSRF cookie
            xsrf = [c.value for c in session.cookies if c.name == "_xsrf"][-1]
            r = session.post(f"{self.url}/hub/api/users/{name}/tokens", json={"note": "test"},
                             headers={"X-XSRFToken": xsrf}, timeout=30)
            assert r.status_code == 201, r.text
            self.tokens[name] = {"Authorization": f"token {r.json()['token']}"}
        return self.tokens[name]

    def api(self, method: str, path: str, user: str, **kwargs) -> requests.Response:
        return requests.request(method, f"{self.url}{path}", headers=self.token(user), timeout=60, **kwargs)

    def start_servers(self, *names: str) -> None:
        """Start the users' servers through the hub's REST API, all at once; wait until each is ready."""
        for name in names:
            r = self.api("POST", f"/hub/api/users/{name}/server", name)
            assert r.status_code in (201, 202, 400), r.text  # 400: already running
        for name in names:
            poll(f"{name}'s server", lambda: self.api("GET", f"/hub/api/users/{name}", name).json()["servers"]
                 .get("", {}).get("ready"), 120, self.log)
        self.tree.look()

    def fetch(self, name: str) -> None:
        """Fetch the assignment with the server's Assignments extension, once."""
        if self.api("GET", f"/user/{name}/api/contents/{AID}/{AID}.ipynb", name).status_code == 200:
            return
        r = self.api("POST", f"/user/{name}/assignments/fetch", name,
                     data={"course_id": COURSE_ID, "assignment_id": AID})
        assert r.status_code == 200 and r.json()["success"], r.text
        statuses = {a["assignment_id"]: a["status"] for a in r.json()["value"]}
        assert statuses.get(AID) == "fetched", statuses


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """The hub of deploy/local/ on free ports, with assignment 01 released by the instructor."""
    assert PROXY, ("no configurable-http-proxy: python3 course.py test installs it with npm "
                   f"(npm install --prefix {setup_script.PROXY_DIR} {setup_script.PROXY})")
    state = tmp_path_factory.mktemp("hub")
    (state / "users.json").write_text(json.dumps(USERS))
    port, api_port, hub_port, formgrader_port = free_ports(4)
    env = dict(os.environ, COURSE_HUB_STATE=str(state), COURSE_HUB_IP="127.0.0.1", COURSE_HUB_PORT=str(port),
               COURSE_HUB_API_PORT=str(api_port), COURSE_HUB_HUB_PORT=str(hub_port),
               COURSE_FORMGRADER_PORT=str(formgrader_port), OMP_NUM_THREADS="1",
               PATH=os.pathsep.join([str(Path(PROXY).parent), str(Path(sys.executable).parent), os.environ["PATH"]]),
               JUPYTER_CONFIG_DIR=str(state / ".jupyter"), JUPYTER_RUNTIME_DIR=str(state / ".runtime"))
    log = state / "hub.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(CONFIG)], cwd=state, env=env,
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    tree = Tree(proc)
    url = f"http://127.0.0.1:{port}"

    def running(check):
        def still():
            assert proc.poll() is None, "the hub exited:\n" + log.read_text()[-4000:]
            return check()
        return still

    def answers():
        try:
            return requests.get(f"{url}/hub/health", timeout=5).status_code == 200
        except requests.ConnectionError:
            return False

    try:
        # the instructor releases while the hub starts: the config makes the course folder at once
        poll("the course folder", running((state / "course").is_dir), 60, log)
        nbgrader_run.nbgrader(state / "course", "generate_assignment", AID, timeout=300)
        nbgrader_run.nbgrader(state / "course", "release_assignment", AID, timeout=300)
        poll("the hub", running(answers), 120, log)
        tree.look()
        yield Hub(url, state, log, tree)
    finally:
        tree.stop()


def test_a_class_round_trip(hub, tmp_path):
    """Release, fetch, submit, collect and grade through the hub; the formgrader is for instructors only."""
    # a wrong password is refused
    bad = requests.Session()
    bad.get(f"{hub.url}/hub/login", timeout=30)
    r = bad.post(f"{hub.url}/hub/login", data={"username": "ada", "password": "ben-secret",
                                                "_xsrf": bad.cookies.get("_xsrf")}, allow_redirects=False, timeout=30)
    assert r.status_code == 403, r.status_code

    hub.start_servers("ada", "ben")
    answers = solution_sources(AID)
    for name, solve in (("ada", True), ("ben", False)):
        hub.fetch(name)
        path = f"/user/{name}/api/contents/{AID}/{AID}.ipynb"
        model = hub.api("GET", path, name).json()
        assert model["type"] == "notebook"
        notebook = model["content"]
        if solve:
            filled = 0
            for cell in notebook["cells"]:
                grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
                if grade_id in answers and cell["metadata"]["nbgrader"].get("solution"):
                    cell["source"], filled = answers[grade_id], filled + 1
            assert filled >= 4
            r = hub.api("PUT", path, name, json={"type": "notebook", "format": "json", "content": notebook})
            assert r.status_code == 200, r.text
        r = hub.api("POST", f"/user/{name}/assignments/submit", name,
                    data={"course_id": COURSE_ID, "assignment_id": AID})
        assert r.status_code == 200 and r.json()["success"], r.text
        submitted = [a for a in r.json()["value"] if a["status"] == "submitted"]
        assert [s["student_id"] for a in submitted for s in a["submissions"]] == [name]

    # the instructor collects and grades
    nbgrader_run.nbgrader(hub.course, "collect", AID, timeout=300)
    submitted = hub.course / "submitted"
    assert sorted(p.name for p in submitted.iterdir()) == ["ada", "ben"]
    out = tmp_path / "grades"
    grader = subprocess.Popen([sys.executable, "-m", "autograder", "grade", str(submitted), "--out", str(out),
                               "--jobs", "2"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True)
    try:
        output, _ = grader.communicate(timeout=600)
    except BaseException:
        Tree(grader).stop()  # its workers and kernels too
        raise
    assert grader.returncode == 0, output[-5000:]
    with open(out / "grades.csv") as f:
        grades = {row["student_id"]: row for row in csv.DictReader(f)}
    assert set(grades) == {"ada", "ben"}
    ada, ben = grades["ada"], grades["ben"]
    assert ada["assignment"] == ben["assignment"] == AID
    assert int(ada["autograded_max"]) > 0 and ada["autograded"] == ada["autograded_max"], ada
    assert float(ben["autograded"]) == 0 and ben["autograded_max"] == ada["autograded_max"], ben
    assert not ada["needs_review"] and not ben["needs_review"]

    # the formgrader: the instructor's, through the hub; a student is refused; no formgrader in students' servers
    service = f"/services/{COURSE_ID}/formgrader"
    r = hub.api("GET", f"{service}/api/assignments", "ines")
    assert r.status_code == 200, r.text
    assert AID in [a["name"] for a in r.json()]
    page = hub.login("ines").get(f"{hub.url}{service}", timeout=60)  # through the hub's OAuth, as a browser
    assert page.status_code == 200 and "formgrade" in page.text, (page.status_code, page.url)
    assert hub.api("GET", service, "ada", allow_redirects=False).status_code == 403
    page = hub.login("ada").get(f"{hub.url}{service}", timeout=60)
    assert page.status_code == 403 and "/hub/" in page.url, (page.status_code, page.url)
    assert hub.api("GET", "/user/ada/formgrader", "ada", allow_redirects=False).status_code == 404


def test_the_formgrader_deployment_gets_what_the_hub_gives_its_service(hub):
    """deploy/k8s/formgrader.yaml runs the formgrader outside the hub: it must set the variables the hub sets
    for the formgrader it starts here, with the same values but for the addresses and the token."""
    def service_env():
        for p in psutil.Process(hub.pid).children(recursive=True):
            try:
                variables = p.environ()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            if variables.get("JUPYTERHUB_SERVICE_NAME") == COURSE_ID:
                return {k: v for k, v in variables.items() if k.startswith("JUPYTERHUB_") and v}
    given = service_env()
    assert given and "JUPYTERHUB_API_TOKEN" in given, given
    deployment = [d for d in yaml.safe_load_all((ROOT / "deploy" / "k8s" / "formgrader.yaml").read_text())
                  if d["kind"] == "Deployment"][0]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    declared = {e["name"]: e.get("value") for e in container["env"]}
    assert set(given) <= set(declared), f"k8s/formgrader.yaml lacks {sorted(set(given) - set(declared))}"
    local = {"JUPYTERHUB_API_TOKEN", "JUPYTERHUB_API_URL", "JUPYTERHUB_SERVICE_URL"}
    assert {k: v for k, v in given.items() if k not in local} == {k: declared[k] for k in given if k not in local}


@pytest.fixture(scope="module")
def browser():
    if not (CHROMIUM and sync_playwright):
        if IN_CI:
            pytest.fail("the browser test needs Debian's chromium and playwright (python3 course.py test installs them)")
        pytest.skip("needs Debian's chromium and playwright (python3 course.py test installs them)")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


def test_student_logs_in_and_opens_the_notebook(hub, browser, tmp_path):
    """In Chromium: the hub's login page, then notebook 01 in the student's JupyterLab."""
    hub.start_servers("ben")
    hub.fetch("ben")
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{hub.url}/hub/login")
    page.fill("#username_input", "ben")
    page.fill("#password_input", USERS["students"]["ben"])
    page.click("#login_submit")
    page.wait_for_url("**/user/ben/lab**", timeout=90_000)
    page.goto(f"{hub.url}/user/ben/lab/tree/{AID}/{AID}.ipynb")
    notebook = page.locator(".jp-NotebookPanel")
    expect(notebook).to_contain_text("Exercise 1: softmax", timeout=60_000)
    expect(notebook).to_contain_text("YOUR CODE HERE")
    hub.tree.look()  # the notebook's kernel
    page.screenshot(path=tmp_path / "hub-notebook.png")

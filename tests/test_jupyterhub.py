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
CLASS = [f"s{i:02d}" for i in range(30)]  # the class of the burst test
USERS = {"instructors": {"ines": "ines-secret"},
         "students": {"ada": "ada-secret", "ben": "ben-secret", **{name: f"{name}-secret" for name in CLASS}}}
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
    port, api_port, hub_port, formgrader_port, check_port = free_ports(5)
    env = dict(os.environ, COURSE_HUB_STATE=str(state), COURSE_HUB_IP="127.0.0.1", COURSE_HUB_PORT=str(port),
               COURSE_HUB_API_PORT=str(api_port), COURSE_HUB_HUB_PORT=str(hub_port),
               COURSE_FORMGRADER_PORT=str(formgrader_port), COURSE_CHECK_PORT=str(check_port), OMP_NUM_THREADS="1",
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
            tree.look()  # what the hub started so far, stopped at the end even if the hub exits first
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


# --- check("...") in a student's notebook, answered by the class's check service ----------------------

WRONG_DIM = "def softmax(x, dim=-1):\n    e = (x - x.amax(dim=0, keepdim=True)).exp()\n    return e / e.sum(dim=0, keepdim=True)\n"


def run_in_kernel(hub, name: str, kernel: str, code: str, timeout: float = 300) -> str:
    """Run ``code`` in a kernel of ``name``'s server, over its websocket, as JupyterLab does; what it printed."""
    import uuid

    import websocket
    ws = websocket.create_connection(f"{hub.url.replace('http', 'ws')}/user/{name}/api/kernels/{kernel}/channels",
                                     header=[f"Authorization: {hub.token(name)['Authorization']}"], timeout=timeout)
    try:
        msg_id = uuid.uuid4().hex
        ws.send(json.dumps({"channel": "shell", "parent_header": {}, "metadata": {}, "buffers": [],
                            "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": name,
                                       "session": uuid.uuid4().hex, "version": "5.3"},
                            "content": {"code": code, "silent": False, "store_history": True,
                                        "user_expressions": {}, "allow_stdin": False}}))
        printed = []
        while True:
            msg = json.loads(ws.recv())
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                printed.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                printed.append(f"{msg['content']['ename']}: {msg['content']['evalue']}")
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return "".join(printed)
    finally:
        ws.close()


def solution(name: str) -> str:
    return solution_sources(AID)[name]


def test_check_in_a_students_notebook_asks_the_check_service(hub):
    """A kernel of ada's server runs check("softmax"): the class's check service judges the code that kernel
    last ran, as ada's, and the notebook shows the verdict."""
    hub.start_servers("ada")
    r = hub.api("POST", "/user/ada/api/kernels", "ada", json={"name": "python3"})
    assert r.status_code == 201, r.text
    kernel = r.json()["id"]
    try:
        assert run_in_kernel(hub, "ada", kernel, "import os\nprint(os.environ['AUTOGRADER_CHECK_URL'])").strip() \
            == f"{hub.url}/services/check"
        run_in_kernel(hub, "ada", kernel, f"from lib.checking import checker\ncheck = checker('{AID}')\n"
                                          f"import torch\n" + WRONG_DIM)
        shown = run_in_kernel(hub, "ada", kernel, 'check("softmax")')
        assert shown.startswith("softmax: 0 / 3 points") and "along dim 0" in shown, shown
        run_in_kernel(hub, "ada", kernel, solution("softmax"))  # edited and run again, not saved
        shown = run_in_kernel(hub, "ada", kernel, 'check("softmax")')
        assert shown.startswith("softmax: 3 / 3 points"), shown
    finally:
        hub.api("DELETE", f"/user/ada/api/kernels/{kernel}", "ada")
    assert "ada '01_self_attention' 'softmax': 3.0 / 3.0" in hub.log.read_text()  # judged as ada's


def check_request(hub, name: str | None, history: list, headers: dict | None = None) -> requests.Response:
    body = {"assignment": AID, "exercise": "softmax", "history": history, "student": "someone-else"}
    return requests.post(f"{hub.url}/services/check/check", json=body, timeout=300,
                         headers=headers if headers is not None else hub.token(name))


def test_the_check_service_knows_who_asks_and_limits_each_student(hub):
    right = ["import torch", solution("softmax")]
    assert check_request(hub, None, right, headers={}).status_code == 403  # no token
    session = hub.login("ben")
    session.get(f"{hub.url}/hub/home", timeout=30)
    xsrf = [c.value for c in session.cookies if c.name == "_xsrf"][-1]
    r = session.post(f"{hub.url}/hub/api/users/ben/tokens", json={"scopes": ["users:activity!user"]},
                     headers={"X-XSRFToken": xsrf}, timeout=30)
    weak = {"Authorization": f"token {r.json()['token']}"}
    assert check_request(hub, None, right, headers=weak).status_code == 403  # a token without the scope
    # one check at a time per student: ada's second is refused while her first runs; ben's is not held up
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        slow = ["import torch", solution("softmax") + "\nimport time\ntime.sleep(3)"]  # the cell takes 3 s
        first = pool.submit(check_request, hub, "ada", slow)
        time.sleep(1)
        second = pool.submit(check_request, hub, "ada", right)
        other = pool.submit(check_request, hub, "ben", right)
        answers = [first.result(), second.result(), other.result()]
    assert answers[0].status_code == 200 and answers[0].json()["points"] == 3, answers[0].text
    assert answers[1].status_code == 429 and "still running" in answers[1].json()["error"], answers[1].text
    assert answers[2].status_code == 200 and answers[2].json()["points"] == 3, answers[2].text
    log = hub.log.read_text()
    assert "someone-else" not in log and "ben '01_self_attention' 'softmax': 3.0 / 3.0" in log


def test_a_class_sized_burst(hub):
    """30 students check at once (on this machine's cores): every answer is right; the latency is printed."""
    import concurrent.futures
    right, wrong = ["import torch", solution("softmax")], ["import torch", WRONG_DIM]
    for name in CLASS:
        hub.token(name)  # logged in beforehand: the burst is the checks only

    def one(i, name):
        start = time.perf_counter()
        r = check_request(hub, name, wrong if i % 2 else right)
        return r, time.perf_counter() - start

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(len(CLASS)) as pool:
        done = list(pool.map(lambda a: one(*a), enumerate(CLASS)))
    wall = time.perf_counter() - start
    for i, (r, _) in enumerate(done):
        assert r.status_code == 200, r.text
        assert r.json()["points"] == (0 if i % 2 else 3), r.text
    seconds = sorted(t for _, t in done)
    p95 = seconds[int(0.95 * (len(seconds) - 1) + 0.5)]
    print(f"burst of {len(CLASS)} checks on {os.cpu_count()} cores: {wall:.1f} s in all, median "
          f"{seconds[len(seconds) // 2]:.1f} s, p95 {p95:.1f} s, max {seconds[-1]:.1f} s")

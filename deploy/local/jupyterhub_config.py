"""JupyterHub for the course on one machine: students' JupyterLab, nbgrader's exchange, the formgrader, and
the check service that answers the notebooks' check("...") cells.

    python3 course.py setup                  # the course, JupyterHub and its proxy (into .venv/node)
    mkdir hub && cat > hub/users.json        # {"instructors": {"ines": "PASSWORD"}, "students": {"sam": "..."}}
    COURSE_HUB_STATE=hub .venv/bin/jupyterhub -f deploy/local/jupyterhub_config.py

Then open http://127.0.0.1:8000. Students log in, fetch the assignments in the Assignments tab, work, and
submit. Instructors release and collect in the course folder, hub/course/ (`nbgrader release_assignment
01_self_attention`, `nbgrader collect 01_self_attention`, run there), grade with `python -m autograder
grade hub/course/submitted --out grades`, and open the formgrader at /services/transformers-from-scratch/.
The check service (autograder/check_service.py, at /services/check/) holds the hidden tests; students'
servers reach it with their own hub tokens.
tests/test_jupyterhub.py runs exactly this, on free ports in a temporary folder.

Everything lives in COURSE_HUB_STATE (default ./hub-state):

    users.json       the accounts (you write it): name -> password, instructors and students
    course/          the instructors' nbgrader course folder (made from solutions/ on the first start)
    exchange/        nbgrader's exchange
    homes/NAME/      each user's folder
    jupyterhub.sqlite, jupyterhub_cookie_secret, proxy.pid

Settings: COURSE_HUB_IP (127.0.0.1) and the ports COURSE_HUB_PORT (8000, the public one),
COURSE_HUB_API_PORT (8001, the proxy's API), COURSE_HUB_HUB_PORT (8081, the hub itself),
COURSE_FORMGRADER_PORT (9999) and COURSE_CHECK_PORT (10102). COURSE_CHECK_MODE is what a check shows: full
(points and messages, the default), points or off, for every notebook, or per notebook
("full 08_encoder_decoder=points").

Every user's server runs as the Unix user that runs the hub (SimpleLocalProcessSpawner): fine for a
trial or a test, not for a class whose students must not read each other's files. For that, make a
Unix account per user and switch to PAMAuthenticator and LocalProcessSpawner (commented out below),
or use Kubernetes (deploy/config.yaml).
"""
import hmac
import json
import os
import shutil
import sys
from pathlib import Path

from jupyterhub.auth import Authenticator
from jupyterhub.spawner import SimpleLocalProcessSpawner
from traitlets import Dict

from autograder import course, settings

c = get_config()  # noqa: F821 - provided by JupyterHub when it loads this file

COURSE_ID = "transformers-from-scratch"  # nbgrader's course id, and the formgrader service's name
HERE = Path(__file__).resolve().parent
DEPLOY = HERE.parent
STATE = Path(os.environ.get("COURSE_HUB_STATE", "hub-state")).resolve()
IP = os.environ.get("COURSE_HUB_IP", "127.0.0.1")
PORT, API_PORT, HUB_PORT, FORMGRADER_PORT, CHECK_PORT = (int(os.environ.get(name, default)) for name, default in (
    ("COURSE_HUB_PORT", 8000), ("COURSE_HUB_API_PORT", 8001), ("COURSE_HUB_HUB_PORT", 8081),
    ("COURSE_FORMGRADER_PORT", 9999), ("COURSE_CHECK_PORT", settings.Service.port)))
CHECK = "check"  # the check service's name: its URL is /services/check/
EXCHANGE = STATE / "exchange"
COURSE = STATE / "course"
ROOT_FLAGS = ["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []  # Jupyter refuses root

users_file = STATE / "users.json"
if not users_file.is_file():
    sys.exit(f"write {users_file}: {{\"instructors\": {{\"NAME\": \"PASSWORD\"}}, \"students\": {{...}}}}")
USERS = json.loads(users_file.read_text())
PASSWORDS = {**USERS.get("students", {}), **USERS.get("instructors", {})}

# The hub's own files, and where it listens
STATE.mkdir(parents=True, exist_ok=True)
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.JupyterHub.bind_url = f"http://{IP}:{PORT}"
c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{HUB_PORT}"
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{API_PORT}"
c.ConfigurableHTTPProxy.pid_file = str(STATE / "proxy.pid")
# The proxy comes from npm: course.py installs it into .venv/node; else it must be on PATH
proxy = Path(sys.prefix) / "node" / "node_modules" / ".bin" / "configurable-http-proxy"
if proxy.exists():
    c.ConfigurableHTTPProxy.command = [str(proxy)]


class CoursePasswords(Authenticator):
    """Each user logs in with the password users.json gives them."""
    passwords = Dict(help="user name -> password").tag(config=True)

    async def authenticate(self, handler, data):
        expected = self.passwords.get(data["username"])
        if expected is not None and hmac.compare_digest(expected.encode(), data["password"].encode()):
            return data["username"]
        return None


c.JupyterHub.authenticator_class = CoursePasswords
c.CoursePasswords.passwords = PASSWORDS
c.Authenticator.allowed_users = set(PASSWORDS)
# On a shared machine with real accounts instead:
# c.JupyterHub.authenticator_class = "pam"; c.JupyterHub.spawner_class = "localprocess"

# Students' servers: JupyterLab in their own folder, nbgrader's exchange set up by deploy/student/
c.JupyterHub.spawner_class = SimpleLocalProcessSpawner
c.SimpleLocalProcessSpawner.home_dir_template = str(STATE / "homes" / "{username}")
c.Spawner.cmd = [sys.executable, "-m", "jupyterhub.singleuser"]  # this environment's, whatever PATH says
c.Spawner.args = ROOT_FLAGS
c.Spawner.default_url = "/lab"
c.Spawner.ip = "127.0.0.1"
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 90
c.Spawner.env_keep = ["PATH", "PYTHONPATH", "VIRTUAL_ENV", "LANG", "LC_ALL", "OMP_NUM_THREADS", "MPLBACKEND",
                      "JUPYTERHUB_SINGLEUSER_APP"]
c.Spawner.environment = {
    "JUPYTER_CONFIG_PATH": str(DEPLOY / "student"),  # the exchange, no formgrader, no "create assignment"
    "COURSE_EXCHANGE": str(EXCHANGE),
    # check("...") asks the check service, with the server's token (lib/checking.py)
    "AUTOGRADER_CHECK_URL": f"http://{'127.0.0.1' if IP in ('0.0.0.0', '') else IP}:{PORT}/services/{CHECK}",
}
# a server's token may reach the check service (and what it could before: the server role's scopes)
c.Spawner.server_token_scopes = ["users:activity!user", "access:servers!server", f"access:services!service={CHECK}"]

# The formgrader, for the instructors group only: a Jupyter server on the course folder, run by the hub
c.JupyterHub.load_groups = {"instructors": {"users": sorted(USERS.get("instructors", {}))}}
c.JupyterHub.load_roles = [{
    "name": "instructors",
    "description": "open the course's formgrader",
    "groups": ["instructors"],
    "scopes": [f"access:services!service={COURSE_ID}"],
}, {
    "name": "user",  # every user: their own things (the default), and the check service
    "scopes": ["self", f"access:services!service={CHECK}"],
}]
c.JupyterHub.services = [{
    "name": COURSE_ID,
    "url": f"http://127.0.0.1:{FORMGRADER_PORT}",
    # started without the IRI grammar, which takes half of a Jupyter server's start: the hub exits when a service
    # it starts does not answer within about 10 s, and on a busy machine the formgrader took longer
    "command": [sys.executable, "-m", "autograder.serve", "jupyterhub.singleuser", *ROOT_FLAGS],
    "cwd": str(COURSE),
    "environment": {
        "JUPYTERHUB_DEFAULT_URL": "/formgrader",
        # nbgrader runs `alembic` from PATH when it opens the gradebook: this environment's scripts first
        "PATH": course.python_first(),
    },
    "oauth_no_confirm": True,
    "display": True,
}, {
    "name": CHECK,
    "url": f"http://127.0.0.1:{CHECK_PORT}",
    "command": [sys.executable, "-m", "autograder.check_service", "--port", str(CHECK_PORT),
                *(f"--mode={m}" for m in os.environ.get("COURSE_CHECK_MODE", "full").split())],
    "environment": {"PATH": course.python_first()},
}]

# The instructors' course folder and the exchange, made on the first start
EXCHANGE.mkdir(exist_ok=True)
if not COURSE.exists():
    from autograder.nbgrader_run import make_course

    partial = STATE / "course.partial"  # made aside, then renamed: the folder appears complete
    shutil.rmtree(partial, ignore_errors=True)
    make_course(partial, course.assignments())
    with open(partial / "nbgrader_config.py", "a") as f:
        f.write(f"c.Exchange.root = {str(EXCHANGE)!r}\n"
                "# every server runs as this Unix user, so submissions cannot be told apart by their owner\n"
                "c.ExchangeCollect.check_owner = False\n")
    partial.rename(COURSE)

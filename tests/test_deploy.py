"""deploy/ hangs together: what no test can run here (Kubernetes, an image build) is at least read.

Every YAML file parses; the image has one name everywhere; the Dockerfile installs what course.py
installs and copies files that exist; students' servers, the formgrader and the graders agree on
the course id, the exchange and the students' settings; the Dask examples grade one notebook per
single-threaded worker and retry a lost one once. tests/test_jupyterhub.py runs deploy/local/.
"""
import ast
import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import dask.config
import yaml

import course as setup_script  # the repository's course.py
from autograder.bundle import pyproject

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
COURSE_ID = "transformers-from-scratch"
SERVICE_SCOPE = f"access:services!service={COURSE_ID}"


def load(path: str) -> list:
    return [doc for doc in yaml.safe_load_all((DEPLOY / path).read_text()) if doc is not None]


def values() -> dict:
    return load("config.yaml")[0]


def manifest(path: str, kind: str) -> dict:
    (found,) = [doc for doc in load(path) if doc.get("kind") == kind]
    return found


def containers(pod_spec: dict) -> list:
    return pod_spec.get("initContainers", []) + pod_spec["containers"]


def env(container: dict) -> dict:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def dockerfile() -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (INSTRUCTION, arguments), continuation lines joined."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def image() -> str:
    single = values()["singleuser"]["image"]
    return f"{single['name']}:{single['tag']}"


def formgrader_config() -> str:
    return manifest("k8s/formgrader.yaml", "ConfigMap")["data"]["nbgrader_config.py"]


def config_value(source: str, name: str):
    """The value a config file assigns to ``c.<name>`` (a literal, or a call's first literal argument)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == f"c.{name}":
            value = node.value.args[1] if isinstance(node.value, ast.Call) else node.value
            return ast.literal_eval(value)
    raise AssertionError(f"c.{name} is not set")


def test_every_yaml_file_parses():
    files = sorted(DEPLOY.rglob("*.yaml")) + sorted(DEPLOY.rglob("*.json"))
    assert len(files) >= 6
    for path in files:
        docs = list(yaml.safe_load_all(path.read_text()))
        assert docs and all(isinstance(doc, dict) for doc in docs), path


def test_one_image_everywhere():
    name = image()
    used = {}
    for path in ("k8s/formgrader.yaml", "dask/daskcluster.yaml"):
        for doc in load(path):
            for key in ("template", "scheduler", "worker"):
                spec = doc.get("spec", {}).get(key, {}).get("spec")
                for container in containers(spec) if spec else []:
                    used[f"{path} {container['name']}"] = container["image"]
    assert len(used) == 4, used  # the formgrader, its init container, the Dask scheduler and workers
    assert set(used.values()) == {name}, used
    assert f"-t {name} " in (DEPLOY / "Dockerfile").read_text(), "the build command in the Dockerfile's header"
    assert name in (DEPLOY / "README.md").read_text()


def test_the_image_installs_what_course_py_installs():
    installs = [shlex.split(args) for instruction, args in dockerfile() if instruction == "RUN"
                for args in args.split("&&") if args.strip().startswith("pip install")]
    assert len(installs) == 2, installs
    for step in installs:
        assert step[2:4] == setup_script.CONSTRAINTS, "the versions constraints.txt pins (tests/test_versions.py)"
    torch, course = [[a for a in step[4:] if not a.startswith("--") and not a.startswith("https://")]
                     for step in installs]
    assert torch == setup_script.PIP_STEPS[0], "PyTorch, as course.py installs it"
    assert course[0] == setup_script.PIP_STEPS[1][0] == "-e" and len(course) == 2
    target, extras = re.fullmatch(r"(.*)\[(.*)\]", course[1]).groups()
    assert target == re.fullmatch(r"(.*)\[.*\]", setup_script.PIP_STEPS[1][1]).group(1), "the same checkout"
    project = pyproject()["project"]
    optional = project["optional-dependencies"]
    for extra in extras.split(","):
        assert set(optional[extra]) <= set(optional["dev"]), f"the tests ({extra!r} in dev) cover what the image has"
    assert {"cluster", "hub"} <= set(extras.split(","))


def test_the_dockerfile_copies_files_that_exist():
    copies = [shlex.split(args) for instruction, args in dockerfile() if instruction == "COPY"]
    assert copies
    for args in copies:
        sources = [a for a in args if not a.startswith("--")][:-1]
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: no such file in the repository"
    ignored = (DEPLOY / "Dockerfile.dockerignore").read_text().split()
    assert ".venv" in ignored and ".git" in ignored


def test_students_servers_get_the_student_settings():
    single = values()["singleuser"]
    extra_env = single["extraEnv"]
    copies = {shlex.split(args)[-1].rstrip("/"): shlex.split(args)[0].rstrip("/")
              for instruction, args in dockerfile() if instruction == "COPY"}
    assert copies[extra_env["JUPYTER_CONFIG_PATH"]] == "deploy/student", "the folder the image copies"
    assert f"/tmp/student.zip {extra_env['PYTHONPATH']}" in (DEPLOY / "Dockerfile").read_text(), "the bundle"
    (mount,) = single["storage"]["extraVolumeMounts"]
    assert mount["mountPath"] == extra_env["COURSE_EXCHANGE"]
    (volume,) = single["storage"]["extraVolumes"]
    assert volume["name"] == mount["name"]
    claim = volume["persistentVolumeClaim"]["claimName"]
    claims = {d["metadata"]["name"]: d for d in load("k8s/volumes.yaml")}
    assert claims[claim]["spec"]["accessModes"] == ["ReadWriteMany"], "every server mounts the exchange"
    student = (DEPLOY / "student" / "nbgrader_config.py").read_text()
    assert config_value(student, "CourseDirectory.course_id") == COURSE_ID
    assert 'os.environ.get("COURSE_EXCHANGE"' in student


def test_the_formgrader_is_the_instructors_service():
    hub = values()["hub"]
    name = COURSE_ID
    assert set(hub["services"]) == {COURSE_ID, "check"}
    roles = [r for r in hub["loadRoles"].values() if SERVICE_SCOPE in r["scopes"]]
    assert [r["groups"] for r in roles] == [["instructors"]]
    assert "instructors" in hub["config"]["JupyterHub"]["load_groups"]
    service = manifest("k8s/formgrader.yaml", "Service")
    assert hub["services"][name]["url"] == f"http://{service['metadata']['name']}:{service['spec']['ports'][0]['port']}"
    deployment = manifest("k8s/formgrader.yaml", "Deployment")
    pod = deployment["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert pod["metadata"]["labels"]["hub.jupyter.org/network-access-hub"] == "true"
    (container,) = pod["spec"]["containers"]
    variables = env(container)
    assert variables["JUPYTERHUB_SERVICE_NAME"] == name
    assert variables["JUPYTERHUB_SERVICE_URL"].endswith(f":{container['ports'][0]['containerPort']}")
    token = next(e for e in container["env"] if e["name"] == "JUPYTERHUB_API_TOKEN")["valueFrom"]["secretKeyRef"]
    assert token == {"name": "hub", "key": f"hub.services.{name}.apiToken"}, "where the chart keeps the token"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["config"] == variables["JUPYTER_CONFIG_PATH"]
    config = formgrader_config()
    assert config_value(config, "Exchange.root") == mounts["exchange"] == values()["singleuser"]["extraEnv"][
        "COURSE_EXCHANGE"]
    assert config_value(config, "CourseDirectory.root") == mounts["course"] == container["workingDir"]
    assert config_value(config, "CourseDirectory.course_id") == COURSE_ID
    assert pod["spec"]["securityContext"]["runAsUser"] == 1001, "grader, who may read the course"
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    claims = {d["metadata"]["name"] for d in load("k8s/volumes.yaml")}
    assert {volumes["course"]["persistentVolumeClaim"]["claimName"],
            volumes["exchange"]["persistentVolumeClaim"]["claimName"]} <= claims


def test_the_check_service_is_every_students_and_holds_the_tests():
    """check("...") on the class's hub: the students' servers reach the check service (k8s/check.yaml) with
    their own tokens; it runs as grader, who may read the course, with what a user namespace needs."""
    v = values()
    service = manifest("k8s/check.yaml", "Service")
    url = f"http://{service['metadata']['name']}:{service['spec']['ports'][0]['port']}"
    assert v["hub"]["services"]["check"]["url"] == url
    assert v["singleuser"]["extraEnv"]["AUTOGRADER_CHECK_URL"] == url + "/services/check"
    scope = "access:services!service=check"
    assert scope in v["hub"]["loadRoles"]["user"]["scopes"] and "self" in v["hub"]["loadRoles"]["user"]["scopes"]
    assert scope in v["hub"]["config"]["Spawner"]["server_token_scopes"]
    (rule,) = v["singleuser"]["networkPolicy"]["egress"]
    pod = manifest("k8s/check.yaml", "Deployment")["spec"]["template"]
    assert rule["to"][0]["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert rule["ports"][0]["port"] == service["spec"]["ports"][0]["port"]
    assert pod["metadata"]["labels"]["hub.jupyter.org/network-access-hub"] == "true"
    assert pod["spec"]["securityContext"]["runAsUser"] == 1001, "grader, who may read the course"
    assert pod["spec"]["securityContext"]["seccompProfile"] == {"type": "Unconfined"}, "user namespaces"
    (container,) = pod["spec"]["containers"]
    variables = env(container)
    assert variables["JUPYTERHUB_SERVICE_NAME"] == "check"
    assert variables["JUPYTERHUB_SERVICE_PREFIX"] == "/services/check/"
    assert json.loads(variables["JUPYTERHUB_OAUTH_ACCESS_SCOPES"]) == [scope]
    token = next(e for e in container["env"] if e["name"] == "JUPYTERHUB_API_TOKEN")["valueFrom"]["secretKeyRef"]
    assert token == {"name": "hub", "key": "hub.services.check.apiToken"}
    port = container["command"][container["command"].index("--port") + 1]
    assert int(port) == container["ports"][0]["containerPort"]


def _files(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _write(root: Path, files: dict) -> None:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)


def test_the_formgrader_starts_with_the_images_source_notebooks(tmp_path):
    """The formgrader's init step, run with sh on two folders standing for the image's checkout
    (/srv/course) and the course volume (/srv/nbgrader/course): on the first start, and after an
    upgrade of the image, the volume's source notebooks are the image's (an old notebook is replaced,
    one the image dropped is gone), and nothing else of the volume changes."""
    pod = manifest("k8s/formgrader.yaml", "Deployment")["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    assert {m["name"]: m["mountPath"] for m in init["volumeMounts"]} == {"course": "/srv/nbgrader/course"}
    *shell, script = init["command"]
    image, volume = tmp_path / "image", tmp_path / "volume"
    script = script.replace("/srv/nbgrader/course", str(volume)).replace("/srv/course", str(image))
    assert "/srv/" not in script, script
    volume.mkdir()

    def start(solutions: dict):
        shutil.rmtree(image, ignore_errors=True)
        _write(image / "solutions", solutions)
        _write(image, {"lib/x.py": b"lib"})
        subprocess.run([*shell, script], check=True, capture_output=True)
        assert _files(volume / "solutions") == solutions
        assert sorted(p.name for p in volume.iterdir() if p.name.startswith("solutions")) == ["solutions"]

    start({"01_a/01_a.ipynb": b"01 v1", "02_b/02_b.ipynb": b"02 v1", "02_b/data.txt": b"data v1"})
    kept = {"gradebook.db": b"grades", "submitted/sam/01_a/01_a.ipynb": b"sam's work", "notebooks/01_a/01_a.ipynb":
            b"release v1", "autograded/sam/01_a/01_a.ipynb": b"graded", "feedback/sam/01_a/01_a.html": b"feedback"}
    _write(volume, kept)
    start({"01_a/01_a.ipynb": b"01 v2", "02_b/data.txt": b"data v2", "03_c/03_c.ipynb": b"03 v2"})
    assert {k: v for k, v in _files(volume).items() if not k.startswith("solutions/")} == kept


def test_the_course_id_is_the_same_everywhere():
    course_config = (ROOT / "autograder" / "nbgrader_config.py").read_text()
    assert config_value(course_config, "CourseDirectory.course_id") == COURSE_ID
    assert f'COURSE_ID = "{COURSE_ID}"' in (DEPLOY / "local" / "jupyterhub_config.py").read_text()


def test_dask_grades_one_notebook_per_worker_and_retries_once():
    cluster = manifest("dask/daskcluster.yaml", "DaskCluster")
    (scheduler,) = cluster["spec"]["scheduler"]["spec"]["containers"]
    retries = {k: v for k, v in env(scheduler).items() if k.startswith("DASK_")}
    collected = dask.config.collect(paths=[], env=retries)
    assert dask.config.get("distributed.scheduler.allowed-failures", config=collected) == 1
    (worker,) = cluster["spec"]["worker"]["spec"]["containers"]
    args = worker["args"]
    assert args[:2] == ["dask", "worker"] and args[args.index("--nthreads") + 1] == "1"
    assert "--nworkers" not in args
    # the SLURM example sets the same option before it makes the scheduler, and one thread per job
    slurm = (DEPLOY / "dask" / "slurm.py").read_text()
    assert 'dask.config.set({"distributed.scheduler.allowed-failures": 1})' in slurm
    assert slurm.index("allowed-failures") < slurm.index("SLURMCluster(")
    assert "cores=1, processes=1" in slurm
    # the plain commands
    readme = (DEPLOY / "README.md").read_text()
    assert "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=1 dask scheduler" in readme
    assert re.search(r"dask worker tcp://\S+:8786 --nthreads 1 --nworkers \S+", readme)


def test_python_files_compile():
    paths = sorted(DEPLOY.rglob("*.py"))
    assert len(paths) >= 3
    for path in paths:
        compile(path.read_text(), str(path), "exec")


def test_the_readme_names_every_file():
    readme = (DEPLOY / "README.md").read_text()
    for path in sorted(DEPLOY.rglob("*")):
        if path.is_file() and path.name != "README.md" and "__pycache__" not in path.parts:
            assert path.name in readme, f"deploy/README.md does not say what {path.relative_to(DEPLOY)} is"


def test_the_proxy_named_is_the_proxy_installed():
    name, version = setup_script.PROXY.rsplit("@", 1)
    assert name == "configurable-http-proxy" and re.fullmatch(r"\d+\.\d+\.\d+", version), "pinned to a version"
    assert f"`{name}` {version}" in (DEPLOY / "README.md").read_text()
    assert setup_script.PROXY_DIR.is_relative_to(setup_script.VENV), "inside .venv: git-ignored, removed with it"

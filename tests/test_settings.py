"""Every default of the grader is stated once, in autograder/settings.py: the command lines, the course's
nbgrader configuration, the Execute step, the sandbox's fallbacks and the hub's configuration all give the same,
and every AUTOGRADER_* variable the project names is one settings.py defines and documents."""
import os
import re
import subprocess
import sys

from traitlets.config import Config, PyFileConfigLoader

from autograder import course, execute, settings
from autograder.settings import Limits

DEFAULTS = Limits()
SERVICE = settings.Service()
NAME = re.compile(r"AUTOGRADER_[A-Z_]+")


def _help(*module_and_command: str) -> str:
    return subprocess.run([sys.executable, "-m", *module_and_command, "--help"], cwd=course.ROOT,
                          capture_output=True, text=True, check=True, env=dict(os.environ, COLUMNS="200")).stdout


def test_the_command_line_defaults_are_the_limits():
    text = _help("autograder", "grade")
    assert f"seconds per cell (default {DEFAULTS.cell_timeout})" in text
    assert f"seconds per notebook (default {DEFAULTS.notebook_timeout})" in text
    assert f"in MiB (default {DEFAULTS.memory // 2**20})" in text
    assert f"the other (default {settings.Similar.threshold})" in _help("autograder", "similar")


def test_the_check_services_defaults_are_the_settings():
    text = _help("autograder.check_service")
    assert f"in a minute (default {SERVICE.rate})" in text
    assert f"the ones last checked (default {SERVICE.notebooks})" in text
    assert f"full|points|off (default {SERVICE.mode})" in text
    assert "(default full)" in _help("autograder.live", "serve") and SERVICE.mode == "full"
    from autograder import live
    assert live.Service.__init__.__defaults__[-1] == SERVICE.own_notebooks


def test_the_nbgrader_configuration_and_the_execute_step_give_the_limits():
    loader = PyFileConfigLoader("nbgrader_config.py", path=str(course.ROOT / "autograder"))
    config = loader.load_config()
    assert config.Execute.timeout == DEFAULTS.cell_timeout
    step = execute.GuardedExecute(config=Config())
    assert step.notebook_timeout == DEFAULTS.notebook_timeout
    assert step.output_limit == DEFAULTS.output


def test_the_sandbox_falls_back_to_the_limits_and_reads_back_what_the_grader_wrote():
    """Started without the grader's settings (say, by stock nbgrader), the sandbox uses the same defaults."""
    told = settings.Sandbox.from_environ({})
    assert (told.pids, told.scratch_mb, told.memory) == (DEFAULTS.pids, DEFAULTS.scratch_mb, 0)
    limits = Limits(memory=123 * 2**20, pids=77, scratch_mb=9)
    written = settings.Sandbox.of(limits, view="/v", keep=["/a", "/b"], hide=["/h"], scratch_dir="/s", log="/l")
    assert settings.Sandbox.from_environ(written.environ()) == written
    assert set(written.environ()) <= set(settings.ENVIRONMENT)


def test_the_cluster_and_the_hub_take_their_defaults_from_the_settings():
    from autograder import cluster
    assert (cluster.POLL, cluster.STALL, cluster.IDLE) == (settings.Cluster.poll, settings.Cluster.stall,
                                                         settings.Cluster.pool_idle)
    hub = (course.ROOT / "deploy" / "local" / "jupyterhub_config.py").read_text()
    assert '("COURSE_CHECK_PORT", settings.Service.port)' in hub
    assert f"COURSE_CHECK_PORT ({settings.Service.port})" in hub  # as its docstring says


def _project_files():
    for folder in ("autograder", "lib", "tests", "deploy", "benchmarks", "docs", ".ci"):
        for path in sorted((course.ROOT / folder).rglob("*")):
            if path.is_file() and path.suffix in (".py", ".md", ".yaml", ".yml", ".toml", "") and \
                    "__pycache__" not in path.parts and "_build" not in path.parts:
                yield path
    yield from (course.ROOT / name for name in ("course.py", "README.md", "nbgrader_config.py"))


def test_every_environment_name_is_defined_and_documented_in_the_settings():
    used = {}
    for path in _project_files():
        for name in NAME.findall(path.read_text(errors="replace")):
            used.setdefault(name, set()).add(str(path.relative_to(course.ROOT)))
    undefined = {name: sorted(where) for name, where in used.items() if name not in settings.ENVIRONMENT}
    assert not undefined, f"AUTOGRADER_* names that autograder/settings.py does not define: {undefined}"
    assert all(len(text) > 20 for text in settings.ENVIRONMENT.values())


def test_the_environment_names_are_written_in_at_most_two_files_of_the_code():
    """settings.py, and lib/checking.py (which runs in the student's kernel, where the grader is not imported)."""
    holders = sorted(str(p.relative_to(course.ROOT)) for p in _project_files()
                     if p.parts[len(course.ROOT.parts)] in ("autograder", "lib", "course.py") and p.suffix == ".py"
                     and NAME.search(p.read_text()))
    assert holders == ["autograder/settings.py", "lib/checking.py"], holders
    in_kernel = set(NAME.findall((course.ROOT / "lib" / "checking.py").read_text()))
    assert in_kernel == {settings.CHECK_URL, settings.LIVE_SOCKET}


def test_the_settings_page_states_the_same_defaults_and_every_variable():
    from dataclasses import fields
    page = (course.ROOT / "docs" / "settings.md").read_text()
    for cls in (settings.Limits, settings.Service, settings.Cluster, settings.Similar):
        for f in fields(cls):
            row = re.search(rf"^\| `{cls.__name__}\.{f.name}` \| `([^`]*)` \|", page, re.M)
            assert row, f"docs/settings.md has no row for {cls.__name__}.{f.name}"
            assert row.group(1) == repr(f.default), (f.name, row.group(1), f.default)
    for name in settings.ENVIRONMENT:
        assert f"| `{name}` |" in page, name

"""Every default of the grader's limits is stated once, in autograder/limits.py: the command line, the course's
nbgrader configuration, the Execute step and the sandbox's fallbacks all give the same."""
import os
import subprocess
import sys

from traitlets.config import Config, PyFileConfigLoader

from autograder import course, execute
from autograder.limits import Limits

DEFAULTS = Limits()


def _help(command: str) -> str:
    return subprocess.run([sys.executable, "-m", "autograder", command, "--help"], cwd=course.ROOT,
                          capture_output=True, text=True, check=True, env=dict(os.environ, COLUMNS="200")).stdout


def test_the_command_line_defaults_are_the_limits():
    text = _help("grade")
    assert f"seconds per cell (default {DEFAULTS.cell_timeout})" in text
    assert f"seconds per notebook (default {DEFAULTS.notebook_timeout})" in text
    assert f"in MiB (default {DEFAULTS.memory // 2**20})" in text


def test_the_nbgrader_configuration_and_the_execute_step_give_the_limits():
    loader = PyFileConfigLoader("nbgrader_config.py", path=str(course.ROOT / "autograder"))
    config = loader.load_config()
    assert config.Execute.timeout == DEFAULTS.cell_timeout
    step = execute.GuardedExecute(config=Config())
    assert step.notebook_timeout == DEFAULTS.notebook_timeout
    assert step.output_limit == DEFAULTS.output


def test_the_sandbox_falls_back_to_the_limits():
    """Started without the grader's settings (say, by stock nbgrader), the sandbox uses the same defaults: read
    from its source, so that no second number can hide there."""
    source = (course.ROOT / "autograder" / "sandbox.py").read_text()
    for name, field in (("AUTOGRADER_PIDS", "pids"), ("AUTOGRADER_SCRATCH_MB", "scratch_mb")):
        [line] = [line for line in source.splitlines() if f'os.environ.get("{name}"' in line]
        assert f"Limits.{field}" in line, line

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # `tests.*` helpers importable
os.environ.setdefault("MPLBACKEND", "Agg")

# Each pytest-xdist worker (and every kernel it starts, which inherits the variable) gets its share of the
# cores: PyTorch's default of one thread per core in every process crawls on a busy machine. Only the workers
# know how many they are (the controller, which imports this file first, must leave the variable alone).
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    os.environ.setdefault("OMP_NUM_THREADS",
                          str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))))

# The quick tier, `python3 course.py test --quick` (pytest -m quick): what needs no kernel of its own, in about a
# minute on two idle cores. The library, the judges on a sample of the mistake catalogue in this process
# (test_mistakes.py marks which), the judge-kernel channel, the settings, versions and docs, the release being
# up to date, the deployment's files. `python3 course.py test` runs everything, and is what CI runs.
QUICK_FILES = {
    "test_lib_bpe.py", "test_lib_char_lm.py", "test_lib_components.py", "test_lib_device.py",
    "test_lib_multi30k.py", "test_lib_order.py", "test_lib_self_attention.py", "test_lib_subword.py",
    "test_lib_translation_data.py", "test_lib_efficient_attention.py", "test_lib_gpt.py", "test_lib_lm.py",
    "test_guard_and_testing.py",
    "test_probe.py", "test_settings.py", "test_versions.py", "test_docs.py", "test_environment.py",
    "test_release.py", "test_deploy.py", "test_layers.py",
}
SLOW_IN_QUICK_FILES = {"test_course_py_lab_opens_jupyterlab_also_as_root",
                       "test_the_code_runs_on_the_oldest_python_it_promises",
                       "test_the_formgrader_starts_with_the_images_source_notebooks"}


def pytest_configure(config):
    config.addinivalue_line("markers", "quick: in the quick tier (python3 course.py test --quick)")


# The files that take longest (grading whole classes), first: pytest-xdist hands out whole files
# (--dist loadfile) in this order, so no long file starts while the other worker sits idle at the end.
# Measured with --durations (the times a run prints at its end).
LONGEST_FIRST = ["test_mistakes.py", "test_notebooks_run.py", "test_cluster.py", "test_faults.py", "test_hostile.py",
                 "test_live_check.py", "test_sandbox.py", "test_references_stay_out.py", "test_isolation.py",
                 "test_jupyterhub.py", "test_grading.py", "test_isolation_variations.py", "test_bundle.py",
                 "test_stock_nbgrader.py", "test_formgrader_browser.py", "test_grader_faults.py"]


def pytest_collection_modifyitems(config, items):
    import pytest

    def rank(item):
        name = Path(str(item.fspath)).name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)
    items.sort(key=rank)  # stable: within a file, and among the rest, the order stays
    for item in items:
        if Path(str(item.fspath)).name in QUICK_FILES and item.originalname not in SLOW_IN_QUICK_FILES:
            item.add_marker(pytest.mark.quick)

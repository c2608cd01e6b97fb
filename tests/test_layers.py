"""The grader's modules form layers that only point down (docs/layout.md draws them): no module imports one of a
higher layer, and no import circle, counting imports inside functions too."""
import ast

from autograder import course

# From the bottom up. A new module goes into the lowest layer its imports allow.
LAYERS = [
    # plain facts and data: where the course is, the settings, the results model, files, processes, the scan
    {"settings", "course", "results", "files", "scratch", "proctree", "scan", "cgroup", "nodisplay"},
    # building blocks: the kernel's side of the channel, the sandbox, intake, bundles, nbgrader's commands
    {"probe", "sandbox", "zygote", "spawn", "sandbox_log", "intake", "bundle", "fingerprint", "nbgrader_run", "report",
     "class_page", "export", "gradebook", "release", "similar"},
    # the judges, one module per exercise
    {"checks"},
    # the grader's end of a kernel, and the process that runs nbgrader
    {"channel", "worker"},
    # judging one notebook (nbgrader's Execute step, grading.py) or one exercise (live.py)
    {"execute", "judging", "grading", "live"},
    # who runs them: the pool on this machine, Dask, the hub's check service, nbgrader's configuration
    {"pool", "cluster", "check_service", "nbgrader_config"},
    # the choice of runner
    {"runner"},
    # the commands
    {"__main__", "serve"},
]
LAYER = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _module(path) -> str:
    """autograder/checks/bpe/merge_pair.py -> 'checks'; autograder/grading.py -> 'grading'."""
    parts = path.relative_to(course.ROOT / "autograder").with_suffix("").parts
    return parts[0]


def _imports(path) -> set:
    """The autograder modules that a file imports, anywhere in it."""
    package = ["autograder", *path.relative_to(course.ROOT / "autograder").parent.parts]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            target = [*base, *(node.module.split(".") if node.module else [])]
            names = [target + [a.name] for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name.split(".") for a in node.names]
        else:
            continue
        for name in names:
            if name[0] == "autograder" and len(name) > 1 and (name[1] in LAYER or name[1] == "checks"):
                found.add(name[1])
    return found


def graph() -> dict:
    edges = {}
    for path in sorted((course.ROOT / "autograder").rglob("*.py")):
        if "__pycache__" in path.parts or path.name == "__init__.py" and path.parent.name == "autograder":
            continue
        name = _module(path)
        edges.setdefault(name, set()).update(_imports(path) - {name})
    return edges


def test_every_module_has_a_layer():
    assert set(graph()) <= set(LAYER), f"put these in a layer: {sorted(set(graph()) - set(LAYER))}"


def test_no_module_imports_a_higher_layer():
    upward = [f"{a} (layer {LAYER[a]}) imports {b} (layer {LAYER[b]})"
              for a, deps in graph().items() for b in deps if LAYER[b] > LAYER[a]]
    assert not upward, upward


def test_no_import_circle():
    edges, state = graph(), {}

    def visit(node, path):
        if state.get(node) == "done":
            return
        assert state.get(node) != "open", f"import circle: {' -> '.join(path + [node])}"
        state[node] = "open"
        for nxt in sorted(edges.get(node, ())):
            visit(nxt, path + [node])
        state[node] = "done"
    for node in sorted(edges):
        visit(node, [])


def test_the_checker_finds_an_upward_import(tmp_path, monkeypatch):
    """The tests above could fail: a results model that imported the grader would be caught."""
    root = tmp_path / "course"
    (root / "autograder").mkdir(parents=True)
    (root / "autograder" / "results.py").write_text("from .grading import Run\n")
    (root / "autograder" / "grading.py").write_text("from . import results\n")
    monkeypatch.setattr(course, "ROOT", root)
    edges = graph()
    assert edges == {"results": {"grading"}, "grading": {"results"}}
    assert any(LAYER[b] > LAYER[a] for a, deps in edges.items() for b in deps)

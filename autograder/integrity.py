"""Undo tampering with the libraries the hidden tests rely on, before every cell.

The grader runs ``install()`` in the kernel before any student code (the first
cell of the graded notebook). It records the modules ``torch``,
``torch.testing``, ``torch.nn.functional``, ``lib.*``, ``autograder.*`` and
``builtins``, their attributes and those of ``torch.Tensor``, and then, before
each cell, puts back any that a cell replaced or deleted. So a student cell
that sets ``torch.allclose = lambda *a, **k: True`` or replaces
``lib.testing.assert_close`` has no effect on the tests that run after it.
What this cannot undo (code that digs into the interpreter) the static scan
in ``autograder.scan`` flags for a human.
"""
import builtins
import importlib
import sys

PREFIXES = ("torch.testing", "torch.nn.functional", "lib", "autograder")
_snapshot = {}


def _watched():
    import torch  # noqa: F401 - make sure the modules are loaded before taking the snapshot
    import torch.nn.functional  # noqa: F401
    import torch.testing  # noqa: F401
    import lib.guard  # noqa: F401
    import lib.testing  # noqa: F401
    import pkgutil

    import autograder.checks as checks
    for info in pkgutil.iter_modules(checks.__path__):  # every hidden test's module, loaded before students run
        importlib.import_module(f"autograder.checks.{info.name}")
    names = ["torch", "builtins"] + [n for n in list(sys.modules)
                                     if n.startswith(PREFIXES) and sys.modules[n] is not None]
    return {n: sys.modules[n] for n in names}


def install() -> None:
    """Take the snapshot and undo changes to it before every later cell."""
    import torch
    modules = _watched()
    _snapshot["modules"] = modules
    _snapshot["attrs"] = {name: dict(vars(m)) for name, m in modules.items()}
    _snapshot["tensor"] = dict(vars(torch.Tensor))
    _snapshot["torch_Tensor"] = torch.Tensor
    shell = getattr(builtins, "get_ipython", lambda: None)()
    if shell is not None:
        shell.events.register("pre_run_cell", restore)


def restore(*_info) -> None:
    """Put back every watched module, attribute and Tensor method that changed."""
    if not _snapshot:
        return
    modules = _snapshot["modules"]
    for name, module in modules.items():
        if sys.modules.get(name) is not module:
            sys.modules[name] = module
        current = vars(module)
        for attr, value in _snapshot["attrs"][name].items():
            if current.get(attr, _MISSING) is not value:
                try:
                    setattr(module, attr, value)
                except (AttributeError, TypeError):
                    pass
    tensor = _snapshot["torch_Tensor"]
    modules["torch"].Tensor = tensor
    for attr, value in _snapshot["tensor"].items():
        if vars(tensor).get(attr, _MISSING) is not value:
            try:
                setattr(tensor, attr, value)
            except (AttributeError, TypeError):
                pass
    for attr in set(vars(tensor)) - set(_snapshot["tensor"]):  # a method added to Tensor (say __eq__)
        try:
            delattr(tensor, attr)
        except (AttributeError, TypeError):
            pass
    importlib.invalidate_caches()


_MISSING = object()

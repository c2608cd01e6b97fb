"""Flag student code that reaches for the grading machinery, for a human to read.

The hidden tests run in the student's kernel, after the student's code, so a
determined student could tamper with them in ways no check inside that
kernel can rule out. ``autograder.integrity`` undoes the plain tricks
(replacing ``torch.allclose`` or a course helper); this scan names, in the
report, every line that does something a correct answer never needs: ending
the process, changing other modules, touching the import system, the garbage
collector, raw memory, other processes, files outside the notebook's folder,
or code built from strings.
"""
import ast

MODULES = {"ctypes": "raw memory access (ctypes)", "gc": "the garbage collector (gc)",
           "subprocess": "starting other programs (subprocess)", "importlib": "the import machinery (importlib)",
           "inspect": "reading other code (inspect)", "signal": "signal handlers (signal)",
           "builtins": "Python's builtins", "sqlite3": "a database (sqlite3)", "shutil": "file operations (shutil)",
           "socket": "the network (socket)", "multiprocessing": "other processes (multiprocessing)",
           "threading": "threads (threading)", "autograder": "the grader's own code"}
CALLS = {"exec": "running code built from a string (exec)", "eval": "running code built from a string (eval)",
         "compile": "compiling code from a string", "__import__": "importing by name (__import__)",
         "setattr": "setattr on an object", "delattr": "delattr on an object", "globals": "globals()",
         "get_ipython": "the IPython shell (get_ipython)", "open": "opening a file"}
ATTRS = {"_exit": "ending the kernel (os._exit)", "exit": "exiting (sys.exit / exit)", "kill": "killing a process",
         "fork": "forking the process", "system": "running a shell command", "modules": "sys.modules",
         "settrace": "tracing (sys.settrace)", "setprofile": "profiling hooks", "remove": "removing a file",
         "unlink": "removing a file", "rmtree": "removing a folder", "chdir": "changing folder (os.chdir)",
         "__dict__": "an object's __dict__", "__globals__": "a function's globals", "__code__": "a function's code",
         "__builtins__": "the builtins", "__subclasses__": "class internals (__subclasses__)"}
DUNDERS = {"__eq__", "__ne__", "__bool__", "__lt__", "__le__", "__gt__", "__ge__", "__torch_function__",
           "__torch_dispatch__", "__instancecheck__", "__hash__", "__getattribute__"}


def suspicious(source: str) -> list[str]:
    """One line per suspicious construct in ``source``: 'line N: what'."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []  # it will fail when run; nothing to flag
    found = []
    imported = set()

    def add(node, what):
        line = f"line {getattr(node, 'lineno', '?')}: {what}"
        if line not in found:
            found.append(line)

    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            imported.update(a.asname or a.name.split(".")[0] for a in node.names)
            for name in names:
                imported.add(name.split(".")[0])
                if name.split(".")[0] in MODULES:
                    add(node, MODULES[name.split(".")[0]])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in CALLS:
            add(node, CALLS[node.func.id])
        elif isinstance(node, ast.Attribute) and node.attr in ATTRS:
            add(node, ATTRS[node.attr])
        elif isinstance(node, ast.FunctionDef) and node.name in DUNDERS:
            add(node, f"a class that redefines {node.name}")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = list(node.targets) if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            while targets:
                t = targets.pop()
                if isinstance(t, (ast.Tuple, ast.List)):
                    targets.extend(t.elts)
                elif isinstance(t, ast.Attribute) and _rooted_in_module(t, imported):
                    add(node, f"changing {ast.unparse(t)}, an attribute of a module")
    return found


def _rooted_in_module(node: ast.Attribute, imported) -> bool:
    """``torch.allclose = ...``, ``lib.testing.x = ...``, ``torch.Tensor.__eq__ = ...``."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and (node.id in imported or node.id in {"torch", "F", "nn", "np", "math",
                                                                               "lib", "sys", "os"})

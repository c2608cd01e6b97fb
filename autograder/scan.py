"""Flag student code that reaches for the grading machinery, for a human to read.

The verdicts are made outside the student's kernel (``autograder/execute.py``),
so nothing in a notebook can change them. But two rules of the course live
inside the kernel and cannot be made tamper-proof there: the ban on PyTorch's
built-ins ("write softmax yourself", ``lib.guard``) and the trusted references
that grade each exercise on its own. So the grader also reads every answer
and every cell the student added, and names each line that does something a
correct answer never needs:

- reaching into PyTorch's internals (``torch._C``, private names, the
  dispatcher's modes, ``torch.ops``), which can switch the ban off;
- unwrapping or re-trusting functions (``__wrapped__``, closures, code
  objects), and frame, traceback or garbage-collector introspection;
- IPython's shell (``get_ipython``, magics, ``!`` commands), the import system
  (``sys.modules``, ``importlib``), the grader's own modules;
- ending the process, other threads and processes (whose work the ban
  does not reach, see ``autograder/probe.py``), raw memory (``ctypes``), signals,
  files and folders, code built from strings, attributes looked up by a
  computed or private name, changing other modules' attributes, redefining
  comparison or pickling methods.

A flagged notebook is marked ``needs_review`` in grades.csv and listed first
in report.txt, with each reason. No correct solution of the course is
flagged (a test checks it).
"""
import ast
import threading

MODULES = {"ctypes": "raw memory access (ctypes)", "gc": "the garbage collector (gc)",
           "subprocess": "starting other programs (subprocess)", "importlib": "the import machinery (importlib)",
           "inspect": "frame and code introspection (inspect)", "signal": "signal handlers (signal)",
           "builtins": "Python's builtins", "sqlite3": "a database (sqlite3)", "shutil": "file operations (shutil)",
           "socket": "the network (socket)", "multiprocessing": "other processes (multiprocessing)",
           "threading": "threads (threading)", "concurrent": "threads or processes (concurrent.futures)",
           "autograder": "the grader's own code",
           "IPython": "IPython's shell (IPython)", "ipykernel": "the kernel's internals (ipykernel)",
           "traceback": "tracebacks and frames (traceback)", "pickle": "pickling (pickle)",
           "marshal": "code objects (marshal)", "copyreg": "pickling hooks (copyreg)", "dis": "bytecode (dis)",
           "types": "building functions and code objects (types)", "glob": "listing files (glob)",
           "pathlib": "files and folders (pathlib)", "tempfile": "files (tempfile)", "mmap": "raw memory (mmap)",
           "weakref": "object references (weakref)", "atexit": "exit hooks (atexit)"}
CALLS = {"exec": "running code built from a string (exec)", "eval": "running code built from a string (eval)",
         "compile": "compiling code from a string", "__import__": "importing by name (__import__)",
         "setattr": "setattr on an object", "delattr": "delattr on an object", "globals": "globals()",
         "vars": "an object's attributes (vars)", "get_ipython": "the IPython shell (get_ipython)",
         "open": "opening a file", "breakpoint": "the debugger (breakpoint)"}
ATTRS = {"_exit": "ending the kernel (os._exit)", "exit": "exiting (sys.exit / exit)", "kill": "killing a process",
         "fork": "forking the process", "system": "running a shell command", "popen": "running a shell command",
         "modules": "sys.modules", "meta_path": "the import system (sys.meta_path)",
         "path_hooks": "the import system (sys.path_hooks)", "excepthook": "the exception hook (sys.excepthook)",
         "settrace": "tracing (sys.settrace)", "setprofile": "profiling hooks", "_getframe": "frame introspection",
         "f_back": "frame introspection", "f_locals": "frame introspection", "f_globals": "frame introspection",
         "f_code": "frame introspection", "tb_frame": "frame introspection", "tb_next": "frame introspection",
         "gi_frame": "frame introspection", "cr_frame": "frame introspection", "exc_info": "the current exception",
         "remove": "removing a file", "unlink": "removing a file", "rmtree": "removing a folder",
         "chdir": "changing folder (os.chdir)", "listdir": "listing a folder", "scandir": "listing a folder",
         "walk": "walking folders", "iterdir": "listing a folder", "rglob": "listing folders",
         "read_text": "reading a file", "read_bytes": "reading a file", "symlink": "making a link",
         "symlink_to": "making a link", "link": "making a link", "rename": "renaming a file",
         "replace": None,  # str.replace is everyday code; Path.replace is caught by pathlib
         "__dict__": "an object's __dict__", "__globals__": "a function's globals", "__code__": "a function's code",
         "__builtins__": "the builtins", "__subclasses__": "class internals (__subclasses__)",
         "__wrapped__": "unwrapping a function (__wrapped__)", "__closure__": "a function's closure",
         "cell_contents": "a function's closure", "__func__": "a method's function", "__defaults__": "a "
         "function's defaults", "__kwdefaults__": "a function's defaults", "__mro__": "class internals (__mro__)",
         "__bases__": "class internals (__bases__)", "user_ns": "the IPython shell's namespace",
         "events": "IPython's events", "showtraceback": "IPython's tracebacks", "run_cell": "IPython's cell runner",
         "ops": "PyTorch's operator registry (torch.ops)", "library": "PyTorch's operator registry (torch.library)",
         "overrides": "PyTorch's function overrides (torch.overrides)",
         "TorchDispatchMode": "a PyTorch dispatcher mode", "TorchFunctionMode": "a PyTorch function mode"}
DUNDERS = {"__eq__", "__ne__", "__bool__", "__lt__", "__le__", "__gt__", "__ge__", "__torch_function__",
           "__torch_dispatch__", "__instancecheck__", "__subclasscheck__", "__hash__", "__getattribute__",
           "__reduce__", "__reduce_ex__", "__getstate__", "__setstate__", "__del__", "__init_subclass__",
           "__class_getitem__", "__set_name__"}
TORCH_ROOTS = {"torch", "F", "nn"}
GUARD = "the course's ban on built-ins (lib.guard: trusted, lifted, forbid)"


def suspicious(source: str) -> list[str]:
    """One line per suspicious construct in ``source``: 'line N: what'."""
    with _PARSING:  # CPython 3.11 before 3.11.8 can fail parsing in two threads at once (gh-106905)
        return _suspicious(source)


_PARSING = threading.Lock()


def _suspicious(source: str) -> list[str]:
    python, magic = _as_python(source)
    found = [f"line {n}: IPython magic or shell command ({what})" for n, what in magic]
    try:
        tree = ast.parse(python)
    except SyntaxError:
        return found  # it will fail when run; nothing more to flag
    imported = set()

    def add(node, what):
        line = f"line {getattr(node, 'lineno', '?')}: {what}"
        if what and line not in found:
            found.append(line)

    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            imported.update(a.asname or a.name.split(".")[0] for a in node.names)
            for name in names:
                imported.add(name.split(".")[0])
                if name.split(".")[0] in MODULES:
                    add(node, MODULES[name.split(".")[0]])
                if any(part.startswith("_") for part in name.split(".")):
                    add(node, f"a private module ({name})")
                if name == "lib.guard" or name == "lib" and any(a.name == "guard" for a in node.names):
                    add(node, GUARD)
            if isinstance(node, ast.ImportFrom):
                for a in node.names:
                    if a.name.startswith("_") or a.name in ATTRS and ATTRS[a.name]:
                        add(node, f"importing {a.name} from {node.module}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in CALLS:
                add(node, CALLS[node.func.id])
            if node.func.id in ("getattr", "hasattr") and len(node.args) >= 2:
                name = node.args[1]
                if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                    add(node, "an attribute looked up by a computed name (getattr)")
                elif name.value.startswith("_") or name.value in ATTRS and ATTRS[name.value]:
                    add(node, f"getattr of {name.value!r}")
        elif isinstance(node, ast.Attribute):
            if node.attr in ATTRS:
                add(node, ATTRS[node.attr])
            if node.attr == "guard" and _root(node) == "lib":
                add(node, GUARD)
            elif node.attr.startswith("_") and not (node.attr.startswith("__") and node.attr.endswith("__")) \
                    and _root(node) in TORCH_ROOTS:
                add(node, f"PyTorch's internals ({ast.unparse(node)})")
        elif isinstance(node, ast.Name) and node.id in ("__builtins__", "__loader__", "__spec__"):
            add(node, "the interpreter's internals")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in DUNDERS:
            add(node, f"a class that redefines {node.name}")
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = list(node.targets) if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            while targets:
                t = targets.pop()
                if isinstance(t, (ast.Tuple, ast.List)):
                    targets.extend(t.elts)
                elif isinstance(t, ast.Attribute) and _root(t) in imported | TORCH_ROOTS | {"np", "math", "lib",
                                                                                               "sys", "os"}:
                    add(node, f"changing {ast.unparse(t)}, an attribute of a module")
    return sorted(found, key=lambda line: int(line.split()[1].rstrip(":")) if line.split()[1][:-1].isdigit() else 0)


def _root(node: ast.AST) -> str:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""


def _as_python(source: str):
    """(Python source, [(line, magic)]): IPython's syntax (%magic, %%cell magic, !command) turned into the
    calls IPython makes of it, each noted."""
    magic = []
    for n, line in enumerate(source.splitlines(), 1):
        stripped = line.lstrip()
        if stripped.startswith(("%", "!")) or ("=" in stripped and stripped.split("=", 1)[1].lstrip()
                                                .startswith(("!", "%"))):
            magic.append((n, stripped.split()[0][:40] if stripped.split() else stripped[:40]))
    try:
        from IPython.core.inputtransformer2 import TransformerManager
        return TransformerManager().transform_cell(source), magic
    except Exception:  # noqa: BLE001 - IPython missing or confused: scan what is there
        return source, magic

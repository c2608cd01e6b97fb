"""The kernel side of grading: run the student's code on the grader's inputs and send back what it computed.

A hidden test is split in two. The *judge* (``autograder/checks/``) runs in the
grader's own process: it makes the inputs, computes the expected values with
trusted references, and decides pass or fail. This module is the other half.
It runs in the student's kernel and only computes: it calls the student's
function or module on the inputs the judge sends and returns the result. It
never sees an expected value and never decides anything, so student code that
patches it can only change what its own answers look like.

Everything crosses between the two as data, in both directions:

- plain Python values (None, bool, int, float, str, and lists, tuples, dicts,
  sets of them) as JSON, tagged so that a tuple stays a tuple;
- tensors in the ``safetensors`` format, which holds numbers and shapes only;
- anything else (a module, a function, an object of the student's own class)
  stays in the kernel: the judge gets a numbered handle and may call it, read
  its attributes as data, or ask for a description of it (``describe``).

Nothing is ever unpickled; sizes are capped on both sides (``MAX_BYTES``).

One request is one JSON text (``handle``); the judge sends it as a short
``serve(...)`` call that the kernel executes, and the reply comes back as a
display message of type ``MIME``. When the judge runs inside the kernel (stock
nbgrader without the course's configuration, or the test suite's fast path),
it calls ``handle`` directly, with the same texts.
"""
import _thread
import base64
import builtins
import collections
import contextlib
import itertools
import json
import os
import re
import sys
import threading
import time
import types
import warnings

import torch

MIME = "application/vnd.autograder.probe+json"
MAX_BYTES = 64 * 2**20  # largest request or reply, in bytes of JSON text
MAX_ITEMS = 100_000  # most values (list items, dict entries, tensors) in one message
MAX_DEPTH = 40  # deepest nesting of lists, tuples and dicts
MAX_OPS = 20_000  # most operators recorded by a watched call
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SCALARS = frozenset((type(None), bool, int, float, str))
LEAVES = SCALARS - {float}  # values sent as they are, without a call (a float may be nan or inf: tagged)
DICTS = {dict: "dict", collections.Counter: "Counter", collections.OrderedDict: "OrderedDict",
         collections.defaultdict: "defaultdict"}
SEQUENCES = {list: "list", tuple: "tuple", set: "set", frozenset: "frozenset", torch.Size: "tuple"}
PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)


class WireError(ValueError):
    """A message that breaks the format or its limits."""


def type_name(obj) -> str:
    kind = type(obj)
    return kind.__qualname__ if kind.__module__ in ("builtins", "__main__") else f"{kind.__module__}.{kind.__qualname__}"


# --- values to data and back ------------------------------------------------------------------

class Encoder:
    """Turns a value into JSON-able data plus a dict of tensors. Objects that are not data become
    handles in ``handles`` (a dict the kernel keeps), or, without it, a description only."""

    def __init__(self, handles: dict | None = None):
        self.tensors, self.handles, self.items = {}, handles, 0

    def __call__(self, obj, depth: int = 0):
        self.items += 1
        if self.items > MAX_ITEMS or depth > MAX_DEPTH:
            raise WireError(f"the value is too large to send (more than {MAX_ITEMS} items or {MAX_DEPTH} levels)")
        kind = type(obj)
        if kind in SCALARS:
            if kind is float and obj != obj or kind is float and obj in (float("inf"), float("-inf")):
                return {"$": "float", "v": repr(obj)}
            return obj
        if kind in SEQUENCES:
            self._count(len(obj))  # items that stand for themselves (a word's symbols in BPE, say) are sent as they are
            return {"$": SEQUENCES[kind], "v": [x if type(x) in LEAVES else self(x, depth + 1) for x in obj]}
        if kind in DICTS:
            keys = list(obj)
            if keys and all(type(k) is tuple for k in keys) and set(map(type, itertools.chain(*keys))) <= {str}:
                # keys that are tuples of strings (BPE's words and pairs): sent as lists, tagged once
                self._count(2 * len(keys) + sum(map(len, keys)))
                return {"$": "dict", "type": DICTS[kind], "keys": [list(k) for k in keys],
                        "values": [v if type(v) in LEAVES else self(v, depth + 1) for v in obj.values()]}
            self._count(2 * len(obj))
            return {"$": "dict", "type": DICTS[kind], "v": [[k if type(k) in LEAVES else self(k, depth + 1),
                                                            v if type(v) in LEAVES else self(v, depth + 1)]
                                                           for k, v in obj.items()]}
        if kind in PLAIN_TENSORS:
            return self.tensor(obj)
        if isinstance(obj, torch.dtype):
            return {"$": "dtype", "v": str(obj).removeprefix("torch.")}
        if isinstance(obj, torch.device):
            return {"$": "device", "v": str(obj)}
        return self.other(obj)

    def _count(self, n: int) -> None:
        self.items += n
        if self.items > MAX_ITEMS:
            raise WireError(f"the value is too large to send (more than {MAX_ITEMS} items)")

    def tensor(self, t):
        t = t.detach()
        if t.device.type == "meta":
            return {"$": "meta", "shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}
        if t.layout != torch.strided:
            return self.other(t, f"a {t.layout} tensor")
        key = f"t{len(self.tensors)}"
        self.tensors[key] = t.to("cpu", copy=True).contiguous()
        out = {"$": "tensor", "key": key}
        if t.device.type != "cpu":
            out["device"] = str(t.device)
        return out

    def other(self, obj, what: str = ""):
        out = {"$": "object", "type": type_name(obj), "what": what,
               "module": isinstance(obj, torch.nn.Module), "callable": callable(obj),
               "tensor_subclass": isinstance(obj, torch.Tensor)}
        if self.handles is not None:
            out["handle"] = len(self.handles) + 1
            self.handles[out["handle"]] = obj
        return out


class Decoder:
    """Turns data back into values. ``ref`` resolves a reference to an object (kernel side);
    ``handle`` turns an object that stayed in the kernel into something (judge side)."""

    def __init__(self, tensors: dict, ref=None, handle=None):
        self.tensors, self.ref, self.handle = tensors, ref, handle

    def __call__(self, data, depth: int = 0):
        if depth > MAX_DEPTH:
            raise WireError("the value is nested too deeply")
        if type(data) in SCALARS:
            return data
        if type(data) is not dict or not isinstance(data.get("$"), str):
            raise WireError(f"unexpected data of type {type(data).__name__}")
        tag = data["$"]
        if tag == "float":
            return float(data["v"])
        if tag in ("list", "tuple", "set", "frozenset"):
            items = [x if type(x) in SCALARS else self(x, depth + 1) for x in _list(data["v"])]
            return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
        if tag == "dict" and "keys" in data:  # keys that are tuples of strings
            keys, values = _list(data["keys"]), _list(data.get("values"))
            if (len(keys) != len(values) or not all(type(k) is list for k in keys)
                    or not set(map(type, itertools.chain(*keys))) <= {str}):
                raise WireError("a dict's keys must be lists of strings, one per value")
            pairs = zip(map(tuple, keys), [v if type(v) in SCALARS else self(v, depth + 1) for v in values])
        elif tag == "dict":
            pairs = [(k if type(k) in SCALARS else self(k, depth + 1), v if type(v) in SCALARS else self(v, depth + 1))
                     for k, v in _list(data["v"])]
        if tag == "dict":
            return collections.Counter(dict(pairs)) if data.get("type") == "Counter" else dict(pairs)
        if tag == "tensor":
            t = self.tensors.get(data.get("key"))
            if t is None:
                raise WireError("a tensor is missing from the message")
            if data.get("grad") and (t.is_floating_point() or t.is_complex()):
                t = t.clone().requires_grad_(True)
            return t
        if tag == "meta":
            return torch.empty([int(n) for n in _list(data["shape"])], dtype=dtype(data["dtype"]), device="meta")
        if tag == "dtype":
            return dtype(data["v"])
        if tag == "device":
            return torch.device(str(data["v"]))
        if tag == "ref" and self.ref is not None:
            return self.ref(data)
        if tag == "object" and self.handle is not None:
            return self.handle(data)
        raise WireError(f"unexpected tag {tag!r}")


def _list(v):
    if type(v) is not list:
        raise WireError("expected a list")
    return v


def dtype(name: str) -> torch.dtype:
    value = getattr(torch, str(name), None) if NAME.match(str(name)) else None
    if not isinstance(value, torch.dtype):
        raise WireError(f"unknown dtype {name!r}")
    return value


def pack(message: dict, tensors: dict) -> str:
    """A message and its tensors as one JSON text (tensors: base64 of safetensors bytes)."""
    if tensors:
        from safetensors.torch import save
        message = dict(message, tensors=base64.b64encode(save(tensors)).decode("ascii"))
    text = json.dumps(message, allow_nan=False, separators=(",", ":"))
    if len(text) > MAX_BYTES:
        raise WireError(f"the message is {len(text) // 2**20} MiB; the limit is {MAX_BYTES // 2**20} MiB")
    return text


def unpack(text: str) -> tuple[dict, dict]:
    """(message, tensors) from a JSON text made by ``pack``; refuses anything else."""
    if not isinstance(text, str) or len(text) > MAX_BYTES:
        raise WireError("the message is missing or too large")
    message = json.loads(text)
    if type(message) is not dict:
        raise WireError("the message is not a JSON object")
    tensors = {}
    if "tensors" in message:
        from safetensors.torch import load
        raw = base64.b64decode(message.pop("tensors"), validate=True)
        tensors = load(raw)
        if len(tensors) > MAX_ITEMS:
            raise WireError("too many tensors")
    return message, tensors


def encode(value, handles: dict | None = None) -> str:
    """``value`` as a message text (objects that are not data become handles in ``handles``)."""
    enc = Encoder(handles)
    data = enc(value)
    return pack({"v": data}, enc.tensors)


def decode(text: str, handle=None):
    """The value in a message text made by ``encode``."""
    message, tensors = unpack(text)
    return Decoder(tensors, handle=handle)(message.get("v"))


# --- the kernel side: answering requests ------------------------------------------------------

def serve(text: str) -> None:
    """Answer one request from the grader (it sends ``serve("<request>")`` to the kernel)."""
    from IPython.display import publish_display_data
    shell = builtins.get_ipython()
    state = shell.__dict__.setdefault("_autograder_probe", {"handles": {}})
    state["ask"] = shell.kernel.raw_input  # a stand-in's question to the grader: an input request (stdin channel)
    publish_display_data({MIME: handle(text, shell.user_ns, state)})


def handle(text: str, namespace: dict, state: dict) -> str:
    """The reply (a JSON text) to one request, run against the notebook's ``namespace``.

    ``state`` keeps the handles of objects between requests, and ``state["ask"]`` sends a stand-in's
    question to the grader and returns its answer (see ``_stub``). A reply is
    ``{"ok": true, "v": ...}`` or ``{"ok": false, "error": {...}}`` when the
    student's code raised, or ``{"ok": false, "fault": "..."}`` when the request
    itself could not be served.
    """
    handles = state.setdefault("handles", {})
    try:
        message, tensors = unpack(text)
        op = message.get("op")
        decode_value = Decoder(tensors, ref=lambda d: _resolve(d, namespace, handles, state))
        if op == "reset":
            handles.clear()
            state.pop("stubs", None)
            return pack({"ok": True, "v": None}, {})
        if op not in OPS:
            raise WireError(f"unknown request {op!r}")
        return OPS[op](message, decode_value, namespace, handles)
    except Raised as e:
        return pack({"ok": False, "error": e.info}, {})
    except Exception as e:  # noqa: BLE001 - a request that cannot be served is answered, not raised
        return pack({"ok": False, "fault": f"{type(e).__name__}: {_text(e)}"[:2000]}, {})


class Raised(Exception):
    """The student's code raised; ``info`` describes the exception as data."""

    def __init__(self, e: BaseException):
        super().__init__()
        self.info = {"type": type(e).__name__, "types": [c.__name__ for c in type(e).__mro__
                                                         if c.__module__ in ("builtins", "lib.guard")],
                     "message": _text(e)[:2000]}


def _text(e: BaseException) -> str:
    try:
        return str(e)
    except Exception:  # noqa: BLE001 - a student's exception whose __str__ fails
        return f"(a {type(e).__name__} that cannot be printed)"


def _why_undefined(name: str, namespace: dict) -> str:
    """Why the notebook has no ``name``: no cell that ran defines it (an answer cell left empty, or as released),
    or the cell that does stopped first. IPython keeps the source of every cell that ran in ``In``."""
    ran = namespace.get("In")
    word = re.escape(name)
    defines = re.compile(rf"^[ \t]*(?:(?:async[ \t]+)?def|class)[ \t]+{word}\b|^{word}[ \t]*(?::[^=\n]*)?=(?!=)", re.M)
    if isinstance(ran, list) and not any(isinstance(source, str) and defines.search(source) for source in ran):
        return f"no cell that ran defines it; write {name} in its answer cell"
    return "its cell did not define it (did the cell stop with an error, say on an import?)"


def _resolve(ref: dict, namespace: dict, handles: dict, state: dict):
    """The object a reference names: a name in the notebook, a handle, a module or a stand-in for a reference
    that stays in the grader (``_stub``), then attributes."""
    if "global" in ref:
        name = ref["global"]
        if name not in namespace:
            raise Raised(NameError(f"name {name!r} is not defined: {_why_undefined(name, namespace)}"))
        obj = namespace[name]
    elif "import" in ref:  # a module the kernel has, such as a reference module of an earlier notebook
        import importlib
        obj = importlib.import_module(str(ref["import"]))
    elif ref.get("handle") in handles:
        obj = handles[ref["handle"]]
    elif isinstance(ref.get("stub"), dict):
        obj = _stub(ref["stub"], state)
    else:
        raise WireError("unknown handle")
    for name in ref.get("path", []):
        if not NAME.match(str(name)) or str(name).startswith("__"):
            raise WireError(f"bad attribute name {name!r}")
        try:
            obj = getattr(obj, name)
        except Exception as e:  # noqa: BLE001 - a missing attribute of the student's object
            raise Raised(e) from None
    return obj


def _reply(value, handles, **extra) -> str:
    enc = Encoder(handles)
    message = {"ok": True, "v": enc(value)}
    for key, item in extra.items():
        message[key] = enc(item)
    return pack(message, enc.tensors)


@contextlib.contextmanager
def _injected(namespace: dict, replacements: dict):
    """Names of the notebook replaced by trusted versions for the duration of a call."""
    from lib.guard import trusted
    missing = object()
    saved = {name: namespace.get(name, missing) for name in replacements}
    try:
        for name, obj in replacements.items():
            namespace[name] = trusted(obj)
        yield
    finally:
        for name, old in saved.items():
            if old is missing:
                namespace.pop(name, None)
            else:
                namespace[name] = old


class _Watch:
    """Records every operator that reaches PyTorch's dispatcher: its name, and the device and shape of
    its first output."""

    def __init__(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        ops = self.ops = []

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                first = out[0] if isinstance(out, (tuple, list)) and out else out
                if len(ops) < MAX_OPS:
                    ops.append([func.overloadpacket.__name__,
                                first.device.type if torch.is_tensor(first) else None,
                                list(first.shape) if torch.is_tensor(first) else None])
                return out

        from lib.guard import without_dynamo
        self.mode = without_dynamo(Mode)()


# packages whose threads are the kernel's own, not the student's
KERNEL_THREADS = ("ipykernel", "IPython", "jupyter_client", "zmq", "tornado", "tqdm")
PROCESS_EVENTS = {"os.fork": "os.fork", "os.forkpty": "os.forkpty", "os.posix_spawn": "os.posix_spawn",
                  "os.spawn": "os.spawn", "os.exec": "os.exec", "os.system": "os.system",
                  "subprocess.Popen": "subprocess"}  # audit events that start a process, and what to call them
_found = None  # while a graded call runs: the list its work done elsewhere goes to
_hooked = False  # the audit hook is added once: it cannot be removed


class _Elsewhere:
    """What a graded call ran outside its own thread: ``found`` names each thread and process, for the judge,
    which fails the call and flags the notebook for a person to review (``Kernel._unchecked``).

    The bans (``lib.guard.forbid``) and the operator record (``_Watch``) are PyTorch dispatch modes, which
    hold on the thread that entered them only: another thread, a spawned process, or a process forked before
    the call (a pool made in an earlier cell) runs ``torch.softmax`` unbanned and unrecorded. Rather than make
    every way of handing work over carry the bans, the rule is that a graded call does its work on the
    calling thread, and this notices when it did not:

    - threads started during the call (``threading``'s and ``_thread``'s start function, replaced for the
      duration), and processes (audit events: os.fork, subprocess, os.posix_spawn, os.exec, os.system);
    - threads and child processes that already existed and used CPU time during the call (each one's CPU
      clock, before and after: an idle pool thread uses none), a thread gone by the end, and children
      that ended during it (``RUSAGE_CHILDREN``).

    The main thread and the kernel's own threads (ipykernel's, IPython's history, tqdm's monitor:
    ``KERNEL_THREADS``) are not the student's, and PyTorch's intra-op threads are not Python threads, so an
    ordinary answer, one that prints or shows a progress bar included, is never caught.

    Limits: this runs in the student's kernel, so it catches honest-looking hand-overs only. Code that
    patches the probe or puts the start functions back, a thread whose function claims an ipykernel module,
    a thread started with ``_thread`` before the call, or a grandchild process can hide work from it. What
    such code can win is the ban (and the operator record) only: values are still judged in the grader,
    and the scan outside the kernel (``autograder/scan.py``) flags threading, multiprocessing,
    concurrent.futures, os.fork and reaching into the probe.
    """

    def __enter__(self):
        global _found, _hooked
        if not _hooked:
            sys.addaudithook(_audit)
            _hooked = True
        self.found = _found = []
        self.threads = _settled(_threads())
        self.children = {pid: _process_cpu(pid) for pid in _children()}
        self.reaped = _reaped()
        self.starts = _thread.start_new_thread, threading._start_new_thread
        _thread.start_new_thread = _recorded(self.starts[0], self.found)
        threading._start_new_thread = _recorded(self.starts[1], self.found)
        return self

    def __exit__(self, *exc):
        global _found
        _thread.start_new_thread, threading._start_new_thread = self.starts
        _found = None
        now = _threads()
        for t, cpu in self.threads.items():
            if t not in now or _thread_cpu(t) != cpu:
                self.found.append(_what(t))
        self.found += [_what(t) for t in now if t not in self.threads]
        for pid in _children():
            if pid not in self.children or _process_cpu(pid) != self.children[pid]:
                self.found.append(f"another process (pid {pid})")
        if _reaped() != self.reaped and not any(f.startswith("another process") for f in self.found):
            self.found.append("another process, which ended during the call")
        self.found = list(dict.fromkeys(self.found))[:10]


def _audit(event, args):
    """An audit hook (it sees every thread): notes the processes a graded call starts."""
    if _found is not None and event in PROCESS_EVENTS:
        _found.append(f"another process ({PROCESS_EVENTS[event]})")


def _recorded(start, found):
    """``start`` (a function that starts a thread), noting each thread it starts in ``found``."""
    def start_new_thread(function, *args, **kwargs):
        thread = getattr(function, "__self__", None)  # threading.Thread.start passes its _bootstrap method
        if not isinstance(thread, threading.Thread):
            found.append("another thread (_thread.start_new_thread)")
        elif not _kernel_thread(thread):
            found.append(_what(thread))
        return start(function, *args, **kwargs)
    return start_new_thread


def _threads() -> list:
    """The Python threads that may run the student's work: not this one, the main one or the kernel's."""
    skip = (threading.current_thread(), threading.main_thread())
    return [t for t in threading.enumerate() if t not in skip and t.native_id and not _kernel_thread(t)]


def _code(thread):
    """The function a thread runs: its target, or its class's ``run``."""
    fn = getattr(thread, "_target", None) or type(thread).run
    fn = getattr(fn, "func", fn)  # functools.partial
    return getattr(fn, "__func__", fn)  # a bound method


def _kernel_thread(thread) -> bool:
    return (getattr(_code(thread), "__module__", None) or "").split(".")[0] in KERNEL_THREADS


def _what(thread) -> str:
    module = getattr(_code(thread), "__module__", None) or ""
    if module.startswith("concurrent.futures"):
        return "another thread (ThreadPoolExecutor)"
    if module.startswith("multiprocessing"):
        return "another thread (multiprocessing)"
    return f"another thread ({type(thread).__name__} {thread.name!r})"


def _settled(threads, tries: int = 25) -> dict:
    """Each thread's CPU clock once the threads have gone idle, or after ``tries`` short waits: a thread that
    was still finishing earlier work when the call began (a pool's worker wrapping up the job whose result an
    earlier cell just took, behind on a busy machine) would otherwise seem to work for the call. Idle means
    no clock moved over a short sleep (which hands the GIL over) and no thread is running or runnable. A thread
    busy throughout is not waited for: its clock still moves during the call, which is then flagged."""
    cpu = {t: _thread_cpu(t) for t in threads}
    for _ in range(tries if threads else 0):
        time.sleep(0.002)
        again = {t: _thread_cpu(t) for t in threads}
        if again == cpu and not any(_running(t) for t in threads):
            break
        cpu = again
    return cpu


def _running(thread) -> bool:
    """Whether Linux has the thread running or ready to run (state R in /proc); False where it cannot tell."""
    try:
        with open(f"/proc/self/task/{thread.native_id}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] == "R"
    except (OSError, IndexError):
        return False


def _thread_cpu(thread):
    return _cpu(~thread.native_id << 3 | 6)  # Linux's CPU-time clock of a thread (by its id)


def _process_cpu(pid: int):
    return _cpu(~pid << 3 | 2)  # ... and of a process


def _cpu(clock: int):
    """Nanoseconds on a CPU-time clock, or None (the thread or process is gone, or this is not Linux)."""
    try:
        return time.clock_gettime_ns(clock)
    except (AttributeError, OSError, OverflowError):
        return None


def _children() -> set:
    """Pids of this process's child processes: from /proc where the kernel can read it, and those that
    multiprocessing started."""
    pids = set()
    mp = sys.modules.get("multiprocessing.process")
    for p in list(getattr(mp, "_children", ())):
        pids.add(getattr(p, "pid", None))
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as f:
                pids.update(int(n) for n in f.read().split())
    except (OSError, ValueError):
        pass
    pids.discard(None)
    return pids


def _reaped() -> float:
    """CPU seconds of the child processes that ended and were waited for."""
    try:
        import resource
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    except (ImportError, OSError):
        return 0.0
    return usage.ru_utime + usage.ru_stime


def _call(message, value, namespace, handles) -> str:
    """Call the target with the arguments, as graded code: with the exercise's bans, with earlier exercises
    replaced by trusted references, with warnings silenced and stderr sent to stdout; optionally seeded,
    with the operators it runs recorded, with gradients taken afterwards, and with the arguments sent back
    as they are after the call (to see whether it changed them). ``trusted`` calls (the grader building its
    own objects) run without the bans."""
    from lib.guard import forbid

    target = value(message["target"])
    args = value(message.get("args", {"$": "list", "v": []}))
    kwargs = value(message.get("kwargs", {"$": "dict", "v": []}))
    inject = value(message.get("inject", {"$": "dict", "v": []}))
    ban = {} if message.get("trusted") else message.get("ban", {})  # the grader's own objects run unbanned
    upstream = value(message["backward"]) if message.get("backward") is not None else None
    watch = _Watch() if message.get("watch") else None
    seed = message.get("seed")
    extra = {}
    with contextlib.ExitStack() as stack:
        stack.enter_context(warnings.catch_warnings())
        warnings.simplefilter("ignore")
        stack.enter_context(contextlib.redirect_stderr(sys.stdout))
        stack.enter_context(_injected(namespace, inject))
        if seed is not None:
            stack.enter_context(torch.random.fork_rng(devices=[]))
            torch.manual_seed(int(seed))
        if message.get("no_grad"):
            stack.enter_context(torch.no_grad())
        stack.enter_context(forbid(ops=ban.get("ops", ()), references=ban.get("references", ()),
                                   modules=ban.get("modules", ())))
        if watch is not None:
            stack.enter_context(watch.mode)
        elsewhere = None if message.get("trusted") else stack.enter_context(_Elsewhere())
        start = time.perf_counter()
        try:
            out = target(*args, **kwargs)
            if upstream is not None:
                extra["grads"] = _backward(out, upstream, args, target)
        except (Exception, SystemExit) as e:  # noqa: BLE001 - whatever the student's code raises is data
            raise Raised(e) from None
        extra["seconds"] = time.perf_counter() - start
    if message.get("args_after"):
        extra["args"] = list(args)
    if watch is not None:
        extra["ops"] = watch.ops
    if elsewhere is not None and elsewhere.found:
        extra["elsewhere"] = elsewhere.found
    return _reply(out, handles, **extra)


def _backward(out, upstream, args, target):
    """Gradients of sum(out * upstream) with respect to the tensor arguments sent with ``grad`` and the
    parameters of the target (when it is a module, or a method of one)."""
    first = out[0] if isinstance(out, (tuple, list)) and out else out
    if not torch.is_tensor(first) or not first.requires_grad or first.shape != upstream.shape:
        return None
    module = target if isinstance(target, torch.nn.Module) else getattr(target, "__self__", None)
    params = dict(module.named_parameters()) if isinstance(module, torch.nn.Module) else {}
    for p in params.values():
        p.grad = None
    (first * upstream).sum().backward()
    return {"args": [a.grad if torch.is_tensor(a) and a.requires_grad else None for a in args],
            "params": {name: p.grad for name, p in params.items()}}


def _get(message, value, namespace, handles) -> str:
    return _reply(value(message["target"]), handles)


def _load(message, value, namespace, handles) -> str:
    """Copy tensors into the target's parameters and buffers, by attribute path (``w_q.weight``)."""
    target = value(message["target"])
    problems = []
    for path, tensor in value(message["values"]).items():
        obj = target
        try:
            for name in path.split("."):
                obj = getattr(obj, name)
        except Exception as e:  # noqa: BLE001
            problems.append([path, f"it has no {path} ({type(e).__name__})"])
            continue
        if not torch.is_tensor(obj) or tuple(obj.shape) != tuple(tensor.shape):
            shape = f"shape {tuple(obj.shape)}" if torch.is_tensor(obj) else f"a {type(obj).__name__}"
            problems.append([path, f"{path} is {shape}, expected shape {tuple(tensor.shape)}"])
            continue
        with torch.no_grad():
            obj.copy_(tensor.to(obj.dtype))
    return _reply(problems, handles)


def _describe(message, value, namespace, handles) -> str:
    return _reply(describe(value(message["target"])), handles)


def describe(obj, seen: dict | None = None, depth: int = 0) -> dict:
    """A module (or any object) as data: its type and base classes, and for a module its training flag,
    submodules, parameters, buffers, other tensors and simple attributes. A module met again is named by
    its ``oid`` only (so shared submodules can be told apart from equal ones); tensors carry an ``oid`` too."""
    seen = {} if seen is None else seen
    info = {"type": type_name(obj), "bases": [type_name_of(c) for c in type(obj).__mro__], "callable": callable(obj)}
    if not isinstance(obj, torch.nn.Module):
        return info
    if id(obj) in seen:
        return {**info, "oid": seen[id(obj)], "repeat": True}
    seen[id(obj)] = info["oid"] = len(seen) + 1
    info["training"] = bool(obj.training)
    # every name a submodule is registered under (named_children would skip a second name for one module)
    info["children"] = {} if depth > 8 else {name: describe(m, seen, depth + 1)
                                             for name, m in list(obj._modules.items())[:200] if m is not None}
    info["params"] = {name: _tensor_info(p, seen) for name, p in list(obj._parameters.items())[:200]
                      if p is not None}
    info["buffers"] = {name: {**_tensor_info(b, seen), "persistent": name not in obj._non_persistent_buffers_set}
                       for name, b in list(obj._buffers.items())[:200] if b is not None}
    info["tensors"], info["attrs"] = {}, {}
    for name, v in list(vars(obj).items())[:500]:
        if name.startswith("_") or name == "training":
            continue
        if torch.is_tensor(v):
            info["tensors"][name] = _tensor_info(v, seen)
        elif type(v) in SCALARS and (type(v) is not str or len(v) < 200):
            info["attrs"][name] = v
    return info


def type_name_of(cls) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _tensor_info(t, seen: dict) -> dict:
    """Shape, dtype, device, and an ``oid`` shared by every name of the same tensor (shared parameters)."""
    oid = seen.setdefault(("tensor", id(t)), len(seen) + 1)
    if isinstance(t, torch.nn.parameter.UninitializedTensorMixin):  # a lazy module's, before its first call
        return {"shape": [], "dtype": "uninitialized", "device": t.device.type, "requires_grad": bool(t.requires_grad),
                "type": type_name(t), "oid": oid}
    return {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch."), "device": t.device.type,
            "requires_grad": bool(t.requires_grad), "type": type_name(t), "oid": oid}


def _trusted(message, value, namespace, handles) -> str:
    """Run the grader's fixtures (kernel-side helpers of its checks, which hold no answers) in fresh module
    objects. The notebook's own references never come here: they stay in the grader (``_stub``)."""
    loaded, saved = {}, {}
    try:
        for name, source in message["modules"]:
            module = types.ModuleType(name)
            module.__file__ = f"<grader: {name}>"
            saved.setdefault(name, sys.modules.get(name))
            sys.modules[name] = module  # so that a later module of the list can import it
            exec(compile(source, module.__file__, "exec"), module.__dict__)  # noqa: S102 - the grader's own code
            loaded[name] = module
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old
    return _reply(loaded, handles)


def _lift(message, value, namespace, handles) -> str:
    """Make methods of an object the grader built run trusted (bans lifted), as references do."""
    from lib.guard import trusted
    obj = value(message["target"])
    for name in message.get("methods", []):
        setattr(obj, name, trusted(getattr(obj, name)))
    return _reply(None, handles)


def _reaches(message, value, namespace, handles) -> str:
    """Whether a function, or a function of the notebook it calls, uses one of the named modules."""
    target, modules = value(message["target"]), tuple(message.get("modules", []))
    return _reply(_uses(target, modules, namespace, 0, set()), handles)


def _uses(fn, modules, namespace, depth, seen) -> bool:
    code = getattr(fn, "__code__", None)
    if code is None or id(code) in seen or depth > 4:
        return False
    seen.add(id(code))
    glob = getattr(fn, "__globals__", namespace)
    stack = [code]
    while stack:
        c = stack.pop()
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
        for name in c.co_names:
            if name in modules:
                return True
            obj = glob.get(name)
            owner = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", "") or ""
            if isinstance(owner, str) and owner.split(".")[0] in modules:
                return True
            if isinstance(obj, types.FunctionType) and _uses(obj, modules, namespace, depth + 1, seen):
                return True
    return False


# --- the notebook's own references: stand-ins that ask the grader -----------------------------
#
# The references of the notebook being graded are its answers, so they never enter the kernel. A later
# exercise is still graded with them (a mistake in ``softmax`` costs only its own points): the judge sends a
# *stand-in* (a reference ``{"$": "ref", "stub": spec}``), a function or an nn.Module class made here whose
# calls send their arguments to the grader as data, where the reference runs, and take its result back as
# data. The question goes out in the middle of a request, by ``state["ask"]``: through Jupyter's stdin
# channel (an input request the grader answers) in a kernel, by a plain call under ``LocalTransport``.

def _stub(spec: dict, state: dict):
    """The stand-in of a reference that stays in the grader (one per reference, kept in ``state``)."""
    stubs = state.setdefault("stubs", {})
    key = int(spec["id"])
    if key not in stubs:
        names = [spec["name"], *spec["module"].split("."), *spec.get("methods", [])]
        if not all(NAME.match(str(n)) and not str(n).startswith("__") for n in names):
            raise WireError("bad name in a stand-in")
        stubs[key] = (_stub_class if spec.get("kind") == "class" else _stub_function)(spec, state)
    return stubs[key]


def _stub_function(spec: dict, state: dict):
    def stand_in(*args, **kwargs):
        return _remote(state, spec["name"], {"id": spec["id"]}, args, kwargs)
    stand_in.__name__ = stand_in.__qualname__ = spec["name"]
    stand_in.__module__ = spec["module"]
    stand_in.__doc__ = f"The course's {spec['name']}: it runs in the grader, on the values it is given."
    return stand_in


def _stub_class(spec: dict, state: dict):
    """An nn.Module class whose objects hold the parameters and buffers of one made by the grader (the same
    names, submodules and attributes) and whose methods run there with them."""
    def __init__(self, *args, **kwargs):
        torch.nn.Module.__init__(self)
        made = _remote(state, spec["name"], {"op": "new", "id": spec["id"]}, args, kwargs)
        _mirror(self, made["tree"])
        self._grader_id = made["id"]

    def method(name):
        def run(self, *args, **kwargs):
            return _remote(state, f"{spec['name']}.{name}", {"id": self._grader_id, "method": name}, args, kwargs,
                           module=self)
        run.__name__ = run.__qualname__ = name
        return run

    body = {"__init__": __init__, "__module__": spec["module"], "__qualname__": spec["name"],
            "__doc__": f"The course's {spec['name']}: its methods run in the grader, with this module's parameters."}
    body.update({name: method(name) for name in spec.get("methods", ["forward"])})
    return type(spec["name"], (torch.nn.Module,), body)


def _mirror(module, tree: dict) -> None:
    """Give ``module`` the training flag, simple attributes, parameters, buffers and submodules of ``tree``
    (a module described by the grader): torch.nn's own modules, and those of the course's modules that the
    kernel has imported already and the grader marks ``real``, are made as what they are; others as containers
    of the same name."""
    module.training = bool(tree["training"])
    for name, v in tree["attrs"].items():
        setattr(module, _name(name), v)
    for name, t in tree["params"].items():
        module.register_parameter(_name(name), torch.nn.Parameter(t, requires_grad=name not in tree["frozen"]))
    for name in tree.get("absent", ()):
        module.register_parameter(_name(name), None)
    for name, t in tree["buffers"].items():
        module.register_buffer(_name(name), t, persistent=name in tree["persistent"])
    for name, sub in tree["children"].items():
        where, qualname = sub["type"]
        cls = getattr(torch.nn, str(qualname), None) if str(where).startswith("torch.nn.") else None
        if sub.get("real") is True and re.fullmatch(r"lib\.\w+", str(where)) and str(where) in sys.modules:
            cls = getattr(sys.modules[str(where)], str(qualname), None)  # a module of the course this kernel has
        if isinstance(cls, type) and issubclass(cls, torch.nn.Module):
            child = cls.__new__(cls)
            torch.nn.Module.__init__(child)
        else:
            child = type(_name(str(qualname).rsplit(".", 1)[-1]), (torch.nn.Module,),
                         {"__module__": str(where), "forward": _part_forward})()
        _mirror(child, sub)
        module.add_module(_name(name), child)


def _part_forward(self, *args, **kwargs):
    raise RuntimeError(f"this {type(self).__name__} is part of a course's module that runs in the grader: "
                       f"call the whole module")


def _name(name) -> str:
    if not NAME.match(str(name)) and not str(name).isdigit():
        raise WireError(f"bad name {name!r}")
    return str(name)


class _Keep(Encoder):
    """An Encoder that also keeps the tensors it sends, as they are (their gradients are wanted back)."""

    def __init__(self, prefix: str = "t"):
        super().__init__()
        self.kept, self.prefix = [], prefix

    def tensor(self, t):
        out = super().tensor(t)
        if out.get("$") == "tensor":
            self.kept.append(t)
            self.tensors[f"{self.prefix}{len(self.kept) - 1}"] = self.tensors.pop(out["key"])
            out["key"] = f"{self.prefix}{len(self.kept) - 1}"
        return out


def _remote(state, what, target, args, kwargs, module=None):
    """``what`` run in the grader on these arguments (and on ``module``'s parameters, buffers and training
    flags), on the kernel's random numbers; on the autograd graph when an argument or parameter needs a
    gradient, so that backward asks the grader too."""
    enc = _Keep()
    message = {"op": "run", **target, "args": enc(list(args)), "kwargs": enc(dict(kwargs))}
    if module is not None:
        message["state"] = enc({**dict(module.named_parameters(remove_duplicate=False)),
                                **dict(module.named_buffers(remove_duplicate=False))})
        message["training"] = {name: m.training for name, m in module.named_modules(remove_duplicate=False)}
    call = _Remote(state, what, message, enc.tensors, enc.kept)
    if target.get("op") != "new" and torch.is_grad_enabled() and any(t.requires_grad for t in enc.kept):
        return call.value(_Through.apply(call, *enc.kept))
    return call.value(call.forward())


class _Remote:
    """One question to the grader and its answer: the value, then, if asked, the gradients."""

    def __init__(self, state, what, message, tensors, inputs):
        self.state, self.what, self.message, self.inputs = state, what, message, inputs
        self.tensors = dict(tensors, rng=torch.get_rng_state())
        self.message["rng"] = {"$": "tensor", "key": "rng"}

    def ask(self, message, tensors):
        ask = self.state.get("ask")
        if ask is None:
            raise RuntimeError(f"the course's {self.what} runs in the grader, and only while a check runs")
        try:
            reply, tensors = unpack(ask(pack(message, tensors)))
        except WireError as e:
            raise RuntimeError(f"the course's {self.what} could not be run: {e}") from None
        if reply.get("ok") is not True:
            error = reply.get("error")
            if isinstance(error, dict):  # the reference raised: raise the same (built-in) kind of exception here
                kind = next((k for k in map(str, error.get("types", [])) if isinstance(getattr(builtins, k, None), type)
                             and issubclass(getattr(builtins, k), Exception)), "RuntimeError")
                raise getattr(builtins, kind)(str(error.get("message", "")))
            raise TypeError(f"the course's {self.what} runs in the grader and takes data only (tensors, numbers, "
                            f"strings, lists, dicts): {str(reply.get('fault', 'no answer'))[:300]}")
        return reply, tensors

    def forward(self):
        """The value's tensors, in order (at least one, for autograd); ``value`` puts them in place."""
        self.reply, tensors = self.ask(self.message, self.tensors)
        rng = tensors.pop("rng", None)
        if rng is not None:
            torch.set_rng_state(rng)
        device = next((t.device for t in self.inputs if t.device.type not in ("cpu", "meta")), None)
        self.keys = sorted(tensors, key=lambda k: int(k[1:]) if k[1:].isdigit() else -1)
        return tuple(tensors[k] if device is None else tensors[k].to(device) for k in self.keys) or (torch.zeros(()),)

    def value(self, outputs):
        return Decoder(dict(zip(self.keys, outputs)))(self.reply.get("v"))

    def backward(self, grads, needed):
        """Gradients for the inputs that need them, computed by the grader (it runs the reference again, on the
        same inputs and random numbers, and back-propagates ``grads``)."""
        need = [f"t{i}" for i, n in enumerate(needed) if n]
        enc = _Keep("g")
        message = dict(self.message, grads=enc(list(grads[:len(self.keys)])), need=need)
        reply, tensors = self.ask(message, {**self.tensors, **enc.tensors})
        got = dict(zip(need, Decoder(tensors)(reply.get("v"))))
        return tuple(got.get(f"t{i}").to(t.device) if got.get(f"t{i}") is not None else None
                     for i, t in enumerate(self.inputs))


class _Through(torch.autograd.Function):
    """A reference run in the grader, on the kernel's autograd graph."""

    @staticmethod
    def forward(ctx, call, *inputs):
        ctx.call = call
        return call.forward()

    @staticmethod
    def backward(ctx, *grads):
        return (None, *ctx.call.backward(grads, ctx.needs_input_grad[1:]))


OPS = {"call": _call, "get": _get, "load": _load, "describe": _describe, "trusted": _trusted, "lift": _lift,
       "reaches": _reaches}


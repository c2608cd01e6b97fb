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
import base64
import builtins
import collections
import contextlib
import json
import re
import sys
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
SCALARS = (type(None), bool, int, float, str)
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
            return {"$": SEQUENCES[kind], "v": [self(x, depth + 1) for x in obj]}
        if kind in DICTS:
            return {"$": "dict", "type": DICTS[kind],
                    "v": [[self(k, depth + 1), self(v, depth + 1)] for k, v in obj.items()]}
        if kind in PLAIN_TENSORS:
            return self.tensor(obj)
        if isinstance(obj, torch.dtype):
            return {"$": "dtype", "v": str(obj).removeprefix("torch.")}
        if isinstance(obj, torch.device):
            return {"$": "device", "v": str(obj)}
        return self.other(obj)

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
            items = [self(x, depth + 1) for x in _list(data["v"])]
            return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
        if tag == "dict":
            pairs = [(self(k, depth + 1), self(v, depth + 1)) for k, v in _list(data["v"])]
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
    publish_display_data({MIME: handle(text, shell.user_ns, state)})


def handle(text: str, namespace: dict, state: dict) -> str:
    """The reply (a JSON text) to one request, run against the notebook's ``namespace``.

    ``state`` keeps the handles of objects between requests. A reply is
    ``{"ok": true, "v": ...}`` or ``{"ok": false, "error": {...}}`` when the
    student's code raised, or ``{"ok": false, "fault": "..."}`` when the request
    itself could not be served.
    """
    handles = state.setdefault("handles", {})
    try:
        message, tensors = unpack(text)
        op = message.get("op")
        decode_value = Decoder(tensors, ref=lambda d: _resolve(d, namespace, handles))
        if op == "reset":
            handles.clear()
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


def _resolve(ref: dict, namespace: dict, handles: dict):
    """The object a reference names: a name in the notebook or a handle, then attributes."""
    if "global" in ref:
        name = ref["global"]
        if name not in namespace:
            raise Raised(NameError(f"name {name!r} is not defined: its cell did not define it (did the cell stop "
                                   f"with an error, say on an import?)"))
        obj = namespace[name]
    elif "import" in ref:  # a module the kernel has, such as a reference module of an earlier notebook
        import importlib
        obj = importlib.import_module(str(ref["import"]))
    elif ref.get("handle") in handles:
        obj = handles[ref["handle"]]
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
    return {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch."), "device": t.device.type,
            "requires_grad": bool(t.requires_grad), "type": type_name(t), "oid": oid}


def _trusted(message, value, namespace, handles) -> str:
    """Run the grader's trusted code (reference modules, fixtures) in fresh module objects; names in
    ``drop`` are removed afterwards (the references of the exercise being graded and of later ones)."""
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
    for module in loaded.values():
        for name in message.get("drop", []):
            module.__dict__.pop(name, None)
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


OPS = {"call": _call, "get": _get, "load": _load, "describe": _describe, "trusted": _trusted, "lift": _lift,
       "reaches": _reaches}


"""The judge's end of the channel to the student's kernel.

A judge (one hidden test) holds a ``Kernel``. Each method is one request to
the kernel side (``autograder.probe``), and what comes back is data: tensors,
plain Python values, or a ``Remote`` handle for an object that stayed in the
kernel. The judge never runs student code itself and the kernel never sees an
expected value.

Two transports carry the requests:

- ``RemoteTransport`` (``autograder/execute.py``): each request is executed in
  the sandboxed kernel and its reply read from the kernel's messages; the judge
  runs in the grader's process. This is how ``check`` and ``grade`` work;
- ``LocalTransport``: the kernel side runs in this same process, on a namespace
  (the test suite's fast path, and stock nbgrader without the course's
  configuration, where the judge can only run inside the kernel).

A transport is called with a request and ``Kernel.answer``: in the middle of a
request, the kernel may ask the grader to run one of the notebook's own
references (``Here``), which never enter the kernel.
"""
import importlib
import inspect
import itertools
import time
from dataclasses import dataclass, field

import torch

from autograder import probe


class ProbeFailure(RuntimeError):
    """The kernel did not answer a request (time limit, a dead kernel, an unreadable reply)."""


class StudentError(AssertionError):
    """The student's code raised. ``types`` names the exception's classes (``ValueError`` ...)."""

    def __init__(self, message: str, kind: str, types: list, raw: str):
        super().__init__(message)
        self.kind, self.types, self.raw = kind, types, raw


@dataclass(frozen=True)
class Remote:
    """An object in the student's kernel: a name of the notebook or a handle, then attribute names."""
    root: tuple  # ("global", name), ("handle", number) or ("import", module)
    path: tuple = ()
    type: str = ""
    module: bool = False  # an nn.Module
    callable: bool = False
    tensor_subclass: bool = False

    def attr(self, *names: str) -> "Remote":
        return Remote(self.root, self.path + tuple(n for name in names for n in name.split(".")), "", False, True)

    def ref(self) -> dict:
        return {"$": "ref", self.root[0]: self.root[1], "path": list(self.path)}

    @property
    def description(self) -> str:
        """What it is, for a message: 'a SelfAttention', 'a Liar (a subclass of torch.Tensor ...)'."""
        short = self.type.rsplit(".", 1)[-1] or "object"
        if self.tensor_subclass:
            return f"a {short} (a subclass of torch.Tensor: return a plain torch.Tensor)"
        return f"a {short}"


@dataclass(frozen=True)
class Here:
    """A trusted reference of the notebook being graded (``lib.self_attention.softmax``), or its module. It is
    an answer of the notebook, so it stays in the grader: passed to the kernel (injected, or a class to build),
    it becomes a stand-in there whose calls ask the grader to run it on their arguments (``probe._stub``)."""
    name: str
    kernel: "Kernel" = field(compare=False, repr=False)

    def attr(self, *names: str) -> "Here":
        return Here(".".join((self.name, *names)), self.kernel)

    def ref(self) -> dict:
        return {"$": "ref", "stub": self.kernel._stand_in(self.name), "path": []}


@dataclass
class Trace:
    """A call's value, with what was recorded along the way."""
    value: object
    seconds: float  # wall time of the request, measured by the judge
    ops: list = field(default_factory=list)  # (operator, device of its output, shape of its output)
    grads: dict | None = None  # {"args": [...], "params": {name: grad}}
    args: list | None = None  # the arguments as they were after the call (with ``args_after``)
    cpu: float | None = None  # with ``timed``: processor seconds the kernel used for it (``transport.cpu``)


@dataclass
class TensorInfo:
    shape: tuple
    dtype: str
    device: str
    requires_grad: bool
    type: str
    oid: int = 0  # the same for every name of one tensor (a shared parameter)


@dataclass
class ModuleInfo:
    """What ``Kernel.describe`` tells about an object: type, base classes, and for a module its training
    flag, submodules, parameters, buffers, other tensor attributes and simple attributes."""
    type: str
    bases: list
    oid: int = 0
    training: bool = False
    children: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    buffers: dict = field(default_factory=dict)
    tensors: dict = field(default_factory=dict)
    attrs: dict = field(default_factory=dict)
    is_module: bool = False

    @classmethod
    def of(cls, data: dict, seen: dict | None = None) -> "ModuleInfo":
        """From ``describe``'s data; a module met again (shared, or registered under two names) is the same
        ModuleInfo object as where it was first described."""
        seen = {} if seen is None else seen

        def tensors(d):
            return {k: TensorInfo(tuple(v["shape"]), v["dtype"], v["device"], v["requires_grad"], v["type"],
                                  v.get("oid", 0)) for k, v in (d or {}).items()}
        if data.get("repeat") and data.get("oid") in seen:
            return seen[data["oid"]]
        info = cls(data["type"], data["bases"], data.get("oid", 0), data.get("training", False), {},
                   tensors(data.get("params")), tensors(data.get("buffers")), tensors(data.get("tensors")),
                   dict(data.get("attrs") or {}), "oid" in data)
        if info.oid:
            seen[info.oid] = info
        info.children = {k: cls.of(v, seen) for k, v in (data.get("children") or {}).items()}
        return info

    @property
    def name(self) -> str:
        return self.type.rsplit(".", 1)[-1]

    def isa(self, qualified: str) -> bool:
        """``info.isa("torch.nn.modules.linear.Linear")``, or a short name such as ``"Linear"``."""
        return any(b == qualified or b.rsplit(".", 1)[-1] == qualified for b in self.bases)

    def find(self, path: str):
        """The submodule at ``path`` ('self_attn.w_q'), or None."""
        node = self
        for name in path.split("."):
            node = node.children.get(name) if node else None
        return node

    def modules(self) -> dict:
        """Every submodule by dotted name, every name it has ('' is this one), like named_modules but keeping
        aliases (a module registered twice appears under both names, as the same ModuleInfo)."""
        out = {}

        def walk(node, path, depth):
            out.setdefault(path, node)
            if depth < 12:
                for name, child in node.children.items():
                    walk(child, f"{path}.{name}" if path else name, depth + 1)
        walk(self, "", 0)
        return out

    def all_params(self, prefix: str = "") -> dict:
        """Every parameter, by dotted name, as ``named_parameters()`` lists them (shared ones once)."""
        out, seen, tensors = {}, set(), set()

        def walk(node, pre):
            if node.oid in seen:
                return
            seen.add(node.oid)
            for name, t in node.params.items():
                if not t.oid or t.oid not in tensors:
                    tensors.add(t.oid)
                    out[pre + name] = t
            for name, child in node.children.items():
                walk(child, f"{pre}{name}.")
        walk(self, prefix)
        return out


@dataclass(frozen=True)
class Bans:
    """What graded code of a notebook may not call: PyTorch operators whose name contains one of ``ops``,
    the course's references named in ``references``, and torch modules or functionals in ``modules``."""
    ops: tuple = ()
    references: tuple = ()
    modules: tuple = ()


class Kernel:
    """The student's kernel, as a judge sees it.

    ``bans`` apply to every call of student code; ``fixtures`` lists the
    kernel-side helpers (name, source) that ``trusted`` loads into the kernel;
    ``own`` names the notebook's reference modules, which stay here (``Here``),
    and ``withheld`` the references of the exercise being graded and of every
    later one, which are not given to the kernel at all. ``flags`` collects
    what a person should review: calls the kernel could not check.
    """

    def __init__(self, transport, bans: Bans = Bans(), fixtures=(), own=(), withheld=()):
        self.transport, self.bans = transport, bans
        self.flags = []
        self.fixtures, self.own, self.withheld = list(fixtures), tuple(own), set(withheld)
        self._fixtures = None
        self._here = {}  # number -> a reference, or an object made from one, that the kernel may ask us to run
        self._specs = {}  # qualified name -> its stand-in's description

    # -- requests -------------------------------------------------------------------------------

    def _request(self, message: dict, tensors: dict | None = None):
        text = probe.pack(message, tensors or {})
        start = time.perf_counter()
        reply_text = self.transport(text, self.answer)
        seconds = time.perf_counter() - start
        try:
            reply, reply_tensors = probe.unpack(reply_text)
            decode = probe.Decoder(reply_tensors, handle=_remote)
            if reply.get("ok") is True:
                return {k: decode(v) for k, v in reply.items() if k not in ("ok",)}, seconds
            if isinstance(reply.get("error"), dict):
                return {"error": _error_info(reply["error"])}, seconds
            fault = str(reply.get("fault", "no answer"))[:500]
        except Exception as e:  # noqa: BLE001 - a reply that cannot be read counts as no reply
            raise ProbeFailure(f"the kernel's reply could not be read ({type(e).__name__}: {str(e)[:200]})") from None
        raise ProbeFailure(f"the kernel could not run the check's request: {fault}")

    def call(self, what: str, target, *args, hint: str = "", inject=None, seed=None, no_grad=False, **kwargs):
        """``target(*args, **kwargs)`` in the kernel, as graded code; its value. When the student's code
        raises, a ``StudentError`` (an AssertionError) says which call broke and, with ``hint``, why."""
        return self.trace(what, target, *args, hint=hint, inject=inject, seed=seed, no_grad=no_grad,
                          **kwargs).value

    def trace(self, what: str, target, *args, hint: str = "", inject=None, seed=None, no_grad=False,
              backward=None, watch=False, args_after=False, trusted=False, timed=False, **kwargs) -> Trace:
        """Like ``call``; also records the operators run (``watch``), the gradients of sum(output * backward)
        with respect to tensor arguments marked ``grad(t)`` and the target's parameters, or the arguments as
        the call left them (``args_after``). ``trusted``: the judge's own code, run without the bans.
        ``timed``: also the processor time the kernel spent on it (``Trace.cpu``), which, unlike the wall time,
        a busy machine does not stretch, nor the round trips of the references the call uses."""
        enc = _Encoder()
        message = {"op": "call", "target": target.ref(), "args": enc(list(args)), "kwargs": enc(kwargs),
                   "inject": enc(dict(inject or {})),
                   "ban": {"ops": list(self.bans.ops), "references": list(self.bans.references),
                           "modules": list(self.bans.modules)},
                   "seed": seed, "no_grad": no_grad, "watch": watch, "args_after": args_after, "trusted": trusted,
                   "backward": enc(backward) if backward is not None else None}
        _mark_grads(message["args"], args)
        clock = getattr(self.transport, "cpu", None) if timed else None
        before = clock() if clock else None
        reply, seconds = self._request(message, enc.tensors)
        after = clock() if clock else None
        if "error" in reply:
            raise _student_error(what, reply["error"], hint)
        if reply.get("elsewhere"):
            raise self._unchecked(what, reply["elsewhere"])
        cpu = after - before if before is not None and after is not None else None
        return Trace(reply["v"], seconds, reply.get("ops") or [], reply.get("grads"), reply.get("args"), cpu)

    def _unchecked(self, what: str, where) -> AssertionError:
        """A call that ran work on other threads or processes (``probe._Elsewhere``), where the bans and the
        record of operators do not reach: it fails, and is kept in ``flags`` for a person to review."""
        places = ", ".join(str(w)[:100] for w in list(where)[:3])
        unseen = (f"the ban on PyTorch's built-in {' and '.join(self.bans.ops)} cannot be checked" if self.bans.ops
                  else "the grader cannot see what it runs")
        message = (f"{what} ran work on {places}, where {unseen}: graded code must do its work on the thread "
                   f"that calls it (flagged for a person to review)")
        self.flags.append(message)
        return AssertionError(message)

    def build(self, what: str, target, *args, seed=None, **kwargs):
        """An object of the judge's own (a trusted reference or fixture class) built in the kernel, without
        the bans; pass it to student code, after ``lift``-ing the methods student code will call."""
        return self.trace(what, target, *args, seed=seed, trusted=True, **kwargs).value

    def get(self, target: Remote):
        """The value of ``target`` (an attribute path), as data; objects come back as handles."""
        reply, _ = self._request({"op": "get", "target": target.ref()})
        if "error" in reply:
            raise _student_error(f"reading {'.'.join(target.path) or 'it'}", reply["error"], "")
        return reply["v"]

    def describe(self, target: Remote) -> ModuleInfo:
        reply, _ = self._request({"op": "describe", "target": target.ref()})
        if "error" in reply:
            raise _student_error(f"reading {'.'.join(target.path) or 'it'}", reply["error"], "")
        info = ModuleInfo.of(reply["v"])
        lazy = [name for name, t in info.all_params().items() if t.dtype == "uninitialized"]
        if lazy:
            raise AssertionError(f"{lazy[0]} of {target.description} has no shape yet: a lazy module (nn.LazyLinear, "
                                 f"say) makes its weights at its first call. Create the layer with its sizes, "
                                 f"nn.Linear(in_features, out_features), so that the model is complete when built")
        return info

    def load(self, target: Remote, tensors: dict) -> list:
        """Copy ``{"w_q.weight": tensor, ...}`` into the target's parameters; the problems, if any."""
        enc = _Encoder()
        reply, _ = self._request({"op": "load", "target": target.ref(), "values": enc(dict(tensors))}, enc.tensors)
        if "error" in reply:
            raise _student_error("copying weights into it", reply["error"], "")
        return [why for _, why in reply["v"]]

    def lift(self, target: Remote, *methods: str) -> None:
        """Make the named methods of an object the judge built run trusted (with the bans lifted)."""
        self._request({"op": "lift", "target": target.ref(), "methods": list(methods)})

    def reaches(self, target: Remote, *modules: str) -> bool:
        """Whether the function (or a notebook function it calls) uses any of ``modules``."""
        reply, _ = self._request({"op": "reaches", "target": target.ref(), "modules": list(modules)})
        return bool(reply.get("v"))

    def reset(self) -> None:
        """Forget every handle (done after each hidden test)."""
        self._request({"op": "reset"})
        self._fixtures = None
        self._here.clear()
        self._specs.clear()

    # -- names ----------------------------------------------------------------------------------

    @staticmethod
    def student(name: str) -> Remote:
        """A name the notebook defines (the student's function or class)."""
        return Remote(("global", name), (), "", False, True)

    def trusted(self, module: str):
        """A trusted module: one of this notebook's reference modules stays here (a ``Here``); a fixture is
        loaded into the kernel from the grader's copy; a reference module of an earlier notebook is imported
        in the kernel, whose lib has it."""
        if module in self.own:
            return Here(module, self)
        if module in dict(self.fixtures):
            if self._fixtures is None:
                reply, _ = self._request({"op": "trusted", "modules": [list(m) for m in self.fixtures]})
                self._fixtures = reply["v"]
            return self._fixtures[module]
        return Remote(("import", module), (), "module", False, False)

    def reference(self, qualified: str):
        """``reference("lib.self_attention.softmax")``: a trusted reference, to inject for an earlier exercise."""
        module, _, name = qualified.rpartition(".")
        return self.trusted(module).attr(name)

    # -- the notebook's own references, run here for the kernel -----------------------------------

    def _stand_in(self, qualified: str) -> dict:
        """The description of the stand-in the kernel makes for a reference of this notebook (``probe._stub``)."""
        if qualified not in self._specs:
            module, _, name = qualified.rpartition(".")
            if module not in self.own or name in self.withheld:
                raise ValueError(f"{qualified} is not a reference of an earlier exercise of this notebook")
            obj = getattr(importlib.import_module(module), name)
            is_class = isinstance(obj, type)
            if is_class and not issubclass(obj, torch.nn.Module) or not callable(obj):
                raise ValueError(f"{qualified} is neither a function nor an nn.Module class")
            self._specs[qualified] = {"id": self._keep(obj), "kind": "class" if is_class else "function",
                                      "module": module, "name": name, "methods": _methods(obj) if is_class else []}
        return self._specs[qualified]

    def _keep(self, obj) -> int:
        number = next(_NUMBERS)
        self._here[number] = obj
        return number

    def answer(self, text: str) -> str:
        """The grader's answer to a question the kernel asks in the middle of a request: run a reference of
        this notebook that the judge gave the kernel, or a method of an object made from one, here, without the
        bans, on the data sent (and on the kernel's random numbers, whose state goes back). With ``grads``, the
        gradients of the inputs named in ``need`` instead."""
        try:
            message, tensors = probe.unpack(text)
            obj, method = self._here.get(message.get("id")), message.get("method")
            need = [key for key in message.get("need", []) if isinstance(key, str) and key in tensors]
            for key in need:
                tensors[key] = tensors[key].clone().requires_grad_(True)
            rng = tensors.pop("rng", None)
            value = probe.Decoder(tensors)
            args, kwargs = value(message.get("args", [])), value(message.get("kwargs", {"$": "dict", "v": []}))
            if type(args) is not list or type(kwargs) is not dict or not all(type(k) is str for k in kwargs):
                raise probe.WireError("bad arguments")
            if message.get("op") == "new" and isinstance(obj, type):
                fn = obj
            elif message.get("op") == "run" and method is None and inspect.isfunction(obj):
                fn = obj
            elif (message.get("op") == "run" and isinstance(obj, torch.nn.Module)
                  and method in _methods(type(obj))):
                fn = _method_with(obj, method, value(message.get("state", {"$": "dict", "v": []})),
                                  message.get("training"))
            else:
                raise probe.WireError("the grader has no such reference for this check")
            with torch.random.fork_rng(devices=[]), torch.set_grad_enabled(bool(need)):
                if rng is not None:
                    torch.set_rng_state(rng)
                try:
                    out = fn(*args, **kwargs)
                except Exception as e:  # noqa: BLE001 - the reference refused what the student's code gave it
                    raise probe.Raised(e) from None
                rng = torch.get_rng_state()
                if "grads" in message:
                    out = _gradients(out, value(message["grads"]), [tensors[key] for key in need])
            if message.get("op") == "new":
                out = {"id": self._keep(out), "tree": _tree(out, self.own)}
            enc = probe.Encoder()
            data = enc(out)
            return probe.pack({"ok": True, "v": data}, dict(enc.tensors, rng=rng))
        except probe.Raised as e:
            return probe.pack({"ok": False, "error": e.info}, {})
        except Exception as e:  # noqa: BLE001 - a question that cannot be answered is answered so
            return probe.pack({"ok": False, "fault": f"{type(e).__name__}: {str(e)[:300]}"}, {})


_NUMBERS = itertools.count(1)  # of the references and objects judges keep for the kernel: never used twice


def _methods(cls) -> list:
    """The methods a stand-in of a reference class forwards: forward and its own public ones (encode, ...)."""
    return sorted({"forward"} | {name for name in dir(cls) if not name.startswith("_")
                                 and inspect.isfunction(getattr(cls, name)) and not hasattr(torch.nn.Module, name)})


class _Method(torch.nn.Module):
    """``m.<name>(...)`` as a module's forward, for ``torch.func.functional_call``."""

    def __init__(self, m, name):
        super().__init__()
        self.m, self.name = m, name

    def forward(self, *args, **kwargs):
        return getattr(self.m, self.name)(*args, **kwargs)


def _method_with(module, name, state, training):
    """``module.<name>`` run with the parameters and buffers of the kernel's copy (they may have been loaded,
    trained or converted there) and its training flags."""
    parts = dict(module.named_modules(remove_duplicate=False))
    for path, flag in (training if type(training) is dict else {}).items():
        if path in parts:
            parts[path].training = bool(flag)
    # each tensor under its first name: tied weights (GPT's head and embedding) are given once, as
    # functional_call requires, and it ties them again
    tensors = [*module.named_parameters(remove_duplicate=False), *module.named_buffers(remove_duplicate=False)]
    names = {}
    for n, t in tensors:
        names.setdefault(id(t), n)
    first = {n: names[id(t)] for n, t in tensors}
    if type(state) is not dict:
        raise probe.WireError("bad state")
    given = {}
    for n, t in state.items():
        if n in first and torch.is_tensor(t):
            given.setdefault(first[n], t)
    state = {f"m.{n}": t for n, t in given.items()}
    call = _Method(module, name)
    return lambda *args, **kwargs: torch.func.functional_call(call, state, tuple(args), kwargs)


def _gradients(out, grads, inputs) -> list:
    """The gradients of sum(out * grads) with respect to ``inputs`` (None where they do not reach)."""
    keep = probe._Keep()
    keep(out)  # the output's tensors, in the order the kernel got them
    pairs = [(o, g) for o, g in zip(keep.kept, grads if type(grads) is list else [])
             if torch.is_tensor(g) and o.requires_grad]
    if not pairs or not inputs:
        return [None] * len(inputs)
    return list(torch.autograd.grad([o for o, _ in pairs], inputs, [g for _, g in pairs], allow_unused=True))


def _tree(m, own=()) -> dict:
    """A module made here, as the kernel's copy needs it: type, training flag, simple attributes, parameters,
    buffers and submodules (the copy is made by ``probe._mirror``). ``real``: a submodule of a course module
    the kernel has (an earlier notebook's, not one of ``own``), which the kernel makes as what it is, so that
    student code may call it (a GPT's LayerNorms and attention, say)."""
    def simple(v):
        return type(v) in probe.SCALARS or type(v) in (tuple, list) and all(type(x) in probe.SCALARS for x in v)
    return {"type": [type(m).__module__, type(m).__qualname__], "training": m.training,
            "attrs": {k: v for k, v in vars(m).items() if not k.startswith("_") and k != "training" and simple(v)},
            "params": {k: p.detach() for k, p in m._parameters.items() if p is not None},
            "frozen": [k for k, p in m._parameters.items() if p is not None and not p.requires_grad],
            "absent": [k for k, p in m._parameters.items() if p is None],    # nn.Linear(..., bias=False)
            "buffers": {k: b for k, b in m._buffers.items() if b is not None},
            "persistent": [k for k in m._buffers if k not in m._non_persistent_buffers_set],
            "children": {k: _tree(c, own) for k, c in m._modules.items() if c is not None},
            "real": type(m).__module__.startswith("lib.") and type(m).__module__ not in own}


def grad(t: torch.Tensor) -> torch.Tensor:
    """Mark an argument of ``Kernel.trace`` whose gradient is wanted."""
    return t.detach().clone().requires_grad_(True)


def _mark_grads(encoded_args: dict, args) -> None:
    for data, arg in zip(encoded_args["v"], args):
        if torch.is_tensor(arg) and arg.requires_grad and isinstance(data, dict) and data.get("$") == "tensor":
            data["grad"] = True


class _Encoder(probe.Encoder):
    """The judge's encoder: a ``Remote`` among the arguments becomes a reference the kernel resolves."""

    def __call__(self, obj, depth: int = 0):
        if isinstance(obj, (Remote, Here)):
            return obj.ref()
        return super().__call__(obj, depth)


def _remote(data: dict) -> Remote:
    return Remote(("handle", int(data["handle"])), (), str(data.get("type", "")), bool(data.get("module")),
                  bool(data.get("callable")), bool(data.get("tensor_subclass"))) \
        if isinstance(data.get("handle"), int) else Remote(("none", 0), (), str(data.get("type", "")))


def _error_info(data: dict) -> dict:
    return {"type": str(data.get("type", "Exception"))[:100], "types": [str(t)[:100] for t in data.get("types", [])][:20],
            "message": str(data.get("message", ""))[:2000]}


def _student_error(what: str, info: dict, hint: str) -> StudentError:
    kind, types, message = info["type"], info["types"], info["message"]
    if "ForbiddenCall" in types:
        text = f"{what}: {message}"
    elif "NotImplementedError" in types:
        text = f"{what} is not implemented yet (it raises NotImplementedError)"
    else:
        text = f"{what} raised {kind}: {message}" + (f". {hint}" if hint else "")
    return StudentError(text, kind, types, message)


class LocalTransport:
    """Serve requests in this process, on ``namespace`` (the judge then runs where the student's code does)."""

    def __init__(self, namespace: dict):
        self.namespace, self.state = namespace, {}

    def __call__(self, text: str, answer=None) -> str:
        self.state["ask"] = None if answer is None else (lambda question: _as_grader(answer, question))
        return probe.handle(text, self.namespace, self.state)

    @staticmethod
    def cpu() -> float:
        """Processor seconds of this thread, where the requests run."""
        return time.thread_time()


def _as_grader(answer, question: str) -> str:
    """``answer(question)`` as the grader computes it, outside the kernel: the bans and the kernel's dispatch
    modes (the ban, the operator record) set aside."""
    from torch.utils._python_dispatch import _disable_current_modes

    from lib.guard import lifted
    with lifted(), _disable_current_modes():
        return answer(question)

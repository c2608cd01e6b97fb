"""Switch off shortcuts while a student's code is being graded.

An exercise such as "write softmax from exp and sum" cannot be passed by
calling ``torch.softmax``, nor by importing the course's own reference
solution from ``lib``. While grading, the checks run the student's code
inside ``forbid(...)``:

- PyTorch operators whose name contains one of the given words (say
  ``"softmax"``) raise ``ForbiddenCall``. The ban works at PyTorch's
  dispatcher, so every spelling is caught: ``torch.softmax``,
  ``x.softmax``, ``F.softmax``, ``nn.Softmax``, ``torch.ops.aten._softmax``.
- Reference functions and modules marked with ``@reference`` raise too.

- Listed ``torch.nn`` modules and ``torch.nn.functional`` functions (say
  ``nn.MultiheadAttention``) refuse to run: in training mode some of them
  never reach a fused operator the dispatcher could catch.

Code wrapped with ``trusted(fn)``, or run inside ``with lifted():``, runs with
the ban lifted: the grader hands such trusted versions of *earlier* exercises
to the student's code, so a mistake in one exercise does not cost the points
of the next.

The ban runs inside the student's kernel, so a determined student could
switch it off; it is there to stop honest shortcuts with a clear message. The
grader also reads every answer's source and flags code that reaches into
PyTorch's internals for a person to look at (``autograder/scan.py``).
"""
import contextlib
import functools
import inspect

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class ForbiddenCall(RuntimeError):
    """Raised when graded code calls something the exercise asks you to write."""


_state = {"banned_words": (), "blocked": frozenset(), "trusted_depth": 0}


def _is_banned(name: str) -> bool:
    return _state["trusted_depth"] == 0 and any(w in name for w in _state["banned_words"])


class _BanOps(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if _is_banned(name):
            raise ForbiddenCall(
                f"this exercise asks you to build it yourself: calling PyTorch's "
                f"built-in '{name}' is not allowed here"
            )
        return func(*args, **(kwargs or {}))


def without_dynamo(mode: type) -> type:
    """PyTorch wraps a dispatch mode's ``__torch_dispatch__`` so that ``torch.compile`` skips it, and that
    wrapper imports ``torch._dynamo`` (a second of start-up) on its first call. Graded code is never
    compiled: mark the wrapper as done, so it calls the method directly."""
    fn = getattr(mode.__torch_dispatch__, "__wrapped__", None)
    if fn is not None:
        fn.__dynamo_disable = fn
    return mode


_BanOps = without_dynamo(_BanOps)


def _check_reference(name: str) -> None:
    if _state["trusted_depth"] == 0 and name in _state["blocked"]:
        raise ForbiddenCall(
            f"calling the course's reference '{name}' from lib is not allowed in this "
            f"exercise: write it yourself"
        )


def reference(obj):
    """Mark a function or an ``nn.Module`` class in ``lib`` as a reference solution."""
    name = obj.__name__
    if inspect.isclass(obj):
        forward = obj.forward

        @functools.wraps(forward)
        def guarded_forward(self, *args, **kwargs):
            _check_reference(name)
            return forward(self, *args, **kwargs)

        obj.forward = guarded_forward
        return obj

    @functools.wraps(obj)
    def guarded(*args, **kwargs):
        _check_reference(name)
        return obj(*args, **kwargs)

    return guarded


def trusted(obj):
    """Wrap a function so that it runs with every ban lifted; for an ``nn.Module``
    class, return a subclass whose construction and ``forward`` run trusted."""
    if inspect.isclass(obj):
        return type(obj.__name__, (obj,), {"__init__": _lifted(obj.__init__), "forward": _lifted(obj.forward),
                                           "__module__": obj.__module__, "__qualname__": obj.__qualname__})
    return _lifted(obj)


@contextlib.contextmanager
def lifted():
    """Run the block with every ban lifted (trusted code only)."""
    _state["trusted_depth"] += 1
    try:
        yield
    finally:
        _state["trusted_depth"] -= 1


def _lifted(fn):
    @functools.wraps(fn)
    def run_trusted(*args, **kwargs):
        with lifted():
            return fn(*args, **kwargs)

    return run_trusted


def _refuse_module(name):
    def refused(*args, **kwargs):
        if _state["trusted_depth"]:
            return saved_forward(*args, **kwargs)
        raise ForbiddenCall(f"this exercise asks you to build it yourself: PyTorch's built-in {name} "
                            f"is not allowed here")
    owner, attr = _owner(name)
    saved_forward = getattr(owner, attr)
    return owner, attr, saved_forward, refused


def _owner(name):
    """(object, attribute) of ``nn.X`` (its forward) or ``F.x``."""
    prefix, _, rest = name.partition(".")
    if prefix == "nn":
        return getattr(torch.nn, rest), "forward"
    if prefix == "F":
        return torch.nn.functional, rest
    raise ValueError(f"cannot ban {name!r}: name an nn module (nn.X) or a functional (F.x)")


@contextlib.contextmanager
def forbid(ops=(), references=(), modules=()):
    """Ban PyTorch operators whose name contains any word in ``ops``, the ``lib``
    references named in ``references`` and the ``torch.nn`` modules or
    ``torch.nn.functional`` functions named in ``modules`` (``"nn.Transformer"``,
    ``"F.multi_head_attention_forward"``) for the duration of the block."""
    saved = dict(_state)
    _state["banned_words"] = tuple(ops)
    _state["blocked"] = frozenset(references)
    _state["trusted_depth"] = 0
    patched = [_refuse_module(name) for name in modules]
    for owner, attr, _, refused in patched:
        setattr(owner, attr, refused)
    try:
        with _BanOps():
            yield
    finally:
        for owner, attr, original, _ in patched:
            setattr(owner, attr, original)
        _state.update(saved)

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

Code wrapped with ``trusted(fn)`` runs with the ban lifted: the checks hand
such trusted versions of *earlier* exercises to the student's code, so a
mistake in one exercise does not cost the points of the next.
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


def _lifted(fn):
    @functools.wraps(fn)
    def run_trusted(*args, **kwargs):
        _state["trusted_depth"] += 1
        try:
            return fn(*args, **kwargs)
        finally:
            _state["trusted_depth"] -= 1

    return run_trusted


@contextlib.contextmanager
def forbid(ops=(), references=()):
    """Ban PyTorch operators whose name contains any word in ``ops`` and the
    ``lib`` references named in ``references`` for the duration of the block."""
    saved = dict(_state)
    _state["banned_words"] = tuple(ops)
    _state["blocked"] = frozenset(references)
    _state["trusted_depth"] = 0
    try:
        with _BanOps():
            yield
    finally:
        _state.update(saved)

"""What every hidden check needs: run student code safely, with shortcuts banned
and earlier exercises replaced by trusted references."""
import contextlib
import sys
import warnings

import torch

from lib.guard import ForbiddenCall, forbid, trusted

_MISSING = object()


@contextlib.contextmanager
def student_code(namespace=None, inject=None, ops=(), references=()):
    """Run the block as graded student code.

    - ``inject``: names to replace in the notebook's globals (``namespace``)
      with trusted versions, so this exercise is graded on its own;
    - ``ops`` / ``references``: PyTorch operators and ``lib`` references the
      exercise may not call (see ``lib.guard``);
    - warnings are silenced and anything the code writes to stderr goes to
      stdout (nbgrader zeroes a test cell that writes to stderr, even for a
      correct answer that only warns).
    """
    inject = inject or {}
    saved = {name: namespace.get(name, _MISSING) for name in inject} if namespace is not None else {}
    try:
        for name, fn in inject.items():
            namespace[name] = trusted(fn)
        with warnings.catch_warnings(), contextlib.redirect_stderr(sys.stdout):
            warnings.simplefilter("ignore")
            with forbid(ops, references):
                yield
    finally:
        for name, old in saved.items():
            if old is _MISSING:
                namespace.pop(name, None)
            else:
                namespace[name] = old


def call(what: str, fn, *args, hint: str = "", **kwargs):
    """Call student code; turn any exception into a failure that says which call broke
    (and, with ``hint``, the likely cause)."""
    try:
        return fn(*args, **kwargs)
    except AssertionError:
        raise
    except ForbiddenCall as e:
        raise AssertionError(f"{what}: {e}") from None
    except NotImplementedError:
        raise AssertionError(f"{what} is not implemented yet (it raises NotImplementedError)") from None
    except Exception as e:  # noqa: BLE001 - any crash of student code is a failed check
        raise AssertionError(f"{what} raised {type(e).__name__}: {e}" + (f". {hint}" if hint else "")) from None


def unpack_pair(result, what: str):
    """Attention functions return (output, weights): check that shape of the answer."""
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise AssertionError(f"{what} should return a pair (output, weights), got {type(result).__name__}")
    return result


def plain(value, what: str):
    """``value`` rebuilt from Python's own types (list, tuple, dict, str, int, float, bool, None).

    Student code could return an object whose ``==`` is always true (a str or
    list subclass, say); comparing the rebuilt copy compares the real contents.
    """
    kind = type(value)
    if kind in (str, int, float, bool, type(None)):
        return value
    if kind in (list, tuple):
        return kind(plain(v, what) for v in value)
    if kind is dict:
        return {plain(k, what): plain(v, what) for k, v in value.items()}
    raise AssertionError(f"{what} contains a {kind.__name__}; expected lists, tuples, dicts, strings "
                         f"and numbers only")


def torch_mask(mask, b: int, h: int, t_q: int, t_k: int | None = None):
    """Our boolean mask (True = may attend), broadcastable to (B, T_q, T_k) -> the (B*h, T_q, T_k) mask
    of torch's attention modules, where True = blocked."""
    if mask is None:
        return None
    return ~mask.expand(b, t_q, t_k or t_q).repeat_interleave(h, 0)


def linear_problem(module, name: str, d_in: int, d_out: int, what: str, bias: bool = False):
    """Why ``module.<name>`` is not an nn.Linear(d_in, d_out) (with a bias, if ``bias``), or None."""
    lin = getattr(module, name, None)
    if not isinstance(lin, torch.nn.Linear):
        return f"{what} should have an nn.Linear `{name}`"
    if (lin.in_features, lin.out_features) != (d_in, d_out):
        return f"{what}.{name} maps {lin.in_features} -> {lin.out_features} features, expected {d_in} -> {d_out}"
    if bias and lin.bias is None:
        return f"{what}.{name} has no bias: keep the default bias=True"
    return None


def seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)

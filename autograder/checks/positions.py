"""Hidden checks of notebook 02 (position vectors).

Each function is one graded test cell. The expected tables are computed here
in float64 by a formula written independently of ``lib.positions`` (one
frequency per column), and each common mistake has a hint that names it.
"""
import re

import torch
from torch import nn

from lib import positions as ref
from lib.guard import ForbiddenCall
from lib.testing import assert_close, assert_shape

from .common import call, seeded, student_code

BANNED = ()  # PyTorch has no built-in for position vectors; only the course's references are off
REFERENCES = ("sinusoidal_positions", "SinusoidalPositions", "LearnedPositions")
SLICE_HINT = ("x is (batch, T, d_model): add the first T rows of the table, table[:T] with T = x.shape[-2] "
              "(not the whole table, and not a slice by the batch size)")


def _graded(namespace=None, inject=None):
    return student_code(namespace, inject, ops=BANNED, references=REFERENCES)


# --- tables, right and wrong -------------------------------------------------

def _table(max_len, d_model, *, layout="interleaved", first="sin", freq="2i", start=0, op="divide"):
    """A (max_len, d_model) sinusoidal table in float64, right by default, or with one mistake."""
    p = torch.arange(start, start + max_len, dtype=torch.float64)[:, None]
    half = d_model // 2
    i = torch.arange(half, dtype=torch.float64)
    if layout == "interleaved":
        k = torch.arange(d_model, dtype=torch.float64)
        exponent = {"2i": 2 * (k // 2), "i": k // 2, "k": k, "2i+2": 2 * (k // 2) + 2, "none": 0 * k}[freq] / d_model
    else:
        exponent = torch.cat([2 * i, 2 * i]) / d_model
    scale = 10000.0 ** exponent
    angle = p / scale if op == "divide" else p * scale
    if layout == "interleaved":
        even = torch.arange(d_model) % 2 == 0
        first_fn, second_fn = (torch.sin, torch.cos) if first == "sin" else (torch.cos, torch.sin)
        if first == "sin only":
            return torch.sin(angle)
        return torch.where(even, first_fn(angle), second_fn(angle))
    first_fn, second_fn = (torch.sin, torch.cos) if first == "sin" else (torch.cos, torch.sin)
    return torch.cat([first_fn(angle[:, :half]), second_fn(angle[:, half:])], dim=1)


def expected_table(max_len, d_model):
    """The right table, float32 like the course's (PyTorch's default dtype)."""
    return _table(max_len, d_model).float()


def _table_hints(max_len, d_model):
    t = lambda **kw: _table(max_len, d_model, **kw).float()  # noqa: E731
    return {
        "sin and cos are swapped: sin goes on the even dimensions (0, 2, 4, ...) and cos on the odd ones":
            t(first="cos"),
        "sin fills the first half of the dimensions and cos the second half (the common slide erratum): "
        "interleave them, PE[p, 2i] = sin and PE[p, 2i+1] = cos":
            t(layout="halves"),
        "cos fills the first half of the dimensions and sin the second half: interleave them, "
        "PE[p, 2i] = sin and PE[p, 2i+1] = cos":
            t(layout="halves", first="cos"),
        "every dimension is a sine: the odd dimensions 2i+1 hold cos, with the frequency of dimension 2i":
            t(first="sin only", freq="k"),
        "the exponent uses i instead of 2i: divide by 10000^(2i/d_model), where 2i is the even dimension's index":
            t(freq="i"),
        "dimension 2i+1 must use the same frequency as dimension 2i, 10000^(2i/d_model), "
        "not 10000^((2i+1)/d_model): a sin/cos pair shares one frequency":
            t(freq="k"),
        "the frequencies start one pair too late: i runs from 0, so dimensions 0 and 1 are sin(p) and cos(p)":
            t(freq="2i+2"),
        "every pair turns at the same frequency 1: was 2i / d_model computed with integer division (//)? "
        "It is a fraction between 0 and 1":
            t(freq="none"),
        "positions start at 0, not 1: the first row must be sin(0) = 0 and cos(0) = 1":
            t(start=1),
        "p is multiplied by 10000^(2i/d_model); divide it instead (the wavelengths grow with the dimension)":
            t(op="multiply"),
        "the table is transposed: rows are positions (max_len), columns are dimensions (d_model)":
            _table(max_len, d_model).float().T,
    }


# --- sinusoidal_positions ------------------------------------------------------

def sinusoidal_positions_formula(sinusoidal_positions, namespace=None):
    """Equals PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(same) for several sizes."""
    # a small case first, where every known mistake is far from the right table
    # (loose tolerance: float32 rounding of large angles must not hide a hint)
    cases = [((5, 4), 1e-3), ((50, 16), 1e-4), ((1, 2), 1e-4), ((20, 6), 1e-4), ((64, 64), 1e-4), ((12, 10), 1e-4)]
    for (max_len, d_model), atol in cases:
        what = f"sinusoidal_positions({max_len}, {d_model})"
        with _graded(namespace):
            pe = call(what, sinusoidal_positions, max_len, d_model)
        if torch.is_tensor(pe) and pe.dtype != torch.float32 and pe.is_floating_point():
            raise AssertionError(f"{what} has dtype {pe.dtype}: build the table in float32, PyTorch's default "
                                 f"(for example from torch.arange(max_len, dtype=torch.float32))")
        assert_close(pe, expected_table(max_len, d_model), what, atol=atol, hints=_table_hints(max_len, d_model))


def _raises_value_error(fn, args, what):
    """None when fn(*args) raises ValueError; else a description of what happened instead."""
    try:
        with _graded():
            out = fn(*args)
    except ValueError:
        return None
    except ForbiddenCall as e:
        raise AssertionError(f"{what}: {e}") from None
    except NotImplementedError:
        raise AssertionError(f"{what} is not implemented yet (it raises NotImplementedError)") from None
    except Exception as e:  # noqa: BLE001
        return f"raised {type(e).__name__} ({e})"
    return f"returned {'a tensor of shape ' + str(tuple(out.shape)) if torch.is_tensor(out) else type(out).__name__}"


def sinusoidal_positions_odd(sinusoidal_positions, namespace=None):
    """A ValueError for an odd d_model; even sizes (including d_model = 2) still work."""
    for max_len, d_model in [(4, 2), (3, 8)]:
        what = f"sinusoidal_positions({max_len}, {d_model})"
        with _graded(namespace):
            pe = call(what, sinusoidal_positions, max_len, d_model)
        assert_shape(pe, (max_len, d_model), what)
    for max_len, d_model in [(10, 7), (3, 1)]:
        what = f"sinusoidal_positions({max_len}, {d_model})"
        instead = _raises_value_error(sinusoidal_positions, (max_len, d_model), what)
        if instead is not None:
            raise AssertionError(
                f"{what} {instead}. sin and cos come in pairs, so an odd d_model has no valid table: "
                f"check it first and raise a ValueError that says d_model must be even")


# --- the modules, shared -------------------------------------------------------

def _names_number(message: str, n: int) -> bool:
    return re.search(rf"(?<!\d){n}(?!\d)", message) is not None


def _too_long(make, name, namespace, inject, max_len=7, d_model=6):
    """The module accepts T = max_len and refuses T > max_len with a ValueError naming both numbers."""
    g = seeded(20)
    with _graded(namespace, inject):
        layer = call(f"{name}({max_len}, {d_model})", make, max_len, d_model)
    x = torch.randn(2, max_len, d_model, generator=g)
    what = f"{name}({max_len}, {d_model})(x of shape {tuple(x.shape)})"
    with _graded(namespace, inject):
        out = call(what, layer, x, hint=f"a sequence exactly max_len = {max_len} long is allowed")
    assert_shape(out, tuple(x.shape), f"output of {what}")
    long_len = max_len + 4
    x = torch.randn(1, long_len, d_model, generator=g)
    what = f"{name}({max_len}, {d_model})(x of shape {tuple(x.shape)})"
    try:
        with _graded(namespace, inject):
            out = layer(x)
    except ValueError as e:
        message = str(e)
        if not (_names_number(message, long_len) and _names_number(message, max_len)):
            raise AssertionError(
                f"{what} raised ValueError({message!r}): the message must name both numbers, "
                f"the sequence length {long_len} and max_len {max_len}, so the user knows what to change") from None
        return
    except ForbiddenCall as e:
        raise AssertionError(f"{what}: {e}") from None
    except NotImplementedError:
        raise AssertionError(f"{what} is not implemented yet (it raises NotImplementedError)") from None
    except Exception as e:  # noqa: BLE001
        raise AssertionError(
            f"{what} raised {type(e).__name__} ({e}): a sequence longer than max_len = {max_len} must raise "
            f"a ValueError that names both numbers; check T = x.shape[-2] first, in forward") from None
    raise AssertionError(
        f"{what} returned without an error: there are only {max_len} position vectors, so a sequence of "
        f"{long_len} must raise a ValueError that names both numbers")


def _addition_hints(x, table_t):
    return {
        "you returned the position vectors alone: return x plus the position vectors, not the vectors alone":
            table_t.expand_as(x),
        "x came back unchanged: the position vectors are not added": x,
        "x is scaled by sqrt(d_model) before adding; that scaling belongs to the word embedding, not here":
            x * x.shape[-1] ** 0.5 + table_t,
    }


# --- SinusoidalPositions -------------------------------------------------------

def _sinusoidal_inject():
    return {"sinusoidal_positions": ref.sinusoidal_positions}


def sinusoidal_module_forward(SinusoidalPositions, namespace):
    """forward(x) = x + PE[:T] for several lengths (T < max_len, T = max_len, T = 1) and batch sizes."""
    g = seeded(21)
    max_len, d_model = 16, 8
    table = expected_table(max_len, d_model)
    with _graded(namespace, _sinusoidal_inject()):
        layer = call(f"SinusoidalPositions({max_len}, {d_model})", SinusoidalPositions, max_len, d_model)
    for batch, seq in [(2, 5), (3, max_len), (1, 1), (4, 9)]:
        x = torch.randn(batch, seq, d_model, generator=g)
        what = f"SinusoidalPositions({max_len}, {d_model})(x of shape {tuple(x.shape)})"
        with _graded(namespace, _sinusoidal_inject()):
            out = call(what, layer, x, hint=SLICE_HINT)
        hints = _addition_hints(x, table[:seq])
        if seq < max_len:
            hints["the positions start at 1: add rows 0..T-1 of the table, table[:T]"] = x + table[1:seq + 1]
        assert_close(out, x + table[:seq], what, hints=hints)


def sinusoidal_module_too_long(SinusoidalPositions, namespace):
    _too_long(SinusoidalPositions, "SinusoidalPositions", namespace, _sinusoidal_inject())


def sinusoidal_module_buffer(SinusoidalPositions, namespace):
    """No trainable parameters; the output keeps x's dtype (float64, bfloat16); the table follows .to(device)."""
    g = seeded(22)
    max_len, d_model = 12, 6
    make = f"SinusoidalPositions({max_len}, {d_model})"
    with _graded(namespace, _sinusoidal_inject()):
        layer = call(make, SinusoidalPositions, max_len, d_model)
    params = [name for name, _ in layer.named_parameters()]
    if params:
        raise AssertionError(
            f"{make} has parameters ({', '.join(params)}): the sinusoidal table is fixed, not learned, and an "
            f"nn.Parameter is handed to the optimizer, which changes it. Store the table with "
            f"self.register_buffer(...)")
    table = expected_table(max_len, d_model)
    x = torch.randn(2, 5, d_model, generator=g, dtype=torch.float64)
    with _graded(namespace, _sinusoidal_inject()):
        out = call(f"{make}(x of dtype float64)", layer, x)
    assert_close(out, x + table[:5].double(), f"{make}(x of dtype float64): the output must keep x's dtype", atol=1e-6)
    x = torch.randn(2, 5, d_model, generator=g).to(torch.bfloat16)
    with _graded(namespace, _sinusoidal_inject()):
        out = call(f"{make}(x of dtype bfloat16)", layer, x)
    if torch.is_tensor(out) and out.dtype != torch.bfloat16:
        raise AssertionError(
            f"{make}(x of dtype bfloat16) returned dtype {out.dtype}: the output must keep x's dtype; "
            f"cast the table to it before adding, table[:T].to(x.dtype)")
    assert_close(out, x + table[:5].to(torch.bfloat16), f"{make}(x of dtype bfloat16)", atol=0.05, rtol=0.02)
    # a model moved with .to(device) must take its table along; the "meta" device stands in for a GPU
    with _graded(namespace, _sinusoidal_inject()):
        moved = call(make, SinusoidalPositions, max_len, d_model)
    x = torch.empty(2, 5, d_model, device="meta")
    what = f"{make}.to(device)(x on that device)"
    try:
        with _graded(namespace, _sinusoidal_inject()):
            out = moved.to("meta")(x)
    except NotImplementedError:
        raise AssertionError(f"{what} is not implemented yet (it raises NotImplementedError)") from None
    except ForbiddenCall as e:
        raise AssertionError(f"{what}: {e}") from None
    except Exception as e:  # noqa: BLE001
        raise AssertionError(
            f"after the module is moved with .to(device), forward fails ({type(e).__name__}: {str(e)[:120]}): "
            f"the table stayed on the CPU. Store it with self.register_buffer('pe', table) so that .to(device) "
            f"moves it; a tensor created inside forward needs device=x.device") from None
    if not torch.is_tensor(out) or out.device != x.device:
        raise AssertionError(f"{what} returned {'a tensor on ' + str(out.device) if torch.is_tensor(out) else type(out).__name__}"
                             f", expected a tensor on x's device")


# --- LearnedPositions ----------------------------------------------------------

def _learned_table(layer, max_len, d_model, make):
    """The one trainable tensor of the layer, and a function giving it as (max_len, d_model)."""
    params = [(name, p) for name, p in layer.named_parameters() if p.requires_grad]
    if not params:
        raise AssertionError(
            f"{make} has no trainable parameters: a plain tensor is never trained. Wrap the table in "
            f"nn.Parameter(...) or use nn.Embedding(max_len, d_model)")
    total = sum(p.numel() for _, p in params)
    if len(params) == 1 and total == (max_len + 1) * d_model:
        raise AssertionError(
            f"{make} has {max_len + 1} position vectors, one too many: positions run from 0 to max_len - 1, "
            f"so max_len = {max_len} needs exactly {max_len} vectors ({max_len * d_model} trainable numbers)")
    if total != max_len * d_model or len(params) != 1:
        shapes = ", ".join(f"{name} {tuple(p.shape)}" for name, p in params)
        raise AssertionError(
            f"{make} should have exactly max_len * d_model = {max_len * d_model} trainable numbers, one vector per "
            f"position, in one tensor; it has {total} ({shapes})")
    name, param = params[0]
    if tuple(param.shape) == (d_model, max_len):
        return name, param, lambda t: t.T  # one column per position, as some slides write it
    return name, param, lambda t: t.reshape(max_len, d_model)


def learned_module_forward(LearnedPositions, namespace):
    """max_len * d_model trainable numbers; forward(x) = x + P[:T], and changing P changes the output."""
    g = seeded(23)
    max_len, d_model = 9, 6
    make = f"LearnedPositions({max_len}, {d_model})"
    with _graded(namespace):
        torch.manual_seed(0)
        layer = call(make, LearnedPositions, max_len, d_model)
    _, param, as_table = _learned_table(layer, max_len, d_model, make)
    previous = None
    for trial in range(2):  # new values in the table must show up in the output
        with torch.no_grad():
            param.copy_(torch.randn(param.shape, generator=g))
        table = as_table(param.detach()).clone()
        for batch, seq in [(2, 5), (1, max_len)]:
            x = torch.randn(batch, seq, d_model, generator=g)
            what = f"{make}(x of shape {tuple(x.shape)})"
            with _graded(namespace), torch.no_grad():
                out = call(what, layer, x, hint=SLICE_HINT)
            hints = _addition_hints(x, table[:seq])
            if seq < max_len:
                hints["the positions start at 1: add rows 0..T-1 of the table"] = x + table[1:seq + 1]
            if previous is not None:
                hints["the output does not follow the parameter's new values: use the parameter itself in "
                      "forward, not a copy made in __init__"] = x + previous[:seq]
            assert_close(out, x + table[:seq], what, hints=hints)
        previous = table


def learned_module_trained(LearnedPositions, namespace):
    """Random (not all-zero) initial vectors; gradients reach exactly the rows of positions 0..T-1."""
    g = seeded(24)
    max_len, d_model = 9, 6
    make = f"LearnedPositions({max_len}, {d_model})"
    with _graded(namespace):
        torch.manual_seed(0)
        layer = call(make, LearnedPositions, max_len, d_model)
    name, param, as_table = _learned_table(layer, max_len, d_model, make)
    if param.detach().abs().max().item() == 0:
        raise AssertionError(
            f"{make}: the position vectors start all zero. Initialise them with small random values, like word "
            f"embeddings (nn.Embedding does this; or nn.init.normal_(table, std=0.02))")
    x = torch.randn(2, 5, d_model, generator=g)
    w = torch.randn(2, 5, d_model, generator=g)
    layer.zero_grad(set_to_none=True)
    with _graded(namespace):
        out = call(f"{make}(x of shape {tuple(x.shape)})", layer, x)
    if not torch.is_tensor(out) or not out.requires_grad:
        raise AssertionError(
            f"{make}: the output does not depend on the trainable table (no gradient can reach it). Use the "
            f"Parameter itself in forward, not .data, .detach() or a copy, and not under torch.no_grad()")
    (out * w).sum().backward()
    if param.grad is None:
        raise AssertionError(f"{make}: no gradient reached the parameter {name}: use it in forward, not a copy")
    expected = torch.zeros(max_len, d_model)
    expected[:5] = w.sum(0)
    assert_close(as_table(param.grad), expected,
                 f"gradient of the position table after a loss on x of length 5 (rows 0..4 get gradient, rows 5.. none)",
                 hints={"the gradient reaches rows 1..5: position p must use row p, starting at 0":
                        torch.cat([torch.zeros(1, d_model), w.sum(0), torch.zeros(max_len - 6, d_model)])})


def learned_module_too_long(LearnedPositions, namespace):
    _too_long(LearnedPositions, "LearnedPositions", namespace, None)

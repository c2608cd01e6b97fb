"""What the two position modules share: the contract of forward, x (batch, T, d_model) -> x + P[:T],
and the ValueError for a sequence longer than max_len."""
import re

import torch

from lib.testing import assert_shape

from ..common import module, seeded
from ..kernel import StudentError

SLICE_HINT = ("x is (batch, T, d_model): add the first T rows of the table, table[:T] with T = x.shape[-2] "
              "(not the whole table, and not a slice by the batch size)")


def build(k, name, max_len, d_model, inject=None):
    """The student's ``name(max_len, d_model)``, built with torch seeded (as a notebook run would be)."""
    made = f"{name}({max_len}, {d_model})"
    layer = k.call(made, k.student(name), max_len, d_model, inject=inject, seed=0)
    return layer, made, module(k, layer, made)


def addition_hints(x, rows, table=None):
    """The usual mistakes of forward, given the rows P[:T] that should be added (and the whole table, if known)."""
    hints = {} if table is None or x.shape[0] > table.shape[0] or x.shape[0] == x.shape[1] else {
        "the table is indexed by x.size(0), the batch size, so every position of sentence b gets position vector "
        "b (PyTorch's tutorial works sequence-first, (T, B, d)); x is batch-first here, (B, T, d): add "
        "table[:x.size(1)]": x + table[:x.shape[0]][:, None, :]}
    return hints | {
        "you returned the position vectors alone: return x plus the position vectors, not the vectors alone":
            rows.expand_as(x),
        "x came back unchanged: the position vectors are not added": x,
        "x is scaled by sqrt(d_model) before adding; that scaling belongs to the word embedding, not here":
            x * x.shape[-1] ** 0.5 + rows,
    }


def scaled_rows(out, x, rows, what) -> None:
    """Raise, naming the factor, when ``out`` is x plus the rows times one constant other than 1 (a scale some
    libraries put on their position vectors), or the rows alone in a shape of their own ((1, T, d_model), for a
    caller that adds them itself)."""
    if torch.is_tensor(out) and out.shape != x.shape and out.numel() == rows.numel() and out.is_floating_point() \
            and torch.allclose(out.reshape(rows.shape).double(), rows.double(), atol=1e-5):
        raise AssertionError(f"{what} has shape {tuple(out.shape)}: you returned the position vectors alone: return x "
                             f"plus the position vectors, (B, T, d_model), not the vectors alone")
    if not torch.is_tensor(out) or out.shape != x.shape or not out.is_floating_point():
        return
    added, wanted = (out - x).double(), rows.expand_as(x).double()
    factor = ((added * wanted).sum() / (wanted * wanted).sum()).item()
    if abs(factor) < 1e-3 or abs(factor - 1) < 1e-3 or not torch.allclose(added, factor * wanted, atol=1e-5,
                                                                           rtol=1e-4):
        return
    d = x.shape[-1]
    known = {d ** -0.5: " = 1/sqrt(d_model)", d ** 0.5: " = sqrt(d_model)", 1 / d: " = 1/d_model"}
    named = next((text for value, text in known.items() if abs(factor - value) < 1e-3 * value), "")
    raise AssertionError(f"{what}: the position vectors are scaled by {factor:.4g}{named} before they are added. "
                         f"Add the table's rows as they are, x + P[:T]: the scale is the table's own (and a learned "
                         f"table finds its size in training)")


def _names_number(message: str, n: int) -> bool:
    return re.search(rf"(?<!\d){n}(?!\d)", message) is not None


def too_long(k, name, inject=None, max_len=7, d_model=6):
    """The module accepts T = max_len and refuses T > max_len with a ValueError naming both numbers."""
    g = seeded(20)
    layer, made, _ = build(k, name, max_len, d_model, inject)
    x = torch.randn(2, max_len, d_model, generator=g)
    what = f"{made}(x of shape {tuple(x.shape)})"
    out = k.call(what, layer, x, hint=f"a sequence exactly max_len = {max_len} long is allowed", inject=inject)
    assert_shape(out, tuple(x.shape), f"output of {what}")
    long_len = max_len + 4
    x = torch.randn(1, long_len, d_model, generator=g)
    what = f"{made}(x of shape {tuple(x.shape)})"
    try:
        k.call(what, layer, x, inject=inject)
    except StudentError as e:
        if "NotImplementedError" in e.types or "ForbiddenCall" in e.types:
            raise
        if "ValueError" not in e.types:
            raise AssertionError(
                f"{what} raised {e.kind} ({e.raw}): a sequence longer than max_len = {max_len} must raise "
                f"a ValueError that names both numbers; check T = x.shape[-2] first, in forward") from None
        if not (_names_number(e.raw, long_len) and _names_number(e.raw, max_len)):
            raise AssertionError(
                f"{what} raised ValueError({e.raw!r}): the message must name both numbers, "
                f"the sequence length {long_len} and max_len {max_len}, so the user knows what to change") from None
        return
    raise AssertionError(
        f"{what} returned without an error: there are only {max_len} position vectors, so a sequence of "
        f"{long_len} must raise a ValueError that names both numbers")

"""LearnedPositions(max_len, d_model): one trainable (max_len, d_model) table P; x + P[:T]."""
import torch

from lib.testing import assert_close, assert_shape

from ..common import seeded
from .layers import SLICE_HINT, addition_hints, build, scaled_rows, too_long

MAX_LEN, D_MODEL = 9, 6


def _learned_table(info, max_len, d_model, made):
    """The name of the layer's one trainable tensor, and a function giving it as (max_len, d_model)."""
    params = {name: t for name, t in info.all_params().items() if t.requires_grad}
    if not params:
        raise AssertionError(
            f"{made} has no trainable parameters: a plain tensor is never trained. Wrap the table in "
            f"nn.Parameter(...) or use nn.Embedding(max_len, d_model)")
    sizes = {name: int(torch.Size(t.shape).numel()) for name, t in params.items()}
    total = sum(sizes.values())
    if len(params) == 1 and total % d_model == 0 and max_len < total // d_model <= max_len + 4:
        extra = total // d_model - max_len
        raise AssertionError(
            f"{made} has {max_len + extra} position vectors, {extra} too many: positions run from 0 to max_len - 1, "
            f"so max_len = {max_len} needs exactly {max_len} vectors ({max_len * d_model} trainable numbers), with "
            f"no offset (fairseq numbers positions from padding_idx + 1; here position 0 is the first token)")
    if total != max_len * d_model or len(params) != 1:
        shapes = ", ".join(f"{name} {t.shape}" for name, t in params.items())
        raise AssertionError(
            f"{made} should have exactly max_len * d_model = {max_len * d_model} trainable numbers, one vector per "
            f"position, in one tensor; it has {total} ({shapes})")
    (name, param), = params.items()
    if tuple(param.shape) == (d_model, max_len):
        return name, param.shape, lambda t: t.T  # one column per position, as some slides write it
    return name, param.shape, lambda t: t.reshape(max_len, d_model)


def LearnedPositions_forward(k):
    """max_len * d_model trainable numbers; forward(x) = x + P[:T], and changing P changes the output."""
    g = seeded(23)
    layer, made, info = build(k, "LearnedPositions", MAX_LEN, D_MODEL)
    name, shape, as_table = _learned_table(info, MAX_LEN, D_MODEL, made)
    initial = k.get(layer.attr(name))
    previous = as_table(initial.detach()).clone() if torch.is_tensor(initial) and initial.shape == shape else None
    for _ in range(2):  # new values in the table must show up in the output
        values = torch.randn(shape, generator=g)
        k.load(layer, {name: values})
        table = as_table(values)
        for batch, seq in [(2, 5), (1, MAX_LEN)]:
            x = torch.randn(batch, seq, D_MODEL, generator=g)
            what = f"{made}(x of shape {tuple(x.shape)})"
            out = k.call(what, layer, x, hint=SLICE_HINT, no_grad=True)
            hints = addition_hints(x, table[:seq])
            if seq < MAX_LEN:
                hints["the positions start at 1: add rows 0..T-1 of the table"] = x + table[1:seq + 1]
            if previous is not None:
                hints["the output does not follow the parameter's new values: use the parameter itself in "
                      "forward, not a copy made in __init__"] = x + previous[:seq]
            scaled_rows(out, x, table[:seq], what)
            assert_close(out, x + table[:seq], what, hints=hints)
        previous = table


def LearnedPositions_trained(k):
    """Random (not all-zero) initial vectors; gradients reach exactly the rows of positions 0..T-1."""
    g = seeded(24)
    layer, made, info = build(k, "LearnedPositions", MAX_LEN, D_MODEL)
    name, shape, as_table = _learned_table(info, MAX_LEN, D_MODEL, made)
    initial = k.get(layer.attr(name))
    if torch.is_tensor(initial) and initial.abs().max().item() == 0:
        raise AssertionError(
            f"{made}: the position vectors start all zero. Initialise them with small random values, like word "
            f"embeddings (nn.Embedding does this; or nn.init.normal_(table, std=0.02))")
    if torch.is_tensor(initial) and initial.shape == shape:
        rows = as_table(initial)
        if (rows == rows[:1]).all():
            raise AssertionError(
                f"{made}: every position starts with the same vector, so nothing tells the positions apart "
                f"until training does. Initialise the table with small random values, like word embeddings "
                f"(nn.Embedding does this; or nn.init.normal_(table, std=0.02))")
    x = torch.randn(2, 5, D_MODEL, generator=g)
    w = torch.randn(2, 5, D_MODEL, generator=g)
    what = f"{made}(x of shape {tuple(x.shape)})"
    run = k.trace(what, layer, x, backward=w)
    assert_shape(run.value, tuple(x.shape), f"output of {what}")
    if run.grads is None:
        raise AssertionError(
            f"{made}: the output does not depend on the trainable table (no gradient can reach it). Use the "
            f"Parameter itself in forward, not .data, .detach() or a copy, and not under torch.no_grad()")
    grad = run.grads["params"].get(name)
    if grad is None:
        raise AssertionError(f"{made}: no gradient reached the parameter {name}: use it in forward, not a copy")
    expected = torch.zeros(MAX_LEN, D_MODEL)
    expected[:5] = w.sum(0)
    hints = {
        "the gradient reaches rows 1..5: position p must use row p, starting at 0":
            torch.cat([torch.zeros(1, D_MODEL), w.sum(0), torch.zeros(MAX_LEN - 6, D_MODEL)]),
        "position 0 gets no gradient, as with nn.Embedding(..., padding_idx=0): positions are never padding, "
        "so create it as nn.Embedding(max_len, d_model)":
            expected * (torch.arange(MAX_LEN) > 0)[:, None],
    }
    assert_close(as_table(grad), expected,
                 "gradient of the position table after a loss on x of length 5 (rows 0..4 get gradient, rows 5.. none)",
                 hints=hints)


def LearnedPositions_too_long(k):
    too_long(k, "LearnedPositions")

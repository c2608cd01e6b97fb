"""SinusoidalPositions(max_len, d_model): x + PE[:T], the table a buffer, the output in x's dtype."""
import torch

from lib.testing import assert_close, assert_shape

from ..kernel import StudentError
from . import expected_table
from .layers import SLICE_HINT, addition_hints, build, scaled_rows, too_long


def _trusted(k):
    return {"sinusoidal_positions": k.reference("lib.positions.sinusoidal_positions")}


def SinusoidalPositions_forward(k):
    """forward(x) = x + PE[:T] for several lengths (T < max_len, T = max_len, T = 1) and batch sizes."""
    g = torch.Generator().manual_seed(21)
    max_len, d_model = 16, 8
    table = expected_table(max_len, d_model)
    trusted = _trusted(k)
    layer, made, _ = build(k, "SinusoidalPositions", max_len, d_model, trusted)
    for batch, seq in [(2, 5), (3, max_len), (1, 1), (4, 9)]:
        x = torch.randn(batch, seq, d_model, generator=g)
        what = f"{made}(x of shape {tuple(x.shape)})"
        out = k.call(what, layer, x, hint=SLICE_HINT, inject=trusted)
        again = k.call(f"{what}, called again", layer, x, hint=SLICE_HINT, inject=trusted)
        if torch.is_tensor(out) and torch.is_tensor(again) and out.shape == again.shape and not torch.equal(out, again):
            raise AssertionError(f"{what} gives another output when called again with the same x: it is random. Is "
                                 f"there a dropout (The Annotated Transformer's PositionalEncoding has one)? forward "
                                 f"adds the table and nothing else")
        hints = addition_hints(x, table[:seq], table)
        if seq < max_len:
            hints["the positions start at 1: add rows 0..T-1 of the table, table[:T]"] = x + table[1:seq + 1]
        scaled_rows(out, x, table[:seq], what)
        assert_close(out, x + table[:seq], what, hints=hints)


def SinusoidalPositions_too_long(k):
    too_long(k, "SinusoidalPositions", _trusted(k))


def SinusoidalPositions_buffer(k):
    """No trainable parameters; the output keeps x's dtype (float64, bfloat16); the table follows .to(device)."""
    g = torch.Generator().manual_seed(22)
    max_len, d_model = 12, 6
    trusted = _trusted(k)
    layer, made, info = build(k, "SinusoidalPositions", max_len, d_model, trusted)
    params = list(info.all_params())
    if params:
        raise AssertionError(
            f"{made} has parameters ({', '.join(params)}): the sinusoidal table is fixed, not learned, and an "
            f"nn.Parameter is handed to the optimizer, which changes it. Store the table with "
            f"self.register_buffer(...)")
    # the dtypes, judged against the module's own float32 output: what it adds is SinusoidalPositions_forward's part
    x = torch.randn(2, 5, d_model, generator=g)
    try:
        own = k.call(f"{made}(x of dtype float32)", layer, x, inject=trusted)
    except AssertionError:
        own = None  # it fails on plain float32 input: the forward part says why
    forward_runs = torch.is_tensor(own) and own.shape == x.shape and own.dtype == torch.float32
    if forward_runs:
        for dtype, tol in ((torch.float64, dict(atol=1e-5)), (torch.bfloat16, dict(atol=0.05, rtol=0.02))):
            name = str(dtype).removeprefix("torch.")
            out = k.call(f"{made}(x of dtype {name})", layer, x.to(dtype), inject=trusted)
            if torch.is_tensor(out) and out.dtype != dtype:
                raise AssertionError(
                    f"{made}(x of dtype {name}) returned dtype {out.dtype}: the output must keep x's dtype; "
                    f"cast the table to it before adding, table[:T].to(x.dtype)")
            assert_close(out.float() if torch.is_tensor(out) else out, own,
                         f"{made}(x of dtype {name}), compared with its output for the same x in float32", **tol)
    # a model moved with .to(device) must take its table along; the "meta" device stands in for a GPU
    fresh, _, _ = build(k, "SinusoidalPositions", max_len, d_model, trusted)
    what = f"{made}.to(device)(x on that device)"
    moved = k.call(f"{made}.to(device)", fresh.attr("to"), "meta")
    for name, t in _plain_tensors(k.describe(moved)):
        if t.device == "cpu" and torch.Size(t.shape).numel() == max_len * d_model:
            raise AssertionError(
                f"after {made}.to(device), the table `{name}` stayed on the CPU: it is a plain tensor attribute, "
                f"which .to(device) does not move (and moving a copy in every forward call costs time). Store it "
                f"with self.register_buffer('pe', table)")
    if not forward_runs:
        return  # forward fails on the CPU already: whatever it does after .to(device) says nothing of the table
    x = torch.empty(2, 5, d_model, device="meta")
    try:
        out = k.call(what, moved, x, inject=trusted)
    except StudentError as e:
        if "NotImplementedError" in e.types or "ForbiddenCall" in e.types:
            raise
        raise AssertionError(
            f"after the module is moved with .to(device), forward fails ({e.kind}: {e.raw[:120]}): "
            f"the table stayed on the CPU. Store it with self.register_buffer('pe', table) so that .to(device) "
            f"moves it; a tensor created inside forward needs device=x.device") from None
    if not torch.is_tensor(out) or out.device.type != "meta":
        got = f"a tensor on {out.device}" if torch.is_tensor(out) else getattr(out, "description", type(out).__name__)
        raise AssertionError(f"{what} returned {got}, expected a tensor on x's device")
    assert_shape(out, (2, 5, d_model), f"output of {what}")


def _plain_tensors(info, prefix=""):
    """(name, TensorInfo) of the tensors kept as plain attributes (not parameters, not buffers), submodules too."""
    for name, t in info.tensors.items():
        yield prefix + name, t
    for name, child in info.children.items():
        yield from _plain_tensors(child, f"{prefix}{name}.")

"""Hidden checks of notebook 01 (self-attention).

Each function is one graded test cell. References come from PyTorch's
built-ins (computed before the student's code runs, outside the ban) or
from ``lib.self_attention``; each common mistake has a hint that names it.
"""
import math

import torch
import torch.nn.functional as F

from lib import self_attention as ref
from lib.testing import assert_close, assert_shape, is_close

from .common import call, seeded, student_code, unpack_pair

BANNED = ("softmax", "scaled_dot_product")
REFERENCES = ("softmax", "simple_self_attention", "scaled_dot_product_attention", "SelfAttention")
BATCH_HINT = "With leading batch dims, transpose only the last two: k.transpose(-2, -1), not k.T"


def _graded(namespace=None, inject=None):
    return student_code(namespace, inject, ops=BANNED, references=REFERENCES)


# --- softmax ---------------------------------------------------------------

def _softmax_hints(x, dim):
    hints = {}
    for other in range(x.dim()):
        if other != dim % x.dim():
            hints[f"the values sum to 1 along dim {other}, not along dim={dim}: "
                  f"take the max and the sum over the `dim` argument"] = torch.softmax(x, other)
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    s = e.sum(dim=dim)
    if x.dim() == 2 and dim % 2 == 1 and x.shape[0] == x.shape[1]:
        hints["the sum lost its dimension and broadcast along the wrong axis: "
              "use .sum(dim=dim, keepdim=True)"] = e / s
    hints["this is exp(x) without dividing by the sum"] = e
    return hints


def softmax_reference(softmax):
    """softmax equals torch.softmax on random inputs, any dim, any dtype."""
    g = seeded(1)
    cases = [((5,), -1), ((4, 4), -1), ((4, 4), 0), ((2, 3, 6), -1), ((2, 3, 6), 1), ((3, 5, 5), -1)]
    for shape, dim in cases:
        x = torch.randn(shape, generator=g) * 3
        expected = torch.softmax(x, dim)
        with _graded():
            actual = call(f"softmax(x of shape {shape}, dim={dim})", softmax, x, dim=dim)
        assert_close(actual, expected, f"softmax(x of shape {shape}, dim={dim})", hints=_softmax_hints(x, dim))
    x = torch.randn(3, 4, generator=g, dtype=torch.float64)
    with _graded():
        actual = call("softmax on a float64 tensor", softmax, x)
    assert_close(actual, torch.softmax(x, -1), "softmax on a float64 tensor (keep the input's dtype)", atol=1e-9)


def softmax_stable(softmax):
    """No overflow for large inputs; -inf entries get weight 0."""
    inf = float("inf")
    probes = [  # input, what it is, what a NaN or inf in the answer means
        ([[1000.0, 1001.0, 1002.0]], "softmax([[1000, 1001, 1002]])",
         "softmax gives NaN or inf for large inputs such as [1000, 1001, 1002]: exp(1000) overflows. "
         "Subtract the maximum along `dim` before exp; the result does not change"),
        ([[0.0, 1.0, 2.0], [-1000.0, -999.0, -998.0]], "softmax([[0, 1, 2], [-1000, -999, -998]])",
         "softmax gives NaN for a row of large negative values when another row is near 0: "
         "subtract the max of each row (x.amax(dim=dim, keepdim=True)), not the max of the whole tensor"),
        ([[0.0, -inf, 1.0]], "softmax([[0, -inf, 1]])",
         "softmax gives NaN when a score is -inf: a -inf score must get weight exactly 0"),
    ]
    for values, what, nan_message in probes:
        x = torch.tensor(values)
        with _graded():
            out = call(what, softmax, x, dim=-1)
        if torch.is_tensor(out) and out.shape == x.shape and not torch.isfinite(out).all():
            raise AssertionError(nan_message)
        assert_close(out, torch.softmax(x, -1), what)


# --- simple_self_attention -------------------------------------------------

def _simple_hints(x):
    scores = x @ x.transpose(-2, -1)
    return {
        "you returned the attention weights: multiply them by X to get the outputs": torch.softmax(scores, -1),
        "the softmax is over the queries (dim -2); each row of weights must sum to 1 over the keys (dim -1)":
            torch.softmax(scores, -2) @ x,
        "the parameter-free version has no scaling: softmax(X X^T) X, not divided by sqrt(d)":
            torch.softmax(scores / math.sqrt(x.shape[-1]), -1) @ x,
    }


def simple_self_attention_reference(simple_self_attention, namespace):
    """Equals softmax(X X^T) X for one sequence, a batch, and a batch of heads; is permutation equivariant."""
    g = seeded(2)
    for shape in [(4, 3), (2, 5, 3), (2, 3, 4, 5)]:
        x = torch.randn(shape, generator=g)
        expected = torch.softmax(x @ x.transpose(-2, -1), -1) @ x
        with _graded(namespace, {"softmax": ref.softmax}):
            actual = call(f"simple_self_attention(x of shape {shape})", simple_self_attention, x,
                          hint=BATCH_HINT if len(shape) > 2 else "")
        assert_close(actual, expected, f"simple_self_attention(x of shape {shape})", hints=_simple_hints(x))
    x = torch.randn(2, 6, 4, generator=g)
    perm = torch.randperm(6, generator=g)
    with _graded(namespace, {"softmax": ref.softmax}):
        out = call("simple_self_attention(x)", simple_self_attention, x)
        out_perm = call("simple_self_attention(x[:, perm])", simple_self_attention, x[:, perm])
    assert_close(out_perm, out[:, perm], "output for permuted inputs (permutation equivariance)")


# --- scaled_dot_product_attention ------------------------------------------

def _expected_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, -1)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return out, weights


def _scaling_hints(q, k, v):
    raw = q @ k.transpose(-2, -1)
    d_k, d_v = q.shape[-1], v.shape[-1]
    hints = {
        "scores are divided by d_k; divide by sqrt(d_k)": torch.softmax(raw / d_k, -1),
        "scores are not scaled; divide them by sqrt(d_k)": torch.softmax(raw, -1),
        "the softmax is over the queries (dim -2); the weights of each query must sum to 1 over the keys (dim -1)":
            torch.softmax(raw / math.sqrt(d_k), -2),
    }
    if d_v != d_k:
        hints["scores are divided by sqrt(d_v), the size of the values; use d_k, the size of queries and keys"] = \
            torch.softmax(raw / math.sqrt(d_v), -1)
    w = torch.softmax(raw / math.sqrt(d_k), -1)
    hints["the weights are transposed: rows are queries (T_q) and columns are keys (T_k)"] = w.transpose(-2, -1)
    return hints


def _attention_case(g, lead, t_q, t_k, d_k, d_v, dtype=torch.float32):
    q = torch.randn(*lead, t_q, d_k, generator=g, dtype=dtype)
    k = torch.randn(*lead, t_k, d_k, generator=g, dtype=dtype)
    v = torch.randn(*lead, t_k, d_v, generator=g, dtype=dtype)
    return q, k, v


def scaled_dot_product_attention_reference(scaled_dot_product_attention, namespace):
    """Equals PyTorch's attention for any leading dims, T_q != T_k and d_v != d_k, for large scores,
    in float32 and float64."""
    g = seeded(3)
    cases = [((), 3, 5, 4, 6), ((2,), 4, 4, 8, 8), ((2, 3), 3, 6, 4, 5), ((2,), 5, 5, 16, 2)]
    for lead, t_q, t_k, d_k, d_v in cases:
        q, k, v = _attention_case(g, lead, t_q, t_k, d_k, d_v)
        q = q * 2  # larger scores make a missing or wrong scale visible
        out_ref, w_ref = _expected_attention(q, k, v)
        what = f"scaled_dot_product_attention(q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)})"
        with _graded(namespace, {"softmax": ref.softmax}):
            out, w = unpack_pair(call(what, scaled_dot_product_attention, q, k, v, hint=BATCH_HINT if lead else ""), what)
        assert_close(w, w_ref, f"weights of {what}", hints=_scaling_hints(q, k, v))
        assert_close(out, out_ref, f"output of {what}")
    q, k, v = _attention_case(g, (2,), 4, 6, 8, 3)
    q, k = q * 30, k * 30  # scores in the thousands: exp overflows unless the softmax is stable
    out_ref, _ = _expected_attention(q, k, v)
    with _graded(namespace, {"softmax": ref.softmax}):
        out, w = unpack_pair(call("attention with large scores", scaled_dot_product_attention, q, k, v), "attention")
    if torch.is_tensor(out) and not torch.isfinite(out).all():
        raise AssertionError("attention gives NaN or inf when the scores are large (in the thousands): "
                             "compute the weights with your stable softmax, not with exp directly")
    assert_close(out, out_ref, "output of attention with large scores", atol=1e-4)
    q, k, v = _attention_case(g, (2,), 3, 4, 4, 4, dtype=torch.float64)
    out_ref, w_ref = _expected_attention(q, k, v)
    with _graded(namespace, {"softmax": ref.softmax}):
        out, w = unpack_pair(call("attention on float64 inputs", scaled_dot_product_attention, q, k, v), "attention")
    assert_close(out, out_ref, "output for float64 inputs (keep the inputs' dtype)", atol=1e-9)


def _mask_diagnosis(w, w_unmasked, mask, what):
    """Name the usual masking mistakes before comparing values."""
    if not torch.is_tensor(w) or w.shape != w_unmasked.shape:
        return  # the shape check that follows explains this
    leak = (w.nan_to_num(1.0).abs() * (~mask)).amax().item()
    if leak > 1e-6:
        if is_close(w, w_unmasked):
            raise AssertionError(f"{what}: the mask is ignored; fill the masked scores with -inf before the softmax")
        raise AssertionError(
            f"{what}: weights are non-zero where the mask is False. True in the mask means 'may attend': "
            f"fill the scores where the mask is False (~mask) with -inf, not where it is True")
    sums = w.sum(-1)
    if torch.isfinite(sums).all() and not torch.allclose(sums, torch.ones_like(sums), atol=1e-4):
        raise AssertionError(
            f"{what}: the rows of the weights do not sum to 1. Apply the mask to the scores before the "
            f"softmax (masked scores become -inf), not to the weights after it")


def scaled_dot_product_attention_mask(scaled_dot_product_attention, namespace):
    """Boolean masks (True = may attend) broadcast like PyTorch's: causal, padding, and both with heads."""
    g = seeded(4)
    t = 5
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    lengths = torch.tensor([5, 3])
    padding = (torch.arange(t)[None, :] < lengths[:, None])[:, None, :]  # (B, 1, T_k)
    cases = [
        ("a causal mask (T, T)", (2,), causal),
        ("a padding mask (B, 1, T_k)", (2,), padding),
        ("causal & padding with heads (B, 1, T, T)", (2, 3), (causal & padding)[:, None]),
    ]
    for name, lead, mask in cases:
        q, k, v = _attention_case(g, lead, t, t, 4, 3)
        out_ref, w_ref = _expected_attention(q, k, v, mask)
        w_unmasked = torch.softmax(q @ k.transpose(-2, -1) / 2.0, -1)
        what = f"attention with {name}"
        with _graded(namespace, {"softmax": ref.softmax}):
            out, w = unpack_pair(call(what, scaled_dot_product_attention, q, k, v, mask=mask), what)
        _mask_diagnosis(w, w_unmasked, mask, what)
        assert_close(w, w_ref, f"weights of {what}")
        assert_close(out, out_ref, f"output of {what}")
        v2 = v.clone()
        v2[..., -1, :] += 100.0  # change a value only masked queries could see
        with _graded(namespace, {"softmax": ref.softmax}):
            out2, _ = unpack_pair(call(what, scaled_dot_product_attention, q, k, v2, mask=mask), what)
        sees_last = mask.expand(w_ref.shape)[..., -1]
        assert_close(out2[~sees_last], out[~sees_last],
                     f"output of queries that may not see the last key, with {name}, after changing that key's value")


# --- SelfAttention ---------------------------------------------------------

def _linear_check(layer, d_in, d_out, name):
    if not isinstance(layer, torch.nn.Linear):
        raise AssertionError(f"{name} should be an nn.Linear, got {type(layer).__name__}")
    if layer.bias is not None:
        raise AssertionError(f"{name} has a bias: create it with nn.Linear(..., bias=False)")
    if (layer.in_features, layer.out_features) != (d_in, d_out):
        raise AssertionError(
            f"{name} maps {layer.in_features} -> {layer.out_features} features, expected {d_in} -> {d_out}")


def self_attention_module(SelfAttention, namespace):
    """Bias-free projections of the right sizes; output equals attention over the projected q, k, v; mask passed on."""
    g = seeded(5)
    for d_model, d_k in [(8, None), (8, 4)]:
        d = d_model if d_k is None else d_k
        with _graded(namespace, {"softmax": ref.softmax, "scaled_dot_product_attention": ref.scaled_dot_product_attention}):
            torch.manual_seed(0)
            layer = call(f"SelfAttention({d_model}, d_k={d_k})", SelfAttention, d_model, d_k)
        for attr in ("w_q", "w_k", "w_v"):
            _linear_check(getattr(layer, attr, None), d_model, d, f"SelfAttention({d_model}, d_k={d_k}).{attr}")
        with torch.no_grad():
            for attr in ("w_q", "w_k", "w_v"):
                getattr(layer, attr).weight.copy_(torch.randn(d, d_model, generator=g) / math.sqrt(d_model))
        x = torch.randn(2, 5, d_model, generator=g) * 2
        q, k, v = layer.w_q.weight, layer.w_k.weight, layer.w_v.weight
        q, k, v = (x @ q.T).detach(), (x @ k.T).detach(), (x @ v.T).detach()
        causal = torch.ones(5, 5, dtype=torch.bool).tril()
        for mask in (None, causal):
            out_ref, w_ref = _expected_attention(q, k, v, mask)
            what = f"SelfAttention({d_model}, d_k={d_k})(x, mask={'None' if mask is None else 'causal'})"
            with _graded(namespace, {"softmax": ref.softmax,
                                     "scaled_dot_product_attention": ref.scaled_dot_product_attention}):
                out, w = unpack_pair(call(what, layer, x, mask=mask), what)
            hints = {
                "queries and keys are swapped (scores are K Q^T)": _expected_attention(k, q, v, mask)[1],
                "the values use the wrong projection: v = w_v(x)": _expected_attention(q, k, q, mask)[0],
            }
            if mask is not None:
                hints["the mask is ignored: pass it on to scaled_dot_product_attention"] = _expected_attention(q, k, v)[1]
            assert_shape(out, (2, 5, d), f"output of {what}")
            assert_close(w, w_ref, f"weights of {what}", hints=hints)
            assert_close(out, out_ref, f"output of {what}", hints=hints)

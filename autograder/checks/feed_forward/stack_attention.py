"""stack_attention(x, n_layers) -> (out, combined): n_layers of parameter-free attention, and the product
A_L ... A_1 of their weights."""
import math

import torch

from lib.testing import assert_close, assert_shape, is_close

from ..common import seeded, unpack_pair

CASES = [((2, 6, 4), 3), ((5, 3), 1), ((2, 3, 5, 4), 2), ((4, 3), 0), ((2, 5, 3), 2), ((2, 4, 3), 0)]


def _attend(h):
    """One parameter-free attention layer, from PyTorch's softmax: (output, weights)."""
    w = torch.softmax(h @ h.transpose(-2, -1) / math.sqrt(h.shape[-1]), -1)
    return w @ h, w


def _stack(x, n):
    """The expected output, combined weights, and the list of each layer's weights."""
    t = x.shape[-2]
    h, combined, layers = x, torch.eye(t, dtype=x.dtype).expand(*x.shape[:-2], t, t), []
    for _ in range(n):
        h, w = _attend(h)
        layers.append(w)
        combined = w @ combined
    return h, combined, layers


def _inputs():
    g = seeded(31)
    for shape, n in CASES:
        dtype = torch.float64 if shape == (2, 5, 3) else torch.float32
        yield torch.randn(shape, generator=g, dtype=dtype) * 1.5, n


def _run(k, x, n):
    what = f"stack_attention(x of shape {tuple(x.shape)}, n_layers={n})"
    trusted = {"scaled_dot_product_attention": k.reference("lib.self_attention.scaled_dot_product_attention")}
    out, combined = unpack_pair(k.call(what, k.student("stack_attention"), x, n, inject=trusted), what)
    return what, out, combined


def stack_attention_output(k):
    """The output is n_layers of parameter-free attention, each on the previous layer's output."""
    for x, n in _inputs():
        out_ref, _, layers = _stack(x, n)
        what, out, _ = _run(k, x, n)
        hints = {}
        if n >= 1:
            hints["out is x unchanged: apply n_layers attention layers, h = attention(h, h, h)"] = x
            hints[f"out went through {n + 1} layers, one too many: loop exactly n_layers times"] = _stack(x, n + 1)[0]
        if n >= 2:
            a = layers[0]
            hints["out went through one attention layer only: each layer must attend over the previous "
                  "layer's output (h, weights = scaled_dot_product_attention(h, h, h))"] = _attend(x)[0]
            hints["every layer takes its queries and keys from the original x: the queries, keys and values "
                  "of each layer are the previous layer's output h"] = torch.linalg.matrix_power(a, n) @ x
            hints[f"out went through {n - 1} layers, one too few: loop exactly n_layers times"] = _stack(x, n - 1)[0]
        atol = 1e-9 if x.dtype == torch.float64 else 1e-5
        assert_close(out, out_ref, f"out of {what}", atol=atol, hints=hints)


def _named_mistake(actual, expected, hints, what):
    for message, wrong in hints.items():
        if is_close(actual, wrong) and not is_close(wrong, expected):
            raise AssertionError(f"{what} is wrong: {message}")


def _product_hints(layers, t, dtype):
    """The usual wrong ways of combining the weights of n >= 2 layers."""
    reverse = torch.eye(t, dtype=dtype)
    for w in layers:
        reverse = reverse @ w
    elementwise = layers[0]
    for w in layers[1:]:
        elementwise = elementwise * w
    return {
        "the product is in the wrong order: each new layer's weights multiply from the left, "
        "combined = weights @ combined, so that combined = A_L @ ... @ A_1": reverse,
        "combined holds only the last layer's weights: multiply the weights of all the layers": layers[-1],
        "combined holds only the first layer's weights: multiply the weights of all the layers": layers[0],
        "combined is the average of the layers' weights; stacking layers multiplies them: "
        "combined = weights @ combined": sum(layers) / len(layers),
        "combined is the sum of the layers' weights; stacking layers multiplies them: "
        "combined = weights @ combined": sum(layers),
        "combined multiplies the weights entry by entry (*); stacking layers is a matrix product (@)": elementwise,
    }


def stack_attention_combined(k):
    """combined = A_L ... A_1 (newest layer on the left), row-stochastic, and out == combined @ x."""
    for x, n in _inputs():
        _, comb_ref, layers = _stack(x, n)
        what, out, combined = _run(k, x, n)
        name = f"combined of {what}"
        if not torch.is_tensor(combined):
            kind = getattr(combined, "description", None) or type(combined).__name__
            raise AssertionError(f"{name} should be a tensor of shape {tuple(comb_ref.shape)}, got {kind}")
        t = x.shape[-2]
        if n == 0:  # the (T, T) identity, or that identity repeated over the batch: both are right
            if tuple(combined.shape) != (t, t):
                assert_shape(combined, comb_ref.shape, name)
            identity = torch.eye(t, dtype=x.dtype).expand(combined.shape)
            hints = {"with n_layers = 0 there is no layer: combined is the identity matrix (out == x)":
                     torch.zeros(combined.shape, dtype=x.dtype)}
            _named_mistake(combined, identity, hints, name)
            assert_close(combined, identity, name)
            continue
        assert_shape(combined, comb_ref.shape, name)
        hints = _product_hints(layers, t, x.dtype) if n >= 2 else {}
        hints[f"combined is the product of {n + 1} layers' weights, one too many: loop exactly n_layers times"] = \
            _stack(x, n + 1)[1]
        rollout = torch.eye(t, dtype=x.dtype)
        for w in layers:  # Abnar & Zuidema's attention rollout: each layer's weights averaged with the identity
            rollout = (w + torch.eye(t, dtype=x.dtype)) / 2 @ rollout
        hints["combined adds the identity to each layer's weights and renormalises ((A + I) / 2: attention rollout, "
              "which counts a residual connection); these layers have none, so combined = A_L @ ... @ A_1"] = rollout
        if n >= 2:  # the same slips as in out (stack_attention_output), seen in combined
            hints[f"combined is the product of {n - 1} layers' weights, one too few: loop exactly n_layers "
                  f"times"] = _stack(x, n - 1)[1]
            hints["every layer takes its queries and keys from the original x, so combined is the first layer's "
                  "weights to the power n_layers: the queries, keys and values of each layer are the previous "
                  "layer's output h"] = torch.linalg.matrix_power(layers[0], n)
        _named_mistake(combined, comb_ref, hints, name)
        c = combined.double()
        if (c < -1e-6).any():
            raise AssertionError(f"{name} has negative entries; a product of attention weights is never negative")
        if not torch.allclose(c.sum(-1), torch.ones_like(c.sum(-1)), atol=1e-4):
            raise AssertionError(f"the rows of {name} do not sum to 1: a product of row-stochastic matrices "
                                 f"is row-stochastic")
        if torch.is_tensor(out) and out.shape == x.shape and not is_close(out.double(), c @ x.double(), atol=1e-4):
            raise AssertionError(f"{what}: out is not combined @ x; combined must be the product of the weights "
                                 f"of all the layers that produced out")
        atol = 1e-9 if x.dtype == torch.float64 else 1e-5
        assert_close(combined, comb_ref, name, atol=atol)

"""Hidden checks of notebook 03 (the position-wise feed-forward network).

Each function is one graded test cell. The expected values are computed here
with PyTorch's built-ins (outside the student's code) from weights the checks
set themselves; each common mistake has a message that names it.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from lib import self_attention as sa_ref
from lib.testing import assert_close, assert_shape, is_close

from .common import call, seeded, student_code, unpack_pair

BANNED = ()  # the exercise is built from nn.Linear, ReLU and dropout, which students may use
REFERENCES = ("FeedForward",)
POSITION_HINT = ("FeedForward acts on the last dimension (the features) of x, with the same layers at every "
                 "position; it must work for any sequence length T")


def _graded(namespace=None, inject=None):
    return student_code(namespace, inject, ops=BANNED, references=REFERENCES)


# --- stack_attention -------------------------------------------------------

def _attend(h):
    """One parameter-free attention layer, from PyTorch's softmax: (output, weights)."""
    w = torch.softmax(h @ h.transpose(-2, -1) / math.sqrt(h.shape[-1]), -1)
    return w @ h, w


def _stack(x, n):
    """Reference: output, combined weights and the list of each layer's weights."""
    t = x.shape[-2]
    h, combined, layers = x, torch.eye(t, dtype=x.dtype).expand(*x.shape[:-2], t, t), []
    for _ in range(n):
        h, w = _attend(h)
        layers.append(w)
        combined = w @ combined
    return h, combined, layers


STACK_CASES = [((2, 6, 4), 3), ((5, 3), 1), ((2, 3, 5, 4), 2), ((4, 3), 0), ((2, 5, 3), 2)]


def _stack_inputs():
    g = seeded(31)
    for shape, n in STACK_CASES:
        dtype = torch.float64 if shape == (2, 5, 3) else torch.float32
        yield torch.randn(shape, generator=g, dtype=dtype) * 1.5, n


def _run_stack(stack_attention, namespace, x, n):
    what = f"stack_attention(x of shape {tuple(x.shape)}, n_layers={n})"
    with _graded(namespace, {"scaled_dot_product_attention": sa_ref.scaled_dot_product_attention}):
        out, combined = unpack_pair(call(what, stack_attention, x, n), what)
    return what, out, combined


def stack_attention_output(stack_attention, namespace):
    """The output is n_layers of parameter-free attention, each on the previous layer's output."""
    for x, n in _stack_inputs():
        out_ref, _, layers = _stack(x, n)
        what, out, _ = _run_stack(stack_attention, namespace, x, n)
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


def stack_attention_combined(stack_attention, namespace):
    """combined = A_L ... A_1 (newest layer on the left), row-stochastic, and out == combined @ x."""
    for x, n in _stack_inputs():
        _, comb_ref, layers = _stack(x, n)
        what, out, combined = _run_stack(stack_attention, namespace, x, n)
        name = f"combined of {what}"
        if not torch.is_tensor(combined):
            raise AssertionError(f"{name} should be a tensor of shape {tuple(comb_ref.shape)}, "
                                 f"got {type(combined).__name__}")
        t = x.shape[-2]
        if n == 0:
            hints = {"with n_layers = 0 there is no layer: combined is the identity matrix (out == x)":
                     torch.zeros(t, t, dtype=x.dtype)}
            _named_mistake(combined, comb_ref, hints, name)
            assert_close(combined, torch.eye(t, dtype=x.dtype), name)
            continue
        assert_shape(combined, comb_ref.shape, name)
        hints = {}
        if n >= 2:
            reverse = torch.eye(t, dtype=x.dtype)
            for w in layers:
                reverse = reverse @ w
            hints["the product is in the wrong order: each new layer's weights multiply from the left, "
                  "combined = weights @ combined, so that combined = A_L @ ... @ A_1"] = reverse
            hints["combined holds only the last layer's weights: multiply the weights of all the layers"] = layers[-1]
            hints["combined holds only the first layer's weights: multiply the weights of all the layers"] = layers[0]
            hints["combined is the average of the layers' weights; stacking layers multiplies them: "
                  "combined = weights @ combined"] = sum(layers) / n
            hints["combined is the sum of the layers' weights; stacking layers multiplies them: "
                  "combined = weights @ combined"] = sum(layers)
            prod = layers[0]
            for w in layers[1:]:
                prod = prod * w
            hints["combined multiplies the weights entry by entry (*); stacking layers is a matrix "
                  "product (@)"] = prod
        _named_mistake(combined, comb_ref, hints, name)
        c = combined.detach().double()
        if (c < -1e-6).any():
            raise AssertionError(f"{name} has negative entries; a product of attention weights is never negative")
        if not torch.allclose(c.sum(-1), torch.ones_like(c.sum(-1)), atol=1e-4):
            raise AssertionError(f"the rows of {name} do not sum to 1: a product of row-stochastic matrices "
                                 f"is row-stochastic")
        if torch.is_tensor(out) and out.shape == x.shape and not is_close(out.detach(), (combined @ x).detach(), atol=1e-4):
            raise AssertionError(f"{what}: out is not combined @ x; combined must be the product of the weights "
                                 f"of all the layers that produced out")
        atol = 1e-9 if x.dtype == torch.float64 else 1e-5
        assert_close(combined, comb_ref, name, atol=atol)


# --- FeedForward -----------------------------------------------------------

def _build(FeedForward, namespace, *args, **kwargs):
    spelled = ", ".join([str(a) for a in args] + [f"{k}={v}" for k, v in kwargs.items()])
    what = f"FeedForward({spelled})"
    with _graded(namespace), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        ff = call(what, FeedForward, *args, **kwargs)
    if not isinstance(ff, nn.Module):
        raise AssertionError(f"{what} should be an nn.Module, got {type(ff).__name__}")
    ff.eval()  # dropout is tested on its own (feed_forward_dropout); elsewhere it must not get in the way
    return ff, what


def _linears(ff, d_model, d_ff, what, require_bias=False):
    """The two nn.Linear attributes, checked for name, type and size (and bias if asked)."""
    l1, l2 = getattr(ff, "linear1", None), getattr(ff, "linear2", None)
    if not isinstance(l1, nn.Module) or not isinstance(l2, nn.Module):
        found = [name for name, m in ff.named_modules() if isinstance(m, nn.Linear)]
        missing = " and ".join(n for n, m in (("linear1", l1), ("linear2", l2)) if not isinstance(m, nn.Module))
        if not found:
            raise AssertionError(f"{what} has no nn.Linear layers: create self.linear1 = nn.Linear(d_model, d_ff) "
                                 f"and self.linear2 = nn.Linear(d_ff, d_model) in __init__")
        if len(set(id(m) for _, m in ff.named_modules() if isinstance(m, nn.Linear))) == 1:
            raise AssertionError(f"{what} has a single nn.Linear ({found[0]}); the feed-forward network has two, "
                                 f"linear1 (d_model -> d_ff) and linear2 (d_ff -> d_model), with a ReLU between")
        raise AssertionError(f"{what} has no attribute {missing} (its nn.Linear layers are named "
                             f"{', '.join(found)}): name them linear1 (d_model -> d_ff) and linear2 (d_ff -> d_model)")
    for name, lin, (d_in, d_out) in (("linear1", l1, (d_model, d_ff)), ("linear2", l2, (d_ff, d_model))):
        if not isinstance(lin, nn.Linear):
            raise AssertionError(f"{what}.{name} should be an nn.Linear, got {type(lin).__name__}")
        got = (lin.in_features, lin.out_features)
        if got != (d_in, d_out):
            if got == (d_out, d_in):
                reason = "d_model and d_ff are swapped"
            elif d_model in got and d_ff not in got:
                reason = "the hidden layer must have d_ff units: linear1 = nn.Linear(d_model, d_ff), " \
                         "linear2 = nn.Linear(d_ff, d_model)"
            else:
                reason = "linear1 = nn.Linear(d_model, d_ff), linear2 = nn.Linear(d_ff, d_model)"
            raise AssertionError(f"{what}.{name} maps {got[0]} -> {got[1]} features, expected {d_in} -> {d_out}: "
                                 f"{reason}")
        if require_bias and lin.bias is None:
            raise AssertionError(f"{what}.{name} has no bias: the network is W2 relu(W1 x + b1) + b2, so keep "
                                 f"nn.Linear's default bias=True")
    return l1, l2


def _randomize(ff, g, dtype=torch.float32):
    """Seeded weights of a useful size (biases too, when there are any)."""
    with torch.no_grad():
        for lin in (ff.linear1, ff.linear2):
            lin.weight.copy_(torch.randn(lin.weight.shape, generator=g, dtype=dtype) * 1.5 / math.sqrt(lin.in_features))
            if lin.bias is not None:
                lin.bias.copy_(torch.randn(lin.bias.shape, generator=g, dtype=dtype) * 0.5)


def _params(ff):
    l1, l2 = ff.linear1, ff.linear2
    return [t.detach() if t is not None else None for t in (l1.weight, l1.bias, l2.weight, l2.bias)]


def feed_forward_structure(FeedForward, namespace):
    """linear1 (d_model -> d_ff), linear2 (d_ff -> d_model), nn.Linear with bias, nothing else; shape kept."""
    for d_model, d_ff in [(6, 24), (8, 16)]:
        ff, what = _build(FeedForward, namespace, d_model, d_ff)
        _linears(ff, d_model, d_ff, what, require_bias=True)
        n_params = sum(p.numel() for p in ff.parameters())
        expected = 2 * d_model * d_ff + d_ff + d_model
        if n_params != expected:
            raise AssertionError(f"{what} has {n_params} parameters, expected {expected} (linear1 and linear2 only): "
                                 f"does __init__ create other layers with parameters?")
        x = torch.randn(2, 5, d_model, generator=seeded(32))
        with _graded(namespace):
            out = call(f"{what}(x of shape (2, 5, {d_model}))", ff, x, hint=POSITION_HINT)
        assert_shape(out, (2, 5, d_model), f"output of {what} for x of shape (2, 5, {d_model})")


def _ffn_hints(x, w1, b1, w2, b2):
    h = F.linear(x, w1, b1)
    act = "; this course's FFN uses a ReLU between the layers, as the original Transformer (torch.relu, F.relu or nn.ReLU)"
    hidden = {  # message -> the hidden layer that mistake feeds to linear2 (one batched linear2 for all of them)
        "there is no nonlinearity: apply a ReLU between linear1 and linear2 (two linear layers in a row are "
        "just one linear layer)": h,
        "the activation is GELU" + act: F.gelu(h),
        "the activation is GELU (tanh approximation)" + act: F.gelu(h, approximate="tanh"),
        "the activation is tanh" + act: torch.tanh(h),
        "the activation is sigmoid" + act: torch.sigmoid(h),
        "the activation is a leaky ReLU" + act: F.leaky_relu(h),
        "the activation is ELU" + act: F.elu(h),
        "the activation is SiLU" + act: F.silu(h),
        "the ReLU is applied to the input x, not to the hidden layer: linear2(relu(linear1(x)))":
            F.linear(F.relu(x), w1, b1),
    }
    outputs = F.linear(torch.stack(list(hidden.values()) + [F.relu(h)]), w2, b2)
    hints = dict(zip(hidden, outputs[:-1]))
    hints["a ReLU is also applied after linear2: the output must be able to be negative, so the ReLU goes only "
          "between the two layers"] = F.relu(outputs[-1])
    return hints


def feed_forward_reference(FeedForward, namespace):
    """Equals linear2(relu(linear1(x))) for any leading dims, in float32 and float64."""
    g = seeded(33)
    d_model, d_ff = 6, 24
    cases = [((5,), torch.float32), ((2, 5), torch.float32), ((2, 3, 4), torch.float32), ((2, 5), torch.float64)]
    for lead, dtype in cases:
        ff, what = _build(FeedForward, namespace, d_model, d_ff)
        _linears(ff, d_model, d_ff, what)
        if dtype == torch.float64:
            ff = ff.double()
        _randomize(ff, g, dtype)
        x = torch.randn(*lead, d_model, generator=g, dtype=dtype)
        w1, b1, w2, b2 = _params(ff)
        expected = F.linear(F.relu(F.linear(x, w1, b1)), w2, b2)
        hints = _ffn_hints(x, w1, b1, w2, b2)
        call_what = f"{what}(x of shape {tuple(x.shape)}{', float64' if dtype == torch.float64 else ''})"
        with _graded(namespace):
            out = call(call_what, ff, x, hint=POSITION_HINT)
        atol = 1e-9 if dtype == torch.float64 else 1e-5
        assert_close(out, expected, f"output of {call_what}", atol=atol, hints=hints)


def feed_forward_positionwise(FeedForward, namespace):
    """Permuting positions permutes outputs; changing one position changes only its output;
    a position alone gives the same output as inside a sequence, for any length."""
    g = seeded(34)
    d_model, d_ff, t = 6, 24, 6   # T == d_model: a layer applied over the positions would run without error
    ff, what = _build(FeedForward, namespace, d_model, d_ff)
    _linears(ff, d_model, d_ff, what)
    _randomize(ff, g)
    x = torch.randn(2, t, d_model, generator=g)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    x_changed = x.clone()
    x_changed[:, 2] += torch.randn(2, d_model, generator=g) * 2
    with _graded(namespace):
        out = call(f"{what}(x of shape {tuple(x.shape)})", ff, x, hint=POSITION_HINT)
        out_perm = call(f"{what}(x[:, perm])", ff, x[:, perm], hint=POSITION_HINT)
        out_changed = call(f"{what}(x with position 2 changed)", ff, x_changed, hint=POSITION_HINT)
    assert_shape(out, x.shape, f"output of {what} for x of shape {tuple(x.shape)}")
    if not is_close(out_perm, out[:, perm]):
        raise AssertionError(
            f"{what}: permuting the positions of x did not permute the outputs in the same way, so the network "
            f"mixes positions. Apply linear1 and linear2 to the last dimension (the features) of x; nothing may "
            f"act across the positions (dim -2)")
    others = [i for i in range(t) if i != 2]
    if not is_close(out_changed[:, others], out[:, others]):
        raise AssertionError(
            f"{what}: changing the vector at position 2 changed the outputs at other positions. The network "
            f"must treat every position on its own: no mean, sum or normalization over the positions (dim -2)")
    for length in (1, 11):
        x_len = torch.randn(2, length, d_model, generator=g)
        x_len[:, 0] = x[:, 3]
        with _graded(namespace):
            out_len = call(f"{what}(x of shape {tuple(x_len.shape)})", ff, x_len, hint=POSITION_HINT)
        assert_shape(out_len, x_len.shape, f"output of {what} for x of shape {tuple(x_len.shape)}")
        assert_close(out_len[:, :1], out[:, 3:4],
                     f"output for the vector of position 3 placed first in a sequence of length {length} "
                     f"(it must not depend on the other positions or on T)")


def _dropout_case(FeedForward, namespace, p, g):
    """FeedForward(6, 6, dropout=p) with identity weights, b1 = 1, b2 = 10, and a positive input x,
    so every hidden unit is x + 1 > 0 and the dropout mask can be read off the output."""
    d = 6
    ff, what = _build(FeedForward, namespace, d, d, dropout=p)
    l1, l2 = _linears(ff, d, d, what)
    with torch.no_grad():
        l1.weight.copy_(torch.eye(d))
        l2.weight.copy_(torch.eye(d))
        if l1.bias is not None:
            l1.bias.fill_(1.0)
        if l2.bias is not None:
            l2.bias.fill_(10.0)
    b1 = 1.0 if l1.bias is not None else 0.0
    b2 = 10.0 if l2.bias is not None else 0.0
    x = 0.5 + torch.rand(4, 50, d, generator=g)
    return ff, what, x, b1, b2


def _modes(ff, what, x, namespace, seed):
    with _graded(namespace), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        ff.eval()
        e1 = call(f"{what} in eval mode", ff, x)
        e2 = call(f"{what} in eval mode", ff, x)
        ff.train()
        t1 = call(f"{what} in train mode", ff, x)
        t2 = call(f"{what} in train mode", ff, x)
    for out in (e1, e2, t1, t2):
        assert_shape(out, x.shape, f"output of {what}")
    return e1.detach(), e2.detach(), t1.detach(), t2.detach()


def _close_to(a, b, tol=1e-4):
    return (a - b).abs() <= tol * (1 + b.abs())


def feed_forward_dropout(FeedForward, namespace):
    """Dropout on the hidden units (after the ReLU, before linear2) with probability `dropout`,
    survivors scaled by 1/(1 - p), in train mode only; default dropout=0.0."""
    g = seeded(35)
    for p in (0.5, 0.2):
        ff, what, x, b1, b2 = _dropout_case(FeedForward, namespace, p, g)
        e1, e2, t1, t2 = _modes(ff, what, x, namespace, seed=int(p * 100))
        if not torch.equal(e1, e2):
            raise AssertionError(
                f"{what}: two calls in eval mode give different outputs. Dropout must be off in eval mode: use "
                f"nn.Dropout (it follows model.train() / model.eval()) or F.dropout(h, p, training=self.training)")
        if is_close(t1, e1) and is_close(t2, e1):
            raise AssertionError(
                f"{what}: train mode gives the same output as eval mode, so dropout is missing or ignores the "
                f"dropout argument. Create nn.Dropout(dropout) in __init__ and apply it to the hidden units in forward")
        if torch.equal(t1, t2):
            raise AssertionError(f"{what}: two calls in train mode give the same output: dropout must draw a new "
                                 f"random mask on every call")
        base = e1 - b2                   # what linear2 makes of the hidden units, without its bias
        for t in (t1, t2):
            ratio = (t - b2) / base      # per entry: 0 if the hidden unit was dropped, 1/(1 - p) if kept
            dropped = _close_to(ratio, torch.zeros_like(ratio))
            kept = _close_to(ratio, torch.full_like(ratio, 1 / (1 - p)))
            if (dropped | kept).all():
                frac = dropped.double().mean().item()
                if abs(frac - p) > 0.08:
                    raise AssertionError(f"{what}: in train mode {frac:.0%} of the hidden units are dropped, "
                                         f"expected {p:.0%}: pass the dropout argument to nn.Dropout")
                continue
            _diagnose_dropout(what, t, ratio, dropped, e1, x, b1, b2, p)
    ff, what = _build(FeedForward, namespace, 6, 24)
    _linears(ff, 6, 24, what)
    _randomize(ff, g)
    x = torch.randn(2, 5, 6, generator=g)
    e1, _, t1, t2 = _modes(ff, what, x, namespace, seed=3)
    if not (is_close(t1, e1) and is_close(t2, e1)):
        raise AssertionError(f"{what}: without a dropout argument, train mode must give the eval-mode output: "
                             f"the default is dropout=0.0")


def _diagnose_dropout(what, t, ratio, dropped, e1, x, b1, b2, p):
    place = "; dropout belongs on the hidden units, between the ReLU and linear2"
    if (_close_to(t, torch.zeros_like(t)) | _close_to(t, e1 / (1 - p))).all():
        raise AssertionError(f"{what}: dropout is applied to the output of linear2{place}")
    if (_close_to(t, torch.full_like(t, b1 + b2)) | _close_to(t, x / (1 - p) + b1 + b2)).all():
        raise AssertionError(f"{what}: dropout is applied to the input x, before linear1{place}")
    if (dropped | _close_to(ratio, torch.ones_like(ratio))).all():
        raise AssertionError(f"{what}: the dropped hidden units are zeroed, but the kept ones are not multiplied by "
                             f"1/(1 - p) = {1 / (1 - p):.3g}: use nn.Dropout or F.dropout, which do both")
    kept_ratio = ratio[~dropped]
    if kept_ratio.numel() and (kept_ratio - kept_ratio[0]).abs().max() < 1e-4 * kept_ratio[0].abs() and kept_ratio[0] > 1:
        c = kept_ratio[0].item()
        raise AssertionError(f"{what}: the kept hidden units are multiplied by {c:.3g}, as dropout with probability "
                             f"{1 - 1 / c:.2g} would; with dropout={p} it is 1/(1 - {p}) = {1 / (1 - p):.3g}: "
                             f"pass the dropout argument to nn.Dropout")
    raise AssertionError(f"{what}: in train mode each hidden unit should be either zeroed or multiplied by "
                         f"1/(1 - p) = {1 / (1 - p):.3g}, and the output is not of that form{place}")

"""FeedForward(d_model, d_ff, dropout=0.0): linear2(dropout(relu(linear1(x)))), position by position."""
import math

import torch
import torch.nn.functional as F

from lib.testing import assert_close, assert_shape, is_close

from ..common import module, seeded

POSITION_HINT = ("FeedForward acts on the last dimension (the features) of x, with the same layers at every "
                 "position; it must work for any sequence length T")


def build(k, *args, **kwargs):
    """The student's FeedForward(*args, **kwargs), built with torch seeded, in eval mode (dropout is tested
    on its own, in FeedForward_dropout; elsewhere it must not get in the way): (handle, its name, its info)."""
    what = "FeedForward(" + ", ".join([str(a) for a in args] + [f"{n}={v}" for n, v in kwargs.items()]) + ")"
    ff = k.call(what, k.student("FeedForward"), *args, seed=0, **kwargs)
    info = module(k, ff, what)
    k.call(f"{what}.eval()", ff.attr("eval"))
    return ff, what, info


def linears(info, d_model, d_ff, what, require_bias=False):
    """Descriptions of the two nn.Linear attributes, checked for name, type and size (and bias if asked)."""
    modules = info.modules()
    l1, l2 = modules.get("linear1"), modules.get("linear2")
    if l1 is None or l2 is None:
        found = [name for name, m in modules.items() if name and m.isa("Linear")]
        missing = " and ".join(n for n, m in (("linear1", l1), ("linear2", l2)) if m is None)
        if not found:
            raise AssertionError(f"{what} has no nn.Linear layers: create self.linear1 = nn.Linear(d_model, d_ff) "
                                 f"and self.linear2 = nn.Linear(d_ff, d_model) in __init__")
        if len({modules[name].oid for name in found}) == 1:
            raise AssertionError(f"{what} has a single nn.Linear ({found[0]}); the feed-forward network has two, "
                                 f"linear1 (d_model -> d_ff) and linear2 (d_ff -> d_model), with a ReLU between")
        raise AssertionError(f"{what} has no attribute {missing} (its nn.Linear layers are named "
                             f"{', '.join(found)}): name them linear1 (d_model -> d_ff) and linear2 (d_ff -> d_model)")
    for name, lin, (d_in, d_out) in (("linear1", l1, (d_model, d_ff)), ("linear2", l2, (d_ff, d_model))):
        if not lin.isa("torch.nn.modules.linear.Linear"):
            raise AssertionError(f"{what}.{name} should be an nn.Linear, got {lin.name}")
        got = (lin.attrs.get("in_features"), lin.attrs.get("out_features"))
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
        if require_bias and "bias" not in lin.params:
            raise AssertionError(f"{what}.{name} has no bias: the network is W2 relu(W1 x + b1) + b2, so keep "
                                 f"nn.Linear's default bias=True")
    return l1, l2


def set_weights(k, ff, what, l1, l2, values):
    """Copy ``{"linear1.weight": ..., ...}`` into the module, biases only where it has them; the four
    tensors (w1, b1, w2, b2) it then computes with, None for a missing bias."""
    values = {name: v for name, v in values.items()
              if not name.endswith("bias") or "bias" in (l1 if name.startswith("linear1") else l2).params}
    problems = k.load(ff, values)
    if problems:
        raise AssertionError(f"{what}: its weights could not be set ({'; '.join(problems)})")
    return [values.get(n) for n in ("linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias")]


def randomize(k, ff, what, l1, l2, d_model, d_ff, g, dtype=torch.float32):
    """Seeded weights of a useful size (biases too, when there are any)."""
    values = {}
    for name, (d_in, d_out) in (("linear1", (d_model, d_ff)), ("linear2", (d_ff, d_model))):
        values[f"{name}.weight"] = torch.randn(d_out, d_in, generator=g, dtype=dtype) * 1.5 / math.sqrt(d_in)
        values[f"{name}.bias"] = torch.randn(d_out, generator=g, dtype=dtype) * 0.5
    return set_weights(k, ff, what, l1, l2, values)


def FeedForward_structure(k):
    """linear1 (d_model -> d_ff), linear2 (d_ff -> d_model), nn.Linear with bias, nothing else; shape kept."""
    for d_model, d_ff in [(6, 24), (8, 16)]:
        ff, what, info = build(k, d_model, d_ff)
        linears(info, d_model, d_ff, what, require_bias=True)
        n_params = sum(int(torch.Size(t.shape).numel()) for t in info.all_params().values())
        expected = 2 * d_model * d_ff + d_ff + d_model
        if n_params != expected:
            others = [f"{name} (a {child.type.rsplit('.', 1)[-1]})" for name, child in info.children.items()
                      if name not in ("linear1", "linear2") and child.all_params()]
            norms = [o for o in others if "Norm" in o]
            raise AssertionError(
                f"{what} has {n_params} parameters, expected {expected} (linear1 and linear2 only): "
                + (f"it also has {', '.join(others)}. " if others else "does __init__ create other layers with "
                   "parameters? ")
                + ("The residual connection and the LayerNorm around the feed-forward belong to the encoder layer "
                   "(notebook 06): FeedForward is linear2(relu(linear1(x))) alone" if norms else ""))
        x = torch.randn(2, 5, d_model, generator=seeded(32))
        out = k.call(f"{what}(x of shape (2, 5, {d_model}))", ff, x, hint=POSITION_HINT)
        assert_shape(out, (2, 5, d_model), f"output of {what} for x of shape (2, 5, {d_model})")


def _hints(x, w1, b1, w2, b2):
    h = F.linear(x, w1, b1)
    act = ("; this course's FFN uses a ReLU between the layers, as the original Transformer "
           "(torch.relu, F.relu or nn.ReLU)")
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


def FeedForward_reference(k):
    """Equals linear2(relu(linear1(x))) for any leading dims, in float32 and float64."""
    g = seeded(33)
    d_model, d_ff = 6, 24
    cases = [((5,), torch.float32), ((2, 5), torch.float32), ((2, 3, 4), torch.float32), ((2, 5), torch.float64)]
    for lead, dtype in cases:
        ff, what, info = build(k, d_model, d_ff)
        l1, l2 = linears(info, d_model, d_ff, what)
        if dtype == torch.float64:
            k.call(f"{what}.double()", ff.attr("double"))
        w1, b1, w2, b2 = randomize(k, ff, what, l1, l2, d_model, d_ff, g, dtype)
        x = torch.randn(*lead, d_model, generator=g, dtype=dtype)
        expected = F.linear(F.relu(F.linear(x, w1, b1)), w2, b2)
        call_what = f"{what}(x of shape {tuple(x.shape)}{', float64' if dtype == torch.float64 else ''})"
        out = k.call(call_what, ff, x, hint=POSITION_HINT)
        atol = 1e-9 if dtype == torch.float64 else 1e-5
        if torch.is_tensor(out) and out.shape == x.shape and not is_close(out, expected, atol) and x.shape[-2] > 1:
            alone = k.call(f"{what}(x[..., :1, :]), the first position alone", ff, x[..., :1, :], hint=POSITION_HINT)
            if torch.is_tensor(alone) and alone.shape == x[..., :1, :].shape and not is_close(alone, out[..., :1, :]):
                raise AssertionError(
                    f"output of {call_what}: the first position gives another output alone than inside the "
                    f"sequence, so the network mixes positions. It must treat every position on its own: no mean, "
                    f"sum or normalization over the positions (dim -2)")
        assert_close(out, expected, f"output of {call_what}", atol=atol, hints=_hints(x, w1, b1, w2, b2))


def FeedForward_positionwise(k):
    """Permuting positions permutes outputs; changing one position changes only its output;
    a position alone gives the same output as inside a sequence, for any length."""
    g = seeded(34)
    d_model, d_ff, t = 6, 24, 6   # T == d_model: a layer applied over the positions would run without error
    ff, what, info = build(k, d_model, d_ff)
    l1, l2 = linears(info, d_model, d_ff, what)
    randomize(k, ff, what, l1, l2, d_model, d_ff, g)
    x = torch.randn(2, t, d_model, generator=g)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    x_changed = x.clone()
    x_changed[:, 2] += torch.randn(2, d_model, generator=g) * 2
    out = k.call(f"{what}(x of shape {tuple(x.shape)})", ff, x, hint=POSITION_HINT)
    out_perm = k.call(f"{what}(x[:, perm])", ff, x[:, perm], hint=POSITION_HINT)
    out_changed = k.call(f"{what}(x with position 2 changed)", ff, x_changed, hint=POSITION_HINT)
    assert_shape(out, x.shape, f"output of {what} for x of shape {tuple(x.shape)}")
    if not is_close(out_perm, out[:, perm]):
        raise AssertionError(
            f"{what}: permuting the positions of x did not permute the outputs in the same way, so the network "
            f"mixes positions. Apply linear1 and linear2 to the last dimension (the features) of x; nothing may "
            f"act across the positions (dim -2)")
    others = [i for i in range(t) if i != 2]
    kept = torch.is_tensor(out_changed) and out_changed.shape == out.shape
    if not (kept and is_close(out_changed[:, others], out[:, others])):
        raise AssertionError(
            f"{what}: changing the vector at position 2 changed the outputs at other positions. The network "
            f"must treat every position on its own: no mean, sum or normalization over the positions (dim -2)")
    for length in (1, 11):
        x_len = torch.randn(2, length, d_model, generator=g)
        x_len[:, 0] = x[:, 3]
        out_len = k.call(f"{what}(x of shape {tuple(x_len.shape)})", ff, x_len, hint=POSITION_HINT)
        assert_shape(out_len, x_len.shape, f"output of {what} for x of shape {tuple(x_len.shape)}")
        assert_close(out_len[:, :1], out[:, 3:4],
                     f"output for the vector of position 3 placed first in a sequence of length {length} "
                     f"(it must not depend on the other positions or on T)")

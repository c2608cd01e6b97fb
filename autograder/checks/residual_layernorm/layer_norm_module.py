"""LayerNorm(d_model, eps=1e-5): parameters weight (ones) and bias (zeros); forward = layer_norm with them."""
import torch

from lib.testing import assert_close

from ..common import module, seeded
from ..kernel import grad
from . import expected_layer_norm, trusted_layer_norm
from .layer_norm import usual_mistakes


def _build(k, d, eps=None):
    """The student's LayerNorm(d) (or LayerNorm(d, eps)), its description, and what to call it."""
    args = (d,) if eps is None else (d, eps)
    what = f"LayerNorm({d})" if eps is None else f"LayerNorm({d}, eps={eps})"
    layer = k.call(what, k.student("LayerNorm"), *args, inject=trusted_layer_norm(k), seed=0)
    return layer, module(k, layer, what), what


def _parameter(info, name, what):
    """The TensorInfo of the parameter ``name``, or a message saying why there is none."""
    if name in info.params:
        return info.params[name]
    if name in info.tensors or name in info.buffers:
        kind = "buffer" if name in info.buffers else "plain tensor"
        raise AssertionError(
            f"{what}.{name} is a {kind}, not an nn.Parameter: wrap it, self.{name} = nn.Parameter(...), "
            f"so that the module registers it and the optimizer trains it")
    others = ", ".join(n for n in info.params if n not in ("weight", "bias"))
    named = f" (it has {others}: name them weight and bias, as nn.LayerNorm does, so that code and checkpoints " \
            f"that expect those names find them)" if others else ""
    raise AssertionError(f"{what} has no parameter `{name}`{named}: create self.{name} = nn.Parameter(...) in "
                         f"__init__")


def LayerNorm_parameters(k):
    """`weight` (ones) and `bias` (zeros) are registered nn.Parameters of shape (d_model,), the only ones."""
    d = 6
    layer, info, what = _build(k, d)
    for name, value, why in (("weight", 1.0, "the layer starts as a plain normalization"),
                             ("bias", 0.0, "the layer starts with no shift")):
        p = _parameter(info, name, what)
        if tuple(p.shape) != (d,):
            raise AssertionError(f"{what}.{name} has shape {tuple(p.shape)}, expected ({d},): one value per feature")
        t = k.get(layer.attr(name))
        if not torch.is_tensor(t) or not torch.equal(t, torch.full((d,), value, dtype=t.dtype)):
            shown = [round(v, 4) for v in t.tolist()] if torch.is_tensor(t) else t
            raise AssertionError(f"{what}.{name} should start as all {'ones' if value else 'zeros'} "
                                 f"(torch.{'ones' if value else 'zeros'}(d_model)), so that {why}; got {shown}")
        if not p.requires_grad:
            raise AssertionError(f"{what}.{name} does not require a gradient: it must be trainable")
    params = info.all_params()
    if set(params) != {"weight", "bias"}:
        raise AssertionError(f"{what} should have exactly two parameters, weight and bias; it has {sorted(params)}")


def _start_plain(k, layer, d, what):
    """Weight ones and bias zeros, set here: how the module starts is LayerNorm_parameters' part, so a wrong start
    costs that part, not this one."""
    problems = k.load(layer, {"weight": torch.ones(d), "bias": torch.zeros(d)})
    if problems:
        raise AssertionError(f"{what}: cannot set its weight and bias: {problems[0]}")


def LayerNorm_forward(k):
    """The forward pass equals F.layer_norm with the module's weight, bias and eps; gradients reach weight, bias
    and x; it follows .double()."""
    g = seeded(63)
    d = 6
    layer, info, what = _build(k, d)
    for name in ("weight", "bias"):
        _parameter(info, name, what)
    w, b = torch.rand(d, generator=g) + 0.5, torch.randn(d, generator=g)
    problems = k.load(layer, {"weight": w, "bias": b})
    if problems:
        raise AssertionError(f"{what}: cannot set its weight and bias: {problems[0]}")
    x = torch.randn(2, 5, d, generator=g) * 2 + 1
    upstream = torch.randn(2, 5, d, generator=g)
    ref = [t.clone().requires_grad_(True) for t in (x, w, b)]
    expected = expected_layer_norm(*ref)
    expected.mul(upstream).sum().backward()
    call = f"{what}(x of shape (2, 5, {d}))"
    trace = k.trace(call, layer, grad(x), inject=trusted_layer_norm(k), backward=upstream)
    hints = {"weight and bias are not used in forward: pass self.weight and self.bias to layer_norm":
             expected_layer_norm(x), **usual_mistakes(x, w, b, 1e-5)}
    assert_close(trace.value, expected.detach(), f"{what}(x) after changing its weight and bias", hints=hints)
    grads = trace.grads or {"args": [None], "params": {}}
    for name, r in (("weight", ref[1]), ("bias", ref[2])):
        actual = grads["params"].get(name)
        if actual is None:
            raise AssertionError(f"no gradient reaches {what}.{name}: use self.{name} itself in forward "
                                 f"(not a copy, not .data), so that training can change it")
        assert_close(actual, r.grad, f"gradient of {what}.{name}")
    if grads["args"][0] is None:
        raise AssertionError(f"no gradient flows back to the input x of {what}: use x itself in forward "
                             f"(no .detach())")
    assert_close(grads["args"][0], ref[0].grad, f"gradient of {call} with respect to x")

    eps = 1e-2
    layer, _, what = _build(k, 4, eps)
    _start_plain(k, layer, 4, what)
    x = torch.tensor([[1.0, 1.01, 0.99, 1.0], [0.0, 0.05, -0.05, 0.0], [1.0, 2.0, 3.0, 4.0]])
    out = k.call(f"{what}(x)", layer, x, inject=trusted_layer_norm(k))
    assert_close(out, expected_layer_norm(x, eps=eps), f"{what}(x) on rows of small spread",
                 hints={"eps is not passed on: store it in __init__ and use it in forward": expected_layer_norm(x)})

    layer, _, what = _build(k, 4)  # eps left out: the contract's 1e-5 matters on rows this close together
    _start_plain(k, layer, 4, what)
    x = torch.tensor([[0.0, 0.002, -0.002, 0.0], [0.001, 0.0, 0.0, -0.001]])  # means exactly 0
    out = k.call(f"{what}(x)", layer, x, inject=trusted_layer_norm(k))
    assert_close(out, expected_layer_norm(x), f"{what}(x) on rows of tiny spread, eps left out", hints={
        f"the default eps is {e:g}: LayerNorm(d_model) must use eps=1e-5 (as nn.LayerNorm does)":
            expected_layer_norm(x, eps=e) for e in (1e-12, 1e-8, 1e-6, 1e-3, 0.0)})

    layer, _, what = _build(k, 5)
    _start_plain(k, layer, 5, what)
    x = torch.randn(3, 5, generator=g, dtype=torch.float64)
    layer = k.call(f"{what}.double()", layer.attr("double"))
    out = k.call(f"{what}.double()(x in float64)", layer, x, inject=trusted_layer_norm(k))
    assert_close(out, expected_layer_norm(x), f"{what} in float64", atol=1e-9)

"""layer_norm(x, weight, bias, eps=1e-5): over the last dimension, biased variance, eps inside the root."""
import torch

from lib.testing import assert_close, is_close

from ..common import seeded
from ..kernel import StudentError, grad
from . import expected_layer_norm

KEEPDIM_HINT = ("Reduce with keepdim=True, so that the mean and the variance (shape (..., 1)) "
                "broadcast against x (shape (..., d))")


def _normalize(x, dims, eps, correction=0):
    mean = x.mean(dim=dims, keepdim=True)
    var = x.var(dim=dims, keepdim=True, correction=correction)
    return (x - mean) / torch.sqrt(var + eps)


def usual_mistakes(x, w, b, eps):
    """What the usual mistakes output on these inputs (message -> output); LayerNorm's forward is judged with them
    too."""
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, keepdim=True, correction=0)
    total = x.sum(-1, keepdim=True)  # "mean" without the 1/d (an erratum in some slides)
    hints = {
        "the variance is the unbiased one (it divides by d - 1; x.var() and torch.var do that by default). "
        "LayerNorm uses the biased variance, (1/d) * sum (x_j - mean)^2: "
        "x.var(dim=-1, unbiased=False, keepdim=True)": _normalize(x, -1, eps, correction=1) * w + b,
        "you divide by sqrt(sigma) + eps, the square root of the standard deviation (an erratum in some "
        "slides): divide by the standard deviation, sqrt(var + eps)": (x - mean) / (var.sqrt().sqrt() + eps) * w + b,
        "you divide by the variance, not by its square root: divide by sqrt(var + eps)":
            (x - mean) / (var + eps) * w + b,
        "eps is added outside the square root, (x - mean) / (sqrt(var) + eps): add it inside, "
        "(x - mean) / sqrt(var + eps), as PyTorch does": (x - mean) / (var.sqrt() + eps) * w + b,
        "the weight and the bias are ignored: multiply the normalized x by weight, then add bias":
            _normalize(x, -1, eps),
        "only the weight is applied: add the bias too": _normalize(x, -1, eps) * w,
        "this is RMS norm (T5's, LLaMA's): the mean is not subtracted. LayerNorm subtracts the mean, then divides by "
        "the standard deviation, (x - mean) / sqrt(var + eps)": x / (x.pow(2).mean(-1, keepdim=True) + eps).sqrt() * w,
        "this is RMS norm with a bias: the mean is not subtracted. LayerNorm subtracts the mean, then divides by "
        "the standard deviation, (x - mean) / sqrt(var + eps)":
            x / (x.pow(2).mean(-1, keepdim=True) + eps).sqrt() * w + b,
        "the weight and the bias are swapped: normalized * weight + bias": _normalize(x, -1, eps) * b + w,
        "the normalized x is multiplied by weight + 1, a zero-centred weight (Nemotron's LayerNorm1P, Gemma's "
        "RMSNorm): here the weight starts at ones and multiplies as it is, normalized * weight + bias":
            _normalize(x, -1, eps) * (w + 1) + b,
        "x is not normalized, only scaled and shifted: x * weight + bias (MobileBERT's NoNorm). LayerNorm first "
        "subtracts each vector's mean and divides by its standard deviation, (x - mean) / sqrt(var + eps)": x * w + b,
        "the mean is the sum of the x_j: it is (1/d) * sum x_j (an erratum in some slides); "
        "use x.mean(dim=-1, keepdim=True)":
            (x - total) / torch.sqrt((x - total).pow(2).mean(-1, keepdim=True) + eps) * w + b,
    }
    for dim in range(x.dim() - 1):
        hints[f"you normalize over dim {dim}, not over the last dimension (the d features of each "
              f"vector): use dim=-1"] = _normalize(x, dim, eps) * w + b
    if x.dim() >= 2:
        hints["you normalize over the last two dimensions together (all positions of a sequence): "
              "each vector is normalized on its own, over dim=-1 only"] = _normalize(x, (-2, -1), eps) * w + b
        if x.shape[-1] == x.shape[-2]:
            hints["the mean and the variance lost their dimension and broadcast the wrong way: "
                  "use keepdim=True"] = (x - x.mean(-1)) / torch.sqrt(x.var(-1, correction=0) + eps) * w + b
    return hints


def _call(k, what, x, w, b, eps):
    """The student's layer_norm(x, w, b, eps=eps), with the keepdim hint when broadcasting fails."""
    try:
        return k.call(what, k.student("layer_norm"), x, w, b, eps=eps)
    except StudentError as e:
        if "must match the size of tensor" in e.raw:
            raise AssertionError(f"{e}. {KEEPDIM_HINT}") from None
        raise


def _check(k, x, w, b, eps, what, atol=1e-5, rtol=1e-4):
    actual = _call(k, what, x, w, b, eps)
    single = expected_layer_norm(x.float(), w.float(), b.float(), eps).to(x.dtype)

    def diagnose(got):
        if x.dtype == torch.float64 and is_close(got, single, 1e-5, 1e-4):
            return ("it is computed in float32 although x is float64 (the result has float64's dtype but float32's "
                    "precision, about 7 digits): compute in the input's dtype, creating no float32 tensors")
        return None
    assert_close(actual, expected_layer_norm(x, w, b, eps), what, atol=atol, rtol=rtol,
                 hints=usual_mistakes(x, w, b, eps), diagnose=diagnose)


def _x_gradient(x, w, b, upstream, eps, detached=()):
    """The gradient for x of sum(layer_norm(x, w, b) * upstream), with the statistics named in ``detached``
    ("mean", "var") cut off from the graph: what the usual mistakes give."""
    x = x.detach().clone().requires_grad_(True)
    mean = x.mean(-1, keepdim=True)
    mean = mean.detach() if "mean" in detached else mean
    var = (x - mean).pow(2).mean(-1, keepdim=True)
    var = var.detach() if "var" in detached else var
    ((x - mean) / torch.sqrt(var + eps) * w + b).mul(upstream).sum().backward()
    return x.grad


def _check_gradients(k, g):
    """Gradients flow back through layer_norm to x, weight and bias, as through F.layer_norm."""
    x = torch.randn(2, 4, 6, generator=g, dtype=torch.float64) * 2 + 1
    w = torch.randn(6, generator=g, dtype=torch.float64)
    b = torch.randn(6, generator=g, dtype=torch.float64)
    upstream = torch.randn(2, 4, 6, generator=g, dtype=torch.float64)
    what = "layer_norm(x of shape (2, 4, 6), weight, bias) in a backward pass"
    trace = k.trace(what, k.student("layer_norm"), grad(x), grad(w), grad(b), eps=1e-5, backward=upstream)
    if trace.grads is None:
        raise AssertionError(f"{what}: no gradient flows back through the output. Compute it from x with tensor "
                             f"operations only (no .detach(), .item(), .tolist() or torch.no_grad())")
    ref = [t.detach().clone().requires_grad_(True) for t in (x, w, b)]
    expected_layer_norm(*ref).mul(upstream).sum().backward()
    cut = "cut off from the gradient (torch.no_grad(), .detach() or .item())"
    hints = {
        f"the mean and the variance are {cut}: compute them from x like the rest, so that the gradient flows "
        f"through them too": _x_gradient(x, w, b, upstream, 1e-5, ("mean", "var")),
        f"the mean is {cut}: compute it from x like the rest, so that the gradient flows through it too":
            _x_gradient(x, w, b, upstream, 1e-5, ("mean",)),
        f"the variance is {cut}: compute it from x like the rest, so that the gradient flows through it too":
            _x_gradient(x, w, b, upstream, 1e-5, ("var",)),
    }
    for name, actual, r in zip(("x", "weight", "bias"), trace.grads["args"], ref):
        if actual is None:
            raise AssertionError(f"{what}: no gradient reaches {name}; use it in the computation as it is given "
                                 f"(no .detach() or copy)")
        assert_close(actual, r.grad, f"gradient of {what} with respect to {name}", atol=1e-9, rtol=1e-7,
                     hints=hints if name == "x" else None)


def layer_norm_reference(k):
    """Equals F.layer_norm on random shapes, weights and biases, in float32 and float64, gradients included."""
    g = seeded(61)
    for shape in [(2, 5, 8), (6, 6), (8,), (2, 3, 4, 6)]:
        d = shape[-1]
        x = torch.randn(shape, generator=g) * 3 + 2
        w, b = torch.randn(d, generator=g), torch.randn(d, generator=g)
        _check(k, x, w, b, 1e-5, f"layer_norm(x of shape {shape}, weight, bias)")
    x = torch.randn(3, 4, 5, generator=g, dtype=torch.float64) * 2 - 1
    w, b = torch.randn(5, generator=g, dtype=torch.float64), torch.randn(5, generator=g, dtype=torch.float64)
    _check(k, x, w, b, 1e-5, "layer_norm on float64 tensors (keep the input's dtype)", atol=1e-9, rtol=1e-7)
    _check_gradients(k, g)


def layer_norm_tiny_variance(k):
    """Rows with (almost) no spread: eps belongs inside the square root; the eps argument is used."""
    g = seeded(62)
    d = 8
    spreads = torch.tensor([1.0, 1e-1, 1e-2, 3e-3, 1e-3, 1e-4, 0.0], dtype=torch.float64)
    x = (torch.randn(len(spreads), d, generator=g, dtype=torch.float64) * spreads[:, None]
         + torch.randn(len(spreads), 1, generator=g, dtype=torch.float64))
    w = torch.rand(d, generator=g, dtype=torch.float64) + 0.5
    b = torch.randn(d, generator=g, dtype=torch.float64)
    what = "layer_norm on rows whose standard deviations are 1, 0.1, 0.01, 0.003, 0.001, 0.0001 and 0"
    actual = _call(k, what, x, w, b, 1e-5)
    if torch.is_tensor(actual) and actual.shape == x.shape and not torch.isfinite(actual[-1]).all():
        raise AssertionError(f"{what}: a constant row (all entries equal, variance 0) gives NaN or inf. "
                             "Add eps to the variance inside the square root: sqrt(var + eps)")
    assert_close(actual, expected_layer_norm(x, w, b, 1e-5), what, atol=1e-9, rtol=1e-7,
                 hints=usual_mistakes(x, w, b, 1e-5))
    eps = 1e-2
    what = "layer_norm(x, weight, bias, eps=0.01)"
    hints = {"the eps argument is ignored (you always use 1e-5): use the eps you are given":
             expected_layer_norm(x, w, b, 1e-5), **usual_mistakes(x, w, b, eps)}
    actual = _call(k, what, x, w, b, eps)
    assert_close(actual, expected_layer_norm(x, w, b, eps), what, atol=1e-9, rtol=1e-7, hints=hints)
    x32, w32, b32 = x.float(), w.float(), b.float()
    what = "layer_norm on the same rows in float32"
    actual = _call(k, what, x32, w32, b32, 1e-5)
    mean = x32.mean(-1, keepdim=True)
    fast = (x32 - mean) / ((x32 * x32).mean(-1, keepdim=True) - mean * mean + 1e-5).sqrt() * w32 + b32
    assert_close(actual, expected_layer_norm(x32, w32, b32, 1e-5), what, atol=1e-4, rtol=1e-3, hints={
        "the variance is computed as E[x^2] - E[x]^2 (a 'fast' variance, as Flax's LayerNorm has), which loses "
        "its digits when the variance is small next to the mean: compute the mean of (x - mean)^2": fast})

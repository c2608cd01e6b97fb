"""Hidden checks of notebook 06 (residual connections, LayerNorm, the encoder layer).

Each function is one graded test cell. References come from PyTorch's built-ins
(``F.layer_norm``, ``nn.TransformerEncoderLayer``, computed outside the ban) and
``lib.layer_norm``; each common mistake has a hint that names it.
"""
import torch
import torch.nn.functional as F
from torch import nn

from lib import layer_norm as ref
from lib.testing import assert_close, assert_shape, is_close

from .common import call, linear_problem, seeded, student_code, torch_mask

# layer_norm: F.layer_norm, nn.LayerNorm, aten::native_layer_norm; group_norm / batch_norm: the same
# normalization in disguise; transformer_encoder: nn.TransformerEncoderLayer's fused fast path.
BANNED = ("layer_norm", "group_norm", "batch_norm", "transformer_encoder")
REFERENCES = ("layer_norm", "LayerNorm", "EncoderLayer")
KEEPDIM_HINT = ("Reduce with keepdim=True, so that the mean and the variance (shape (..., 1)) "
                "broadcast against x (shape (..., d))")
LAYER_INJECT = {"layer_norm": ref.layer_norm, "LayerNorm": ref.LayerNorm}


def _graded(namespace=None, inject=None):
    return student_code(namespace, inject, ops=BANNED, references=REFERENCES)


def _expected(x, weight, bias, eps):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


# --- layer_norm ------------------------------------------------------------

def _normalize(x, dims, eps, correction=0):
    mean = x.mean(dim=dims, keepdim=True)
    var = x.var(dim=dims, keepdim=True, correction=correction)
    return (x - mean) / torch.sqrt(var + eps)


def _layer_norm_hints(x, w, b, eps):
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, keepdim=True, correction=0)
    hints = {
        "the variance is the unbiased one (it divides by d - 1; x.var() and torch.var do that by default). "
        "LayerNorm uses the biased variance, (1/d) * sum (x_j - mean)^2: "
        "x.var(dim=-1, unbiased=False, keepdim=True)":
            _normalize(x, -1, eps, correction=1) * w + b,
        "you divide by sqrt(sigma) + eps, the square root of the standard deviation (an erratum in some "
        "slides): divide by the standard deviation, sqrt(var + eps)":
            (x - mean) / (var.sqrt().sqrt() + eps) * w + b,
        "you divide by the variance, not by its square root: divide by sqrt(var + eps)":
            (x - mean) / (var + eps) * w + b,
        "eps is added outside the square root, (x - mean) / (sqrt(var) + eps): add it inside, "
        "(x - mean) / sqrt(var + eps), as PyTorch does":
            (x - mean) / (var.sqrt() + eps) * w + b,
        "the weight and the bias are ignored: multiply the normalized x by weight, then add bias":
            _normalize(x, -1, eps),
        "only the weight is applied: add the bias too":
            _normalize(x, -1, eps) * w,
        "the weight and the bias are swapped: normalized * weight + bias":
            _normalize(x, -1, eps) * b + w,
    }
    total = x.sum(-1, keepdim=True)  # "mean" without the 1/d (an erratum in some slides)
    hints["the mean is the sum of the x_j: it is (1/d) * sum x_j (an erratum in some slides); "
          "use x.mean(dim=-1, keepdim=True)"] = \
        (x - total) / torch.sqrt((x - total).pow(2).mean(-1, keepdim=True) + eps) * w + b
    if x.dim() >= 2:
        for dim in range(x.dim() - 1):
            hints[f"you normalize over dim {dim}, not over the last dimension (the d features of each "
                  f"vector): use dim=-1"] = _normalize(x, dim, eps) * w + b
        hints["you normalize over the last two dimensions together (all positions of a sequence): "
              "each vector is normalized on its own, over dim=-1 only"] = _normalize(x, (-2, -1), eps) * w + b
        if x.shape[-1] == x.shape[-2]:
            hints["the mean and the variance lost their dimension and broadcast the wrong way: "
                  "use keepdim=True"] = (x - x.mean(-1)) / torch.sqrt(x.var(-1, correction=0) + eps) * w + b
    return hints


def _call(what, fn, *args, **kwargs):
    """call(), with the keepdim hint when the student's code fails to broadcast."""
    try:
        return call(what, fn, *args, **kwargs)
    except AssertionError as e:
        if "must match the size of tensor" in str(e):
            raise AssertionError(f"{e}. {KEEPDIM_HINT}") from None
        raise


def _check_layer_norm(layer_norm, x, w, b, eps, what, atol=1e-5, rtol=1e-4):
    expected = _expected(x, w, b, eps)
    with _graded():
        actual = _call(what, layer_norm, x, w, b, eps=eps)
    assert_close(actual, expected, what, atol=atol, rtol=rtol, hints=_layer_norm_hints(x, w, b, eps))


def layer_norm_reference(layer_norm):
    """Equals F.layer_norm on random shapes, weights and biases, in float32 and float64."""
    g = seeded(61)
    shapes = [(2, 5, 8), (6, 6), (8,), (2, 3, 4, 6)]
    for shape in shapes:
        d = shape[-1]
        x = torch.randn(shape, generator=g) * 3 + 2
        w, b = torch.randn(d, generator=g), torch.randn(d, generator=g)
        _check_layer_norm(layer_norm, x, w, b, 1e-5, f"layer_norm(x of shape {shape}, weight, bias)")
    x = torch.randn(3, 4, 5, generator=g, dtype=torch.float64) * 2 - 1
    w, b = torch.randn(5, generator=g, dtype=torch.float64), torch.randn(5, generator=g, dtype=torch.float64)
    _check_layer_norm(layer_norm, x, w, b, 1e-5, "layer_norm on float64 tensors (keep the input's dtype)",
                      atol=1e-9, rtol=1e-7)


def layer_norm_tiny_variance(layer_norm):
    """Rows with (almost) no spread: eps belongs inside the square root; the eps argument is used."""
    g = seeded(62)
    d = 8
    spreads = torch.tensor([1.0, 1e-1, 1e-2, 3e-3, 1e-3, 1e-4, 0.0], dtype=torch.float64)
    x = (torch.randn(len(spreads), d, generator=g, dtype=torch.float64) * spreads[:, None]
         + torch.randn(len(spreads), 1, generator=g, dtype=torch.float64))
    w = torch.rand(d, generator=g, dtype=torch.float64) + 0.5
    b = torch.randn(d, generator=g, dtype=torch.float64)
    what = "layer_norm on rows whose standard deviations are 1, 0.1, 0.01, 0.003, 0.001, 0.0001 and 0"
    expected = _expected(x, w, b, 1e-5)
    with _graded():
        actual = _call(what, layer_norm, x, w, b, eps=1e-5)
    if torch.is_tensor(actual) and actual.shape == x.shape and not torch.isfinite(actual[-1]).all():
        raise AssertionError(f"{what}: a constant row (all entries equal, variance 0) gives NaN or inf. "
                             "Add eps to the variance inside the square root: sqrt(var + eps)")
    assert_close(actual, expected, what, atol=1e-9, rtol=1e-7, hints=_layer_norm_hints(x, w, b, 1e-5))
    eps = 1e-2
    what = "layer_norm(x, weight, bias, eps=0.01)"
    hints = {"the eps argument is ignored (you always use 1e-5): use the eps you are given":
             _expected(x, w, b, 1e-5), **_layer_norm_hints(x, w, b, eps)}
    with _graded():
        actual = _call(what, layer_norm, x, w, b, eps=eps)
    assert_close(actual, _expected(x, w, b, eps), what, atol=1e-9, rtol=1e-7, hints=hints)
    x32 = x.float()
    with _graded():
        actual = call("layer_norm on the same rows in float32", layer_norm, x32, w.float(), b.float(), eps=1e-5)
    assert_close(actual, _expected(x32, w.float(), b.float(), 1e-5), "layer_norm on the same rows in float32",
                 atol=1e-4, rtol=1e-3)


# --- LayerNorm ---------------------------------------------------------------

def _build_layer_norm(LayerNorm, namespace, d, eps=None):
    args = (d,) if eps is None else (d, eps)
    what = f"LayerNorm({d})" if eps is None else f"LayerNorm({d}, eps={eps})"
    with _graded(namespace, {"layer_norm": ref.layer_norm}):
        layer = call(what, LayerNorm, *args)
    return layer, what


def _parameter(layer, name, what):
    p = getattr(layer, name, None)
    if p is None:
        raise AssertionError(f"{what} has no attribute `{name}`: create self.{name} in __init__")
    if not isinstance(p, nn.Parameter):
        raise AssertionError(
            f"{what}.{name} is a {type(p).__name__}, not an nn.Parameter: wrap it, "
            f"self.{name} = nn.Parameter(...), so that the module registers it and the optimizer trains it")
    return p


def LayerNorm_parameters(LayerNorm, namespace):
    """`weight` (ones) and `bias` (zeros) are registered nn.Parameters of shape (d_model,)."""
    d = 6
    layer, what = _build_layer_norm(LayerNorm, namespace, d)
    if not isinstance(layer, nn.Module):
        raise AssertionError(f"{what} should be an nn.Module (class LayerNorm(nn.Module))")
    weight, bias = _parameter(layer, "weight", what), _parameter(layer, "bias", what)
    for name, p, value, why in (("weight", weight, 1.0, "the layer starts as a plain normalization"),
                                ("bias", bias, 0.0, "the layer starts with no shift")):
        if tuple(p.shape) != (d,):
            raise AssertionError(f"{what}.{name} has shape {tuple(p.shape)}, expected ({d},): one value per feature")
        if not torch.equal(p.detach(), torch.full((d,), value)):
            raise AssertionError(f"{what}.{name} should start as all {'ones' if value else 'zeros'} "
                                 f"(torch.{'ones' if value else 'zeros'}(d_model)), so that {why}; "
                                 f"got {[round(v, 4) for v in p.detach().tolist()]}")
        if not p.requires_grad:
            raise AssertionError(f"{what}.{name} does not require a gradient: it must be trainable")
    params = dict(layer.named_parameters())
    if set(params) != {"weight", "bias"}:
        raise AssertionError(f"{what} should have exactly two parameters, weight and bias; it has {sorted(params)}")


def LayerNorm_forward(LayerNorm, namespace):
    """The forward pass equals F.layer_norm with the module's weight, bias and eps; gradients reach both."""
    g = seeded(63)
    d = 6
    layer, what = _build_layer_norm(LayerNorm, namespace, d)
    weight, bias = _parameter(layer, "weight", what), _parameter(layer, "bias", what)
    with torch.no_grad():
        weight.copy_(torch.rand(d, generator=g) + 0.5)
        bias.copy_(torch.randn(d, generator=g))
    w, b = weight.detach().clone(), bias.detach().clone()
    x = torch.randn(2, 5, d, generator=g) * 2 + 1
    upstream = torch.randn(2, 5, d, generator=g)
    x_ref = x.clone().requires_grad_(True)
    w_ref, b_ref = w.clone().requires_grad_(True), b.clone().requires_grad_(True)
    expected = F.layer_norm(x_ref, (d,), w_ref, b_ref, 1e-5)
    (expected * upstream).sum().backward()
    with _graded(namespace, {"layer_norm": ref.layer_norm}):
        out = _call(f"{what}(x of shape (2, 5, {d}))", layer, x)
        if torch.is_tensor(out) and out.shape == x.shape and out.requires_grad:
            (out * upstream).sum().backward()
    hints = {"weight and bias are not used in forward: pass self.weight and self.bias to layer_norm":
             F.layer_norm(x, (d,))}
    assert_close(out, expected.detach(), f"{what}(x) after changing its weight and bias", hints=hints)
    for name, p, p_ref in (("weight", weight, w_ref), ("bias", bias, b_ref)):
        if p.grad is None:
            raise AssertionError(f"no gradient reaches {what}.{name}: use self.{name} itself in forward "
                                 f"(not a copy, not .data), so that training can change it")
        assert_close(p.grad, p_ref.grad, f"gradient of {what}.{name}")
    eps = 1e-2
    layer, what = _build_layer_norm(LayerNorm, namespace, 4, eps)
    x = torch.tensor([[1.0, 1.01, 0.99, 1.0], [0.0, 0.05, -0.05, 0.0], [1.0, 2.0, 3.0, 4.0]])
    with _graded(namespace, {"layer_norm": ref.layer_norm}):
        out = call(f"{what}(x)", layer, x)
    assert_close(out, F.layer_norm(x, (4,), eps=eps), f"{what}(x) on rows of small spread",
                 hints={"eps is not passed on: store it in __init__ and use it in forward":
                        F.layer_norm(x, (4,), eps=1e-5)})
    layer, what = _build_layer_norm(LayerNorm, namespace, 5)
    x = torch.randn(3, 5, generator=g, dtype=torch.float64)
    with _graded(namespace, {"layer_norm": ref.layer_norm}):
        layer = call(f"{what}.double()", layer.double)
        out = call(f"{what}.double()(x in float64)", layer, x)
    assert_close(out, F.layer_norm(x, (5,)), f"{what} in float64", atol=1e-9)


# --- EncoderLayer ------------------------------------------------------------

def _build_encoder(EncoderLayer, namespace, d, h, d_ff, norm_first, dropout=0.0):
    what = f"EncoderLayer({d}, {h}, {d_ff}, dropout={dropout}, norm_first={norm_first})"
    with _graded(namespace, LAYER_INJECT):
        torch.manual_seed(0)
        layer = call(what, EncoderLayer, d, h, d_ff, dropout=dropout, norm_first=norm_first)
    if not isinstance(layer, nn.Module):
        raise AssertionError(f"{what} should be an nn.Module")
    return layer, what


def _structure(layer, d, d_ff, what):
    """Name the first missing or wrong submodule, or return None."""
    attn = getattr(layer, "self_attn", None)
    if attn is None:
        return (f"{what} has no attribute `self_attn`: self.self_attn = MultiHeadAttention(d_model, n_heads, "
                f"dropout) (from lib.multi_head)")
    for name in ("w_q", "w_k", "w_v", "w_o"):
        problem = linear_problem(attn, name, d, d, f"{what}.self_attn (MultiHeadAttention from lib.multi_head)")
        if problem:
            return problem
    ff = getattr(layer, "ff", None)
    if ff is None:
        return f"{what} has no attribute `ff`: self.ff = FeedForward(d_model, d_ff, dropout) (from lib.feed_forward)"
    for name, d_in, d_out in (("linear1", d, d_ff), ("linear2", d_ff, d)):
        problem = linear_problem(ff, name, d_in, d_out, f"{what}.ff (FeedForward from lib.feed_forward)")
        if problem:
            return problem
    for name in ("norm1", "norm2"):
        norm = getattr(layer, name, None)
        if norm is None:
            return f"{what} has no attribute `{name}`: self.{name} = LayerNorm(d_model)"
        for p in ("weight", "bias"):
            t = getattr(norm, p, None)
            if not torch.is_tensor(t) or tuple(t.shape) != (d,):
                return f"{what}.{name}.{p} should be a tensor of shape ({d},): is {name} a LayerNorm(d_model)?"
    if layer.norm1 is layer.norm2:
        return (f"{what}.norm1 and .norm2 are the same module: create two LayerNorms, each with its own "
                f"weight and bias")
    return None


def _copy_weights(ours, theirs, d, what):
    """Give our layer the parameters of a torch.nn.TransformerEncoderLayer."""
    a = theirs.self_attn
    pairs = [(ours.self_attn.w_q.weight, a.in_proj_weight[:d]), (ours.self_attn.w_k.weight, a.in_proj_weight[d:2 * d]),
             (ours.self_attn.w_v.weight, a.in_proj_weight[2 * d:]), (ours.self_attn.w_o.weight, a.out_proj.weight),
             (ours.ff.linear1.weight, theirs.linear1.weight), (ours.ff.linear2.weight, theirs.linear2.weight)]
    biases = [(ours.self_attn.w_q.bias, a.in_proj_bias[:d]), (ours.self_attn.w_k.bias, a.in_proj_bias[d:2 * d]),
              (ours.self_attn.w_v.bias, a.in_proj_bias[2 * d:]), (ours.self_attn.w_o.bias, a.out_proj.bias),
              (ours.ff.linear1.bias, theirs.linear1.bias), (ours.ff.linear2.bias, theirs.linear2.bias)]
    for n in (1, 2):
        mine, other = getattr(ours, f"norm{n}"), getattr(theirs, f"norm{n}")
        pairs += [(mine.weight, other.weight), (mine.bias, other.bias)]
    for mine, other in biases:
        if mine is None:
            raise AssertionError(f"{what}: the linear layers of self_attn and ff need biases (the default)")
        pairs.append((mine, other))
    with torch.no_grad():
        for mine, other in pairs:
            mine.copy_(other)


def _torch_pair(EncoderLayer, namespace, d, h, d_ff, norm_first, seed, dropout=0.0):
    """The student's layer and a torch.nn.TransformerEncoderLayer with the same (random) parameters."""
    ours, what = _build_encoder(EncoderLayer, namespace, d, h, d_ff, norm_first, dropout)
    problem = _structure(ours, d, d_ff, what)
    if problem:
        raise AssertionError(problem)
    g = seeded(seed)
    theirs = nn.TransformerEncoderLayer(d, h, d_ff, dropout=dropout, batch_first=True, norm_first=norm_first)
    with torch.no_grad():
        for name, p in theirs.named_parameters():
            if name.startswith("norm") and name.endswith("weight"):
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * (0.5 if p.dim() == 1 else p.shape[-1] ** -0.5))
    _copy_weights(ours, theirs, d, what)
    return ours, theirs.eval(), what


def _variants(theirs, x, mask, h):
    """Outputs of the correct layers and of the usual wrong ones, from torch's parts (no dropout)."""
    b, t, _ = x.shape
    tm = torch_mask(mask, b, h, t)

    def sa(y, m=tm):
        return theirs.self_attn(y, y, y, attn_mask=m, need_weights=False)[0]

    def ff(y):
        return theirs.linear2(F.relu(theirs.linear1(y)))

    n1, n2 = theirs.norm1, theirs.norm2

    def post(x, n1=n1, n2=n2, m=tm):
        y = n1(x + sa(x, m))
        return n2(y + ff(y))

    def pre(x, n1=n1, n2=n2, m=tm):
        y = x + sa(n1(x), m)
        return y + ff(n2(y))

    with torch.no_grad():
        out = {
            "post": post(x), "pre": pre(x),
            "post_no_residual": n2(ff(n1(sa(x)))),
            "pre_no_residual": ff(n2(sa(n1(x)))),
            "post_branch_norm": (lambda y: y + n2(ff(y)))(x + n1(sa(x))),
            "post_swapped_norms": post(x, n2, n1), "pre_swapped_norms": pre(x, n2, n1),
            "post_one_norm": post(x, n1, n1), "pre_one_norm": pre(x, n1, n1),
            "pre_normalized_residual": (lambda y: n2(y) + ff(n2(y)))(n1(x) + sa(n1(x))),
        }
        if mask is not None:
            out["post_no_mask"], out["pre_no_mask"] = post(x, m=None), pre(x, m=None)
    return out


def _encoder_hints(v, norm_first):
    mine, other = ("pre", "post") if norm_first else ("post", "pre")
    hints = {
        f"{mine}-norm is computed as {other}-norm: with norm_first={norm_first} use "
        + ("x = x + Sub(LN(x))" if norm_first else "x = LN(x + Sub(x))")
        + " (is norm_first used?)": v[other],
        "there is no residual connection: add the sublayer's input back, x + Sub(...)": v[f"{mine}_no_residual"],
        "norm1 and norm2 are swapped: norm1 goes with the attention sublayer, norm2 with the feed-forward":
            v[f"{mine}_swapped_norms"],
        "the same LayerNorm is used for both sublayers: use norm1 around attention and norm2 around the "
        "feed-forward": v[f"{mine}_one_norm"],
    }
    if norm_first:
        hints["the residual adds the normalized x: in pre-norm the residual stream stays un-normalized, "
              "x + Sub(LN(x)), not LN(x) + Sub(LN(x))"] = v["pre_normalized_residual"]
    else:
        hints["the LayerNorm is applied to the sublayer's output only, x + LN(Sub(x)): post-norm "
              "normalizes the sum, LN(x + Sub(x))"] = v["post_branch_norm"]
    if f"{mine}_no_mask" in v:
        hints["src_mask is ignored: pass it on to the attention, self.self_attn(x, x, x, src_mask)"] = v[f"{mine}_no_mask"]
    return hints


def _run_encoder(layer, x, mask, what, namespace):
    with _graded(namespace, LAYER_INJECT):
        out = call(what, layer, x, src_mask=mask) if mask is not None else call(what, layer, x)
    if isinstance(out, (tuple, list)):
        raise AssertionError(f"{what} returns a {type(out).__name__}: return only the output tensor "
                             f"(B, T, d_model), not (output, attention weights)")
    return out


def _masks(b, t):
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    lengths = torch.tensor([t, t - 2] + [t - 1] * (b - 2))[:b]
    padding = (torch.arange(t)[None, :] < lengths[:, None])[:, None, :]
    return [("no mask", None), ("a causal mask (T, T)", causal), ("a padding mask (B, 1, T)", padding),
            ("causal & padding (B, T, T)", causal & padding)]


def _encoder_equals_torch(EncoderLayer, namespace, norm_first, seed):
    g = seeded(seed)
    for d, h, d_ff, t in ((16, 4, 32, 6), (12, 3, 20, 5)):
        ours, theirs, what = _torch_pair(EncoderLayer, namespace, d, h, d_ff, norm_first, seed + d)
        ours.eval()
        b = 3
        x = torch.randn(b, t, d, generator=g) * 2 + 0.5
        for name, mask in _masks(b, t):
            with torch.no_grad():
                tm = torch_mask(mask, b, h, t)
                expected = theirs(x, src_mask=tm)
            v = _variants(theirs, x, mask, h)
            call_what = f"{what}(x of shape {tuple(x.shape)}, {name})"
            out = _run_encoder(ours, x, mask, call_what, namespace)
            assert_shape(out, x.shape, f"output of {call_what}")
            assert_close(out, expected, f"output of {call_what} (compared with nn.TransformerEncoderLayer, "
                                        f"same weights)", hints=_encoder_hints(v, norm_first))


def EncoderLayer_structure(EncoderLayer, namespace):
    """Submodules self_attn (MultiHeadAttention), ff (FeedForward), norm1 and norm2 (two LayerNorms)."""
    for norm_first in (False, True):
        for d, h, d_ff in ((16, 4, 32), (12, 3, 20)):
            layer, what = _build_encoder(EncoderLayer, namespace, d, h, d_ff, norm_first)
            problem = _structure(layer, d, d_ff, what)
            if problem:
                raise AssertionError(problem)
            heads = getattr(layer.self_attn, "n_heads", h)
            if heads != h:
                raise AssertionError(f"{what}.self_attn has {heads} heads, expected {h}")
            x = torch.randn(2, 4, d, generator=seeded(64))
            out = _run_encoder(layer.eval(), x, None, f"{what}(x of shape (2, 4, {d}))", namespace)
            assert_shape(out, (2, 4, d), f"output of {what}(x of shape (2, 4, {d}))")


def EncoderLayer_post_norm(EncoderLayer, namespace):
    """norm_first=False equals nn.TransformerEncoderLayer(norm_first=False) with the same weights, with masks."""
    _encoder_equals_torch(EncoderLayer, namespace, False, 65)


def EncoderLayer_pre_norm(EncoderLayer, namespace):
    """norm_first=True equals nn.TransformerEncoderLayer(norm_first=True) with the same weights, with masks."""
    _encoder_equals_torch(EncoderLayer, namespace, True, 66)


def EncoderLayer_dropout(EncoderLayer, namespace):
    """Dropout on each sublayer's output, before the residual add; random in train mode, off in eval mode."""
    g = seeded(67)
    d, h, d_ff, t, b = 16, 4, 32, 5, 2
    for norm_first in (False, True):
        ours, theirs, what = _torch_pair(EncoderLayer, namespace, d, h, d_ff, norm_first, 68, dropout=0.3)
        x = torch.randn(b, t, d, generator=g)
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        ours.train()
        torch.manual_seed(1)
        first = _run_encoder(ours, x, mask, f"{what} in train mode", namespace)
        second = _run_encoder(ours, x, mask, f"{what} in train mode, called again", namespace)
        if is_close(first, second):
            raise AssertionError(f"{what}: in train mode two calls give the same output. Apply dropout "
                                 f"(nn.Dropout(dropout)) to each sublayer's output")
        ours.eval()
        with torch.no_grad():
            expected = theirs(x, src_mask=torch_mask(mask, b, h, t))
        first = _run_encoder(ours, x, mask, f"{what} in eval mode", namespace)
        second = _run_encoder(ours, x, mask, f"{what} in eval mode, called again", namespace)
        if not is_close(first, second):
            raise AssertionError(f"{what}: in eval mode two calls give different outputs, so dropout is still "
                                 f"on. Use nn.Dropout modules, or F.dropout(..., training=self.training)")
        assert_close(first, expected, f"output of {what} in eval mode (dropout off)")
        # With dropout=1.0 every sublayer's contribution is dropped: only the residual path remains.
        ours, theirs, what = _torch_pair(EncoderLayer, namespace, d, h, d_ff, norm_first, 69, dropout=1.0)
        ours.train()
        with torch.no_grad():
            n1, n2 = theirs.norm1, theirs.norm2
            bo, b2 = theirs.self_attn.out_proj.bias, theirs.linear2.bias
            if norm_first:
                expected = x.clone()
                inner_only = x + bo + b2
                after_sum = torch.zeros_like(x)
            else:
                expected = n2(n1(x))
                inner_only = n2(n1(x + bo) + b2)
                after_sum = n2.bias.expand_as(x).clone()
        out = _run_encoder(ours, x, mask, f"{what} in train mode", namespace)
        rule = ("x = x + Drop(Sub(LN(x))): with dropout=1.0 the output must be x itself" if norm_first else
                "x = LN(x + Drop(Sub(x))): with dropout=1.0 the output must be norm2(norm1(x))")
        assert_close(out, expected, f"output of {what} in train mode ({rule})", hints={
            "the only dropout is the one inside the attention and the feed-forward: EncoderLayer needs its "
            "own dropout on each sublayer's output, before adding the residual": inner_only,
            "dropout is applied after the residual add: drop the sublayer's output, then add x": after_sum,
        })

"""EncoderLayer(d_model, n_heads, d_ff, dropout, norm_first): self_attn, ff, norm1, norm2; post- or pre-norm,
compared with torch.nn.TransformerEncoderLayer given the same weights."""
import torch
import torch.nn.functional as F
from torch import nn

from lib.testing import assert_close, assert_shape, is_close

from ..common import INVERTED_MASK, linear_problem, module, seeded, torch_mask
from . import trusted_norms

MHA = "(MultiHeadAttention from lib.multi_head)"
FF = "(FeedForward from lib.feed_forward)"


def _build(k, d, h, d_ff, norm_first, dropout=0.0):
    """The student's layer; ``norm_first=None`` leaves the argument out (its default)."""
    given = {} if norm_first is None else {"norm_first": norm_first}
    what = f"EncoderLayer({d}, {h}, {d_ff}, dropout={dropout}" + "".join(f", {n}={v}" for n, v in given.items()) + ")"
    layer = k.call(what, k.student("EncoderLayer"), d, h, d_ff, dropout=dropout, **given, inject=trusted_norms(k),
                   seed=0)
    return layer, module(k, layer, what), what


def _structure(info, d, h, d_ff, what, bias=None):
    """Why the layer lacks the submodules of the contract, or None. ``bias``: the linear layers must have
    biases (True), or may have them or not (None)."""
    attn = info.children.get("self_attn")
    if attn is None:
        return (f"{what} has no submodule `self_attn`: self.self_attn = MultiHeadAttention(d_model, n_heads, "
                f"dropout) (from lib.multi_head)")
    for name in ("w_q", "w_k", "w_v", "w_o"):
        problem = linear_problem(attn, name, d, d, f"{what}.self_attn {MHA}", bias=bias)
        if problem:
            return problem
    heads = attn.attrs.get("n_heads", h)
    if heads != h:
        return f"{what}.self_attn has {heads} heads, expected {h}"
    ff = info.children.get("ff")
    if ff is None:
        return f"{what} has no submodule `ff`: self.ff = FeedForward(d_model, d_ff, dropout) (from lib.feed_forward)"
    for name, d_in, d_out in (("linear1", d, d_ff), ("linear2", d_ff, d)):
        problem = linear_problem(ff, name, d_in, d_out, f"{what}.ff {FF}", bias=bias)
        if problem:
            return problem
    for name in ("norm1", "norm2"):
        if name not in info.children:
            return f"{what} has no submodule `{name}`: self.{name} = LayerNorm(d_model)"
    if info.children["norm1"].oid == info.children["norm2"].oid:
        return (f"{what}.norm1 and .norm2 are the same module: create two LayerNorms, each with its own "
                f"weight and bias")
    for name in ("norm1", "norm2"):
        norm = info.children.get(name)
        for p in ("weight", "bias"):
            t = norm.params.get(p) if norm is not None else None
            if t is None or tuple(t.shape) != (d,):
                return f"{what}.{name}.{p} should be a parameter of shape ({d},): is {name} a LayerNorm(d_model)?"
    return None


def _weights_of(theirs, d):
    """torch's parameters under the names of our layer's."""
    a = theirs.self_attn
    w, b = a.in_proj_weight.detach(), a.in_proj_bias.detach()
    out = {}
    for i, name in enumerate(("w_q", "w_k", "w_v")):
        out[f"self_attn.{name}.weight"], out[f"self_attn.{name}.bias"] = w[i * d:(i + 1) * d], b[i * d:(i + 1) * d]
    pairs = {"self_attn.w_o": a.out_proj, "ff.linear1": theirs.linear1, "ff.linear2": theirs.linear2,
             "norm1": theirs.norm1, "norm2": theirs.norm2}
    for ours, mod in pairs.items():
        out[f"{ours}.weight"], out[f"{ours}.bias"] = mod.weight.detach(), mod.bias.detach()
    return {name: t.clone() for name, t in out.items()}


def _torch_pair(k, d, h, d_ff, norm_first, seed, dropout=0.0):
    """The student's layer and a torch.nn.TransformerEncoderLayer with the same (random) parameters."""
    ours, info, what = _build(k, d, h, d_ff, norm_first, dropout)
    problem = _structure(info, d, h, d_ff, what, bias=True)  # torch's layer has biases
    if problem:
        raise AssertionError(problem)
    g = seeded(seed)
    theirs = nn.TransformerEncoderLayer(d, h, d_ff, dropout=dropout, batch_first=True, norm_first=bool(norm_first))
    with torch.no_grad():
        for name, p in theirs.named_parameters():
            if name.startswith("norm") and name.endswith("weight"):
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * (0.5 if p.dim() == 1 else p.shape[-1] ** -0.5))
    problems = k.load(ours, _weights_of(theirs, d))
    if problems:
        raise AssertionError(f"{what}: cannot give it the weights of the comparison: {problems[0]}")
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
            "post_ff_on_input": n2(n1(x + sa(x)) + ff(x)),
            "pre_ff_on_input": x + sa(n1(x)) + ff(n2(x)),
        }
        if mask is not None:
            out["post_no_mask"], out["pre_no_mask"] = post(x, m=None), pre(x, m=None)
    return out


def _hints(v, norm_first):
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
        "the feed-forward sublayer reads the layer's input: it must read the output of the attention sublayer "
        "(update x after the first sublayer, then feed that x to the second)": v[f"{mine}_ff_on_input"],
    }
    if norm_first:
        hints["the residual adds the normalized x: in pre-norm the residual stream stays un-normalized, "
              "x + Sub(LN(x)), not LN(x) + Sub(LN(x))"] = v["pre_normalized_residual"]
    else:
        hints["the LayerNorm is applied to the sublayer's output only, x + LN(Sub(x)): post-norm "
              "normalizes the sum, LN(x + Sub(x))"] = v["post_branch_norm"]
    if f"{mine}_no_mask" in v:
        hints["src_mask is ignored: pass it on to the attention, self.self_attn(x, x, x, src_mask)"] = \
            v[f"{mine}_no_mask"]
    return hints


def _run(k, layer, x, mask, what, seed=None):
    kwargs = {} if mask is None else {"src_mask": mask}
    out = k.call(what, layer, x, inject=trusted_norms(k), seed=seed, **kwargs)
    if isinstance(out, (tuple, list)):
        raise AssertionError(f"{what} returns a {type(out).__name__}: return only the output tensor "
                             f"(B, T, d_model), not (output, attention weights)")
    return out


def _mode(k, layer, mode, what):
    k.call(f"{what}.{mode}()", layer.attr(mode))


def _masks(b, t):
    """No mask, causal, and padding where the rows have different lengths and even the longest is padded."""
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    lengths = torch.tensor([t - 1, t - 3] + [t - 2] * (b - 2))[:b]
    padding = (torch.arange(t)[None, :] < lengths[:, None])[:, None, :]
    return [("no mask", None), ("a causal mask (T, T)", causal), ("a padding mask (B, 1, T)", padding),
            ("causal & padding (B, T, T)", causal & padding)]


def _equals_torch(k, norm_first, seed):
    g = seeded(seed)
    for d, h, d_ff, t in ((16, 4, 32, 6), (12, 3, 20, 5)):
        ours, theirs, what = _torch_pair(k, d, h, d_ff, norm_first, seed + d)
        _mode(k, ours, "eval", what)
        b = 3
        x = torch.randn(b, t, d, generator=g) * 2 + 0.5
        for name, mask in _masks(b, t):
            with torch.no_grad():
                expected = theirs(x, src_mask=torch_mask(mask, b, h, t))
            call = f"{what}(x of shape {tuple(x.shape)}, {name})"
            out = _run(k, ours, x, mask, call)
            assert_shape(out, x.shape, f"output of {call}")
            if mask is not None and not torch.isfinite(out).all():
                raise AssertionError(
                    f"{call} gives NaN although every query may see at least one key. Perhaps {INVERTED_MASK}: "
                    f"pass src_mask on unchanged (only PyTorch's own layers want the opposite, ~mask)")
            label = f"output of {call} (compared with nn.TransformerEncoderLayer, same weights)"
            try:
                assert_close(out, expected, label)
            except AssertionError:  # name the mistake, if it is a known one (worked out on a failure only)
                assert_close(out, expected, label, hints=_hints(_variants(theirs, x, mask, h), norm_first))
                raise


def EncoderLayer_structure(k):
    """Submodules self_attn (MultiHeadAttention), ff (FeedForward), norm1 and norm2 (two LayerNorms); the output
    has shape (B, T, d_model)."""
    x_g = seeded(64)
    for norm_first in (False, True):
        for d, h, d_ff in ((16, 4, 32), (12, 3, 20)):
            layer, info, what = _build(k, d, h, d_ff, norm_first)
            problem = _structure(info, d, h, d_ff, what)
            if problem:
                raise AssertionError(problem)
            _mode(k, layer, "eval", what)
            x = torch.randn(2, 4, d, generator=x_g)
            call = f"{what}(x of shape (2, 4, {d}))"
            assert_shape(_run(k, layer, x, None, call), (2, 4, d), f"output of {call}")


def EncoderLayer_post_norm(k):
    """norm_first=False equals nn.TransformerEncoderLayer(norm_first=False) with the same weights, with masks; so
    does the layer built without norm_first (post-norm is the default)."""
    _equals_torch(k, False, 65)
    d, h, d_ff = 16, 4, 32
    ours, theirs, what = _torch_pair(k, d, h, d_ff, None, 67)
    _mode(k, ours, "eval", what)
    x = torch.randn(3, 6, d, generator=seeded(67)) * 2 + 0.5
    call = f"{what}(x of shape (3, 6, {d}), no mask)"
    out = _run(k, ours, x, None, call)
    with torch.no_grad():
        expected = theirs(x)
    if not is_close(out, expected) and is_close(out, _variants(theirs, x, None, h)["pre"]):
        raise AssertionError(f"{what}, built without norm_first, is a pre-norm layer: the default must be "
                             f"norm_first=False (post-norm, x = LN(x + Sub(x)), as in nn.TransformerEncoderLayer)")
    assert_close(out, expected, f"output of {call} (compared with nn.TransformerEncoderLayer, same weights)")


def EncoderLayer_pre_norm(k):
    """norm_first=True equals nn.TransformerEncoderLayer(norm_first=True) with the same weights, with masks."""
    _equals_torch(k, True, 66)


def _own_layer(k, d, h, d_ff, norm_first, seed, x, mask, zero_sublayers=False):
    """The student's own layer without dropout, with the weights ``_torch_pair`` gives for ``seed`` (and, with
    ``zero_sublayers``, w_o and linear2 set to zero, so that both sublayers add exactly nothing), run in eval mode
    on ``x``: what the layer with dropout must give where dropout is off, or drops everything, whatever the rest of
    the layer gets wrong (the post-norm and pre-norm parts judge that)."""
    plain, _, what = _torch_pair(k, d, h, d_ff, norm_first, seed, dropout=0.0)
    if zero_sublayers:
        zeros = {f"{name}.{p}": torch.zeros(d, d_ff if name == "ff.linear2" else d) if p == "weight" else torch.zeros(d)
                 for name in ("self_attn.w_o", "ff.linear2") for p in ("weight", "bias")}
        problems = k.load(plain, zeros)
        if problems:
            raise AssertionError(f"{what}: cannot set its output projections to zero: {problems[0]}")
    _mode(k, plain, "eval", what)
    return _run(k, plain, x, mask, f"{what} in eval mode")


def EncoderLayer_dropout(k):
    """Dropout on each sublayer's output, before the residual add; random in train mode, off in eval mode. Where the
    layer differs from PyTorch's even without dropout, its dropout is judged against the same layer built with
    dropout=0.0: one slip (a norm in the wrong place, say) costs the post-norm or pre-norm part, not this one."""
    g = seeded(67)
    d, h, d_ff, t, b = 16, 4, 32, 5, 2
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    for norm_first in (False, True):
        ours, theirs, what = _torch_pair(k, d, h, d_ff, norm_first, 68, dropout=0.3)
        x = torch.randn(b, t, d, generator=g)
        _mode(k, ours, "train", what)
        first = _run(k, ours, x, mask, f"{what} in train mode", seed=1)
        second = _run(k, ours, x, mask, f"{what} in train mode, called again", seed=2)
        if is_close(first, second):
            raise AssertionError(f"{what}: in train mode two calls give the same output. Apply dropout "
                                 f"(nn.Dropout(dropout)) to each sublayer's output")
        _mode(k, ours, "eval", what)
        with torch.no_grad():
            expected = theirs(x, src_mask=torch_mask(mask, b, h, t))
        first = _run(k, ours, x, mask, f"{what} in eval mode", seed=1)
        second = _run(k, ours, x, mask, f"{what} in eval mode, called again", seed=2)
        if not is_close(first, second):
            raise AssertionError(f"{what}: in eval mode two calls give different outputs, so dropout is still "
                                 f"on. Use nn.Dropout modules, or F.dropout(..., training=self.training)")
        right = is_close(first, expected)
        if not right:  # wrong without dropout too: the layer itself is judged by the post-norm or pre-norm part
            expected = _own_layer(k, d, h, d_ff, norm_first, 68, x, mask)
        assert_close(first, expected, f"output of {what} in eval mode (dropout off)")
        # With dropout=1.0 every sublayer's contribution is dropped: only the residual path remains.
        ours, theirs, what = _torch_pair(k, d, h, d_ff, norm_first, 69, dropout=1.0)
        _mode(k, ours, "train", what)
        with torch.no_grad():
            n1, n2 = theirs.norm1, theirs.norm2
            bo, b2 = theirs.self_attn.out_proj.bias, theirs.linear2.bias
            # the inner dropouts (on the attention weights, on the hidden units) leave the biases bo and b2
            if norm_first:
                expected, inner_only, after_sum = x.clone(), x + bo + b2, torch.zeros_like(x)
                ff_kept, attn_kept = x + b2, x + bo
            else:
                expected, inner_only, after_sum = n2(n1(x)), n2(n1(x + bo) + b2), n2.bias.expand_as(x).clone()
                ff_kept, attn_kept = n2(n1(x) + b2), n2(n1(x + bo))
        out = _run(k, ours, x, mask, f"{what} in train mode", seed=3)
        if not right:
            assert_close(out, _own_layer(k, d, h, d_ff, norm_first, 69, x, mask, zero_sublayers=True),
                         f"output of {what} in train mode, compared with your layer without dropout whose sublayers "
                         f"add nothing (w_o and linear2 set to zero): with dropout=1.0 each sublayer's output is "
                         f"dropped, before the residual add")
            continue
        rule = ("x = x + Drop(Sub(LN(x))): with dropout=1.0 the output must be x itself" if norm_first else
                "x = LN(x + Drop(Sub(x))): with dropout=1.0 the output must be norm2(norm1(x))")
        assert_close(out, expected, f"output of {what} in train mode ({rule})", hints={
            "the only dropout is the one inside the attention and the feed-forward: EncoderLayer needs its "
            "own dropout on each sublayer's output, before adding the residual": inner_only,
            "dropout is applied after the residual add: drop the sublayer's output, then add x": after_sum,
            "the attention's output is dropped but the feed-forward's is not (its dropout is only on the hidden "
            "units, inside): drop the output of each sublayer, the feed-forward's too, before the residual add":
                ff_kept,
            "the feed-forward's output is dropped but the attention's is not (its dropout is only on the weights, "
            "inside): drop the output of each sublayer, the attention's too, before the residual add": attn_kept,
        })

"""DecoderLayer(d_model, n_heads, d_ff, dropout, norm_first): masked self-attention, cross-attention,
feed-forward; compared with torch.nn.TransformerDecoderLayer (same weights), computed here."""
import itertools

import torch
import torch.nn.functional as F
from torch import nn

from lib.testing import assert_close, assert_shape, is_close

from ..common import ALWAYS_CAUSAL, linear_problem, module, seeded, torch_mask
from . import causal, padding

MASK_HINT = ("Here the target has T positions and the source S != T: check that the self-attention gets x and "
             "tgt_mask (T, T), and the cross-attention gets queries x, keys and values memory, and memory_mask "
             "(B, 1, S); the causal tgt_mask does not belong to the cross-attention")


def _build(k, d, h, d_ff, norm_first, dropout=0.0):
    """The student's layer (a handle), its structure checked, and how to name it."""
    what = f"DecoderLayer({d}, {h}, {d_ff}, dropout={dropout}, norm_first={norm_first})"
    layer = k.call(what, k.student("DecoderLayer"), d, h, d_ff, dropout=dropout, norm_first=norm_first, seed=0)
    info = module(k, layer, what)
    problem = _structure(info, d, h, d_ff, what)
    if problem:
        raise AssertionError(problem)
    return layer, what


def _structure(info, d, h, d_ff, what):
    """The first missing or wrong submodule, or None."""
    attns = {name: info.children.get(name) for name in ("self_attn", "cross_attn")}
    for name, attn in attns.items():
        if attn is None:
            return (f"{what} has no attribute `{name}`: self.{name} = MultiHeadAttention(d_model, n_heads, dropout) "
                    f"(from lib.multi_head)")
    if attns["self_attn"].oid == attns["cross_attn"].oid:
        return (f"{what}.self_attn and .cross_attn are the same module: self-attention and cross-attention need "
                f"their own weights, create two MultiHeadAttention modules")
    for name, attn in attns.items():
        for lin in ("w_q", "w_k", "w_v", "w_o"):
            problem = linear_problem(attn, lin, d, d,
                                     f"{what}.{name} (MultiHeadAttention from lib.multi_head)", bias=True)
            if problem:
                return problem
        heads = attn.attrs.get("n_heads", h)
        if heads != h:
            return f"{what}.{name} has {heads} heads, expected {h}"
    ff = info.children.get("ff")
    if ff is None:
        return f"{what} has no attribute `ff`: self.ff = FeedForward(d_model, d_ff, dropout) (from lib.feed_forward)"
    for name, d_in, d_out in (("linear1", d, d_ff), ("linear2", d_ff, d)):
        problem = linear_problem(ff, name, d_in, d_out, f"{what}.ff (FeedForward from lib.feed_forward)", bias=True)
        if problem:
            return problem
    norms = []
    for name in ("norm1", "norm2", "norm3"):
        norm = info.children.get(name)
        if norm is None:
            return f"{what} has no attribute `{name}`: self.{name} = LayerNorm(d_model)"
        norms.append((name, norm))
    if len({norm.oid for _, norm in norms}) < 3:
        return f"{what}.norm1, .norm2 and .norm3 must be three different LayerNorms, each with its own weight and bias"
    for name, norm in norms:
        for p in ("weight", "bias"):
            t = norm.params.get(p) or norm.buffers.get(p) or norm.tensors.get(p)
            if t is None or tuple(t.shape) != (d,):
                return f"{what}.{name}.{p} should be a tensor of shape ({d},): is {name} a LayerNorm(d_model)?"
    return None


def _torch_layer(d, h, d_ff, norm_first, seed):
    """nn.TransformerDecoderLayer with weights far from the defaults, so that every part shows in the output."""
    g = seeded(seed)
    theirs = nn.TransformerDecoderLayer(d, h, d_ff, dropout=0.0, batch_first=True, norm_first=norm_first)
    with torch.no_grad():
        for name, p in theirs.named_parameters():
            if name.startswith("norm") and name.endswith("weight"):
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * (0.5 if p.dim() == 1 else p.shape[-1] ** -0.5))
    return theirs.eval()


def _weights(theirs, d):
    """torch's weights under the exercise's names (self_attn.w_q.weight, ...)."""
    out = {}
    for ours, attn in (("self_attn", theirs.self_attn), ("cross_attn", theirs.multihead_attn)):
        for i, name in enumerate(("w_q", "w_k", "w_v")):
            out[f"{ours}.{name}.weight"] = attn.in_proj_weight[i * d:(i + 1) * d]
            out[f"{ours}.{name}.bias"] = attn.in_proj_bias[i * d:(i + 1) * d]
        out[f"{ours}.w_o.weight"], out[f"{ours}.w_o.bias"] = attn.out_proj.weight, attn.out_proj.bias
    for name in ("linear1", "linear2"):
        out[f"ff.{name}.weight"], out[f"ff.{name}.bias"] = getattr(theirs, name).weight, getattr(theirs, name).bias
    for n in (1, 2, 3):
        norm = getattr(theirs, f"norm{n}")
        out[f"norm{n}.weight"], out[f"norm{n}.bias"] = norm.weight, norm.bias
    return {name: t.detach().clone() for name, t in out.items()}


NORM_ORDERS = [order for order in itertools.permutations((1, 2, 3)) if order != (1, 2, 3)]  # norm{i} per sublayer
SUBLAYERS = ("the self-attention", "the cross-attention", "the feed-forward")


def _variants(theirs, x, memory, tgt_mask, memory_mask, h, norm_first):
    """Outputs of the correct layer and of the usual wrong ones, from torch's parts (no dropout)."""
    b, t, _ = x.shape
    s = memory.shape[1]
    tm, mm = torch_mask(tgt_mask, b, h, t, t), torch_mask(memory_mask, b, h, t, s)

    def sa(y, m=tm):
        return theirs.self_attn(y, y, y, attn_mask=m, need_weights=False)[0]

    def ca(y, mem=memory, m=mm):
        return theirs.multihead_attn(y, mem, mem, attn_mask=m, need_weights=False)[0]

    def ff(y):
        return theirs.linear2(F.relu(theirs.linear1(y)))

    n1, n2, n3 = theirs.norm1, theirs.norm2, theirs.norm3

    # query: where the cross-attention's queries come from: the stream (right), the self-attention's raw output,
    # the layer's input, or (pre-norm) the stream without norm2
    def post(x, sa=sa, ca=ca, n=(n1, n2, n3), res_cross=True, order=("self", "cross"), query="stream"):
        y = said = x
        for step in order:
            if step == "self":
                said = sa(y)
                y = n[0](y + said)
            else:
                q = {"stream": y, "self_out": said, "input": x}[query]
                y = n[1](y + ca(q)) if res_cross else n[1](ca(q))
        return n[2](y + ff(y))

    def pre(x, sa=sa, ca=ca, n=(n1, n2, n3), res_cross=True, norm_memory=False, order=("self", "cross"),
            query="stream"):
        y = x
        for step in order:
            if step == "self":
                y = y + sa(n[0](y))
            else:
                mem = n[1](memory) if norm_memory else memory
                q = {"stream": n[1](y), "input": n[1](x), "unnormed": y}[query]
                y = (y + ca(q, mem)) if res_cross else ca(q, mem)
        return y + ff(n[2](y))

    out = {}
    with torch.no_grad():
        out["post"], out["pre"] = post(x), pre(x)
        name, fn = ("pre", pre) if norm_first else ("post", post)
        out[f"{name}_cross_from_x"] = fn(x, ca=lambda y, mem=None: ca(y, y, None))
        out[f"{name}_no_tgt_mask"] = fn(x, sa=lambda y: sa(y, None))
        out[f"{name}_no_memory_mask"] = fn(x, ca=lambda y, mem=memory: ca(y, mem, None))
        out[f"{name}_no_cross_residual"] = fn(x, res_cross=False)
        for order in NORM_ORDERS:
            out[f"{name}_norms_{order}"] = fn(x, n=tuple((n1, n2, n3)[i - 1] for i in order))
        if tgt_mask is None:
            out[f"{name}_always_causal"] = fn(x, sa=lambda y: sa(y, torch_mask(causal(t), b, h, t, t)))
        out[f"{name}_order_swapped"] = fn(x, order=("cross", "self"))
        out[f"{name}_query_input"] = fn(x, query="input")
        if norm_first:
            out["pre_query_unnormed"] = pre(x, query="unnormed")
        else:
            out["post_query_self_out"] = post(x, query="self_out")
        if norm_first:
            out["pre_norm_memory"] = pre(x, norm_memory=True)
            out["pre_no_residual"] = ff(n3(ca(n2(sa(n1(x))))))
        else:
            out["post_no_residual"] = n3(ff(n2(ca(n1(sa(x))))))
    return out


def _hints(v, norm_first, tgt_mask, memory_mask):
    mine, other = ("pre", "post") if norm_first else ("post", "pre")
    hints = {
        f"{mine}-norm is computed as {other}-norm: with norm_first={norm_first} use "
        + ("x = x + Sub(LN(x))" if norm_first else "x = LN(x + Sub(x))") + " (is norm_first used?)": v[other],
        "the keys and values of the cross-attention come from the decoder (x): cross-attention takes its "
        "queries from the decoder and its keys and values from the encoder, "
        "self.cross_attn(x, memory, memory, memory_mask)": v[f"{mine}_cross_from_x"],
        "there is no residual connection around the cross-attention: x + Drop(CrossAttn(...))":
            v[f"{mine}_no_cross_residual"],
        "there are no residual connections: add each sublayer's input back, x + Sub(...)": v[f"{mine}_no_residual"],
        "the cross-attention comes before the self-attention: the order is masked self-attention, "
        "cross-attention, feed-forward": v[f"{mine}_order_swapped"],
    }
    for order in NORM_ORDERS:
        used = ", ".join(f"norm{i} with {sub}" for i, sub in zip(order, SUBLAYERS) if i != SUBLAYERS.index(sub) + 1)
        hints[f"the LayerNorms are paired with the wrong sublayers ({used}): norm1 goes with the self-attention, "
              f"norm2 with the cross-attention, norm3 with the feed-forward"] = v[f"{mine}_norms_{order}"]
    if tgt_mask is None:
        hints[ALWAYS_CAUSAL.replace("mask=None", "tgt_mask=None")] = v[f"{mine}_always_causal"]
    hints["the cross-attention's queries are the layer's input: take them from the stream after the self-attention "
          "sublayer (the sublayers run one after the other, each on the previous one's result)"] = \
        v[f"{mine}_query_input"]
    if norm_first:
        hints["the cross-attention's queries are not normalized: in pre-norm they are norm2(x), "
              "self.cross_attn(self.norm2(x), memory, memory, memory_mask)"] = v["pre_query_unnormed"]
    else:
        hints["the cross-attention's queries are the self-attention's raw output: take them from the stream after "
              "the residual and norm1, x = norm1(x + SelfAttn(x)), then norm2(x + CrossAttn(x, memory, memory))"] = \
            v["post_query_self_out"]
    if norm_first:
        hints["norm2 is applied to the memory too: in pre-norm only the decoder's stream is normalized, "
              "self.cross_attn(self.norm2(x), memory, memory, memory_mask)"] = v["pre_norm_memory"]
    if tgt_mask is not None:
        hints["tgt_mask is ignored: pass it to the self-attention, self.self_attn(x, x, x, tgt_mask), so that "
              "position t cannot see the target tokens after it"] = v[f"{mine}_no_tgt_mask"]
    if memory_mask is not None:
        hints["memory_mask is ignored: pass it to the cross-attention, self.cross_attn(x, memory, memory, "
              "memory_mask), so that the decoder does not attend to source padding"] = v[f"{mine}_no_memory_mask"]
    return hints


def _run(k, layer, x, memory, tgt_mask, memory_mask, what, seed=None):
    out = k.call(what, layer, x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask, hint=MASK_HINT, seed=seed)
    if isinstance(out, (tuple, list)):
        raise AssertionError(f"{what} returns a {type(out).__name__}: return only the output tensor "
                             f"(B, T, d_model), not attention weights")
    return out


def _cases(b, t, s):
    """Masks: none, causal, causal with source padding, causal & target padding with source padding
    (padding inside the batch and in its longest row)."""
    tgt_pad = padding([t - 1, t - 2, t - 1][:b], t)
    src_pad = padding([s - 1, s - 3, s - 2][:b], s)
    return [("no masks", None, None),
            ("a causal tgt_mask (T, T)", causal(t), None),
            ("a causal tgt_mask and a memory_mask (B, 1, S) for source padding", causal(t), src_pad),
            ("tgt_mask = causal & target padding (B, T, T), memory_mask (B, 1, S)", causal(t) & tgt_pad, src_pad)]


def _equals_torch(k, norm_first, seed):
    g = seeded(seed)
    for d, h, d_ff, t, s in ((16, 4, 32, 5, 7), (12, 3, 20, 6, 4)):
        layer, what = _build(k, d, h, d_ff, norm_first)
        theirs = _torch_layer(d, h, d_ff, norm_first, seed + d)
        problems = k.load(layer, _weights(theirs, d))
        if problems:
            raise AssertionError(f"{what}: the weights cannot be copied in: {'; '.join(problems[:3])}")
        k.call(f"{what}.eval()", layer.attr("eval"))
        b = 3
        x = torch.randn(b, t, d, generator=g) * 2 + 0.5
        memory = torch.randn(b, s, d, generator=g) * 1.5 - 0.3
        for name, tgt_mask, memory_mask in _cases(b, t, s):
            with torch.no_grad():
                expected = theirs(x, memory, tgt_mask=torch_mask(tgt_mask, b, h, t, t),
                                  memory_mask=torch_mask(memory_mask, b, h, t, s))
            v = _variants(theirs, x, memory, tgt_mask, memory_mask, h, norm_first)
            call_what = f"{what}(x {tuple(x.shape)}, memory {tuple(memory.shape)}, {name})"
            out = _run(k, layer, x, memory, tgt_mask, memory_mask, call_what)
            assert_shape(out, x.shape, f"output of {call_what}")
            assert_close(out, expected, f"output of {call_what} (compared with nn.TransformerDecoderLayer, same "
                                        f"weights)", hints=_hints(v, norm_first, tgt_mask, memory_mask))


def DecoderLayer_structure(k):
    """self_attn and cross_attn (two MultiHeadAttention), ff, norm1..3 (three LayerNorms); output (B, T, d)."""
    for norm_first in (False, True):
        for d, h, d_ff in ((16, 4, 32), (12, 3, 20)):
            layer, what = _build(k, d, h, d_ff, norm_first)
            g = seeded(80)
            x, memory = torch.randn(2, 4, d, generator=g), torch.randn(2, 6, d, generator=g)
            k.call(f"{what}.eval()", layer.attr("eval"))
            call_what = f"{what}(x of shape (2, 4, {d}), memory of shape (2, 6, {d}))"
            out = _run(k, layer, x, memory, None, None, call_what)
            assert_shape(out, (2, 4, d), f"output of {call_what}")


def DecoderLayer_post_norm(k):
    """norm_first=False equals nn.TransformerDecoderLayer(norm_first=False), same weights, with masks."""
    _equals_torch(k, False, 81)


def DecoderLayer_pre_norm(k):
    """norm_first=True equals nn.TransformerDecoderLayer(norm_first=True), same weights, with masks."""
    _equals_torch(k, True, 82)


def DecoderLayer_masks(k):
    """Causality (output at t independent of x after t) and source padding invariance; dropout train/eval."""
    g = seeded(83)
    d, h, d_ff, t, s, b = 16, 4, 32, 6, 5, 2
    for norm_first in (False, True):
        layer, what = _build(k, d, h, d_ff, norm_first)
        k.call(f"{what}.eval()", layer.attr("eval"))
        x, memory = torch.randn(b, t, d, generator=g), torch.randn(b, s, d, generator=g)
        mask = causal(t)
        base = _run(k, layer, x, memory, mask, None, f"{what}(x, memory, tgt_mask=causal)")
        for pos in range(t - 1):
            changed = x.clone()
            changed[:, pos + 1:] = torch.randn(b, t - pos - 1, d, generator=g) * 3
            out = _run(k, layer, changed, memory, mask, None, f"{what}(x, memory, tgt_mask=causal)")
            if torch.is_tensor(out) and out.shape == base.shape and not is_close(out[:, :pos + 1], base[:, :pos + 1]):
                raise AssertionError(
                    f"{what} with a causal tgt_mask: changing the target vectors after position {pos} changes the "
                    f"output at position {pos} and before. The decoder must not see the future: pass tgt_mask to "
                    f"the self-attention, and do not use x in the cross-attention's keys and values")
        # padding the memory with junk vectors, masked out, changes nothing
        junk = torch.cat([memory, torch.randn(b, 3, d, generator=g) * 5], dim=1)
        padded = _run(k, layer, x, junk, mask, padding([s, s], s + 3),
                      f"{what}(x, memory padded with 3 junk vectors, memory_mask hiding them)")
        if torch.is_tensor(padded) and padded.shape == base.shape and not is_close(padded, base):
            raise AssertionError(
                f"{what}: padding the memory with 3 extra vectors and hiding them with memory_mask changes the "
                f"output. Pass memory_mask to the cross-attention so that source padding is never attended to")
    layer, what = _build(k, d, h, d_ff, False, dropout=0.3)
    x, memory = torch.randn(b, t, d, generator=g), torch.randn(b, s, d, generator=g)
    k.call(f"{what}.train()", layer.attr("train"))
    first = _run(k, layer, x, memory, None, None, f"{what} in train mode", seed=1)
    second = _run(k, layer, x, memory, None, None, f"{what} in train mode, called again", seed=2)
    if is_close(first, second):
        raise AssertionError(f"{what}: in train mode two calls give the same output. Apply dropout "
                             f"(nn.Dropout(dropout)) to each sublayer's output before the residual addition")
    k.call(f"{what}.eval()", layer.attr("eval"))
    first = _run(k, layer, x, memory, None, None, f"{what} in eval mode", seed=1)
    second = _run(k, layer, x, memory, None, None, f"{what} in eval mode, called again", seed=2)
    if not is_close(first, second):
        raise AssertionError(f"{what}: in eval mode two calls give different outputs, so dropout is still on. "
                             f"Use nn.Dropout modules (or F.dropout(..., training=self.training))")

"""Hidden checks of notebook 08 (the encoder-decoder Transformer).

Each function is one graded test cell. References: ``torch.nn.TransformerDecoderLayer``
(computed outside the student's block) for the decoder layer, and the course's
``lib.decoder`` / ``lib.transformer`` references, run trusted, for the model and
greedy decoding. Each common mistake has a hint that names it: the wrong outputs are
computed here from the trusted parts, with the mistake put in on purpose.

While a graded block runs, PyTorch's fused Transformer and attention operators are
banned at the dispatcher ("transformer", "multi_head", "scaled_dot_product"), and
``nn.Transformer*`` / ``nn.MultiheadAttention`` refuse to run (in training mode they
do not always reach a fused operator). The notebook's earlier exercises are replaced
by the references: ``Transformer`` is graded with a correct ``DecoderLayer``, and
``greedy_decode`` with a correct model.
"""
import contextlib
import math

import torch
import torch.nn.functional as F
from torch import nn

from lib import decoder as ref_decoder
from lib import transformer as ref
from lib.guard import ForbiddenCall, trusted
from lib.testing import assert_close, assert_shape, is_close

from .common import call, linear_problem, seeded, student_code, torch_mask

BANNED = ("transformer", "multi_head", "scaled_dot_product")
REFERENCES = ("DecoderLayer", "Transformer", "greedy_decode", "beam_search")
MASK_HINT = ("Here the target has T positions and the source S != T: check that the self-attention gets x and "
             "tgt_mask (T, T), and the cross-attention gets queries x, keys and values memory, and memory_mask "
             "(B, 1, S); the causal tgt_mask does not belong to the cross-attention")
_BUILTINS = (nn.Transformer, nn.TransformerEncoder, nn.TransformerDecoder, nn.TransformerEncoderLayer,
             nn.TransformerDecoderLayer, nn.MultiheadAttention)


def _builtin_refused(*args, **kwargs):
    raise ForbiddenCall("this exercise asks you to build it yourself: PyTorch's built-in nn.Transformer* and "
                        "nn.MultiheadAttention modules are not allowed here")


@contextlib.contextmanager
def _no_builtins():
    saved = [(cls, cls.forward) for cls in _BUILTINS] + [(F, F.multi_head_attention_forward)]
    for cls in _BUILTINS:
        cls.forward = _builtin_refused
    F.multi_head_attention_forward = _builtin_refused
    try:
        yield
    finally:
        for owner, fn in saved:
            if owner is F:
                F.multi_head_attention_forward = fn
            else:
                owner.forward = fn


@contextlib.contextmanager
def _graded(namespace=None, inject=None):
    with student_code(namespace, inject, ops=BANNED, references=REFERENCES), _no_builtins():
        yield


class _TrustedTransformer(ref.Transformer):
    """The reference model, with encode and decode runnable from graded code."""
    encode = trusted(ref.Transformer.encode)
    decode = trusted(ref.Transformer.decode)
    forward = trusted(ref.Transformer.forward)


def _causal(t):
    return torch.ones(t, t, dtype=torch.bool).tril()


def _padding(lengths, t):
    """(B, 1, T) bool, True for the first lengths[b] positions."""
    return (torch.arange(t)[None, :] < torch.tensor(lengths)[:, None])[:, None, :]


# --- DecoderLayer ------------------------------------------------------------------

def _build_decoder(DecoderLayer, namespace, d, h, d_ff, norm_first, dropout=0.0):
    what = f"DecoderLayer({d}, {h}, {d_ff}, dropout={dropout}, norm_first={norm_first})"
    with _graded(namespace):
        torch.manual_seed(0)
        layer = call(what, DecoderLayer, d, h, d_ff, dropout=dropout, norm_first=norm_first)
    if not isinstance(layer, nn.Module):
        raise AssertionError(f"{what} should be an nn.Module (class DecoderLayer(nn.Module))")
    return layer, what


def _decoder_structure(layer, d, d_ff, what):
    """The first missing or wrong submodule, or None."""
    for name in ("self_attn", "cross_attn"):
        attn = getattr(layer, name, None)
        if attn is None:
            return (f"{what} has no attribute `{name}`: self.{name} = MultiHeadAttention(d_model, n_heads, dropout) "
                    f"(from lib.multi_head)")
        for lin in ("w_q", "w_k", "w_v", "w_o"):
            problem = linear_problem(attn, lin, d, d, f"{what}.{name} (MultiHeadAttention from lib.multi_head)",
                                     bias=True)
            if problem:
                return problem
    if layer.self_attn is layer.cross_attn:
        return (f"{what}.self_attn and .cross_attn are the same module: self-attention and cross-attention need "
                f"their own weights, create two MultiHeadAttention modules")
    ff = getattr(layer, "ff", None)
    if ff is None:
        return f"{what} has no attribute `ff`: self.ff = FeedForward(d_model, d_ff, dropout) (from lib.feed_forward)"
    for name, d_in, d_out in (("linear1", d, d_ff), ("linear2", d_ff, d)):
        problem = linear_problem(ff, name, d_in, d_out, f"{what}.ff (FeedForward from lib.feed_forward)",
                                 bias=True)
        if problem:
            return problem
    norms = []
    for name in ("norm1", "norm2", "norm3"):
        norm = getattr(layer, name, None)
        if norm is None:
            return f"{what} has no attribute `{name}`: self.{name} = LayerNorm(d_model)"
        for p in ("weight", "bias"):
            t = getattr(norm, p, None)
            if not torch.is_tensor(t) or tuple(t.shape) != (d,):
                return f"{what}.{name}.{p} should be a tensor of shape ({d},): is {name} a LayerNorm(d_model)?"
        norms.append(norm)
    if len({id(n) for n in norms}) < 3:
        return f"{what}.norm1, .norm2 and .norm3 must be three different LayerNorms, each with its own weight and bias"
    return None


def _copy_attention(ours, theirs, d):
    with torch.no_grad():
        for i, name in enumerate(("w_q", "w_k", "w_v")):
            getattr(ours, name).weight.copy_(theirs.in_proj_weight[i * d:(i + 1) * d])
            getattr(ours, name).bias.copy_(theirs.in_proj_bias[i * d:(i + 1) * d])
        ours.w_o.weight.copy_(theirs.out_proj.weight)
        ours.w_o.bias.copy_(theirs.out_proj.bias)


def _copy_decoder(ours, theirs, d):
    _copy_attention(ours.self_attn, theirs.self_attn, d)
    _copy_attention(ours.cross_attn, theirs.multihead_attn, d)
    with torch.no_grad():
        for name in ("linear1", "linear2"):
            getattr(ours.ff, name).weight.copy_(getattr(theirs, name).weight)
            getattr(ours.ff, name).bias.copy_(getattr(theirs, name).bias)
        for n in (1, 2, 3):
            getattr(ours, f"norm{n}").weight.copy_(getattr(theirs, f"norm{n}").weight)
            getattr(ours, f"norm{n}").bias.copy_(getattr(theirs, f"norm{n}").bias)


def _torch_decoder(d, h, d_ff, norm_first, seed, dropout=0.0):
    g = seeded(seed)
    theirs = nn.TransformerDecoderLayer(d, h, d_ff, dropout=dropout, batch_first=True, norm_first=norm_first)
    with torch.no_grad():
        for name, p in theirs.named_parameters():
            if name.startswith("norm") and name.endswith("weight"):
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * (0.5 if p.dim() == 1 else p.shape[-1] ** -0.5))
    return theirs.eval()


def _decoder_pair(DecoderLayer, namespace, d, h, d_ff, norm_first, seed, dropout=0.0):
    ours, what = _build_decoder(DecoderLayer, namespace, d, h, d_ff, norm_first, dropout)
    problem = _decoder_structure(ours, d, d_ff, what)
    if problem:
        raise AssertionError(problem)
    theirs = _torch_decoder(d, h, d_ff, norm_first, seed, dropout)
    _copy_decoder(ours, theirs, d)
    return ours, theirs, what


def _decoder_variants(theirs, x, memory, tgt_mask, memory_mask, h, norm_first):
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

    def post(x, sa=sa, ca=ca, n=(n1, n2, n3), res_cross=True, order=("self", "cross")):
        y = x
        for step in order:
            if step == "self":
                y = n[0](y + sa(y))
            else:
                y = n[1](y + ca(y)) if res_cross else n[1](ca(y))
        return n[2](y + ff(y))

    def pre(x, sa=sa, ca=ca, n=(n1, n2, n3), res_cross=True, norm_memory=False, order=("self", "cross")):
        y = x
        for step in order:
            if step == "self":
                y = y + sa(n[0](y))
            else:
                mem = n[1](memory) if norm_memory else memory
                y = (y + ca(n[1](y), mem)) if res_cross else ca(n[1](y), mem)
        return y + ff(n[2](y))

    out = {}
    with torch.no_grad():
        out["post"], out["pre"] = post(x), pre(x)
        name, fn = ("pre", pre) if norm_first else ("post", post)
        if True:
            out[f"{name}_cross_from_x"] = fn(x, ca=lambda y, mem=None: theirs.multihead_attn(
                y, y, y, need_weights=False)[0])
            out[f"{name}_no_tgt_mask"] = fn(x, sa=lambda y: sa(y, None))
            out[f"{name}_no_memory_mask"] = fn(x, ca=lambda y, mem=memory: ca(y, mem, None))
            out[f"{name}_no_cross_residual"] = fn(x, res_cross=False)
            out[f"{name}_norms_swapped"] = fn(x, n=(n1, n3, n2))
            out[f"{name}_order_swapped"] = fn(x, order=("cross", "self"))
        if norm_first:
            out["pre_norm_memory"] = pre(x, norm_memory=True)
            out["pre_no_residual"] = ff(n3(ca(n2(sa(n1(x))))))
        else:
            out["post_no_residual"] = n3(ff(n2(ca(n1(sa(x))))))
    return out


def _decoder_hints(v, norm_first, tgt_mask, memory_mask):
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
        "the LayerNorms are in the wrong order: norm1 goes with the self-attention, norm2 with the "
        "cross-attention, norm3 with the feed-forward": v[f"{mine}_norms_swapped"],
        "the cross-attention comes before the self-attention: the order is masked self-attention, "
        "cross-attention, feed-forward": v[f"{mine}_order_swapped"],
    }
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


def _run_decoder(layer, x, memory, tgt_mask, memory_mask, what, namespace):
    with _graded(namespace):
        out = call(what, layer, x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask, hint=MASK_HINT)
    if isinstance(out, (tuple, list)):
        raise AssertionError(f"{what} returns a {type(out).__name__}: return only the output tensor "
                             f"(B, T, d_model), not attention weights")
    return out


def _decoder_cases(b, t, s):
    causal = _causal(t)
    tgt_pad = _padding([t, t - 2] + [t - 1] * (b - 2), t)[:b]
    src_pad = _padding([s, s - 3] + [s - 1] * (b - 2), s)[:b]
    return [("no masks", None, None),
            ("a causal tgt_mask (T, T)", causal, None),
            ("a causal tgt_mask and a memory_mask (B, 1, S) for source padding", causal, src_pad),
            ("tgt_mask = causal & target padding (B, T, T), memory_mask (B, 1, S)", causal & tgt_pad, src_pad)]


def _decoder_equals_torch(DecoderLayer, namespace, norm_first, seed):
    g = seeded(seed)
    for d, h, d_ff, t, s in ((16, 4, 32, 5, 7), (12, 3, 20, 6, 4)):
        ours, theirs, what = _decoder_pair(DecoderLayer, namespace, d, h, d_ff, norm_first, seed + d)
        ours.eval()
        b = 3
        x = torch.randn(b, t, d, generator=g) * 2 + 0.5
        memory = torch.randn(b, s, d, generator=g) * 1.5 - 0.3
        for name, tgt_mask, memory_mask in _decoder_cases(b, t, s):
            with torch.no_grad():
                expected = theirs(x, memory, tgt_mask=torch_mask(tgt_mask, b, h, t, t),
                                  memory_mask=torch_mask(memory_mask, b, h, t, s))
            v = _decoder_variants(theirs, x, memory, tgt_mask, memory_mask, h, norm_first)
            call_what = f"{what}(x {tuple(x.shape)}, memory {tuple(memory.shape)}, {name})"
            out = _run_decoder(ours, x, memory, tgt_mask, memory_mask, call_what, namespace)
            assert_shape(out, x.shape, f"output of {call_what}")
            assert_close(out, expected, f"output of {call_what} (compared with nn.TransformerDecoderLayer, same "
                                        f"weights)", hints=_decoder_hints(v, norm_first, tgt_mask, memory_mask))


def DecoderLayer_structure(DecoderLayer, namespace):
    """self_attn and cross_attn (two MultiHeadAttention), ff, norm1..3 (three LayerNorms); output (B, T, d)."""
    for norm_first in (False, True):
        for d, h, d_ff in ((16, 4, 32), (12, 3, 20)):
            layer, what = _build_decoder(DecoderLayer, namespace, d, h, d_ff, norm_first)
            problem = _decoder_structure(layer, d, d_ff, what)
            if problem:
                raise AssertionError(problem)
            for name in ("self_attn", "cross_attn"):
                heads = getattr(getattr(layer, name), "n_heads", h)
                if heads != h:
                    raise AssertionError(f"{what}.{name} has {heads} heads, expected {h}")
            g = seeded(80)
            x, memory = torch.randn(2, 4, d, generator=g), torch.randn(2, 6, d, generator=g)
            out = _run_decoder(layer.eval(), x, memory, None, None,
                               f"{what}(x of shape (2, 4, {d}), memory of shape (2, 6, {d}))", namespace)
            assert_shape(out, (2, 4, d), f"output of {what}(x of shape (2, 4, {d}), memory of shape (2, 6, {d}))")


def DecoderLayer_post_norm(DecoderLayer, namespace):
    """norm_first=False equals nn.TransformerDecoderLayer(norm_first=False), same weights, with masks."""
    _decoder_equals_torch(DecoderLayer, namespace, False, 81)


def DecoderLayer_pre_norm(DecoderLayer, namespace):
    """norm_first=True equals nn.TransformerDecoderLayer(norm_first=True), same weights, with masks."""
    _decoder_equals_torch(DecoderLayer, namespace, True, 82)


def DecoderLayer_masks(DecoderLayer, namespace):
    """Causality (output at t independent of x after t) and source padding invariance; dropout train/eval."""
    g = seeded(83)
    d, h, d_ff, t, s, b = 16, 4, 32, 6, 5, 2
    for norm_first in (False, True):
        layer, what = _build_decoder(DecoderLayer, namespace, d, h, d_ff, norm_first)
        problem = _decoder_structure(layer, d, d_ff, what)
        if problem:
            raise AssertionError(problem)
        layer.eval()
        x, memory = torch.randn(b, t, d, generator=g), torch.randn(b, s, d, generator=g)
        causal = _causal(t)
        base = _run_decoder(layer, x, memory, causal, None, f"{what}(x, memory, tgt_mask=causal)", namespace)
        for pos in range(t - 1):
            changed = x.clone()
            changed[:, pos + 1:] = torch.randn(b, t - pos - 1, d, generator=g) * 3
            out = _run_decoder(layer, changed, memory, causal, None, f"{what}(x, memory, tgt_mask=causal)", namespace)
            if torch.is_tensor(out) and out.shape == base.shape and not is_close(out[:, :pos + 1], base[:, :pos + 1]):
                raise AssertionError(
                    f"{what} with a causal tgt_mask: changing the target vectors after position {pos} changes the "
                    f"output at position {pos} and before. The decoder must not see the future: pass tgt_mask to "
                    f"the self-attention, and do not use x in the cross-attention's keys and values")
        # padding the memory with junk vectors, masked out, changes nothing
        junk = torch.cat([memory, torch.randn(b, 3, d, generator=g) * 5], dim=1)
        mask = _padding([s, s], s + 3)
        padded = _run_decoder(layer, x, junk, causal, mask,
                              f"{what}(x, memory padded with 3 junk vectors, memory_mask hiding them)", namespace)
        if torch.is_tensor(padded) and padded.shape == base.shape and not is_close(padded, base):
            raise AssertionError(
                f"{what}: padding the memory with 3 extra vectors and hiding them with memory_mask changes the "
                f"output. Pass memory_mask to the cross-attention so that source padding is never attended to")
    layer, what = _build_decoder(DecoderLayer, namespace, d, h, d_ff, False, dropout=0.3)
    x, memory = torch.randn(b, t, d, generator=g), torch.randn(b, s, d, generator=g)
    layer.train()
    torch.manual_seed(1)
    first = _run_decoder(layer, x, memory, None, None, f"{what} in train mode", namespace)
    second = _run_decoder(layer, x, memory, None, None, f"{what} in train mode, called again", namespace)
    if is_close(first, second):
        raise AssertionError(f"{what}: in train mode two calls give the same output. Apply dropout "
                             f"(nn.Dropout(dropout)) to each sublayer's output before the residual addition")
    layer.eval()
    first = _run_decoder(layer, x, memory, None, None, f"{what} in eval mode", namespace)
    second = _run_decoder(layer, x, memory, None, None, f"{what} in eval mode, called again", namespace)
    if not is_close(first, second):
        raise AssertionError(f"{what}: in eval mode two calls give different outputs, so dropout is still on. "
                             f"Use nn.Dropout modules (or F.dropout(..., training=self.training))")


# --- Transformer ---------------------------------------------------------------------

SIZES = dict(d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.1, max_len=40)


def _build_model(Transformer, namespace, src_vocab, tgt_vocab, pad_id=0, **sizes):
    sizes = {**SIZES, **sizes}
    what = (f"Transformer({src_vocab}, {tgt_vocab}, " + ", ".join(f"{k}={v}" for k, v in sizes.items())
            + f", pad_id={pad_id})")
    with _graded(namespace, {"DecoderLayer": ref_decoder.DecoderLayer}):
        torch.manual_seed(0)
        model = call(what, Transformer, src_vocab, tgt_vocab, pad_id=pad_id, **sizes)
    if not isinstance(model, nn.Module):
        raise AssertionError(f"{what} should be an nn.Module (class Transformer(nn.Module))")
    if isinstance(model, ref.Transformer):
        raise AssertionError(f"{what} is the course's reference Transformer: write your own class")
    return model, what


def _model_structure(model, what, src_vocab, tgt_vocab, d, n_layers, pad_id):
    for name, vocab in (("src_embed", src_vocab), ("tgt_embed", tgt_vocab)):
        emb = getattr(model, name, None)
        if not isinstance(emb, nn.Embedding):
            return f"{what} should have an nn.Embedding `{name}`"
        if tuple(emb.weight.shape) != (vocab, d):
            return f"{what}.{name} has shape {tuple(emb.weight.shape)}, expected ({vocab}, {d}): (vocab size, d_model)"
    if model.src_embed is model.tgt_embed:
        return f"{what}.src_embed and .tgt_embed are the same module: the two languages need their own embeddings"
    if getattr(model, "pad_id", None) != pad_id:
        return f"{what}.pad_id is {getattr(model, 'pad_id', None)!r}: store the pad_id argument, self.pad_id = pad_id"
    if getattr(model, "positions", None) is None:
        return f"{what} has no attribute `positions`: self.positions = SinusoidalPositions(max_len, d_model)"
    for name, needs_cross in (("encoder_layers", False), ("decoder_layers", True)):
        layers = getattr(model, name, None)
        if not isinstance(layers, nn.ModuleList):
            return f"{what}.{name} should be an nn.ModuleList of {n_layers} layers (a Python list hides them from .parameters())"
        if len(layers) != n_layers:
            return f"{what}.{name} has {len(layers)} layers, expected n_layers = {n_layers}"
        if len({id(layer) for layer in layers}) != n_layers:
            return (f"{what}.{name} holds the same layer {n_layers} times ([layer] * n_layers): create a new layer for "
                    f"each position in the stack, so that each has its own weights")
        if needs_cross and not all(hasattr(layer, "cross_attn") for layer in layers):
            return f"{what}.decoder_layers should be DecoderLayers (with cross-attention), not EncoderLayers"
    out = getattr(model, "output", None)
    if not isinstance(out, nn.Linear) or (out.in_features, out.out_features) != (d, tgt_vocab):
        return f"{what} should have an nn.Linear `output` from d_model = {d} to tgt_vocab_size = {tgt_vocab}"
    params = list(model.parameters())
    if len(params) != len({id(p) for p in params}):
        return f"{what} shares parameters between its parts: each layer and embedding needs its own"
    return None


def _reference_model(src_vocab, tgt_vocab, pad_id, seed, **sizes):
    torch.manual_seed(seed)
    model = _TrustedTransformer(src_vocab, tgt_vocab, pad_id=pad_id, **{**SIZES, **sizes})
    with torch.no_grad():   # weights far from the defaults, so that every part shows in the output
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.copy_(torch.rand(p.shape) + 0.5)
            elif "embed" in name:
                p.copy_(torch.randn(p.shape) * p.shape[-1] ** -0.5)
            else:
                p.copy_(torch.randn(p.shape) * (0.3 if p.dim() == 1 else p.shape[-1] ** -0.5))
    return model.eval()


def _load(model, reference, what):
    """Copy the reference's parameters into the student's model (extra buffers of the student's are fine)."""
    try:
        result = model.load_state_dict(reference.state_dict(), strict=False)
    except RuntimeError as e:
        raise AssertionError(f"{what}: the reference's parameters do not fit yours (a size differs). "
                             f"{' '.join(str(e).split())[-300:]}") from None
    params = {name for name, _ in model.named_parameters()}
    extra = [k for k in result.missing_keys if k in params]
    if result.unexpected_keys or extra:
        raise AssertionError(
            f"{what}: the reference's parameters do not fit yours. Use exactly the attributes of the exercise "
            f"(src_embed, tgt_embed, positions, dropout, encoder_layers, decoder_layers, output). "
            + (f"Yours lacks {', '.join(result.unexpected_keys[:4])}. " if result.unexpected_keys else "")
            + (f"Yours has parameters the reference does not: {', '.join(extra[:4])}." if extra else ""))
    return model.eval()


def _ref_forward(m, src, tgt, scale=True, causal=True, tgt_pad=True, src_mask_enc=True, src_mask_dec=True,
                 tgt_positions=True, pad_id=None):
    """The reference forward with one mistake put in on purpose."""
    pad_id = m.pad_id if pad_id is None else pad_id
    factor = math.sqrt(m.d_model) if scale else 1.0
    src_mask = (src != pad_id)[:, None, :]
    t = tgt.shape[1]
    tgt_mask = _causal(t) if causal else torch.ones(t, t, dtype=torch.bool)
    if tgt_pad:
        tgt_mask = tgt_mask & (tgt != pad_id)[:, None, :]
    x = m.positions(m.src_embed(src) * factor)
    for layer in m.encoder_layers:
        x = layer(x, src_mask if src_mask_enc else None)
    y = m.tgt_embed(tgt) * factor
    y = m.positions(y) if tgt_positions else y
    for layer in m.decoder_layers:
        y = layer(y, x, tgt_mask, src_mask if src_mask_dec else None)
    return m.output(y)


def _model_hints(m, src, tgt):
    with torch.no_grad(), _lifted():
        return {
            "the embeddings are not multiplied by sqrt(d_model): embed(tokens) * math.sqrt(d_model), then add "
            "the positions": _ref_forward(m, src, tgt, scale=False),
            "forward does not use a causal mask: the decoder's tgt_mask must be causal_mask(T) (& the target "
            "padding mask), or each position sees the token it must predict": _ref_forward(m, src, tgt, causal=False),
            "the target padding mask is missing: tgt_mask = causal_mask(T) & padding_mask(tgt_in, pad_id)":
                _ref_forward(m, src, tgt, tgt_pad=False),
            "the encoder ignores source padding: pass src_mask = padding_mask(src, pad_id) to every encoder layer":
                _ref_forward(m, src, tgt, src_mask_enc=False),
            "the decoder's cross-attention ignores source padding: pass src_mask to every decoder layer as its "
            "memory_mask": _ref_forward(m, src, tgt, src_mask_dec=False),
            "the target tokens get no position vectors: add the positions to both embeddings":
                _ref_forward(m, src, tgt, tgt_positions=False),
            "the masks are built with pad id 0, not self.pad_id": _ref_forward(m, src, tgt, pad_id=0),
        }


@contextlib.contextmanager
def _lifted():
    from lib.guard import _state
    _state["trusted_depth"] += 1
    try:
        yield
    finally:
        _state["trusted_depth"] -= 1


def _batch(g, b, s, t, src_vocab, tgt_vocab, pad_id, src_lengths, tgt_lengths):
    low = max(pad_id, 2) + 1 if pad_id < 3 else 0
    src = torch.randint(low, src_vocab, (b, s), generator=g)
    tgt = torch.randint(low, tgt_vocab, (b, t), generator=g)
    src[src == pad_id] = pad_id + 1
    tgt[tgt == pad_id] = pad_id + 1
    tgt[:, 0] = 1 if pad_id != 1 else 2          # a bos-like first token: never padding, never id 0
    for row, (ls, lt) in enumerate(zip(src_lengths, tgt_lengths)):
        src[row, ls:] = pad_id
        tgt[row, lt:] = pad_id
    return src, tgt


def _model_call(model, what, fn, *args, namespace):
    with _graded(namespace, {"DecoderLayer": ref_decoder.DecoderLayer}):
        return call(what, fn, *args)


def Transformer_structure(Transformer, namespace):
    """Embeddings, positions, n_layers separate encoder and decoder layers, output layer; pad_id; shapes."""
    for src_vocab, tgt_vocab, n_layers, pad_id in ((11, 13, 2, 0), (9, 7, 3, 4)):
        model, what = _build_model(Transformer, namespace, src_vocab, tgt_vocab, pad_id=pad_id, n_layers=n_layers)
        problem = _model_structure(model, what, src_vocab, tgt_vocab, SIZES["d_model"], n_layers, pad_id)
        if problem:
            raise AssertionError(problem)
        d = SIZES["d_model"]
        std = model.src_embed.weight.detach().std().item()
        if not 0.5 * d ** -0.5 < std < 2 * d ** -0.5:
            raise AssertionError(f"{what}.src_embed starts with standard deviation {std:.3f}; initialize both "
                                 f"embeddings with nn.init.normal_(weight, std=d_model ** -0.5) ({d ** -0.5:.3f}), "
                                 f"so that after the scaling by sqrt(d_model) they match the positions' size")
        g = seeded(90)
        src, tgt = _batch(g, 3, 7, 5, src_vocab, tgt_vocab, pad_id, [7, 5, 6], [5, 5, 3])
        model.eval()
        logits = _model_call(model, f"{what}(src {tuple(src.shape)}, tgt_in {tuple(tgt.shape)})", model, src, tgt,
                             namespace=namespace)
        assert_shape(logits, (3, 5, tgt_vocab), f"{what}(src {tuple(src.shape)}, tgt_in {tuple(tgt.shape)}): logits")


def Transformer_reference(Transformer, namespace):
    """With the reference's weights: forward, encode and decode equal the reference, with padding."""
    g = seeded(91)
    for src_vocab, tgt_vocab, pad_id in ((11, 13, 0), (10, 12, 3)):
        model, what = _build_model(Transformer, namespace, src_vocab, tgt_vocab, pad_id=pad_id)
        problem = _model_structure(model, what, src_vocab, tgt_vocab, SIZES["d_model"], SIZES["n_layers"], pad_id)
        if problem:
            raise AssertionError(problem)
        reference = _reference_model(src_vocab, tgt_vocab, pad_id, 92 + pad_id)
        _load(model, reference, what)
        src, tgt = _batch(g, 3, 8, 6, src_vocab, tgt_vocab, pad_id, [8, 5, 7], [6, 4, 6])
        with torch.no_grad(), _lifted():
            src_mask = (src != pad_id)[:, None, :]
            tgt_mask = _causal(6) & (tgt != pad_id)[:, None, :]
            memory = reference.encode(src, src_mask)
            logits = reference.decode(tgt, memory, src_mask, tgt_mask)
        hints = _model_hints(reference, src, tgt)
        out = _model_call(model, f"{what}(src, tgt_in)", model, src, tgt, namespace=namespace)
        assert_close(out, logits, f"{what}(src, tgt_in) with padded src and tgt_in (compared with the reference "
                                  f"model, same weights)", hints=hints, atol=1e-4)
        out = _model_call(model, f"{what}.encode(src, src_mask)", model.encode, src, src_mask, namespace=namespace)
        assert_close(out, memory, f"{what}.encode(src, src_mask): the memory (B, S, d_model)", atol=1e-4)
        out = _model_call(model, f"{what}.decode(tgt, memory, src_mask, tgt_mask)", model.decode, tgt, memory,
                          src_mask, tgt_mask, namespace=namespace)
        if torch.is_tensor(out) and out.shape == memory.shape[:1] + (6, SIZES["d_model"]):
            raise AssertionError(f"{what}.decode returns the decoder's vectors (B, T, d_model): apply the output "
                                 f"layer and return logits (B, T, tgt_vocab_size)")
        assert_close(out, logits, f"{what}.decode(tgt, memory, src_mask, tgt_mask): the logits", atol=1e-4)


def Transformer_masks(Transformer, namespace):
    """Logits at t do not depend on target tokens after t; source padding (with pad_id) changes nothing."""
    g = seeded(93)
    for pad_id in (0, 5):
        src_vocab, tgt_vocab = 11, 13
        model, what = _build_model(Transformer, namespace, src_vocab, tgt_vocab, pad_id=pad_id)
        problem = _model_structure(model, what, src_vocab, tgt_vocab, SIZES["d_model"], SIZES["n_layers"], pad_id)
        if problem:
            raise AssertionError(problem)
        _load(model, _reference_model(src_vocab, tgt_vocab, pad_id, 94), what)
        src, tgt = _batch(g, 2, 6, 7, src_vocab, tgt_vocab, pad_id, [6, 6], [7, 7])
        base = _model_call(model, f"{what}(src, tgt_in)", model, src, tgt, namespace=namespace)
        assert_shape(base, (2, 7, tgt_vocab), f"{what}(src, tgt_in)")
        for t in range(6):
            changed = tgt.clone()
            changed[:, t + 1:] = (changed[:, t + 1:] + 1 + t) % (tgt_vocab - 6) + 6
            out = _model_call(model, f"{what}(src, tgt_in)", model, src, changed, namespace=namespace)
            if not is_close(out[:, :t + 1], base[:, :t + 1], atol=1e-4):
                raise AssertionError(f"{what}: changing the target tokens after position {t} changes the logits at "
                                     f"position {t}: the decoder sees the future. Use a causal tgt_mask in forward")
        padded = torch.cat([src, torch.full((2, 4), pad_id)], dim=1)
        out = _model_call(model, f"{what}(src padded with 4 pad tokens, tgt_in)", model, padded, tgt,
                          namespace=namespace)
        if not is_close(out, base, atol=1e-4):
            raise AssertionError(
                f"{what}: padding the source with 4 pad tokens (pad_id={pad_id}) changes the logits. Mask the source "
                f"padding with padding_mask(src, self.pad_id) in the encoder and in the cross-attention"
                + (" (is pad_id used, or is 0 hard-coded?)" if pad_id else ""))


# --- greedy_decode ---------------------------------------------------------------------

def _greedy_variant(model, src, max_len, bos, eos, stop=True, pad_after_eos=True, position=-1, keep_bos=False,
                    pad_value=None, mask_pad=None):
    pad = model.pad_id if pad_value is None else pad_value
    with torch.no_grad(), _lifted():
        src_mask = (src != (model.pad_id if mask_pad is None else mask_pad))[:, None, :]
        memory = model.encode(src, src_mask)
        ys = torch.full((src.shape[0], 1), bos, dtype=torch.long)
        done = torch.zeros(src.shape[0], dtype=torch.bool)
        for _ in range(max_len):
            logits = model.decode(ys, memory, src_mask, _causal(ys.shape[1]))
            nxt = logits[:, position].argmax(-1)
            if pad_after_eos:
                nxt = nxt.masked_fill(done, pad)
            ys = torch.cat([ys, nxt[:, None]], dim=1)
            done |= nxt == eos
            if stop and done.all():
                break
    return ys if keep_bos else ys[:, 1:]


class _ScriptedModel(nn.Module):
    """A stand-in translation model whose greedy output is known: sentence b ends with eos after as many tokens
    as its source has real tokens (found through src_mask, so the mask must use model.pad_id); before that, the
    next token depends on the previous one, on the position and on the source; pad and bos are never predicted.
    ``eos`` = "length" (as described), "never" or "always"."""

    def __init__(self, vocab, pad_id, eos_id, seed, eos="length", d=8):
        super().__init__()
        g = seeded(seed)
        self.pad_id, self.eos_id, self.eos = pad_id, eos_id, eos
        self.src_table = nn.Parameter(torch.randn(vocab, d, generator=g))
        self.mix = nn.Parameter(torch.randn(d, vocab, generator=g) * 0.3)
        self.next_table = nn.Parameter(torch.randn(vocab, vocab, generator=g) * 2)
        self.pos_table = nn.Parameter(torch.randn(64, vocab, generator=g))

    def encode(self, src, src_mask):
        return self.src_table[src] * src_mask.transpose(-2, -1)                   # (B, S, d), zero on padding

    def decode(self, tgt, memory, src_mask, tgt_mask):
        b, t = tgt.shape
        logits = (self.next_table[tgt] + self.pos_table[:t] + (memory.sum(1) @ self.mix)[:, None, :])
        logits = logits.detach().clone()
        logits[..., self.pad_id] = -50.0
        logits[..., self.eos_id] = -50.0
        if self.eos == "always":
            logits[..., self.eos_id] = 50.0
        elif self.eos == "length":
            length = src_mask.reshape(b, -1).sum(-1)                               # real source tokens
            ends = torch.arange(t)[None, :] + 1 == length[:, None]                 # position t predicts token t+1
            logits[..., self.eos_id] = torch.where(ends, 50.0, -50.0)
        return logits

    def forward(self, src, tgt_in):
        src_mask = (src != self.pad_id)[:, None, :]
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask, _causal(tgt_in.shape[1]))


def _greedy_model(pad_id, seed, eos_id, eos="length"):
    model = _ScriptedModel(13, pad_id, eos_id, seed, eos).eval()
    model.encode = trusted(model.encode)
    model.decode = trusted(model.decode)
    return model


def _greedy_hints(model, src, max_len, bos, eos):
    hints = {
        "the decoding does not stop when every sentence has produced eos: break out of the loop once all are done":
            _greedy_variant(model, src, max_len, bos, eos, stop=False),
        "sentences that have finished (produced eos) must continue with model.pad_id, not with more predicted "
        "tokens": _greedy_variant(model, src, max_len, bos, eos, pad_after_eos=False),
        "the next token comes from the logits of the first position: take the last one, logits[:, -1]":
            _greedy_variant(model, src, max_len, bos, eos, position=0),
        "the output starts with bos: return the generated tokens only, without the bos you started from":
            _greedy_variant(model, src, max_len, bos, eos, keep_bos=True),
    }
    if model.pad_id != 0:
        hints["finished sentences are padded with 0: pad with model.pad_id"] = \
            _greedy_variant(model, src, max_len, bos, eos, pad_value=0)
        hints["the source padding mask is built with pad id 0: use padding_mask(src, model.pad_id)"] = \
            _greedy_variant(model, src, max_len, bos, eos, mask_pad=0)
        hints["pad id 0 is hard-coded (in the source mask and the padding of finished sentences): use "
              "model.pad_id"] = _greedy_variant(model, src, max_len, bos, eos, pad_value=0, mask_pad=0)
    return hints


def _run_greedy(greedy_decode, model, src, max_len, bos, eos, what):
    with _graded():
        out = call(what, greedy_decode, model, src, max_len, bos, eos)
    if not torch.is_tensor(out):
        raise AssertionError(f"{what} should return a tensor of token ids (B, L), got a {type(out).__name__}")
    return out


def greedy_decode_matches(greedy_decode, namespace):
    """Equals the reference greedy decoding of a (reference) model, sentence lengths varying."""
    g = seeded(95)
    for pad_id, bos, eos in ((0, 1, 2), (4, 1, 2)):
        src, _ = _batch(g, 4, 6, 1, 11, 13, pad_id, [6, 4, 5, 6], [1] * 4)
        model = _greedy_model(pad_id, 96 + pad_id, eos)
        expected = _greedy_variant(model, src, 9, bos, eos)
        what = f"greedy_decode(model, src {tuple(src.shape)}, max_len=9, bos_id={bos}, eos_id={eos})"
        out = _run_greedy(greedy_decode, model, src, 9, bos, eos, what)
        if out.dtype != torch.long:
            raise AssertionError(f"{what} returns dtype {out.dtype}: return token ids, torch.long (int64)")
        assert_close(out, expected, f"{what} (model.pad_id={pad_id})", hints=_greedy_hints(model, src, 9, bos, eos))


def greedy_decode_stops(greedy_decode, namespace):
    """Stops at max_len when no sentence ends; stops at once when all end; works for one sentence."""
    g = seeded(97)
    src, _ = _batch(g, 3, 5, 1, 11, 13, 0, [5, 5, 3], [1] * 3)
    model = _greedy_model(0, 98, 2, eos="never")
    what = "greedy_decode(model that never predicts eos, src (3, 5), max_len=7, bos_id=1, eos_id=2)"
    out = _run_greedy(greedy_decode, model, src, 7, 1, 2, what)
    assert_close(out, _greedy_variant(model, src, 7, 1, 2), what,
                 hints={"the output starts with bos: return the generated tokens only":
                        _greedy_variant(model, src, 7, 1, 2, keep_bos=True)})
    model = _greedy_model(0, 98, 2, eos="always")
    what = "greedy_decode(model that always predicts eos, src (3, 5), max_len=7, bos_id=1, eos_id=2)"
    out = _run_greedy(greedy_decode, model, src, 7, 1, 2, what)
    expected = torch.full((3, 1), 2)
    if out.shape != expected.shape and out.dim() == 2 and out.shape[1] == 7:
        raise AssertionError(f"{what} returns {tuple(out.shape)}, expected (3, 1): stop as soon as every sentence "
                             f"has produced eos, do not always run max_len steps")
    assert_close(out, expected, what, hints={"the output starts with bos: return the generated tokens only":
                                             torch.tensor([[1, 2]] * 3)})
    model = _greedy_model(0, 99, 2)
    single = src[2:3, :3]
    what = "greedy_decode(model, one sentence of 3 tokens (1, 3), max_len=9, bos_id=1, eos_id=2)"
    out = _run_greedy(greedy_decode, model, single, 9, 1, 2, what)
    assert_close(out, _greedy_variant(model, single, 9, 1, 2), what)

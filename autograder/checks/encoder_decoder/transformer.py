"""Transformer(src_vocab_size, tgt_vocab_size, ...): encode, decode, forward; compared with lib.transformer
(same weights), computed here, at the real (non-padding) positions only."""
import math

import torch

from lib import transformer as ref
from lib.testing import assert_close, assert_shape, is_close

from ..common import INVERTED_MASK, load_reference, module, seeded
from . import causal

SIZES = dict(d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.1, max_len=40)


def _trusted(k):
    """The course's DecoderLayer stands in for the student's (exercise 1)."""
    return {"DecoderLayer": k.reference("lib.decoder.DecoderLayer")}


def _build(k, src_vocab, tgt_vocab, pad_id=0, **sizes):
    """The student's model (a handle, in eval mode), its structure checked, and how to name it."""
    sizes = {**SIZES, **sizes}
    what = (f"Transformer({src_vocab}, {tgt_vocab}, " + ", ".join(f"{name}={v}" for name, v in sizes.items())
            + f", pad_id={pad_id})")
    model = k.call(what, k.student("Transformer"), src_vocab, tgt_vocab, pad_id=pad_id, **sizes, inject=_trusted(k),
                   seed=0)
    info = module(k, model, what)
    if info.isa("lib.transformer.Transformer"):
        raise AssertionError(f"{what} is the course's reference Transformer: write your own class")
    problem = _structure(info, what, src_vocab, tgt_vocab, sizes["d_model"], sizes["n_layers"], pad_id)
    if problem:
        raise AssertionError(problem)
    k.call(f"{what}.eval()", model.attr("eval"))
    return model, info, what


def _structure(info, what, src_vocab, tgt_vocab, d, n_layers, pad_id):
    """The first missing or wrong part, or None."""
    for name, vocab in (("src_embed", src_vocab), ("tgt_embed", tgt_vocab)):
        emb = info.children.get(name)
        if emb is None or not emb.isa("torch.nn.modules.sparse.Embedding"):
            return f"{what} should have an nn.Embedding `{name}`"
        shape = tuple(emb.params["weight"].shape) if "weight" in emb.params else None
        if shape != (vocab, d):
            return f"{what}.{name} has shape {shape}, expected ({vocab}, {d}): (vocab size, d_model)"
    if info.children["src_embed"].oid == info.children["tgt_embed"].oid:
        return f"{what}.src_embed and .tgt_embed are the same module: the two languages need their own embeddings"
    if info.attrs.get("pad_id") != pad_id:
        return f"{what}.pad_id is {info.attrs.get('pad_id')!r}: store the pad_id argument, self.pad_id = pad_id"
    if not any("positions" in part for part in (info.children, info.params, info.buffers, info.tensors)):
        return f"{what} has no attribute `positions`: self.positions = SinusoidalPositions(max_len, d_model)"
    for name, needs_cross in (("encoder_layers", False), ("decoder_layers", True)):
        layers = info.children.get(name)
        if layers is None or not layers.isa("torch.nn.modules.container.ModuleList"):
            return (f"{what}.{name} should be an nn.ModuleList of {n_layers} layers (a Python list hides them from "
                    f".parameters())")
        if len(layers.children) != n_layers:
            return f"{what}.{name} has {len(layers.children)} layers, expected n_layers = {n_layers}"
        if len({layer.oid for layer in layers.children.values()}) != n_layers:
            return (f"{what}.{name} holds the same layer {n_layers} times ([layer] * n_layers): create a new layer for "
                    f"each position in the stack, so that each has its own weights")
        if needs_cross and not all("cross_attn" in layer.children for layer in layers.children.values()):
            return f"{what}.decoder_layers should be DecoderLayers (with cross-attention), not EncoderLayers"
    out = info.children.get("output")
    if (out is None or not out.isa("torch.nn.modules.linear.Linear")
            or (out.attrs.get("in_features"), out.attrs.get("out_features")) != (d, tgt_vocab)):
        return f"{what} should have an nn.Linear `output` from d_model = {d} to tgt_vocab_size = {tgt_vocab}"
    return None


def reference_model(src_vocab, tgt_vocab, pad_id, seed, **sizes):
    """The course's model, with weights far from the defaults, so that every part shows in the output."""
    g = seeded(seed)
    with torch.random.fork_rng(devices=[]):
        model = ref.Transformer(src_vocab, tgt_vocab, pad_id=pad_id, **{**SIZES, **sizes})
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)
            elif "embed" in name:
                p.copy_(torch.randn(p.shape, generator=g) * p.shape[-1] ** -0.5)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * (0.3 if p.dim() == 1 else p.shape[-1] ** -0.5))
    return model.eval()


def _load(k, model, info, reference, what):
    """Copy the reference's parameters into the student's model (extra buffers of the student's are fine)."""
    output, embed = info.children.get("output"), info.children.get("tgt_embed")
    if output and embed and "weight" in output.params and "weight" in embed.params \
            and output.params["weight"].oid == embed.params["weight"].oid:
        raise AssertionError(f"{what}: the output layer shares its weight with the target embedding (weight tying, "
                             f"as fairseq's share_decoder_input_output_embed does). This Transformer gives the "
                             f"output layer a weight of its own: nn.Linear(d_model, tgt_vocab_size)")
    load_reference(k, model, info, reference, what,
                   "src_embed, tgt_embed, positions, dropout, encoder_layers, decoder_layers, output")


def batch(g, b, s, t, src_vocab, tgt_vocab, pad_id, src_lengths, tgt_lengths):
    """Token ids (B, S) and (B, T), padded at the end of each row with pad_id; no real token is pad_id, and
    target rows start with a bos-like token."""
    low = max(pad_id, 2) + 1 if pad_id < 3 else 0
    src = torch.randint(low, src_vocab, (b, s), generator=g)
    tgt = torch.randint(low, tgt_vocab, (b, t), generator=g)
    src[src == pad_id] = pad_id + 1
    tgt[tgt == pad_id] = pad_id + 1
    tgt[:, 0] = 1 if pad_id != 1 else 2
    for row, (ls, lt) in enumerate(zip(src_lengths, tgt_lengths)):
        src[row, ls:] = pad_id
        tgt[row, lt:] = pad_id
    return src, tgt


def _forward(m, src, tgt, scale=True, causal_mask=True, tgt_pad=True, src_mask_enc=True, src_mask_dec=True,
             tgt_positions=True, pad_id=None):
    """The reference forward with one mistake put in on purpose."""
    pad_id = m.pad_id if pad_id is None else pad_id
    factor = math.sqrt(m.d_model) if scale else 1.0
    src_mask = (src != pad_id)[:, None, :]
    t = tgt.shape[1]
    tgt_mask = causal(t) if causal_mask else torch.ones(t, t, dtype=torch.bool)
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


def _hints(m, src, tgt):
    with torch.no_grad():
        return {
            "the embeddings are not multiplied by sqrt(d_model): embed(tokens) * math.sqrt(d_model), then add "
            "the positions": _forward(m, src, tgt, scale=False),
            "forward does not use a causal mask: the decoder's tgt_mask must be causal_mask(T) (the target padding "
            "mask may be added with &), or each position sees the token it must predict":
                _forward(m, src, tgt, causal_mask=False),
            "the encoder ignores source padding: pass src_mask = padding_mask(src, pad_id) to every encoder layer":
                _forward(m, src, tgt, src_mask_enc=False),
            "the decoder's cross-attention ignores source padding: pass src_mask to every decoder layer as its "
            "memory_mask": _forward(m, src, tgt, src_mask_dec=False),
            "the target tokens get no position vectors: add the positions to both embeddings":
                _forward(m, src, tgt, tgt_positions=False),
            "the masks are built with pad id 0, not self.pad_id": _forward(m, src, tgt, pad_id=0),
        }


def _real(value, mask):
    """The rows of ``value`` at the real positions (``mask`` (B, T) True); anything else is returned as is,
    for the shape check to explain."""
    if torch.is_tensor(value) and value.shape[:2] == mask.shape:
        return value[mask]
    return value


def Transformer_structure(k):
    """Embeddings, positions, n_layers separate encoder and decoder layers, output layer; pad_id; shapes."""
    for src_vocab, tgt_vocab, n_layers, pad_id in ((11, 13, 2, 0), (9, 7, 3, 4)):
        model, _, what = _build(k, src_vocab, tgt_vocab, pad_id=pad_id, n_layers=n_layers)
        d = SIZES["d_model"]
        std = k.get(model.attr("src_embed.weight")).std().item()
        if not 0.5 * d ** -0.5 < std < 2 * d ** -0.5:
            raise AssertionError(f"{what}.src_embed starts with standard deviation {std:.3f}; initialize both "
                                 f"embeddings with nn.init.normal_(weight, std=d_model ** -0.5) ({d ** -0.5:.3f}), "
                                 f"so that after the scaling by sqrt(d_model) they match the positions' size")
        g = seeded(90)
        src, tgt = batch(g, 3, 7, 5, src_vocab, tgt_vocab, pad_id, [7, 5, 6], [5, 5, 3])
        call_what = f"{what}(src {tuple(src.shape)}, tgt_in {tuple(tgt.shape)})"
        logits = k.call(call_what, model, src, tgt, inject=_trusted(k))
        assert_shape(logits, (3, 5, tgt_vocab), f"{call_what}: logits")
    # with large vocabularies the embeddings' spread is measured closely: an initialisation that depends on the
    # vocabulary size (xavier_uniform_, as The Annotated Transformer gives every matrix) shows there
    model, _, what = _build(k, 2000, 1500, pad_id=0, n_layers=1)
    d = SIZES["d_model"]
    for name in ("src_embed", "tgt_embed"):
        std = k.get(model.attr(f"{name}.weight")).std().item()
        if not 0.8 * d ** -0.5 < std < 1.25 * d ** -0.5:
            raise AssertionError(f"{what}.{name} starts with standard deviation {std:.4f}, expected about "
                                 f"{d ** -0.5:.3f}: initialize both embeddings with nn.init.normal_(weight, "
                                 f"std=d_model ** -0.5), whatever the vocabulary size (xavier_uniform_ and "
                                 f"PyTorch's default N(0, 1) depend on it or ignore d_model)")


def Transformer_reference(k):
    """With the reference's weights: forward, encode and decode equal the reference at the real positions,
    with padding inside the batch and in its longest row, with pad_id 0 and 3."""
    g = seeded(91)
    cases = ((11, 13, 0, [8, 5, 7], [6, 4, 5]), (10, 12, 3, [6, 4, 7], [5, 3, 4]))
    for src_vocab, tgt_vocab, pad_id, src_lengths, tgt_lengths in cases:
        model, info, what = _build(k, src_vocab, tgt_vocab, pad_id=pad_id)
        reference = reference_model(src_vocab, tgt_vocab, pad_id, 92 + pad_id)
        _load(k, model, info, reference, what)
        src, tgt = batch(g, 3, 8, 6, src_vocab, tgt_vocab, pad_id, src_lengths, tgt_lengths)
        src_real, tgt_real = src != pad_id, tgt != pad_id
        src_mask = src_real[:, None, :]
        tgt_mask = causal(6) & tgt_real[:, None, :]
        with torch.no_grad():
            memory = reference.encode(src, src_mask)
            logits = reference.decode(tgt, memory, src_mask, tgt_mask)
        hints = {message: wrong[tgt_real] for message, wrong in _hints(reference, src, tgt).items()}
        hints["the logits are normalised (log_softmax, as The Annotated Transformer's Generator does, or softmax): "
              "return the output layer's values as they are; the loss (cross_entropy) normalises them itself"] = \
            logits.log_softmax(-1)[tgt_real]
        hints["the logits are normalised with softmax: return the output layer's values as they are"] = \
            logits.softmax(-1)[tgt_real]
        real = "at the real (non-padding) target positions"

        out = k.call(f"{what}(src, tgt_in)", model, src, tgt, inject=_trusted(k))
        assert_shape(out, logits.shape, f"{what}(src, tgt_in): logits")
        if not torch.isfinite(_real(out, tgt_real)).all():
            raise AssertionError(f"{what}(src, tgt_in) with padded src and tgt_in gives NaN or inf {real}: some query "
                                 f"has every key masked (0/0 weights). Perhaps {INVERTED_MASK}: build the masks with "
                                 f"padding_mask and causal_mask as they are")
        assert_close(_real(out, tgt_real), logits[tgt_real], f"{what}(src, tgt_in) with padded src and tgt_in, "
                     f"{real} (compared with the reference model, same weights)", hints=hints, atol=1e-4)

        out = k.call(f"{what}.encode(src, src_mask)", model.attr("encode"), src, src_mask, inject=_trusted(k))
        assert_shape(out, memory.shape, f"{what}.encode(src, src_mask): the memory")
        assert_close(_real(out, src_real), memory[src_real],
                     f"{what}.encode(src, src_mask): the memory (B, S, d_model) at the real source positions",
                     atol=1e-4)

        out = k.call(f"{what}.decode(tgt, memory, src_mask, tgt_mask)", model.attr("decode"), tgt, memory,
                     src_mask, tgt_mask, inject=_trusted(k))
        if torch.is_tensor(out) and out.shape == memory.shape[:1] + (6, SIZES["d_model"]):
            raise AssertionError(f"{what}.decode returns the decoder's vectors (B, T, d_model): apply the output "
                                 f"layer and return logits (B, T, tgt_vocab_size)")
        assert_shape(out, logits.shape, f"{what}.decode(tgt, memory, src_mask, tgt_mask): the logits")
        assert_close(_real(out, tgt_real), logits[tgt_real],
                     f"{what}.decode(tgt, memory, src_mask, tgt_mask): the logits {real}", atol=1e-4)


def Transformer_masks(k):
    """Logits at t do not depend on target tokens after t; source padding (with pad_id) changes nothing."""
    g = seeded(93)
    for pad_id in (0, 5):
        src_vocab, tgt_vocab = 11, 13
        model, info, what = _build(k, src_vocab, tgt_vocab, pad_id=pad_id)
        _load(k, model, info, reference_model(src_vocab, tgt_vocab, pad_id, 94), what)
        src, tgt = batch(g, 2, 6, 7, src_vocab, tgt_vocab, pad_id, [6, 6], [7, 7])
        base = k.call(f"{what}(src, tgt_in)", model, src, tgt, inject=_trusted(k))
        assert_shape(base, (2, 7, tgt_vocab), f"{what}(src, tgt_in)")
        for t in range(6):
            changed = tgt.clone()
            changed[:, t + 1:] = (changed[:, t + 1:] + 1 + t) % (tgt_vocab - 6) + 6
            out = k.call(f"{what}(src, tgt_in)", model, src, changed, inject=_trusted(k))
            assert_shape(out, base.shape, f"{what}(src, tgt_in)")
            if not is_close(out[:, :t + 1], base[:, :t + 1], atol=1e-4):
                raise AssertionError(f"{what}: changing the target tokens after position {t} changes the logits at "
                                     f"position {t}: the decoder sees the future. Use a causal tgt_mask in forward")
        padded = torch.cat([src, torch.full((2, 4), pad_id)], dim=1)
        out = k.call(f"{what}(src padded with 4 pad tokens, tgt_in)", model, padded, tgt, inject=_trusted(k))
        if not is_close(out, base, atol=1e-4):
            raise AssertionError(
                f"{what}: padding the source with 4 pad tokens (pad_id={pad_id}) changes the logits. Mask the source "
                f"padding with padding_mask(src, self.pad_id) in the encoder and in the cross-attention"
                + (" (is pad_id used, or is 0 hard-coded?)" if pad_id else ""))

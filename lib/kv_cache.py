"""Reference solution of notebook 09: greedy decoding with a key/value cache.

``greedy_decode`` (notebook 08) runs the whole decoder on all t tokens so far at
every step, although only the newest position's output is used, and the keys and
values of the earlier tokens are the same as at the step before (the causal mask
means an earlier token never sees a later one). With a cache, step t runs the
decoder on the newest token only:

- self-attention: project the new token to its key and value, append them to the
  layer's cache, and let its query attend to all cached keys (no mask needed: the
  cache holds the past and the present only);
- cross-attention: the keys and values of the encoder memory are the same at every
  step, so they are computed once, before the first step.

The work of a step then grows with t (one query against t keys) instead of t * t.
Works on the course's ``Transformer`` (lib.transformer), through its parts: the
embeddings, ``positions``, the ``DecoderLayer``s' attention modules (``w_q``,
``w_k``, ``w_v``, ``w_o``, ``n_heads``), feed-forward and norms, and ``output``.
"""
import math

import torch

from lib.guard import reference
from lib.masking import padding_mask
from lib.multi_head import merge_heads, split_heads
from lib.self_attention import scaled_dot_product_attention


class LayerCache:
    """What one decoder layer keeps between steps, heads split: (B, h, T, d/h).

    keys, values: the self-attention's, of the tokens so far, one position per step
    (room for ``max_len``); memory_keys, memory_values: the cross-attention's, of the
    encoder memory (B, S, d_model), computed once.
    """

    def __init__(self, layer, memory, max_len: int):
        b, _, d = memory.shape
        heads = layer.self_attn.n_heads
        self.keys = memory.new_empty(b, heads, max_len, d // heads)
        self.values = memory.new_empty(b, heads, max_len, d // heads)
        self.length = 0
        cross = layer.cross_attn
        self.memory_keys = split_heads(cross.w_k(memory), cross.n_heads)
        self.memory_values = split_heads(cross.w_v(memory), cross.n_heads)

    def append(self, attn, x):
        """Add the key and value of x (B, 1, d_model); return all keys and values so far (B, h, t+1, d/h)."""
        t = self.length
        self.keys[:, :, t:t + 1] = split_heads(attn.w_k(x), attn.n_heads)
        self.values[:, :, t:t + 1] = split_heads(attn.w_v(x), attn.n_heads)
        self.length = t + 1
        return self.keys[:, :, :t + 1], self.values[:, :, :t + 1]


def attend(attn, query, keys, values, mask=None):
    """Multi-head attention ``attn`` for query (B, T_q, d_model) on keys and values already projected
    and split into heads (B, h, T_k, d/h); mask broadcastable to (B, h, T_q, T_k). -> (B, T_q, d_model)."""
    q = split_heads(attn.w_q(query), attn.n_heads)
    out, _ = scaled_dot_product_attention(q, keys, values, mask)
    return attn.w_o(merge_heads(out))


def decoder_layer_step(layer, x, cache: LayerCache, memory_mask):
    """A ``DecoderLayer`` (eval mode) on the newest token only: x (B, 1, d_model) -> (B, 1, d_model).
    memory_mask: bool (B, 1, 1, S), True = a real source token."""
    def self_attention(y):
        return attend(layer.self_attn, y, *cache.append(layer.self_attn, y))

    def cross_attention(y):
        return attend(layer.cross_attn, y, cache.memory_keys, cache.memory_values, memory_mask)

    if layer.norm_first:
        x = x + self_attention(layer.norm1(x))
        x = x + cross_attention(layer.norm2(x))
        return x + layer.ff(layer.norm3(x))
    x = layer.norm1(x + self_attention(x))
    x = layer.norm2(x + cross_attention(x))
    return layer.norm3(x + layer.ff(x))


def position_vectors(model, n: int, like: torch.Tensor) -> torch.Tensor:
    """(n, d_model): what ``model.positions`` adds at positions 0 ... n-1 (read out by adding them to zeros)."""
    return model.positions(like.new_zeros(1, n, model.d_model))[0]


@reference
@torch.no_grad()
def greedy_decode_cached(model, src, max_len, bos_id, eos_id):
    """``greedy_decode`` with a key/value cache: the same ids (B, L), L <= max_len, without bos,
    eos then model.pad_id; each step runs the decoder on the newest token only.
    Put the model in eval mode first.
    """
    src_mask = padding_mask(src, model.pad_id)                                   # (B, 1, S)
    memory = model.encode(src, src_mask)                                         # (B, S, d_model)
    caches = [LayerCache(layer, memory, max_len) for layer in model.decoder_layers]
    memory_mask = src_mask.unsqueeze(1)                                          # (B, 1, 1, S): every head
    positions = position_vectors(model, min(max_len, getattr(model.positions, "max_len", max_len)), memory)
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for t in range(max_len):
        if t == len(positions):   # longer than the model's position table: let it raise its own error
            position_vectors(model, t + 1, memory)
        x = model.tgt_embed(ys[:, -1:]) * math.sqrt(model.d_model) + positions[t]   # (B, 1, d_model)
        for layer, cache in zip(model.decoder_layers, caches):
            x = decoder_layer_step(layer, x, cache, memory_mask)
        next_token = model.output(x)[:, -1].argmax(-1).masked_fill(done, model.pad_id)
        ys = torch.cat([ys, next_token[:, None]], dim=1)
        done |= next_token == eos_id
        if done.all():
            break
    return ys[:, 1:]

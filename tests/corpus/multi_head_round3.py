"""Held-out set 3 (round 3), notebook 05: split_heads, merge_heads, MultiHeadAttention."""
from . import Port

ASSIGNMENT = "05_multi_head"

PORTS = [
    # --- split_heads ---------------------------------------------------------------------------------------
    Port("MLX nn.MultiHeadAttention head split: mx.unflatten(x, -1, (num_heads, -1)).transpose(0, 2, 1, 3)",
         "ml-explore/mlx python/mlx/nn/layers/transformer.py, MultiHeadAttention.__call__: queries = "
         "mx.unflatten(queries, -1, (num_heads, -1)).transpose(0, 2, 1, 3) (a transpose with all four axes "
         "named, for (B, L, D) inputs)",
         "split_heads", '''
def split_heads(x, n_heads):
    num_heads = n_heads
    return x.unflatten(-1, (num_heads, -1)).permute(0, 2, 1, 3)
''', breach="the transpose names all four axes of (B, L, h, d) (MLX's transpose(0, 2, 1, 3)), so inputs with "
            "other leading dimensions than one batch axis fail",
         names=("leading", "dimensions", "(a, b, t, d)", "any number", "rank", "4-d", "5-d")),

    # --- merge_heads ---------------------------------------------------------------------------------------
    Port("Haiku MultiHeadAttention: jnp.reshape(attn, (*leading_dims, sequence_length, -1))",
         "google-deepmind/dm-haiku haiku/_src/attention.py, MultiHeadAttention.__call__: attn = "
         "jnp.einsum('...htT,...Thd->...thd', attn_weights, value_heads) (heads after the positions); attn = "
         "jnp.reshape(attn, (*leading_dims, sequence_length, -1)) (the course's heads come as [..., h, T, d], so "
         "they are first moved behind the positions, where Haiku's einsum puts them)",
         "merge_heads", '''
def merge_heads(x):
    attn = x.movedim(-3, -2)                                   # [..., T, H, V], Haiku's layout
    *leading_dims, sequence_length, _, _ = attn.shape
    return attn.reshape((*leading_dims, sequence_length, -1))  # [..., T, H*V]
'''),

    # --- MultiHeadAttention --------------------------------------------------------------------------------
    Port("PaddlePaddle nn.MultiHeadAttention (bool mask -> (mask - 1) * 1e9 added; F.dropout on the weights)",
         "PaddlePaddle/Paddle python/paddle/nn/layer/transformer.py: _convert_attention_mask turns a bool/int "
         "mask into (paddle.cast(attn_mask, dtype) - 1.0) * 1e9; MultiHeadAttention.forward: product = "
         "matmul(q * head_dim ** -0.5, k, transpose_y=True); product = product + attn_mask; weights = "
         "F.softmax(product); weights = F.dropout(weights, self.dropout, training=self.training, "
         "mode='upscale_in_train'); out = matmul(weights, v); transpose and reshape; out_proj; returns the "
         "weights with need_weights (assert on divisibility raised as ValueError; a 3-D mask given its head axis, "
         "as the course asks, since Paddle expects masks that broadcast to [B, h, T, T])",
         "MultiHeadAttention", '''
import torch
import torch.nn.functional as F
from torch import nn


def _convert_attention_mask(attn_mask, dtype):
    if attn_mask is not None and attn_mask.dtype != dtype:
        if attn_mask.dtype == torch.bool or not attn_mask.is_floating_point():
            attn_mask = (attn_mask.to(dtype) - 1.0) * 1e9
        else:
            attn_mask = attn_mask.to(dtype)
    return attn_mask


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        self.embed_dim = d_model
        self.num_heads = n_heads
        self.n_heads = n_heads
        self.dropout = dropout
        self.head_dim = d_model // n_heads
        if self.head_dim * n_heads != d_model:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key, value, mask=None):
        q = split_heads(self.w_q(query), self.num_heads)
        k = split_heads(self.w_k(key), self.num_heads)
        v = split_heads(self.w_v(value), self.num_heads)
        # scale dot product attention
        product = torch.matmul(q * (self.head_dim ** -0.5), k.transpose(-2, -1))
        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)
            attn_mask = _convert_attention_mask(mask, product.dtype)
            product = product + attn_mask
        weights = F.softmax(product, dim=-1)
        if self.dropout:
            weights = F.dropout(weights, self.dropout, training=self.training)
        out = torch.matmul(weights, v)
        # combine heads
        out = merge_heads(out)
        # project to output
        out = self.w_o(out)
        return out, weights
'''),

    Port("MLX nn.MultiHeadAttention (no dropout at all)",
         "ml-explore/mlx python/mlx/nn/layers/transformer.py, MultiHeadAttention(dims, num_heads, ..., bias=False): "
         "query_proj, key_proj, value_proj, out_proj; __call__: heads split, output = "
         "mx.fast.scaled_dot_product_attention(queries, keys, values, scale=sqrt(1 / head_dim), mask=mask), heads "
         "merged, out_proj; the layer has no dropout (the course's bias argument passed to the four projections; "
         "the weights computed by the course's attention; a 3-D mask given its head axis)",
         "MultiHeadAttention", '''
import math
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if (d_model % n_heads) != 0:
            raise ValueError("The input feature dimensions should be divisible by the "
                             f"number of heads ({d_model} % {n_heads}) != 0")
        self.num_heads = n_heads
        self.n_heads = n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key, value, mask=None):
        queries = self.w_q(query)
        keys = self.w_k(key)
        values = self.w_v(value)
        num_heads = self.num_heads
        queries = split_heads(queries, num_heads)
        keys = split_heads(keys, num_heads)
        values = split_heads(values, num_heads)
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)
        output, weights = scaled_dot_product_attention(queries, keys, values, mask)
        output = merge_heads(output)
        return self.w_o(output), weights
''', breach="no dropout on the attention weights: MLX's MultiHeadAttention has none, so `dropout` is accepted and "
            "ignored",
         names=("dropout",)),

    Port("Sockeye MultiHeadAttention (every projection bias=False; masks with True = masked out)",
         "awslabs/sockeye sockeye/layers.py: MultiHeadAttention.ff_q, ff_kv and MultiHeadAttentionBase.ff_out are "
         "pt.nn.Linear(..., bias=False); interleaved_matmul_encdec_qk scales q by head_dim ** -0.5; "
         "DotAttentionCell: logits.masked_fill(mask, -C.LARGE_VALUES[logits.dtype]) with True = masked out; probs "
         "= F.softmax(logits, dim=-1); probs = self.dropout(probs); bmm with the values (ff_kv split into w_k, w_v; "
         "the course's mask inverted on entry and given a head axis; the bias argument has nothing to act on)",
         "MultiHeadAttention", '''
import torch
import torch.nn.functional as F
from torch import nn

LARGE_POSITIVE_VALUE = 99999999.
LARGE_VALUES = {torch.bfloat16: LARGE_POSITIVE_VALUE, torch.float16: 49152.0, torch.float32: LARGE_POSITIVE_VALUE}


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError("Number of heads (%d) must divide attention depth (%d)" % (n_heads, d_model))
        self.depth = d_model
        self.heads = n_heads
        self.n_heads = n_heads
        self.depth_per_head = d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, d_model, bias=False)
        self.w_v = nn.Linear(d_model, d_model, bias=False)
        self.w_o = nn.Linear(d_model, d_model, bias=False)
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        q = split_heads(self.w_q(query), self.heads) * self.depth_per_head ** -0.5
        k = split_heads(self.w_k(key), self.heads)
        v = split_heads(self.w_v(value), self.heads)
        logits = torch.matmul(q, k.transpose(-2, -1))
        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)
            logits = logits.masked_fill(~mask, -LARGE_VALUES[logits.dtype])
        probs = F.softmax(logits, dim=-1)
        contexts = torch.matmul(self.dropout(probs), v)
        return self.w_o(merge_heads(contexts)), probs
''', breach="the four projections are always bias-free (Sockeye's bias=False), whatever `bias` asks",
         names=("bias",)),
]

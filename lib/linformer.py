"""Reference solution of notebook 09: Linformer self-attention (Wang et al., 2020).

Full attention compares every query with every key: a (T, T) matrix of scores.
Linformer first mixes the T keys into k << T "summary" keys, and the T values into
k summary values, with two learned (k, T) matrices E and F applied along the
sequence axis:

    K' = E K  (k, d),   V' = F V  (k, d),   out = softmax(Q K'^T / sqrt(d)) V'  (T, d)

so the scores are (T, k): the cost grows like T * k instead of T * T. The price:
the sequence length is fixed when the layer is made (E and F have T columns).
"""
import math

import torch
from torch import nn

from lib.guard import reference
from lib.self_attention import scaled_dot_product_attention


@reference
class LinformerSelfAttention(nn.Module):
    """Single-head self-attention with keys and values projected to k positions.

    x: (B, T, d_model) with T == seq_len -> (out (B, T, d_model), weights (B, T, k)).
    Bias-free projections w_q, w_k, w_v (d_model -> d_model); E, F: parameters (k, seq_len).
    """

    def __init__(self, d_model: int, seq_len: int, k: int):
        super().__init__()
        self.seq_len, self.k = seq_len, k
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, d_model, bias=False)
        self.w_v = nn.Linear(d_model, d_model, bias=False)
        # N(0, 1/k): a random projection that keeps lengths on average (the paper's starting point)
        self.E = nn.Parameter(torch.randn(k, seq_len) / math.sqrt(k))
        self.F = nn.Parameter(torch.randn(k, seq_len) / math.sqrt(k))

    def forward(self, x):
        if x.shape[-2] != self.seq_len:
            raise ValueError(f"this layer was made for sequences of {self.seq_len} tokens, got {x.shape[-2]}")
        q, key, v = self.w_q(x), self.w_k(x), self.w_v(x)              # (B, T, d)
        key, v = self.E @ key, self.F @ v                              # (k, T) @ (B, T, d) -> (B, k, d)
        return scaled_dot_product_attention(q, key, v)                 # (B, T, d), weights (B, T, k)

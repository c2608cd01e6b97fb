"""Reference solutions of notebook 01: attention from tensor operations.

Shapes are batch-first; ``...`` stands for any number of leading dims.
"""
import math

import torch
from torch import nn

from lib.guard import reference


@reference
def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """exp(x) / sum(exp(x)) along ``dim``, shifted by the max so exp never overflows."""
    shifted = x - x.amax(dim=dim, keepdim=True)
    e = shifted.exp()
    return e / e.sum(dim=dim, keepdim=True)


@reference
def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention softmax(X X^T) X.  x: (..., T, d) -> (..., T, d)."""
    weights = softmax(x @ x.transpose(-2, -1), dim=-1)
    return weights @ x


@reference
def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v.

    q: (..., T_q, d_k), k: (..., T_k, d_k), v: (..., T_k, d_v)
    mask: bool, broadcastable to (..., T_q, T_k), True = may attend.
    Returns (out (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = softmax(scores, dim=-1)
    return weights @ v, weights


@reference
class SelfAttention(nn.Module):
    """One attention head: queries, keys and values are learned projections of x.

    x: (B, T, d_model) -> out (B, T, d_k), weights (B, T, T).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        d_k = d_model if d_k is None else d_k
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_k, bias=False)

    def forward(self, x, mask=None):
        return scaled_dot_product_attention(self.w_q(x), self.w_k(x), self.w_v(x), mask)

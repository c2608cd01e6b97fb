"""Reference solutions of notebook 05: multi-head attention by reshaping."""
import torch
from torch import nn

from lib.guard import reference
from lib.self_attention import scaled_dot_product_attention


@reference
def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, d) -> (B, h, T, d/h): head i gets features i*d/h ... (i+1)*d/h - 1."""
    if x.shape[-1] % n_heads:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by n_heads={n_heads}")
    return x.unflatten(-1, (n_heads, -1)).transpose(-3, -2)


@reference
def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, h, T, d/h) -> (B, T, d): the inverse of split_heads."""
    return x.transpose(-3, -2).flatten(-2)


@reference
class MultiHeadAttention(nn.Module):
    """h attention heads of size d_model/h computed at once, then mixed by w_o.

    query (B, T_q, d), key and value (B, T_k, d), mask bool broadcastable to
    (B, T_q, T_k) or (B, h, T_q, T_k), True = may attend.
    Returns out (B, T_q, d) and weights (B, h, T_q, T_k) (before dropout).
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_heads = n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        q = split_heads(self.w_q(query), self.n_heads)
        k = split_heads(self.w_k(key), self.n_heads)
        v = split_heads(self.w_v(value), self.n_heads)
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)  # (B, T_q, T_k) -> (B, 1, T_q, T_k): the same mask for every head
        out, weights = scaled_dot_product_attention(q, k, v, mask)
        if self.training and self.dropout.p > 0:
            out = self.dropout(weights) @ v
        return self.w_o(merge_heads(out)), weights

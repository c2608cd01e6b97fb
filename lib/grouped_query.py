"""Reference solution of notebook 11: grouped-query attention (GQA).

Multi-head attention (notebook 05) gives every query head its own key and value head. GQA
keeps n_heads query heads but only n_kv_heads key/value heads: consecutive query heads,
n_heads // n_kv_heads of them, share one. The key/value cache of decoding shrinks by that
factor. n_kv_heads = n_heads is multi-head attention; n_kv_heads = 1 is multi-query attention.
"""
from torch import nn

from lib.guard import reference
from lib.multi_head import merge_heads, split_heads
from lib.self_attention import scaled_dot_product_attention


@reference
class GroupedQueryAttention(nn.Module):
    """n_heads query heads of size d_model / n_heads sharing n_kv_heads key/value heads.

    query (B, T_q, d_model), key and value (B, T_k, d_model); mask bool, (T_q, T_k), (B, 1, T_k),
    (B, T_q, T_k), (B, 1, T_q, T_k) or (B, n_heads, T_q, T_k), True = may attend.
    Returns out (B, T_q, d_model) and weights (B, n_heads, T_q, T_k) (before dropout).
    Query head j uses key/value head j // (n_heads // n_kv_heads).
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, dropout: float = 0.0):
        super().__init__()
        if n_heads < 1 or d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        if n_kv_heads < 1 or n_heads % n_kv_heads:
            raise ValueError(f"n_heads={n_heads} is not divisible by n_kv_heads={n_kv_heads}")
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        d_head = d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, n_kv_heads * d_head)
        self.w_v = nn.Linear(d_model, n_kv_heads * d_head)
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        group = self.n_heads // self.n_kv_heads
        q = split_heads(self.w_q(query), self.n_heads)                                    # (B, h, T_q, d_head)
        k = split_heads(self.w_k(key), self.n_kv_heads).repeat_interleave(group, dim=-3)   # (B, h, T_k, d_head)
        v = split_heads(self.w_v(value), self.n_kv_heads).repeat_interleave(group, dim=-3)
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)  # (B, T_q, T_k) -> (B, 1, T_q, T_k): the same mask for every head
        out, weights = scaled_dot_product_attention(q, k, v, mask)
        if self.training and self.dropout.p > 0:
            out = self.dropout(weights) @ v
        return self.w_o(merge_heads(out)), weights

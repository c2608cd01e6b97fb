"""Reference solutions of notebook 11: exact attention, one block of keys at a time (FlashAttention's forward pass).

A softmax needs the maximum and the sum of a whole row; the online softmax keeps both as
running statistics and corrects them when a later block brings a larger maximum. With that,
attention can walk over the keys and values in blocks of ``block`` columns and never hold
more than a (T_q, block) slice of the score matrix, yet give the same output as full attention.
"""
import math

import torch

from lib.guard import reference

NEG_INF = float("-inf")


def _finite_or_zero(m: torch.Tensor) -> torch.Tensor:
    """m with -inf replaced by 0: exp(x - m) then stays 0 (not NaN) where x = m = -inf."""
    return m.masked_fill(m == NEG_INF, 0.0)


@reference
def online_softmax_merge(m1, s1, m2, s2):
    """Softmax statistics of two blocks of a row, combined.

    m1, s1: the maximum and sum(exp(x - m1)) of one block; m2, s2 of another (any shape, all alike).
    Returns (m, s) of the two blocks together: m = max(m1, m2), s = s1 exp(m1 - m) + s2 exp(m2 - m).
    An empty block (m = -inf, s = 0) changes nothing; two of them give (-inf, 0).
    """
    m = torch.maximum(m1, m2)
    safe = _finite_or_zero(m)
    return m, s1 * torch.exp(m1 - safe) + s2 * torch.exp(m2 - safe)


@reference
def tiled_attention(q, k, v, mask=None, block: int = 64):
    """softmax(q k^T / sqrt(d_k)) v computed over blocks of ``block`` keys, with an online softmax.

    q: (..., T_q, d_k), k: (..., T_k, d_k), v: (..., T_k, d_v); mask: bool broadcastable to
    (..., T_q, T_k), True = may attend. Returns out (..., T_q, d_v); a query with no key to
    attend gets 0. No score tensor larger than (..., T_q, block) is ever made.
    """
    t_q, t_k = q.shape[-2], k.shape[-2]
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    m = q.new_full((*lead, t_q, 1), NEG_INF)           # running maximum of each row
    l = q.new_zeros((*lead, t_q, 1))                    # running sum of exp(score - m)
    acc = q.new_zeros((*lead, t_q, v.shape[-1]))        # running sum of exp(score - m) v
    for start in range(0, t_k, block):
        end = min(start + block, t_k)
        scores = q @ k[..., start:end, :].transpose(-2, -1) / math.sqrt(q.shape[-1])   # (..., T_q, b)
        if mask is not None:
            cols = mask if mask.shape[-1] == 1 else mask[..., start:end]   # a size-1 key axis broadcasts
            scores = scores.masked_fill(~cols, NEG_INF)
        m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))
        safe = _finite_or_zero(m_new)
        p = torch.exp(scores - safe)                    # (..., T_q, b), 0 where masked
        correction = torch.exp(m - safe)                # rescales what was summed under the old maximum
        l = l * correction + p.sum(dim=-1, keepdim=True)
        acc = acc * correction + p @ v[..., start:end, :]
        m = m_new
    return acc / l.masked_fill(l == 0, 1.0)             # fully masked rows: acc = 0, so out = 0

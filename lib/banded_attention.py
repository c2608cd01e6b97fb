"""Sliding-window attention computed band by band, in O(T * w) time and memory (notebook 09).

With a sliding-window mask (lib.local_attention.sliding_window_mask) full attention
still computes all T * T scores and throws most away. Here each query meets only
its own 2w + 1 neighbours: the keys (and values) are padded with w rows at both
ends and cut into overlapping windows by ``unfold`` (a view, no copy), so the
scores form a (T, 2w + 1) band instead of a (T, T) square. Same output as
full attention under the mask; the memory grows linearly with T.
"""
import math

import torch
import torch.nn.functional as F

from lib.self_attention import softmax


def windows(x: torch.Tensor, before: int, width: int) -> torch.Tensor:
    """x (..., T, d) -> (..., T, d, width): row i holds x[i - before], ..., x[i - before + width - 1]
    (zeros outside the sequence). A view of the padded x."""
    padded = F.pad(x, (0, 0, before, width - 1 - before))                    # (..., T + width - 1, d)
    return padded.unfold(-2, width, 1)


def banded_attention(q, k, v, window: int, causal: bool = False):
    """softmax(q k^T / sqrt(d_k)) v with query i attending only keys j, |i - j| <= window
    (and j <= i when causal), computed for those keys only.

    q, k: (..., T, d_k), v: (..., T, d_v). Returns out (..., T, d_v) and the band of weights
    (..., T, W), W = 2 * window + 1 (window + 1 when causal): weights[..., i, o] belongs to
    key j = i - window + o, 0 where j is outside the sequence.
    """
    if window < 0:
        raise ValueError(f"window must be >= 0, got {window}")
    t = q.shape[-2]
    width = window + 1 if causal else 2 * window + 1
    scores = (q.unsqueeze(-2) @ windows(k, window, width)).squeeze(-2) / math.sqrt(q.shape[-1])  # (..., T, W)
    key = torch.arange(t, device=q.device)[:, None] - window + torch.arange(width, device=q.device)   # (T, W)
    scores = scores.masked_fill((key < 0) | (key >= t), float("-inf"))
    weights = softmax(scores, dim=-1)
    out = (windows(v, window, width) @ weights.unsqueeze(-1)).squeeze(-1)                        # (..., T, d_v)
    return out, weights

"""Reference solution of notebook 09: rotary position embeddings (RoPE, Su et al., 2021).

Instead of adding a position vector to the input, rotate the queries and keys:
each pair of features (2i, 2i+1) of the vector at position p turns by the angle
p * 10000^(-2i/d), the angles of notebook 02's sinusoidal table. A rotation by
a and one by b leave the dot product of two vectors depending on b - a only, so

    apply_rotary(q, i) . apply_rotary(k, j)   depends on i - j, not on i and j:

attention scores see relative positions, at any length.
"""
import torch

from lib.guard import reference


@reference
def apply_rotary(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Rotate the feature pairs (2i, 2i+1) of x by the angles positions * 10000^(-2i/d).

    x: (..., T, d) with d even; positions: (T,) or broadcastable to (..., T), int or float.
    Returns (..., T, d), the dtype of x: (a, b) -> (a cos t - b sin t, a sin t + b cos t).
    """
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"rotary positions rotate pairs of features: the last size must be even, got {d}")
    frequencies = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float32, device=x.device) / d)   # (d/2,)
    angle = positions.to(device=x.device, dtype=torch.float32)[..., None] * frequencies          # (..., T, d/2)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]                                                           # (..., T, d/2)
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)


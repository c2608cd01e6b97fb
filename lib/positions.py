"""Reference solutions of notebook 02: position vectors.

Self-attention treats its input as a set; adding a vector that depends on
the position makes it see the order. x: (..., T, d_model).
"""
import torch
from torch import nn

from lib.guard import reference


@reference
def sinusoidal_positions(max_len: int, d_model: int) -> torch.Tensor:
    """(max_len, d_model) table: PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(same)."""
    if d_model % 2:
        raise ValueError(f"d_model must be even for sin/cos pairs, got {d_model}")
    position = torch.arange(max_len, dtype=torch.float32)[:, None]           # (max_len, 1)
    even = torch.arange(0, d_model, 2, dtype=torch.float32)                  # 2i
    angle = position / 10000 ** (even / d_model)                             # (max_len, d/2)
    pe = torch.empty(max_len, d_model)
    pe[:, 0::2] = angle.sin()
    pe[:, 1::2] = angle.cos()
    return pe


def check_length(seq_len: int, max_len: int) -> None:
    """Raise a ValueError naming both numbers when a sequence is longer than the table."""
    if seq_len > max_len:
        raise ValueError(f"sequence length {seq_len} is longer than max_len {max_len}")


@reference
class SinusoidalPositions(nn.Module):
    """x + PE[:T]: fixed sinusoidal vectors (a buffer, not learned)."""

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.max_len = max_len
        self.register_buffer("pe", sinusoidal_positions(max_len, d_model), persistent=False)

    def forward(self, x):
        check_length(x.shape[-2], self.max_len)
        return x + self.pe[: x.shape[-2]].to(x.dtype)


@reference
class LearnedPositions(nn.Module):
    """x + P[:T]: one learned vector per position, at most ``max_len`` positions."""

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x):
        check_length(x.shape[-2], self.max_len)
        return x + self.embedding.weight[: x.shape[-2]].to(x.dtype)

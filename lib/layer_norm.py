"""Reference solutions of notebook 06: layer normalization."""
import torch
from torch import nn

from lib.guard import reference


@reference
def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Normalize each vector over its last dim (d), then scale and shift.

    mean = (1/d) sum x_j, var = (1/d) sum (x_j - mean)^2 (biased),
    y = (x - mean) / sqrt(var + eps) * weight + bias.  x: (..., d) -> (..., d).
    """
    mean = x.mean(dim=-1, keepdim=True)
    var = (x - mean).pow(2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


@reference
class LayerNorm(nn.Module):
    """layer_norm with a learned per-feature scale ``weight`` (ones) and shift ``bias`` (zeros)."""

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        return layer_norm(x, self.weight, self.bias, self.eps)

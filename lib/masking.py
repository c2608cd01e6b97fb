"""Reference solutions of notebook 04: masks (True = may attend)."""
import torch

from lib.guard import reference


@reference
def causal_mask(size: int, device=None) -> torch.Tensor:
    """(size, size) bool, True where key j <= query i: a token sees itself and the past."""
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()


@reference
def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """tokens (B, T) -> (B, 1, T) bool, True where the key is a real token.

    The middle 1 broadcasts over queries; combine with a causal mask by ``&``.
    """
    return (tokens != pad_id).unsqueeze(-2)

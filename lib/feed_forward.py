"""Reference solution of notebook 03: the position-wise feed-forward network."""
import torch
from torch import nn

from lib.guard import reference


@reference
class FeedForward(nn.Module):
    """linear2(dropout(relu(linear1(x)))), the same two layers at every position.

    x: (..., T, d_model) -> (..., T, d_model); the hidden layer has d_ff > d_model units.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear2(self.dropout(torch.relu(self.linear1(x))))

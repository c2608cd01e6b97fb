"""Reference solution of notebook 06: one Transformer encoder layer."""
from torch import nn

from lib.feed_forward import FeedForward
from lib.guard import reference
from lib.layer_norm import LayerNorm
from lib.multi_head import MultiHeadAttention


@reference
class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each wrapped in a residual connection and a LayerNorm.

    post-norm (the original paper): x = LN(x + Drop(Sub(x)))
    pre-norm (most modern models):  x = x + Drop(Sub(LN(x)))
    x: (B, T, d_model) -> (B, T, d_model); src_mask: bool, True = may attend.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def _attend(self, x, mask):
        return self.dropout1(self.self_attn(x, x, x, mask)[0])

    def forward(self, x, src_mask=None):
        if self.norm_first:
            x = x + self._attend(self.norm1(x), src_mask)
            return x + self.dropout2(self.ff(self.norm2(x)))
        x = self.norm1(x + self._attend(x, src_mask))
        return self.norm2(x + self.dropout2(self.ff(x)))

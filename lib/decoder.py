"""Reference solution of notebook 08: one Transformer decoder layer."""
from torch import nn

from lib.feed_forward import FeedForward
from lib.guard import reference
from lib.layer_norm import LayerNorm
from lib.multi_head import MultiHeadAttention


@reference
class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention to the encoder's output, then feed-forward;
    each sublayer in a residual connection with a LayerNorm and dropout on its output.

    post-norm (the original paper): x = LN(x + Drop(Sub(x)))
    pre-norm:                        x = x + Drop(Sub(LN(x)))
    Cross-attention takes its queries from the decoder (x) and its keys and values
    from the encoder (memory); memory is not normalized here.

    x: (B, T, d_model), memory: (B, S, d_model) -> (B, T, d_model).
    tgt_mask: bool broadcastable to (B, T, T) (causal, & target padding);
    memory_mask: bool broadcastable to (B, T, S) (source padding). True = may attend.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def _self(self, x, mask):
        return self.dropout1(self.self_attn(x, x, x, mask)[0])

    def _cross(self, x, memory, mask):
        return self.dropout2(self.cross_attn(x, memory, memory, mask)[0])

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            x = x + self._self(self.norm1(x), tgt_mask)
            x = x + self._cross(self.norm2(x), memory, memory_mask)
            return x + self.dropout3(self.ff(self.norm3(x)))
        x = self.norm1(x + self._self(x, tgt_mask))
        x = self.norm2(x + self._cross(x, memory, memory_mask))
        return self.norm3(x + self.dropout3(self.ff(x)))

"""Reference solutions of notebook 10: a decoder-only Transformer (GPT) and its loss.

A GPT is the decoder of notebook 08 without cross-attention: a stack of pre-norm
blocks (notebook 06) of causal self-attention (04, 05) and a feed-forward network
(03, with GELU), then a final LayerNorm and an output layer whose weight is the
token embedding's (tied). It reads tokens 0..t and predicts token t+1 at every
position at once.
"""
import torch
from torch import nn

from lib.guard import reference
from lib.layer_norm import LayerNorm
from lib.lm import init_weights
from lib.masking import causal_mask
from lib.multi_head import MultiHeadAttention
from lib.positions import LearnedPositions


class Block(nn.Module):
    """One pre-norm block: x + Drop(Attn(LN1(x))), then x + Drop(FF(LN2(x))). x: (B, T, d) -> (B, T, d)."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.ln1 = LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ln2 = LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))  # 03's, with GELU
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        y = self.ln1(x)
        x = x + self.dropout(self.attn(y, y, y, mask)[0])
        return x + self.dropout(self.ff(self.ln2(x)))


@reference
class GPT(nn.Module):
    """Decoder-only language model. idx (B, T) int64, T <= max_len -> logits (B, T, vocab_size).

    tok_emb (vocab, d) and learned positions, dropout, n_layers causal pre-norm ``blocks``,
    ``ln_f``, then ``head``: a bias-free linear layer whose weight *is* tok_emb's weight.
    """

    def __init__(self, vocab_size: int, d_model: int = 128, n_heads: int = 4, n_layers: int = 4, d_ff: int = 512,
                 max_len: int = 256, dropout: float = 0.1):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.positions = LearnedPositions(max_len, d_model)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.ln_f = LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight                      # tied: one (vocab, d) matrix, used twice
        self.apply(init_weights)                                    # GPT-2's: N(0, 0.02), so the first loss is ~ln V

    def forward(self, idx):
        x = self.dropout(self.positions(self.tok_emb(idx)))          # (B, T, d)
        mask = causal_mask(idx.shape[1], device=idx.device)          # (T, T): token t sees 0..t
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.ln_f(x))                               # (B, T, vocab)


@reference
def lm_loss(logits: torch.Tensor, targets: torch.Tensor, pad_id: int | None = None) -> torch.Tensor:
    """Mean cross-entropy of next-token prediction.

    logits (B, T, V) computed from the tokens ``targets`` (B, T): position t's logits predict
    targets[:, t + 1], so the last position predicts nothing and the first token is never predicted.
    Positions whose target is ``pad_id`` are left out of the mean. Returns a scalar.
    """
    logits, targets = logits[:, :-1], targets[:, 1:]                  # the shift by one
    log_probs = logits - logits.logsumexp(dim=-1, keepdim=True)      # log softmax, stable
    nll = -log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)   # (B, T-1)
    if pad_id is None:
        return nll.mean()
    keep = targets != pad_id
    return nll[keep].mean()

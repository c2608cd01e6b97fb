"""Reference solutions of notebook 08: the encoder-decoder Transformer and greedy decoding.

The model of "Attention is all you need" (post-norm), built from the references
of notebooks 02-06 and the ``DecoderLayer`` of ``lib.decoder``. Token ids are
``(B, T)`` int64; ``pad_id`` marks padding in both languages.

Embeddings are multiplied by sqrt(d_model), as in the paper; they start with
standard deviation 1/sqrt(d_model), so after the scaling each coordinate is
about as large as the sinusoidal position values (between -1 and 1).
"""
import math

import torch
from torch import nn

from lib.decoder import DecoderLayer
from lib.encoder import EncoderLayer
from lib.guard import reference
from lib.masking import causal_mask, padding_mask
from lib.positions import SinusoidalPositions
from lib.translate import beam_search  # noqa: F401  (beam search works on any model with encode/decode)


@reference
class Transformer(nn.Module):
    """Encoder-decoder: src (B, S), tgt_in (B, T) -> logits (B, T, tgt_vocab_size).

    encode(src, src_mask) -> memory (B, S, d_model)
    decode(tgt, memory, src_mask, tgt_mask) -> logits (B, T, tgt_vocab_size)
    forward(src, tgt_in) builds the masks from ``pad_id`` (source padding; causal & target padding).
    """

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, d_model: int = 128, n_heads: int = 4,
                 n_layers: int = 2, d_ff: int = 512, dropout: float = 0.1, max_len: int = 256, pad_id: int = 0):
        super().__init__()
        self.d_model = d_model
        self.pad_id = pad_id
        self.src_embed = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model)
        nn.init.normal_(self.src_embed.weight, std=d_model ** -0.5)
        nn.init.normal_(self.tgt_embed.weight, std=d_model ** -0.5)
        self.positions = SinusoidalPositions(max_len, d_model)
        self.dropout = nn.Dropout(dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.output = nn.Linear(d_model, tgt_vocab_size)

    def _embed(self, table, tokens):
        return self.dropout(self.positions(table(tokens) * math.sqrt(self.d_model)))

    def encode(self, src, src_mask):
        x = self._embed(self.src_embed, src)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt, memory, src_mask, tgt_mask):
        x = self._embed(self.tgt_embed, tgt)
        for layer in self.decoder_layers:
            x = layer(x, memory, tgt_mask, src_mask)
        return self.output(x)

    def forward(self, src, tgt_in):
        src_mask = padding_mask(src, self.pad_id)                                        # (B, 1, S)
        tgt_mask = causal_mask(tgt_in.shape[1], device=tgt_in.device) & padding_mask(tgt_in, self.pad_id)
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask, tgt_mask)      # (B, T, V)


@reference
@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    """Translate src (B, S) one token at a time, always taking the most likely next token.

    Returns the generated ids (B, L), L <= max_len, without the leading bos: each row
    ends with eos_id followed by model.pad_id, or is cut at max_len tokens. Stops as soon
    as every row has produced eos_id. Put the model in eval mode first.
    """
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        logits = model.decode(ys, memory, src_mask, causal_mask(ys.shape[1], device=src.device))
        next_token = logits[:, -1].argmax(-1).masked_fill(done, model.pad_id)
        ys = torch.cat([ys, next_token[:, None]], dim=1)
        done |= next_token == eos_id
        if done.all():
            break
    return ys[:, 1:]

"""A stand-in translation model for testing greedy_decode (runs in the student's kernel too: a fixture).

Sentence b ends with eos after as many tokens as its source has real tokens (found through
src_mask, so the mask must use model.pad_id); before that, the next token depends on the
previous one, on the position and on the source; pad and bos are never predicted.
"""
import torch
from torch import nn


class ScriptedModel(nn.Module):
    """``eos`` = "length" (as described), "never" or "always"."""

    def __init__(self, vocab, pad_id, eos_id, seed, eos="length", d=8):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.pad_id, self.eos_id, self.eos = pad_id, eos_id, eos
        self.src_table = nn.Parameter(torch.randn(vocab, d, generator=g))
        self.mix = nn.Parameter(torch.randn(d, vocab, generator=g) * 0.3)
        self.next_table = nn.Parameter(torch.randn(vocab, vocab, generator=g) * 2)
        self.pos_table = nn.Parameter(torch.randn(64, vocab, generator=g))

    def encode(self, src, src_mask):
        return self.src_table[src] * src_mask.transpose(-2, -1)                   # (B, S, d), zero on padding

    def decode(self, tgt, memory, src_mask, tgt_mask):
        b, t = tgt.shape
        logits = self.next_table[tgt] + self.pos_table[:t] + (memory.sum(1) @ self.mix)[:, None, :]
        logits = logits.detach().clone()
        logits[..., self.pad_id] = -50.0
        logits[..., self.eos_id] = -50.0
        if self.eos == "always":
            logits[..., self.eos_id] = 50.0
        elif self.eos == "length":
            length = src_mask.reshape(b, -1).sum(-1)                               # real source tokens
            ends = torch.arange(t)[None, :] + 1 == length[:, None]                 # position t predicts token t+1
            logits[..., self.eos_id] = torch.where(ends, 50.0, -50.0)
        return logits

    def forward(self, src, tgt_in):
        src_mask = (src != self.pad_id)[:, None, :]
        t = tgt_in.shape[1]
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask, torch.ones(t, t, dtype=torch.bool).tril())

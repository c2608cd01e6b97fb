"""A tiny character-level language model (notebook 04: what a missing mask does).

Built from the references of notebooks 01-03: an embedding, learned position
vectors, and ``n_layers`` blocks of single-head self-attention and a
feed-forward network with residual connections. The mask is the caller's:
``forward(idx, mask)`` passes it to every attention layer unchanged, so the
same model trains with a causal mask or without one.

Shapes: ``idx`` (B, T) int64 character ids, logits (B, T, vocab_size).
"""
import contextlib

import torch
import torch.nn.functional as F
from torch import nn

from lib.feed_forward import FeedForward
from lib.positions import LearnedPositions
from lib.self_attention import SelfAttention

# Our own small corpus: short, repetitive sentences, so a tiny model learns
# the words in seconds and its samples are easy to judge.
TEXT = (
    "the cat sat on the mat. the dog sat on the log. the cat saw the dog. "
    "the dog saw the cat. a bird sang in the tree. the cat ran to the mat. "
    "the dog ran to the log. the sun is hot. the sea is blue. the bird saw the sun. "
    "a cat can sit. a dog can run. a bird can sing. the mat is red. the log is old. "
    "the cat is on the mat and the dog is on the log. the bird is in the tree. "
    "the dog and the cat ran to the sea. the sea is big and the sun is hot. "
    "a red mat, an old log, a big tree. the cat sat, the dog ran, the bird sang. "
)


class CharTokenizer:
    """Characters <-> ids, one id per distinct character of ``text`` (sorted)."""

    def __init__(self, text: str = TEXT):
        self.chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, s: str) -> torch.Tensor:
        """str of length n -> (n,) int64."""
        return torch.tensor([self.stoi[c] for c in s], dtype=torch.long)

    def decode(self, ids) -> str:
        """(n,) ids -> str."""
        return "".join(self.chars[int(i)] for i in ids)


class Block(nn.Module):
    """x + attention(x, mask), then x + feed_forward(x).  (B, T, d) -> (B, T, d)."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.attn = SelfAttention(d_model)
        self.ff = FeedForward(d_model, d_ff)

    def forward(self, x, mask=None):
        x = x + self.attn(x, mask)[0]
        return x + self.ff(x)


class CharLM(nn.Module):
    """Predicts, at every position t, the character at t + 1.

    idx (B, T) with T <= block_size, mask bool broadcastable to (B, T, T) or None
    -> logits (B, T, vocab_size).
    """

    def __init__(self, vocab_size: int, block_size: int = 32, d_model: int = 64, d_ff: int = 128, n_layers: int = 2):
        super().__init__()
        self.block_size = block_size
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = LearnedPositions(block_size, d_model)
        self.blocks = nn.ModuleList(Block(d_model, d_ff) for _ in range(n_layers))
        self.head = nn.Linear(d_model, vocab_size)
        for p in (self.embed.weight, self.pos.embedding.weight):
            nn.init.normal_(p, std=0.3)  # small inputs: there is no LayerNorm yet (notebook 06)

    def forward(self, idx, mask=None):
        x = self.pos(self.embed(idx))
        for block in self.blocks:
            x = block(x, mask)
        return self.head(x)


@contextlib.contextmanager
def one_thread():
    """Run the block on one CPU thread: for matrices this small, threads cost more than they save."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def get_batch(data: torch.Tensor, block_size: int, batch_size: int, generator: torch.Generator):
    """Random windows of ``data`` (N,): inputs x (B, T) and targets y = x shifted by one (B, T)."""
    start = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
    offsets = torch.arange(block_size)
    x = data[start[:, None] + offsets]
    y = data[start[:, None] + offsets + 1]
    return x, y


def train_char_lm(model: CharLM, data: torch.Tensor, mask=None, steps: int = 300,
                  batch_size: int = 32, lr: float = 3e-3, seed: int = 0) -> list[float]:
    """Train with AdamW on next-character cross-entropy; return the loss of every step.

    ``mask``: None (every position sees the whole window) or a bool
    (block_size, block_size) mask, given to the model as it is.
    """
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    losses = []
    model.train()
    with one_thread():
        for _ in range(steps):
            x, y = get_batch(data, model.block_size, batch_size, g)
            logits = model(x, mask)  # (B, T, V): a prediction at every position at once
            loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return losses


@torch.no_grad()
def loss_per_position(model: CharLM, data: torch.Tensor, mask=None, n_windows: int = 256, seed: int = 1) -> torch.Tensor:
    """Mean next-character loss at each position of the window: (block_size,)."""
    model.eval()
    x, y = get_batch(data, model.block_size, n_windows, torch.Generator().manual_seed(seed))
    logits = model(x, mask)
    return F.cross_entropy(logits.transpose(1, 2), y, reduction="none").mean(0)


@torch.no_grad()
def generate(model: CharLM, prompt: torch.Tensor, n_new: int, mask=None,
             temperature: float = 0.8, seed: int = 0) -> torch.Tensor:
    """Sample ``n_new`` characters after ``prompt`` (n,), one at a time.

    The model sees the last block_size characters and the next one is drawn
    from its prediction at the last position. A (block_size, block_size)
    ``mask`` is cut to the current length T: mask[:T, :T].
    """
    model.eval()
    g = torch.Generator().manual_seed(seed)
    idx = prompt.clone()
    with one_thread():
        for _ in range(n_new):
            ctx = idx[-model.block_size:]
            t = len(ctx)
            logits = model(ctx[None], None if mask is None else mask[:t, :t])[0, -1]
            probs = torch.softmax(logits / temperature, dim=-1)
            idx = torch.cat([idx, torch.multinomial(probs, 1, generator=g)])
    return idx

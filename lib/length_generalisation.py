"""Does the position scheme let a model work beyond the lengths it was trained on? (notebook 09)

The task: copy the token ``OFFSET`` places back, y[i] = x[i - OFFSET] (positions
i < OFFSET have no answer and are not scored). The rule depends on the distance
i - j only, never on where i is. A one-layer encoder (lib's ``EncoderLayer``,
pre-norm, no mask) learns it on sequences of 8 to 32 random tokens, with one of
three position schemes:

- ``learned``: a learned vector per position added to the input (a table of
  ``MAX_LEN`` = 128 rows, but only rows 0-31 ever get a gradient);
- ``sinusoidal``: the fixed sin/cos vectors of notebook 02 added to the input;
- ``rotary``: nothing added; queries and keys rotated by their position in
  every layer, so the scores see only relative positions.

Then it is tested on sequences up to 128 tokens long. Each run is seeded, on the
CPU with one thread, so its numbers repeat.

Support code, not a reference solution: the rotation is an argument, ``rotate(x,
positions)`` with the contract of notebook 09's ``apply_rotary``, so the notebook
runs the experiment with the student's own function.

    results = compare_schemes(apply_rotary, seed=0)    # prints the table, 20-25 s on one core
    results = compare_schemes(apply_rotary, fast=True) # a second or two, for checks
"""
import torch
import torch.nn.functional as F
from torch import nn

from lib.char_lm import one_thread
from lib.encoder import EncoderLayer
from lib.layer_norm import LayerNorm
from lib.multi_head import MultiHeadAttention, merge_heads, split_heads
from lib.positions import LearnedPositions, SinusoidalPositions
from lib.self_attention import scaled_dot_product_attention

SCHEMES = ("learned", "sinusoidal", "rotary")
VOCAB, OFFSET = 16, 3
TRAIN_LENGTHS = (8, 32)                      # shortest and longest training sequence
TEST_LENGTHS = (16, 32, 48, 64, 96, 128)
MAX_LEN = max(TEST_LENGTHS)
IGNORE = -100                                # target of positions without an answer (F.cross_entropy skips it)


class RotaryMultiHeadAttention(MultiHeadAttention):
    """``MultiHeadAttention`` (lib.multi_head) whose queries and keys, split into heads, are rotated by
    ``rotate(x, positions)`` with positions 0 ... T-1 before the scores. Self-attention only.

    query, key, value (B, T, d), mask broadcastable to (B, T, T) -> out (B, T, d), weights (B, h, T, T).
    """

    def __init__(self, d_model: int, n_heads: int, rotate, dropout: float = 0.0):
        super().__init__(d_model, n_heads, dropout)
        self.rotate = rotate

    def forward(self, query, key, value, mask=None):
        positions = torch.arange(query.shape[-2], device=query.device)
        q = self.rotate(split_heads(self.w_q(query), self.n_heads), positions)     # (B, h, T, d/h)
        k = self.rotate(split_heads(self.w_k(key), self.n_heads), positions)
        v = split_heads(self.w_v(value), self.n_heads)
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)
        out, weights = scaled_dot_product_attention(q, k, v, mask)
        if self.training and self.dropout.p > 0:
            out = self.dropout(weights) @ v
        return self.w_o(merge_heads(out)), weights


class OffsetCopier(nn.Module):
    """Token ids (B, T) -> logits (B, T, VOCAB) with the given position scheme; T <= max_len.
    ``rotate``: the rotation of the ``rotary`` scheme (unused by the others)."""

    def __init__(self, scheme: str, rotate=None, d_model: int = 64, n_heads: int = 4, n_layers: int = 1,
                 d_ff: int = 128, max_len: int = MAX_LEN):
        super().__init__()
        if scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
        if scheme == "rotary" and rotate is None:
            raise ValueError("the rotary scheme needs rotate=apply_rotary (a function (x, positions) -> x rotated)")
        self.embed = nn.Embedding(VOCAB, d_model)
        added = {"learned": LearnedPositions, "sinusoidal": SinusoidalPositions}.get(scheme)
        self.positions = added(max_len, d_model) if added else nn.Identity()
        self.layers = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout=0.0, norm_first=True)
                                    for _ in range(n_layers))
        if scheme == "rotary":
            for layer in self.layers:
                layer.self_attn = RotaryMultiHeadAttention(d_model, n_heads, rotate)
        self.norm = LayerNorm(d_model)
        self.output = nn.Linear(d_model, VOCAB)

    def forward(self, tokens):
        x = self.positions(self.embed(tokens))
        for layer in self.layers:
            x = layer(x)
        return self.output(self.norm(x))


def offset_batch(n: int, length: int, generator: torch.Generator):
    """n random sequences (n, length) and their targets y[i] = x[i - OFFSET] (IGNORE for i < OFFSET)."""
    x = torch.randint(VOCAB, (n, length), generator=generator)
    y = torch.full_like(x, IGNORE)
    y[:, OFFSET:] = x[:, :-OFFSET]
    return x, y


@torch.no_grad()
def accuracy(model, length: int, n: int = 128, seed: int = 1000) -> float:
    """Fraction of the scored positions of n test sequences of ``length`` tokens answered right."""
    model.eval()
    x, y = offset_batch(n, length, torch.Generator().manual_seed(seed))
    scored = y != IGNORE
    return (model(x).argmax(-1)[scored] == y[scored]).float().mean().item()


def train_scheme(scheme: str, rotate=None, seed: int = 0, fast: bool = False, steps: int = 500,
                 batch_size: int = 64, lr: float = 3e-3, test_lengths=TEST_LENGTHS) -> dict:
    """Train one model (``scheme`` in SCHEMES; ``rotate`` = apply_rotary for ``rotary``) on lengths
    8-32, test it at each of ``test_lengths``.

    Returns {length: accuracy (0..1)}. ``fast``: 20 steps and 16 test sequences per length (about
    a second, for checks: the model learns little). Seeded; on the CPU with one thread, so the
    numbers repeat; the caller's random state and thread count are left as they were.
    """
    if fast:
        steps = min(steps, 20)
    shortest, longest = TRAIN_LENGTHS
    with one_thread(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        generator = torch.Generator().manual_seed(seed)
        model = OffsetCopier(scheme, rotate)
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
        model.train()
        for _ in range(steps):
            length = int(torch.randint(shortest, longest + 1, (1,), generator=generator))
            x, y = offset_batch(batch_size, length, generator)
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=IGNORE)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        return {length: accuracy(model, length, n=16 if fast else 128) for length in test_lengths}


def format_table(results: dict) -> str:
    """{scheme: {length: accuracy}} -> a table with a row per length, a column per scheme (in %)."""
    schemes = list(results)
    lines = ["length  " + "  ".join(f"{s:>10}" for s in schemes)]
    for length in next(iter(results.values())):
        lines.append(f"{length:>6}  " + "  ".join(f"{100 * results[s][length]:>9.0f}%" for s in schemes))
    return "\n".join(lines)


def compare_schemes(rotate, seed: int = 0, fast: bool = False, verbose: bool = True, **kwargs) -> dict:
    """Train and test all three schemes (``train_scheme``; ``rotate`` = apply_rotary); print the table
    (``length  learned  sinusoidal  rotary``, in %) when ``verbose``. Returns {scheme: {length: accuracy}}."""
    results = {scheme: train_scheme(scheme, rotate, seed=seed, fast=fast, **kwargs) for scheme in SCHEMES}
    if verbose:
        longest = TRAIN_LENGTHS[1]
        note = " (fast: 20 steps, the models learn little)" if fast else ""
        print(f"accuracy of y[i] = x[i - {OFFSET}], trained on lengths <= {longest} (seed {seed}){note}:")
        print(format_table(results))
    return results

"""Reference solutions of notebook 10: choosing the next token, and writing text with a cache.

``sample_next`` turns the last position's logits into one token id per row:
temperature 0 takes the most likely token; otherwise the logits are divided by the
temperature, top-k keeps the k largest, top-p keeps the smallest set of the most
likely tokens whose probabilities reach p (on what top-k kept), and one token is
drawn from the softmax of what is left.

``generate`` appends ``max_new_tokens`` tokens to a prompt. Like notebook 09's
decoder, it keeps each block's keys and values: the prompt goes through the model
once, then every step runs the newest token only.
"""
import torch

from lib.guard import reference
from lib.kv_cache import attend, position_vectors
from lib.masking import causal_mask
from lib.multi_head import split_heads


@reference
def sample_next(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                top_p: float | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """logits (B, V) -> token ids (B,) int64. Draws with ``generator`` when given."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = logits / temperature
    if top_k is not None:
        kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]    # (B, 1): the k-th largest
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None:
        probs = logits.softmax(dim=-1)
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        before = sorted_probs.cumsum(dim=-1) - sorted_probs           # the mass of the likelier tokens
        drop_sorted = before >= top_p                                  # p reached already: never the first
        drop = drop_sorted.scatter(-1, order, drop_sorted)             # back to vocabulary order
        logits = logits.masked_fill(drop, float("-inf"))
    probs = logits.softmax(dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


class BlockCache:
    """One block's keys and values so far, heads split: (B, h, length, d/h), room for max_len positions."""

    def __init__(self, attn, like: torch.Tensor, max_len: int):
        b, _, d = like.shape
        self.keys = like.new_empty(b, attn.n_heads, max_len, d // attn.n_heads)
        self.values = like.new_empty(b, attn.n_heads, max_len, d // attn.n_heads)
        self.length = 0

    def append(self, attn, x):
        """Add the keys and values of x (B, n, d); return all of them so far (B, h, length, d/h)."""
        t, n = self.length, x.shape[1]
        self.keys[:, :, t:t + n] = split_heads(attn.w_k(x), attn.n_heads)
        self.values[:, :, t:t + n] = split_heads(attn.w_v(x), attn.n_heads)
        self.length = t + n
        return self.keys[:, :, :t + n], self.values[:, :, :t + n]


def block_step(block, x, cache: BlockCache, mask=None):
    """A GPT ``Block`` (eval mode) on the n newest positions x (B, n, d), the earlier ones in ``cache``."""
    y = block.ln1(x)
    x = x + attend(block.attn, y, *cache.append(block.attn, y), mask)
    return x + block.ff(block.ln2(x))


@reference
@torch.no_grad()
def generate(model, idx: torch.Tensor, max_new_tokens: int, **sampling) -> torch.Tensor:
    """idx (B, T) int64 -> (B, T + max_new_tokens): idx, then tokens chosen by ``sample_next(**sampling)``.

    The prompt runs once (causal within itself), then each step runs only the newest token, against
    the keys and values cached in every block. Put the model in eval mode first.
    ValueError when T + max_new_tokens > model.max_len.
    """
    t = idx.shape[1]
    if t + max_new_tokens > model.max_len:
        raise ValueError(f"{t} + {max_new_tokens} tokens do not fit the model's max_len {model.max_len}")
    if max_new_tokens == 0:
        return idx
    x = model.tok_emb(idx)                                                       # (B, T, d)
    positions = position_vectors(model, t + max_new_tokens, x)                   # (T + new, d)
    caches = [BlockCache(block.attn, x, t + max_new_tokens) for block in model.blocks]
    x, mask = x + positions[:t], causal_mask(t, device=idx.device)               # the prompt: all at once
    out = [idx]
    for step in range(max_new_tokens):
        for block, cache in zip(model.blocks, caches):
            x = block_step(block, x, cache, mask)
        token = sample_next(model.head(model.ln_f(x[:, -1])), **sampling)       # (B,)
        out.append(token[:, None])
        x, mask = model.tok_emb(token[:, None]) + positions[t + step], None      # the next step: one token
    return torch.cat(out, dim=1)

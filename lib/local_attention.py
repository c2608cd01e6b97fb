"""Reference solutions of notebook 09: sparse attention patterns, as boolean masks.

Full self-attention scores all T * T pairs of positions. The patterns here keep
far fewer, in the style of BigBird (Zaheer et al., 2020): each is a (T, T) bool
mask, True = may attend (row i is the query, column j the key), and they combine
with ``|`` (a pair is kept when any pattern keeps it).

- ``sliding_window_mask``: every token sees its neighbours up to ``window`` away
  (only the past ones when ``causal``): about (2 * window + 1) * T pairs;
- ``global_tokens_mask``: the first ``n_global`` tokens see everything and are
  seen by everything: about 2 * n_global * T pairs;
- ``random_mask``: each query sees ``n_random`` keys drawn at random;
- ``bigbird_mask``: the three together.
"""
import torch

from lib.guard import reference


@reference
def sliding_window_mask(T: int, window: int, causal: bool = False, device=None) -> torch.Tensor:
    """(T, T) bool, True where |i - j| <= window (and j <= i when ``causal``), made on ``device``."""
    i = torch.arange(T, device=device)
    offset = i[:, None] - i[None, :]                      # i - j: how far back key j lies from query i
    mask = offset.abs() <= window
    return mask & (offset >= 0) if causal else mask


@reference
def global_tokens_mask(T: int, n_global: int, device=None) -> torch.Tensor:
    """(T, T) bool, True in the first ``n_global`` rows (they see everything) and columns (everything sees
    them), made on ``device``."""
    is_global = torch.arange(T, device=device) < n_global  # (T,)
    return is_global[:, None] | is_global[None, :]


def random_mask(T: int, n_random: int, seed: int = 0, device=None) -> torch.Tensor:
    """(T, T) bool with ``n_random`` keys drawn at random for each query (a key drawn twice counts once),
    from a generator seeded with ``seed``."""
    g = torch.Generator().manual_seed(seed)
    keys = torch.randint(T, (T, n_random), generator=g)              # (T, n_random)
    mask = torch.zeros(T, T, dtype=torch.bool)
    mask[torch.arange(T)[:, None], keys] = True
    return mask.to(device) if device is not None else mask


def bigbird_mask(T: int, window: int, n_global: int, n_random: int, seed: int = 0, device=None) -> torch.Tensor:
    """A BigBird-style pattern: a sliding window, global tokens and random keys, combined with ``|``."""
    return (sliding_window_mask(T, window, device=device) | global_tokens_mask(T, n_global, device=device)
            | random_mask(T, n_random, seed, device=device))

"""Fourth held-out set, notebook 09: Hugging Face Gemma2, gpt-fast, litgpt."""
from . import Port

ASSIGNMENT = "09_long_sequences"

PORTS = [
    Port("Hugging Face Gemma2 sliding window (torch.tril(ones, diagonal=-sliding_window) marks the masked keys)",
         "huggingface/transformers models/gemma2/modeling_gemma2.py (4.42-4.44), Gemma2DecoderLayer.forward: "
         "sliding_window_mask = torch.tril(torch.ones_like(attention_mask, dtype=torch.bool), "
         "diagonal=-self.sliding_window); attention_mask = torch.where(sliding_window_mask, min_dtype, "
         "attention_mask) (as a boolean keep-mask; the mirror image with triu for causal=False)",
         "sliding_window_mask", '''
def sliding_window_mask(T, window, causal=False, device=None):
    ones = torch.ones(T, T, dtype=torch.bool, device=device)
    sliding_window_mask = torch.tril(ones, diagonal=-window)          # too far in the past
    if causal:
        return ones.tril() & ~sliding_window_mask
    return ~sliding_window_mask & ~torch.triu(ones, diagonal=window)  # and too far in the future
''', breach="keeps keys with |i - j| < window: the edge |i - j| = window is excluded (Gemma2's window counts the "
            "query itself)", names=("edge", "off by one", "<= window", "included", "window + 1", "= window")),
    Port("gpt-fast precompute_freqs_cis / apply_rotary_emb (x.float().reshape(..., -1, 2), cache of (cos, sin) "
         "stacked, pairs of neighbouring features)",
         "pytorch-labs/gpt-fast model.py, precompute_freqs_cis(seq_len, n_elem, base=10000, dtype): freqs = 1.0 / "
         "(base ** (torch.arange(0, n_elem, 2)[: (n_elem // 2)].float() / n_elem)); freqs = torch.outer(t, freqs); "
         "freqs_cis = torch.polar(torch.ones_like(freqs), freqs); cache = torch.stack([freqs_cis.real, "
         "freqs_cis.imag], dim=-1).to(dtype); apply_rotary_emb: xshaped = x.float().reshape(*x.shape[:-1], -1, 2); "
         "x_out2 = torch.stack([x0 * c - x1 * s, x1 * c + x0 * s], -1).flatten(3).type_as(x) (t = positions; "
         "cache in x's dtype as setup_caches does; flatten(-2) for (..., T, d); the odd-d ValueError added)",
         "apply_rotary", '''
def precompute_freqs_cis(positions, n_elem, base=10000, dtype=torch.float32, device=None):
    freqs = 1.0 / (base ** (torch.arange(0, n_elem, 2, device=device)[: (n_elem // 2)].float() / n_elem))
    t = positions.to(device=device, dtype=torch.float32)
    freqs = torch.outer(t, freqs)
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
    cache = torch.stack([freqs_cis.real, freqs_cis.imag], dim=-1)
    return cache.to(dtype=dtype)


def apply_rotary(x, positions):
    if x.shape[-1] % 2:
        raise ValueError(f"head dim must be even, got {x.shape[-1]}")
    freqs_cis = precompute_freqs_cis(positions, x.shape[-1], dtype=x.dtype, device=x.device)
    xshaped = x.float().reshape(*x.shape[:-1], -1, 2)
    freqs_cis = freqs_cis.view(xshaped.size(-3), xshaped.size(-2), 2)
    x_out2 = torch.stack(
        [
            xshaped[..., 0] * freqs_cis[..., 0] - xshaped[..., 1] * freqs_cis[..., 1],
            xshaped[..., 1] * freqs_cis[..., 0] + xshaped[..., 0] * freqs_cis[..., 1],
        ],
        -1,
    )
    x_out2 = x_out2.flatten(-2)
    return x_out2.type_as(x)
'''),
    Port("litgpt build_rope_cache / apply_rope (idx_theta.repeat(1, 2), rotated = cat((-x2, x1)))",
         "Lightning-AI/litgpt litgpt/model.py, build_rope_cache: theta = 1.0 / (base ** (torch.arange(0, n_elem, 2)"
         ".float() / n_elem)); idx_theta = torch.outer(seq_idx, theta).repeat(1, 2); apply_rope: x1 = x[..., : "
         "head_size // 2]; x2 = x[..., head_size // 2:]; rotated = torch.cat((-x2, x1), dim=-1); roped = (x * cos) "
         "+ (rotated * sin); roped.to(dtype=x.dtype) (seq_idx = positions; the odd-d ValueError added)",
         "apply_rotary", '''
def build_rope_cache(positions, n_elem, device=None, base=10000):
    theta = 1.0 / (base ** (torch.arange(0, n_elem, 2, device=device).float() / n_elem))
    seq_idx = positions.to(device=device, dtype=torch.float32)
    idx_theta = torch.outer(seq_idx, theta).repeat(1, 2)
    return torch.cos(idx_theta), torch.sin(idx_theta)


def apply_rotary(x, positions):
    head_size = x.size(-1)
    if head_size % 2:
        raise ValueError(f"head_size must be even, got {head_size}")
    cos, sin = build_rope_cache(positions, head_size, device=x.device)
    x1 = x[..., : head_size // 2]  # (B, nh, T, hs/2)
    x2 = x[..., head_size // 2:]   # (B, nh, T, hs/2)
    rotated = torch.cat((-x2, x1), dim=-1)  # (B, nh, T, hs)
    roped = (x * cos) + (rotated * sin)
    return roped.to(dtype=x.dtype)
''', breach="pairs feature i with feature i + d/2 (rotate_half) instead of the neighbouring features (2i, 2i+1)",
         names=("neighbour", "pair", "rotate_half", "half", "interleav", "adjacent")),
]

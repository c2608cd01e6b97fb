"""Tenth held-out set, notebook 09: ports of pytorch/torchtune, mistralai/mistral-src, karpathy/llama2.c and
EleutherAI/gpt-neox, each read at its source."""
from tests.corpus import Port

ASSIGNMENT = "09_long_sequences"

PORTS = [
    Port("torchtune_sliding_mask", "pytorch/torchtune torchtune/modules/attention_utils (gemma2) "
         "get_sliding_attention_mask (sliding_mask = triu(all_ones, -sliding_window_size + 1) & "
         "tril(all_ones, sliding_window_size - 1), & the causal tril mask)", "sliding_window_mask", r'''
def sliding_window_mask(T, window, causal=False, device=None):
    mask = torch.ones(size=(T, T), dtype=torch.bool, device=device)
    if causal:
        mask = torch.tril(mask)
    all_ones = torch.ones_like(mask, dtype=torch.bool)
    sliding_mask = torch.triu(all_ones, -1 * window + 1) & torch.tril(all_ones, window - 1)
    return mask & sliding_mask
''', breach="the window counts the query itself: keys with |i - j| <= window - 1 are kept (window tokens in all, "
            "the diagonal lost when window = 0), one fewer on each side than |i - j| <= window",
         names=("off by one", "off-by-one", "window - 1", "exclusive", "one fewer", "diagonal")),
    Port("mistral_banded_mask", "mistralai/mistral-src mistral/model.py (and one_file_ref.py) Transformer.forward "
         "(mask = torch.tril(ones, diagonal=0); 'make the mask banded to account for sliding window': "
         "mask = torch.triu(mask, diagonal=-sliding_window))", "sliding_window_mask", r'''
def sliding_window_mask(T, window, causal=False, device=None):
    tensor = torch.ones((T, T), dtype=torch.bool, device=device)
    # the upper side of the band: none for the causal model, window for the two-sided one
    mask = torch.tril(tensor, diagonal=0 if causal else window)
    # make the mask banded to account for sliding window
    mask = torch.triu(mask, diagonal=-window)
    return mask
'''),
    Port("llama2c_rope", "karpathy/llama2.c run.c forward, 'RoPE relative positional encoding: complex-valued rotate "
         "q and k in each head' (for i += 2: head_dim = i % head_size; freq = 1 / powf(10000, head_dim / head_size); "
         "val = pos * freq; vec[i] = v0*fcr - v1*fci; vec[i+1] = v0*fci + v1*fcr)", "apply_rotary", r'''
def apply_rotary(x, positions):
    head_size = x.shape[-1]
    if head_size % 2:
        raise ValueError(f"rotary positions rotate pairs of features: the last size must be even, got {head_size}")
    head_dim = torch.arange(0, head_size, 2, device=x.device).float()       # i % head_size, i even
    freq = 1.0 / torch.pow(10000.0, head_dim / float(head_size))
    val = positions.to(device=x.device, dtype=torch.float32)[..., None] * freq
    fcr = torch.cos(val).to(x.dtype)
    fci = torch.sin(val).to(x.dtype)
    v0 = x[..., 0::2]
    v1 = x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = v0 * fcr - v1 * fci
    out[..., 1::2] = v0 * fci + v1 * fcr
    return out
'''),
    Port("gptneox_rotate_half", "EleutherAI/gpt-neox megatron/model/positional_embeddings.py RotaryEmbedding "
         "(emb = cat((freqs, freqs)); cos, sin) and rotate_half (x1, x2 = x[..., :d//2], x[..., d//2:]; "
         "cat((-x2, x1))), apply_rotary_pos_emb: q * cos + rotate_half(q) * sin", "apply_rotary", r'''
def apply_rotary(x, positions):
    dim = x.shape[-1]
    if dim % 2:
        raise ValueError(f"rotary positions rotate pairs of features: the last size must be even, got {dim}")
    inv_freq = 1. / (10000 ** (torch.arange(0, dim, 2, device=x.device).float() / dim))
    t = positions.to(device=x.device).type_as(inv_freq)
    freqs = t[..., None] * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    def rotate_half(x):
        x1, x2 = x[..., :x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=x1.ndim - 1)

    return (x * cos) + (rotate_half(x) * sin)
''', breach="rotates the pairs (i, i + d/2) of the two halves (GPT-NeoX rotate_half) instead of the adjacent pairs "
            "(2i, 2i + 1)",
         names=("half", "rotate_half", "adjacent", "interleav", "pairs", "2i")),
]

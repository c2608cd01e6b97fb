"""Seventh held-out set, graded before any change to the judges.

Ports for notebook 09 (long sequences), from projects no earlier set used: candle (Rust:
candle-transformers mistral.rs prepare_decoder_attention_mask, modernbert.rs get_local_attention_mask,
candle-nn rotary_emb.rs rope_i_slow with quantized_llama.rs precomput_freqs_cis), Hugging Face transformers
(masking_utils.py sliding-window mask functions; the Linformer model of models/linformer/modeling_linformer.py) and
MaxText (src/maxtext/layers/embeddings.py RotaryEmbedding and LLaMARotaryEmbedding).
"""
from tests.corpus import Port

ASSIGNMENT = "09_long_sequences"

PORTS = [
    Port(
        name="candle_local_masks",
        style="huggingface/candle candle-transformers/src/models/mistral.rs prepare_decoder_attention_mask "
              "(NEG_INFINITY if i < j || j + sliding_window < i) for causal=True and modernbert.rs "
              "get_local_attention_mask (NEG_INFINITY if |j - i| > max_distance) for causal=False; the two "
              "per-element conditions vectorized over arange and turned into a boolean mask (True = not -inf)",
        cell="sliding_window_mask",
        code=r'''
def sliding_window_mask(T: int, window: int, causal: bool = False, device=None) -> torch.Tensor:
    i = torch.arange(T, device=device)[:, None]       # query
    j = torch.arange(T, device=device)[None, :]       # key
    if causal:
        # mistral.rs: if i < j || j + sliding_window < i { f32::NEG_INFINITY } else { 0. }
        neg_inf = (i < j) | (j + window < i)
    else:
        # modernbert.rs: if (j as i32 - i as i32).abs() > max_distance as i32 { f32::NEG_INFINITY } else { 0. }
        neg_inf = (j - i).abs() > window
    return ~neg_inf
''',
    ),
    Port(
        name="hf_masking_utils_sliding_window",
        style="huggingface/transformers src/transformers/masking_utils.py: sliding_window_causal_mask_function = "
              "and_masks(sliding_window_overlay (kv_idx > q_idx - sliding_window), causal_mask_function "
              "(kv_idx <= q_idx)) and sliding_window_bidirectional_overlay (abs(q_idx - kv_idx) <= "
              "sliding_window), evaluated on index grids as _non_vmap_expansion_sdpa does",
        cell="sliding_window_mask",
        code=r'''
def sliding_window_mask(T: int, window: int, causal: bool = False, device=None) -> torch.Tensor:
    def causal_mask_function(q_idx, kv_idx):
        return kv_idx <= q_idx

    def sliding_window_overlay(sliding_window):
        def inner_mask(q_idx, kv_idx):
            return kv_idx > q_idx - sliding_window
        return inner_mask

    def sliding_window_bidirectional_overlay(sliding_window):
        def inner_mask(q_idx, kv_idx):
            return abs(q_idx - kv_idx) <= sliding_window
        return inner_mask

    q_idx = torch.arange(T, device=device)[:, None]
    kv_idx = torch.arange(T, device=device)[None, :]
    if causal:
        return sliding_window_overlay(window)(q_idx, kv_idx) & causal_mask_function(q_idx, kv_idx)
    return sliding_window_bidirectional_overlay(window)(q_idx, kv_idx)
''',
        breach="in Hugging Face's causal sliding window the window counts the token itself (kv_idx > q_idx - "
               "window): a query sees i - j < window, one key fewer than 0 <= i - j <= window, and window=0 hides "
               "every key (the bidirectional window is inclusive and right)",
        names=("off by one", "off-by-one", "window", "inclusive", "i - j <= window", "edge", "causal", "itself"),
    ),
    Port(
        name="hf_linformer_self_attention",
        style="huggingface/transformers src/transformers/models/linformer/modeling_linformer.py (the Linformer "
              "model of a branch of the repository, commit 1407558b), LinformerSelfAttention: query/key/value "
              "nn.Linear with their default bias, key_projection/value_projection parameters of shape (heads, k, "
              "seq_length) initialised with std 0.02, torch.matmul(projection, key_layer), scores / "
              "sqrt(head_size), softmax; one head, no attention mask (always all ones here), the projections "
              "named E and F",
        cell="LinformerSelfAttention",
        code=r'''
class LinformerSelfAttention(nn.Module):
    def __init__(self, d_model, seq_len, k, share_projection=False):
        super().__init__()
        self.num_attention_heads = 1
        self.attention_head_size = d_model // self.num_attention_heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.w_q = nn.Linear(d_model, self.all_head_size)      # query
        self.w_k = nn.Linear(d_model, self.all_head_size)      # key
        self.w_v = nn.Linear(d_model, self.all_head_size)      # value
        self.k = k
        self.seq_length = seq_len
        self.share_projection = share_projection
        key_projection = nn.Parameter(torch.Tensor(self.k, self.seq_length))
        torch.nn.init.normal_(key_projection, std=0.02)
        self.E = key_projection
        if not self.share_projection:
            value_projection = nn.Parameter(torch.Tensor(self.k, self.seq_length))
            torch.nn.init.normal_(value_projection, std=0.02)
            self.F = value_projection

    def forward(self, x):
        query_layer = self.w_q(x)
        key_layer = self.w_k(x)
        value_layer = self.w_v(x)
        # project the keys and values along the sequence dimension to a lower dimension k
        key_layer = torch.matmul(self.E, key_layer)
        if self.share_projection:
            value_layer = torch.matmul(self.E, value_layer)
        else:
            value_layer = torch.matmul(self.F, value_layer)
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        # Normalize the attention scores to probabilities.
        attention_probs = torch.softmax(attention_scores, dim=-1)
        context_layer = torch.matmul(attention_probs, value_layer)
        return context_layer, attention_probs
''',
        breach="the query, key and value projections are nn.Linear with their default bias (the exercise asks for "
               "bias-free ones), and E and F start with std 0.02 instead of 1/sqrt(k); no check that T == seq_len "
               "either",
        names=("bias", "init", "0.02", "standard deviation", "1/sqrt(k)", "seq_len"),
    ),
    Port(
        name="candle_rope_i",
        style="huggingface/candle candle-nn/src/rotary_emb.rs rope_i_slow (x reshaped to (..., d/2, 2); "
              "y0 = x0 cos - x1 sin, y1 = x0 sin + x1 cos; cat and flatten_from(-2)) with the cos/sin tables of "
              "candle-transformers quantized_llama.rs precomput_freqs_cis (theta_i = 1 / 10000^(i / head_dim), "
              "i = 0, 2, ...; idx_theta = positions x theta, in f32), for any leading dims and given positions; "
              "the ValueError for an odd d added as the exercise asks",
        cell="apply_rotary",
        code=r'''
def apply_rotary(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    n_embd = x.shape[-1]
    if n_embd % 2:
        raise ValueError(f"rotary embeddings rotate pairs of features: the last size must be even, got {n_embd}")
    # precomput_freqs_cis(head_dim, 10000.)
    theta = 1.0 / (10000.0 ** (torch.arange(0, n_embd, 2, dtype=torch.float32, device=x.device) / n_embd))
    idx_theta = positions.to(device=x.device, dtype=torch.float32).reshape(-1, 1) @ theta.reshape(1, -1)
    cos = idx_theta.cos()
    sin = idx_theta.sin()
    # rope_i_slow
    seq_len = x.shape[-2]
    cos = cos[:seq_len].reshape(seq_len, n_embd // 2, 1).to(x.dtype)
    sin = sin[:seq_len].reshape(seq_len, n_embd // 2, 1).to(x.dtype)
    xr = x.reshape(*x.shape[:-1], n_embd // 2, 2)
    x0 = xr[..., 0:1]
    x1 = xr[..., 1:2]
    y0 = x0 * cos - x1 * sin
    y1 = x0 * sin + x1 * cos
    rope = torch.cat([y0, y1], dim=-1)
    return rope.flatten(-2)
''',
    ),
    Port(
        name="maxtext_rotary_rotate_half",
        style="AI-Hypercomputer/maxtext src/maxtext/layers/embeddings.py, RotaryEmbedding (timescale = "
              "min_timescale * (max/min)^(2i/d), sinusoid_inp = position / timescale, sin and cos of the halves "
              "concatenated, inputs * cos + _rotate_half(inputs) * sin with _rotate_half (x1, x2) -> (-x2, x1)); "
              "[B, S, N, H] broadcasting as (..., T, d), no cast to the fprop dtype",
        cell="apply_rotary",
        code=r'''
def apply_rotary(x: torch.Tensor, positions: torch.Tensor, min_timescale: int = 1,
                 max_timescale: int = 10_000) -> torch.Tensor:
    embedding_dims = x.shape[-1]
    if embedding_dims % 2:
        raise ValueError("Embedding dim for rotary position embedding must be a multiple of 2.")
    half_embedding_dim = embedding_dims // 2
    fraction = 2 * torch.arange(0, half_embedding_dim, device=x.device) / embedding_dims
    timescale = min_timescale * (max_timescale / min_timescale) ** fraction

    def _rotate_half(x):
        """Rotates half the hidden dims of the input: (x1, x2) -> (-x2, x1)."""
        x1, x2 = torch.chunk(x, 2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)

    position = positions.to(x.device)[..., :, None]
    sinusoid_inp = position / timescale
    sin_half = torch.sin(sinusoid_inp).to(x.dtype)
    cos_half = torch.cos(sinusoid_inp).to(x.dtype)
    sin = torch.cat([sin_half, sin_half], dim=-1)
    cos = torch.cat([cos_half, cos_half], dim=-1)
    return (x * cos) + (_rotate_half(x) * sin)
''',
        breach="MaxText's default rotary embedding pairs feature i with feature i + d/2 (rotate_half), not the "
               "neighbouring features (2i, 2i+1) the exercise asks for: the same rotation property, but other "
               "numbers for the same vector",
        names=("pair", "neighbour", "half", "rotate_half", "interleav", "2i, 2i+1", "layout"),
    ),
    Port(
        name="maxtext_llama_rotary_scaled",
        style="AI-Hypercomputer/maxtext src/maxtext/layers/embeddings.py, LLaMARotaryEmbedding (interleaved pairs "
              "through inputs shifted left/right and the sign [-1, 1], timescale per pair, use_scale=True by "
              "default: _apply_scaling_factor, the LLaMA 3.1 rescaling of the low frequencies with scale_factor 8, "
              "low/high_freq_factor 1/4, old_context_len 8192); jax.lax.cond as torch.where, [B, S, N, H] as "
              "(..., T, d), the result cast to x's dtype instead of the fprop dtype",
        cell="apply_rotary",
        code=r'''
def apply_rotary(x: torch.Tensor, positions: torch.Tensor, min_timescale: int = 1, max_timescale: int = 10_000,
                 use_scale: bool = True) -> torch.Tensor:
    embedding_dims = x.shape[-1]
    if embedding_dims % 2:
        raise ValueError("Embedding dim for rotary position embedding must be a multiple of 2.")

    def _apply_scaling_factor(freq):
        """apply scaling factor to rotary position embedding."""
        scale_factor = 8
        low_freq_factor = 1
        high_freq_factor = 4
        old_context_len = 8192  # original llama3 length
        low_freq_wavelen = old_context_len / low_freq_factor
        high_freq_wavelen = old_context_len / high_freq_factor
        wavelen = 2 * math.pi / freq
        smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
        equal_wavelen = (1 - smooth) * freq / scale_factor + smooth * freq
        bigger_or_equal = torch.where(wavelen > low_freq_wavelen, freq / scale_factor, equal_wavelen)
        return torch.where(wavelen < high_freq_wavelen, freq, bigger_or_equal)

    half_embedding_dim = embedding_dims // 2
    fraction = 2 * torch.arange(0, half_embedding_dim, dtype=torch.float32, device=x.device) / embedding_dims
    fraction = torch.repeat_interleave(fraction, 2)
    timescale = min_timescale * (max_timescale / min_timescale) ** fraction
    if use_scale:
        timescale = 1.0 / _apply_scaling_factor(1.0 / timescale)

    # Shift the inputs left and right as per LLaMA's specific behavior
    inputs_shifted_left = torch.cat([x[..., 1:], x[..., :1]], dim=-1)
    inputs_shifted_right = torch.cat([x[..., -1:], x[..., :-1]], dim=-1)
    odd = (torch.arange(embedding_dims, device=x.device) % 2).bool()
    inputs_shifted = torch.where(odd, inputs_shifted_right, inputs_shifted_left)

    position = positions.to(device=x.device, dtype=torch.float32)[..., :, None]
    sinusoid_inp = position / timescale
    sin = torch.sin(sinusoid_inp)
    cos = torch.cos(sinusoid_inp)
    # Apply alternating sign
    sign = torch.tensor([-1.0, 1.0], device=x.device).repeat(half_embedding_dim)
    outputs = x * cos + inputs_shifted * sin * sign
    return outputs.to(x.dtype)
''',
        breach="MaxText's LLaMA rotary embedding rescales the frequencies by default (use_scale=True, LLaMA 3.1): "
               "pairs whose wavelength exceeds 2048 positions turn up to 8 times slower than "
               "10000^(-2i/d), so the angles differ from the exercise's for d >= 8",
        names=("frequenc", "angle", "scal", "10000", "wavelength", "theta"),
    ),
]

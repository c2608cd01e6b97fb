"""Ninth held-out set, notebook 09: ports of the sliding windows of LLM Foundry and Gemma, Long Range Arena's global
mask and Linformer, and the rotary embeddings of lingua and gemma_pytorch, each read at its source."""
from tests.corpus import Port

ASSIGNMENT = "09_long_sequences"

PORTS = [
    Port("llmfoundry_window", "mosaicml/llm-foundry llmfoundry/models/layers/attention.py "
         "scaled_multihead_dot_product_attention with sliding_window_size (window_mask = torch.ones((s_q, s_k), "
         "dtype=torch.bool, device=...); tril(diagonal=sliding_window_size) then triu(diagonal=-sliding_window_size); "
         "for one query window_mask[:, :-(sliding_window_size + 1)] = False; with is_causal its causal mask "
         "new_ones(s, s).tril().to(torch.bool) applies too; the function fills ~window_mask with min_val, here the "
         "kept pairs are returned)", "sliding_window_mask", r'''
def sliding_window_mask(T: int, window: int, causal: bool = False, device=None) -> torch.Tensor:
    s_q = s_k = T
    sliding_window_size = window
    window_mask = torch.ones((s_q, s_k), dtype=torch.bool, device=device)
    if (not s_q == 1):
        window_mask = torch.tril(window_mask, diagonal=sliding_window_size)
        window_mask = torch.triu(window_mask, diagonal=-sliding_window_size)
    else:
        window_mask[:, :-(sliding_window_size + 1)] = False
    if causal and (not s_q == 1):
        s = max(s_q, s_k)
        causal_keep = torch.ones(s, s, dtype=torch.float32, device=device).tril().to(torch.bool)
        window_mask = window_mask & causal_keep[-s_q:, -s_k:]
    return window_mask
'''),
    Port("gemma_sliding_mask", "google-deepmind/gemma gemma/gm/nn/gemma4/_modules.py _create_sliding_mask(positions, "
         "cache_positions, sliding_window_size) (sliding_mask = cache_positions > positions - sliding_window_size; "
         "sliding_mask *= cache_positions < positions + sliding_window_size; the causal part is Gemma's attention "
         "mask, combined with & here; jnp for torch, positions = torch.arange(T, device=device))",
         "sliding_window_mask", r'''
def sliding_window_mask(T: int, window: int, causal: bool = False, device=None) -> torch.Tensor:
    positions = torch.arange(T, device=device)
    sliding_window_size = window
    cache_positions = positions[None, :]  # 1 x cache_len
    positions = positions[:, None]  # L x 1
    sliding_mask = cache_positions > positions - sliding_window_size
    sliding_mask *= cache_positions < positions + sliding_window_size
    if causal:
        sliding_mask = sliding_mask & (cache_positions <= positions)
    return sliding_mask
''', breach="off by one: Gemma's window keeps |i - j| < window (the window size counts the token itself), so every "
            "band is one narrower than |i - j| <= window and window=0 keeps nothing",
         names=("off by one", "window", "|i - j| <= window", "edge", "narrower")),
    Port("lra_global_mask", "google-research/long-range-arena lra_benchmarks/models/longformer/longformer_attention.py "
         "_build_global_mask(mask) (jnp.logical_or(mask[:, None, :, None], mask[:, None, None, :]) for a [batch, "
         "seq_len] boolean mask of the global positions; here the one row torch.arange(T) < n_global, and the "
         "[batch, 1, T, T] result is read at [0, 0])", "global_tokens_mask", r'''
def _build_global_mask(mask):
    return torch.logical_or(mask[:, None, :, None], mask[:, None, None, :])


def global_tokens_mask(T: int, n_global: int, device=None) -> torch.Tensor:
    mask = (torch.arange(T, device=device) < n_global)[None, :]   # [batch_size = 1, seq_len]
    return _build_global_mask(mask)[0, 0]
'''),
    Port("lra_linformer", "google-research/long-range-arena lra_benchmarks/models/linformer/linformer_attention.py "
         "LinformerAttention (query, key and value DenseGeneral without bias in LinformerBlock; ONE 'lr_kernel' "
         "(max_len, low_rank_features), xavier_uniform, shared by low_rank_projection(key) and low_rank_projection("
         "value); dot_product_attention scales by 1/sqrt(head_dim); one head here; the kernel is stored as the "
         "course's (k, seq_len) E, with F the same parameter, and LRA's output DenseGeneral 'out' is left out since "
         "the course's layer returns the attention itself)", "LinformerSelfAttention", r'''
class LinformerSelfAttention(nn.Module):
    def __init__(self, d_model, seq_len, k):
        super().__init__()
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, d_model, bias=False)
        self.w_v = nn.Linear(d_model, d_model, bias=False)
        # Shared Kernel for low-rank length dimension projections.
        self.E = nn.Parameter(nn.init.xavier_uniform_(torch.empty(k, seq_len)))
        self.F = self.E

    def low_rank_projection(self, inputs, kernel):
        input_dim = inputs.shape[1]
        # this kernel/parameter relies on sequence length
        kernel = kernel[:, :input_dim]
        return kernel @ inputs                                         # (k, T) @ (B, T, d) -> (B, k, d)

    def forward(self, x):
        query, key, value = self.w_q(x), self.w_k(x), self.w_v(x)
        key = self.low_rank_projection(key, self.E)
        value = self.low_rank_projection(value, self.F)
        weights = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1]), dim=-1)
        return weights @ value, weights
''', breach="one projection shared by the keys and the values: F is the same parameter as E, so F V uses E and "
            "setting F changes E (LRA's single 'lr_kernel')",
         names=("share", "same", "tied", "e and f", "separate")),
    Port("lingua_rotary", "facebookresearch/lingua lingua/transformer.py precompute_freqs_cis(dim, end, theta=10000) "
         "(freqs = 1 / theta^(arange(0, dim, 2)[:dim // 2] / dim); outer with the positions; cos, sin stacked into a "
         "(.., dim/2, 2, 2) rotation matrix [[cos, -sin], [sin, cos]]) and apply_rotary_emb (x.reshape(..., -1, 1, 2) "
         "* freqs_cis, .sum(-1).flatten: neighbouring features form a pair; the given positions instead of "
         "arange(end), made on x.device; the course's ValueError for an odd d is added)", "apply_rotary", r'''
def apply_rotary(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    dim = x.shape[-1]
    if dim % 2:
        raise ValueError(f"rotary positions rotate pairs of features: d must be even, got {dim}")
    theta = 10000.0
    # precompute_freqs_cis(dim, end, theta), at the given positions
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, device=x.device)[: (dim // 2)].float() / dim))
    t = positions.to(freqs.device)
    freqs = torch.outer(t, freqs).float()
    cos, sin = freqs.cos(), freqs.sin()
    freqs_cis = torch.stack((cos, -sin, sin, cos), dim=-1).view(*freqs.size(), 2, 2)   # T D/2 2 2
    # apply_rotary_emb
    x_ = x.reshape(*x.shape[:-1], -1, 1, 2)  # ... T D -> ... T D/2 1 2
    x_out = (x_ * freqs_cis.float()).sum(-1).flatten(-2)
    return x_out.type_as(x)
'''),
    Port("gemma_pytorch_rotary", "google/gemma_pytorch gemma/model.py precompute_freqs_cis(dim, end, theta=10000) "
         "(torch.polar of outer(t, 1 / theta^(arange(0, dim, 2) / dim))) and apply_rotary_emb(x, freqs_cis) "
         "(view_as_complex(torch.stack(torch.chunk(x.float(), 2, dim=-1), dim=-1)): feature i is paired with feature "
         "i + d/2; x_out = cat(chunk(view_as_real(x_ * freqs_cis), 2, dim=-1), dim=-2); its transposes for the "
         "(batch, seq, heads, head_dim) layout are left out, the course's x is (..., T, d); the given positions "
         "for arange(end); the course's ValueError for an odd d is added)", "apply_rotary", r'''
def apply_rotary(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    dim = x.shape[-1]
    if dim % 2:
        raise ValueError(f"rotary positions rotate pairs of features: d must be even, got {dim}")
    theta = 10000.0
    rope_scaling_factor = 1
    freqs = 1.0 / (theta**(torch.arange(0, dim, 2, device=x.device)[:(dim // 2)].float() / dim))
    freqs = freqs / rope_scaling_factor
    t = positions.to(freqs.device)
    freqs = torch.outer(t, freqs).float()
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)  # complex64
    # apply_rotary_emb
    x_ = torch.view_as_complex(torch.stack(torch.chunk(x.float(), 2, dim=-1), dim=-1))
    x_out = torch.view_as_real(x_ * freqs_cis).type_as(x)
    x_out = torch.cat(torch.chunk(x_out, 2, dim=-1), dim=-2)
    x_out = x_out.reshape(*x_out.shape[:-2], -1)
    return x_out
''', breach="pairs feature i with feature i + d/2 (the two halves of the vector), not the neighbours (2i, 2i+1) "
            "the notebook asks for",
         names=("half", "halves", "neighbour", "pairs", "rotate_half")),
]

"""Eighth held-out set, graded before any change to the judges.

Held-out set 8, notebook 09: ports of WeNet (wenet-e2e/wenet, wenet/utils/mask.py), llama.cpp
(ggml-org/llama.cpp src/llama-hparams.cpp, C++), crybot/linformer, Hugging Face Cohere, ESM
(facebookresearch/esm) and tunz/transformer-pytorch, each read at its source.
"""
from tests.corpus import Port

ASSIGNMENT = "09_long_sequences"

PORTS = [
    Port(
        "wenet_causal_or_lookahead_mask",
        "wenet-e2e/wenet wenet/utils/mask.py causal_or_lookahead_mask (start = i - left_context clipped at 0, "
        "end = i + right_context + 1, (gt & lt) * mask.transpose(1, 2) * mask) with an all-True (1, 1, T) "
        "non-pad mask; right_context = 0 for the causal window",
        "sliding_window_mask",
        r'''
def causal_or_lookahead_mask(mask, right_context, left_context, left_t_valid=0):
    """Create mask (B, T, T) with history or future or both,
       this is for causal or noncausal streaming encoder
    """
    _, _, T = mask.size()
    indices = torch.arange(T, device=mask.device)
    start = torch.where(indices > left_context, indices - left_context, 0)
    start = torch.where(indices < left_t_valid, indices, start).unsqueeze(1)

    end = indices + right_context + 1
    end = end.unsqueeze(1)
    indices_expand = indices.unsqueeze(0)
    gt = (indices_expand >= start)
    lt = (indices_expand < end)

    return (gt & lt) * mask.transpose(1, 2) * mask


def sliding_window_mask(T: int, window: int, causal: bool = False, device=None) -> torch.Tensor:
    seq_mask = torch.ones(1, 1, T, dtype=torch.bool, device=device)      # no padding: every position is real
    right_context = 0 if causal else window
    return causal_or_lookahead_mask(seq_mask, right_context, window)[0]
''',
    ),
    Port(
        "llama_cpp_is_masked_swa",
        "ggml-org/llama.cpp src/llama-hparams.cpp llama_hparams::is_masked_swa (LLAMA_SWA_TYPE_STANDARD: masked "
        "when p1 - p0 >= n_swa, on top of the causal KV mask; LLAMA_SWA_TYPE_SYMMETRIC: masked when "
        "|p1 - p0| > n_swa / 2), vectorised over all (query, key) pairs with window = n_swa",
        "sliding_window_mask",
        r'''
def sliding_window_mask(T: int, window: int, causal: bool = False, device=None) -> torch.Tensor:
    n_swa = window
    p1 = torch.arange(T, device=device)[:, None]    # query positions
    p0 = torch.arange(T, device=device)[None, :]    # key positions
    if causal:
        # LLAMA_SWA_TYPE_STANDARD (the KV cache already hides p0 > p1)
        masked = (p0 > p1) | (p1 - p0 >= n_swa)
    else:
        # LLAMA_SWA_TYPE_SYMMETRIC
        half_n_swa = n_swa // 2
        pos_diff = p1 - p0
        masked = (pos_diff < -half_n_swa) | (pos_diff > half_n_swa)
    return ~masked
''',
        breach="llama.cpp's n_swa is the size of the whole window, not the reach on each side: the causal window "
               "keeps window keys counting the query itself (0 <= i - j < window, one fewer than the course), and "
               "the symmetric one keeps |i - j| <= window // 2",
        names=("off by one", "half", "each side", "fewer", "too narrow", "window + 1"),
    ),
    Port(
        "crybot_linformer_linear_projections",
        "crybot/linformer src/models/transformers.py LinformerAttention (E = nn.Linear(sequence_length, k, "
        "bias=False), F likewise; k = E.weight @ K, v = F.weight @ V) with scaled_dot_product_attention of the "
        "same file; one head, separate bias-free w_q/w_k/w_v for its fused qkv_proj",
        "LinformerSelfAttention",
        r'''
class LinformerSelfAttention(nn.Module):
    """ Multi head attention with linear projections on K and V (one head here)
    """
    def __init__(self, d_model, seq_len, k):
        super().__init__()
        self.dim = d_model
        self.k = k
        self.sequence_length = seq_len
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, d_model, bias=False)
        self.w_v = nn.Linear(d_model, d_model, bias=False)

        # Using Linear so that it automatically handles initialization
        self.E = nn.Linear(seq_len, k, bias=False)
        self.F = nn.Linear(seq_len, k, bias=False)

    def forward(self, x):
        q, key, v = self.w_q(x), self.w_k(x), self.w_v(x)

        # Broadcast E @ K and F @ V over batch and head dimensions
        proj_k = self.E.weight
        proj_v = self.F.weight
        if key.shape[1] < self.sequence_length:
            proj_k = proj_k[:, :key.shape[1]]
            proj_v = proj_v[:, :key.shape[1]]
        key = torch.matmul(proj_k, key)
        v = torch.matmul(proj_v, v)

        attn = torch.matmul(q, key.transpose(-1, -2))
        attn = attn / math.sqrt(self.dim)
        attn = torch.softmax(attn, dim=-1)
        return torch.matmul(attn, v), attn
''',
        breach="E and F are nn.Linear(seq_len, k) modules (their weights initialised by nn.Linear, uniform with "
               "bound 1/sqrt(seq_len)) instead of nn.Parameter tensors of shape (k, seq_len) drawn with "
               "standard deviation 1/sqrt(k)",
        names=("nn.parameter", "parameter", "nn.linear", "initiali", "standard deviation", "1/sqrt(k)"),
    ),
    Port(
        "cohere_rotary_interleaved",
        "huggingface/transformers src/transformers/models/cohere/modeling_cohere.py CohereRotaryEmbedding.forward "
        "(emb = torch.repeat_interleave(freqs, 2, dim=-1)), rotate_half (x[..., ::2], x[..., 1::2], stack, "
        "flatten) and apply_rotary_pos_emb (computed in float32), for one tensor",
        "apply_rotary",
        r'''
def rotate_half(x):
    # Split and rotate. Note that this function is different from e.g. Llama.
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    rot_x = torch.stack([-x2, x1], dim=-1).flatten(-2)
    return rot_x


def apply_rotary(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    dim = x.shape[-1]
    if dim % 2:
        raise ValueError(f"rotary embeddings rotate pairs of features: got {dim} features")
    base = 10000.0
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64, device=x.device).float() / dim))
    position_ids_expanded = positions.to(x.device)[None, :].float()
    freqs = (inv_freq[:, None].float() @ position_ids_expanded.float()).transpose(0, 1)
    emb = torch.repeat_interleave(freqs, 2, dim=-1)  # diff from Llama: we interleave() instead of cat()
    cos = emb.cos()
    sin = emb.sin()

    dtype = x.dtype
    q = x.float()
    q_embed = (q * cos) + (rotate_half(q) * sin)
    return q_embed.to(dtype=dtype)
''',
    ),
    Port(
        "esm_rotary_rotate_half",
        "facebookresearch/esm esm/rotary_embedding.py rotate_half (x.chunk(2, dim=-1)), apply_rotary_pos_emb and "
        "RotaryEmbedding._update_cos_sin_tables (emb = torch.cat((freqs, freqs), dim=-1)), with the given positions",
        "apply_rotary",
        r'''
def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    dim = x.shape[-1]
    if dim % 2:
        raise ValueError(f"rotary embeddings need an even number of features, got {dim}")
    # Generate and save the inverse frequency buffer (non trainable)
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, device=x.device).float() / dim))
    t = positions.to(x.device).type_as(inv_freq)
    freqs = torch.einsum("i,j->ij", t, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1).to(x.device)
    cos = emb.cos().to(x.dtype)
    sin = emb.sin().to(x.dtype)
    return (x * cos) + (rotate_half(x) * sin)
''',
        breach="ESM's rotate_half pairs feature i with feature i + d/2 (the two halves, GPT-NeoX style) instead of "
               "the neighbouring features (2i, 2i + 1) that the course rotates together",
        names=("half", "neighbour", "neighbor", "(2i, 2i+1)", "rotate_half", "i + d/2"),
    ),
    Port(
        "tunz_encdec_cache_only",
        "tunz/transformer-pytorch decoder.py decoding loop and model/transformer.py MultiHeadAttention.forward "
        "(cache['encdec_k'], cache['encdec_v'] kept per layer; the decoder re-run on all targets at every step), "
        "with the course's Transformer parts, greedy instead of beam search",
        "greedy_decode_cached",
        r'''
def _enc_dec_attention(attn, q, k, v, mask, cache=None):
    # MultiHeadAttention.forward: the encoder-decoder keys and values are computed once and cached
    if cache is not None and 'encdec_k' in cache:
        k, v = cache['encdec_k'], cache['encdec_v']
    else:
        k = split_heads(attn.w_k(k), attn.n_heads)
        v = split_heads(attn.w_v(v), attn.n_heads)
        if cache is not None:
            cache['encdec_k'], cache['encdec_v'] = k, v
    q = split_heads(attn.w_q(q), attn.n_heads)
    x, _ = scaled_dot_product_attention(q, k, v, mask)
    return attn.w_o(merge_heads(x))


def _decoder_layer(layer, x, enc_output, self_mask, i_mask, cache):
    y = layer.self_attn(x, x, x, self_mask)[0]
    x = layer.norm1(x + y)
    y = _enc_dec_attention(layer.cross_attn, x, enc_output, enc_output, i_mask, cache)
    x = layer.norm2(x + y)
    return layer.norm3(x + layer.ff(x))


@torch.no_grad()
def greedy_decode_cached(model, src, max_len, bos_id, eos_id):
    src_mask = padding_mask(src, model.pad_id)
    enc_output = model.encode(src, src_mask)
    i_mask = src_mask.unsqueeze(1)
    cache = {}
    targets = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for idx in range(max_len):
        target_size = targets.size(1)
        t_self_mask = torch.ones(target_size, target_size, dtype=torch.bool, device=src.device).tril()
        decoder_output = model.positions(model.tgt_embed(targets) * math.sqrt(model.d_model))
        for i, dec_layer in enumerate(model.decoder_layers):
            if i not in cache:
                cache[i] = {}
            decoder_output = _decoder_layer(dec_layer, decoder_output, enc_output, t_self_mask, i_mask, cache[i])
        pred = model.output(decoder_output)[:, idx]
        next_token = pred.argmax(-1).masked_fill(done, model.pad_id)
        targets = torch.cat((targets, next_token[:, None]), dim=1)
        done |= next_token == eos_id
        if done.all():
            break
    return targets[:, 1:]
''',
        breach="tunz's decoder caches only the encoder-decoder keys and values; at every step it runs the decoder "
               "again on all the tokens written so far, so the self-attention recomputes every query, key and "
               "value instead of attending from the newest token to cached keys",
        names=("newest", "every step", "all the tokens", "recomput", "self-attention cache", "one query"),
    ),
]

"""Held-out ports of notebook 09 (sliding windows, Linformer, rotary positions, key/value cache) in the styles of
public projects the course's own corpus does not use (xformers, flash-attention's reference, bert4keras /
RoFormer, mistral-src, Whisper)."""
from . import Port

ASSIGNMENT = "09_long_sequences"

POLARITY = ("true = masked", "inverted", "polarity", "true where masked", "opposite")

PORTS = [
    # --- sliding_window_mask --------------------------------------------------------------------------
    Port("xformers LocalAttentionFromBottomRightMask(window_left, window_right).materialize",
         "facebookresearch/xformers xformers/ops/fmha/attn_bias.py, LocalAttentionFromBottomRightMask: 'the query "
         "at position q can attend the key at position k if q - window_left <= k + s <= q + window_right'; "
         "materialize: torch.full(shape, 1); triu(diagonal=shift - window_left); tril(diagonal=shift + "
         "window_right); torch.log (0 / -inf); read back as a bool band (bias == 0)", "sliding_window_mask", '''
class LocalAttentionFromBottomRightMask:
    """A local attention mask: the query at position q can attend the key at position k if
    q - window_left <= k + s <= q + window_right, with s = num_queries - num_keys."""

    def __init__(self, window_left, window_right):
        if window_left < 0:
            raise ValueError("Invalid window value passed to `LocalAttentionFromBottomRightMask`: expected"
                             f"`window_left > 0` but got window_left={window_left}")
        if window_right < 0:
            raise ValueError("Invalid window value passed to `LocalAttentionFromBottomRightMask`: expected"
                             f"`window_right > 0` but got window_right={window_right}")
        self.window_left = window_left
        self.window_right = window_right

    def materialize(self, shape, dtype=torch.float32, device="cpu"):
        create_as = dtype if dtype is not torch.bfloat16 else torch.float32
        mask = torch.full(shape, dtype=create_as, fill_value=1, device=device)
        num_queries, num_keys = shape[-2:]
        shift = num_keys - num_queries
        mask = torch.triu(mask, diagonal=shift - self.window_left)
        mask = torch.tril(mask, diagonal=shift + self.window_right)
        mask = torch.log(mask)
        return mask.to(dtype)


def sliding_window_mask(T, window, causal=False, device=None):
    bias = LocalAttentionFromBottomRightMask(window_left=window, window_right=0 if causal else window)
    return bias.materialize((T, T), device=device) == 0
'''),
    Port("flash-attention test reference construct_local_mask (True = outside the window)",
         "Dao-AILab/flash-attention tests/test_flash_attn.py, construct_local_mask(seqlen_q, seqlen_k, window_size="
         "(left, right)): returns logical_or(col_idx > min(row_idx + sk - sq + window_size[1], sk), col_idx < "
         "row_idx + sk - sq - window_size[0]), used as scores.masked_fill_(local_mask, float('-inf')); causal "
         "means window_size[1] = 0", "sliding_window_mask", '''
def construct_local_mask(seqlen_q, seqlen_k, window_size=(-1, -1), query_padding_mask=None,
                         key_padding_mask=None, device=None):
    row_idx = torch.arange(seqlen_q, device=device, dtype=torch.long)[:, None]   # "s -> s 1"
    col_idx = torch.arange(seqlen_k, device=device, dtype=torch.long)
    sk = seqlen_k if key_padding_mask is None else key_padding_mask.sum(-1)[:, None, None, None]
    sq = seqlen_q if query_padding_mask is None else query_padding_mask.sum(-1)[:, None, None, None]
    if window_size[0] < 0:
        return col_idx > row_idx + sk - sq + window_size[1]
    else:
        sk = torch.full_like(col_idx, seqlen_k) if key_padding_mask is None else sk
        return torch.logical_or(
            col_idx > torch.minimum(row_idx + sk - sq + window_size[1], sk),
            col_idx < row_idx + sk - sq - window_size[0],
        )


def sliding_window_mask(T, window, causal=False, device=None):
    window_size = (window, 0 if causal else window)
    return construct_local_mask(T, T, window_size, device=device)
''', breach="flash-attention's reference local mask is True where a key lies OUTSIDE the window (it is passed to "
            "masked_fill), the opposite of the course's True = may attend",
         names=POLARITY),

    # --- LinformerSelfAttention -----------------------------------------------------------------------
    Port("xformers LinformerAttention (E, F applied along the sequence with a transpose, pad to seq_len)",
         "facebookresearch/xformers xformers/components/attention/linformer.py, LinformerAttention: self.E = "
         "nn.Linear(seq_len, k, bias=False) (weight (k, seq_len), kept as the Parameter E here); k_projected = "
         "self.E(k.transpose(-2, -1)).transpose(-2, -1); att = (q @ k_projected.transpose(-2, -1)) * (1.0 / "
         "math.sqrt(k_projected.size(-1))); softmax; attn_drop; att @ v_projected; shorter inputs are padded to "
         "seq_len and the output cut back", "LinformerSelfAttention", '''
class LinformerSelfAttention(nn.Module):
    def __init__(self, d_model, seq_len, k, dropout=0.0):
        super().__init__()
        self.k = k
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, d_model, bias=False)
        self.w_v = nn.Linear(d_model, d_model, bias=False)
        self.E = nn.Parameter(torch.randn(k, seq_len) / math.sqrt(k))
        self.F = nn.Parameter(torch.randn(k, seq_len) / math.sqrt(k))
        self.attn_drop = nn.Dropout(dropout, inplace=False)
        self.seq_len = seq_len

    def forward(self, x):
        q, k, v = self.w_q(x), self.w_k(x), self.w_v(x)
        # Handle a smaller dimension than expected
        padding = 0
        if q.shape[1] < self.seq_len:
            padding = self.seq_len - q.shape[1]
            pad_dims = (0, 0, 0, padding)
            q = torch.nn.functional.pad(q, pad_dims)
            k = torch.nn.functional.pad(k, pad_dims)
            v = torch.nn.functional.pad(v, pad_dims)
        # Project K and V, over the sequence length axis
        k_projected = torch.nn.functional.linear(k.transpose(-2, -1), self.E).transpose(-2, -1)
        v_projected = torch.nn.functional.linear(v.transpose(-2, -1), self.F).transpose(-2, -1)
        # Self-attend: (B, S, hs) x (B, hs, k) -> (B, S, k)
        att = (q @ k_projected.transpose(-2, -1)) * (1.0 / math.sqrt(k_projected.size(-1)))
        att = torch.softmax(att, dim=-1)
        weights = att
        att = self.attn_drop(att)
        y = att @ v_projected
        if padding > 0:
            return y[:, :-padding, :], weights[:, :-padding, :]
        return y, weights
'''),

    # --- apply_rotary ---------------------------------------------------------------------------------
    Port("bert4keras / RoFormer sinusoidal_embeddings + apply_rotary_position_embeddings",
         "bojone/bert4keras bert4keras/backend.py, sinusoidal_embeddings(pos, dim, base=10000): indices = "
         "pow(base, -2 * arange(dim // 2) / dim); stack([sin, cos], -1) flattened; apply_rotary_position_"
         "embeddings: cos_pos = repeat_elements(sinusoidal[..., 1::2], 2, -1); sin_pos = repeat_elements("
         "sinusoidal[..., ::2], 2, -1); tensor2 = stack([-tensor[..., 1::2], tensor[..., ::2]]) reshaped; tensor "
         "* cos_pos + tensor2 * sin_pos", "apply_rotary", '''
def sinusoidal_embeddings(pos, dim, base=10000):
    assert dim % 2 == 0
    indices = torch.arange(0, dim // 2, dtype=torch.float32, device=pos.device)
    indices = torch.pow(torch.tensor(base, dtype=torch.float32, device=pos.device), -2 * indices / dim)
    embeddings = torch.einsum("...,d->...d", pos, indices)
    embeddings = torch.stack([torch.sin(embeddings), torch.cos(embeddings)], dim=-1)
    embeddings = embeddings.flatten(-2)
    return embeddings


def apply_rotary_position_embeddings(sinusoidal, *tensors):
    cos_pos = sinusoidal[..., 1::2].repeat_interleave(2, dim=-1)
    sin_pos = sinusoidal[..., ::2].repeat_interleave(2, dim=-1)
    outputs = []
    for tensor in tensors:
        tensor2 = torch.stack([-tensor[..., 1::2], tensor[..., ::2]], dim=-1)
        tensor2 = tensor2.reshape(tensor.shape)
        outputs.append(tensor * cos_pos + tensor2 * sin_pos)
    return outputs[0] if len(outputs) == 1 else outputs


def apply_rotary(x, positions):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"rotary embeddings rotate pairs of features: d must be even, got {d}")
    pos = sinusoidal_embeddings(positions.to(device=x.device, dtype=torch.float32), d)
    return apply_rotary_position_embeddings(pos.to(x.dtype), x)
'''),
    Port("mistral-src precompute_freqs_cis with theta = rope_theta or 1e6",
         "mistralai/mistral-inference src/mistral_inference/transformer.py, Transformer.freqs_cis: theta = "
         "self.args.rope_theta or 1000000.0 ('default to 10**6'); rope.py precompute_freqs_cis(dim, end, theta): "
         "freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim)); torch.polar; "
         "apply_rotary_emb: view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2)) * freqs_cis (freqs_cis "
         "indexed by the given positions)", "apply_rotary", '''
def precompute_freqs_cis(dim, positions, theta):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, device=positions.device)[: (dim // 2)].float() / dim))
    freqs = torch.outer(positions.float(), freqs).float()
    return torch.polar(torch.ones_like(freqs), freqs)  # complex64


def apply_rotary_emb(xq, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(-2)
    return xq_out.type_as(xq)


def apply_rotary(x, positions, rope_theta=None):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"rotary embeddings need an even feature size, got {d}")
    # default to 10**6
    theta = rope_theta or 1000000.0
    freqs_cis = precompute_freqs_cis(d, positions.to(x.device), theta)
    return apply_rotary_emb(x, freqs_cis)
''', breach="uses mistral's default base theta = 10**6 for the frequencies instead of 10000: pair i turns by "
            "p * 1e6^(-2i/d)",
         names=("10000", "theta", "frequenc", "1e6", "1000000", "the base")),

    # --- greedy_decode_cached -------------------------------------------------------------------------
    Port("Whisper install_kv_cache_hooks (forward hooks on the key / value projections concatenate the cache)",
         "openai/whisper whisper/model.py, Whisper.install_kv_cache_hooks: save_to_cache(module, _, output): "
         "cache[module] = output for the first token, else torch.cat([cache[module], output], dim=1).detach(); "
         "return cache[module]; hooks on every MultiHeadAttention's key and value Linear; MultiHeadAttention."
         "forward reuses kv_cache[self.key] for cross-attention ('calculate keys and values once'); hooks removed "
         "in a finally (the stopping and padding follow the course's greedy_decode)", "greedy_decode_cached", '''
def _sublayer(layer, x, norm, fn):
    if layer.norm_first:
        return x + fn(norm(x))
    return norm(x + fn(x))


@torch.no_grad()
def greedy_decode_cached(model, src, max_len, bos_id, eos_id):
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    memory_mask = src_mask.unsqueeze(1)
    layers = list(model.decoder_layers)

    cache, hooks = {}, []

    def save_to_cache(module, _, output):
        if module not in cache:
            cache[module] = output  # save as-is, for the first token
        else:
            cache[module] = torch.cat([cache[module], output], dim=1).detach()
        return cache[module]

    for layer in layers:
        hooks.append(layer.self_attn.w_k.register_forward_hook(save_to_cache))
        hooks.append(layer.self_attn.w_v.register_forward_hook(save_to_cache))
        # for cross-attention, calculate keys and values once and reuse in subsequent calls
        cache[layer.cross_attn.w_k] = layer.cross_attn.w_k(memory)
        cache[layer.cross_attn.w_v] = layer.cross_attn.w_v(memory)

    def cross_attention(attn, x):
        q = split_heads(attn.w_q(x), attn.n_heads)
        k = split_heads(cache[attn.w_k], attn.n_heads)
        v = split_heads(cache[attn.w_v], attn.n_heads)
        out, _ = scaled_dot_product_attention(q, k, v, memory_mask)
        return attn.w_o(merge_heads(out))

    positional_embedding = model.positions(memory.new_zeros(1, max_len, model.d_model))[0]
    tokens = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    try:
        for offset in range(max_len):
            x = model.tgt_embed(tokens[:, -1:]) * math.sqrt(model.d_model) + positional_embedding[offset]
            for layer in layers:
                # the module's key / value projections return every key and value so far (the hooks)
                x = _sublayer(layer, x, layer.norm1, lambda h, layer=layer: layer.self_attn(h, h, h)[0])
                x = _sublayer(layer, x, layer.norm2, lambda h, layer=layer: cross_attention(layer.cross_attn, h))
                x = _sublayer(layer, x, layer.norm3, layer.ff)
            next_tokens = model.output(x)[:, -1].argmax(dim=-1).masked_fill(done, model.pad_id)
            tokens = torch.cat([tokens, next_tokens[:, None]], dim=-1)
            done = done | (next_tokens == eos_id)
            if done.all():
                break
    finally:
        for hook in hooks:
            hook.remove()
    return tokens[:, 1:]
'''),
]

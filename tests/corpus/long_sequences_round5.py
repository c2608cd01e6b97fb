"""Fifth held-out set, notebook 09: OpenAI sparse_attention, DeepSpeed sparse attention (sparsity_config),
Nystromformer (LRA Linformer baseline), GPT-J (mesh-transformer-jax), TorchScale RetNet, OpenNMT-tf."""
from tests.corpus import Port

ASSIGNMENT = "09_long_sequences"

PORTS = [
    Port(
        "Sparse Transformer 'local' mask: band of local_attn_ctx tokens including the query",
        "openai/sparse_attention, attention.py: get_attn_mask(n, 'local', local_attn_ctx) (ctx = min(n - 1, "
        "bandwidth - 1); tf.matrix_band_part(ones, ctx, 0)); the non-causal case mirrors the band",
        "sliding_window_mask",
        r'''
def sliding_window_mask(T: int, window: int, causal: bool = False, device=None) -> torch.Tensor:
    bandwidth = window                                  # local_attn_ctx
    ctx = min(T - 1, bandwidth - 1)
    i = torch.arange(T, device=device)
    offset = i[:, None] - i[None, :]                    # m - n
    everything = torch.ones(T, T, dtype=torch.bool, device=device)

    def band_part(num_lower, num_upper):                # tf.matrix_band_part semantics (negative = keep all)
        lower = offset <= num_lower if num_lower >= 0 else everything
        upper = -offset <= num_upper if num_upper >= 0 else everything
        return lower & upper

    return band_part(ctx, 0 if causal else ctx)
''',
        breach="the window counts the query itself (bandwidth = window keys back including i, i.e. "
               "|i - j| <= window - 1): one neighbour fewer on each side, and window=0 keeps the whole past (everything when not "
               "causal)",
        names=("off by one", "off-by-one", "window - 1", "one fewer", "edge", "boundary", "inclusive", "bandwidth",
               "|i - j| <= window", "window=0"),
    ),
    Port(
        "DeepSpeed BSLongformerSparsityConfig.set_global_layout (block = 1 token)",
        "microsoft/DeepSpeed, deepspeed/ops/sparse_attention/sparsity_config.py: BSLongformerSparsityConfig."
        "set_global_layout (for idx in global_block_indices: if idx < num_blocks: layout[idx, :] = 1; "
        "layout[:, idx] = 1); layout made on `device`",
        "global_tokens_mask",
        r'''
def global_tokens_mask(T: int, n_global: int, device=None) -> torch.Tensor:
    num_blocks = T
    layout = torch.zeros((num_blocks, num_blocks), dtype=torch.bool, device=device)
    global_block_indices = range(n_global)
    for idx in global_block_indices:
        # if global block idx is in the range of the sequence blocks
        if idx < num_blocks:
            layout[idx, :] = True      # global rows
            layout[:, idx] = True      # global columns
    return layout
''',
    ),
    Port(
        "DeepSpeed VariableSparsityConfig.set_global_layout: horizontal_global_attention=False",
        "microsoft/DeepSpeed, deepspeed/ops/sparse_attention/sparsity_config.py: VariableSparsityConfig."
        "set_global_layout (global rows only if horizontal_global_attention, default False; global columns "
        "always)",
        "global_tokens_mask",
        r'''
def global_tokens_mask(T: int, n_global: int, device=None, horizontal_global_attention: bool = False,
                       attention: str = "bidirectional") -> torch.Tensor:
    num_blocks = T
    layout = torch.zeros((num_blocks, num_blocks), dtype=torch.bool, device=device)
    for idx in range(n_global):
        if idx < num_blocks:
            # global rows
            if horizontal_global_attention:
                layout[idx, :] = True
            # global columns
            first_row = 0 if attention == "bidirectional" else idx
            layout[first_row:, idx] = True
    return layout
''',
        breach="only the global columns are set (every token sees the global tokens) but not the global rows "
               "(horizontal_global_attention defaults to False), so the global tokens do not see every token",
        names=("row", "horizontal", "see every", "attend to every", "attends to every", "symmetric",
               "both directions", "one direction", "columns only", "only the columns"),
    ),
    Port(
        "Nystromformer LRA LinformerAttention: one projection E for keys and values",
        "mlpen/Nystromformer, LRA/code/attention_linformer.py: LinformerAttention (projection_matrix of shape "
        "(heads, linformer_k, seq_len), normal std 0.02, K = E @ K and V = E @ V); single head, bias-free w_q/w_k/w_v "
        "for the course API",
        "LinformerSelfAttention",
        r'''
class LinformerSelfAttention(nn.Module):
    def __init__(self, d_model, seq_len, k):
        super().__init__()
        self.seq_len, self.k = seq_len, k
        self.linformer_k = k
        self.head_dim = d_model
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, d_model, bias=False)
        self.w_v = nn.Linear(d_model, d_model, bias=False)
        self.E = nn.Parameter(torch.empty(self.linformer_k, self.seq_len))
        torch.nn.init.normal_(self.E, std=0.02)

    def forward(self, x):
        Q, K, V = self.w_q(x), self.w_k(x), self.w_v(x)
        K = torch.matmul(self.E, K)
        V = torch.matmul(self.E, V)
        dot = torch.matmul(Q, torch.transpose(K, -2, -1))
        dot = dot / math.sqrt(self.head_dim)
        attn = torch.softmax(dot, dim=-1)
        X = torch.matmul(attn, V)
        return X, attn
''',
        breach="keys and values are projected with the same matrix E (there is no separate F), and E starts with "
               "standard deviation 0.02 instead of 1/sqrt(k)",
        names=("shared", "share", "same matrix", "same projection", "single projection", "one projection",
               "separate", "missing f", "no f", "e and f", "std", "0.02", "1/sqrt(k)", "init"),
    ),
    Port(
        "GPT-J rotary: fixed_pos_embedding + rotate_every_two",
        "kingoflolz/mesh-transformer-jax, mesh_transformer/layers.py: fixed_pos_embedding, rotate_every_two, "
        "apply_rotary_pos_emb (sin/cos repeated per pair, x * cos + rotate_every_two(x) * sin); angles from the "
        "given positions, odd d check added",
        "apply_rotary",
        r'''
def rotate_every_two(x):
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    x = torch.stack((-x2, x1), dim=-1)
    return x.flatten(-2)                      # rearrange(x, '... d j -> ... (d j)')


def apply_rotary(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    dim = x.shape[-1]
    if dim % 2:
        raise ValueError(f"rotary embeddings need an even last dimension, got {dim}")
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.float32, device=x.device) / dim))
    sinusoid_inp = torch.einsum("i , j -> i j", positions.to(device=x.device, dtype=torch.float32), inv_freq)
    sin, cos = torch.sin(sinusoid_inp), torch.cos(sinusoid_inp)
    # repeat(t, '... b n -> ... b (n j)', j=2)
    sin, cos = (t.repeat_interleave(2, dim=-1).to(x.dtype) for t in (sin, cos))
    return (x * cos) + (rotate_every_two(x) * sin)
''',
    ),
    Port(
        "TorchScale RetNet relative position: angle = 1 / 10000 ** linspace(0, 1, d/2)",
        "microsoft/torchscale, torchscale/architecture/retnet.py: RetNetRelPos (angle = 1.0 / (10000 ** "
        "torch.linspace(0, 1, head_dim // 2)), repeated per pair) and component/multiscale_retention.py: "
        "theta_shift / rotate_every_two; odd d check added",
        "apply_rotary",
        r'''
def rotate_every_two(x):
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    x = torch.stack((-x2, x1), dim=-1)
    return x.flatten(-2)


def theta_shift(x, sin, cos):
    return (x * cos) + (rotate_every_two(x) * sin)


def apply_rotary(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"rotary embeddings need an even last dimension, got {d}")
    angle = 1.0 / (10000 ** torch.linspace(0, 1, d // 2, device=x.device))
    angle = angle.unsqueeze(-1).repeat(1, 2).flatten()
    index = positions.to(device=x.device, dtype=torch.float32)
    sin = torch.sin(index[:, None] * angle[None, :]).to(x.dtype)
    cos = torch.cos(index[:, None] * angle[None, :]).to(x.dtype)
    return theta_shift(x, sin, cos)
''',
        breach="the frequencies are 10000^(-i/(d/2 - 1)) (linspace from 0 to 1), not 10000^(-2i/d): every pair "
               "but the first turns at a different rate and the slowest pair reaches exactly 1/10000",
        names=("frequenc", "linspace", "angle", "theta", "10000^(-2i/d)", "exponent", "wavelength", "rate"),
    ),
    Port(
        "OpenNMT-tf incremental decoding cache",
        "OpenNMT/OpenNMT-tf, opennmt/layers/transformer.py: MultiHeadAttention.call with cache (self-attention keys "
        "and values concatenated on the time axis; memory keys/values computed at the first step, then reused) "
        "and SelfAttentionDecoderLayer.call (post-norm); pad after eos as the notebook asks",
        "greedy_decode_cached",
        r'''
@torch.no_grad()
def greedy_decode_cached(model, src, max_len, bos_id, eos_id):
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    memory_mask = src_mask.unsqueeze(1)                                   # (B, 1, 1, S)
    layers = list(model.decoder_layers)
    cache = [dict(self_kv=None, memory_kv=None) for _ in layers]
    table = model.positions(memory.new_zeros(1, max_len, model.d_model))[0]

    def attention(attn, inputs, mask, kv_cache, memory_inputs=None):
        def _compute_kv(t):
            return split_heads(attn.w_k(t), attn.n_heads), split_heads(attn.w_v(t), attn.n_heads)

        queries = split_heads(attn.w_q(inputs), attn.n_heads)
        if memory_inputs is None:                                         # self-attention
            keys, values = _compute_kv(inputs)
            if kv_cache is not None:
                keys = torch.cat([kv_cache[0], keys], dim=2)
                values = torch.cat([kv_cache[1], values], dim=2)
        else:                                                             # attention to the memory
            keys, values = kv_cache if kv_cache is not None else _compute_kv(memory_inputs)
        out, _ = scaled_dot_product_attention(queries, keys, values, mask)
        return attn.w_o(merge_heads(out)), (keys, values)

    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for step in range(max_len):
        x = model.tgt_embed(ys[:, -1:]) * math.sqrt(model.d_model) + table[step]
        for layer, c in zip(layers, cache):
            y, c["self_kv"] = attention(layer.self_attn, x, None, c["self_kv"])
            x = layer.norm1(x + y)
            y, c["memory_kv"] = attention(layer.cross_attn, x, memory_mask, c["memory_kv"], memory)
            x = layer.norm2(x + y)
            x = layer.norm3(x + layer.ff(x))
        next_token = model.output(x)[:, -1].argmax(-1).masked_fill(finished, model.pad_id)
        ys = torch.cat([ys, next_token[:, None]], dim=1)
        finished = finished | (next_token == eos_id)
        if finished.all():
            break
    return ys[:, 1:]
''',
    ),
]

"""Mistake catalogue of notebook 09 (long sequences and positions)."""
from . import Alternative, Mistake

ASSIGNMENT = "09_long_sequences"


def window(body):
    return f'''
def sliding_window_mask(T, window, causal=False, device=None):
{body}
'''


def global_(body):
    return f'''
def global_tokens_mask(T, n_global, device=None):
{body}
'''


LINFORMER_INIT = '''
class LinformerSelfAttention(nn.Module):
    def __init__(self, d_model, seq_len, k):
        super().__init__()
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, d_model, bias=False)
        self.w_v = nn.Linear(d_model, d_model, bias=False)
        self.E = nn.Parameter(torch.randn(k, seq_len) / math.sqrt(k))
        self.F = nn.Parameter(torch.randn(k, seq_len) / math.sqrt(k))
'''


def linformer(forward, init=LINFORMER_INIT):
    return init + '''
    def forward(self, x):
        q, key, v = self.w_q(x), self.w_k(x), self.w_v(x)
''' + forward


LINFORMER_RIGHT = '''        key, v = self.E @ key, self.F @ v
        weights = torch.softmax(q @ key.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
        return weights @ v, weights
'''


def rotary(body, check=True):
    head = '''
def apply_rotary(x, positions):
    d = x.shape[-1]
'''
    if check:
        head += '''    if d % 2:
        raise ValueError("d must be even")
'''
    return head + body


ROTARY_RIGHT = '''    theta = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float32, device=x.device) / d)
    angle = positions.to(device=x.device, dtype=torch.float32)[:, None] * theta
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
'''

# greedy_decode_cached, in parts that the mistakes below replace one at a time
CACHED = dict(
    head='''
@torch.no_grad()
def greedy_decode_cached(model, src, max_len, bos_id, eos_id):
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    memory_mask = src_mask.unsqueeze(1)
    layers = list(model.decoder_layers)
    memory_kv = [(split_heads(l.cross_attn.w_k(memory), l.cross_attn.n_heads),
                  split_heads(l.cross_attn.w_v(memory), l.cross_attn.n_heads)) for l in layers]
    cache = [None] * len(layers)
    table = model.positions(memory.new_zeros(1, max_len, model.d_model))[0]
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for t in range(max_len):
''',
    embed='''        x = model.tgt_embed(ys[:, -1:]) * math.sqrt(model.d_model) + table[t]
''',
    layers='''        for n, layer in enumerate(layers):
            attn = layer.self_attn
            key, value = split_heads(attn.w_k(x), attn.n_heads), split_heads(attn.w_v(x), attn.n_heads)
            if cache[n] is not None:
                key, value = torch.cat([cache[n][0], key], 2), torch.cat([cache[n][1], value], 2)
            cache[n] = (key, value)
            out, _ = scaled_dot_product_attention(split_heads(attn.w_q(x), attn.n_heads), key, value)
            x = layer.norm1(x + attn.w_o(merge_heads(out)))
''',
    cross='''            c = layer.cross_attn
            out, _ = scaled_dot_product_attention(split_heads(c.w_q(x), c.n_heads), *memory_kv[n], memory_mask)
            x = layer.norm2(x + c.w_o(merge_heads(out)))
            x = layer.norm3(x + layer.ff(x))
''',
    step='''        next_token = model.output(x)[:, -1].argmax(-1).masked_fill(done, model.pad_id)
        ys = torch.cat([ys, next_token[:, None]], dim=1)
        done = done | (next_token == eos_id)
        if done.all():
            break
    return ys[:, 1:]
''')


def cached(**parts):
    p = {**CACHED, **parts}
    return p["head"] + p["embed"] + p["layers"] + p["cross"] + p["step"]


W_ALL = ("sliding_window_mask_values", "sliding_window_mask_causal")
G_VALUES = ("global_tokens_mask_values",)
L_OUT = ("LinformerSelfAttention_output",)
R_VALUES = ("apply_rotary_values",)
C_MATCH = ("greedy_decode_cached_matches",)

MISTAKES = [
    # -- sliding_window_mask ------------------------------------------------------------------------------
    Mistake("window off by one (< instead of <=)", "sliding_window_mask", window('''
    i = torch.arange(T, device=device)
    offset = i[:, None] - i[None, :]
    mask = offset.abs() < window
    return mask & (offset >= 0) if causal else mask
'''), W_ALL, "off by one"),
    Mistake("window ignores causal", "sliding_window_mask", window('''
    i = torch.arange(T, device=device)
    return (i[:, None] - i[None, :]).abs() <= window
'''), ("sliding_window_mask_causal",), "ignores causal=True"),
    Mistake("causal window without the diagonal", "sliding_window_mask", window('''
    i = torch.arange(T, device=device)
    offset = i[:, None] - i[None, :]
    mask = offset.abs() <= window
    return mask & (offset > 0) if causal else mask
'''), ("sliding_window_mask_causal",), "False on the diagonal"),
    Mistake("causal window on the wrong side (the future)", "sliding_window_mask", window('''
    i = torch.arange(T, device=device)
    offset = i[:, None] - i[None, :]
    mask = offset.abs() <= window
    return mask & (offset <= 0) if causal else mask
'''), ("sliding_window_mask_causal",), "the wrong side of the window"),
    Mistake("window always one-sided", "sliding_window_mask", window('''
    i = torch.arange(T, device=device)
    offset = i[:, None] - i[None, :]
    return (offset >= 0) & (offset <= window)
'''), ("sliding_window_mask_values",), "only the past side of the window although causal=False"),
    Mistake("window of floats", "sliding_window_mask", window('''
    m = torch.ones(T, T, device=device).triu(-window).tril(window)
    return m.tril() if causal else m
'''), W_ALL, "dtype torch.float32"),
    Mistake("window inverted (True = blocked)", "sliding_window_mask", window('''
    i = torch.arange(T, device=device)
    offset = i[:, None] - i[None, :]
    mask = offset.abs() <= window
    if causal:
        mask = mask & (offset >= 0)
    return ~mask
'''), W_ALL, "is inverted"),
    Mistake("window ignores the device", "sliding_window_mask", window('''
    i = torch.arange(T)
    offset = i[:, None] - i[None, :]
    mask = offset.abs() <= window
    return mask & (offset >= 0) if causal else mask
'''), ("sliding_window_mask_device",), "returned a mask on the cpu device"),
    Mistake("window built on the CPU, then moved", "sliding_window_mask", window('''
    i = torch.arange(T)
    offset = i[:, None] - i[None, :]
    mask = offset.abs() <= window
    mask = mask & (offset >= 0) if causal else mask
    return mask.to(device) if device is not None else mask
'''), ("sliding_window_mask_device",), "and moved it"),
    # -- global_tokens_mask -------------------------------------------------------------------------------
    Mistake("global tokens: rows only", "global_tokens_mask", global_('''
    mask = torch.zeros(T, T, dtype=torch.bool, device=device)
    mask[:n_global] = True
    return mask
'''), G_VALUES, "in the first 1 rows only"),
    Mistake("global tokens: columns only", "global_tokens_mask", global_('''
    mask = torch.zeros(T, T, dtype=torch.bool, device=device)
    mask[:, :n_global] = True
    return mask
'''), G_VALUES, "columns only"),
    Mistake("global tokens combined with & (only global pairs)", "global_tokens_mask", global_('''
    g = torch.arange(T, device=device) < n_global
    return g[:, None] & g[None, :]
'''), G_VALUES, "combine rows and columns with |"),
    Mistake("global tokens off by one (<=)", "global_tokens_mask", global_('''
    g = torch.arange(T, device=device) <= n_global
    return g[:, None] | g[None, :]
'''), G_VALUES, "off by one"),
    Mistake("global tokens as floats", "global_tokens_mask", global_('''
    mask = torch.zeros(T, T, device=device)
    mask[:n_global] = 1
    mask[:, :n_global] = 1
    return mask
'''), G_VALUES, "dtype torch.float32"),
    Mistake("global tokens inverted", "global_tokens_mask", global_('''
    g = torch.arange(T, device=device) >= n_global
    return g[:, None] & g[None, :]
'''), G_VALUES, "is inverted"),
    Mistake("global tokens at both ends (the first and the last n_global)", "global_tokens_mask", global_('''
    i = torch.arange(T, device=device)
    g = (i < n_global) | (i >= T - n_global)
    return g[:, None] | g[None, :]
'''), G_VALUES, "global as well as the first"),
    Mistake("global tokens ignore the device", "global_tokens_mask", global_('''
    g = torch.arange(T) < n_global
    return g[:, None] | g[None, :]
'''), ("global_tokens_mask_device",), "returned a mask on the cpu device"),
    # -- LinformerSelfAttention ---------------------------------------------------------------------------
    Mistake("Linformer projects along the feature axis", "LinformerSelfAttention", linformer('''        key, v = key @ self.E.T, v @ self.F.T
        weights = torch.softmax(q @ key.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
        return weights @ v, weights
'''), L_OUT, "E and F mix positions, not features", also=('LinformerSelfAttention_cost',)),
    Mistake("Linformer: one projection E shared by keys and values", "LinformerSelfAttention", linformer(
        LINFORMER_RIGHT.replace("self.F @ v", "self.E @ v"), init=LINFORMER_INIT.replace(
            "        self.F = nn.Parameter(torch.randn(k, seq_len) / math.sqrt(k))\n", "")),
        ("LinformerSelfAttention_structure",) + L_OUT, "has no projection F, only E",
        also=('LinformerSelfAttention_cost',)),
    Mistake("Linformer E and F of shape (seq_len, k)", "LinformerSelfAttention", linformer('''        key, v = self.E.T @ key, self.F.T @ v
        weights = torch.softmax(q @ key.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
        return weights @ v, weights
''', init=LINFORMER_INIT.replace("torch.randn(k, seq_len)", "torch.randn(seq_len, k)")),
        ("LinformerSelfAttention_structure",) + L_OUT, "expected (k, seq_len)", also=('LinformerSelfAttention_cost',)),
    Mistake("Linformer: E for the values, F for the keys", "LinformerSelfAttention", linformer('''        key, v = self.F @ key, self.E @ v
        weights = torch.softmax(q @ key.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
        return weights @ v, weights
'''), L_OUT, "E projects the values and F the keys"),
    Mistake("Linformer: E applied to the values too", "LinformerSelfAttention", linformer('''        key, v = self.E @ key, self.E @ v
        weights = torch.softmax(q @ key.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
        return weights @ v, weights
'''), L_OUT, "the values are projected with E"),
    Mistake("Linformer softmax over the queries", "LinformerSelfAttention", linformer('''        key, v = self.E @ key, self.F @ v
        weights = torch.softmax(q @ key.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-2)
        return weights @ v, weights
'''), L_OUT, "softmax is over the queries"),
    Mistake("Linformer without the 1/sqrt(d) scale", "LinformerSelfAttention", linformer('''        key, v = self.E @ key, self.F @ v
        weights = torch.softmax(q @ key.transpose(-2, -1), dim=-1)
        return weights @ v, weights
'''), L_OUT, "not scaled"),
    Mistake("Linformer scaled by sqrt(k)", "LinformerSelfAttention", linformer('''        key, v = self.E @ key, self.F @ v
        weights = torch.softmax(q @ key.transpose(-2, -1) / math.sqrt(self.E.shape[0]), dim=-1)
        return weights @ v, weights
'''), L_OUT, "divided by sqrt(k)"),
    Mistake("Linformer returns (B, T, T) weights", "LinformerSelfAttention", linformer('''        key, v = self.E @ key, self.F @ v
        weights = torch.softmax(q @ key.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
        return weights @ v, weights @ self.F
'''), L_OUT + ("LinformerSelfAttention_cost",), "(B, T, T)", elsewhere='T x T'),
    Mistake("Linformer forms Q K^T first (quadratic)", "LinformerSelfAttention", linformer('''        scores = (q @ key.transpose(-2, -1)) @ self.E.T / math.sqrt(q.shape[-1])
        weights = torch.softmax(scores, dim=-1)
        return weights @ (self.F @ v), weights
'''), ("LinformerSelfAttention_cost",), "makes a T x T tensor"),
    Mistake("Linformer with biased projections", "LinformerSelfAttention", linformer(
        LINFORMER_RIGHT, init=LINFORMER_INIT.replace("bias=False", "bias=True")),
        ("LinformerSelfAttention_structure",), "has a bias", also=('LinformerSelfAttention_output', 'LinformerSelfAttention_cost')),
    Mistake("Linformer E and F as plain tensors", "LinformerSelfAttention", linformer(
        LINFORMER_RIGHT, init=LINFORMER_INIT.replace("nn.Parameter(torch.randn(k, seq_len) / math.sqrt(k))",
                                                     "torch.randn(k, seq_len) / math.sqrt(k)")),
        ("LinformerSelfAttention_structure",), "should be an nn.Parameter", also=('LinformerSelfAttention_output', 'LinformerSelfAttention_cost')),
    # -- apply_rotary ---------------------------------------------------------------------------------------
    Mistake("rotary with halves instead of interleaved pairs", "apply_rotary", rotary('''    theta = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float32, device=x.device) / d)
    angle = positions.to(device=x.device, dtype=torch.float32)[:, None] * theta
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    a, b = x[..., : d // 2], x[..., d // 2:]
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
'''), R_VALUES, "the two halves of the vector"),
    Mistake("rotary frequencies 10000^(-i/d)", "apply_rotary", rotary('''    theta = 10000 ** (-torch.arange(d // 2, dtype=torch.float32, device=x.device) / d)
    angle = positions.to(device=x.device, dtype=torch.float32)[:, None] * theta
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
'''), R_VALUES, "10000^(-i/d)"),
    Mistake("rotary base 500000 (LLaMA 3's rope_theta)", "apply_rotary", rotary(ROTARY_RIGHT.replace(
        "10000 ** (-torch", "500000 ** (-torch")), R_VALUES, "the base 5e+05"),
    Mistake("rotary with positions interpolated (p / 2)", "apply_rotary", rotary(ROTARY_RIGHT.replace(
        "positions.to(device=x.device, dtype=torch.float32)", "(positions.to(device=x.device, dtype=torch.float32) / 2)")),
        R_VALUES, "the frequencies of 4 of the 4 pairs are changed"),
    Mistake("rotary frequencies 10000^(+2i/d)", "apply_rotary", rotary(ROTARY_RIGHT.replace("10000 ** (-torch", "10000 ** (torch")),
            R_VALUES, "10000^(+2i/d)"),
    Mistake("rotary ignores positions (uses 0..T-1)", "apply_rotary", rotary(ROTARY_RIGHT.replace(
        "positions.to(device=x.device, dtype=torch.float32)", "torch.arange(x.shape[-2], dtype=torch.float32, device=x.device)")),
        R_VALUES, "the positions argument is ignored"),
    Mistake("rotary sign error", "apply_rotary", rotary(ROTARY_RIGHT.replace(
        "(a * cos - b * sin, a * sin + b * cos)", "(a * cos + b * sin, b * cos - a * sin)")), R_VALUES, "wrong way"),
    Mistake("rotary with cos and sin swapped", "apply_rotary", rotary(ROTARY_RIGHT.replace(
        "cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)",
        "cos, sin = angle.sin().to(x.dtype), angle.cos().to(x.dtype)")),
        R_VALUES, "cos and sin are swapped"),
    Mistake("rotary without the ValueError for odd d", "apply_rotary", rotary(ROTARY_RIGHT, check=False),
            ("apply_rotary_edge_cases",), "should raise a ValueError"),
    Mistake("rotary frequencies made on the CPU", "apply_rotary", rotary(ROTARY_RIGHT.replace(
        ", device=x.device) / d)", ") / d)").replace("positions.to(device=x.device, dtype=torch.float32)",
                                                     "positions.float().cpu()")),
        ("apply_rotary_edge_cases",), "make the frequencies on the device of x"),
    Mistake("rotary returns float32 for float64 input", "apply_rotary", rotary(ROTARY_RIGHT.replace(
        "cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)", "cos, sin = angle.cos(), angle.sin()").replace(
        "a, b = x[..., 0::2], x[..., 1::2]", "a, b = x[..., 0::2].float(), x[..., 1::2].float()")),
        R_VALUES, "keep the dtype of x"),
    # -- greedy_decode_cached -------------------------------------------------------------------------------
    Mistake("cached decode that recomputes everything", "greedy_decode_cached", '''
def greedy_decode_cached(model, src, max_len, bos_id, eos_id):
    return greedy_decode(model, src, max_len, bos_id, eos_id)
''', ("greedy_decode_cached_new_token_only",), "runs the decoder on all the tokens so far"),
    Mistake("cache of the layer inputs (keys recomputed)", "greedy_decode_cached", cached(layers='''        for n, layer in enumerate(layers):
            attn = layer.self_attn
            past = x if cache[n] is None else torch.cat([cache[n], x], 1)
            cache[n] = past
            out, _ = scaled_dot_product_attention(split_heads(attn.w_q(x), attn.n_heads),
                                                  split_heads(attn.w_k(past), attn.n_heads),
                                                  split_heads(attn.w_v(past), attn.n_heads))
            x = layer.norm1(x + attn.w_o(merge_heads(out)))
'''), ("greedy_decode_cached_new_token_only",), "Cache the projected keys and values themselves"),
    Mistake("every new token at position 0", "greedy_decode_cached", cached(
        embed='''        x = model.positions(model.tgt_embed(ys[:, -1:]) * math.sqrt(model.d_model))
'''), C_MATCH, "position vector of position 0"),
    Mistake("cache that never grows (newest key only)", "greedy_decode_cached", cached(
        layers=CACHED["layers"].replace("if cache[n] is not None:", "if False:")), C_MATCH,
        "sees the newest token's key and value only"),
    Mistake("one cache shared by all layers", "greedy_decode_cached", cached(
        layers=CACHED["layers"].replace("cache[n]", "cache[0]")), C_MATCH, "share one cache"),
    Mistake("cross-attention without the source mask", "greedy_decode_cached", cached(
        cross=CACHED["cross"].replace("*memory_kv[n], memory_mask)", "*memory_kv[n])")), C_MATCH,
        "ignores the source padding"),
    Mistake("decode that forgets to pad after eos", "greedy_decode_cached", cached(
        step=CACHED["step"].replace(".masked_fill(done, model.pad_id)", "")), C_MATCH, "continue with model.pad_id"),
    Mistake("decode that never stops early", "greedy_decode_cached", cached(
        step=CACHED["step"].replace("        if done.all():\n            break\n", "")),
        ("greedy_decode_cached_stops",), "stop as soon as every sentence has produced eos"),
    Mistake("decode that stops the batch at the first eos", "greedy_decode_cached", cached(
        step=CACHED["step"].replace("if done.all():", "if done.any():")),
        ("greedy_decode_cached_matches", "greedy_decode_cached_stops"), "until every sentence has"),
    Mistake("decode that returns bos", "greedy_decode_cached", cached(
        step=CACHED["step"].replace("return ys[:, 1:]", "return ys")), C_MATCH, "starts with bos"),
]

ALTERNATIVES = [
    Alternative("window from triu and tril", "sliding_window_mask", window('''
    m = torch.ones(T, T, dtype=torch.bool, device=device).triu(-window).tril(window)
    return m.tril() if causal else m
''')),
    Alternative("window filled row by row", "sliding_window_mask", window('''
    mask = torch.zeros(T, T, dtype=torch.bool, device=device)
    for i in range(T):
        mask[i, max(0, i - window): (i + 1 if causal else i + window + 1)] = True
    return mask
''')),
    Alternative("global tokens by slicing", "global_tokens_mask", global_('''
    mask = torch.zeros(T, T, dtype=torch.bool, device=device)
    mask[:n_global, :] = True
    mask[:, :n_global] = True
    return mask
''')),
    Alternative("Linformer with einsum and the course's attention", "LinformerSelfAttention", linformer('''        key = torch.einsum("kt,btd->bkd", self.E, key)
        v = torch.einsum("kt,btd->bkd", self.F, v)
        return scaled_dot_product_attention(q, key, v)
''')),
    Alternative("Linformer with E, F initialised by nn.init", "LinformerSelfAttention", linformer(
        LINFORMER_RIGHT, init=LINFORMER_INIT.replace(
            "self.E = nn.Parameter(torch.randn(k, seq_len) / math.sqrt(k))",
            "self.E = nn.Parameter(torch.empty(k, seq_len))\n        nn.init.xavier_uniform_(self.E)"))),
    Alternative("rotary with complex numbers", "apply_rotary", rotary('''    theta = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)
    angle = positions.to(device=x.device, dtype=torch.float64)[:, None] * theta
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(z * torch.polar(torch.ones_like(angle), angle)).flatten(-2).to(x.dtype)
''')),
    Alternative("rotary with a loop over pairs", "apply_rotary", rotary('''    out = torch.empty_like(x)
    p = positions.to(device=x.device, dtype=torch.float32)
    for i in range(d // 2):
        t = p * 10000 ** (-2 * i / d)
        c, s = t.cos().to(x.dtype), t.sin().to(x.dtype)
        a, b = x[..., 2 * i], x[..., 2 * i + 1]
        out[..., 2 * i] = a * c - b * s
        out[..., 2 * i + 1] = a * s + b * c
    return out
''')),
    Alternative("cached decode with a preallocated cache and its own attention", "greedy_decode_cached", cached(
        layers='''        for n, layer in enumerate(layers):
            attn = layer.self_attn
            if cache[n] is None:
                shape = (src.shape[0], attn.n_heads, max_len, model.d_model // attn.n_heads)
                cache[n] = (memory.new_zeros(shape), memory.new_zeros(shape))
            cache[n][0][:, :, t:t + 1] = split_heads(attn.w_k(x), attn.n_heads)
            cache[n][1][:, :, t:t + 1] = split_heads(attn.w_v(x), attn.n_heads)
            q = split_heads(attn.w_q(x), attn.n_heads)
            keys, values = cache[n][0][:, :, :t + 1], cache[n][1][:, :, :t + 1]
            w = torch.softmax(torch.einsum("bhqd,bhkd->bhqk", q, keys) / math.sqrt(q.shape[-1]), dim=-1)
            x = layer.norm1(x + attn.w_o(merge_heads(w @ values)))
''')),
    Alternative("cached decode that projects the memory at every step", "greedy_decode_cached", cached(
        cross='''            c = layer.cross_attn
            out, _ = scaled_dot_product_attention(split_heads(c.w_q(x), c.n_heads),
                                                  split_heads(c.w_k(memory), c.n_heads),
                                                  split_heads(c.w_v(memory), c.n_heads), memory_mask)
            x = layer.norm2(x + c.w_o(merge_heads(out)))
            x = layer.norm3(x + layer.ff(x))
''')),
]

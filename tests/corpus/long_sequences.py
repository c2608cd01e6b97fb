"""Ported code of notebook 09 (sparse masks, Linformer, rotary positions, the key/value cache) in the styles of public
projects."""
from . import Port

ASSIGNMENT = "09_long_sequences"

INCLUDE_EOS = ("eos itself", "including eos", "include eos", "without eos", "drops eos", "up to and including")

# meta-llama/llama llama/model.py: precompute_freqs_cis and apply_rotary_emb (pairs (2i, 2i+1) as complex numbers)
LLAMA_FREQS = '''
def precompute_freqs_cis(dim, positions, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, device=positions.device)[: (dim // 2)].float() / dim))
    freqs = torch.outer(positions.float(), freqs)
    return torch.polar(torch.ones_like(freqs), freqs)  # complex64


def apply_rotary_emb(x, freqs_cis):
    x_ = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    x_out = torch.view_as_real(x_ * freqs_cis).flatten(-2)
    return x_out.type_as(x)
'''

# the cross-attention and one decoder-layer step shared by the cached decoders below
ATTEND = '''
def _attend(attn, hidden, keys, values, mask=None):
    q = split_heads(attn.w_q(hidden), attn.n_heads)
    out, _ = scaled_dot_product_attention(q, keys, values, mask)
    return attn.w_o(merge_heads(out))


def _sublayer(layer, x, norm, fn):
    if layer.norm_first:
        return x + fn(norm(x))
    return norm(x + fn(x))
'''

PORTS = [
    # --- sliding_window_mask --------------------------------------------------------------------------
    Port("FlexAttention sliding-window mask_mod",
         "pytorch docs / attention-gym, FlexAttention 'Sliding Window + Causal' mask_mod: causal_mask = q_idx >= "
         "kv_idx; window_mask = q_idx - kv_idx <= SLIDING_WINDOW; evaluated on index grids", "sliding_window_mask", '''
def sliding_window_mask(T, window, causal=False, device=None):
    def mask_mod(b, h, q_idx, kv_idx):
        if causal:
            causal_mask = q_idx >= kv_idx
            window_mask = q_idx - kv_idx <= window
            return causal_mask & window_mask
        return (q_idx - kv_idx).abs() <= window

    q_idx = torch.arange(T, device=device)[:, None]
    kv_idx = torch.arange(T, device=device)[None, :]
    return mask_mod(0, 0, q_idx, kv_idx)
'''),
    Port("Mistral sliding-window band (tril, then triu(diagonal=-sliding_window)) as bool",
         "huggingface/transformers models/mistral/modeling_mistral.py (v4.34), _make_sliding_window_causal_mask: "
         "mask = torch.tril(tensor, diagonal=0); mask = torch.triu(mask, diagonal=-sliding_window)",
         "sliding_window_mask", '''
def sliding_window_mask(T, window, causal=False, device=None):
    tensor = torch.ones(T, T, dtype=torch.bool, device=device)
    mask = torch.tril(tensor, diagonal=0 if causal else window)
    return torch.triu(mask, diagonal=-window)
'''),
    Port("Mistral _make_sliding_window_causal_mask (log of the band: 0 / -inf)",
         "huggingface/transformers models/mistral/modeling_mistral.py (v4.34), _make_sliding_window_causal_mask: "
         "mask = torch.log(mask).to(dtype), an additive mask", "sliding_window_mask", '''
def sliding_window_mask(T, window, causal=False, device=None, dtype=torch.float32):
    tensor = torch.full((T, T), fill_value=1, device=device)
    mask = torch.tril(tensor, diagonal=0 if causal else window)
    mask = torch.triu(mask, diagonal=-window)
    return torch.log(mask).to(dtype)
''', breach="returns an additive float mask (0 where allowed, -inf elsewhere) instead of a boolean mask",
         names=("bool", "dtype", "float", "additive")),
    Port("transformers sliding_window_overlay (kv_idx > q_idx - sliding_window)",
         "huggingface/transformers masking_utils.py, sliding_window_overlay: return kv_idx > q_idx - sliding_window "
         "(a window of sliding_window keys, the query included)", "sliding_window_mask", '''
def sliding_window_mask(T, window, causal=False, device=None):
    q_idx = torch.arange(T, device=device)[:, None]
    kv_idx = torch.arange(T, device=device)[None, :]
    if causal:
        return (kv_idx <= q_idx) & (kv_idx > q_idx - window)
    return (kv_idx > q_idx - window) & (kv_idx < q_idx + window)
''', breach="the window is exclusive (i - j < window): one key too few on each side",
         names=("off by one", "<=", "inclusive", "window + 1", "exactly window")),
    Port("Longformer attention_window (total width, one side = window // 2)",
         "huggingface/transformers models/longformer/modeling_longformer.py, LongformerSelfAttention: "
         "attention_window is the whole window (even); one_sided_attn_window_size = attention_window // 2",
         "sliding_window_mask", '''
def sliding_window_mask(T, window, causal=False, device=None):
    one_sided_attn_window_size = window // 2
    i = torch.arange(T, device=device)
    offset = i[:, None] - i[None, :]
    mask = offset.abs() <= one_sided_attn_window_size
    if causal:
        mask = mask & (offset >= 0)
    return mask
''', breach="window read as the total width: each side gets window // 2 instead of window",
         names=("one side", "each side", "half", "window // 2", "total")),
    Port("Annotated Transformer (2018) subsequent_mask style: numpy band, then torch.from_numpy",
         "harvardnlp/annotated-transformer (2018 version), subsequent_mask: np.triu(np.ones(attn_shape), k=1)"
         ".astype('uint8'); torch.from_numpy(subsequent_mask) == 0", "sliding_window_mask", '''
import numpy as np


def sliding_window_mask(T, window, causal=False, device=None):
    band = np.triu(np.ones((T, T)), k=-window)
    band = np.tril(band, k=0 if causal else window).astype("uint8")
    return (torch.from_numpy(band) == 1).to(device)
''', breach="the mask is built on the CPU (numpy) and then copied to the device instead of made there",
         names=("device", "cpu", "copied", "directly on")),

    # --- global_tokens_mask ---------------------------------------------------------------------------
    Port("DeepSpeed BigBirdSparsityConfig.set_global_layout_itc",
         "microsoft/DeepSpeed deepspeed/ops/sparse_attention/sparsity_config.py, BigBirdSparsityConfig."
         "set_global_layout_itc: layout[h, 0:num_global_blocks, :] = 1; layout[h, :, 0:num_global_blocks] = 1",
         "global_tokens_mask", '''
def global_tokens_mask(T, n_global, device=None):
    layout = torch.zeros(T, T, dtype=torch.bool, device=device)
    num_global_blocks = min(n_global, T)
    layout[0:num_global_blocks, :] = True
    layout[:, 0:num_global_blocks] = True
    return layout
'''),
    Port("Longformer is_index_global_attn from a global_attention_mask",
         "huggingface/transformers models/longformer/modeling_longformer.py: global_attention_mask (1 = global); "
         "is_index_global_attn = attention_mask > 0", "global_tokens_mask", '''
def global_tokens_mask(T, n_global, device=None):
    global_attention_mask = torch.zeros(T, dtype=torch.long, device=device)
    global_attention_mask[:n_global] = 1
    is_index_global_attn = global_attention_mask > 0
    return is_index_global_attn[:, None] | is_index_global_attn[None, :]
'''),
    Port("Longformer global_attention_mask kept as 0/1 integers",
         "huggingface/transformers models/longformer: global_attention_mask is a torch.LongTensor of 0 (local) "
         "and 1 (global), like attention_mask", "global_tokens_mask", '''
def global_tokens_mask(T, n_global, device=None):
    global_attention_mask = torch.zeros(T, dtype=torch.long, device=device)
    global_attention_mask[:n_global] = 1
    return torch.maximum(global_attention_mask[:, None], global_attention_mask[None, :])
''', breach="returns a long tensor of 0/1 (Hugging Face's attention-mask dtype) instead of a boolean mask",
         names=("bool", "dtype", "long", "int")),

    # --- LinformerSelfAttention -----------------------------------------------------------------------
    Port("lucidrains/linformer LinformerSelfAttention, one head, projections stored (k, seq_len)",
         "lucidrains/linformer linformer/linformer.py, LinformerSelfAttention: to_q/to_k/to_v bias-free, proj_k and "
         "proj_v with init_ (uniform +-1/sqrt(last dim)), einsum projection over the sequence, scale d_h ** -0.5",
         "LinformerSelfAttention", '''
def init_(tensor):
    dim = tensor.shape[-1]
    std = 1 / math.sqrt(dim)
    tensor.uniform_(-std, std)
    return tensor


class LinformerSelfAttention(nn.Module):
    def __init__(self, d_model, seq_len, k):
        super().__init__()
        self.seq_len = seq_len
        self.k = k
        self.w_q = nn.Linear(d_model, d_model, bias=False)      # to_q
        self.w_k = nn.Linear(d_model, d_model, bias=False)      # to_k
        self.E = nn.Parameter(init_(torch.zeros(k, seq_len)))   # proj_k
        self.w_v = nn.Linear(d_model, d_model, bias=False)      # to_v
        self.F = nn.Parameter(init_(torch.zeros(k, seq_len)))   # proj_v

    def forward(self, x):
        b, n, d = x.shape
        assert n == self.seq_len, f"the sequence length of the key / values must be {self.seq_len} - {n} given"
        queries = self.w_q(x)
        keys = self.w_k(x)
        values = self.w_v(x)
        proj_seq_len = lambda args: torch.einsum("bnd,kn->bkd", *args)
        keys, values = map(proj_seq_len, zip((keys, values), (self.E, self.F)))
        dots = torch.einsum("bnd,bkd->bnk", queries, keys) * (d ** -0.5)
        attn = dots.softmax(dim=-1)
        out = torch.einsum("bnk,bkd->bnd", attn, values)
        return out, attn
'''),
    Port("lucidrains/linformer projections of shape (seq_len, k)",
         "lucidrains/linformer linformer/linformer.py: self.proj_k = nn.Parameter(init_(torch.zeros(seq_len, k))); "
         "torch.einsum('bnd,nk->bkd', keys, proj_k)", "LinformerSelfAttention", '''
def init_(tensor):
    dim = tensor.shape[-1]
    std = 1 / math.sqrt(dim)
    tensor.uniform_(-std, std)
    return tensor


class LinformerSelfAttention(nn.Module):
    def __init__(self, d_model, seq_len, k):
        super().__init__()
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, d_model, bias=False)
        self.w_v = nn.Linear(d_model, d_model, bias=False)
        self.E = nn.Parameter(init_(torch.zeros(seq_len, k)))
        self.F = nn.Parameter(init_(torch.zeros(seq_len, k)))

    def forward(self, x):
        d = x.shape[-1]
        queries, keys, values = self.w_q(x), self.w_k(x), self.w_v(x)
        keys = torch.einsum("bnd,nk->bkd", keys, self.E)
        values = torch.einsum("bnd,nk->bkd", values, self.F)
        attn = (torch.einsum("bnd,bkd->bnk", queries, keys) * (d ** -0.5)).softmax(dim=-1)
        return torch.einsum("bnk,bkd->bnd", attn, values), attn
''', breach="E and F are stored as (seq_len, k), the transpose of the contract's (k, seq_len)",
         names=("(k, seq_len)", "shape", "transpose")),
    Port("lucidrains/linformer share_kv=True",
         "lucidrains/linformer linformer/linformer.py, share_kv: values = keys; kv_projs = (proj_k, proj_k)",
         "LinformerSelfAttention", '''
class LinformerSelfAttention(nn.Module):
    def __init__(self, d_model, seq_len, k, share_kv=True):
        super().__init__()
        self.share_kv = share_kv
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, d_model, bias=False)
        self.w_v = nn.Linear(d_model, d_model, bias=False)
        self.E = nn.Parameter(torch.randn(k, seq_len) / math.sqrt(k))
        self.F = nn.Parameter(torch.randn(k, seq_len) / math.sqrt(k))

    def forward(self, x):
        d = x.shape[-1]
        queries = self.w_q(x)
        keys = self.w_k(x)
        values = self.w_v(x) if not self.share_kv else keys
        kv_projs = (self.E, self.F if not self.share_kv else self.E)
        keys, values = (torch.einsum("bnd,kn->bkd", t, p) for t, p in zip((keys, values), kv_projs))
        attn = (torch.einsum("bnd,bkd->bnk", queries, keys) * (d ** -0.5)).softmax(dim=-1)
        return torch.einsum("bnk,bkd->bnd", attn, values), attn
''', breach="keys and values are shared: the values are the projected keys (w_v and F are never used)",
         names=("share", "same projection", "f is not used", "e for both", "w_v")),
    Port("tatp22/linformer-pytorch E and F as nn.Linear with bias",
         "tatp22/linformer-pytorch linformer_pytorch/linformer_pytorch.py, get_EF: nn.Linear(input_size, dim, bias) "
         "with bias=True; LinearAttentionHead: K = self.E(K.transpose(1, 2)); P_bar / sqrt(dim)",
         "LinformerSelfAttention", '''
class LinformerSelfAttention(nn.Module):
    def __init__(self, d_model, seq_len, k):
        super().__init__()
        self.dim = d_model
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, d_model, bias=False)
        self.w_v = nn.Linear(d_model, d_model, bias=False)
        lin_E, lin_F = nn.Linear(seq_len, k), nn.Linear(seq_len, k)     # get_EF(input_size, dim, bias=True)
        torch.nn.init.xavier_normal_(lin_E.weight)
        torch.nn.init.xavier_normal_(lin_F.weight)
        self.E, self.E_bias = nn.Parameter(lin_E.weight.data), nn.Parameter(lin_E.bias.data)
        self.F, self.F_bias = nn.Parameter(lin_F.weight.data), nn.Parameter(lin_F.bias.data)

    def forward(self, x):
        Q, K, V = self.w_q(x), self.w_k(x), self.w_v(x)
        K = K.transpose(1, 2)
        K = K @ self.E.t() + self.E_bias                        # self.E(K)
        Q = torch.matmul(Q, K)
        P_bar = Q / torch.sqrt(torch.tensor(self.dim).type(Q.type()))
        P_bar = P_bar.softmax(dim=-1)
        V = V.transpose(1, 2)
        V = V @ self.F.t() + self.F_bias                        # self.F(V)
        V = V.transpose(1, 2)
        return torch.matmul(P_bar, V), P_bar
''', breach="the sequence projections E and F add a bias (nn.Linear with bias=True)",
         names=("bias",)),

    # --- apply_rotary ---------------------------------------------------------------------------------
    Port("LLaMA precompute_freqs_cis / apply_rotary_emb (complex pairs)",
         "meta-llama/llama llama/model.py, precompute_freqs_cis (torch.polar) and apply_rotary_emb "
         "(view_as_complex of x.float().reshape(..., -1, 2))", "apply_rotary", LLAMA_FREQS + '''

def apply_rotary(x, positions):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"rotary embeddings need an even feature size, got {d}")
    freqs_cis = precompute_freqs_cis(d, positions.to(x.device))
    return apply_rotary_emb(x, freqs_cis)
'''),
    Port("GPT-J rotate_every_two with repeat-interleaved sin/cos",
         "huggingface/transformers models/gptj/modeling_gptj.py: create_sinusoidal_positions, rotate_every_two "
         "(stack((-x2, x1), -1).flatten(-2)), apply_rotary_pos_emb with repeat_interleave(2)", "apply_rotary", '''
def create_sinusoidal_positions(positions, dim):
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.int64, device=positions.device) / dim))
    sinusoid_inp = torch.einsum("i , j -> i j", positions.float(), inv_freq.float()).float()
    return torch.cat((torch.sin(sinusoid_inp), torch.cos(sinusoid_inp)), dim=1)


def rotate_every_two(x):
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    x = torch.stack((-x2, x1), dim=-1)
    return x.flatten(-2)


def apply_rotary_pos_emb(tensor, sin, cos):
    sin = torch.repeat_interleave(sin, 2, dim=-1)
    cos = torch.repeat_interleave(cos, 2, dim=-1)
    return (tensor * cos) + (rotate_every_two(tensor) * sin)


def apply_rotary(x, positions):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"rotary embeddings need an even feature size, got {d}")
    sincos = create_sinusoidal_positions(positions.to(x.device), d)
    sin, cos = torch.split(sincos, d // 2, dim=-1)
    return apply_rotary_pos_emb(x, sin.to(x.dtype), cos.to(x.dtype))
'''),
    Port("HF LLaMA / GPT-NeoX rotate_half",
         "huggingface/transformers models/llama/modeling_llama.py, LlamaRotaryEmbedding (emb = cat((freqs, freqs))) "
         "and rotate_half (x1 = x[..., :d/2], x2 = x[..., d/2:]; cat((-x2, x1)))", "apply_rotary", '''
def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(x, positions):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"rotary embeddings need an even feature size, got {d}")
    inv_freq = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.int64, device=x.device).float() / d))
    freqs = torch.outer(positions.to(x.device).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    return (x * cos) + (rotate_half(x) * sin)
''', breach="rotates feature i with feature i + d/2 (rotate_half) instead of the pairs (2i, 2i+1)",
         names=("half", "rotate_half", "(2i, 2i+1)", "adjacent", "interleav")),
    Port("LLaMA apply_rotary_emb without a check of d",
         "meta-llama/llama llama/model.py, apply_rotary_emb: an odd head size fails inside reshape(..., -1, 2)",
         "apply_rotary", LLAMA_FREQS + '''

def apply_rotary(x, positions):
    freqs_cis = precompute_freqs_cis(x.shape[-1], positions.to(x.device))
    return apply_rotary_emb(x, freqs_cis)
''', breach="no ValueError for odd d (a RuntimeError from reshape instead)",
         names=("valueerror",)),
    Port("LLaMA freqs_cis[start_pos : start_pos + seqlen]",
         "meta-llama/llama llama/model.py, Transformer.forward: freqs_cis = self.freqs_cis[start_pos : start_pos + "
         "seqlen] (positions are consecutive from start_pos)", "apply_rotary", LLAMA_FREQS + '''

def apply_rotary(x, positions):
    d, seqlen = x.shape[-1], x.shape[-2]
    if d % 2:
        raise ValueError(f"rotary embeddings need an even feature size, got {d}")
    start_pos = int(positions[0])
    freqs_cis = precompute_freqs_cis(d, torch.arange(start_pos, start_pos + seqlen, device=x.device))
    return apply_rotary_emb(x, freqs_cis)
''', breach="uses consecutive positions start_pos, start_pos + 1, ... instead of the positions given",
         names=("not in order", "fractional", "ignor", "each position", "consecutive")),

    # --- greedy_decode_cached -------------------------------------------------------------------------
    Port("HF past_key_values (self k/v appended, cross k/v computed at the first step)",
         "huggingface/transformers models/bart/modeling_bart.py, BartAttention with past_key_value: "
         "torch.cat([past_key_value[0], key_states], dim=2); cross-attention reuses past_key_value; "
         "generation/utils.py greedy loop with unfinished_sequences", "greedy_decode_cached", ATTEND + '''

def _decoder_layer_step(layer, hidden_states, encoder_hidden_states, encoder_attention_mask, past_key_value):
    present = [None] * 4

    def self_attention(h):
        attn = layer.self_attn
        key_states = split_heads(attn.w_k(h), attn.n_heads)
        value_states = split_heads(attn.w_v(h), attn.n_heads)
        if past_key_value is not None:
            key_states = torch.cat([past_key_value[0], key_states], dim=2)
            value_states = torch.cat([past_key_value[1], value_states], dim=2)
        present[0], present[1] = key_states, value_states
        return _attend(attn, h, key_states, value_states)

    def cross_attention(h):
        attn = layer.cross_attn
        if past_key_value is not None:
            key_states, value_states = past_key_value[2], past_key_value[3]
        else:
            key_states = split_heads(attn.w_k(encoder_hidden_states), attn.n_heads)
            value_states = split_heads(attn.w_v(encoder_hidden_states), attn.n_heads)
        present[2], present[3] = key_states, value_states
        return _attend(attn, h, key_states, value_states, encoder_attention_mask)

    hidden_states = _sublayer(layer, hidden_states, layer.norm1, self_attention)
    hidden_states = _sublayer(layer, hidden_states, layer.norm2, cross_attention)
    hidden_states = _sublayer(layer, hidden_states, layer.norm3, layer.ff)
    return hidden_states, tuple(present)


@torch.no_grad()
def greedy_decode_cached(model, src, max_len, bos_id, eos_id):
    pad_token_id = model.pad_id
    attention_mask = padding_mask(src, pad_token_id)
    encoder_hidden_states = model.encode(src, attention_mask)
    encoder_attention_mask = attention_mask.unsqueeze(1)
    embed_positions = model.positions(encoder_hidden_states.new_zeros(1, max_len, model.d_model))[0]
    input_ids = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    unfinished_sequences = torch.ones(src.shape[0], dtype=torch.long, device=src.device)
    past_key_values = None
    for step in range(max_len):
        past_key_values_length = step
        hidden_states = model.tgt_embed(input_ids[:, -1:]) * math.sqrt(model.d_model) \\
            + embed_positions[past_key_values_length]
        next_decoder_cache = []
        for idx, layer in enumerate(model.decoder_layers):
            past_key_value = past_key_values[idx] if past_key_values is not None else None
            hidden_states, present = _decoder_layer_step(layer, hidden_states, encoder_hidden_states,
                                                         encoder_attention_mask, past_key_value)
            next_decoder_cache.append(present)
        past_key_values = tuple(next_decoder_cache)
        next_tokens = model.output(hidden_states)[:, -1, :].argmax(dim=-1)
        next_tokens = next_tokens * unfinished_sequences + pad_token_id * (1 - unfinished_sequences)
        input_ids = torch.cat([input_ids, next_tokens[:, None]], dim=-1)
        unfinished_sequences = unfinished_sequences.mul((next_tokens != eos_id).long())
        if unfinished_sequences.max() == 0:
            break
    return input_ids[:, 1:]
'''),
    Port("LLaMA preallocated cache_k / cache_v written at start_pos",
         "meta-llama/llama llama/model.py, Attention.forward: self.cache_k[:bsz, start_pos : start_pos + seqlen] = "
         "xk; keys = self.cache_k[:bsz, : start_pos + seqlen]; generation.py: eos_reached, torch.where",
         "greedy_decode_cached", ATTEND + '''

class _LayerCache:
    def __init__(self, layer, memory, max_len):
        bsz, _, dim = memory.shape
        n_heads = layer.self_attn.n_heads
        self.cache_k = memory.new_zeros(bsz, n_heads, max_len, dim // n_heads)
        self.cache_v = memory.new_zeros(bsz, n_heads, max_len, dim // n_heads)
        self.memory_k = split_heads(layer.cross_attn.w_k(memory), layer.cross_attn.n_heads)
        self.memory_v = split_heads(layer.cross_attn.w_v(memory), layer.cross_attn.n_heads)


def _layer_forward(layer, x, cache, start_pos, memory_mask):
    def attention(h):
        attn = layer.self_attn
        xk = split_heads(attn.w_k(h), attn.n_heads)
        xv = split_heads(attn.w_v(h), attn.n_heads)
        cache.cache_k[:, :, start_pos:start_pos + 1] = xk
        cache.cache_v[:, :, start_pos:start_pos + 1] = xv
        keys = cache.cache_k[:, :, :start_pos + 1]
        values = cache.cache_v[:, :, :start_pos + 1]
        return _attend(attn, h, keys, values)

    def cross(h):
        return _attend(layer.cross_attn, h, cache.memory_k, cache.memory_v, memory_mask)

    x = _sublayer(layer, x, layer.norm1, attention)
    x = _sublayer(layer, x, layer.norm2, cross)
    return _sublayer(layer, x, layer.norm3, layer.ff)


@torch.no_grad()
def greedy_decode_cached(model, src, max_len, bos_id, eos_id):
    bsz = src.shape[0]
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    memory_mask = src_mask.unsqueeze(1)
    caches = [_LayerCache(layer, memory, max_len) for layer in model.decoder_layers]
    pos_table = model.positions(memory.new_zeros(1, max_len, model.d_model))[0]
    tokens = torch.full((bsz, max_len + 1), model.pad_id, dtype=torch.long, device=src.device)
    tokens[:, 0] = bos_id
    eos_reached = torch.tensor([False] * bsz, device=src.device)
    for cur_pos in range(max_len):
        h = model.tgt_embed(tokens[:, cur_pos:cur_pos + 1]) * math.sqrt(model.d_model) + pos_table[cur_pos]
        for layer, cache in zip(model.decoder_layers, caches):
            h = _layer_forward(layer, h, cache, cur_pos, memory_mask)
        next_token = torch.argmax(model.output(h)[:, -1], dim=-1)
        next_token = torch.where(eos_reached, torch.full_like(next_token, model.pad_id), next_token)
        tokens[:, cur_pos + 1] = next_token
        eos_reached |= next_token == eos_id
        if all(eos_reached):
            return tokens[:, 1:cur_pos + 2]
    return tokens[:, 1:]
'''),
    Port("d2l TransformerDecoderBlock state (caches the layer inputs)",
         "d2l-ai/d2l-en chapter_attention-mechanisms-and-transformers/transformer.md, TransformerDecoderBlock."
         "forward: key_values = torch.cat((state[2][self.i], X), dim=1); state[2][self.i] = key_values; "
         "attention1(X, key_values, key_values)", "greedy_decode_cached", '''
@torch.no_grad()
def greedy_decode_cached(model, src, max_len, bos_id, eos_id):
    enc_valid_lens = padding_mask(src, model.pad_id)
    enc_outputs = model.encode(src, enc_valid_lens)
    state = [enc_outputs, enc_valid_lens, [None] * len(model.decoder_layers)]
    pos_table = model.positions(enc_outputs.new_zeros(1, max_len, model.d_model))[0]
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for t in range(max_len):
        X = model.tgt_embed(ys[:, -1:]) * math.sqrt(model.d_model) + pos_table[t]
        for i, blk in enumerate(model.decoder_layers):
            key_values = X if state[2][i] is None else torch.cat((state[2][i], X), dim=1)
            state[2][i] = key_values
            if blk.norm_first:
                raise NotImplementedError("d2l's decoder block is post-norm")
            Y = blk.norm1(X + blk.self_attn(X, key_values, key_values)[0])
            Z = blk.norm2(Y + blk.cross_attn(Y, state[0], state[0], state[1])[0])
            X = blk.norm3(Z + blk.ff(Z))
        next_token = model.output(X)[:, -1].argmax(-1).masked_fill(done, model.pad_id)
        ys = torch.cat([ys, next_token[:, None]], dim=1)
        done = done | (next_token == eos_id)
        if done.all():
            break
    return ys[:, 1:]
''', breach="caches the layer inputs and projects every earlier token to keys and values again at each step",
         names=("recomput", "inputs", "project", "keys and values of earlier", "w_k")),
    Port("Annotated Transformer decoding loop (no cache: decode the whole prefix each step)",
         "harvardnlp/annotated-transformer, greedy_decode: out = model.decode(memory, src_mask, ys, "
         "subsequent_mask(ys.size(1))) on all tokens so far at every step", "greedy_decode_cached", '''
def subsequent_mask(size, device=None):
    attn_shape = (1, size, size)
    return torch.triu(torch.ones(attn_shape, device=device), diagonal=1).type(torch.uint8) == 0


@torch.no_grad()
def greedy_decode_cached(model, src, max_len, bos_id, eos_id):
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    ys = torch.zeros(src.shape[0], 1).fill_(bos_id).type_as(src.data)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for i in range(max_len):
        out = model.decode(ys, memory, src_mask, subsequent_mask(ys.size(1), device=src.device))
        _, next_word = torch.max(out[:, -1], dim=1)
        next_word = next_word.masked_fill(done, model.pad_id)
        ys = torch.cat([ys, next_word.unsqueeze(1).type_as(src.data)], dim=1)
        done = done | (next_word == eos_id)
        if done.all():
            break
    return ys[:, 1:]
''', breach="no key/value cache: runs the decoder on the whole prefix at every step",
         names=("newest token", "whole prefix", "recomput", "all tokens so far", "every step")),
    Port("LLaMA generate: cut each row at eos (eos excluded)",
         "meta-llama/llama llama/generation.py, Llama.generate: 'cut to eos tok if any': eos_idx = toks.index("
         "stop_token); toks = toks[:eos_idx]", "greedy_decode_cached", ATTEND + '''

@torch.no_grad()
def greedy_decode_cached(model, src, max_len, bos_id, eos_id):
    bsz = src.shape[0]
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    memory_mask = src_mask.unsqueeze(1)
    layers = list(model.decoder_layers)
    memory_kv = [(split_heads(l.cross_attn.w_k(memory), l.cross_attn.n_heads),
                  split_heads(l.cross_attn.w_v(memory), l.cross_attn.n_heads)) for l in layers]
    cache = [None] * len(layers)
    freqs = model.positions(memory.new_zeros(1, max_len, model.d_model))[0]
    tokens = torch.full((bsz, 1), bos_id, dtype=torch.long, device=src.device)
    eos_reached = torch.zeros(bsz, dtype=torch.bool, device=src.device)
    for cur_pos in range(max_len):
        h = model.tgt_embed(tokens[:, -1:]) * math.sqrt(model.d_model) + freqs[cur_pos]
        for n, layer in enumerate(layers):
            def attention(x, n=n, layer=layer):
                attn = layer.self_attn
                xk, xv = split_heads(attn.w_k(x), attn.n_heads), split_heads(attn.w_v(x), attn.n_heads)
                if cache[n] is not None:
                    xk, xv = torch.cat([cache[n][0], xk], 2), torch.cat([cache[n][1], xv], 2)
                cache[n] = (xk, xv)
                return _attend(attn, x, xk, xv)
            h = _sublayer(layer, h, layer.norm1, attention)
            h = _sublayer(layer, h, layer.norm2,
                          lambda x, n=n, layer=layer: _attend(layer.cross_attn, x, *memory_kv[n], memory_mask))
            h = _sublayer(layer, h, layer.norm3, layer.ff)
        next_token = model.output(h)[:, -1].argmax(-1)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        eos_reached |= next_token == eos_id
        if all(eos_reached):
            break
    out = tokens[:, 1:].clone()
    for i, toks in enumerate(out.tolist()):                 # cut to eos tok if any
        if eos_id in toks:
            eos_idx = toks.index(eos_id)
            out[i, eos_idx:] = model.pad_id
    return out
''', breach="each row is cut before its eos: eos itself is replaced by pad_id",
         names=INCLUDE_EOS),
]

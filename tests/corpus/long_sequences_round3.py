"""Held-out set 3 (round 3), notebook 09: sliding_window_mask, global_tokens_mask, LinformerSelfAttention, apply_rotary,
greedy_decode_cached."""
from . import Port

ASSIGNMENT = "09_long_sequences"

PORTS = [
    # --- sliding_window_mask -------------------------------------------------------------------------------
    Port("JAX _get_window_mask(T, S, (left, right)), and-ed with _get_causal_mask when causal",
         "jax-ml/jax jax/_src/nn/functions.py: _get_window_mask(T, S, local_window_size): left_window, "
         "right_window = local_window_size; left_mask = query_pos[..., None] <= key_pos[..., None, :] + "
         "left_window; right_mask = query_pos[..., None] >= key_pos[..., None, :] - right_window; return "
         "jnp.logical_and(right_mask, left_mask); dot_product_attention(is_causal=True, local_window_size=...) "
         "combines it with _get_causal_mask (jnp.tril of ones) (window = (w, w); the (1, 1, T, S) axes dropped; "
         "positions made on `device`)",
         "sliding_window_mask", '''
import torch


def _get_causal_mask(T, S, device=None):
    return torch.tril(torch.ones((T, S), dtype=torch.bool, device=device))


def _get_window_mask(T, S, local_window_size, device=None):
    query_pos = torch.arange(T, device=device)
    key_pos = torch.arange(S, device=device)
    left_window, right_window = local_window_size
    left_mask = query_pos[..., None] <= key_pos[..., None, :] + left_window
    right_mask = query_pos[..., None] >= key_pos[..., None, :] - right_window
    return torch.logical_and(right_mask, left_mask)


def sliding_window_mask(T, window, causal=False, device=None):
    mask = _get_window_mask(T, T, (window, window), device=device)
    if causal:
        mask = torch.logical_and(mask, _get_causal_mask(T, T, device=device))
    return mask
'''),

    Port("OpenAI sparse_attention get_attn_mask(n, 'local', local_attn_ctx): band_part(ones, bandwidth - 1, 0)",
         "openai/sparse_attention attention.py, get_attn_mask: attn_mode == 'local': bandwidth = local_attn_ctx; "
         "ctx = tf.minimum(n - 1, bandwidth - 1); b = tf.matrix_band_part(tf.ones([n, n]), ctx, 0) (a window "
         "counting the query itself; local_attn_ctx = window; the same band on both sides when not causal; "
         "tf.matrix_band_part written out, a negative count keeping the whole triangle; returned as a bool (T, T))",
         "sliding_window_mask", '''
import torch


def matrix_band_part(x, num_lower, num_upper):
    n, m = x.shape
    i = torch.arange(n, device=x.device)[:, None]
    j = torch.arange(m, device=x.device)[None, :]
    in_band = torch.ones((n, m), dtype=torch.bool, device=x.device)
    if num_lower >= 0:
        in_band = in_band & ((i - j) <= num_lower)
    if num_upper >= 0:
        in_band = in_band & ((j - i) <= num_upper)
    return x * in_band


def sliding_window_mask(T, window, causal=False, device=None):
    n = T
    bandwidth = window
    ctx = min(n - 1, bandwidth - 1)
    b = matrix_band_part(torch.ones([n, n], device=device), ctx, 0 if causal else ctx)
    return b.bool()
''', breach="the sparse-attention band counts the query itself in its width (ctx = bandwidth - 1): with "
            "local_attn_ctx = window each token sees one neighbour fewer on each side than |i - j| <= window "
            "(and window = 0 keeps everything)",
         names=("off by one", "one too", "window - 1", "edge", "|i - j| <= window", "narrow", "fewer", "one less")),

    # --- global_tokens_mask --------------------------------------------------------------------------------
    Port("xformers global_token_pattern(attention_query_mask)",
         "facebookresearch/xformers xformers/components/attention/attention_patterns.py, "
         "global_token_pattern(attention_query_mask): assert ndim == 1 and dtype == torch.bool; "
         "attention_query_mask = attention_query_mask[None, :]; mask = attention_query_mask | "
         "attention_query_mask.transpose(1, 0) (the query mask: the first n_global positions, made on `device`)",
         "global_tokens_mask", '''
import torch


def global_token_pattern(attention_query_mask):
    assert attention_query_mask.ndim == 1
    assert attention_query_mask.dtype == torch.bool
    attention_query_mask = attention_query_mask[None, :]
    mask = attention_query_mask | attention_query_mask.transpose(1, 0)
    return mask


def global_tokens_mask(T, n_global, device=None):
    return global_token_pattern(torch.arange(T, device=device) < n_global)
'''),

    Port("BigBird global blocks at both ends (global_block_top / bottom / left / right)",
         "google-research/bigbird bigbird/core/attention.py, bigbird_block_rand_mask(..., global_block_left=1, "
         "global_block_right=1) and bigbird_block_rand_mask_with_head(..., global_block_top=1, "
         "global_block_bottom=1, global_block_left=1, global_block_right=1): the first and the last blocks are "
         "global, rows and columns (blocks of one token, n_global of them at each end)",
         "global_tokens_mask", '''
import torch


def global_tokens_mask(T, n_global, device=None):
    global_block_top = global_block_bottom = n_global
    global_block_left = global_block_right = n_global
    idx = torch.arange(T, device=device)
    rows = (idx < global_block_top) | (idx >= T - global_block_bottom)
    cols = (idx < global_block_left) | (idx >= T - global_block_right)
    return rows[:, None] | cols[None, :]
''', breach="makes the last n_global tokens global too (BigBird's global blocks sit at both ends), not only the "
            "first n_global",
         names=("last", "end", "both ends", "final")),

    # --- LinformerSelfAttention ----------------------------------------------------------------------------
    Port("fairseq examples/linformer MultiheadLinearAttention (bias=True projections, compress_k / compress_v)",
         "facebookresearch/fairseq examples/linformer/linformer_src/modules/multihead_linear_attention.py: "
         "k_proj, v_proj, q_proj = nn.Linear(embed_dim, embed_dim, bias=bias) with bias=True by default; "
         "compress_k = nn.Linear(max_seq_len, compress_seq_len, bias=False); reset_parameters: xavier_uniform_ "
         "with gain 1/sqrt(2); forward (self_attention): k_input = F.linear(query.permute(1, 2, 0), "
         "compress_k.weight[:, 0:tgt_len]).permute(2, 0, 1); k = k_proj(k_input); likewise v; q *= scaling "
         "(head_dim ** -0.5); softmax; bmm (one head, batch-first; compress weights held as E and F; no out_proj)",
         "LinformerSelfAttention", '''
import math
import torch
from torch import nn


class LinformerSelfAttention(nn.Module):
    def __init__(self, d_model, seq_len, k, bias=True):
        super().__init__()
        self.embed_dim = d_model
        self.head_dim = d_model
        self.scaling = self.head_dim ** -0.5
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.E = nn.Parameter(torch.empty(k, seq_len))
        self.F = nn.Parameter(torch.empty(k, seq_len))
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.xavier_uniform_(self.w_k.weight, gain=1 / math.sqrt(2))
        nn.init.xavier_uniform_(self.w_v.weight, gain=1 / math.sqrt(2))
        nn.init.xavier_uniform_(self.w_q.weight, gain=1 / math.sqrt(2))
        nn.init.xavier_uniform_(self.E, gain=1 / math.sqrt(2))
        nn.init.xavier_uniform_(self.F, gain=1 / math.sqrt(2))

    def forward(self, x):
        tgt_len = x.shape[1]
        q = self.w_q(x)
        k_input = x.permute(0, 2, 1).contiguous()  # B * C * T
        k_input = torch.nn.functional.linear(k_input, self.E[:, 0:tgt_len]).permute(0, 2, 1).contiguous()
        k = self.w_k(k_input)
        v_input = x.permute(0, 2, 1).contiguous()  # B * C * T
        v_input = torch.nn.functional.linear(v_input, self.F[:, 0:tgt_len]).permute(0, 2, 1).contiguous()
        v = self.w_v(v_input)
        q = q * self.scaling
        attn_weights = torch.bmm(q, k.transpose(1, 2))
        attn_weights_float = torch.softmax(attn_weights, dim=-1)
        attn = torch.bmm(attn_weights_float, v)
        return attn, attn_weights_float
''', breach="the query, key and value projections keep fairseq's default bias=True (and E, F get fairseq's "
            "xavier_uniform initialisation with gain 1/sqrt(2), not standard deviation 1/sqrt(k))",
         names=("bias",)),

    # --- apply_rotary --------------------------------------------------------------------------------------
    Port("rotary-embedding-torch apply_rotary_emb (freqs repeated '... n -> ... (n r)', rotate_half on pairs)",
         "lucidrains/rotary-embedding-torch rotary_embedding_torch/rotary_embedding_torch.py: freqs = 1. / (theta "
         "** (torch.arange(0, dim, 2)[:(dim // 2)].float() / dim)); forward: freqs = einsum('..., f -> ... f', "
         "t.type(freqs.dtype), freqs); freqs = repeat(freqs, '... n -> ... (n r)', r = 2); rotate_half: "
         "rearrange '... (d r) -> ... d r', (-x2, x1) stacked back; apply_rotary_emb: t * freqs.cos() + "
         "rotate_half(t) * freqs.sin(), returned as t's dtype (einops written with unflatten/flatten; the "
         "course's ValueError for odd d)",
         "apply_rotary", '''
import torch


def rotate_half(x):
    x = x.unflatten(-1, (-1, 2))
    x1, x2 = x.unbind(dim=-1)
    x = torch.stack((-x2, x1), dim=-1)
    return x.flatten(-2)


def apply_rotary(x, positions, theta=10000):
    dim = x.shape[-1]
    if dim % 2:
        raise ValueError(f"rotary embeddings rotate pairs of features: the dimension {dim} is odd")
    freqs = 1. / (theta ** (torch.arange(0, dim, 2, device=x.device)[:(dim // 2)].float() / dim))
    t = positions.to(x.device)
    freqs = torch.einsum("..., f -> ... f", t.type(freqs.dtype), freqs)
    freqs = freqs.repeat_interleave(2, dim=-1)
    dtype = x.dtype
    t_transformed = (x * freqs.cos() * 1.) + (rotate_half(x) * freqs.sin() * 1.)
    return t_transformed.type(dtype)
'''),

    Port("MLX nn.RoPE with its default traditional=False (rotates feature i with feature i + dims/2)",
         "ml-explore/mlx python/mlx/nn/layers/positional_encoding.py at 1a48713 (before the mx.fast.rope op), "
         "RoPE(dims, traditional=False, base=10000): __call__ reshapes x to (-1, T, D); create_cos_sin_theta: "
         "freqs = exp(-arange(0, dims // 2) * (log(base) / (dims // 2))), theta = positions * freqs; "
         "_compute_rope: x1 = x[..., : dims // 2]; x2 = x[..., dims // 2 : dims]; rx1 = x1 * cos - x2 * sin; rx2 = "
         "x1 * sin + x2 * cos; concatenate (the given positions instead of arange(offset, N); the course's "
         "ValueError for odd d)",
         "apply_rotary", '''
import math
import torch


def apply_rotary(x, positions, base=10000, scale=1.0):
    dims = x.shape[-1]
    if dims % 2:
        raise ValueError(f"RoPE needs an even number of features, got {dims}")
    shape = x.shape
    x = x.reshape(-1, shape[-2], shape[-1])
    half_D = dims // 2
    pos = positions.to(device=x.device, dtype=x.dtype) * scale
    freqs = torch.exp(-torch.arange(0.0, half_D, dtype=x.dtype, device=x.device) * (math.log(base) / half_D))
    theta = pos.reshape(-1, 1) * freqs.reshape(1, -1)
    costheta, sintheta = torch.cos(theta), torch.sin(theta)
    x1 = x[..., : dims // 2]
    x2 = x[..., dims // 2: dims]
    rx1 = x1 * costheta - x2 * sintheta
    rx2 = x1 * sintheta + x2 * costheta
    rx = torch.cat([rx1, rx2], dim=-1)
    return rx.reshape(shape)
''', breach="pairs feature i with feature i + d/2 (MLX's default, non-'traditional' RoPE), not the neighbouring "
            "features (2i, 2i+1)",
         names=("half", "halves", "rotate_half", "i + d/2", "neighbouring", "0::2", "traditional")),

    # --- greedy_decode_cached ------------------------------------------------------------------------------
    Port("Sockeye inference decoder (projected encoder keys/values once; self-attention states concatenated)",
         "awslabs/sockeye sockeye/decoder.py, TransformerDecoder.init_state_from_encoder (inference_only): "
         "enc_att_kv = layer.enc_attention.ff_kv(encoder_outputs) for every layer, steps = zeros; forward: target "
         "= pos_embedding(step_input, steps) (F.embedding(steps, weight) added), each layer with its "
         "autoregressive state, steps + 1; layers.py MultiHeadSelfAttention (inference): proj = ff_in(inputs); "
         "queries, states = proj.split(...); states = pt.cat((previous_states, states), dim=0) (the time axis); "
         "MultiHeadAttention with projected_memory_kv; post-process 'drn' (the course's modules; keys and values "
         "concatenated rather than interleaved; the search loop pads finished rows as notebook 08 does)",
         "greedy_decode_cached", '''
import math
import torch
import torch.nn.functional as F


def _attend(attn, queries, key_values, mask=None):
    keys, values = key_values.split(key_values.shape[-1] // 2, dim=-1)
    h = attn.n_heads
    contexts, _ = scaled_dot_product_attention(split_heads(queries, h), split_heads(keys, h),
                                               split_heads(values, h), mask)
    return attn.w_o(merge_heads(contexts))


def _decoder_block(layer, target, previous_states, source_mask, enc_att_kv):
    sa = layer.self_attn
    queries = sa.w_q(target)
    states = torch.cat((sa.w_k(target), sa.w_v(target)), dim=-1)
    if previous_states is not None:
        states = torch.cat((previous_states, states), dim=1)
    target_autoregr = _attend(sa, queries, states)
    target = layer.norm1(target + target_autoregr)
    ca = layer.cross_attn
    target_enc_att = _attend(ca, ca.w_q(target), enc_att_kv, source_mask)
    target = layer.norm2(target + target_enc_att)
    target_ff = layer.ff(target)
    target = layer.norm3(target + target_ff)
    return target, states


@torch.no_grad()
def greedy_decode_cached(model, src, max_len, bos_id, eos_id):
    src_mask = padding_mask(src, model.pad_id)
    encoder_outputs = model.encode(src, src_mask)
    source_mask = src_mask.unsqueeze(1)
    layers = list(model.decoder_layers)
    enc_att_kv = [torch.cat((layer.cross_attn.w_k(encoder_outputs), layer.cross_attn.w_v(encoder_outputs)), dim=-1)
                  for layer in layers]
    autoregr_states = [None for _ in layers]
    batch = src.shape[0]
    steps = torch.zeros(batch, 1, dtype=torch.long, device=src.device)
    pos_weight = model.positions(encoder_outputs.new_zeros(1, max_len, model.d_model))[0]
    best_word_index = torch.full((batch, 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(batch, dtype=torch.bool, device=src.device)
    outputs = []
    for t in range(max_len):
        target = model.tgt_embed(best_word_index) * math.sqrt(model.d_model) + F.embedding(steps, pos_weight)
        for n, layer in enumerate(layers):
            target, autoregr_states[n] = _decoder_block(layer, target, autoregr_states[n], source_mask,
                                                        enc_att_kv[n])
        steps = steps + 1
        best_word_index = model.output(target)[:, -1].argmax(-1, keepdim=True)
        next_token = best_word_index[:, 0].masked_fill(done, model.pad_id)
        outputs.append(next_token)
        done = done | (next_token == eos_id)
        if done.all():
            break
    return torch.stack(outputs, dim=1)
'''),

    Port("NeMo TransformerDecoder with decoder_mems_list (each layer's input states cached, keys re-projected)",
         "NVIDIA/NeMo nemo/collections/asr/modules/transformer/transformer_decoders.py, "
         "TransformerDecoder._get_memory_states: memory_states = torch.cat((decoder_mems_list[i], decoder_states), "
         "dim=1); forward: each layer gets decoder_states (the new token) as query and memory_states (all cached "
         "inputs of that layer) as keys and values, the outputs appended to cached_mems_list; "
         "TransformerDecoderBlock.forward_postln: self-attention, += query, layer_norm_1; cross-attention, += , "
         "layer_norm_2; ffn, +=, layer_norm_3; transformer_generators.py GreedySequenceGenerator with pad_profile "
         "(the course's modules)",
         "greedy_decode_cached", '''
import math
import torch


def _get_memory_states(decoder_states, decoder_mems_list=None, i=0):
    if decoder_mems_list is not None:
        memory_states = torch.cat((decoder_mems_list[i], decoder_states), dim=1)
    else:
        memory_states = decoder_states
    return memory_states


def _forward_postln(layer, decoder_query, decoder_mask, decoder_keys, encoder_states, encoder_mask):
    self_attn_output = layer.self_attn(decoder_query, decoder_keys, decoder_keys, decoder_mask)[0]
    self_attn_output = self_attn_output + decoder_query
    self_attn_output = layer.norm1(self_attn_output)
    enc_dec_attn_output = layer.cross_attn(self_attn_output, encoder_states, encoder_states, encoder_mask)[0]
    enc_dec_attn_output = enc_dec_attn_output + self_attn_output
    enc_dec_attn_output = layer.norm2(enc_dec_attn_output)
    output_states = layer.ff(enc_dec_attn_output)
    output_states = output_states + enc_dec_attn_output
    return layer.norm3(output_states)


@torch.no_grad()
def greedy_decode_cached(model, src, max_len, bos_id, eos_id):
    encoder_input_mask = padding_mask(src, model.pad_id)
    encoder_hidden_states = model.encode(src, encoder_input_mask)
    batch_size = src.shape[0]
    pad, eos = model.pad_id, eos_id
    tgt = torch.full((batch_size, 1), bos_id, dtype=torch.long, device=src.device)
    pad_profile = torch.zeros(batch_size, 1).long().to(src.device)
    pos_table = model.positions(encoder_hidden_states.new_zeros(1, max_len, model.d_model))[0]
    decoder_mems_list = None
    for i in range(max_len):
        decoder_hidden_states = model.tgt_embed(tgt[:, -1:]) * math.sqrt(model.d_model) + pos_table[i]
        memory_states = _get_memory_states(decoder_hidden_states, decoder_mems_list, 0)
        cached_mems_list = [memory_states]
        for j, layer in enumerate(model.decoder_layers):
            decoder_hidden_states = _forward_postln(layer, decoder_hidden_states, None, memory_states,
                                                    encoder_hidden_states, encoder_input_mask)
            memory_states = _get_memory_states(decoder_hidden_states, decoder_mems_list, j + 1)
            cached_mems_list.append(memory_states)
        decoder_mems_list = cached_mems_list
        log_probs = torch.log_softmax(model.output(decoder_mems_list[-1][:, -1:]), dim=-1)
        next_tokens = torch.argmax(log_probs[:, -1], dim=-1, keepdim=True)
        next_tokens = pad * pad_profile + next_tokens * (1 - pad_profile)
        pad_profile = torch.max(pad_profile, (next_tokens == eos).long())
        tgt = torch.cat((tgt, next_tokens), dim=-1)
        if pad_profile.sum() == batch_size:
            break
    return tgt[:, 1:]
''', breach="the cache holds each layer's input vectors, not its keys and values: every step projects the keys "
            "and values of all the tokens so far again (and the memory's), so the work per step is not for the "
            "newest token only",
         names=("newest token", "new token", "cache", "project", "keys and values", "recomput", "every step")),
]

"""Eleventh held-out set, notebook 11: ports of PyTorch's CPU flash kernel, the Triton fused-attention tutorial,
NATTEN, SGLang, lucidrains' flash-attention-jax, JAX Pallas, Dao-AILab flash-attention's attention_ref, Llama 3,
x-transformers, HF transformers' Llama and torchtune, each read at its source. Graded before any change: all 3
faithful ports kept their marks, all 11 breaches lost points, and 9 were named; the other two (SGLang's merged state
measured against a log-sum-exp, the Triton tutorial's -1e6 added to masked scores) are named now."""
from tests.corpus import Port

ASSIGNMENT = "11_efficient_attention"

PORTS = [
    # ------------------------------------------------------------------ online_softmax_merge
    Port("pytorch_cpu_flash_merge", "pytorch/pytorch aten/src/ATen/native/cpu/FlashAttentionKernel.cpp cpu_flash_attention row update (tmp_max = max[row] > tmp_max ? ...; if tmp_max == -inf skip the update; sum[row] = tmp_sum + exp(max[row] - tmp_max) * sum[row])", "online_softmax_merge", r'''
def online_softmax_merge(m1, s1, m2, s2):
    # tmp_max = qk_max_data[row] > tmp_max ? qk_max_data[row] : tmp_max
    tmp_max = torch.where(m1 > m2, m1, m2)
    # if (tmp_max == -inf) { ... } : to avoid nan = exp(-inf - (-inf)), the row keeps its old sum
    empty = tmp_max == float("-inf")
    exp_tmp = torch.exp(m1 - tmp_max)                       # exp_tmp <- exp(max[row] - max)
    tmp_sum = s2 * torch.exp(m2 - tmp_max)                  # the new block's sum against the new max
    s = torch.where(empty, s1, tmp_sum + exp_tmp * s1)      # sum[row] <- sum + exp_tmp * sum[row]
    return tmp_max, s
'''),
    Port("triton_tutorial_merge", "triton-lang/triton python/tutorials/06-fused-attention.py _attn_fwd_inner (m_ij = maximum(m_i, ...); alpha = exp2(m_i - m_ij); l_i = l_i * alpha + l_ij: statistics in base 2)", "online_softmax_merge", r'''
def online_softmax_merge(m1, s1, m2, s2):
    # -- update m_i and l_i  (the tutorial keeps its maxima in log2 units: qk_scale *= 1.44269504)
    m_ij = torch.maximum(m1, m2)
    alpha = torch.exp2(m1 - m_ij)
    l_ij = s2 * torch.exp2(m2 - m_ij)
    l_i = s1 * alpha + l_ij
    return m_ij, l_i
''', breach="the merge rescales with exp2 (base-2 exponentials: Triton keeps its statistics in log2 units, folding "
            "log2(e) into qk_scale); with the course's natural-log statistics the factors 2^(m1 - m) are wrong whenever "
            "the maxima differ; and no -inf guard, so two empty blocks give NaN",
         names=("exp2", "base 2", "base-2", "log2", "2^")),
    Port("natten_logsigmoid_merge", "SHI-Labs/NATTEN src/natten/attn_merge.py _merge_attentions_fn (log-sum-exp merge: lse = lse0 - logsigmoid(lse0 - lse1), accumulated in float32)", "online_softmax_merge", r'''
def online_softmax_merge(m1, s1, m2, s2):
    accum_type = torch.float32
    output_type = s1.dtype
    # each block's statistics as one log-sum-exp: lse = m + log(s)
    lse0 = (m1 + torch.log(s1)).to(accum_type)
    lse1 = (m2 + torch.log(s2)).to(accum_type)
    logsumexp = lse0 - F.logsigmoid(lse0 - lse1)
    m = torch.maximum(m1, m2)
    return m, torch.exp(logsumexp - m.to(accum_type)).to(output_type)
''', breach="merges as log-sum-exps via logsigmoid: an empty block on the left (m1 = -inf, s1 = 0) gives "
            "lse0 - logsigmoid(-inf) = -inf + inf = NaN, and two empty blocks give NaN; it also accumulates in "
            "float32, so float64 inputs lose precision",
         names=("nan", "empty", "-inf", "float32", "precision")),
    Port("sglang_merge_state", "sgl-project/sglang python/sglang/srt/layers/attention/triton_ops/merge_state.py merge_state_kernel (states carried as log-sum-exps; max_lse = maximum(p_lse, s_lse); out_se = exp(p_lse - max_lse) + exp(s_lse - max_lse))", "online_softmax_merge", r'''
def online_softmax_merge(m1, s1, m2, s2):
    inf = float("inf")
    p_lse = m1 + torch.log(s1)                 # the prefix state's log-sum-exp
    s_lse = m2 + torch.log(s2)                 # the suffix state's
    p_lse = torch.where(p_lse == inf, -inf, p_lse)
    s_lse = torch.where(s_lse == inf, -inf, s_lse)
    max_lse = torch.maximum(p_lse, s_lse)
    p_lse = p_lse - max_lse
    s_lse = s_lse - max_lse
    out_se = torch.exp(p_lse) + torch.exp(s_lse)
    return max_lse, out_se
''', breach="the merged state's reference is the larger log-sum-exp (m + log s) of the two blocks, not the larger "
            "maximum: the returned m is not max(m1, m2) and s is the sum against that lse (between 1 and 2), so "
            "s * e^m is right but (m, s) are not the row's maximum and sum; two empty blocks give NaN",
         names=("maximum", "log-sum-exp", "logsumexp", "lse", "log(s")),
    Port("flash_attention_jax_merge", "lucidrains/flash-attention-jax flash_attention_jax/flash_attention.py _query_chunk_flash_attention chunk_scanner (new_row_max = maximum(block_row_max, row_max); new_row_sum = exp(row_max - new_row_max) * row_sum + block_row_sum + EPSILON; no -inf guard, row_max starts at -1e6)", "online_softmax_merge", r'''
def online_softmax_merge(m1, s1, m2, s2):
    EPSILON = 1e-10
    new_row_max = torch.maximum(m2, m1)
    exp_row_max_diff = torch.exp(m1 - new_row_max)
    block_row_sum = s2 * torch.exp(m2 - new_row_max) + EPSILON
    new_row_sum = exp_row_max_diff * s1 + block_row_sum
    return new_row_max, new_row_sum
''', breach="no guard for m = -inf (the project starts row_max at -1e6 and masks with -1e10, so it never meets "
            "-inf): two empty blocks give exp(-inf - (-inf)) = NaN; and every merge adds EPSILON = 1e-10 to the sum",
         names=("nan", "-inf", "empty", "epsilon")),
    # ------------------------------------------------------------------ tiled_attention
    Port("pytorch_cpu_flash_tiled", "pytorch/pytorch aten/src/ATen/native/cpu/FlashAttentionKernel.cpp cpu_flash_attention (blocks of kvSplitSize keys; bool mask -> -inf with the scaling fused; rows whose max is -inf are skipped; dst scaled by exp_tmp for n > 0; sum 0 -> 1 at the end)", "tiled_attention", r'''
def tiled_attention(q, k, v, mask=None, block=64):
    NEG_INF = float("-inf")
    scaling_factor = 1.0 / math.sqrt(q.shape[-1])
    t_q, kv_size = q.shape[-2], k.shape[-2]
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    qk_max = q.new_full((*lead, t_q, 1), NEG_INF)          # fill_stub(qk_max_data, -inf)
    qk_sum = q.new_zeros((*lead, t_q, 1))                   # fill_stub(qk_sum_data, 0)
    dst = q.new_zeros((*lead, t_q, v.shape[-1]))
    for n in range(0, kv_size, block):
        kv_block = min(block, kv_size - n)
        qk = q @ k[..., n:n + kv_block, :].transpose(-2, -1)
        if mask is not None:
            # _scale_attn_mask_fusion_kernel: qk <- qk * scaling + (mask ? 0 : -inf); mStrideN == 0 broadcasts
            cols = mask if mask.shape[-1] == 1 else mask[..., n:n + kv_block]
            qk = torch.where(cols, qk * scaling_factor, qk.new_tensor(NEG_INF))
        else:
            qk = qk * scaling_factor
        tmp_max = qk.amax(dim=-1, keepdim=True)
        tmp_max = torch.where(qk_max > tmp_max, qk_max, tmp_max)
        skip = tmp_max == NEG_INF                          # to avoid nan = exp(-inf - (-inf))
        p = torch.exp(qk - tmp_max).masked_fill(skip, 0.0)
        tmp_sum = p.sum(dim=-1, keepdim=True)
        exp_tmp = torch.exp(qk_max - tmp_max)
        qk_sum = torch.where(skip, qk_sum, tmp_sum + exp_tmp * qk_sum)
        qk_max = torch.where(skip, qk_max, tmp_max)
        if n > 0:
            dst = torch.where(skip, dst, dst * exp_tmp)
        dst = p @ v[..., n:n + kv_block, :] + dst        # gemm with beta = (n == 0 ? 0 : 1)
    # Row sums for full masked out rows are 0, we set them to 1
    qk_sum = qk_sum.masked_fill(qk_sum == 0, 1.0)
    return dst * (1 / qk_sum)
'''),
    Port("triton_tutorial_tiled", "triton-lang/triton python/tutorials/06-fused-attention.py _attn_fwd / _attn_fwd_inner (qk_scale = sm_scale * 1.44269504, exp2; masked scores get + where(mask, 0, -1.0e6); l_i starts at 1.0; acc / l_i at the end)", "tiled_attention", r'''
def tiled_attention(q, k, v, mask=None, block=64):
    t_q, n_ctx = q.shape[-2], k.shape[-2]
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    m_i = q.new_full((*lead, t_q), float("-inf"))
    l_i = q.new_zeros((*lead, t_q)) + 1.0
    acc = q.new_zeros((*lead, t_q, v.shape[-1]))
    sm_scale = 1.0 / math.sqrt(q.shape[-1])
    qk_scale = sm_scale * 1.44269504  # 1/log(2)
    for start_n in range(0, n_ctx, block):
        kb = k[..., start_n:start_n + block, :]
        qk = q @ kb.transpose(-2, -1)
        if mask is not None:
            cols = mask if mask.shape[-1] == 1 else mask[..., start_n:start_n + block]
            qk = qk * qk_scale + torch.where(cols, qk.new_tensor(0.0), qk.new_tensor(-1.0e6))
            m_ij = torch.maximum(m_i, qk.amax(-1))
            qk = qk - m_ij[..., None]
        else:
            m_ij = torch.maximum(m_i, qk.amax(-1) * qk_scale)
            qk = qk * qk_scale - m_ij[..., None]
        p = torch.exp2(qk)
        l_ij = p.sum(-1)
        # -- update m_i and l_i
        alpha = torch.exp2(m_i - m_ij)
        l_i = l_i * alpha + l_ij
        # -- update output accumulator --
        acc = acc * alpha[..., None]
        acc = p @ v[..., start_n:start_n + block, :] + acc
        m_i = m_ij
    acc = acc / l_i[..., None]
    return acc
''', breach="masks by adding a finite -1.0e6 to the scores (log2 units) instead of -inf: a query with no key to "
            "attend has all its scores shifted by the same constant, so it attends to every key as if unmasked "
            "instead of getting 0",
         names=("fully masked", "no key", "all-false", "masked row", "zero")),
    Port("flash_attn_attention_ref", "Dao-AILab/flash-attention tests/test_util.py attention_ref (upcast to float32, scores = einsum(q / sqrt(d), k) over the whole sequence, masked_fill -inf, softmax, fully masked rows filled with 0)", "tiled_attention", r'''
def tiled_attention(q, k, v, mask=None, block=64):
    dtype_og = q.dtype
    q, k, v = q.float(), k.float(), v.float()          # upcast=True
    d = q.shape[-1]
    scores = (q / math.sqrt(d)) @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    attention = torch.softmax(scores, dim=-1).to(v.dtype)
    # Some rows might be completely masked out so we fill them with zero instead of NaN
    if mask is not None:
        attention = attention.masked_fill(torch.all(~mask, dim=-1, keepdim=True), 0.0)
    output = attention @ v
    return output.to(dtype=dtype_og)
''', breach="a reference, not a kernel: it builds the whole (T_q, T_k) score matrix and softmax at once, with no "
            "blocks of keys at all (block is ignored), far more than (T_q, block) numbers; it also computes in "
            "float32, so float64 inputs lose precision",
         names=("full", "score matrix", "memory", "largest", "block")),
    Port("flash_attention_jax_tiled", "lucidrains/flash-attention-jax flash_attention_jax/flash_attention.py _query_chunk_flash_attention (q scaled first; MASK_VALUE = -1e10 then exp weights zeroed where masked; block_row_sum + EPSILON; FlashAttention-1 style output renormalised every chunk; row_max starts at -1e6)", "tiled_attention", r'''
def tiled_attention(q, k, v, mask=None, block=64):
    EPSILON = 1e-10
    MASK_VALUE = -1e10
    q_len, dim, k_len, v_dim = q.shape[-2], q.shape[-1], k.shape[-2], v.shape[-1]
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    scale = 1 / math.sqrt(dim)
    q_scaled = q * scale
    out = q.new_zeros((*lead, q_len, v_dim))
    row_sum = q.new_zeros((*lead, q_len, 1))
    row_max = q.new_ones((*lead, q_len, 1)) * -1e6
    for chunk_idx in range(0, k_len, block):
        k_chunk = k[..., chunk_idx:chunk_idx + block, :]
        v_chunk = v[..., chunk_idx:chunk_idx + block, :]
        attn_weights = q_scaled @ k_chunk.transpose(-2, -1)
        if mask is not None:
            key_mask_chunk = mask if mask.shape[-1] == 1 else mask[..., chunk_idx:chunk_idx + block]
            attn_weights = torch.where(key_mask_chunk, attn_weights, attn_weights.new_tensor(MASK_VALUE))
        block_row_max = attn_weights.amax(dim=-1, keepdim=True)
        new_row_max = torch.maximum(block_row_max, row_max)
        exp_weights = torch.exp(attn_weights - new_row_max)
        if mask is not None:
            exp_weights = torch.where(key_mask_chunk, exp_weights, exp_weights.new_tensor(0.0))
        block_row_sum = exp_weights.sum(dim=-1, keepdim=True) + EPSILON
        exp_values = exp_weights @ v_chunk
        exp_row_max_diff = torch.exp(row_max - new_row_max)
        new_row_sum = exp_row_max_diff * row_sum + block_row_sum
        out = (row_sum / new_row_sum) * exp_row_max_diff * out + (1.0 / new_row_sum) * exp_values
        row_sum, row_max = new_row_sum, new_row_max
    return out
'''),
    Port("pallas_gpu_mha_tiled", "jax-ml/jax jax/experimental/pallas/ops/gpu/attention.py mha (sm_scale: float = 1.0 default) and mha_forward_kernel (qk *= log2(e) * sm_scale if sm_scale != 1; where(mask, qk, DEFAULT_MASK_VALUE = -0.7 * float32 max); exp2; o /= l_i)", "tiled_attention", r'''
def tiled_attention(q, k, v, mask=None, block=64, sm_scale=1.0):
    DEFAULT_MASK_VALUE = -0.7 * float(torch.finfo(torch.float32).max)
    block_q, seq_len = q.shape[-2], k.shape[-2]
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    m_i = q.new_zeros((*lead, block_q)) - float("inf")
    l_i = q.new_zeros((*lead, block_q))
    o = q.new_zeros((*lead, block_q, v.shape[-1]))
    for start_k in range(0, seq_len, block):
        k_blk = k[..., start_k:start_k + block, :]
        qk = q @ k_blk.transpose(-2, -1)
        # Scale logits to convert from base-2 to the natural log domain.
        qk_scale = math.log2(math.e)
        if sm_scale != 1.:
            qk_scale *= sm_scale
        qk = qk * qk_scale
        if mask is not None:
            cols = mask if mask.shape[-1] == 1 else mask[..., start_k:start_k + block]
            qk = torch.where(cols, qk, qk.new_tensor(DEFAULT_MASK_VALUE))
        m_curr = qk.amax(dim=-1)
        m_next = torch.maximum(m_i, m_curr)
        correction = torch.exp2(m_i - m_next)
        l_prev_corr = correction * l_i
        s_curr = torch.exp2(qk - m_next[..., None])
        l_curr = s_curr.sum(dim=-1)
        l_next = l_prev_corr + l_curr
        o_prev_corr = correction[..., None] * o
        o = o_prev_corr + s_curr @ v[..., start_k:start_k + block, :]
        m_i, l_i = m_next, l_next
    o = o / l_i[..., None]
    return o
''', breach="Pallas' mha takes sm_scale with a default of 1.0 and the course's call never passes one, so the scores "
            "are not divided by sqrt(d_k); it also masks with a finite DEFAULT_MASK_VALUE, so a query with no key "
            "gets the mean of the values instead of 0",
         names=("scale", "sqrt", "d_k", "scaling", "temperature")),
    # ------------------------------------------------------------------ GroupedQueryAttention
    Port("llama3_attention", "meta-llama/llama3 llama/model.py Attention (wq/wk/wv/wo with bias=False; repeat_kv via [:, :, :, None, :].expand().reshape(); scores / sqrt(head_dim) + additive mask; softmax(scores.float()).type_as(xq))", "GroupedQueryAttention", r'''
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, dropout=0.0):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
        if n_heads % n_kv_heads != 0:
            raise ValueError(f"n_heads={n_heads} must be divisible by n_kv_heads={n_kv_heads}")
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.n_rep = n_heads // n_kv_heads
        self.head_dim = d_model // n_heads
        self.w_q = nn.Linear(d_model, n_heads * self.head_dim, bias=False)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.w_o = nn.Linear(n_heads * self.head_dim, d_model, bias=False)
        self.dropout = nn.Dropout(dropout)

    @staticmethod
    def repeat_kv(x, n_rep):
        """torch.repeat_interleave(x, dim=2, repeats=n_rep)"""
        bs, slen, n_kv_heads, head_dim = x.shape
        if n_rep == 1:
            return x
        return (x[:, :, :, None, :].expand(bs, slen, n_kv_heads, n_rep, head_dim)
                .reshape(bs, slen, n_kv_heads * n_rep, head_dim))

    def forward(self, query, key, value, mask=None):
        bsz, seqlen, _ = query.shape
        kvlen = key.shape[1]
        xq = self.w_q(query).view(bsz, seqlen, self.n_heads, self.head_dim)
        xk = self.w_k(key).view(bsz, kvlen, self.n_kv_heads, self.head_dim)
        xv = self.w_v(value).view(bsz, kvlen, self.n_kv_heads, self.head_dim)
        keys = self.repeat_kv(xk, self.n_rep)
        values = self.repeat_kv(xv, self.n_rep)
        xq = xq.transpose(1, 2)
        keys = keys.transpose(1, 2)
        values = values.transpose(1, 2)
        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.head_dim)
        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)
            scores = scores + torch.where(mask, scores.new_tensor(0.0), scores.new_tensor(float("-inf")))
        scores = F.softmax(scores.float(), dim=-1).type_as(xq)
        output = torch.matmul(self.dropout(scores), values)
        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.w_o(output), scores
''', breach="Llama's projections have no bias (bias=False on wq, wk, wv and wo), where the contract asks for "
            "nn.Linear with bias; its softmax also runs in float32 (scores.float()), losing float64 precision",
         names=("bias", "bias=False", "no bias", "without bias")),
    Port("x_transformers_attend", "lucidrains/x-transformers x_transformers/attend.py Attend.forward (kv heads expanded with repeat(t, 'b kvh n d -> b (r kvh) n d'); sim * scale, masked_fill(~mask, -finfo.max), softmax, dropout); projections as the course's", "GroupedQueryAttention", r'''
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, dropout=0.0):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError("d_model must be divisible by n_heads")
        if n_heads % n_kv_heads != 0:
            raise ValueError("heads must be divisible by kv_heads")
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.dim_head = d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.dim_head)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.dim_head)
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        q = split_heads(self.w_q(query), self.n_heads)
        k = split_heads(self.w_k(key), self.n_kv_heads)
        v = split_heads(self.w_v(value), self.n_kv_heads)
        heads, kv_heads = q.shape[1], k.shape[1]
        scale = q.shape[-1] ** -0.5
        # handle grouped multi-query attention: repeat(t, 'b kvh n d -> b (r kvh) n d', r = heads // kv_heads)
        if kv_heads < heads:
            r = heads // kv_heads
            k, v = tuple(t.repeat(1, r, 1, 1) for t in (k, v))
        sim = torch.einsum('bhid,bhjd->bhij', q, k) * scale
        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)
            sim = sim.masked_fill(~mask, -torch.finfo(sim.dtype).max)
        attn = sim.softmax(dim=-1)
        out = torch.einsum('bhij,bhjd->bhid', self.dropout(attn), v)
        return self.w_o(merge_heads(out)), attn
''', breach="x-transformers expands the kv heads with einops 'b kvh n d -> b (r kvh) n d', repeat as the outer "
            "factor: kv heads [0, 1] become [0, 1, 0, 1, ...], so query head j uses kv head j % n_kv_heads, not "
            "j // (n_heads // n_kv_heads)",
         names=("repeat_interleave", "order", "consecutive", "[0, 1, 0, 1", "interleave", "group")),
    Port("hf_llama_attention", "huggingface/transformers src/transformers/models/llama/modeling_llama.py LlamaAttention (bias=config.attention_bias, here True; ValueError only for hidden_size % num_heads; repeat_kv expand/reshape; softmax(dtype=torch.float32).to(query dtype); dropout(training=self.training))", "GroupedQueryAttention", r'''
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, dropout=0.0):
        super().__init__()
        self.attention_dropout = dropout
        self.hidden_size = d_model
        self.n_heads = n_heads
        self.head_dim = self.hidden_size // self.n_heads
        self.n_kv_heads = n_kv_heads
        self.num_key_value_groups = self.n_heads // self.n_kv_heads
        if (self.head_dim * self.n_heads) != self.hidden_size:
            raise ValueError(
                f"hidden_size must be divisible by num_heads (got `hidden_size`: {self.hidden_size}"
                f" and `num_heads`: {self.n_heads}).")
        attention_bias = True
        self.w_q = nn.Linear(self.hidden_size, self.n_heads * self.head_dim, bias=attention_bias)
        self.w_k = nn.Linear(self.hidden_size, self.n_kv_heads * self.head_dim, bias=attention_bias)
        self.w_v = nn.Linear(self.hidden_size, self.n_kv_heads * self.head_dim, bias=attention_bias)
        self.w_o = nn.Linear(self.hidden_size, self.hidden_size, bias=attention_bias)
        self.dropout = nn.Dropout(dropout)

    @staticmethod
    def repeat_kv(hidden_states, n_rep):
        batch, num_key_value_heads, slen, head_dim = hidden_states.shape
        if n_rep == 1:
            return hidden_states
        hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
        return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)

    def forward(self, query, key, value, mask=None):
        bsz, q_len, _ = query.size()
        kv_len = key.shape[1]
        query_states = self.w_q(query).view(bsz, q_len, self.n_heads, self.head_dim).transpose(1, 2)
        key_states = self.w_k(key).view(bsz, kv_len, self.n_kv_heads, self.head_dim).transpose(1, 2)
        value_states = self.w_v(value).view(bsz, kv_len, self.n_kv_heads, self.head_dim).transpose(1, 2)
        key_states = self.repeat_kv(key_states, self.num_key_value_groups)
        value_states = self.repeat_kv(value_states, self.num_key_value_groups)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.head_dim)
        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)
            causal_mask = torch.zeros(mask.shape, dtype=attn_weights.dtype).masked_fill(
                ~mask, torch.finfo(attn_weights.dtype).min)
            attn_weights = attn_weights + causal_mask
        # upcast attention to fp32
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_weights = self.dropout(attn_weights)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous().reshape(bsz, q_len, self.hidden_size)
        return self.w_o(attn_output), attn_weights
''', breach="HF checks only hidden_size % num_heads: n_heads not divisible by n_kv_heads raises no ValueError "
            "(the group size is floored); and its softmax runs in float32 (upcast attention to fp32), so float64 "
            "inputs lose precision",
         names=("valueerror", "divisible", "n_kv_heads", "float32", "precision")),
    Port("torchtune_mha", "pytorch/torchtune torchtune/modules/attention.py MultiHeadAttention (ValueErrors; k.unsqueeze(2).expand(b, num_kv_heads, q_per_kv, -1, head_dim).flatten(1, 2); mask[:, None, :, :]; dropout_p only in training; is_causal=True default: no mask means causal)", "GroupedQueryAttention", r'''
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, dropout=0.0, is_causal=True):
        super().__init__()
        if n_heads % n_kv_heads != 0:
            raise ValueError(f"num_heads ({n_heads}) must be divisible by num_kv_heads ({n_kv_heads})")
        if d_model % n_heads != 0:
            raise ValueError(f"embed_dim ({d_model}) must be divisible by num_heads ({n_heads})")
        if dropout < 0 or dropout > 1:
            raise ValueError(f"attn_dropout ({dropout}) must be between 0.0 and 1.0")
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.head_dim = d_model // n_heads
        self.is_causal = is_causal
        self.w_q = nn.Linear(d_model, n_heads * self.head_dim)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.head_dim)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.head_dim)
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        b, s_x, _ = query.shape
        s_y = key.shape[1]
        q_per_kv = self.n_heads // self.n_kv_heads
        q = self.w_q(query).view(b, s_x, self.n_kv_heads * q_per_kv, self.head_dim).transpose(1, 2)
        k = self.w_k(key).view(b, s_y, -1, self.head_dim).transpose(1, 2)
        v = self.w_v(value).view(b, s_y, -1, self.head_dim).transpose(1, 2)
        if self.n_heads != self.n_kv_heads:
            expand_shape = (b, self.n_kv_heads, q_per_kv, -1, self.head_dim)
            k = k.unsqueeze(2).expand(expand_shape).flatten(1, 2)
            v = v.unsqueeze(2).expand(expand_shape).flatten(1, 2)
        if mask is not None and mask.dim() == 3:
            mask = mask[:, None, :, :]                       # shape: [b, 1, s, s]
        is_causal = mask is None and self.is_causal
        if is_causal:
            mask = torch.ones(s_x, s_y, dtype=torch.bool, device=query.device).tril()
        out, weights = scaled_dot_product_attention(q, k, v, mask)
        if self.training and self.dropout.p > 0:
            out = self.dropout(weights) @ v
        out = out.transpose(1, 2).contiguous().view(b, s_x, -1)
        return self.w_o(out), weights
''', breach="torchtune's MultiHeadAttention defaults to is_causal=True: with mask=None it applies a causal mask "
            "(SDPA's is_causal), where the contract's mask=None means every query attends to every key",
         names=("causal", "is_causal", "mask=none", "no mask", "unmasked")),
]

"""Ninth held-out set, notebook 11: ports of memory-efficient attention (Rabe & Staats), pure-PyTorch FlashAttention
re-implementations, ring/blockwise attention, Qualcomm's KV blocking, FlashInfer, CUTLASS, vLLM, gemma.cpp, split-KV
merges (ring-flash-attn, FlashInfer, LightLLM, ExecuTorch, FlagGems) and grouped-query attention from llm-foundry, OLMo,
GPT-NeoX, Grok-1, gemma_pytorch, ring-attention-pytorch, gpt-oss, grouped-query-attention-pytorch and Mamba's MHA,
each read at its source. Projects in JAX, C++, CUDA or Triton are ported to PyTorch line by line; einops is written
with torch; rotary embeddings, norms and KV caches of the LLM layers are left out."""
from tests.corpus import Port

ASSIGNMENT = "11_efficient_attention"

PORTS = [
    # ------------------------------------------------------------------ online_softmax_merge
    Port("ringflash_lse_merge", "zhuzilin/ring-flash-attention ring_flash_attn/utils.py _update_out_and_lse (the "
         "statistics of each part are carried as a log-sum-exp, lse = m + log s, and merged as "
         "lse - logsigmoid(lse - block_lse); the first block is copied in (out is None) rather than merged with an "
         "empty state)", "online_softmax_merge", r'''
def online_softmax_merge(m1, s1, m2, s2):
    # ring-flash-attn keeps one number per row: lse = m + log(s)
    lse = m1 + torch.log(s1)
    block_lse = m2 + torch.log(s2)
    # new_lse = lse + torch.log(1 + torch.exp(block_lse - lse))
    # For additional context and discussion, please refer to:
    # https://github.com/zhuzilin/ring-flash-attention/pull/34#issuecomment-2076126795
    lse = lse - F.logsigmoid(lse - block_lse)
    m = torch.maximum(m1, m2)
    return m, torch.exp(lse - m)
''', breach="merging into an empty running block (m1 = -inf, s1 = 0) computes -inf - (-inf) inside "
             "logsigmoid: the result is NaN instead of the other block's statistics, and two empty blocks give NaN "
             "(the source never merges into an empty state: it copies the first block)",
         names=("nan", "empty", "-inf", "masked block", "both")),

    Port("flashinfer_state_merge", "flashinfer-ai/flashinfer include/flashinfer/attention/state.cuh state_t::merge "
         "(m = max(m_prev, other_m); f = ptx_exp2(max(m_prev - m, -inf)), the max dropping the NaN of two empty "
         "states; FlashInfer keeps m and d in base 2, its logits pre-multiplied by log2(e))", "online_softmax_merge", r'''
def online_softmax_merge(m1, s1, m2, s2):
    m = torch.maximum(m1, m2)
    # max() drops the NaN from merging two empty states ((-inf) - (-inf)).
    neg_inf = torch.tensor(float("-inf"), dtype=m.dtype, device=m.device)
    f1 = torch.exp2(torch.fmax(m1 - m, neg_inf))
    f2 = torch.exp2(torch.fmax(m2 - m, neg_inf))
    s = s1 * f1 + s2 * f2
    return m, s
''', breach="rescales with 2**(m_i - m) (ptx_exp2) instead of e**(m_i - m): FlashInfer's m and d are base-2 "
             "statistics of log2(e)-scaled logits, so with the course's natural-base m and s the sum is wrong "
             "whenever the two maxima differ",
         names=("exp2", "base 2", "base-2", "2**", "2^")),

    Port("lightllm_decode_stage2", "ModelTC/lightllm lightllm/models/llama/triton_kernel/flash_decoding_stage2.py "
         "_fwd_kernel_flash_decode_stage2 (new_max_logic = maximum(tlogic, max_logic); old_scale = exp(max_logic - "
         "new_max_logic); sum_exp = sum_exp * old_scale + exp_logic, no guard for -inf)", "online_softmax_merge", r'''
def online_softmax_merge(m1, s1, m2, s2):
    # (max_logic, sum_exp) is the running state, (tlogic, s2) the next split's statistics
    max_logic, sum_exp = m1, s1
    new_max_logic = torch.maximum(m2, max_logic)
    old_scale = torch.exp(max_logic - new_max_logic)
    exp_logic = torch.exp(m2 - new_max_logic)
    sum_exp = sum_exp * old_scale + s2 * exp_logic
    max_logic = new_max_logic
    return max_logic, sum_exp
''', breach="two empty blocks (m = -inf, s = 0) give s = 0 * exp(-inf - (-inf)) = NaN: nothing replaces the "
             "-inf maximum by a stand-in before the subtraction (LightLLM never merges an empty split)",
         names=("nan", "both", "empty", "-inf", "stand-in")),

    Port("executorch_sdpa_stats", "pytorch/executorch extension/llm/custom_ops/op_sdpa_impl.h cpu_flash_attention "
         "row update (tmp_max = qk_max_data[row] > tmp_max ? qk_max_data[row] : tmp_max; if tmp_max == -inf skip "
         "'to avoid nan = exp2f(-inf - (-inf))', else qk_sum_data[row] = tmp_sum + exp(qk_max_data[row] - tmp_max) "
         "* qk_sum_data[row]); a block's tmp_sum is its own sum measured against tmp_max", "online_softmax_merge", r'''
def online_softmax_merge(m1, s1, m2, s2):
    qk_max_data, qk_sum_data = m1, s1              # the row's running statistics
    tmp_max = torch.where(qk_max_data > m2, qk_max_data, m2)
    empty = tmp_max == float("-inf")                # to avoid `nan = exp2f(-inf - (-inf))`
    # qk <- exp(qk - max) and sum per row (the block's own sum, re-measured against tmp_max)
    tmp_sum = s2 * torch.exp(m2 - tmp_max)
    # exp_tmp <- exp(max[row] - max)
    exp_tmp = torch.exp(qk_max_data - tmp_max)
    # sum[row] <- sum + exp_tmp * sum[row]; max[row] <- max
    s = torch.where(empty, qk_sum_data, tmp_sum + exp_tmp * qk_sum_data)
    m = torch.where(empty, qk_max_data, tmp_max)
    return m, s
'''),

    Port("flaggems_softmax_online", "FlagOpen/FlagGems src/flag_gems/ops/softmax.py softmax_kernel_inner online "
         "pass (m_new = maximum(m, inp); all_neg_inf = m_new == -inf; z = where(all_neg_inf, z, z * exp(m - m_new) "
         "+ exp(inp - m_new))), with the incoming element's exp generalised to a block's sum",
         "online_softmax_merge", r'''
def online_softmax_merge(m1, s1, m2, s2):
    m, z = m1, s1
    m_new = torch.maximum(m, m2)
    # it is possible that there are -inf's in the input
    all_neg_inf = m_new == float("-inf")
    z = torch.where(all_neg_inf, z, z * torch.exp(m - m_new) + s2 * torch.exp(m2 - m_new))
    m = m_new
    return m, z
'''),

    # ------------------------------------------------------------------ tiled_attention
    Port("rabe_staats_torch", "AminRezaei0x443/memory-efficient-attention memory_efficient_attention/"
         "attention_torch.py efficient_dot_product_attention and utils.dynamic_slice (Rabe & Staats: chunks of "
         "keys summarised separately, stacked, then combined against the global max; dynamic_slice clamps a start "
         "like jax.lax.dynamic_slice; masks filled with finfo(dtype).min; checkpoint dropped, one head axis added)",
         "tiled_attention", r'''
def tiled_attention(q, k, v, mask=None, block=64):
    import numpy as np

    def dynamic_slice(x, starts, sizes):
        # start_indices[i] = clamp(start_indices[i], 0, operand.dimension_size[i] - size_indices[i])
        starts = [np.clip(starts[i], 0, x.shape[i] - sizes[i]) for i in range(len(starts))]
        for i, (start, size) in enumerate(zip(starts, sizes)):
            x = torch.index_select(x, i, torch.tensor(range(start, start + size), device=x.device))
        return x

    def map_pt(f, xs):
        t = [f(x) for x in xs]
        return tuple(map(torch.stack, zip(*t)))

    def scan(f, init, xs, length=None):
        if xs is None:
            xs = [None] * length
        carry = init
        ys = []
        for x in xs:
            carry, y = f(carry, x)
            ys.append(y)
        return carry, torch.stack(ys)

    def _query_chunk_attention(query, key, value, mask, key_chunk_size=4096):
        num_kv, num_heads, k_features = key.shape[-3:]
        v_features = value.shape[-1]
        key_chunk_size = min(key_chunk_size, num_kv)
        query = query / math.sqrt(k_features)

        def summarize_chunk(query, key, value, mask):
            attn_weights = torch.einsum('...qhd,...khd->...qhk', query, key)
            if mask is not None:
                big_neg = torch.finfo(attn_weights.dtype).min
                big_neg = torch.tensor(big_neg, device=mask.device, dtype=torch.float32)
                mask = torch.einsum('...hqk->...qhk', mask)
                attn_weights = torch.where(mask, attn_weights, big_neg)
            max_score, _ = torch.max(attn_weights, -1, keepdim=True)
            max_score = max_score.detach()
            exp_weights = torch.exp(attn_weights - max_score)
            exp_values = torch.einsum('...vhf,...qhv->...qhf', value, exp_weights)
            max_score = torch.einsum('...qhk->...qh', max_score)
            return exp_values, exp_weights.sum(dim=-1), max_score

        def chunk_scanner(chunk_idx):
            key_chunk = dynamic_slice(key, tuple([0] * (key.ndim - 3)) + (chunk_idx, 0, 0),
                                      tuple(key.shape[:-3]) + (key_chunk_size, num_heads, k_features))
            value_chunk = dynamic_slice(value, tuple([0] * (value.ndim - 3)) + (chunk_idx, 0, 0),
                                        tuple(value.shape[:-3]) + (key_chunk_size, num_heads, v_features))
            if mask is None:
                mask_chunk = None
            elif mask.shape[-1] == 1:
                mask_chunk = mask
            elif mask.shape[-1] == num_kv:
                mask_chunk = dynamic_slice(mask, tuple([0] * (mask.ndim - 3)) + (0, 0, chunk_idx),
                                           tuple(mask.shape[:-3]) + (mask.shape[-3], mask.shape[-2], key_chunk_size))
            else:
                raise TypeError(f'mask.shape[-1] == {mask.shape[-1]} must broadcast with key.shape[-3] == {num_kv}')
            return summarize_chunk(query, key_chunk, value_chunk, mask_chunk)

        chunk_values, chunk_weights, chunk_max = map_pt(
            chunk_scanner, xs=torch.arange(0, num_kv, key_chunk_size))

        global_max, _ = torch.max(chunk_max, 0, keepdim=True)
        max_diffs = torch.exp(chunk_max - global_max)
        chunk_values *= torch.unsqueeze(max_diffs, -1)
        chunk_weights *= max_diffs

        all_values = chunk_values.sum(dim=0)
        all_weights = torch.unsqueeze(chunk_weights, -1).sum(dim=0)
        return all_values / all_weights

    def efficient_dot_product_attention(query, key, value, mask=None, query_chunk_size=1024, key_chunk_size=4096):
        num_q, num_heads, q_features = query.shape[-3:]

        def chunk_scanner(chunk_idx, _):
            query_chunk = dynamic_slice(query, tuple([0] * (query.ndim - 3)) + (chunk_idx, 0, 0),
                                        tuple(query.shape[:-3]) + (min(query_chunk_size, num_q), num_heads, q_features))
            if mask is None:
                mask_chunk = None
            elif mask.shape[-2] == 1:
                mask_chunk = mask
            elif mask.shape[-2] == num_q:
                mask_chunk = dynamic_slice(mask, tuple([0] * (mask.ndim - 3)) + (0, chunk_idx, 0),
                                           tuple(mask.shape[:-3]) + (mask.shape[-3], min(query_chunk_size, num_q), mask.shape[-1]))
            else:
                raise TypeError(f'mask.shape[-2] == {mask.shape[-2]} must broadcast with query.shape[-3] == {num_q}')
            return (chunk_idx + query_chunk_size,
                    _query_chunk_attention(query_chunk, key, value, mask_chunk, key_chunk_size=key_chunk_size))

        _, res = scan(chunk_scanner, init=0, xs=None, length=math.ceil(num_q / query_chunk_size))
        rl = [res[i] for i in range(res.shape[0])]
        return torch.cat(rl, dim=-3)

    # the course's (..., T, d) with one head: the library's [batch..., length, heads, depth]
    if mask is not None:
        mask = mask.unsqueeze(-3)          # broadcastable to [batch..., heads, q_length, kv_length]
    out = efficient_dot_product_attention(q.unsqueeze(-2), k.unsqueeze(-2), v.unsqueeze(-2), mask,
                                          key_chunk_size=block)
    return out.squeeze(-2)
''', breach="dynamic_slice clamps the start of the last chunk so that it stays block keys long: when T_k is not "
             "a multiple of block the last chunk overlaps the one before and those keys are counted twice; also a "
             "query with no key gets the mean of the values (finfo.min filling), and every chunk's output is stacked "
             "(n_chunks, ..., T_q, d_v) before the combination",
         names=("multiple of", "last block", "twice", "overlap", "not a multiple")),

    Port("lucidrains_flash_fwd", "lucidrains/memory-efficient-attention-pytorch memory_efficient_attention_pytorch/"
         "flash_attention.py FlashAttentionFunction.forward (o = zeros_like(q) updated in place, row statistics "
         "allocated without a dtype, masks of 2 dims read as key padding 'b n -> b 1 1 n', -finfo.max filling and "
         "row sums clamped at 1e-10; causal=False, q_bucket_size=512, einops rearrange written as reshape)",
         "tiled_attention", r'''
def tiled_attention(q, k, v, mask=None, block=64):
    EPSILON = 1e-10
    q_bucket_size, k_bucket_size = 512, block
    with torch.no_grad():
        device = q.device
        max_neg_value = -torch.finfo(q.dtype).max

        o = torch.zeros_like(q)
        all_row_sums = torch.zeros((*q.shape[:-1], 1), device=device)
        all_row_maxes = torch.full((*q.shape[:-1], 1), max_neg_value, device=device)

        scale = (q.shape[-1] ** -0.5)

        num_row_tiles = math.ceil(q.shape[-2] / q_bucket_size)
        num_col_tiles = math.ceil(k.shape[-2] / k_bucket_size)

        if mask is not None and mask.ndim == 2:
            mask = mask.reshape(mask.shape[0], 1, 1, mask.shape[1])      # rearrange(mask, 'b n -> b 1 1 n')

        if mask is None:
            col_masks = (None,) * num_col_tiles
            mask = (col_masks,) * num_row_tiles
        else:
            mask = ((mask,) * num_row_tiles) if mask.shape[-2] == 1 else mask.split(q_bucket_size, dim=-2)
            mask = tuple(((row_mask,) * num_col_tiles) if row_mask.shape[-1] == 1 else row_mask.split(k_bucket_size, dim=-1) for row_mask in mask)

        row_splits = zip(
            q.split(q_bucket_size, dim=-2),
            o.split(q_bucket_size, dim=-2),
            mask,
            all_row_sums.split(q_bucket_size, dim=-2),
            all_row_maxes.split(q_bucket_size, dim=-2),
        )

        for ind, (qc, oc, row_mask, row_sums, row_maxes) in enumerate(row_splits):
            col_splits = zip(
                k.split(k_bucket_size, dim=-2),
                v.split(k_bucket_size, dim=-2),
                row_mask
            )

            for k_ind, (kc, vc, col_mask) in enumerate(col_splits):
                attn_weights = torch.einsum('... i d, ... j d -> ... i j', qc, kc) * scale

                if col_mask is not None:
                    attn_weights.masked_fill_(~col_mask, max_neg_value)

                block_row_maxes = attn_weights.amax(dim=-1, keepdims=True)
                new_row_maxes = torch.maximum(block_row_maxes, row_maxes)

                exp_weights = torch.exp(attn_weights - new_row_maxes)

                if col_mask is not None:
                    exp_weights.masked_fill_(~col_mask, 0.)

                block_row_sums = exp_weights.sum(dim=-1, keepdims=True).clamp(min=EPSILON)

                exp_values = torch.einsum('... i j, ... j d -> ... i d', exp_weights, vc)

                exp_row_max_diff = torch.exp(row_maxes - new_row_maxes)

                new_row_sums = exp_row_max_diff * row_sums + block_row_sums

                oc.mul_(exp_row_max_diff).add_(exp_values)

                row_maxes.copy_(new_row_maxes)
                row_sums.copy_(new_row_sums)

            oc.div_(row_sums)

        return o
''', breach="the output buffer is zeros_like(q), so it fails whenever d_v != d_k (the values' width must equal the "
             "queries'); a 2-dim mask is read as a (batch, keys) padding mask, so a (T_q, T_k) mask broadcasts wrongly; "
             "the running max and sum are float32 whatever the input dtype, so float64 inputs fail (-finfo(float64).max "
             "does not fit the float32 buffer)",
         names=("d_v", "value dim", "zeros_like(q)", "2-d mask", "float64")),

    Port("shreyansh_flash_fwd", "shreyansh26/FlashAttention-PyTorch flash_attention.py flash_attention_forward "
         "(FlashAttention-1: outer loop over key blocks, O kept normalised, NEG_INF = -1e10 and EPSILON = 1e-10 "
         "added to each block's sum, Q_BLOCK_SIZE = min(BLOCK_SIZE, Q.shape[-1]); returns O, l, m for the backward "
         "pass; the key-padding mask 'b j -> b 1 1 j' generalised to the course's masks, .to('cuda') dropped)",
         "tiled_attention", r'''
def tiled_attention(q, k, v, mask=None, block=64):
    BLOCK_SIZE = block
    NEG_INF = -1e10  # -infinity
    EPSILON = 1e-10
    Q, K, V = q, k, v

    O = torch.zeros_like(Q)
    l = torch.zeros(Q.shape[:-1], device=Q.device)[..., None]
    m = torch.ones(Q.shape[:-1], device=Q.device)[..., None] * NEG_INF

    Q_BLOCK_SIZE = min(BLOCK_SIZE, Q.shape[-1])
    KV_BLOCK_SIZE = BLOCK_SIZE

    Q_BLOCKS = torch.split(Q, Q_BLOCK_SIZE, dim=-2)
    K_BLOCKS = torch.split(K, KV_BLOCK_SIZE, dim=-2)
    V_BLOCKS = torch.split(V, KV_BLOCK_SIZE, dim=-2)
    if mask is not None:
        mask = mask.expand(*mask.shape[:-2], Q.shape[-2], K.shape[-2])
        mask_BLOCKS = [[mq.split(KV_BLOCK_SIZE, dim=-1) for mq in mask.split(Q_BLOCK_SIZE, dim=-2)]]

    Tr = len(Q_BLOCKS)
    Tc = len(K_BLOCKS)

    O_BLOCKS = list(torch.split(O, Q_BLOCK_SIZE, dim=-2))
    l_BLOCKS = list(torch.split(l, Q_BLOCK_SIZE, dim=-2))
    m_BLOCKS = list(torch.split(m, Q_BLOCK_SIZE, dim=-2))

    for j in range(Tc):
        Kj = K_BLOCKS[j]
        Vj = V_BLOCKS[j]

        for i in range(Tr):
            Qi = Q_BLOCKS[i]
            Oi = O_BLOCKS[i]
            li = l_BLOCKS[i]
            mi = m_BLOCKS[i]

            scale = 1 / math.sqrt(Q.shape[-1])
            Qi_scaled = Qi * scale

            S_ij = torch.einsum('... i d, ... j d -> ... i j', Qi_scaled, Kj)

            # Masking
            if mask is not None:
                maskj_temp = mask_BLOCKS[0][i][j]
                S_ij = torch.where(maskj_temp > 0, S_ij, NEG_INF)

            m_block_ij, _ = torch.max(S_ij, dim=-1, keepdims=True)
            P_ij = torch.exp(S_ij - m_block_ij)
            # Masking
            if mask is not None:
                P_ij = torch.where(maskj_temp > 0, P_ij, 0.)

            l_block_ij = torch.sum(P_ij, dim=-1, keepdims=True) + EPSILON

            P_ij_Vj = torch.einsum('... i j, ... j d -> ... i d', P_ij, Vj)

            mi_new = torch.maximum(m_block_ij, mi)
            li_new = torch.exp(mi - mi_new) * li + torch.exp(m_block_ij - mi_new) * l_block_ij

            O_BLOCKS[i] = (li / li_new) * torch.exp(mi - mi_new) * Oi + (torch.exp(m_block_ij - mi_new) / li_new) * P_ij_Vj
            l_BLOCKS[i] = li_new
            m_BLOCKS[i] = mi_new

    O = torch.cat(O_BLOCKS, dim=-2)
    l = torch.cat(l_BLOCKS, dim=-2)
    m = torch.cat(m_BLOCKS, dim=-2)
    return O, l, m
''', breach="returns the tuple (O, l, m), the row sums and maxima kept for the backward pass, instead of the output "
             "alone; the output buffer is also zeros_like(Q), so d_v != d_k fails",
         names=("tuple", "(o, l, m)", "returns", "output only", "out only")),

    Port("tiny_flash_v2_multihead", "66RING/tiny-flash-attention flash_attention_py/tiny_flash_attn.py "
         "flash_attn_v2_multihead (asserts q, k, v of one shape; output_buffer = torch.zeros(v.shape) in float32; "
         "blocks of BLOCK_M queries and keys counted with //; no softmax scale: '# NOTE: we need softmax_scale here "
         "in real world'); the source has no mask, the port fills masked scores with -inf",
         "tiled_attention", r'''
def tiled_attention(q, k, v, mask=None, block=64):
    BLOCK_M = block
    device = q.device
    assert q.shape == k.shape
    assert q.shape == v.shape

    # Create output buffer in HBM.
    output_buffer = torch.zeros(v.shape, device=device)

    Q_BLOCKS = torch.split(q, BLOCK_M, dim=-2)
    K_BLOCKS = torch.split(k, BLOCK_M, dim=-2)
    V_BLOCKS = torch.split(v, BLOCK_M, dim=-2)
    if mask is not None:
        mask = mask.expand(*mask.shape[:-2], q.shape[-2], k.shape[-2])

    *lead, seqlen, headdim = q.shape

    seqlen = q.shape[-2] // BLOCK_M
    for j in range(seqlen):
        qi = Q_BLOCKS[j]
        old_o = output_buffer[..., j * BLOCK_M: (j + 1) * BLOCK_M, :]
        # Create denominator buffer in HBM.
        old_d = torch.zeros((*lead, BLOCK_M, 1), device=device)
        # Create max(x) buffer in HBM.
        old_m = torch.full((*lead, BLOCK_M, 1), -torch.inf, device=device)

        k_block_num = k.shape[-2] // BLOCK_M
        for i in range(k_block_num):
            kj = K_BLOCKS[i]
            vj = V_BLOCKS[i]

            # Compute qk.
            # NOTE: we need softmax_scale here in real world
            x_qkt = (qi @ kj.transpose(-2, -1))
            if mask is not None:
                x_qkt = x_qkt.masked_fill(~mask[..., j * BLOCK_M:(j + 1) * BLOCK_M, i * BLOCK_M:(i + 1) * BLOCK_M],
                                          float("-inf"))
            # Get local max of qk.
            local_m = torch.max(x_qkt, dim=-1, keepdim=True).values

            # Compute new max.
            new_m = torch.maximum(old_m, local_m)
            # Compute numerator. i.e.: e^{x - max(x)}.
            safe_e = torch.exp(x_qkt - new_m)
            # Compute new part of denominator.
            curr_d = torch.sum(safe_e, dim=-1, keepdim=True)
            # Update denominator.
            new_d = old_d * torch.exp(old_m - new_m) + curr_d
            # Update old output and accumulate new output.
            new_o = old_o * torch.exp(old_m - new_m) + safe_e @ vj.float()

            old_m = new_m
            old_d = new_d
            old_o = new_o

        output_buffer[..., j * BLOCK_M: (j + 1) * BLOCK_M, :] = old_o / old_d

    return output_buffer
''', breach="the scores are never scaled by 1/sqrt(d_k) (the source leaves softmax_scale as a NOTE); the numbers of "
             "query and key blocks are T // block, so a shorter last block of keys is skipped and its query rows stay "
             "0; q, k and v must have one shape (asserts), and the output is float32",
         names=("scale", "sqrt", "1/sqrt(d_k)", "temperature", "unscaled")),

    Port("ringattention_blockwise", "haoliuhl/ringattention ringattention/ringattention_jax.py _blockwise_attention_fwd "
         "and _chunk_attention_bias (JAX, ported to PyTorch: k and v reshaped into kv_len // key_chunk_size chunks; a "
         "mask enters as a bias jnp.minimum(0, ~mask * finfo(dtype).min); numerator / denominator at the end; one "
         "query chunk)", "tiled_attention", r'''
def tiled_attention(q, k, v, mask=None, block=64):
    query_chunk_size, key_chunk_size = q.shape[-2], block
    q_len, dim_per_head = q.shape[-2:]
    kv_len = k.shape[-2]
    num_q = q_len // query_chunk_size
    num_kv = kv_len // key_chunk_size
    k = k.reshape(*k.shape[:-2], num_kv, key_chunk_size, k.shape[-1])
    v = v.reshape(*v.shape[:-2], num_kv, key_chunk_size, v.shape[-1])

    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-3], v.shape[:-3])
    numerator = q.new_zeros((*lead, q_len, v.shape[-1]))
    denominator = q.new_zeros((*lead, q_len))
    max_score = q.new_full((*lead, q_len), float("-inf"))

    scale = math.sqrt(q.shape[-1])

    def _chunk_attention_bias(key_chunk_idx):
        key_offset = key_chunk_idx * key_chunk_size
        chunk_bias = q.new_zeros((1, 1))
        if mask is not None:
            chunk_mask = mask if mask.shape[-1] == 1 else mask[..., key_offset:key_offset + key_chunk_size]
            mask_bias = (~chunk_mask) * torch.finfo(q.dtype).min
            chunk_bias = torch.minimum(chunk_bias, mask_bias)
        return chunk_bias

    for k_chunk_idx in range(num_kv):
        k_chunk, value_chunk = k[..., k_chunk_idx, :, :], v[..., k_chunk_idx, :, :]
        prev_max_score_chunk = max_score
        attn_weights = q @ k_chunk.transpose(-2, -1) / scale
        bias_chunk = _chunk_attention_bias(k_chunk_idx)
        attn_weights = attn_weights + bias_chunk

        max_score_chunk = torch.maximum(prev_max_score_chunk, attn_weights.amax(dim=-1))
        exp_weights = torch.exp(attn_weights - max_score_chunk[..., None])
        exp_values = exp_weights @ value_chunk
        correction = torch.exp(prev_max_score_chunk - max_score_chunk)[..., None]
        numerator = numerator * correction + exp_values
        denominator = denominator * torch.exp(prev_max_score_chunk - max_score_chunk) + exp_weights.sum(dim=-1)
        max_score = max_score_chunk

    return numerator / denominator[..., None]
''', breach="k and v are reshaped into kv_len // key_chunk_size chunks, so T_k must be a multiple of block (and block "
             "no larger than T_k), otherwise the reshape fails; a query with no key gets the mean of the values, "
             "since a mask is a bias of finfo.min rather than -inf",
         names=("multiple", "divisible", "reshape", "fully masked", "no key")),

    Port("qeff_kv_blocking", "quic/efficient-transformers QEfficient/diffusers/models/modeling_utils.py "
         "apply_kv_blocking (sequences with K_CL <= 512 take standard attention: the whole score matrix, masked with "
         "-1e4; longer ones are cut into num_kv_blocks blocks at positions i * CL // num_kv_blocks of the query "
         "length, the mask unused; head blocking off, num_kv_blocks = ceil(T_k / block))", "tiled_attention", r'''
def tiled_attention(q, k, v, mask=None, block=64):
    attention_mask = mask
    CL = q.shape[-2]
    scale_factor = 1.0 / math.sqrt(q.shape[-1])

    num_kv_blocks = math.ceil(k.shape[-2] / block)
    block_positions = [(i * CL) // num_kv_blocks for i in range(num_kv_blocks)]

    # Handle small sequences with standard attention
    K_CL = k.shape[-2]
    if K_CL <= 512:
        scores = torch.matmul(q, k.transpose(-2, -1)) * scale_factor
        if attention_mask is not None:
            scores = torch.where(attention_mask, scores, torch.tensor(-1e4, dtype=scores.dtype, device=scores.device))
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, v)
        return out

    # Initialize online softmax statistics
    running_exp_sum = torch.zeros(q.shape[:-1], device=q.device, dtype=q.dtype)
    running_max = torch.full(q.shape[:-1], float("-inf"), device=q.device, dtype=q.dtype)
    output_blocks = torch.zeros_like(q)

    # Process K,V in blocks using online softmax
    for kv_block_idx in range(num_kv_blocks):
        ki = block_positions[kv_block_idx]

        # Calculate KV block size
        if kv_block_idx == num_kv_blocks - 1:
            real_kv_len = CL - ki
        else:
            real_kv_len = block_positions[kv_block_idx + 1] - ki

        k_block = k[..., ki: ki + real_kv_len, :]
        v_block = v[..., ki: ki + real_kv_len, :]

        # Compute attention scores for current KV block
        qkblock = torch.matmul(q, k_block.transpose(-2, -1)) * scale_factor

        # Online softmax: Update running maximum
        prev_max = running_max.clone()
        running_max = torch.maximum(prev_max, torch.max(qkblock, dim=-1)[0])

        # Calculate numerical stability adjustments
        delta_max = prev_max - running_max
        curr_exp = torch.exp(qkblock - running_max.unsqueeze(-1))

        # Update running sum of exponentials
        prev_exp_sum = running_exp_sum.clone()
        curr_exp_sum = curr_exp.sum(dim=-1)
        running_exp_sum = prev_exp_sum * torch.exp(delta_max) + curr_exp_sum

        # Compute normalized attention weights
        inv_running_exp_sum = 1.0 / running_exp_sum
        softmax_qkblock = curr_exp * inv_running_exp_sum.unsqueeze(-1)

        # Update output with rescaling
        prev_out = output_blocks.clone()
        rescale_factor = (prev_exp_sum * inv_running_exp_sum) * torch.exp(delta_max)
        output_blocks = rescale_factor.unsqueeze(-1) * prev_out + torch.matmul(softmax_qkblock, v_block)

    return output_blocks
''', breach="for T_k <= 512 it is not tiled at all: it builds the full (T_q, T_k) score matrix (and a query with "
             "no key gets the mean of the values, from the -1e4 fill); above 512 keys the mask is ignored and the "
             "blocks are laid out over the query length",
         names=("memory", "full score", "largest tensor", "(t_q, t_k)", "not tiled")),

    Port("flashinfer_prefill_mdo", "flashinfer-ai/flashinfer include/flashinfer/attention/prefill.cuh "
         "update_mdo_states (m_scaled = max(m * sm_scale_log2, -FLT_MAX) 'fully masked rows (m == -inf) yield "
         "exp2(-inf) = 0, not NaN'; o_scale = exp2(m_prev * sm_scale_log2 - m_scaled); s = exp2(s * sm_scale_log2 - "
         "m_scaled); d starts at 1) and mla.cuh normalize_d_ (d_rcp = m != -inf ? 1/d : 0); all queries in one tile",
         "tiled_attention", r'''
def tiled_attention(q, k, v, mask=None, block=64):
    sm_scale_log2 = (1.0 / math.sqrt(q.shape[-1])) * math.log2(math.e)    # variant.sm_scale_log2
    flt_max = torch.finfo(torch.float32).max
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    m = q.new_full((*lead, q.shape[-2], 1), float("-inf"))
    d = q.new_ones((*lead, q.shape[-2], 1))
    o_frag = q.new_zeros((*lead, q.shape[-2], v.shape[-1]))
    for kv_start in range(0, k.shape[-2], block):
        s_frag = q @ k[..., kv_start:kv_start + block, :].transpose(-2, -1)       # raw logits
        if mask is not None:                                                      # logits_mask: -inf where masked
            cols = mask if mask.shape[-1] == 1 else mask[..., kv_start:kv_start + block]
            s_frag = s_frag.masked_fill(~cols, float("-inf"))
        m_prev = m
        m = torch.maximum(m, s_frag.amax(dim=-1, keepdim=True))
        # Per-row clamp: fully masked rows (m == -inf) yield exp2(-inf) = 0, not NaN.
        m_scaled = torch.clamp(m * sm_scale_log2, min=-flt_max)
        o_scale = torch.exp2(m_prev * sm_scale_log2 - m_scaled)
        d = d * o_scale
        o_frag = o_frag * o_scale
        s_frag = torch.exp2(s_frag * sm_scale_log2 - m_scaled)
        d = d + s_frag.sum(dim=-1, keepdim=True)                                  # rowsum
        o_frag = o_frag + s_frag @ v[..., kv_start:kv_start + block, :]
    # compute reciprocal of d
    d_rcp = torch.where(m != float("-inf"), 1.0 / d, torch.zeros_like(d))
    return o_frag * d_rcp
'''),

    Port("cutlass_fmha_iterative_softmax", "NVIDIA/cutlass examples/41_fused_multi_head_attention/kernel_forward.h "
         "iterative_softmax (scores times scaling * kLog2e; changed = m_prime < mi, 'false if both are -inf'; "
         "out_rescale = changed ? exp2f(m_prime - mi) : 1; with a bias, mi temporarily 0 when it is -inf, 'to avoid "
         "nan = exp2f(-inf - (-inf))') and epilogue/epilogue_rescale_output.h MemoryEfficientAttentionNormalize "
         "(alpha = isLast ? 1 / s_prime : 1, beta = alpha * out_rescale); a boolean mask as a -inf bias, all queries "
         "in one tile", "tiled_attention", r'''
def tiled_attention(q, k, v, mask=None, block=64):
    kLog2e = 1.4426950408889634074  # log_2(e) = M_LOG2E
    scale = 1.0 / math.sqrt(q.shape[-1])
    neg_inf = float("-inf")
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    mi = q.new_full((*lead, q.shape[-2], 1), neg_inf)
    m_prime = q.new_full((*lead, q.shape[-2], 1), neg_inf)
    s_prime = q.new_zeros((*lead, q.shape[-2], 1))
    accum_o = q.new_zeros((*lead, q.shape[-2], v.shape[-1]))
    for iter_key_start in range(0, k.shape[-2], block):
        accum = (q @ k[..., iter_key_start:iter_key_start + block, :].transpose(-2, -1)) * scale
        if mask is not None:                     # Pij += Bij, with the boolean mask as a -inf bias
            cols = mask if mask.shape[-1] == 1 else mask[..., iter_key_start:iter_key_start + block]
            accum = accum.masked_fill(~cols, neg_inf)
        frag = accum * kLog2e
        # First update `mi` to the max per-row
        mi = torch.maximum(mi, frag.amax(dim=-1, keepdim=True))
        changed = m_prime < mi                   # `false` if both are -inf
        out_rescale = torch.where(changed, torch.exp2(m_prime - mi), torch.ones_like(mi))
        s_prime = torch.where(changed, s_prime * out_rescale, s_prime)
        # it's possible that all the first values of attention are masked to `-inf`: temporarily set `mi` to 0
        restore_mi_to_minus_inf = ~changed & (mi == neg_inf)
        mi_row = torch.where(restore_mi_to_minus_inf, torch.zeros_like(mi), mi)
        frag = torch.exp2(frag - mi_row)
        accum_o = accum_o * out_rescale + frag @ v[..., iter_key_start:iter_key_start + block, :]
        s_prime = s_prime + frag.sum(dim=-1, keepdim=True)
        # Restore `mi`, or m_prime[id] = mi[id]
        m_prime = torch.where(restore_mi_to_minus_inf, m_prime, mi)
    # MemoryEfficientAttentionNormalize, isLast: alpha = 1 / s_prime
    alpha = 1 / s_prime
    return alpha * accum_o
''', breach="a query whose keys are all masked keeps s_prime = 0, and the last epilogue multiplies its zero "
             "accumulator by alpha = 1 / s_prime = inf: NaN instead of 0 (the -inf guard inside the loop only "
             "protects rows whose first keys are masked)",
         names=("nan", "no key", "fully masked", "all keys masked", "inf")),

    Port("vllm_unified_attention_2d", "vllm-project/vllm vllm/attention/ops/triton_unified_attention.py "
         "kernel_unified_attention_2d (M = -inf, L = 1.0, acc = 0; m_j = maximum(M, max(S)); 'For sliding window "
         "there's a chance the max is -inf due to masking of the entire row. In this case we need to set m_j 0 to "
         "avoid NaN'; epilogue acc / L), the boolean mask in place of the causal seq_mask", "tiled_attention", r'''
def tiled_attention(q, k, v, mask=None, block=64):
    TILE_SIZE = block
    scale = 1.0 / math.sqrt(q.shape[-1])
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    M = q.new_full((*lead, q.shape[-2]), float("-inf"))
    L = q.new_full((*lead, q.shape[-2]), 1.0)
    acc = q.new_zeros((*lead, q.shape[-2], v.shape[-1]))
    for j in range(0, k.shape[-2], TILE_SIZE):
        K = k[..., j:j + TILE_SIZE, :]
        V = v[..., j:j + TILE_SIZE, :]
        # S : (BLOCK_M, TILE_SIZE)
        S = scale * (q @ K.transpose(-2, -1))
        if mask is not None:
            seq_mask = mask if mask.shape[-1] == 1 else mask[..., j:j + TILE_SIZE]
            S = torch.where(seq_mask, S, float("-inf"))
        # compute running maximum
        m_j = torch.maximum(M, S.amax(dim=-1))
        # For sliding window there's a chance the max is -inf due to masking of
        # the entire row. In this case we need to set m_j 0 to avoid NaN
        m_j = torch.where(m_j > float("-inf"), m_j, 0.0)
        P = torch.exp(S - m_j[..., None])
        l_j = P.sum(dim=-1)
        alpha = torch.exp(M - m_j)
        acc = acc * alpha[..., None]
        # update constants
        L = L * alpha + l_j
        M = m_j
        acc = acc + P @ V
    # epilogue
    acc = acc / L[..., None]
    return acc
''', breach="a query whose keys are all masked ends with L = 0 and acc = 0, and the epilogue acc / L gives NaN "
             "instead of 0 (the guard on m_j only avoids NaN inside the loop; in vLLM every query sees at least "
             "itself)",
         names=("nan", "no key", "fully masked", "all keys masked", "0 / 0")),

    Port("gemma_cpp_tile_flash", "google/gemma.cpp gemma/flash_attention.cc TileFlashAttention4 and "
         "SingleFlashAttentionRowVector (old_m = -FLT_MAX / 2, old_d = 0; after every tile the output is "
         "renormalised: scale = old_d * exp(old_m - m); old_d = sum(x) + scale; x and scale multiplied by 1 / old_d; "
         "the query pre-scaled by 1/sqrt(head_dim)); the causal range replaced by the course's mask as -inf",
         "tiled_attention", r'''
def tiled_attention(q, k, v, mask=None, block=64):
    q = q * (1.0 / math.sqrt(q.shape[-1]))             # query_scale applied before QDotK
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    old_m = q.new_full((*lead, q.shape[-2], 1), -torch.finfo(torch.float32).max / 2.0)
    old_d = q.new_zeros((*lead, q.shape[-2], 1))
    att_out = q.new_zeros((*lead, q.shape[-2], v.shape[-1]))
    for position in range(0, k.shape[-2], block):
        x = q @ k[..., position:position + block, :].transpose(-2, -1)
        if mask is not None:
            cols = mask if mask.shape[-1] == 1 else mask[..., position:position + block]
            x = x.masked_fill(~cols, float("-inf"))
        # SingleFlashAttentionRowVector
        m = x.amax(dim=-1, keepdim=True)
        m = torch.maximum(m, old_m)
        x = torch.exp(x - m)
        scale = old_d * torch.exp(old_m - m)
        old_d = x.sum(dim=-1, keepdim=True) + scale
        old_m = m
        one_over_d = 1.0 / old_d
        scale = scale * one_over_d
        x = x * one_over_d
        # MulByConst(scale, att_out) then MulByConstAndAdd(x, v, att_out)
        att_out = att_out * scale + x @ v[..., position:position + block, :]
    return att_out
''', breach="the output is renormalised after every tile by 1 / old_d, and old_d is 0 after a tile in which all of a "
             "query's keys are masked: 0 * inf gives NaN for that row, for a query with no key at all and for one "
             "whose first block of keys is masked",
         names=("nan", "fully masked", "no key", "first block", "masked block")),

    # ------------------------------------------------------------------ GroupedQueryAttention
    Port("llmfoundry_gqa", "mosaicml/llm-foundry llmfoundry/models/layers/attention.py GroupedQueryAttention and "
         "scaled_multihead_dot_product_attention (ValueError checks, MPTConfig's d_model % n_heads included; Wqkv "
         "with bias = not no_bias split in three; repeat_kv_for_gqa expands consecutively; finfo.min masking; "
         "dropout(attn_weight, inplace=True) before attn_weight is returned)", "GroupedQueryAttention", r'''
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, dropout=0.0):
        super().__init__()
        if d_model % n_heads != 0:                    # MPTConfig._validate_config
            raise ValueError('d_model must be divisible by n_heads')
        self.d_model = d_model
        self.n_heads = n_heads
        self.kv_n_heads = n_kv_heads
        self.n_kv_heads = n_kv_heads
        self.head_dim = d_model // n_heads
        if self.kv_n_heads <= 0:
            raise ValueError('kv_n_heads should be greater than zero.')
        if self.kv_n_heads > self.n_heads:
            raise ValueError('The number of KV heads should be less than or equal to Q heads.')
        if self.n_heads % self.kv_n_heads != 0:
            raise ValueError('Each Q head should get the same number of KV heads, so n_heads must be divisible by kv_n_heads.')
        self.softmax_scale = 1 / math.sqrt(self.d_model / self.n_heads)
        self.attn_dropout_p = dropout
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, self.kv_n_heads * self.head_dim)
        self.w_v = nn.Linear(d_model, self.kv_n_heads * self.head_dim)
        self.w_o = nn.Linear(d_model, d_model)     # out_proj

    @staticmethod
    def repeat_kv_for_gqa(hidden, n_rep):
        if n_rep == 1:
            return hidden
        b, s, kv_n_heads, d = hidden.shape
        hidden = hidden[:, :, :, None, :].expand(b, s, kv_n_heads, n_rep, d)
        return hidden.reshape(b, s, kv_n_heads * n_rep, d)

    def forward(self, query, key, value, mask=None):
        q, k, v = self.w_q(query), self.w_k(key), self.w_v(value)
        q = q.unflatten(-1, (self.n_heads, -1)).permute(0, 2, 1, 3)          # 'b s (h d) -> b h s d'
        k = k.unflatten(-1, (self.kv_n_heads, -1)).permute(0, 2, 3, 1)       # 'b s (h d) -> b h d s'
        v = v.unflatten(-1, (self.kv_n_heads, -1)).permute(0, 2, 1, 3)       # 'b s (h d) -> b h s d'
        if self.kv_n_heads > 1 and self.kv_n_heads < self.n_heads:
            k = self.repeat_kv_for_gqa(k.transpose(1, 2), self.n_heads // self.kv_n_heads).transpose(1, 2)
            v = self.repeat_kv_for_gqa(v.transpose(1, 2), self.n_heads // self.kv_n_heads).transpose(1, 2)
        attn_weight = q.matmul(k) * self.softmax_scale
        min_val = torch.finfo(q.dtype).min
        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)
            attn_weight = attn_weight.masked_fill(~mask, min_val)
        attn_weight = torch.softmax(attn_weight, dim=-1)
        if self.attn_dropout_p:
            attn_weight = torch.nn.functional.dropout(attn_weight, p=self.attn_dropout_p,
                                                      training=self.training, inplace=True)
        out = attn_weight.to(v.dtype).matmul(v)
        out = out.transpose(1, 2).flatten(-2)                                 # 'b h s d -> b s (h d)'
        return self.w_o(out), attn_weight
'''),  # its weights after dropout are accepted, as in notebook 05: a faithful port

    Port("olmo_sequential_block", "allenai/OLMo olmo/model.py OLMoBlock.__init__ ('assert config.d_model % "
         "config.n_heads == 0'), OLMoSequentialBlock (att_proj with bias=config.include_bias, True here, split into "
         "its fused_dims) and OLMoBlock.attention/_scaled_dot_product_attention (assert num_q_heads % num_kv_heads; "
         "k.repeat_interleave(num_q_heads // num_kv_heads, dim=1); F.scaled_dot_product_attention with "
         "dropout_p in training, written with notebook 01's attention to return the weights)", "GroupedQueryAttention",
         r'''
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, dropout=0.0):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads                  # config.effective_n_kv_heads
        head_dim = d_model // n_heads
        self.fused_dims = (d_model, n_kv_heads * head_dim, n_kv_heads * head_dim)
        self.w_q = nn.Linear(d_model, self.fused_dims[0])
        self.w_k = nn.Linear(d_model, self.fused_dims[1])
        self.w_v = nn.Linear(d_model, self.fused_dims[2])
        self.w_o = nn.Linear(d_model, d_model)        # attn_out
        self.attention_dropout = dropout

    def _scaled_dot_product_attention(self, q, k, v, attn_mask=None, dropout_p=0.0):
        # torch's sdpa doesn't support GQA, so we're doing this
        assert k.size(1) == v.size(1)
        num_kv_heads = k.size(1)
        num_q_heads = q.size(1)
        if num_q_heads != num_kv_heads:
            assert num_q_heads % num_kv_heads == 0
            k = k.repeat_interleave(num_q_heads // num_kv_heads, dim=1, output_size=num_q_heads)
            v = v.repeat_interleave(num_q_heads // num_kv_heads, dim=1, output_size=num_q_heads)
        out, weights = scaled_dot_product_attention(q, k, v, attn_mask)
        if dropout_p > 0:
            out = F.dropout(weights, p=dropout_p) @ v
        return out, weights

    def forward(self, query, key, value, mask=None):
        B, T, C = query.size()  # batch size, sequence length, d_model
        q, k, v = self.w_q(query), self.w_k(key), self.w_v(value)
        # shape: (B, nh, T, hs)
        q = q.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)
        # shape: (B, n_kv_h, T, hs)
        k = k.view(B, key.size(1), self.n_kv_heads, C // self.n_heads).transpose(1, 2)
        v = v.view(B, value.size(1), self.n_kv_heads, C // self.n_heads).transpose(1, 2)
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)
        att, weights = self._scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=0.0 if not self.training else self.attention_dropout)
        # Re-assemble all head outputs side-by-side.
        att = att.transpose(1, 2).contiguous().view(B, T, C)
        # Apply output projection.
        return self.w_o(att), weights
''', breach="sizes that do not divide raise AssertionError (assert d_model % n_heads == 0 in __init__; n_heads % "
             "n_kv_heads is only asserted inside the forward pass), never ValueError",
         names=("valueerror", "assert", "divisible", "n_kv_heads")),

    Port("gptneox_gqa_project", "EleutherAI/gpt-neox megatron/model/transformer.py ParallelSelfAttention (gqa_project "
         "splits query_key_value, use_bias_in_attn_linear=True; torch.repeat_interleave of k and v on the head axis; "
         "baddbmm with alpha = 1/norm_factor; mpu.divide asserts divisibility) with gpt2_attention_mask_func "
         "(masked_fill_(ltor_mask, finfo.min): True marks a position to hide); layout [sq, b, np, hn]",
         "GroupedQueryAttention", r'''
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, dropout=0.0):
        super().__init__()
        assert d_model % n_heads == 0, f"{d_model} is not divisible by {n_heads}"       # mpu.divide
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.num_attention_heads_per_partition = n_heads
        self.num_kv_heads_per_partition = n_kv_heads
        self.hidden_size_per_attention_head = d_model // n_heads
        self.norm_factor = math.sqrt(self.hidden_size_per_attention_head)
        kv_size = n_kv_heads * self.hidden_size_per_attention_head
        self.w_q = nn.Linear(d_model, d_model)          # query_key_value, split as in gqa_project
        self.w_k = nn.Linear(d_model, kv_size)
        self.w_v = nn.Linear(d_model, kv_size)
        self.w_o = nn.Linear(d_model, d_model)          # dense
        self.attention_dropout = nn.Dropout(dropout)

    @staticmethod
    def gpt2_attention_mask_func(attention_scores, ltor_mask):
        mask_value = torch.finfo(attention_scores.dtype).min
        mask_value = torch.tensor(mask_value, dtype=attention_scores.dtype, device=attention_scores.device)
        attention_scores.masked_fill_(ltor_mask, mask_value)
        return attention_scores

    def forward(self, query, key, value, mask=None):
        # [b, s, h] --> [s, b, h]
        hq, hk, hv = self.w_q(query).transpose(0, 1), self.w_k(key).transpose(0, 1), self.w_v(value).transpose(0, 1)
        query_layer = hq.reshape(hq.size(0), hq.size(1), self.num_attention_heads_per_partition, self.hidden_size_per_attention_head)
        key_layer = hk.reshape(hk.size(0), hk.size(1), self.num_kv_heads_per_partition, self.hidden_size_per_attention_head)
        value_layer = hv.reshape(hv.size(0), hv.size(1), self.num_kv_heads_per_partition, self.hidden_size_per_attention_head)
        repeats = int(self.num_attention_heads_per_partition // self.num_kv_heads_per_partition)
        key_layer = torch.repeat_interleave(key_layer, repeats=repeats, dim=2)
        value_layer = torch.repeat_interleave(value_layer, repeats=repeats, dim=2)

        # [b, np, sq, sk]
        output_size = (query_layer.size(1), query_layer.size(2), query_layer.size(0), key_layer.size(0))
        query_layer = query_layer.reshape(output_size[2], output_size[0] * output_size[1], -1)
        key_layer = key_layer.reshape(output_size[3], output_size[0] * output_size[1], -1)
        matmul_result = torch.empty(output_size[0] * output_size[1], output_size[2], output_size[3],
                                    dtype=query_layer.dtype, device=query_layer.device)
        matmul_result = torch.baddbmm(matmul_result, query_layer.transpose(0, 1),
                                      key_layer.transpose(0, 1).transpose(1, 2), beta=0.0, alpha=(1.0 / self.norm_factor))
        attention_scores = matmul_result.view(*output_size)
        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)
            attention_scores = self.gpt2_attention_mask_func(attention_scores, mask)
        attention_probs = torch.softmax(attention_scores, dim=-1)
        # This is actually dropping out entire tokens to attend to
        attention_probs_dropped = self.attention_dropout(attention_probs)

        # value_layer -> context layer. [sk, b, np, hn] --> [b, np, sq, hn]
        output_size = (value_layer.size(1), value_layer.size(2), hq.size(0), value_layer.size(3))
        value_layer = value_layer.reshape(value_layer.size(0), output_size[0] * output_size[1], -1)
        attention_probs_view = attention_probs_dropped.reshape(output_size[0] * output_size[1], output_size[2], -1)
        context_layer = torch.bmm(attention_probs_view, value_layer.transpose(0, 1))
        context_layer = context_layer.view(*output_size)
        # [b, np, sq, hn] --> [sq, b, np, hn] --> [sq, b, hp]
        context_layer = context_layer.permute(2, 0, 1, 3).contiguous()
        context_layer = context_layer.view(*context_layer.size()[:-2], -1)
        return self.w_o(context_layer.transpose(0, 1)), attention_probs
''', breach="the mask is applied with GPT-NeoX's polarity: masked_fill_(mask, min) hides the positions where the "
             "mask is True, so a course mask (True = may attend) is inverted; sizes that do not divide raise "
             "AssertionError, not ValueError",
         names=("polarity", "inverted", "true = masked", "masked out", "opposite")),

    Port("grok1_mha", "xai-org/grok-1 model.py MultiHeadAttention.__call__ (JAX/Haiku, ported to PyTorch: "
         "query_heads reshaped to (b, t, kv_h, h // kv_h, d); attn_logits *= attn_output_multiplier, "
         "0.08838834764831845 in run.py's config; 30 * tanh(logits / 30); where(mask, logits, -1e30); Linear "
         "with_bias=False; assert num_q_heads % num_kv_heads; no dropout; rotary embedding left out)",
         "GroupedQueryAttention", r'''
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, dropout=0.0):
        super().__init__()
        self.num_q_heads = self.n_heads = n_heads
        self.num_kv_heads = self.n_kv_heads = n_kv_heads
        self.key_size = d_model // n_heads
        self.attn_output_multiplier = 0.08838834764831845
        self.w_q = nn.Linear(d_model, n_heads * self.key_size, bias=False)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.key_size, bias=False)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.key_size, bias=False)
        self.w_o = nn.Linear(n_heads * self.key_size, d_model, bias=False)    # final_projection

    def forward(self, query, key, value, mask=None):
        assert self.num_q_heads % self.num_kv_heads == 0
        query_heads = self.w_q(query).unflatten(-1, (self.num_q_heads, self.key_size))    # [B, T', H, Q=K]
        key_heads = self.w_k(key).unflatten(-1, (self.num_kv_heads, self.key_size))        # [B, T, H, K]
        value_heads = self.w_v(value).unflatten(-1, (self.num_kv_heads, self.key_size))    # [B, T, H, V]
        b, t, h, d = query_heads.shape
        _, T, kv_h, _ = key_heads.shape
        assert h % kv_h == 0, f"query_heads {h} must be a multiple of kv_heads {kv_h}"
        query_heads = query_heads.reshape(b, t, kv_h, h // kv_h, d)
        # Attention softmax is always carried out in fp32.
        attn_logits = torch.einsum("...thHd,...Thd->...hHtT", query_heads, key_heads).float()
        attn_logits *= self.attn_output_multiplier
        max_attn_val = torch.tensor(30.0, dtype=attn_logits.dtype)
        attn_logits = max_attn_val * torch.tanh(attn_logits / max_attn_val)
        attn_logits = attn_logits.reshape(b, h, t, T)        # (kv head, group) -> query head
        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)
            attn_logits = torch.where(mask, attn_logits, torch.tensor(-1e30, dtype=attn_logits.dtype))
        attn_weights = torch.softmax(attn_logits, dim=-1).to(query.dtype)
        attn = torch.einsum("...hHtT,...Thd->...thHd", attn_weights.reshape(b, kv_h, h // kv_h, t, T), value_heads)
        attn = attn.reshape(b, t, -1)
        return self.w_o(attn), attn_weights
''', breach="the logits are multiplied by a fixed attn_output_multiplier (0.0884 = 1/sqrt(128)) instead of "
             "1/sqrt(d_head), then soft-capped with 30 * tanh(x / 30); the projections have no bias, there is no "
             "dropout, and sizes that do not divide raise AssertionError",
         names=("scale", "sqrt", "multiplier", "softcap", "tanh")),

    Port("gemma_pytorch_attention", "google/gemma_pytorch gemma/model.py GemmaAttention (assert num_heads % "
         "num_kv_heads; qkv_proj and o_proj are gemma's Linear, which has no bias; scaling = head_dim**-0.5 as "
         "query_pre_attn_scalar is None; repeat_interleave on the head axis; an additive mask of -2.3819763e38; "
         "softmax in float32; no attention dropout; kv cache and rotary embedding left out)",
         "GroupedQueryAttention", r'''
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, dropout=0.0):
        super().__init__()
        self.num_heads = self.n_heads = n_heads
        self.num_kv_heads = self.n_kv_heads = n_kv_heads
        assert self.num_heads % self.num_kv_heads == 0
        self.num_queries_per_kv = self.num_heads // self.num_kv_heads
        self.hidden_size = d_model
        self.head_dim = d_model // n_heads
        self.q_size = self.num_heads * self.head_dim
        self.kv_size = self.num_kv_heads * self.head_dim
        self.scaling = self.head_dim**-0.5
        self.w_q = nn.Linear(self.hidden_size, self.q_size, bias=False)     # qkv_proj, split
        self.w_k = nn.Linear(self.hidden_size, self.kv_size, bias=False)
        self.w_v = nn.Linear(self.hidden_size, self.kv_size, bias=False)
        self.w_o = nn.Linear(self.num_heads * self.head_dim, self.hidden_size, bias=False)

    def forward(self, query, key, value, mask=None):
        batch_size, input_len, _ = query.shape
        xq = self.w_q(query).view(batch_size, -1, self.num_heads, self.head_dim)
        key = self.w_k(key).view(batch_size, -1, self.num_kv_heads, self.head_dim)
        value = self.w_v(value).view(batch_size, -1, self.num_kv_heads, self.head_dim)
        if self.num_kv_heads != self.num_heads:
            key = torch.repeat_interleave(key, self.num_queries_per_kv, dim=2)
            value = torch.repeat_interleave(value, self.num_queries_per_kv, dim=2)
        q = xq.transpose(1, 2)
        k = key.transpose(1, 2)
        v = value.transpose(1, 2)
        q.mul_(self.scaling)
        scores = torch.matmul(q, k.transpose(2, 3))
        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)
            mask = torch.where(mask, 0.0, -2.3819763e38).to(scores.dtype)     # gemma's additive mask
            scores = scores + mask
        scores = F.softmax(scores.float(), dim=-1).type_as(q)
        output = torch.matmul(scores, v)
        output = (output.transpose(1, 2).contiguous().view(batch_size, input_len, -1))
        output = self.w_o(output)
        return output, scores
''', breach="the four projections have no bias (gemma's Linear holds a weight only); there is no attention dropout, "
             "and sizes that do not divide raise AssertionError",
         names=("bias", "no bias", "dropout", "valueerror")),

    Port("ring_attention_default", "lucidrains/ring-attention-pytorch ring_attention_pytorch/ring_attention.py "
         "RingAttention (num_grouped_query_heads = heads per kv head; to_qkv Linear bias=False, prenorm off; to_out "
         "bias=False) with default_attention (q * dim_head**-0.5; k, v = repeat(t, '... h d -> ... (g h) d'); "
         "masked_fill(~mask, -finfo.max); no dropout); einops written with torch", "GroupedQueryAttention", r'''
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, dropout=0.0):
        super().__init__()
        num_grouped_query_heads = n_heads // n_kv_heads
        heads = n_heads
        assert (heads % num_grouped_query_heads) == 0, f'number of query heads ({heads}) must be divisible by the groups ({num_grouped_query_heads})'
        kv_heads = heads // num_grouped_query_heads
        self.heads, self.n_heads, self.n_kv_heads = heads, heads, kv_heads
        self.dim_head = d_model // heads
        dim_inner = self.dim_head * heads
        dim_kv_inner = self.dim_head * kv_heads
        self.w_q = nn.Linear(d_model, dim_inner, bias=False)      # to_qkv, split
        self.w_k = nn.Linear(d_model, dim_kv_inner, bias=False)
        self.w_v = nn.Linear(d_model, dim_kv_inner, bias=False)
        self.w_o = nn.Linear(dim_inner, d_model, bias=False)      # to_out

    @staticmethod
    def default_attention(q, k, v, mask=None):
        q = q * (q.shape[-1] ** -0.5)
        mask_value = -torch.finfo(q.dtype).max
        # account for grouped query attention
        heads, kv_heads = q.shape[-2], k.shape[-2]
        assert heads % kv_heads == 0
        q_head_groups = heads // kv_heads
        k, v = map(lambda t: t.repeat(1, 1, q_head_groups, 1), (k, v))     # '... h d -> ... (g h) d'
        # similarity
        sim = torch.einsum('bihd,bjhd->bhij', q, k)
        if mask is not None:
            sim = sim.masked_fill(~mask, mask_value)
        # attend
        attn = sim.softmax(dim=-1)
        # aggregate
        out = torch.einsum('bhij,bjhd->bihd', attn, v)
        return out, attn

    def forward(self, query, key, value, mask=None):
        q = self.w_q(query).unflatten(-1, (self.heads, self.dim_head))          # 'b n (h d) -> b n h d'
        k = self.w_k(key).unflatten(-1, (self.n_kv_heads, self.dim_head))
        v = self.w_v(value).unflatten(-1, (self.n_kv_heads, self.dim_head))
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)
        out, attn = self.default_attention(q, k, v, mask=mask)
        out = out.flatten(-2)                                                   # 'b n h d -> b n (h d)'
        return self.w_o(out), attn
''', breach="the kv heads are tiled with repeat '... h d -> ... (g h) d', so query head j uses kv head "
             "j % n_kv_heads ([0, 1, 0, 1]) instead of j // (n_heads // n_kv_heads); the projections have no bias, "
             "there is no dropout, and sizes that do not divide raise AssertionError",
         names=("repeat_interleave", "consecutive", "kv head", "[0, 1, 0, 1]", "j // ")),

    Port("gpt_oss_sinks", "openai/gpt-oss gpt_oss/torch/model.py AttentionBlock and sdpa (qkv and out Linear with "
         "bias; q viewed as (n_tokens, num_key_value_heads, q_mult, head_dim) so consecutive query heads share a kv "
         "head; sm_scale = 1/sqrt(head_dim); a learned sink logit per head, S, concatenated to the scores before the "
         "softmax and dropped after it; sinks start at 0 here, they are loaded from the checkpoint in the source); "
         "batched, the causal mask replaced by the course's mask, rotary embedding and norm left out",
         "GroupedQueryAttention", r'''
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, dropout=0.0):
        super().__init__()
        self.head_dim = d_model // n_heads
        self.num_attention_heads = self.n_heads = n_heads
        self.num_key_value_heads = self.n_kv_heads = n_kv_heads
        self.sinks = torch.nn.Parameter(torch.zeros(n_heads))
        self.w_q = nn.Linear(d_model, self.head_dim * n_heads)          # qkv, split
        self.w_k = nn.Linear(d_model, self.head_dim * n_kv_heads)
        self.w_v = nn.Linear(d_model, self.head_dim * n_kv_heads)
        self.w_o = nn.Linear(self.head_dim * n_heads, d_model)          # out
        self.sm_scale = 1 / math.sqrt(self.head_dim)

    def sdpa(self, Q, K, V, S, sm_scale, mask=None):
        # Q: (B, n_tokens, n_heads, q_mult, d_head), K, V: (B, n_keys, n_heads, d_head)
        B, n_tokens, n_heads, q_mult, d_head = Q.shape
        n_keys = K.shape[1]
        K = K[:, :, :, None, :].expand(-1, -1, -1, q_mult, -1)
        V = V[:, :, :, None, :].expand(-1, -1, -1, q_mult, -1)
        S = S.reshape(n_heads, q_mult, 1, 1).expand(B, -1, -1, n_tokens, -1)
        QK = torch.einsum("bqhmd,bkhmd->bhmqk", Q, K)
        QK *= sm_scale
        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)
            mask = mask.expand(*mask.shape[:-3], n_heads * q_mult, n_tokens, n_keys).unflatten(-3, (n_heads, q_mult))
            QK = QK.masked_fill(~mask, -float("inf"))
        QK = torch.cat([QK, S.to(QK.dtype)], dim=-1)
        W = torch.softmax(QK, dim=-1)
        W = W[..., :-1]
        attn = torch.einsum("bhmqk,bkhmd->bqhmd", W, V)
        return attn.reshape(B, n_tokens, -1), W.flatten(1, 2)

    def forward(self, query, key, value, mask=None):
        q = self.w_q(query).unflatten(-1, (self.num_key_value_heads, self.num_attention_heads // self.num_key_value_heads, self.head_dim))
        k = self.w_k(key).unflatten(-1, (self.num_key_value_heads, self.head_dim))
        v = self.w_v(value).unflatten(-1, (self.num_key_value_heads, self.head_dim))
        t, weights = self.sdpa(q, k, v, self.sinks, self.sm_scale, mask)
        return self.w_o(t), weights
''', breach="attention sinks: a per-head sink logit joins every row of scores in the softmax and is dropped after "
             "it, so the weights of a row sum to less than 1 and the output is not softmax(q k^T / sqrt(d)) v; "
             "there is no dropout and no check that the sizes divide",
         names=("sink", "sum to 1", "sum to one", "extra logit", "do not sum")),

    Port("fkodom_multihead_gqa", "fkodom/grouped-query-attention-pytorch grouped_query_attention_pytorch/attention.py "
         "MultiheadGQA (ValueErrors, also head_dim % 8 == 0 and head_dim <= 128; q/k/v/out_proj with bias; a "
         "MAGNETO LayerNorm before out_proj, layer_norm=True by default; xavier init) and scaled_dot_product_gqa "
         "(query / d**0.5; 'b (h g) n d -> b g h n d'; a 2-dim mask is (b, s); masked_fill_ with finfo.min; "
         "F.dropout never reached since MultiheadGQA passes no dropout; weights returned as (b, n, s, h)); einops "
         "written with torch, the module's TODO mask passed through", "GroupedQueryAttention", r'''
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, dropout=0.0):
        super().__init__()
        embed_dim, query_heads, kv_heads = d_model, n_heads, n_kv_heads
        self.query_heads = self.n_heads = query_heads
        self.kv_heads = self.n_kv_heads = kv_heads
        self.dropout = dropout
        self.layer_norm = True
        if self.query_heads % self.kv_heads != 0:
            raise ValueError(f"query_heads ({query_heads}) must be divisible by kv_heads ({kv_heads})")
        elif (embed_dim % self.query_heads != 0) or (embed_dim % self.kv_heads != 0):
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by query_heads ({query_heads}) and kv_heads ({kv_heads})")
        head_dim = embed_dim // query_heads
        if not head_dim % 8 == 0:
            raise ValueError(f"head_dim (embed_dim / num_heads = {head_dim}) must be divisible by 8")
        if not head_dim <= 128:
            raise ValueError(f"head_dim (embed_dim / num_heads = {head_dim}) must be <= 128")
        kv_embed_dim = embed_dim // query_heads * kv_heads
        self.w_q = nn.Linear(embed_dim, embed_dim)
        self.w_k = nn.Linear(embed_dim, kv_embed_dim)
        self.w_v = nn.Linear(embed_dim, kv_embed_dim)
        self.norm = nn.LayerNorm(embed_dim, eps=1e-5)
        self.w_o = nn.Linear(embed_dim, embed_dim)
        nn.init.xavier_normal_(self.w_q.weight); nn.init.constant_(self.w_q.bias, 0)
        nn.init.xavier_normal_(self.w_k.weight); nn.init.constant_(self.w_k.bias, 0)
        nn.init.xavier_normal_(self.w_v.weight); nn.init.constant_(self.w_v.bias, 0)
        nn.init.xavier_normal_(self.w_o.weight); nn.init.constant_(self.w_o.bias, 0)

    @staticmethod
    def scaled_dot_product_gqa(query, key, value, dropout=0.0, mask=None, need_weights=False):
        query, key, value = query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)   # b n h d -> b h n d
        bq, hq, nq, dq = query.shape
        bk, hk, nk, dk = key.shape
        if hq % hk != 0:
            raise ValueError("Expected query heads to be a multiple of key/value heads")
        scale = query.size(-1) ** 0.5
        query = query / scale
        num_head_groups = hq // hk
        query = query.unflatten(1, (hk, num_head_groups)).transpose(1, 2)      # b (h g) n d -> b g h n d
        similarity = torch.einsum("bghnd,bhsd->bghns", query, key)
        if mask is not None:
            if mask.ndim == 2:
                mask = mask[:, None, None, None, :]                           # b s -> b () () () s
            elif mask.ndim == 3:
                mask = mask[:, None, None, :, :]                              # b n s -> b () () n s
            similarity.masked_fill_(~mask, torch.finfo(similarity.dtype).min)
        attention = F.softmax(similarity, dim=-1)
        if dropout > 0.0:
            attention = F.dropout(attention, p=dropout)
        out = torch.einsum("bghns,bhsd->bghnd", attention, value)
        out = out.permute(0, 3, 2, 1, 4).flatten(2, 3)                         # b g h n d -> b n (h g) d
        attn_weights = None
        if need_weights:
            attn_weights = attention.permute(0, 3, 4, 2, 1).flatten(3)        # b g h n s -> b n s (h g)
        return out, attn_weights

    def forward(self, query, key, value, mask=None):
        q = self.w_q(query).unflatten(-1, (self.query_heads, -1))
        k = self.w_k(key).unflatten(-1, (self.kv_heads, -1))
        v = self.w_v(value).unflatten(-1, (self.kv_heads, -1))
        x, attn = self.scaled_dot_product_gqa(q, k, v, mask=mask, need_weights=True)
        x = x.flatten(-2)
        if self.layer_norm:
            x = self.norm(x)
        x = self.w_o(x)
        return x, attn
''', breach="head_dim must be a multiple of 8 (and at most 128), so valid sizes such as d_model=16, 4 heads raise "
             "ValueError; a MAGNETO LayerNorm sits between the heads and w_o; the weights come back as "
             "(B, T_q, T_k, n_heads); a 2-dim mask is a (B, T_k) padding mask; no dropout",
         names=("head_dim", "divisible by 8", "multiple of 8", "layernorm", "layer norm")),

    Port("mamba_mha", "state-spaces/mamba mamba_ssm/modules/mha.py MHA (num_heads_kv toggles MQA/GQA; asserts "
         "num_heads % num_heads_kv and embed_dim % num_heads; in_proj with qkv_proj_bias=True split into q and kv; "
         "out_proj bias=True; torch.repeat_interleave(k, dim=2, repeats=num_heads // num_heads_kv); "
         "F.scaled_dot_product_attention without dropout, written with notebook 01's attention; no conv, mlp or "
         "rotary)", "GroupedQueryAttention", r'''
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, dropout=0.0):
        super().__init__()
        self.embed_dim = d_model
        self.num_heads = self.n_heads = n_heads
        self.num_heads_kv = self.n_kv_heads = n_kv_heads
        assert self.num_heads % self.num_heads_kv == 0, "num_heads must be divisible by num_heads_kv"
        assert self.embed_dim % n_heads == 0, "embed_dim must be divisible by num_heads"
        self.head_dim = self.embed_dim // n_heads
        out_dim = self.head_dim * self.num_heads
        self.w_q = nn.Linear(d_model, self.num_heads * self.head_dim)        # in_proj, split
        self.w_k = nn.Linear(d_model, self.num_heads_kv * self.head_dim)
        self.w_v = nn.Linear(d_model, self.num_heads_kv * self.head_dim)
        self.w_o = nn.Linear(out_dim, d_model)                                # out_proj

    def forward(self, query, key, value, mask=None):
        q = self.w_q(query).unflatten(-1, (self.num_heads, self.head_dim))      # '... (h d) -> ... h d'
        k = self.w_k(key).unflatten(-1, (self.num_heads_kv, self.head_dim))
        v = self.w_v(value).unflatten(-1, (self.num_heads_kv, self.head_dim))
        k = torch.repeat_interleave(k, dim=2, repeats=self.num_heads // self.num_heads_kv)
        v = torch.repeat_interleave(v, dim=2, repeats=self.num_heads // self.num_heads_kv)
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)
        context, weights = scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), mask)
        context = context.transpose(1, 2).flatten(-2)                           # '... h d -> ... (h d)'
        return self.w_o(context), weights
''', breach="no attention dropout at all (the dropout argument changes nothing in training), and sizes that do not "
             "divide raise AssertionError instead of ValueError",
         names=("dropout", "training", "valueerror", "assert")),
]

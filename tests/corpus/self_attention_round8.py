"""Eighth held-out set, graded before any change to the judges.

Held-out set 8, notebook 01: ports of eliben/deep-learning-samples (transformer-attention), ggml
(ggml-org/ggml, src/ggml-cpu), gordicaleksa/pytorch-original-transformer, Informer (zhouhaoyi/Informer2020),
Hugging Face BLOOM and Phi, each read at its source and ported to the course's API with the smallest changes.
"""
from tests.corpus import Port

ASSIGNMENT = "01_self_attention"

PORTS = [
    Port(
        "eliben_softmax_lastdim",
        "eliben/deep-learning-samples transformer-attention/softmax.py, softmax_lastdim (NumPy, ported to torch)",
        "softmax",
        r'''
def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Compute softmax across last dimension of x.

    x is an arbitrary array with at least two dimensions. The returned array has
    the same shape as x, but its elements sum up to 1 across the last dimension.
    """
    # Subtract the max for numerical stability
    ex = torch.exp(x - torch.amax(x, dim=-1, keepdim=True))
    # Divide by sums across last dimension
    return ex / torch.sum(ex, dim=-1, keepdim=True)
''',
        breach="the project's softmax always normalises over the last axis (softmax_lastdim); the dim argument "
               "is accepted but ignored, so softmax(x, dim=1) sums to 1 over the last axis instead",
        names=("dim argument", "ignor", "last axis", "last dimension", "other dim"),
    ),
    Port(
        "ggml_soft_max_rows",
        "ggml-org/ggml src/ggml-cpu/ops.cpp ggml_compute_forward_soft_max_f32 and vec.cpp ggml_vec_soft_max_f32 "
        "(C, row by row, sum in ggml_float)",
        "softmax",
        r'''
def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`, the way ggml computes GGML_OP_SOFT_MAX."""
    # ggml works on rows: the innermost dimension (ne00). Move `dim` there.
    wp = x.movedim(dim, -1)
    max = torch.amax(wp, dim=-1, keepdim=True)                 # ggml_vec_max_f32(ne00, &max, wp)
    dp = torch.exp(wp - max)                                   # ggml_vec_soft_max_f32: y[i] = expf(x[i] - max)
    sum = torch.sum(dp, dim=-1, keepdim=True, dtype=torch.float64)   # ... summed in ggml_float (double)
    sum = 1.0 / sum
    dp = dp * sum.to(dp.dtype)                                 # ggml_vec_scale_f32(ne00, dp, sum)
    return dp.movedim(-1, dim)
''',
    ),
    Port(
        "eliben_self_attention_cols",
        "eliben/deep-learning-samples transformer-attention/selfattention.py, self_attention_cols (one token per "
        "column, softmax_cols), with the projections left out",
        "simple_self_attention",
        r'''
def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    # self_attention_cols keeps one token per *column*: x is (D, N). Work in that layout.
    xc = x.transpose(-2, -1)                  # (..., d, T)
    q = k = v = xc                            # no parameters: Wq = Wk = Wv = I, no biases
    kq = k.transpose(-2, -1) @ q              # (k.T @ q): (..., T, T), kq[j, i] = x_j . x_i
    # att: (N, N) attention matrix. The columns become the weights that sum to 1 for each output vector.
    att = softmax(kq, dim=-2)                 # softmax_cols
    return (v @ att).transpose(-2, -1)        # v @ att is (..., d, T); back to one token per row
''',
    ),
    Port(
        "gordic_mha_attention",
        "gordicaleksa/pytorch-original-transformer models/definitions/transformer_model.py, "
        "MultiHeadedAttention.attention (nn.Softmax replaced by the notebook's softmax, no dropout argument)",
        "scaled_dot_product_attention",
        r'''
def scaled_dot_product_attention(q, k, v, mask=None):
    # Step 1: Scaled dot-product attention, Page 4, Chapter 3.2.1 "Scaled Dot-Product Attention"
    head_dimension = q.shape[-1]
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(head_dimension)

    # Step 2: Optionally mask tokens whose representations we want to ignore by setting a big negative number
    if mask is not None:
        scores.masked_fill_(mask == torch.tensor(False), float("-inf"))

    # Step 3: Calculate the attention weights - how much should we attend to surrounding token representations
    attention_weights = softmax(scores, dim=-1)

    # Step 5: based on attention weights calculate new token representations
    intermediate_token_representations = torch.matmul(attention_weights, v)

    return intermediate_token_representations, attention_weights
''',
    ),
    Port(
        "informer_full_attention",
        "zhouhaoyi/Informer2020 models/attn.py FullAttention (mask_flag=True by default) and "
        "utils/masking.py TriangularCausalMask; einsum over (..., T, d) instead of (B, L, H, E)",
        "scaled_dot_product_attention",
        r'''
def scaled_dot_product_attention(q, k, v, mask=None, mask_flag=True, scale=None):
    import numpy as np
    L, E = q.shape[-2], q.shape[-1]
    scale = scale or 1. / math.sqrt(E)

    scores = torch.einsum("...le,...se->...ls", q, k)
    if mask_flag:
        if mask is None:
            # TriangularCausalMask: True above the diagonal = hidden
            attn_mask = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1).to(q.device)
        else:
            attn_mask = ~mask          # Informer's masks mark the hidden keys
        scores = scores.masked_fill(attn_mask, -np.inf)

    A = softmax(scale * scores, dim=-1)
    V = torch.einsum("...ls,...sd->...ld", A, v)
    return V, A
''',
        breach="Informer's FullAttention has mask_flag=True by default and then builds a TriangularCausalMask "
               "when no mask is given: with mask=None every query is causally masked (and T_q != T_k fails), "
               "where the course attends to every key",
        names=("causal", "future", "triangular", "no mask", "mask=None", "without a mask"),
    ),
    Port(
        "bloom_masked_fill",
        "huggingface/transformers src/transformers/models/bloom/modeling_bloom.py BloomAttention.forward "
        "(masked_fill with attention_mask, torch.finfo(...).min); alibi and the fp32 upcast left out",
        "scaled_dot_product_attention",
        r'''
def scaled_dot_product_attention(q, k, v, mask=None):
    # Layer-wise attention scaling
    inv_norm_factor = 1.0 / math.sqrt(q.shape[-1])
    # [batch_size, num_heads, q_length, k_length]
    attention_scores = torch.matmul(q, k.transpose(-2, -1)) * inv_norm_factor
    if mask is not None:
        attn_weights = torch.masked_fill(attention_scores, mask, torch.finfo(attention_scores.dtype).min)
    else:
        attn_weights = attention_scores
    attention_probs = softmax(attn_weights, dim=-1)
    context_layer = attention_probs @ v
    return context_layer, attention_probs
''',
        breach="BLOOM's boolean attention_mask marks the positions to hide (True = masked, built by "
               "_make_causal_mask/_expand_mask as ~mask); given the course's mask (True = may attend) it hides "
               "exactly the keys that should be seen",
        names=("invert", "opposite", "true = may attend", "true means", "hides the keys", "blocked"),
    ),
    Port(
        "phi_biased_projections",
        "huggingface/transformers src/transformers/models/phi/modeling_phi.py PhiAttention.__init__ "
        "(q_proj/k_proj/v_proj = nn.Linear(..., bias=True)); rotary embedding left out",
        "SelfAttention",
        r'''
from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention, projections as in PhiAttention."""

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        d_k = d_model if d_k is None else d_k
        self.w_q = nn.Linear(d_model, d_k, bias=True)    # q_proj
        self.w_k = nn.Linear(d_model, d_k, bias=True)    # k_proj
        self.w_v = nn.Linear(d_model, d_k, bias=True)    # v_proj

    def forward(self, x, mask=None):
        query_states = self.w_q(x)
        key_states = self.w_k(x)
        value_states = self.w_v(x)
        return scaled_dot_product_attention(query_states, key_states, value_states, mask)
''',
        breach="Phi's query, key and value projections are nn.Linear(..., bias=True); the course's SelfAttention "
               "uses bias-free projections",
        names=("bias",),
    ),
]

"""Held-out set 3 (round 3), notebook 01: softmax, simple_self_attention, scaled_dot_product_attention, SelfAttention."""
from . import Port

ASSIGNMENT = "01_self_attention"

PORTS = [
    # --- softmax -------------------------------------------------------------------------------------------
    Port("llama2.c softmax (max, expf and sum, then divide), vectorised along dim",
         "karpathy/llama2.c run.c, void softmax(float* x, int size): 'find max value (for numerical stability)', "
         "x[i] = expf(x[i] - max_val), sum, x[i] /= sum; one slice of `size` floats at a time, here every slice "
         "along `dim` at once (commit 350e04f)",
         "softmax", '''
import torch


def softmax(x, dim=-1):
    # find max value (for numerical stability), one per slice along dim
    max_val = x.amax(dim=dim, keepdim=True)
    # exp and sum
    x = torch.exp(x - max_val)
    total = x.sum(dim=dim, keepdim=True)
    # normalize
    return x / total
'''),

    Port("ML-From-Scratch Softmax activation (axis=-1 hard-coded)",
         "eriklindernoren/ML-From-Scratch mlfromscratch/deep_learning/activation_functions.py, class Softmax: "
         "__call__(self, x): e_x = np.exp(x - np.max(x, axis=-1, keepdims=True)); return e_x / np.sum(e_x, "
         "axis=-1, keepdims=True) (the activation has no axis argument; wrapped as softmax(x, dim))",
         "softmax", '''
import torch


class Softmax():
    def __call__(self, x):
        e_x = torch.exp(x - torch.amax(x, dim=-1, keepdim=True))
        return e_x / torch.sum(e_x, dim=-1, keepdim=True)

    def gradient(self, x):
        p = self.__call__(x)
        return p * (1 - p)


def softmax(x, dim=-1):
    return Softmax()(x)
''', breach="normalises over the last axis whatever `dim` is asked: the project's Softmax hard-codes axis=-1",
         names=("dim", "axis", "dimension")),

    # --- simple_self_attention -----------------------------------------------------------------------------
    Port("LLMs-from-scratch ch03 simplified self-attention (inputs @ inputs.T, softmax, @ inputs)",
         "rasbt/LLMs-from-scratch ch03/01_main-chapter-code/ch03.ipynb, section 3.3.1 'A simple self-attention "
         "mechanism without trainable weights': attn_scores = inputs @ inputs.T; attn_weights = "
         "torch.softmax(attn_scores, dim=-1); all_context_vecs = attn_weights @ inputs (.T written as "
         ".transpose(-2, -1) for batches, the course's softmax for torch.softmax)",
         "simple_self_attention", '''
def simple_self_attention(x):
    attn_scores = x @ x.transpose(-2, -1)
    attn_weights = softmax(attn_scores, dim=-1)
    all_context_vecs = attn_weights @ x
    return all_context_vecs
'''),

    Port("OpenNMT-py GlobalAttention, attn_type='dot' (torch.bmm on (batch, len, dim))",
         "OpenNMT/OpenNMT-py onmt/modules/global_attention.py, GlobalAttention.score: src_batch, src_len, src_dim = "
         "h_s.size(); tgt_batch, tgt_len, tgt_dim = h_t.size(); 'dot': torch.bmm(h_t, h_s.transpose(1, 2)); "
         "forward: align_vectors = softmax(align.view(batch * target_l, src_l), -1).view(batch, target_l, src_l); "
         "c = torch.bmm(align_vectors, enc_out) (the context c, before linear_out; x is query and memory)",
         "simple_self_attention", '''
import torch


def score(h_t, h_s):
    src_batch, src_len, src_dim = h_s.size()
    tgt_batch, tgt_len, tgt_dim = h_t.size()
    h_s_ = h_s.transpose(1, 2)
    # (batch, t_len, d) x (batch, d, s_len) --> (batch, t_len, s_len)
    return torch.bmm(h_t, h_s_)


def simple_self_attention(x):
    src, enc_out = x, x
    batch, src_l, dim = enc_out.size()
    batch_, target_l, dim_ = src.size()
    # compute attention scores, as in Luong et al.
    align = score(src, enc_out)
    align_vectors = softmax(align.view(batch * target_l, src_l), -1)
    align_vectors = align_vectors.view(batch, target_l, src_l)
    # each context vector c_t is the weighted average over all the source hidden states
    c = torch.bmm(align_vectors, enc_out)
    return c
''', breach="works on (batch, len, dim) tensors only (size() unpacked into three numbers, torch.bmm): a single "
            "sentence (T, d) or heads (B, h, T, d) raise",
         names=("shape", "leading", "(t, d)", "dimensions", "bmm", "4-d", "3-d", "batch")),

    # --- scaled_dot_product_attention ----------------------------------------------------------------------
    Port("Haiku MultiHeadAttention logits (einsum, / sqrt(key_size), jnp.where(mask, logits, -1e30))",
         "google-deepmind/dm-haiku haiku/_src/attention.py, MultiHeadAttention.__call__: attn_logits = "
         "jnp.einsum('...thd,...Thd->...htT', ...); attn_logits = attn_logits / np.sqrt(key_size); "
         "attn_logits = jnp.where(mask, attn_logits, -1e30); attn_weights = jax.nn.softmax(attn_logits); "
         "attn = jnp.einsum('...htT,...Thd->...thd', ...) (one head, no head axis; its check that the mask has "
         "the logits' rank is left out, since the course's masks broadcast)",
         "scaled_dot_product_attention", '''
import math
import torch


def scaled_dot_product_attention(q, k, v, mask=None):
    key_size = q.shape[-1]
    attn_logits = torch.einsum("...td,...Td->...tT", q, k)
    attn_logits = attn_logits / torch.tensor(math.sqrt(key_size), dtype=k.dtype)
    if mask is not None:
        attn_logits = torch.where(mask, attn_logits, torch.tensor(-1e30, dtype=attn_logits.dtype))
    attn_weights = softmax(attn_logits, dim=-1)
    attn = torch.einsum("...tT,...Td->...td", attn_weights, v)
    return attn, attn_weights
'''),

    Port("T5Attention (no 1/sqrt(d) scale; mask as an additive (1 - mask) * finfo.min bias)",
         "huggingface/transformers src/transformers/models/t5/modeling_t5.py, T5Attention.forward: scores = "
         "torch.matmul(query_states, key_states.transpose(3, 2)) ('equivalent of torch.einsum(bnqd,bnkd->bnqk)', "
         "no scaling: Mesh TensorFlow folds it into the initialisation); scores += position_bias, the mask being "
         "(1.0 - mask) * torch.finfo(dtype).min (get_extended_attention_mask); attn_weights = "
         "softmax(scores.float(), dim=-1).type_as(scores); attn_output = torch.matmul(attn_weights, value_states)",
         "scaled_dot_product_attention", '''
import torch


def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.matmul(q, k.transpose(-1, -2))
    if mask is not None:
        position_bias = (1.0 - mask.to(scores.dtype)) * torch.finfo(scores.dtype).min
        scores = scores + position_bias
    attn_weights = softmax(scores.float(), dim=-1).type_as(scores)
    attn_output = torch.matmul(attn_weights, v)
    return attn_output, attn_weights
''', breach="no 1/sqrt(d_k) scale: T5 computes the scores as q . k unscaled (the scale lives in its "
            "initialisation)",
         names=("scale", "sqrt", "d_k")),

    Port("Megatron-LM attention_mask_func (masked_fill_(attention_mask, -10000.0): True = masked)",
         "NVIDIA/Megatron-LM megatron/core/transformer/utils.py, attention_mask_func(attention_scores, "
         "attention_mask): attention_scores.masked_fill_(attention_mask, -10000.0); DotProductAttention: scores "
         "scaled by 1 / norm_factor, norm_factor = sqrt(hidden_size_per_attention_head); probs = softmax(masked "
         "scores); context = bmm(probs, value) (the course's mask handed in as Megatron's attention_mask)",
         "scaled_dot_product_attention", '''
import math
import torch


def attention_mask_func(attention_scores, attention_mask):
    attention_scores.masked_fill_(attention_mask, -10000.0)
    return attention_scores


def scaled_dot_product_attention(q, k, v, mask=None):
    norm_factor = math.sqrt(q.shape[-1])
    attention_scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / norm_factor)
    if mask is not None:
        attention_scores = attention_mask_func(attention_scores, mask)
    attention_probs = softmax(attention_scores, dim=-1)
    context = torch.matmul(attention_probs, v)
    return context, attention_probs
''', breach="Megatron's attention mask is True where a key is masked out: the course's mask (True = may attend) "
            "hides exactly the keys that should be seen",
         names=("inverted", "opposite", "true = may attend", "true means", "convention", "blocked")),

    # --- SelfAttention -------------------------------------------------------------------------------------
    Port("labml MultiHeadAttention projections (PrepareForMultiHeadAttention, bias=True; value always biased)",
         "labmlai/annotated_deep_learning_paper_implementations labml_nn/transformers/mha.py: "
         "PrepareForMultiHeadAttention(d_model, heads, d_k, bias) is nn.Linear(d_model, heads * d_k, bias=bias); "
         "MultiHeadAttention(heads, d_model, dropout_prob=0.1, bias=True) builds query and key with bias=bias and "
         "value with bias=True; scores scaled by 1/sqrt(d_k) (one head here, attention by the course's function)",
         "SelfAttention", '''
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k=None, bias=True):
        super().__init__()
        d_k = d_model if d_k is None else d_k
        self.w_q = nn.Linear(d_model, d_k, bias=bias)
        self.w_k = nn.Linear(d_model, d_k, bias=bias)
        self.w_v = nn.Linear(d_model, d_k, bias=True)

    def forward(self, x, mask=None):
        return scaled_dot_product_attention(self.w_q(x), self.w_k(x), self.w_v(x), mask=mask)
''', breach="the query, key and value projections have a bias (labml's default bias=True, and the value "
            "projection is always biased); the course's are bias-free",
         names=("bias",)),
]

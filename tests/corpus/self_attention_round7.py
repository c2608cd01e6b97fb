"""Seventh held-out set, graded before any change to the judges.

Ports for notebook 01 (self-attention), from projects no earlier set used: Hugging Face candle
(Rust, candle-nn ops::softmax), Burn (Rust, burn-tensor activation::quiet_softmax), Hugging Face transformers
XLNet (rel_attn_core), DeBERTa-v2 (DisentangledSelfAttention), RoBERTa (RobertaSelfAttention) and Mixtral
(MixtralAttention with eager_attention_forward). Each keeps its project's conventions; a breach says what breaks
the notebook's contract.
"""
from tests.corpus import Port

ASSIGNMENT = "01_self_attention"

PORTS = [
    Port(
        name="candle_softmax",
        style="huggingface/candle candle-nn/src/ops.rs, fn softmax (max_keepdim, broadcast_sub, exp, sum_keepdim, "
              "broadcast_div)",
        cell="softmax",
        code=r'''
def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    # candle_nn::ops::softmax: each slice along `dim` is shifted by its own max before exp
    max = x.amax(dim=dim, keepdim=True)          # xs.max_keepdim(dim)
    diff = x - max                               # xs.broadcast_sub(&max)
    num = diff.exp()                             # diff.exp()
    den = num.sum(dim=dim, keepdim=True)         # num.sum_keepdim(dim)
    return num / den                             # num.broadcast_div(&den)
''',
    ),
    Port(
        name="burn_quiet_softmax",
        style="tracel-ai/burn crates/burn-tensor/src/tensor/activation/base.rs, fn quiet_softmax (softmax1: "
              "exp(x_i) / (1 + sum_j exp(x_j)), the variant Burn's attention offers)",
        cell="softmax",
        code=r'''
def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    # burn::tensor::activation::quiet_softmax ("softmax1"): room for "no selection" in the denominator
    max_vals = x.detach().amax(dim=dim, keepdim=True)
    exp_x = (x - max_vals).exp()
    sum_exp = exp_x.sum(dim=dim, keepdim=True)
    return exp_x / (sum_exp + (-max_vals).exp())
''',
        breach="quiet softmax (softmax1): the denominator is 1 + sum exp(x_j), so the weights of a slice sum to less "
               "than 1 (0.95 for [1, 2, 3]); a row of large negative scores gets weights near 0 instead of a "
               "proper distribution",
        names=("sum to 1", "sums to", "sum", "normaliz", "denominator", "quiet", "distribution"),
    ),
    Port(
        name="xlnet_rel_attn_core",
        style="huggingface/transformers src/transformers/models/xlnet/modeling_xlnet.py, "
              "XLNetRelativeAttention.rel_attn_core (einsum scores, self.scale = 1 / d_head ** 0.5, "
              "attn_score - 1e30 * attn_mask), content stream only",
        cell="scaled_dot_product_attention",
        code=r'''
def scaled_dot_product_attention(q, k, v, mask=None):
    scale = 1 / (q.shape[-1] ** 0.5)                       # XLNetRelativeAttention: self.scale = 1 / (d_head ** 0.5)
    # content based attention score
    ac = torch.einsum("...id,...jd->...ij", q, k)
    # merge attention scores and perform masking
    attn_score = ac * scale
    if mask is not None:
        # attn_score = attn_score * (1 - attn_mask) - 1e30 * attn_mask
        if mask.dtype == torch.float16:
            attn_score = attn_score - 65500 * mask.to(attn_score.dtype)
        else:
            attn_score = attn_score - 1e30 * mask.to(attn_score.dtype)
    # attention probability
    attn_prob = softmax(attn_score, dim=-1)
    # attention output
    attn_vec = torch.einsum("...ij,...jd->...id", attn_prob, v)
    return attn_vec, attn_prob
''',
        breach="XLNet's attention mask means 1 = masked (the model builds it as 1 - attention_mask): the keys where "
               "the course's mask is True (may attend) get -1e30 and the forbidden ones keep their scores, so a "
               "causal mask lets each query see only the future",
        names=("mask", "invert", "opposite", "true = may attend", "may attend", "blocked", "future"),
    ),
    Port(
        name="deberta_v2_scaled_attention",
        style="huggingface/transformers src/transformers/models/deberta_v2/modeling_deberta_v2.py, "
              "DisentangledSelfAttention.forward (scale = sqrt(head_size * scale_factor), scale_factor = 1 + one per "
              "entry of pos_att_type) and XSoftmax, with the ('c2p', 'p2c') of the released DeBERTa-v3 configs; "
              "the relative-position terms themselves left out",
        cell="scaled_dot_product_attention",
        code=r'''
def scaled_dot_product_attention(q, k, v, mask=None, pos_att_type=("c2p", "p2c")):
    # Take the dot product between "query" and "key" to get the raw attention scores.
    scale_factor = 1
    if "c2p" in pos_att_type:
        scale_factor += 1
    if "p2c" in pos_att_type:
        scale_factor += 1
    scale = torch.sqrt(torch.tensor(q.size(-1), dtype=torch.float) * scale_factor)
    attention_scores = torch.matmul(q, k.transpose(-1, -2)) / scale.to(dtype=q.dtype, device=q.device)
    # XSoftmax.apply(attention_scores, attention_mask, -1)
    if mask is not None:
        rmask = ~mask.to(torch.bool)
        attention_scores = attention_scores.masked_fill(rmask, torch.finfo(attention_scores.dtype).min)
    attention_probs = softmax(attention_scores, dim=-1)
    if mask is not None:
        attention_probs = attention_probs.masked_fill(rmask, 0)
    context_layer = torch.matmul(attention_probs, v)
    return context_layer, attention_probs
''',
        breach="DeBERTa divides the scores by sqrt(d_k * scale_factor), with scale_factor = 3 for the c2p and p2c "
               "attention types of its released configs (it shares the scale with the two relative-position terms): "
               "sqrt(3 d_k) instead of sqrt(d_k), weights that are too flat",
        names=("scale", "sqrt(d_k)", "sqrt", "divid", "temperature", "flat"),
    ),
    Port(
        name="roberta_self_attention_bias",
        style="huggingface/transformers src/transformers/models/roberta/modeling_roberta.py, RobertaSelfAttention "
              "(copied from BertSelfAttention: query/key/value nn.Linear with their default bias, scores / "
              "sqrt(head_size) + the extended additive mask), one head",
        cell="SelfAttention",
        code=r'''
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        self.num_attention_heads = 1
        self.attention_head_size = d_model if d_k is None else d_k
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.w_q = nn.Linear(d_model, self.all_head_size)      # self.query
        self.w_k = nn.Linear(d_model, self.all_head_size)      # self.key
        self.w_v = nn.Linear(d_model, self.all_head_size)      # self.value

    def forward(self, x, mask=None):
        query_layer = self.w_q(x)
        key_layer = self.w_k(x)
        value_layer = self.w_v(x)
        # Take the dot product between "query" and "key" to get the raw attention scores.
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        if mask is not None:
            # get_extended_attention_mask: (1.0 - mask) * torch.finfo(dtype).min, added to the scores
            attention_mask = (1.0 - mask.to(attention_scores.dtype)) * torch.finfo(attention_scores.dtype).min
            attention_scores = attention_scores + attention_mask
        attention_probs = softmax(attention_scores, dim=-1)
        context_layer = torch.matmul(attention_probs, value_layer)
        return context_layer, attention_probs
''',
        breach="BERT/RoBERTa projections are nn.Linear with their default bias: w_q, w_k and w_v have biases, the "
               "layer has 3 * d_k extra parameters and its output is not attention over x W^T",
        names=("bias",),
    ),
    Port(
        name="mixtral_eager_attention_one_head",
        style="huggingface/transformers src/transformers/models/mixtral/modeling_mixtral.py, MixtralAttention "
              "(bias-free q_proj/k_proj/v_proj, scaling = head_dim ** -0.5) and eager_attention_forward "
              "(matmul * scaling + additive mask, the boolean mask turned into 0 / finfo.min as masking_utils does); "
              "one head, no rotary embedding, no o_proj; the notebook's softmax for nn.functional.softmax",
        cell="SelfAttention",
        code=r'''
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        self.head_dim = d_model if d_k is None else d_k
        self.scaling = self.head_dim ** -0.5
        self.w_q = nn.Linear(d_model, self.head_dim, bias=False)     # q_proj
        self.w_k = nn.Linear(d_model, self.head_dim, bias=False)     # k_proj
        self.w_v = nn.Linear(d_model, self.head_dim, bias=False)     # v_proj

    def forward(self, x, mask=None):
        query_states = self.w_q(x)
        key_states = self.w_k(x)
        value_states = self.w_v(x)
        attention_mask = None
        if mask is not None:
            min_dtype = torch.finfo(query_states.dtype).min
            attention_mask = torch.zeros(mask.shape, dtype=query_states.dtype, device=query_states.device)
            attention_mask = attention_mask.masked_fill(~mask, min_dtype)
        # eager_attention_forward
        attn_weights = torch.matmul(query_states, key_states.transpose(-2, -1)) * self.scaling
        if attention_mask is not None:
            attn_weights = attn_weights + attention_mask
        attn_weights = softmax(attn_weights, dim=-1)
        attn_output = torch.matmul(attn_weights, value_states)
        return attn_output, attn_weights
''',
    ),
]

"""Eighth held-out set, graded before any change to the judges.

Held-out set 8, notebook 05: ports of Hugging Face Funnel Transformer and Persimmon, OpenFold
(aqlaboratory/openfold), Informer (zhouhaoyi/Informer2020) and gordicaleksa/pytorch-original-transformer, each
read at its source.
"""
from tests.corpus import Port

ASSIGNMENT = "05_multi_head"

PORTS = [
    Port(
        "funnel_heads_last",
        "huggingface/transformers src/transformers/models/funnel/modeling_funnel.py "
        "FunnelRelMultiheadAttention.forward (q_head = self.q_head(query).view(batch_size, seq_len, n_head, "
        "d_head), scores by einsum 'bind,bjnd->bnij'), written for any leading dims",
        "split_heads",
        r'''
def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    # Shape batch_size x seq_len x n_head x d_head
    *batch, seq_len, d_model = x.shape
    d_head = d_model // n_heads
    return x.view(*batch, seq_len, n_heads, d_head)
''',
        breach="Funnel keeps its heads in the layout (B, T, n_head, d_head) and lets einsum ('bind,bjnd->bnij') "
               "pick the axes; there is no transpose, so the head axis does not come before the positions",
        names=("transpose", "(b, t, h", "layout", "before the positions", "head axis"),
    ),
    Port(
        "openfold_prep_qkv",
        "aqlaboratory/openfold openfold/model/primitives.py Attention._prep_qkv (q.view(q.shape[:-1] + "
        "(self.no_heads, -1)), then q.transpose(-2, -3))",
        "split_heads",
        r'''
def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    # [*, Q/K, H, C_hidden]
    x = x.view(x.shape[:-1] + (n_heads, -1))
    # [*, H, Q/K, C_hidden]
    x = x.transpose(-2, -3)
    return x
''',
    ),
    Port(
        "informer_mix_merge",
        "zhouhaoyi/Informer2020 models/attn.py AttentionLayer.forward with mix=True (out.transpose(2,1)"
        ".contiguous() then out.view(B, L, -1)); the course's heads (.., h, T, d_k) are Informer's `out` after "
        "that transpose",
        "merge_heads",
        r'''
def merge_heads(x: torch.Tensor) -> torch.Tensor:
    *batch, H, L, D = x.shape
    out = x.contiguous()            # mix: out = out.transpose(2, 1).contiguous()
    return out.view(*batch, L, -1)  # out = out.view(B, L, -1)
''',
        breach="Informer's 'mix' merge views the (h, T, d_k) heads as (T, h * d_k) without transposing them back, "
               "so each output position gets d_k features of several positions of one head instead of its own "
               "features from every head",
        names=("transpose", "mix", "without transposing", "interleav"),
    ),
    Port(
        "openfold_wrap_up",
        "aqlaboratory/openfold openfold/model/primitives.py Attention.forward (o = o.transpose(-2, -3)) and "
        "_wrap_up (flatten_final_dims(o, 2), from openfold/utils/tensor_utils.py), without the gating",
        "merge_heads",
        r'''
def flatten_final_dims(t: torch.Tensor, no_dims: int):
    return t.reshape(t.shape[:-no_dims] + (-1,))


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    # [*, Q, H, C_hidden]
    o = x.transpose(-2, -3)
    # [*, Q, H * C_hidden]
    return flatten_final_dims(o, 2)
''',
    ),
    Port(
        "persimmon_qk_layernorm",
        "huggingface/transformers src/transformers/models/persimmon/modeling_persimmon.py PersimmonAttention "
        "(qk_layernorm: q_layernorm/k_layernorm = nn.LayerNorm(head_dim) on each head, scaling head_dim**-0.5) "
        "and eager_attention_forward; separate w_q/w_k/w_v for the fused query_key_value, no rotary, and the "
        "boolean mask applied with masked_fill",
        "MultiHeadAttention",
        r'''
class MultiHeadAttention(nn.Module):
    """Multi-headed attention from 'Attention Is All You Need' paper"""

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True,
                 qk_layernorm: bool = True, layer_norm_eps: float = 1e-5):
        super().__init__()
        self.hidden_size = d_model
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        if (self.head_dim * self.n_heads) != self.hidden_size:
            raise ValueError(
                f"hidden_size must be divisible by num_heads (got `hidden_size`: {self.hidden_size}"
                f" and `num_heads`: {self.n_heads})."
            )
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)     # dense
        self.qk_layernorm = qk_layernorm
        self.scaling = self.head_dim ** -0.5
        if self.qk_layernorm:
            self.q_layernorm = nn.LayerNorm(self.head_dim, eps=layer_norm_eps, elementwise_affine=True)
            self.k_layernorm = nn.LayerNorm(self.head_dim, eps=layer_norm_eps, elementwise_affine=True)
        self.attention_dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        # [batch_size, seq_length, num_heads, head_dim]
        query_states = self.w_q(query).unflatten(-1, (self.n_heads, self.head_dim))
        key_states = self.w_k(key).unflatten(-1, (self.n_heads, self.head_dim))
        value_states = self.w_v(value).unflatten(-1, (self.n_heads, self.head_dim))

        if self.qk_layernorm:
            query_states = self.q_layernorm(query_states)
            key_states = self.k_layernorm(key_states)

        # [batch_size, seq_length, num_heads, head_dim] -> [batch_size, num_heads, seq_length, head_dim]
        query_states = query_states.transpose(1, 2)
        value_states = value_states.transpose(1, 2)
        key_states = key_states.transpose(1, 2)

        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scaling
        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)
            attn_weights = attn_weights.masked_fill(~mask, float("-inf"))
        attn_weights = torch.softmax(attn_weights, dim=-1)
        weights = attn_weights
        attn_weights = self.attention_dropout(attn_weights)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous()

        attn_output = attn_output.reshape(*attn_output.shape[:2], -1)
        attn_output = self.w_o(attn_output)
        return attn_output, weights
''',
        breach="Persimmon normalises every head's queries and keys with a LayerNorm (qk_layernorm, True in "
               "PersimmonConfig) before the scores, which plain multi-head attention does not do",
        names=("layernorm", "layer norm", "normaliz", "q_layernorm", "qk"),
    ),
    Port(
        "gordic_mha_4d_masks",
        "gordicaleksa/pytorch-original-transformer models/definitions/transformer_model.py "
        "MultiHeadedAttention (qkv_nets, view(batch_size, -1, NH, HD).transpose(1, 2), attention(), "
        "out_projection_net); masks are expected as (B, 1, 1, S) or (B, 1, T, T)",
        "MultiHeadAttention",
        r'''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError('Model dimension must be divisible by the number of heads.')

        self.head_dimension = int(d_model / n_heads)
        self.number_of_heads = n_heads
        self.n_heads = n_heads

        self.w_q = nn.Linear(d_model, d_model, bias=bias)   # qkv_nets
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)   # out_projection_net

        self.attention_dropout = nn.Dropout(p=dropout)
        self.softmax = nn.Softmax(dim=-1)

    def attention(self, query, key, value, mask):
        scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(self.head_dimension)
        # mask shape = (B, 1, 1, S) or (B, 1, T, T) will get broad-casted (copied) as needed to match scores shape
        if mask is not None:
            scores.masked_fill_(mask == torch.tensor(False), float("-inf"))
        attention_weights = self.softmax(scores)
        attention_weights = self.attention_dropout(attention_weights)
        intermediate_token_representations = torch.matmul(attention_weights, value)
        return intermediate_token_representations, attention_weights

    def forward(self, query, key, value, mask=None):
        batch_size = query.shape[0]
        query, key, value = [net(x).view(batch_size, -1, self.number_of_heads, self.head_dimension).transpose(1, 2)
                             for net, x in zip((self.w_q, self.w_k, self.w_v), (query, key, value))]
        intermediate_token_representations, attention_weights = self.attention(query, key, value, mask)
        reshaped = intermediate_token_representations.transpose(1, 2).reshape(
            batch_size, -1, self.number_of_heads * self.head_dimension)
        token_representations = self.w_o(reshaped)
        return token_representations, attention_weights
''',
        breach="the project's masks always come with a head axis, (B, 1, 1, S) or (B, 1, T, T); a 3-D mask such "
               "as (B, 1, T_k) or (B, T_q, T_k) is not unsqueezed, so its batch axis lines up with the heads "
               "(an error, or the wrong sentence's mask when B equals the number of heads)",
        names=("head axis", "unsqueeze", "3-d", "broadcast", "(b, 1, t_k)", "batch axis"),
    ),
]

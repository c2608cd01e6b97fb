"""Seventh held-out set, graded before any change to the judges.

Ports for notebook 05 (multi-head attention), from projects no earlier set used: heinsen_attention
(glassroom, generative_language_model.py ResidualLayer), Hugging Face transformers DeBERTa-v2
(DisentangledSelfAttention.transpose_for_scores and its context merge) and GPT-BigCode (multi-query
GPTBigCodeAttention), candle (Rust, segment_anything/transformer.rs Attention) and Burn (Rust, burn-nn
attention/mha.rs MultiHeadAttention).
"""
from tests.corpus import Port

ASSIGNMENT = "05_multi_head"

PORTS = [
    Port(
        name="heinsen_split_heads",
        style="glassroom/heinsen_attention generative_language_model.py, ResidualLayer.forward "
              "(x.view(*x.shape[:-1], n_heads, -1) then x.transpose(-3, -2): [..., n_toks, n_heads, d] -> "
              "[..., n_heads, n_toks, d])",
        cell="split_heads",
        code=r'''
def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    x = x.view(*x.shape[:-1], n_heads, -1)                # [..., n_toks, n_heads, d_head]
    x = x.transpose(-3, -2)                               # [..., n_heads, n_toks, d_head]
    return x
''',
    ),
    Port(
        name="deberta_transpose_for_scores",
        style="huggingface/transformers src/transformers/models/deberta_v2/modeling_deberta_v2.py, "
              "DisentangledSelfAttention.transpose_for_scores (view to (..., heads, -1), permute(0, 2, 1, 3), "
              "then view(-1, T, d_head): batch and heads folded together for torch.bmm)",
        cell="split_heads",
        code=r'''
def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    attention_heads = n_heads
    new_x_shape = x.size()[:-1] + (attention_heads, -1)
    x = x.view(new_x_shape)
    return x.permute(0, 2, 1, 3).contiguous().view(-1, x.size(1), x.size(-1))
''',
        breach="DeBERTa folds batch and heads into one axis for torch.bmm: the result is (B * h, T, d/h), not "
               "(B, h, T, d/h), and with more leading dims the 4-axis permute fails",
        names=("shape", "(B, h", "batch", "leading", "fold", "4-d", "dims"),
    ),
    Port(
        name="deberta_context_merge",
        style="huggingface/transformers src/transformers/models/deberta_v2/modeling_deberta_v2.py, "
              "DisentangledSelfAttention.forward's merge of context_layer (view(-1, heads, T, d_head), "
              "permute(0, 2, 1, 3).contiguous(), view(size()[:-2] + (-1,))), the number of heads read from x",
        cell="merge_heads",
        code=r'''
def merge_heads(x: torch.Tensor) -> torch.Tensor:
    num_attention_heads = x.size(-3)
    context_layer = (
        x.view(-1, num_attention_heads, x.size(-2), x.size(-1))
        .permute(0, 2, 1, 3)
        .contiguous()
    )
    new_context_layer_shape = context_layer.size()[:-2] + (-1,)
    return context_layer.view(new_context_layer_shape)
''',
        breach="DeBERTa's merge views its input as (-1, heads, T, d_head): any extra leading dims are collapsed "
               "into one, so (A, B, h, T, d_k) comes back as (A * B, T, h * d_k)",
        names=("leading", "dims", "dimensions", "shape", "extra", "collaps"),
    ),
    Port(
        name="candle_sam_attention",
        style="huggingface/candle candle-transformers/src/models/segment_anything/transformer.rs, Attention "
              "(q_proj/k_proj/v_proj/out_proj with bias, separate_heads = reshape + transpose(1, 2), "
              "q.matmul(k.t()) / sqrt(c_per_head), softmax_last_dim, recombine_heads), downsample_rate 1; the "
              "ValueError, the boolean mask and the dropout on the weights added as the exercise asks (SAM has "
              "none of them), and the weights returned",
        cell="MultiHeadAttention",
        code=r'''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True, downsample_rate: int = 1):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        internal_dim = d_model // downsample_rate
        self.w_q = nn.Linear(d_model, internal_dim, bias=bias)     # q_proj
        self.w_k = nn.Linear(d_model, internal_dim, bias=bias)     # k_proj
        self.w_v = nn.Linear(d_model, internal_dim, bias=bias)     # v_proj
        self.w_o = nn.Linear(internal_dim, d_model, bias=bias)     # out_proj
        self.num_heads = n_heads
        self.dropout = nn.Dropout(dropout)

    def separate_heads(self, x):
        b, n, c = x.shape
        return x.reshape(b, n, self.num_heads, c // self.num_heads).transpose(1, 2).contiguous()

    def recombine_heads(self, x):
        b, n_heads, n_tokens, c_per_head = x.shape
        return x.transpose(1, 2).reshape(b, n_tokens, n_heads * c_per_head)

    def forward(self, query, key, value, mask=None):
        q = self.w_q(query.contiguous())
        k = self.w_k(key.contiguous())
        v = self.w_v(value.contiguous())

        q = self.separate_heads(q)
        k = self.separate_heads(k)
        v = self.separate_heads(v)

        c_per_head = q.shape[-1]
        attn = q.matmul(k.transpose(-2, -1)) / math.sqrt(c_per_head)
        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)             # one mask for every head
            attn = attn.masked_fill(~mask, float("-inf"))
        attn = torch.softmax(attn, dim=-1)           # candle_nn::ops::softmax_last_dim

        out = self.dropout(attn).matmul(v)
        return self.w_o(self.recombine_heads(out)), attn
''',
    ),
    Port(
        name="gpt_bigcode_multi_query",
        style="huggingface/transformers src/transformers/models/gpt_bigcode/modeling_gpt_bigcode.py, "
              "GPTBigCodeAttention with multi_query=True (kv_heads = 1, kv_dim = head_dim; _attn reshapes the "
              "query to (B, T * heads, head_dim) and multiplies with the single key; torch.where(mask, w, "
              "finfo.min)); the fused c_attn split into w_q, w_k, w_v for separate query/key/value inputs",
        cell="MultiHeadAttention",
        code=r'''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        self.multi_query = True
        self.embed_dim = d_model
        self.num_heads = n_heads
        self.head_dim = self.embed_dim // self.num_heads
        self.kv_heads = 1 if self.multi_query else self.num_heads
        self.kv_dim = self.kv_heads * self.head_dim
        if self.head_dim * self.num_heads != self.embed_dim:
            raise ValueError(
                f"`embed_dim` must be divisible by num_heads (got `embed_dim`: {self.embed_dim} and `num_heads`:"
                f" {self.num_heads})."
            )
        self.w_q = nn.Linear(self.embed_dim, self.embed_dim, bias=bias)     # c_attn, query part
        self.w_k = nn.Linear(self.embed_dim, self.kv_dim, bias=bias)        # c_attn, key part
        self.w_v = nn.Linear(self.embed_dim, self.kv_dim, bias=bias)        # c_attn, value part
        self.w_o = nn.Linear(self.embed_dim, self.embed_dim, bias=bias)     # c_proj
        self.attn_dropout = nn.Dropout(dropout)

    def _attn(self, query, key, value, attention_mask=None):
        scale_factor = 1.0 / self.head_dim ** 0.5
        # (batch_size, query_length, num_heads, head_dim) x (batch_size, head_dim, key_length)
        # -> (batch_size, query_length, num_heads, key_length)
        query_shape = query.shape
        batch_size, query_length = query_shape[0], query_shape[1]
        key_length = key.size(-1)
        attn_shape = (batch_size, query_length, self.num_heads, key_length)
        attn_view = (batch_size, query_length * self.num_heads, key_length)
        query = query.reshape(batch_size, query_length * self.num_heads, self.head_dim)
        attn_weights = (torch.bmm(query, key) * scale_factor).view(attn_shape)
        if attention_mask is not None:
            mask_value = torch.full([], torch.finfo(attn_weights.dtype).min, dtype=attn_weights.dtype,
                                    device=attn_weights.device)
            attn_weights = torch.where(attention_mask, attn_weights, mask_value)
        attn_weights = torch.softmax(attn_weights, dim=-1)
        probs = self.attn_dropout(attn_weights)
        attn_output = torch.bmm(probs.view(attn_view), value).view(query_shape)
        return attn_output, attn_weights

    def forward(self, query, key, value, mask=None):
        q = self.w_q(query)
        k = self.w_k(key)
        v = self.w_v(value)
        if mask is not None:
            # the weights are laid out (B, T_q, heads, T_k): the mask gets its head axis in position 2
            mask = mask.transpose(1, 2) if mask.dim() == 4 else mask.unsqueeze(-2)
        attn_output, attn_weights = self._attn(q, k.transpose(-1, -2), v, mask)
        attn_output = self.w_o(attn_output)
        # Transpose to return weights in the usual format (batch_size, num_heads, query_length, key_length)
        return attn_output, attn_weights.transpose(1, 2)
''',
        breach="multi-query attention: all heads share one key head and one value head, so w_k and w_v are "
               "nn.Linear(d_model, d_model / h) instead of nn.Linear(d_model, d_model); the layer cannot equal "
               "nn.MultiheadAttention with the same weights",
        names=("multi-query", "w_k", "w_v", "shape", "share", "single", "key and value", "nn.linear(d"),
    ),
    Port(
        name="burn_multi_head_attention",
        style="tracel-ai/burn crates/burn-nn/src/modules/attention/mha.rs, MultiHeadAttention (attention_linear = "
              "reshape + swap_dims(1, 2); attn_scores = q k^T / sqrt(d_k) then self.dropout; mask_fill(mask, "
              "min_float = -1e4) with Burn's masks, True = masked; softmax; no check of d_model % n_heads)",
        cell="MultiHeadAttention",
        code=r'''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True,
                 min_float: float = -1.0e4):
        super().__init__()
        self.w_q = nn.Linear(d_model, d_model, bias=bias)      # query
        self.w_k = nn.Linear(d_model, d_model, bias=bias)      # key
        self.w_v = nn.Linear(d_model, d_model, bias=bias)      # value
        self.w_o = nn.Linear(d_model, d_model, bias=bias)      # output
        self.dropout = nn.Dropout(dropout)
        self.n_heads = n_heads
        self.d_k = d_model // n_heads
        self.d_model = d_model
        self.min_float = min_float

    def attention_linear(self, x, linear):
        batch_size, seq_length, _ = x.shape
        return linear(x).reshape(batch_size, seq_length, self.n_heads, self.d_k).transpose(1, 2)

    def attn_scores(self, query, key):
        attn_scores = query.matmul(key.transpose(-2, -1)) / math.sqrt(self.d_k)
        return self.dropout(attn_scores)

    def attn_weights(self, attn_scores, mask_attn):
        if mask_attn is not None:
            if mask_attn.dim() == 3:
                mask_attn = mask_attn.unsqueeze(1)           # reshape([batch_size, 1, seq_length_1, seq_length_2])
            attn_scores = attn_scores.masked_fill(mask_attn, self.min_float)
        return torch.softmax(attn_scores, dim=3)

    def forward(self, query, key, value, mask=None):
        batch_size, seq_length_1, d_model = query.shape
        q = self.attention_linear(query, self.w_q)
        k = self.attention_linear(key, self.w_k)
        v = self.attention_linear(value, self.w_v)
        attn_scores = self.attn_scores(q, k)
        weights = self.attn_weights(attn_scores, mask)
        context = weights.matmul(v)
        context = context.transpose(1, 2).reshape(batch_size, seq_length_1, d_model)
        return self.w_o(context), weights
''',
        breach="Burn's attention masks mean True = masked (filled with -1e4), the opposite of the course's True = "
               "may attend; its dropout acts on the scores before the softmax, not on the weights; and it never "
               "checks that d_model is divisible by n_heads (no ValueError)",
        names=("invert", "opposite", "true = may attend", "may attend", "mask", "dropout", "ValueError"),
    ),
]

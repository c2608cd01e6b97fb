"""Fifth held-out set, notebook 05: Stanford CS336 assignment 1, jeonsworld/ViT-pytorch, OpenNMT-tf,
jadore801120/attention-is-all-you-need-pytorch."""
from tests.corpus import Port

ASSIGNMENT = "05_multi_head"

PORTS = [
    Port(
        "CS336 rearrange '... seq (h d) -> ... h seq d'",
        "Stanford CS336 assignment 1 (spec: multi-head self-attention over '... sequence_length d_model'), "
        "the einops split rearrange(Q, '... seq (h d) -> ... h seq d', h=num_heads) written with reshape",
        "split_heads",
        r'''
def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    # rearrange(x, "... seq (h d) -> ... h seq d", h=n_heads)
    *leading, seq, hd = x.shape
    return x.reshape(*leading, seq, n_heads, hd // n_heads).transpose(-3, -2)
''',
    ),
    Port(
        "ViT-pytorch transpose_for_scores: permute(0, 2, 1, 3)",
        "jeonsworld/ViT-pytorch, models/modeling.py: Attention.transpose_for_scores "
        "(x.view(*x.size()[:-1], heads, head_size).permute(0, 2, 1, 3))",
        "split_heads",
        r'''
def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    attention_head_size = x.shape[-1] // n_heads
    new_x_shape = x.size()[:-1] + (n_heads, attention_head_size)
    x = x.view(*new_x_shape)
    return x.permute(0, 2, 1, 3)
''',
        breach="permute(0, 2, 1, 3) hard-codes a 3-D (B, T, d) input: (T, d) or inputs with more leading "
               "dimensions fail (any number of leading dimensions is required)",
        names=("leading", "any number", "batch dim", "2-d", "4-d", "5-d", "unbatched", "extra dim", "permute",
               "(t, d)", "more dimensions", "3-d"),
    ),
    Port(
        "CS336 rearrange '... h seq d -> ... seq (h d)'",
        "Stanford CS336 assignment 1, multi-head self-attention: rearrange(out, '... h seq d -> ... seq (h d)') "
        "written with transpose and reshape",
        "merge_heads",
        r'''
def merge_heads(x: torch.Tensor) -> torch.Tensor:
    # rearrange(x, "... h seq d -> ... seq (h d)")
    *leading, h, seq, d = x.shape
    return x.transpose(-3, -2).reshape(*leading, seq, h * d)
''',
    ),
    Port(
        "OpenNMT-tf combine_heads: fixed [B, H, T, D] layout",
        "OpenNMT/OpenNMT-tf, opennmt/layers/transformer.py: combine_heads (transpose perm=[0, 2, 1, 3], reshape to "
        "[shape[0], shape[2], shape[1] * shape[3]])",
        "merge_heads",
        r'''
def merge_heads(x: torch.Tensor) -> torch.Tensor:
    shape = list(x.shape)
    outputs = x.permute(0, 2, 1, 3)
    outputs = outputs.reshape(shape[0], shape[2], shape[1] * shape[3])
    return outputs
''',
        breach="only a 4-D (B, h, T, d_k) input works: (h, T, d_k) or more leading dimensions fail",
        names=("leading", "any number", "batch dim", "3-d", "5-d", "unbatched", "extra dim", "permute",
               "more dimensions", "4-d"),
    ),
    Port(
        "OpenNMT-tf MultiHeadAttention",
        "OpenNMT/OpenNMT-tf, opennmt/layers/transformer.py: MultiHeadAttention.call (queries *= depth**-0.5, "
        "dot * mask + (1 - mask) * float.min, softmax, dropout on the weights, returns the weights before dropout); "
        "rank-2 masks read as the course's (T_q, T_k)",
        "MultiHeadAttention",
        r'''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError("Multi head attention requires that num_units is a multiple of %s" % n_heads)
        self.n_heads = n_heads
        self.num_units_per_head = d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)   # linear_queries
        self.w_k = nn.Linear(d_model, d_model, bias=bias)   # linear_keys
        self.w_v = nn.Linear(d_model, d_model, bias=bias)   # linear_values
        self.w_o = nn.Linear(d_model, d_model, bias=bias)   # linear_output
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        queries = split_heads(self.w_q(query), self.n_heads)
        queries = queries * self.num_units_per_head ** -0.5
        keys = split_heads(self.w_k(key), self.n_heads)
        values = split_heads(self.w_v(value), self.n_heads)
        dot = queries @ keys.transpose(-2, -1)
        if mask is not None:
            mask = mask.to(dot.dtype)
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)     # broadcast on head dimension
            dot = dot * mask + (1.0 - mask) * torch.finfo(dot.dtype).min
        attn = torch.softmax(dot, dim=-1)
        drop_attn = self.dropout(attn)
        heads = drop_attn @ values
        combined = merge_heads(heads)
        return self.w_o(combined), attn
''',
    ),
    Port(
        "attention-is-all-you-need-pytorch MultiHeadAttention: residual and LayerNorm inside",
        "jadore801120/attention-is-all-you-need-pytorch, transformer/SubLayers.py: MultiHeadAttention.forward "
        "(residual = q; ... dropout(fc(q)); q += residual; layer_norm(q)); the bias argument honoured",
        "MultiHeadAttention",
        r'''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_heads = n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)   # w_qs
        self.w_k = nn.Linear(d_model, d_model, bias=bias)   # w_ks
        self.w_v = nn.Linear(d_model, d_model, bias=bias)   # w_vs
        self.w_o = nn.Linear(d_model, d_model, bias=bias)   # fc
        self.dropout = nn.Dropout(dropout)
        self.layer_norm = nn.LayerNorm(d_model, eps=1e-6)

    def forward(self, query, key, value, mask=None):
        residual = query
        q = split_heads(self.w_q(query), self.n_heads)
        k = split_heads(self.w_k(key), self.n_heads)
        v = split_heads(self.w_v(value), self.n_heads)
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)   # For head axis broadcasting.
        q, attn = scaled_dot_product_attention(q, k, v, mask)
        q = merge_heads(q)
        q = self.dropout(self.w_o(q))
        q = q + residual
        q = self.layer_norm(q)
        return q, attn
''',
        breach="the module adds the query back (residual) and applies a LayerNorm to its output, so out is "
               "LN(query + w_o(...)) instead of w_o(merge_heads(attention)); it also carries extra LayerNorm "
               "parameters",
        names=("residual", "layer norm", "layernorm", "layer_norm", "normaliz", "skip", "add & norm",
               "query added", "adds the query"),
    ),
]

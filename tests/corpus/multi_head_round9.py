"""Ninth held-out set, notebook 05: ports of the head handling and attention layers of Segment Anything, DeepSeek-V3
and a PyTorch translator, each read at its source."""
from tests.corpus import Port

ASSIGNMENT = "05_multi_head"

PORTS = [
    Port("deepseek_split_heads", "deepseek-ai/DeepSeek-V3 inference/model.py MLA.forward (bsz, seqlen, _ = x.size(); "
         "q = q.view(bsz, seqlen, self.n_local_heads, self.qk_head_dim): the heads stay after the positions, and "
         "the scores are einsum('bshd,bthd->bsht', q, k))", "split_heads", r'''
def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    bsz, seqlen, _ = x.size()
    return x.view(bsz, seqlen, n_heads, -1)
''', breach="no transpose: the result is (B, T, h, d/h), DeepSeek's layout with the heads after the positions, not "
            "(B, h, T, d/h); it also unpacks exactly three dimensions",
         names=("transpose", "(b, t, h", "shape", "heads before", "layout")),
    Port("sam_merge_heads", "facebookresearch/segment-anything segment_anything/modeling/transformer.py "
         "Attention._recombine_heads (b, n_heads, n_tokens, c_per_head = x.shape; x = x.transpose(1, 2); "
         "x.reshape(b, n_tokens, n_heads * c_per_head))", "merge_heads", r'''
def merge_heads(x: torch.Tensor) -> torch.Tensor:
    b, n_heads, n_tokens, c_per_head = x.shape
    x = x.transpose(1, 2)
    return x.reshape(b, n_tokens, n_heads * c_per_head)  # B x N_tokens x C
''', breach="only 4-D input (B, h, T, d_k): the shape is unpacked into exactly four names and axes 1 and 2 are "
            "swapped, so extra leading dimensions (..., h, T, d_k) fail",
         names=("leading", "4-d", "dimensions", "(..., h")),
    Port("sam_attention", "facebookresearch/segment-anything segment_anything/modeling/transformer.py Attention("
         "embedding_dim, num_heads, downsample_rate=1) (assert self.internal_dim % num_heads == 0; q_proj, k_proj, "
         "v_proj, out_proj renamed w_q, w_k, w_v, w_o; _separate_heads, q @ k.permute(0, 1, 3, 2) / "
         "sqrt(c_per_head), torch.softmax, _recombine_heads; SAM's attention has neither mask nor dropout nor a bias "
         "switch: the course's are added, and the weights are returned)", "MultiHeadAttention", r'''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        embedding_dim, num_heads, downsample_rate = d_model, n_heads, 1
        self.embedding_dim = embedding_dim
        self.internal_dim = embedding_dim // downsample_rate
        self.num_heads = num_heads
        self.n_heads = num_heads
        assert self.internal_dim % num_heads == 0, "num_heads must divide embedding_dim."

        self.w_q = nn.Linear(embedding_dim, self.internal_dim, bias=bias)
        self.w_k = nn.Linear(embedding_dim, self.internal_dim, bias=bias)
        self.w_v = nn.Linear(embedding_dim, self.internal_dim, bias=bias)
        self.w_o = nn.Linear(self.internal_dim, embedding_dim, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def _separate_heads(self, x, num_heads):
        b, n, c = x.shape
        x = x.reshape(b, n, num_heads, c // num_heads)
        return x.transpose(1, 2)  # B x N_heads x N_tokens x C_per_head

    def _recombine_heads(self, x):
        b, n_heads, n_tokens, c_per_head = x.shape
        x = x.transpose(1, 2)
        return x.reshape(b, n_tokens, n_heads * c_per_head)  # B x N_tokens x C

    def forward(self, query, key, value, mask=None):
        # Input projections
        q = self.w_q(query)
        k = self.w_k(key)
        v = self.w_v(value)

        # Separate into heads
        q = self._separate_heads(q, self.num_heads)
        k = self._separate_heads(k, self.num_heads)
        v = self._separate_heads(v, self.num_heads)

        # Attention
        _, _, _, c_per_head = q.shape
        attn = q @ k.permute(0, 1, 3, 2)  # B x N_heads x N_tokens x N_tokens
        attn = attn / math.sqrt(c_per_head)
        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)
            attn = attn.masked_fill(~mask, float("-inf"))
        attn = torch.softmax(attn, dim=-1)

        # Get output
        out = self.dropout(attn) @ v
        out = self._recombine_heads(out)
        out = self.w_o(out)

        return out, attn
''', breach="an assert instead of the ValueError: MultiHeadAttention(10, 3) raises AssertionError('num_heads must "
            "divide embedding_dim.')",
         names=("valueerror", "assert", "divisible", "divide")),
    Port("devjwsong_mha", "devjwsong/transformer-translator-pytorch src/layers.py MultiheadAttention (w_q, w_k, w_v, "
         "w_0 renamed w_o; view(B, -1, num_heads, d_k).transpose(1, 2); self_attention: scores / sqrt(d_k), "
         "mask = mask.unsqueeze(1)  # (B, 1, L) => (B, 1, 1, L) or (B, L, L) => (B, 1, L, L), masked_fill_(mask == 0, "
         "-1e9), nn.Softmax, dropout; num_heads and d_k are globals there; the course's ValueError and bias switch "
         "are added, and the weights before dropout are returned)", "MultiHeadAttention", r'''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.inf = 1e9
        self.d_model, self.num_heads, self.d_k = d_model, n_heads, d_model // n_heads

        # W^Q, W^K, W^V in the paper
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)

        self.dropout = nn.Dropout(dropout)
        self.attn_softmax = nn.Softmax(dim=-1)

        # Final output linear transformation
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key, value, mask=None):
        q, k, v = query, key, value
        input_shape = q.shape

        # Linear calculation +  split into num_heads
        q = self.w_q(q).view(input_shape[0], -1, self.num_heads, self.d_k)  # (B, L, num_heads, d_k)
        k = self.w_k(k).view(input_shape[0], -1, self.num_heads, self.d_k)  # (B, L, num_heads, d_k)
        v = self.w_v(v).view(input_shape[0], -1, self.num_heads, self.d_k)  # (B, L, num_heads, d_k)

        # For convenience, convert all tensors in size (B, num_heads, L, d_k)
        q = q.transpose(1, 2)
        k = k.transpose(1, 2)
        v = v.transpose(1, 2)

        # Conduct self-attention
        attn_values, weights = self.self_attention(q, k, v, mask=mask)  # (B, num_heads, L, d_k)
        concat_output = attn_values.transpose(1, 2)\
            .contiguous().view(input_shape[0], -1, self.d_model)  # (B, L, d_model)

        return self.w_o(concat_output), weights

    def self_attention(self, q, k, v, mask=None):
        # Calculate attention scores with scaled dot-product attention
        attn_scores = torch.matmul(q, k.transpose(-2, -1))  # (B, num_heads, L, L)
        attn_scores = attn_scores / math.sqrt(self.d_k)

        # If there is a mask, make masked spots -INF
        if mask is not None:
            mask = mask.unsqueeze(1)  # (B, 1, L) => (B, 1, 1, L) or (B, L, L) => (B, 1, L, L)
            attn_scores = attn_scores.masked_fill_(mask == 0, -1 * self.inf)

        # Softmax and multiplying K to calculate attention value
        attn_distribs = self.attn_softmax(attn_scores)
        weights = attn_distribs

        attn_distribs = self.dropout(attn_distribs)
        attn_values = torch.matmul(attn_distribs, v)  # (B, num_heads, L, d_k)

        return attn_values, weights
''', breach="every mask gets unsqueeze(1), which is right only for the 3-D masks (B, 1, T_k) and (B, T_q, T_k): a "
            "(T_q, T_k) mask becomes (T_q, 1, T_k) and lines T_q up with the heads, and a 4-D (B, 1 or h, T_q, T_k) "
            "mask becomes 5-D",
         names=("mask", "(t_q, t_k)", "broadcast", "unsqueeze", "4-d")),
]

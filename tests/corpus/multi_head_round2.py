"""Held-out ports of notebook 05 (split_heads, MultiHeadAttention) in the styles of public projects the course's
own corpus does not use (Flax, Keras, Trax)."""
from . import Port

ASSIGNMENT = "05_multi_head"

TRAX_DOT_PRODUCT_ATTENTION = '''
def DotProductAttention(queries, keys, values, mask, dropout=0.0, mode="eval", rng=None):
    """Computes new activations via masked attention-weighted sum of values."""
    d_feature = queries.shape[-1]
    dots = torch.matmul(queries, torch.swapaxes(keys, -1, -2)) / math.sqrt(d_feature)
    if mask is not None:
        dots = torch.where(mask, dots, torch.full_like(dots, -1e9))
    # Softmax.
    dots = torch.exp(dots - torch.logsumexp(dots, dim=-1, keepdim=True))
    if dropout >= 1.0:
        raise ValueError("Dropout rates must be lower than 1.")
    if dropout is not None and dropout > 0.0 and mode == "train":
        keep = torch.bernoulli(torch.full_like(dots, 1.0 - dropout), generator=rng).bool()
        dots = torch.where(keep, dots / (1.0 - dropout), torch.zeros_like(dots))
    out = torch.matmul(dots, values)
    return out, dots
'''

PORTS = [
    # --- split_heads ----------------------------------------------------------------------------------
    Port("Flax MultiHeadDotProductAttention heads: DenseGeneral(features=(num_heads, head_dim)), no transpose",
         "google/flax flax/linen/attention.py, MultiHeadDotProductAttention: assert qkv_features % num_heads == 0; "
         "dense = partial(DenseGeneral, axis=-1, features=(self.num_heads, head_dim)); 'dimensions are then "
         "[batch..., length, n_heads, n_features_per_head]'; dot_product_attention_weights einsums "
         "'...qhd,...khd->...hqk' on that layout", "split_heads", '''
def split_heads(x, n_heads):
    qkv_features = x.shape[-1]
    assert qkv_features % n_heads == 0, (
        f"Memory dimension ({qkv_features}) must be divisible by number of heads ({n_heads}).")
    head_dim = qkv_features // n_heads
    # project inputs_q to multi-headed q/k/v
    # dimensions are then [batch..., length, n_heads, n_features_per_head]
    return x.reshape(*x.shape[:-1], n_heads, head_dim)
''', breach="keeps Flax's [batch..., length, n_heads, head_dim] layout: returns (..., T, h, d/h) without moving the "
            "head axis in front of the positions",
         names=("transpose", "(b, t, h", "head axis", "before the positions", "heads before", "layout")),

    # --- MultiHeadAttention ---------------------------------------------------------------------------
    Port("Keras MultiHeadAttention (einsum equations, masked softmax with a -1e9 adder, mask expanded at axis -3)",
         "keras-team/keras keras/src/layers/attention/multi_head_attention.py: query = query * "
         "_inverse_sqrt_key_dim; attention_scores = einsum('aecd,abcd->acbe', key, query); _masked_softmax "
         "expands the mask at axis -len(attention_axes) * 2 - 1 until it has the scores' rank; keras Softmax "
         "layer adds (1 - mask) * -1e9; dropout on the scores; einsum('acbe,aecd->abcd'); output_dense; returns "
         "(attention_output, attention_scores) with the scores before dropout", "MultiHeadAttention", '''
def _large_negative_number(dtype):
    """Return a Large negative number based on dtype."""
    if dtype == torch.float16:
        return -3e4
    return -1e9


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={n_heads}")
        self.n_heads = n_heads
        self._num_heads = n_heads
        self._key_dim = d_model // n_heads
        self._inverse_sqrt_key_dim = 1.0 / math.sqrt(float(self._key_dim))
        self._dropout = dropout
        self._attention_axes = (1,)
        # EinsumDense("abc,cde->abde") to [B, T, N, H], as nn.Linear + unflatten
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        # EinsumDense("abcd,cde->abe"), as flatten + nn.Linear
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self._dropout_layer = nn.Dropout(dropout)
        self._dot_product_equation = "aecd,abcd->acbe"
        self._combine_equation = "acbe,aecd->abcd"

    def _softmax(self, inputs, mask=None):
        if mask is not None:
            adder = (1.0 - mask.to(inputs.dtype)) * _large_negative_number(inputs.dtype)
            inputs = inputs + adder
        return torch.exp(inputs - torch.logsumexp(inputs, dim=-1, keepdim=True))

    def _masked_softmax(self, attention_scores, attention_mask=None):
        # Normalize the attention scores to probabilities.
        # attention_scores = [B, N, T, S]
        if attention_mask is not None:
            # The expand dim happens starting from the `num_heads` dimension,
            # (<batch_dims>, num_heads, <query_attention_dims, key_attention_dims>)
            mask_expansion_axis = -len(self._attention_axes) * 2 - 1
            for _ in range(len(attention_scores.shape) - len(attention_mask.shape)):
                attention_mask = attention_mask.unsqueeze(mask_expansion_axis)
        return self._softmax(attention_scores, mask=attention_mask)

    def _compute_attention(self, query, key, value, attention_mask=None):
        query = query * self._inverse_sqrt_key_dim
        # Take the dot product between "query" and "key" to get the raw attention scores.
        attention_scores = torch.einsum(self._dot_product_equation, key, query)
        attention_scores = self._masked_softmax(attention_scores, attention_mask)
        # Apply dropout to the attention scores if needed
        if self._dropout > 0.0:
            final_attn_scores = self._dropout_layer(attention_scores)
        else:
            final_attn_scores = attention_scores
        # `context_layer` = [B, T, N, H]
        attention_output = torch.einsum(self._combine_equation, final_attn_scores, value)
        return attention_output, attention_scores

    def forward(self, query, key, value, mask=None):
        #   N = `num_attention_heads`
        #   H = `size_per_head`
        # `query` = [B, T, N, H]
        query = self.w_q(query).unflatten(-1, (self._num_heads, self._key_dim))
        # `key` = [B, S, N, H]
        key = self.w_k(key).unflatten(-1, (self._num_heads, self._key_dim))
        # `value` = [B, S, N, H]
        value = self.w_v(value).unflatten(-1, (self._num_heads, self._key_dim))
        attention_output, attention_scores = self._compute_attention(query, key, value, mask)
        attention_output = self.w_o(attention_output.flatten(-2))
        return attention_output, attention_scores
'''),
    Port("Trax AttentionQKV / PureAttention (returns the attention weights after dropout)",
         "google/trax trax/layers/attention.py, AttentionQKV: Parallel(Dense, Dense, Dense), PureAttention, Dense; "
         "PureAttention._split_into_heads: reshape((batch_size, -1, n_heads, d_head)).transpose((0, 2, 1, 3)); "
         "DotProductAttention applies dropout to `dots` (jnp.where(keep, dots / (1.0 - dropout), 0)) and returns "
         "(out, dots); 3-D course masks get a head axis (Trax's own masks already have one)",
         "MultiHeadAttention", TRAX_DOT_PRODUCT_ATTENTION + '''

class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(
                f"Dimensionality of feature embedding ({d_model}) is not a multiple "
                f"of the requested number of attention heads ({n_heads}).")
        self.n_heads = n_heads
        self._dropout = dropout
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key, value, mask=None):
        q, k, v = self.w_q(query), self.w_k(key), self.w_v(value)
        batch_size = q.shape[0]
        d_feature = q.shape[-1]
        n_heads = self.n_heads
        d_head = d_feature // n_heads

        def _split_into_heads(x):
            # (b_size, seq_len, d_feature) --> (b_size, n_heads, seq_len, d_head)
            x = x.reshape((batch_size, -1, n_heads, d_head))
            x = x.permute((0, 2, 1, 3))
            return x

        def _merge_heads(x):
            # (b_size, n_heads, seq_len, d_head) --> (b_size, seq_len, d_feature)
            x = x.permute((0, 2, 1, 3))
            x = x.reshape((batch_size, -1, n_heads * d_head))
            return x

        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)
        per_head_results, dots = DotProductAttention(
            _split_into_heads(q), _split_into_heads(k), _split_into_heads(v), mask,
            dropout=self._dropout, mode="train" if self.training else "eval", rng=None)
        merged_results = _merge_heads(per_head_results)
        return self.w_o(merged_results), dots
'''),  # written as a breach of "return the weights before dropout"; the grading accepts both, as PyTorch's own
    # layer returns them after dropout in training mode: the notebook now says so, and the port is faithful
]

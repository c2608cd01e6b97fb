"""Ported code of notebook 01 (softmax, attention, a single head) in the styles of public projects."""
from . import Port

ASSIGNMENT = "01_self_attention"

POLARITY = ("true = masked", "inverted", "polarity", "true where masked", "opposite")
CAUSAL = ("causal", "future", "always", "ignores the mask", "lower triangle")

PORTS = [
    # --- softmax --------------------------------------------------------------------------------------
    Port("jax.nn.softmax (max shift, unnormalized / sum)",
         "google/jax jax/_src/nn/functions.py, softmax(): unnormalized = exp(x - stop_gradient(x.max(axis, "
         "keepdims=True))); result = unnormalized / unnormalized.sum(axis, keepdims=True)", "softmax", '''
def softmax(x, dim=-1):
    x_max = x.amax(dim=dim, keepdim=True).detach()
    unnormalized = torch.exp(x - x_max)
    return unnormalized / unnormalized.sum(dim=dim, keepdim=True)
'''),
    Port("scipy.special.softmax, the log-sum-exp form",
         "scipy scipy/special/_logsumexp.py, softmax(x, axis): np.exp(x - logsumexp(x, axis=axis, keepdims=True))",
         "softmax", '''
def softmax(x, dim=-1):
    return torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True))
'''),
    Port("d2l softmax from scratch (no shift by the max)",
         "d2l-ai/d2l-en chapter_linear-classification/softmax-regression-scratch: X_exp = torch.exp(X); "
         "partition = X_exp.sum(1, keepdims=True); return X_exp / partition", "softmax", '''
def softmax(x, dim=-1):
    X_exp = torch.exp(x)
    partition = X_exp.sum(dim, keepdim=True)
    return X_exp / partition  # the broadcasting mechanism is applied here
''', breach="exponentiates the raw inputs without subtracting the maximum: overflows to inf/NaN for large inputs",
         names=("overflow", "subtract the max", "stable", "nan", "inf")),

    # --- simple_self_attention ------------------------------------------------------------------------
    Port("Peter Bloem, Transformers from scratch: basic self-attention with torch.bmm",
         "pbloem blog 'Transformers from scratch' (peterbloem.nl), basic self-attention: "
         "raw_weights = torch.bmm(x, x.transpose(1, 2)); weights = softmax(raw_weights, dim=2); "
         "y = torch.bmm(weights, x)", "simple_self_attention", '''
def simple_self_attention(x):
    # assume we have some tensor x with size (b, t, k)
    raw_weights = torch.bmm(x, x.transpose(1, 2))
    weights = softmax(raw_weights, dim=2)
    return torch.bmm(weights, x)
''', breach="torch.bmm and dims 1, 2 only work on 3-D (b, t, k) input: an unbatched (T, d) input or more "
            "leading dims (..., T, d) fail",
         names=("bmm", "3-d", "leading dim", "unbatched", "2-d")),
    Port("lucidrains einsum style",
         "lucidrains (e.g. x-transformers / vit-pytorch Attention): sim = einsum('... i d, ... j d -> ... i j', q, k); "
         "attn = sim.softmax(dim=-1); out = einsum('... i j, ... j d -> ... i d', attn, v)",
         "simple_self_attention", '''
def simple_self_attention(x):
    sim = torch.einsum("...id,...jd->...ij", x, x)
    attn = softmax(sim, dim=-1)
    return torch.einsum("...ij,...jd->...id", attn, x)
'''),

    # --- scaled_dot_product_attention -----------------------------------------------------------------
    Port("F.scaled_dot_product_attention reference implementation (additive attn_bias)",
         "PyTorch docs, torch.nn.functional.scaled_dot_product_attention, 'equivalent' reference code: "
         "scale_factor = 1 / sqrt(q.size(-1)); attn_bias = zeros(L, S); bool attn_mask -> "
         "attn_bias.masked_fill_(attn_mask.logical_not(), -inf); attn_weight = q @ k.T * scale + attn_bias",
         "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    L, S = q.size(-2), k.size(-2)
    scale_factor = 1 / math.sqrt(q.size(-1))
    attn_bias = torch.zeros(L, S, dtype=q.dtype, device=q.device)
    if mask is not None:
        if mask.dtype == torch.bool:
            attn_bias = attn_bias.masked_fill(mask.logical_not(), float("-inf"))
        else:
            attn_bias = attn_bias + mask
    attn_weight = q @ k.transpose(-2, -1) * scale_factor
    attn_weight = attn_weight + attn_bias
    attn_weight = softmax(attn_weight, dim=-1)
    return attn_weight @ v, attn_weight
'''),
    Port("Hugging Face BERT extended attention mask (additive, dtype minimum)",
         "huggingface/transformers modeling_utils.py get_extended_attention_mask: "
         "(1.0 - mask) * torch.finfo(dtype).min added to the scores (modeling_bert.py BertSelfAttention)",
         "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    attention_scores = torch.matmul(q, k.transpose(-1, -2))
    attention_scores = attention_scores / math.sqrt(q.size(-1))
    if mask is not None:
        extended_attention_mask = (1.0 - mask.to(attention_scores.dtype)) * torch.finfo(attention_scores.dtype).min
        attention_scores = attention_scores + extended_attention_mask
    attention_probs = softmax(attention_scores, dim=-1)
    context_layer = torch.matmul(attention_probs, v)
    return context_layer, attention_probs
'''),
    Port("Annotated Transformer attention() with masked_fill(mask == 0, -1e9)",
         "harvardnlp/annotated-transformer, def attention(query, key, value, mask=None, dropout=None): "
         "scores.masked_fill(mask == 0, -1e9)", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    "Compute 'Scaled Dot Product Attention'"
    d_k = q.size(-1)
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = softmax(scores, dim=-1)
    return torch.matmul(p_attn, v), p_attn
'''),  # faithful: the course lists -1e9 among the correct fills; the contract promises float32/64 only
    Port("torch.nn.MultiheadAttention attn_mask convention (bool True = not allowed)",
         "PyTorch docs, nn.MultiheadAttention.forward attn_mask: 'a True value indicates that the corresponding "
         "position is not allowed to attend'; F.multi_head_attention_forward masked_fill(attn_mask, -inf)",
         "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    attn_output_weights = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        attn_output_weights = attn_output_weights.masked_fill(mask, float("-inf"))
    attn_output_weights = softmax(attn_output_weights, dim=-1)
    return attn_output_weights @ v, attn_output_weights
''', breach="mask polarity of nn.MultiheadAttention: True means NOT allowed to attend, the opposite of the "
            "course's True = may attend",
         names=POLARITY),

    # --- SelfAttention --------------------------------------------------------------------------------
    Port("Peter Bloem SelfAttention: queries and keys each scaled by d^(1/4)",
         "pbloem/former former/modules.py SelfAttention: tokeys/toqueries/tovalues nn.Linear(bias=False); "
         "queries = queries / (e ** (1/4)); keys = keys / (e ** (1/4)); mask_ with float('-inf'); in this wide version a head has the size e of its keys",
         "SelfAttention", '''
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k=None):
        super().__init__()
        s = d_model if d_k is None else d_k
        self.w_k = nn.Linear(d_model, s, bias=False)
        self.w_q = nn.Linear(d_model, s, bias=False)
        self.w_v = nn.Linear(d_model, s, bias=False)

    def forward(self, x, mask=None):
        keys = self.w_k(x)
        queries = self.w_q(x)
        values = self.w_v(x)
        s = keys.size(-1)
        # Instead of dividing the dot products by sqrt(s), scale the keys and queries
        queries = queries / (s ** (1 / 4))
        keys = keys / (s ** (1 / 4))
        dot = torch.matmul(queries, keys.transpose(-2, -1))
        if mask is not None:
            dot = dot.masked_fill(~mask, float("-inf"))
        dot = softmax(dot, dim=-1)
        return torch.matmul(dot, values), dot
'''),
    Port("nanoGPT lecture Head, encoder version (scaled by C**-0.5, C = n_embd)",
         "karpathy/ng-video-lecture gpt.py, class Head.forward: B,T,C = x.shape; wei = q @ k.transpose(-2,-1) * "
         "C**-0.5 (the lecture: an encoder block just deletes the tril masking line)", "SelfAttention", '''
from torch import nn


class SelfAttention(nn.Module):
    """ one head of self-attention """

    def __init__(self, d_model, d_k=None):
        super().__init__()
        head_size = d_model if d_k is None else d_k
        self.w_k = nn.Linear(d_model, head_size, bias=False)
        self.w_q = nn.Linear(d_model, head_size, bias=False)
        self.w_v = nn.Linear(d_model, head_size, bias=False)

    def forward(self, x, mask=None):
        B, T, C = x.shape
        k = self.w_k(x)   # (B,T,hs)
        q = self.w_q(x)   # (B,T,hs)
        # compute attention scores ("affinities")
        wei = q @ k.transpose(-2, -1) * C**-0.5  # (B, T, hs) @ (B, hs, T) -> (B, T, T)
        if mask is not None:
            wei = wei.masked_fill(mask == 0, float("-inf"))
        wei = softmax(wei, dim=-1)
        v = self.w_v(x)
        out = wei @ v
        return out, wei
''', breach="scores scaled by 1/sqrt(d_model) (C, the input width) instead of 1/sqrt(d_k), the head size",
         names=("sqrt(d_model)", "d_model", "sqrt(d_k)", "scale", "head size")),
    Port("LLMs-from-scratch CausalAttention (triu buffer always applied)",
         "rasbt/LLMs-from-scratch ch03 CausalAttention: W_query/W_key/W_value nn.Linear(bias=qkv_bias=False); "
         "register_buffer('mask', torch.triu(torch.ones(context_length, context_length), diagonal=1)); "
         "attn_scores.masked_fill_(self.mask.bool()[:n, :n], -torch.inf)", "SelfAttention", '''
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k=None, qkv_bias=False):
        super().__init__()
        d_out = d_model if d_k is None else d_k
        self.w_q = nn.Linear(d_model, d_out, bias=qkv_bias)
        self.w_k = nn.Linear(d_model, d_out, bias=qkv_bias)
        self.w_v = nn.Linear(d_model, d_out, bias=qkv_bias)

    def forward(self, x, mask=None):
        num_tokens = x.shape[-2]
        keys = self.w_k(x)
        queries = self.w_q(x)
        values = self.w_v(x)
        attn_scores = queries @ keys.transpose(-2, -1)
        causal = torch.triu(torch.ones(num_tokens, num_tokens, device=x.device), diagonal=1).bool()
        attn_scores = attn_scores.masked_fill(causal, -torch.inf)
        if mask is not None:
            attn_scores = attn_scores.masked_fill(~mask, -torch.inf)
        attn_weights = softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        context_vec = attn_weights @ values
        return context_vec, attn_weights
''', breach="always applies a causal (triu) mask, so without a mask a query cannot see later positions",
         names=CAUSAL),
]

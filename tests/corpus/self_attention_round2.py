"""Held-out ports of notebook 01 (softmax, attention, a single head) in the styles of public projects the
course's own corpus does not use (tinygrad, Trax, Equinox, timm, torchtune)."""
from . import Port

ASSIGNMENT = "01_self_attention"

# Trax's DotProductAttention, ported: the same helper serves two exercises below
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
    # --- softmax --------------------------------------------------------------------------------------
    Port("tinygrad Tensor._softmax / Tensor.softmax (detached max, e.div(ss))",
         "tinygrad/tinygrad tinygrad/tensor.py, Tensor._softmax(axis): m = self - self.max(axis=axis, keepdim=True)"
         ".detach(); e = m.exp(); return m, e, e.sum(axis=axis, keepdim=True); softmax: _, e, ss = "
         "self._softmax(axis); return e.div(ss)", "softmax", '''
def _softmax(x, axis):
    m = x - x.amax(dim=axis, keepdim=True).detach()
    e = m.exp()
    return m, e, e.sum(dim=axis, keepdim=True)


def softmax(x, dim=-1):
    _, e, ss = _softmax(x, dim)
    return e.div(ss)
'''),

    # --- simple_self_attention ------------------------------------------------------------------------
    Port("Trax DotProductAttention(x, x, x) as parameter-free self-attention",
         "google/trax trax/layers/attention.py, DotProductAttention(queries, keys, values, mask, dropout, mode, rng): "
         "dots = jnp.matmul(queries, jnp.swapaxes(keys, -1, -2)) / jnp.sqrt(d_feature); "
         "dots = jnp.exp(dots - fastmath.logsumexp(dots, axis=-1, keepdims=True))", "simple_self_attention",
         TRAX_DOT_PRODUCT_ATTENTION + '''

def simple_self_attention(x):
    out, _ = DotProductAttention(x, x, x, mask=None, dropout=0.0, mode="eval", rng=None)
    return out
''', breach="Trax's attention always divides the scores by sqrt(d): the parameter-free softmax(X X^T) X of the "
            "exercise is unscaled",
         names=("sqrt", "scale", "scaled", "unscaled", "divid")),

    # --- scaled_dot_product_attention -----------------------------------------------------------------
    Port("Trax DotProductAttention (jnp.where(mask, dots, -1e9), log-sum-exp softmax)",
         "google/trax trax/layers/attention.py, DotProductAttention: dots = jnp.where(mask, dots, "
         "jnp.full_like(dots, -1e9)); dots = jnp.exp(dots - fastmath.logsumexp(dots, axis=-1, keepdims=True)); "
         "returns (out, dots)", "scaled_dot_product_attention", TRAX_DOT_PRODUCT_ATTENTION + '''

def scaled_dot_product_attention(q, k, v, mask=None):
    return DotProductAttention(q, k, v, mask, dropout=0.0, mode="eval", rng=None)
'''),
    Port("Equinox dot_product_attention_weights (the mask must have the logits' exact shape)",
         "patrick-kidger/equinox equinox/nn/_attention.py, dot_product_attention_weights: query = query / "
         "math.sqrt(query.shape[-1]); logits = jnp.einsum('sd,Sd->sS', query, key); if mask.shape != "
         "logits.shape: raise ValueError(...); jnp.where(mask, logits, jnp.finfo(logits.dtype).min); Equinox is "
         "unbatched and jax.vmap's over the batch, so a mask is (T_q, T_k) shared or one full mask per example",
         "scaled_dot_product_attention", '''
def dot_product_attention_weights(query, key, mask=None):
    query = query / math.sqrt(query.shape[-1])
    logits = torch.einsum("...sd,...Sd->...sS", query, key)
    if mask is not None:
        # under jax.vmap a mask is either shared, (q_seq, kv_seq), or batched along with the inputs
        if mask.shape != logits.shape and mask.shape != logits.shape[-2:]:
            raise ValueError(
                f"mask must have shape (query_seq_length, kv_seq_length)=({query.shape[-2]}, "
                f"{key.shape[-2]}). Got {tuple(mask.shape)}."
            )
        logits = torch.where(mask, logits, torch.finfo(logits.dtype).min)
    dtype = torch.promote_types(logits.dtype, torch.float32)
    weights = softmax(logits.to(dtype), dim=-1).to(logits.dtype)
    return weights


def dot_product_attention(query, key_, value, mask=None):
    weights = dot_product_attention_weights(query, key_, mask)
    attn = torch.einsum("...sS,...Sd->...sd", weights, value)
    return attn, weights


def scaled_dot_product_attention(q, k, v, mask=None):
    return dot_product_attention(q, k, v, mask)
''', breach="refuses any mask that only broadcasts to the scores (a (B, 1, T_k) padding mask, a (1, T, T) "
            "mask): Equinox demands the exact (T_q, T_k) shape and raises ValueError",
         names=("broadcast", "mask shape", "shape of the mask", "(b, 1, t", "valueerror")),

    # --- SelfAttention --------------------------------------------------------------------------------
    Port("timm Attention, non-fused path (maybe_add_mask adds attn_mask to the scores)",
         "huggingface/pytorch-image-models timm/layers/attention.py, Attention.forward without fused_attn: "
         "q = q * self.scale (head_dim ** -0.5); attn = q @ k.transpose(-2, -1); attn = maybe_add_mask(attn, "
         "attn_mask) (return scores if attn_mask is None else scores + attn_mask); attn.softmax(dim=-1); "
         "one head, q/k/v split out of the fused qkv Linear (qkv_bias=False), timm's proj left out",
         "SelfAttention", '''
from torch import nn


def maybe_add_mask(scores, attn_mask=None):
    return scores if attn_mask is None else scores + attn_mask


class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k=None, qkv_bias=False):
        super().__init__()
        self.head_dim = d_model if d_k is None else d_k
        self.scale = self.head_dim ** -0.5
        self.w_q = nn.Linear(d_model, self.head_dim, bias=qkv_bias)
        self.w_k = nn.Linear(d_model, self.head_dim, bias=qkv_bias)
        self.w_v = nn.Linear(d_model, self.head_dim, bias=qkv_bias)

    def forward(self, x, mask=None):
        q, k, v = self.w_q(x), self.w_k(x), self.w_v(x)
        q = q * self.scale
        attn = q @ k.transpose(-2, -1)
        attn = maybe_add_mask(attn, mask)
        attn = softmax(attn, dim=-1)
        x = attn @ v
        return x, attn
''', breach="adds the mask to the scores as an additive bias (timm's convention): a bool mask adds 1 where a "
            "key is allowed and 0 where it is not, so masked keys keep their weight instead of getting -inf",
         names=("additive", "added to the scores", "-inf", "weight 0", "masked keys", "ignores the mask")),
    Port("torchtune MultiHeadAttention, one head (is_causal=True when no mask is given)",
         "pytorch/torchtune torchtune/modules/attention.py, MultiHeadAttention(..., is_causal=True): q_proj, "
         "k_proj, v_proj bias-free; forward: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, "
         "is_causal=self.kv_cache is None and mask is None and self.is_causal)", "SelfAttention", '''
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k=None, is_causal=True, attn_dropout=0.0):
        super().__init__()
        self.embed_dim = d_model
        self.head_dim = d_model if d_k is None else d_k
        self.is_causal = is_causal
        self.attn_dropout = attn_dropout
        self.kv_cache = None
        self.w_q = nn.Linear(d_model, self.head_dim, bias=False)
        self.w_k = nn.Linear(d_model, self.head_dim, bias=False)
        self.w_v = nn.Linear(d_model, self.head_dim, bias=False)

    def forward(self, x, mask=None):
        # x: [b, s_x, d]
        b, s_x, _ = x.shape
        q = self.w_q(x)
        k = self.w_k(x)
        v = self.w_v(x)
        is_causal = self.kv_cache is None and mask is None and self.is_causal
        if is_causal:
            # the lower-triangular mask F.scaled_dot_product_attention(is_causal=True) applies
            mask = torch.ones(s_x, s_x, dtype=torch.bool, device=x.device).tril(diagonal=0)
        return scaled_dot_product_attention(q, k, v, mask)
''', breach="torchtune defaults to is_causal=True: called without a mask the layer applies a causal mask, so a "
            "query cannot see later positions",
         names=("causal", "future", "no mask", "without a mask", "lower triangle", "is_causal")),
]

"""Ninth held-out set, notebook 01: ports of Chainer's softmax, picoGPT's softmax, nlp-tutorial's scaled dot-product
attention and latent-diffusion's CrossAttention, each read at its source."""
from tests.corpus import Port

ASSIGNMENT = "01_self_attention"

PORTS = [
    Port("chainer_softmax", "chainer/chainer chainer/functions/activation/softmax.py Softmax.forward (NumPy/CuPy path: "
         "y = x - x.max(axis, keepdims=True); xp.exp(y, out=y); y /= y.sum(axis, keepdims=True); the axis argument is "
         "the course's dim)", "softmax", r'''
def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    # chainer.functions.softmax(x, axis): Softmax.forward without cuDNN
    axis = dim
    y = x - x.amax(dim=axis, keepdim=True)       # x[0] - x[0].max(axis=self.axis, keepdims=True)
    y = y.exp_()                                 # xp.exp(y, out=y)
    y = y / y.sum(dim=axis, keepdim=True)        # y /= y.sum(axis=self.axis, keepdims=True) (out of place for autograd)
    return y
'''),
    Port("picogpt_softmax", "jaymody/picoGPT gpt2.py softmax(x) (exp_x = np.exp(x - np.max(x, axis=-1, keepdims=True)); "
         "exp_x / np.sum(exp_x, axis=-1, keepdims=True): always the last axis, there is no axis argument)", "softmax", r'''
def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    # picoGPT's softmax has no axis parameter: it normalises over the last axis, whatever dim is asked for
    exp_x = torch.exp(x - torch.amax(x, dim=-1, keepdim=True))
    return exp_x / torch.sum(exp_x, dim=-1, keepdim=True)
''', breach="ignores dim: the max and the sum are always taken over the last dimension, so softmax(x, dim=0) or "
            "dim=1 of a 3-D tensor normalises the wrong axis",
         names=("dim", "last dimension", "axis", "sum to 1 along")),
    Port("nlptutorial_sdpa", "graykode/nlp-tutorial 5-1.Transformer/Transformer.py ScaledDotProductAttention.forward "
         "(scores = matmul(Q, K^T) / np.sqrt(d_k); scores.masked_fill_(attn_mask, -1e9): 'Fills elements of self tensor "
         "with value where mask is one', i.e. True = masked; nn.Softmax(dim=-1) replaced by the notebook's softmax)",
         "scaled_dot_product_attention", r'''
import numpy as np


def scaled_dot_product_attention(q, k, v, mask=None):
    d_k = q.shape[-1]                                    # a global in nlp-tutorial
    scores = torch.matmul(q, k.transpose(-1, -2)) / np.sqrt(d_k)
    if mask is not None:                                 # nlp-tutorial always passes a mask
        scores.masked_fill_(mask, -1e9)                  # fills where the mask is one (True = masked)
    attn = softmax(scores, dim=-1)                       # nn.Softmax(dim=-1)(scores)
    context = torch.matmul(attn, v)
    return context, attn
''', breach="inverted mask: nlp-tutorial's masks are True where a key is hidden (get_attn_pad_mask, "
            "get_attn_subsequent_mask), so the course's True = may attend masks hide exactly the allowed keys",
         names=("inverted", "true = may attend", "opposite", "masked where", "true where")),
    Port("ldm_sdpa", "CompVis/latent-diffusion ldm/modules/attention.py CrossAttention.forward after the head split "
         "(sim = einsum('b i d, b j d -> b i j', q, k) * self.scale with scale = dim_head ** -0.5; "
         "sim.masked_fill_(~mask, -torch.finfo(sim.dtype).max); sim.softmax(dim=-1), here the notebook's softmax; "
         "einsum('b i j, b j d -> b i d', attn, v); '...' instead of 'b' for any leading dims; out of place because "
         "the course's masks may broadcast to more dims than the scores)", "scaled_dot_product_attention", r'''
def scaled_dot_product_attention(q, k, v, mask=None):
    scale = q.shape[-1] ** -0.5                          # self.scale = dim_head ** -0.5
    sim = torch.einsum('... i d, ... j d -> ... i j', q, k) * scale
    if mask is not None:
        max_neg_value = -torch.finfo(sim.dtype).max
        sim = sim.masked_fill(~mask, max_neg_value)
    # attention, what we cannot get enough of
    attn = softmax(sim, dim=-1)
    out = torch.einsum('... i j, ... j d -> ... i d', attn, v)
    return out, attn
'''),
    Port("ldm_selfattention", "CompVis/latent-diffusion ldm/modules/attention.py CrossAttention(query_dim=d_model, "
         "heads=1, dim_head=d_k) called with context=None (to_q, to_k, to_v bias=False renamed w_q, w_k, w_v; to_out "
         "left out, the course's layer returns the attention itself; the mask is a key-padding mask: "
         "rearrange(mask, 'b ... -> b (...)') then repeat(mask, 'b j -> (b h) () j'), written with reshape and "
         "indexing since einops is not installed)", "SelfAttention", r'''
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        heads = 1
        dim_head = d_model if d_k is None else d_k
        inner_dim = dim_head * heads
        self.scale = dim_head ** -0.5
        self.heads = heads
        self.w_q = nn.Linear(d_model, inner_dim, bias=False)      # to_q
        self.w_k = nn.Linear(d_model, inner_dim, bias=False)      # to_k (context_dim = query_dim)
        self.w_v = nn.Linear(d_model, inner_dim, bias=False)      # to_v

    def forward(self, x, mask=None):
        h = self.heads
        q = self.w_q(x)
        context = x                                               # default(context, x)
        k = self.w_k(context)
        v = self.w_v(context)
        # rearrange(t, 'b n (h d) -> (b h) n d', h=h) is the identity for one head
        sim = torch.einsum('b i d, b j d -> b i j', q, k) * self.scale
        if mask is not None:
            mask = mask.reshape(mask.shape[0], -1)                # rearrange(mask, 'b ... -> b (...)')
            max_neg_value = -torch.finfo(sim.dtype).max
            mask = mask[:, None, :].repeat_interleave(h, dim=0)   # repeat(mask, 'b j -> (b h) () j', h=h)
            sim.masked_fill_(~mask, max_neg_value)
        attn = softmax(sim, dim=-1)
        out = torch.einsum('b i j, b j d -> b i d', attn, v)
        return out, attn
''', breach="the mask is taken as a per-sentence key-padding mask (B, T_k): it is flattened per batch row and applied "
            "to every query, so a causal (T, T) mask (or a (B, T, T) mask) is misread or fails to broadcast",
         names=("mask", "causal", "broadcast", "key padding", "(b, t_k)")),
]

"""Mistake catalogue of notebook 01 (self-attention)."""
from . import Alternative, Mistake

ASSIGNMENT = "01_self_attention"

MISTAKES = [
    Mistake("softmax over a fixed dim 0", "softmax", '''
def softmax(x, dim=-1):
    e = (x - x.amax(dim=0, keepdim=True)).exp()
    return e / e.sum(dim=0, keepdim=True)
''', ("softmax_reference",), "sum to 1 along dim 0", also=('softmax_stable',)),
    Mistake("softmax with dim defaulting to 1 (Chainer's axis=1)", "softmax", '''
def softmax(x, dim=1):
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    return e / e.sum(dim=dim, keepdim=True)
''', ("softmax_reference",), "with dim left out it normalizes dim 1"),
    Mistake("softmax without subtracting the max", "softmax", '''
def softmax(x, dim=-1):
    e = x.exp()
    return e / e.sum(dim=dim, keepdim=True)
''', ("softmax_stable",), "Subtract the maximum"),
    Mistake("softmax subtracting the max of the whole tensor", "softmax", '''
def softmax(x, dim=-1):
    e = (x - x.max()).exp()
    return e / e.sum(dim=dim, keepdim=True)
''', ("softmax_stable",), "not the max of the whole tensor"),
    Mistake("softmax sum without keepdim", "softmax", '''
def softmax(x, dim=-1):
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    return e / e.sum(dim=dim)
''', ("softmax_reference",), "keepdim=True", also=('softmax_stable',)),
    Mistake("softmax with 1 + the sum in the denominator (a 'quiet' softmax)", "softmax", '''
def softmax(x, dim=-1):
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    return e / (1 + e.sum(dim=dim, keepdim=True))
''', ("softmax_reference", "softmax_stable"), "not 1: a softmax divides"),
    Mistake("softmax calling torch.softmax", "softmax", '''
def softmax(x, dim=-1):
    return torch.softmax(x, dim=dim)
''', ("softmax_reference", "softmax_stable"), "not allowed"),
    Mistake("softmax importing the course reference", "softmax", '''
from lib.self_attention import softmax
''', ("softmax_reference", "softmax_stable"), "not defined"),  # lib.self_attention is not there while 01 is graded
    Mistake("simple self-attention returns the weights", "simple_self_attention", '''
def simple_self_attention(x):
    return softmax(x @ x.transpose(-2, -1), dim=-1)
''', ("simple_self_attention_reference",), "returned the attention weights"),
    Mistake("simple self-attention scaled by sqrt(d)", "simple_self_attention", '''
def simple_self_attention(x):
    return softmax(x @ x.transpose(-2, -1) / math.sqrt(x.shape[-1]), dim=-1) @ x
''', ("simple_self_attention_reference",), "no scaling"),
    Mistake("batch dim added with unsqueeze(1): each row its own batch", "simple_self_attention", '''
def simple_self_attention(x):
    x3 = x if x.dim() > 2 else x.unsqueeze(1)
    out = softmax(x3 @ x3.transpose(-2, -1), dim=-1) @ x3
    return out.reshape(x.shape)
''', ("simple_self_attention_reference",), "each row became a batch of its own"),
    Mistake("simple self-attention with x.T", "simple_self_attention", '''
def simple_self_attention(x):
    return softmax(x @ x.T, dim=-1) @ x
''', ("simple_self_attention_reference",), "not k.T"),
    Mistake("attention scaled by 3 sqrt(d_k) (a temperature of 3)", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / (3 * math.sqrt(q.shape[-1]))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return w @ v, w
''', ("scaled_dot_product_attention_reference",), "= 3 * sqrt(d_k), not by sqrt(d_k)"),
    Mistake("attention causal without a mask (its own (T_q, T_q) mask)", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is None:
        mask = torch.ones(q.shape[-2], q.shape[-2], dtype=torch.bool).tril()
    scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return w @ v, w
''', ("scaled_dot_product_attention_reference",), "a causal mask is applied although none was given",
        also=("scaled_dot_product_attention_mask",)),
    Mistake("attention scaled by d_k", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / q.shape[-1]
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return w @ v, w
''', ("scaled_dot_product_attention_reference",), "divided by d_k; divide by sqrt(d_k)"),
    Mistake("attention not scaled", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return w @ v, w
''', ("scaled_dot_product_attention_reference",), "not scaled"),
    Mistake("attention scaled by sqrt(d_v)", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return w @ v, w
''', ("scaled_dot_product_attention_reference",), "sqrt(d_v)"),
    Mistake("attention softmax over the queries", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-2)
    return w @ v, w
''', ("scaled_dot_product_attention_reference", "scaled_dot_product_attention_mask"), "over the queries"),
    Mistake("attention weights returned transposed", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return w @ v, w.transpose(-2, -1)
''', ("scaled_dot_product_attention_reference",), "transposed", also=('scaled_dot_product_attention_mask',)),
    Mistake("attention with its own unstable exp", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).exp()
    if mask is not None:
        scores = scores * mask
    w = scores / scores.sum(dim=-1, keepdim=True)
    return w @ v, w
''', ("scaled_dot_product_attention_reference",), "stable softmax"),
    Mistake("mask applied after the softmax", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    w = softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    if mask is not None:
        w = w * mask
    return w @ v, w
''', ("scaled_dot_product_attention_mask",), "before the softmax"),
    Mistake("inverted mask", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return w @ v, w
''', ("scaled_dot_product_attention_mask",), "polarity is inverted"),
    Mistake("boolean mask added to the scores", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores + mask
    w = softmax(scores, dim=-1)
    return w @ v, w
''', ("scaled_dot_product_attention_mask",), "the boolean mask is added to the scores"),
    Mistake("mask ignored", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    w = softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return w @ v, w
''', ("scaled_dot_product_attention_mask",), "the mask is ignored"),
    Mistake("attention calling F.scaled_dot_product_attention", "scaled_dot_product_attention", '''
import torch.nn.functional as F
def scaled_dot_product_attention(q, k, v, mask=None):
    w = softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), w
''', ("scaled_dot_product_attention_reference", "scaled_dot_product_attention_mask"), "not allowed"),
    Mistake("projections with a bias", "SelfAttention", '''
from torch import nn
class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k=None):
        super().__init__()
        d_k = d_k or d_model
        self.w_q, self.w_k, self.w_v = (nn.Linear(d_model, d_k) for _ in range(3))
    def forward(self, x, mask=None):
        return scaled_dot_product_attention(self.w_q(x), self.w_k(x), self.w_v(x), mask)
''', ("SelfAttention_module",), "has a bias"),
    Mistake("queries and keys swapped", "SelfAttention", '''
from torch import nn
class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k=None):
        super().__init__()
        d_k = d_k or d_model
        self.w_q, self.w_k, self.w_v = (nn.Linear(d_model, d_k, bias=False) for _ in range(3))
    def forward(self, x, mask=None):
        return scaled_dot_product_attention(self.w_k(x), self.w_q(x), self.w_v(x), mask)
''', ("SelfAttention_module",), "queries and keys are swapped"),
    Mistake("SelfAttention drops the mask", "SelfAttention", '''
from torch import nn
class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k=None):
        super().__init__()
        d_k = d_k or d_model
        self.w_q, self.w_k, self.w_v = (nn.Linear(d_model, d_k, bias=False) for _ in range(3))
    def forward(self, x, mask=None):
        return scaled_dot_product_attention(self.w_q(x), self.w_k(x), self.w_v(x))
''', ("SelfAttention_module",), "the mask is ignored"),
]

ALTERNATIVES = [
    Alternative("softmax through logsumexp", "softmax", '''
def softmax(x, dim=-1):
    return torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True))
'''),
    Alternative("softmax with max(...).values", "softmax", '''
def softmax(x, dim=-1):
    m, _ = x.max(dim=dim, keepdim=True)
    e = torch.exp(x - m)
    return e / torch.sum(e, dim=dim, keepdim=True)
'''),
    Alternative("simple self-attention with einsum", "simple_self_attention", '''
def simple_self_attention(x):
    w = softmax(torch.einsum("...id,...jd->...ij", x, x), dim=-1)
    return torch.einsum("...ij,...jd->...id", w, x)
'''),
    Alternative("attention with einsum and masked_fill(-1e9)", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", q, k) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), -1e9)
    w = softmax(scores, dim=-1)
    return torch.einsum("...qk,...kd->...qd", w, v), w
'''),
    Alternative("attention with an additive -inf mask", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(k.size(-1))
    if mask is not None:
        scores = scores + torch.zeros_like(scores).masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return w @ v, w
'''),
    Alternative("attention with torch.where", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.matmul(q, k.mT) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device))
    w = softmax(scores, dim=-1)
    return torch.matmul(w, v), w
'''),
    Alternative("attention with explicit loops", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    t_q, t_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    qf = q.expand(*lead, t_q, d_k).reshape(-1, t_q, d_k)
    kf = k.expand(*lead, t_k, d_k).reshape(-1, t_k, d_k)
    scores = torch.zeros(qf.shape[0], t_q, t_k, dtype=q.dtype, device=q.device)
    for b in range(qf.shape[0]):
        for i in range(t_q):
            for j in range(t_k):
                scores[b, i, j] = (qf[b, i] * kf[b, j]).sum() / math.sqrt(d_k)
    scores = scores.reshape(*lead, t_q, t_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return w @ v, w
'''),
    Alternative("SelfAttention using the weight matrices directly", "SelfAttention", '''
from torch import nn
class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k=None):
        super().__init__()
        d_k = d_model if d_k is None else d_k
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_k, bias=False)
    def forward(self, x, mask=None):
        q, k, v = (x @ lin.weight.T for lin in (self.w_q, self.w_k, self.w_v))
        return scaled_dot_product_attention(q, k, v, mask=mask)
'''),
]

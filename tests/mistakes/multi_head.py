"""Mistake catalogue of notebook 05 (multi-head attention)."""
from . import Alternative, Mistake

ASSIGNMENT = "05_multi_head"

INIT = '''
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_heads = n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
'''

FORWARD = '''
        q = split_heads(self.w_q(query), self.n_heads)
        k = split_heads(self.w_k(key), self.n_heads)
        v = split_heads(self.w_v(value), self.n_heads)
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)
        out, weights = scaled_dot_product_attention(q, k, v, mask)
        if self.training and self.dropout.p > 0:
            out = self.dropout(weights) @ v
        return self.w_o(merge_heads(out)), weights
'''


def mha(init=INIT, forward=FORWARD, header="", replace=()):
    """The solution's MultiHeadAttention with some lines changed: ``replace`` holds (old, new) pairs."""
    code = f'''{header}
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__(){init}
    def forward(self, query, key, value, mask=None):{forward}'''
    for old, new in replace:
        assert old in code, old
        code = code.replace(old, new)
    return code


# the attention written out, for the mistakes that live inside it
OWN_ATTENTION = '''
        q = split_heads(self.w_q(query), self.n_heads)
        k = split_heads(self.w_k(key), self.n_heads)
        v = split_heads(self.w_v(value), self.n_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        out = self.dropout(weights) @ v
        return self.w_o(merge_heads(out)), weights
'''

MISTAKES = [
    # --- split_heads ---
    Mistake("split by view(B, h, T, d/h) without transpose", "split_heads", '''
def split_heads(x, n_heads):
    B, T, d = x.shape
    return x.view(B, n_heads, T, d // n_heads)
''', ("split_heads_layout",), "mixes features of different positions", also=('split_heads_leading',)),
    Mistake("split reshaping the features to (d/h, h)", "split_heads", '''
def split_heads(x, n_heads):
    B, T, d = x.shape
    return x.reshape(B, T, d // n_heads, n_heads).permute(0, 3, 1, 2)
''', ("split_heads_layout",), "every h-th feature", also=('split_heads_leading',)),
    Mistake("split forgetting the transpose", "split_heads", '''
def split_heads(x, n_heads):
    B, T, d = x.shape
    return x.view(B, T, n_heads, d // n_heads)
''', ("split_heads_layout",), "transpose(1, 2) to get (B, h, T, d/h)", also=('split_heads_leading',)),
    Mistake("split only for 3-D inputs", "split_heads", '''
def split_heads(x, n_heads):
    B, T, d = x.shape
    return x.view(B, T, n_heads, d // n_heads).transpose(1, 2)
''', ("split_heads_leading",), "any leading dims"),
    Mistake("split_heads importing the course reference", "split_heads", '''
from lib.multi_head import split_heads
''', ("split_heads_layout", "split_heads_leading"), "not defined"),  # lib.multi_head is not there while 05 is graded
    # --- merge_heads ---
    Mistake("merge without the transpose back", "merge_heads", '''
def merge_heads(x):
    B, h, T, d_k = x.shape
    return x.reshape(B, T, h * d_k)
''', ("merge_heads_layout",), "skips the transpose back", also=('merge_heads_round_trip',)),
    Mistake("merge with view after transpose (not contiguous)", "merge_heads", '''
def merge_heads(x):
    B, h, T, d_k = x.shape
    return x.transpose(1, 2).view(B, T, h * d_k)
''', ("merge_heads_layout",), "contiguous", also=('merge_heads_round_trip',)),
    Mistake("merge interleaving the heads", "merge_heads", '''
def merge_heads(x):
    B, h, T, d_k = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, T, h * d_k)
''', ("merge_heads_layout",), "interleaved", also=('merge_heads_round_trip',)),
    # --- MultiHeadAttention ---
    Mistake("scores scaled by sqrt(d_model)", "MultiHeadAttention",
            mha(forward=OWN_ATTENTION, replace=[("math.sqrt(q.shape[-1])", "math.sqrt(query.shape[-1])")]),
            ("MultiHeadAttention_pytorch", "MultiHeadAttention_mask"), "divided by sqrt(d_model)"),
    Mistake("queries and keys normalized per head (qk-layernorm)", "MultiHeadAttention",
            mha(replace=[("        v = split_heads(self.w_v(value), self.n_heads)\n",
                          "        v = split_heads(self.w_v(value), self.n_heads)\n"
                          "        q, k = F.layer_norm(q, q.shape[-1:]), F.layer_norm(k, k.shape[-1:])\n")],
                header="import torch.nn.functional as F"),
            ("MultiHeadAttention_pytorch", "MultiHeadAttention_mask"), "queries and keys are normalized"),
    Mistake("output projection w_o missing", "MultiHeadAttention",
            mha(replace=[("return self.w_o(merge_heads(out)), weights", "return merge_heads(out), weights")]),
            ("MultiHeadAttention_pytorch", "MultiHeadAttention_mask"), "w_o is missing"),
    Mistake("w_o applied before merging the heads", "MultiHeadAttention",
            mha(replace=[("return self.w_o(merge_heads(out)), weights", "return merge_heads(self.w_o(out)), weights")]),
            ("MultiHeadAttention_pytorch", "MultiHeadAttention_mask"), "only then w_o", also=('MultiHeadAttention_vectorized', 'MultiHeadAttention_dropout')),
    Mistake("residual and LayerNorm inside the attention", "MultiHeadAttention",
            mha(replace=[("return self.w_o(merge_heads(out)), weights",
                          "out = self.w_o(merge_heads(out))\n"
                          "        return torch.nn.functional.layer_norm(query + out, query.shape[-1:]), weights")]),
            ("MultiHeadAttention_pytorch", "MultiHeadAttention_mask"), "a LayerNorm inside the attention",
            also=('MultiHeadAttention_dropout',)),
    Mistake("keys and values projected from the query", "MultiHeadAttention",
            mha(replace=[("self.w_k(key)", "self.w_k(query)"), ("self.w_v(value)", "self.w_v(query)")]),
            ("MultiHeadAttention_pytorch", "MultiHeadAttention_mask"), "projected from the `key`"),
    Mistake("values projected from the `key` argument", "MultiHeadAttention",
            mha(replace=[("self.w_v(value)", "self.w_v(key)")]),
            ("MultiHeadAttention_pytorch",), "project them from `value`"),
    Mistake("keys and values split with the query's length T_q", "MultiHeadAttention", mha(forward='''
        B, T, d = query.shape
        split = lambda t: t.view(B, T, self.n_heads, d // self.n_heads).transpose(1, 2)
        q, k, v = split(self.w_q(query)), split(self.w_k(key)), split(self.w_v(value))
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)
        out, weights = scaled_dot_product_attention(q, k, v, mask)
        if self.training and self.dropout.p > 0:
            out = self.dropout(weights) @ v
        return self.w_o(out.transpose(1, 2).reshape(B, T, d)), weights
'''), ("MultiHeadAttention_pytorch", "MultiHeadAttention_mask"), "Check the shapes step by step"),
    Mistake("weights averaged over the heads", "MultiHeadAttention",
            mha(replace=[("return self.w_o(merge_heads(out)), weights",
                          "return self.w_o(merge_heads(out)), weights.mean(dim=1)")]),
            ("MultiHeadAttention_pytorch", "MultiHeadAttention_mask"), "averaged over the heads"),
    Mistake("3-D mask not unsqueezed for the heads", "MultiHeadAttention",
            mha(replace=[("        if mask is not None and mask.dim() == 3:\n            mask = mask.unsqueeze(1)\n", "")]),
            ("MultiHeadAttention_mask",), "mask.unsqueeze(1)"),
    Mistake("every mask unsqueezed, 2-D and 4-D too", "MultiHeadAttention",
            mha(replace=[("if mask is not None and mask.dim() == 3:", "if mask is not None:")]),
            ("MultiHeadAttention_mask",), "broadcasts against (B, h, T_q, T_k) as it is"),
    Mistake("mask convention of nn.MultiheadAttention (True = blocked)", "MultiHeadAttention",
            mha(forward=OWN_ATTENTION, replace=[("masked_fill(~mask,", "masked_fill(mask,")]),
            ("MultiHeadAttention_mask",), "True means 'may attend'"),
    Mistake("Python loop over the heads", "MultiHeadAttention", mha(forward='''
        d_k = query.shape[-1] // self.n_heads
        q, k, v = self.w_q(query), self.w_k(key), self.w_v(value)
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)
        outs, weights = [], []
        for i in range(self.n_heads):
            cols = slice(i * d_k, (i + 1) * d_k)
            m = mask if mask is None or mask.dim() == 2 else mask[:, i if mask.shape[1] > 1 else 0]
            o, w = scaled_dot_product_attention(q[..., cols], k[..., cols], v[..., cols], m)
            if self.training and self.dropout.p > 0:
                o = self.dropout(w) @ v[..., cols]
            outs.append(o)
            weights.append(w)
        return self.w_o(torch.cat(outs, dim=-1)), torch.stack(weights, dim=1)
'''), ("MultiHeadAttention_vectorized",), "loop over the heads"),
    Mistake("no ValueError for d_model % n_heads != 0", "MultiHeadAttention",
            mha(replace=[('        if d_model % n_heads:\n            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")\n', "")]),
            ("MultiHeadAttention_module",), "did not raise ValueError"),
    Mistake("assert instead of ValueError", "MultiHeadAttention",
            mha(replace=[('        if d_model % n_heads:\n            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")\n',
                          '        assert d_model % n_heads == 0, "d_model must be divisible by n_heads"\n')]),
            ("MultiHeadAttention_module",), "instead of using assert"),
    Mistake("bias argument ignored", "MultiHeadAttention",
            mha(replace=[("d_model, bias=bias)", "d_model)")]),
            ("MultiHeadAttention_module", "MultiHeadAttention_pytorch"), "although bias=False"),
    Mistake("dropout also active in eval mode", "MultiHeadAttention",
            mha(header="import torch.nn.functional as F",
                replace=[("self.dropout = nn.Dropout(dropout)", "self.p = dropout"),
                         ("if self.training and self.dropout.p > 0:\n            out = self.dropout(weights) @ v",
                          "out = F.dropout(weights, self.p) @ v")]),
            ("MultiHeadAttention_dropout",), "eval mode"),
    Mistake("dropout on the output instead of the weights", "MultiHeadAttention",
            mha(replace=[("        if self.training and self.dropout.p > 0:\n            out = self.dropout(weights) @ v\n", ""),
                         ("return self.w_o(merge_heads(out)), weights", "return self.dropout(self.w_o(merge_heads(out))), weights")]),
            ("MultiHeadAttention_dropout",), "not applied to the attention weights"),
    Mistake("dropout on the scores, before the softmax", "MultiHeadAttention",
            mha(forward=OWN_ATTENTION, replace=[("weights = torch.softmax(scores, dim=-1)\n        out = self.dropout(weights) @ v",
                                                 "weights = torch.softmax(self.dropout(scores), dim=-1)\n        out = weights @ v")]),
            ("MultiHeadAttention_dropout",), "same output as without dropout"),
    Mistake("dropout without the 1/(1-p) rescaling", "MultiHeadAttention",
            mha(replace=[("out = self.dropout(weights) @ v",
                          "out = (weights * (torch.rand_like(weights) >= self.dropout.p)) @ v")]),
            ("MultiHeadAttention_dropout",), "not rescaled by 1/(1-p)"),
    Mistake("dropout never applied", "MultiHeadAttention",
            mha(replace=[("        if self.training and self.dropout.p > 0:\n            out = self.dropout(weights) @ v\n", "")]),
            ("MultiHeadAttention_dropout",), "same output as without dropout"),
    Mistake("wrapping nn.MultiheadAttention as a submodule", "MultiHeadAttention",
            mha(replace=[("self.dropout = nn.Dropout(dropout)",
                          "self.dropout = nn.Dropout(dropout)\n        self.mha = nn.MultiheadAttention(d_model, n_heads, "
                          "dropout=dropout, bias=bias, batch_first=True)")]),
            ("MultiHeadAttention_module", "MultiHeadAttention_pytorch"), "contains an nn.MultiheadAttention", also=('MultiHeadAttention_mask', 'MultiHeadAttention_vectorized', 'MultiHeadAttention_dropout')),
    Mistake("calling nn.MultiheadAttention in forward", "MultiHeadAttention", mha(forward='''
        d = query.shape[-1]
        theirs = nn.MultiheadAttention(d, self.n_heads, bias=self.w_q.bias is not None, batch_first=True)
        with torch.no_grad():
            theirs.in_proj_weight.copy_(torch.cat([self.w_q.weight, self.w_k.weight, self.w_v.weight]))
            theirs.out_proj.weight.copy_(self.w_o.weight)
            if self.w_q.bias is not None:
                theirs.in_proj_bias.copy_(torch.cat([self.w_q.bias, self.w_k.bias, self.w_v.bias]))
                theirs.out_proj.bias.copy_(self.w_o.bias)
        blocked = None
        if mask is not None:
            B, T_q, T_k = query.shape[0], query.shape[1], key.shape[1]
            m = mask.unsqueeze(1) if mask.dim() == 3 else mask
            m = m.expand(B, self.n_heads, T_q, T_k) if m.dim() == 4 else m
            blocked = ~(m.reshape(B * self.n_heads, T_q, T_k) if m.dim() == 4 else m)
        return theirs(query, key, value, attn_mask=blocked, average_attn_weights=False)
'''), ("MultiHeadAttention_pytorch", "MultiHeadAttention_mask"), "built-in nn.MultiheadAttention is not allowed", also=('MultiHeadAttention_vectorized', 'MultiHeadAttention_dropout')),
    Mistake("calling F.scaled_dot_product_attention", "MultiHeadAttention",
            mha(header="import torch.nn.functional as F",
                replace=[("out, weights = scaled_dot_product_attention(q, k, v, mask)",
                          "_, weights = scaled_dot_product_attention(q, k, v, mask)\n"
                          "        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)")]),
            ("MultiHeadAttention_pytorch", "MultiHeadAttention_mask"), "not allowed", also=('MultiHeadAttention_vectorized', 'MultiHeadAttention_dropout')),
    Mistake("MultiHeadAttention importing the course reference", "MultiHeadAttention", '''
from lib.multi_head import MultiHeadAttention
''', ("MultiHeadAttention_module", "MultiHeadAttention_pytorch"), "not defined", also=('MultiHeadAttention_mask', 'MultiHeadAttention_vectorized', 'MultiHeadAttention_dropout')),  # (lib.multi_head: see above)
]

ALTERNATIVES = [
    Alternative("split with reshape and transpose(-2, -3) on *lead", "split_heads", '''
def split_heads(x, n_heads):
    *lead, T, d = x.shape
    return x.reshape(*lead, T, n_heads, d // n_heads).transpose(-2, -3)
'''),
    Alternative("split with chunk and stack", "split_heads", '''
def split_heads(x, n_heads):
    return torch.stack(x.chunk(n_heads, dim=-1), dim=-3)
'''),
    Alternative("merge with contiguous().view", "merge_heads", '''
def merge_heads(x):
    *lead, h, T, d_k = x.shape
    return x.transpose(-3, -2).contiguous().view(*lead, T, h * d_k)
'''),
    Alternative("merge with unbind and cat", "merge_heads", '''
def merge_heads(x):
    return torch.cat(x.unbind(dim=-3), dim=-1)
'''),
    Alternative("einsum attention, own softmax, -1e9 mask, F.dropout", "MultiHeadAttention", '''
import torch.nn.functional as F

class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError("d_model must be divisible by n_heads")
        self.h, self.d_k, self.p = n_heads, d_model // n_heads, dropout
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))

    def forward(self, query, key, value, mask=None):
        B, T_q, d = query.shape
        T_k = key.shape[1]
        q = self.w_q(query).view(B, T_q, self.h, self.d_k).permute(0, 2, 1, 3)
        k = self.w_k(key).view(B, T_k, self.h, self.d_k).permute(0, 2, 1, 3)
        v = self.w_v(value).view(B, T_k, self.h, self.d_k).permute(0, 2, 1, 3)
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / self.d_k ** 0.5
        if mask is not None:
            while mask.dim() < 4:
                mask = mask.unsqueeze(-3)
            scores = scores.masked_fill(mask.logical_not(), -1e9)
        scores = scores - scores.amax(dim=-1, keepdim=True)
        w = scores.exp() / scores.exp().sum(dim=-1, keepdim=True)
        out = torch.einsum("bhqk,bhkd->bhqd", F.dropout(w, self.p, training=self.training), v)
        return self.w_o(out.permute(0, 2, 1, 3).reshape(B, T_q, d)), w
'''),
    Alternative("torch.softmax with torch.where, returning weights after dropout", "MultiHeadAttention", '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"{d_model} is not a multiple of {n_heads}")
        self.n_heads = n_heads
        self.w_q = nn.Linear(d_model, d_model, bias)
        self.w_k = nn.Linear(d_model, d_model, bias)
        self.w_v = nn.Linear(d_model, d_model, bias)
        self.w_o = nn.Linear(d_model, d_model, bias)
        self.drop = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        q, k, v = (split_heads(lin(t), self.n_heads)
                   for lin, t in ((self.w_q, query), (self.w_k, key), (self.w_v, value)))
        scores = torch.matmul(q, k.mT) / math.sqrt(k.size(-1))
        if mask is not None:
            mask = mask[:, None] if mask.ndim == 3 else mask
            scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)
        weights = self.drop(torch.softmax(scores, dim=-1))
        return self.w_o(merge_heads(torch.matmul(weights, v))), weights
'''),
    Alternative("nn.Dropout on the weights at every call (the identity in eval mode)", "MultiHeadAttention",
                mha(replace=[("if self.training and self.dropout.p > 0:\n            out = self.dropout(weights) @ v",
                              "out = self.dropout(weights) @ v")])),
    Alternative("own split with unflatten, a float -inf mask added to the scores", "MultiHeadAttention", '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % n_heads:
            raise ValueError("d_model must be a multiple of n_heads")
        self.n_heads = n_heads
        for name in ("w_q", "w_k", "w_v", "w_o"):
            setattr(self, name, nn.Linear(d_model, d_model, bias=bias))
        self.attn_drop = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        q, k, v = (lin(t).unflatten(-1, (self.n_heads, -1)).transpose(1, 2)
                   for lin, t in ((self.w_q, query), (self.w_k, key), (self.w_v, value)))
        scores = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
        if mask is not None:
            if mask.dim() == 3:
                mask = mask[:, None]
            scores = scores + torch.zeros_like(scores).masked_fill(~mask, float("-inf"))
        weights = scores.softmax(-1)
        out = self.attn_drop(weights) @ v
        return self.w_o(out.transpose(1, 2).flatten(-2)), weights
'''),
]

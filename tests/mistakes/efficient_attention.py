"""Mistake catalogue of notebook 11 (efficient attention)."""
from . import Alternative, Mistake

ASSIGNMENT = "11_efficient_attention"


def merge(body):
    return f'''
def online_softmax_merge(m1, s1, m2, s2):
{body}'''


MERGE_RIGHT = '''    m = torch.maximum(m1, m2)
    safe = torch.where(m == float("-inf"), torch.zeros_like(m), m)
    return m, s1 * torch.exp(m1 - safe) + s2 * torch.exp(m2 - safe)
'''

# tiled_attention, in parts that the mistakes below replace one at a time
TILED = dict(
    head='''
def tiled_attention(q, k, v, mask=None, block=64):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    m = torch.full((*lead, T_q, 1), float("-inf"), dtype=q.dtype)
    l = torch.zeros((*lead, T_q, 1), dtype=q.dtype)
    acc = torch.zeros((*lead, T_q, v.shape[-1]), dtype=q.dtype)
''',
    loop='''    for j in range(0, T_k, block):
''',
    scores='''        s = q @ k[..., j:j + block, :].transpose(-2, -1) / math.sqrt(d_k)
''',
    mask='''        if mask is not None:
            s = s.masked_fill(~mask[..., j:j + block], float("-inf"))
''',
    update='''        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - safe)
        scale = torch.exp(m - safe)
        l = l * scale + p.sum(-1, keepdim=True)
        acc = acc * scale + p @ v[..., j:j + block, :]
        m = m_new
''',
    end='''    return acc / torch.where(l == 0, torch.ones_like(l), l)
''',
)


def tiled(**parts):
    return "".join(parts.get(name, code) for name, code in TILED.items())


GQA_INIT = '''
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, dropout=0.0):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        if n_heads % n_kv_heads:
            raise ValueError(f"n_heads={n_heads} is not divisible by n_kv_heads={n_kv_heads}")
        self.n_heads, self.n_kv_heads, self.d_head = n_heads, n_kv_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.d_head)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.d_head)
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)
'''

GQA_FORWARD = '''
    def forward(self, query, key, value, mask=None):
        g = self.n_heads // self.n_kv_heads
        q = split_heads(self.w_q(query), self.n_heads)
        k = split_heads(self.w_k(key), self.n_kv_heads).repeat_interleave(g, dim=1)
        v = split_heads(self.w_v(value), self.n_kv_heads).repeat_interleave(g, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        out = self.dropout(weights) @ v
        return self.w_o(merge_heads(out)), weights
'''


def gqa(replace=(), init=GQA_INIT, forward=GQA_FORWARD):
    """The solution's GroupedQueryAttention with some lines changed: ``replace`` holds (old, new) pairs."""
    code = init + forward
    for old, new in replace:
        assert old in code, old
        code = code.replace(old, new)
    return code


MISTAKES = [
    # --- online_softmax_merge ---
    Mistake("merge adding the sums without rescaling", "online_softmax_merge", merge('''    return torch.maximum(m1, m2), s1 + s2
'''), ("online_softmax_merge_values", "online_softmax_merge_order"), "the two sums are added as they are"),
    Mistake("merge with the factors upside down", "online_softmax_merge", merge('''    m = torch.maximum(m1, m2)
    safe = torch.where(m == float("-inf"), torch.zeros_like(m), m)
    return m, s1 * torch.exp(safe - m1) + s2 * torch.exp(safe - m2)
'''), ("online_softmax_merge_values", "online_softmax_merge_order"), "the factors upside down",
        also=("online_softmax_merge_masked",)),
    Mistake("merge rescaling only the first sum", "online_softmax_merge", merge('''    m = torch.maximum(m1, m2)
    safe = torch.where(m == float("-inf"), torch.zeros_like(m), m)
    return m, s1 * torch.exp(m1 - safe) + s2
'''), ("online_softmax_merge_values", "online_softmax_merge_order"), "only s1 is rescaled"),
    Mistake("merge assuming the newer block holds the maximum", "online_softmax_merge", merge('''    return m2, s1 * torch.exp(m1 - m2) + s2
'''), ("online_softmax_merge_values", "online_softmax_merge_order"), "the second block's maximum",
        also=("online_softmax_merge_masked",)),
    Mistake("merge through exp of the maxima", "online_softmax_merge", merge('''    m = torch.maximum(m1, m2)
    return m, (s1 * torch.exp(m1) + s2 * torch.exp(m2)) / torch.exp(m)
'''), ("online_softmax_merge_values",), "exp(m1) itself overflows", also=("online_softmax_merge_masked",)),
    Mistake("merge giving NaN for two empty blocks", "online_softmax_merge", merge('''    m = torch.maximum(m1, m2)
    return m, s1 * torch.exp(m1 - m) + s2 * torch.exp(m2 - m)
'''), ("online_softmax_merge_masked",), "exp(−inf − (−inf))"),
    Mistake("merge returning (s, m)", "online_softmax_merge", merge('''    m = torch.maximum(m1, m2)
    safe = torch.where(m == float("-inf"), torch.zeros_like(m), m)
    return s1 * torch.exp(m1 - safe) + s2 * torch.exp(m2 - safe), m
'''), ("online_softmax_merge_values", "online_softmax_merge_masked", "online_softmax_merge_order"),
        "returns (s, m)"),
    Mistake("merge with Python's max", "online_softmax_merge", merge('''    m = max(m1, m2)
    return m, s1 * math.exp(m1 - m) + s2 * math.exp(m2 - m)
'''), ("online_softmax_merge_values", "online_softmax_merge_masked", "online_softmax_merge_order"),
        "torch.maximum(m1, m2)"),
    Mistake("merge updating its arguments in place", "online_softmax_merge", merge('''    m = torch.maximum(m1, m2)
    safe = torch.where(m == float("-inf"), torch.zeros_like(m), m)
    s1 *= torch.exp(m1 - safe)
    s1 += s2 * torch.exp(m2 - safe)
    return m, s1
'''), ("online_softmax_merge_order",), "changes its argument s1 in place"),
    Mistake("merge keeping a finite maximum for empty blocks", "online_softmax_merge", merge('''    m = torch.maximum(m1, m2).clamp_min(-1e9)
    return m, s1 * torch.exp(m1 - m) + s2 * torch.exp(m2 - m)
'''), ("online_softmax_merge_masked",), "the maximum of no score stays -inf"),

    # --- tiled_attention ---
    Mistake("tiled attention not rescaling the accumulator", "tiled_attention", tiled(update='''        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - safe)
        l = l * torch.exp(m - safe) + p.sum(-1, keepdim=True)
        acc = acc + p @ v[..., j:j + block, :]
        m = m_new
'''), ("tiled_attention_matches", "tiled_attention_mask", "tiled_attention_stable"),
        "the output accumulated so far is not rescaled"),
    Mistake("tiled attention with a softmax per block", "tiled_attention", tiled(update='''        w = torch.softmax(s, dim=-1)
        acc = acc + w @ v[..., j:j + block, :]
''', end='''    return acc
'''), ("tiled_attention_matches", "tiled_attention_mask", "tiled_attention_stable"),
        "normalized on their own"),
    Mistake("tiled attention without the 1/sqrt(d_k)", "tiled_attention", tiled(scores='''        s = q @ k[..., j:j + block, :].transpose(-2, -1)
'''), ("tiled_attention_matches", "tiled_attention_mask", "tiled_attention_stable"), "not divided by sqrt(d_k)"),
    Mistake("tiled attention dropping the last short block", "tiled_attention", tiled(loop='''    for j in range(0, T_k - block + 1, block):
'''), ("tiled_attention_matches", "tiled_attention_mask"), "the last, shorter block"),
    Mistake("tiled attention not dividing by the sum", "tiled_attention", tiled(end='''    return acc
'''), ("tiled_attention_matches", "tiled_attention_mask", "tiled_attention_stable"), "not divided by the running sum"),
    Mistake("tiled attention giving NaN for a query with no key", "tiled_attention", tiled(end='''    return acc / l
'''), ("tiled_attention_mask",), "gives NaN"),
    Mistake("tiled attention masking with -1e9", "tiled_attention", tiled(mask='''        if mask is not None:
            s = s.masked_fill(~mask[..., j:j + block], -1e9)
'''), ("tiled_attention_mask",), "large finite number"),
    Mistake("tiled attention with exp of the raw scores", "tiled_attention", tiled(update='''        p = torch.exp(s)
        l = l + p.sum(-1, keepdim=True)
        acc = acc + p @ v[..., j:j + block, :]
'''), ("tiled_attention_stable",), "overflows float32"),
    Mistake("tiled attention starting the maximum at 0", "tiled_attention", tiled(head=TILED["head"].replace(
        'm = torch.full((*lead, T_q, 1), float("-inf"), dtype=q.dtype)',
        'm = torch.zeros((*lead, T_q, 1), dtype=q.dtype)')), ("tiled_attention_stable",), "Start it at -inf"),
    Mistake("tiled attention building the whole score matrix", "tiled_attention", '''
def tiled_attention(q, k, v, mask=None, block=64):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    m = s.amax(-1, keepdim=True)
    m = torch.where(m == float("-inf"), torch.zeros_like(m), m)
    p = torch.exp(s - m)
    l = p.sum(-1, keepdim=True)
    return (p @ v) / torch.where(l == 0, torch.ones_like(l), l)
''', ("tiled_attention_memory",), "the whole score matrix"),
    Mistake("tiled attention tiling the queries", "tiled_attention", '''
def tiled_attention(q, k, v, mask=None, block=64):
    outs = []
    for i in range(0, q.shape[-2], block):
        s = q[..., i:i + block, :] @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            mq = mask[..., i:i + block, :] if mask.shape[-2] > 1 else mask
            s = s.masked_fill(~mq, float("-inf"))
        m = s.amax(-1, keepdim=True)
        m = torch.where(m == float("-inf"), torch.zeros_like(m), m)
        p = torch.exp(s - m)
        l = p.sum(-1, keepdim=True)
        outs.append((p @ v) / torch.where(l == 0, torch.ones_like(l), l))
    return torch.cat(outs, dim=-2)
''', ("tiled_attention_memory",), "for some of the queries"),
    Mistake("tiled attention ignoring the block argument", "tiled_attention", tiled(loop='''    block = 64
    for j in range(0, T_k, block):
'''), ("tiled_attention_memory",), "use the `block` argument"),
    Mistake("tiled attention with the mask inverted", "tiled_attention", tiled(mask='''        if mask is not None:
            s = s.masked_fill(mask[..., j:j + block], float("-inf"))
'''), ("tiled_attention_mask",), "polarity is inverted"),
    Mistake("tiled attention returning a pair", "tiled_attention", tiled(end='''    out = acc / torch.where(l == 0, torch.ones_like(l), l)
    return out, None
'''), ("tiled_attention_matches", "tiled_attention_mask", "tiled_attention_stable", "tiled_attention_memory"),
        "not a pair (output, weights)"),

    # --- GroupedQueryAttention ---
    Mistake("GQA with kv projections of full width", "GroupedQueryAttention", gqa(replace=[
        ("self.w_k = nn.Linear(d_model, n_kv_heads * self.d_head)", "self.w_k = nn.Linear(d_model, d_model)"),
        ("self.w_v = nn.Linear(d_model, n_kv_heads * self.d_head)", "self.w_v = nn.Linear(d_model, d_model)"),
        ("split_heads(self.w_k(key), self.n_kv_heads).repeat_interleave(g, dim=1)", "split_heads(self.w_k(key), "
         "self.n_heads)"),
        ("split_heads(self.w_v(value), self.n_kv_heads).repeat_interleave(g, dim=1)", "split_heads(self.w_v(value), "
         "self.n_heads)")]),
        ("GroupedQueryAttention_module", "GroupedQueryAttention_groups", "GroupedQueryAttention_mask",
         "GroupedQueryAttention_dropout"), "only n_kv_heads"),
    Mistake("GQA with d_head = d_model / n_kv_heads", "GroupedQueryAttention", gqa(replace=[
        ("self.w_k = nn.Linear(d_model, n_kv_heads * self.d_head)", "self.w_k = nn.Linear(d_model, d_model // "
         "n_kv_heads)"),
        ("self.w_v = nn.Linear(d_model, n_kv_heads * self.d_head)", "self.w_v = nn.Linear(d_model, d_model // "
         "n_kv_heads)")]),
        ("GroupedQueryAttention_module", "GroupedQueryAttention_groups"), "not d_model / n_kv_heads"),
    Mistake("GQA tiling the kv heads instead of repeating each", "GroupedQueryAttention", gqa(replace=[
        ("split_heads(self.w_k(key), self.n_kv_heads).repeat_interleave(g, dim=1)",
         "split_heads(self.w_k(key), self.n_kv_heads).repeat(1, g, 1, 1)"),
        ("split_heads(self.w_v(value), self.n_kv_heads).repeat_interleave(g, dim=1)",
         "split_heads(self.w_v(value), self.n_kv_heads).repeat(1, g, 1, 1)")]),
        ("GroupedQueryAttention_groups", "GroupedQueryAttention_mask"), "j % n_kv_heads"),
    Mistake("GQA scaling by the width of all kv heads", "GroupedQueryAttention", gqa(replace=[
        ("/ math.sqrt(self.d_head)", "/ math.sqrt(self.n_kv_heads * self.d_head)")]),
        ("GroupedQueryAttention_groups", "GroupedQueryAttention_mask"), "sqrt(n_kv_heads · d_head)"),
    Mistake("GQA returning the weights per kv head", "GroupedQueryAttention", gqa(replace=[
        ("        return self.w_o(merge_heads(out)), weights\n",
         "        return self.w_o(merge_heads(out)), weights.unflatten(1, (self.n_kv_heads, g)).mean(2)\n")]),
        ("GroupedQueryAttention_groups", "GroupedQueryAttention_mask"), "one map per key/value head"),
    Mistake("GQA without the ValueError for groups", "GroupedQueryAttention", gqa(replace=[
        ('''        if n_heads % n_kv_heads:
            raise ValueError(f"n_heads={n_heads} is not divisible by n_kv_heads={n_kv_heads}")
''', "")]), ("GroupedQueryAttention_module",), "cannot be shared evenly"),
    Mistake("GQA checking the groups with assert", "GroupedQueryAttention", gqa(replace=[
        ('''        if n_heads % n_kv_heads:
            raise ValueError(f"n_heads={n_heads} is not divisible by n_kv_heads={n_kv_heads}")
''', '''        assert n_heads % n_kv_heads == 0
''')]), ("GroupedQueryAttention_module",), "raise ValueError(...) instead of using assert"),
    Mistake("GQA without a head axis on 3-D masks", "GroupedQueryAttention", gqa(replace=[
        ('''            if mask.dim() == 3:
                mask = mask.unsqueeze(1)
''', "")]), ("GroupedQueryAttention_mask",), "head axis"),
    Mistake("GQA with dropout in eval mode too", "GroupedQueryAttention", gqa(replace=[
        ("out = self.dropout(weights) @ v", "out = torch.nn.functional.dropout(weights, self.dropout.p, "
         "training=True) @ v")]), ("GroupedQueryAttention_dropout",), "off in eval mode"),
    Mistake("GQA without the output projection", "GroupedQueryAttention", gqa(replace=[
        ("return self.w_o(merge_heads(out)), weights", "return merge_heads(out), weights")]),
        ("GroupedQueryAttention_groups", "GroupedQueryAttention_mask"), "w_o is missing"),
]

ALTERNATIVES = [
    Alternative("merge through torch.max of a stack", "online_softmax_merge", merge('''    both = torch.stack([m1, m2])
    m = both.amax(0)
    s = torch.stack([s1, s2]) * torch.exp(both - m.nan_to_num(neginf=0.0))
    return m, s.sum(0)
''')),
    Alternative("merge with the larger block's sum kept as it is", "online_softmax_merge", merge('''    first = m1 >= m2
    m = torch.where(first, m1, m2)
    low = torch.where(first, m2, m1)
    gap = torch.where(m == float("-inf"), torch.zeros_like(m), low - m)
    return m, torch.where(first, s1, s2) + torch.where(first, s2, s1) * torch.exp(gap)
''')),
    Alternative("tiled attention using online_softmax_merge", "tiled_attention", '''
def tiled_attention(q, k, v, mask=None, block=64):
    out, m, l = None, None, None
    for j in range(0, k.shape[-2], block):
        s = q @ k[..., j:j + block, :].transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            s = s.masked_fill(~mask[..., j:j + block], float("-inf"))
        bm = s.amax(-1, keepdim=True)
        p = torch.exp(s - torch.where(bm == float("-inf"), torch.zeros_like(bm), bm))
        bl, bo = p.sum(-1, keepdim=True), p @ v[..., j:j + block, :]
        if out is None:
            out, m, l = bo, bm, bl
            continue
        m_new, l = online_softmax_merge(m, l, bm, bl)
        safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        out = out * torch.exp(m - safe) + bo * torch.exp(bm - safe)
        m = m_new
    return out / torch.where(l == 0, torch.ones_like(l), l)
'''),
    Alternative("tiled attention with einsum and an additive mask", "tiled_attention", '''
def tiled_attention(q, k, v, mask=None, block=64):
    scale = q.shape[-1] ** -0.5
    m = l = acc = None
    for j in range(0, k.shape[-2], block):
        s = torch.einsum("...qd,...kd->...qk", q, k[..., j:j + block, :]) * scale
        if mask is not None:
            s = s + torch.zeros_like(s).masked_fill(~mask[..., j:j + block], float("-inf"))
        bm = s.amax(-1, keepdim=True)
        m_new = bm if m is None else torch.maximum(m, bm)
        safe = m_new.nan_to_num(neginf=0.0)
        p = (s - safe).exp()
        if m is None:
            l, acc = p.sum(-1, keepdim=True), torch.einsum("...qk,...kd->...qd", p, v[..., j:j + block, :])
        else:
            c = (m - safe).exp()
            l = l * c + p.sum(-1, keepdim=True)
            acc = acc * c + torch.einsum("...qk,...kd->...qd", p, v[..., j:j + block, :])
        m = m_new
    return torch.nan_to_num(acc / l, nan=0.0)
'''),
    Alternative("tiled attention over blocks of queries and of keys (FlashAttention-1's two loops)", "tiled_attention", '''
def tiled_attention(q, k, v, mask=None, block=64):
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    outs = []
    for i in range(0, q.shape[-2], block):
        qi = q[..., i:i + block, :]
        rows = qi.shape[-2]
        mi = None if mask is None else (mask[..., i:i + block, :] if mask.shape[-2] > 1 else mask)
        m = torch.full((*lead, rows, 1), float("-inf"), dtype=q.dtype)
        l = torch.zeros((*lead, rows, 1), dtype=q.dtype)
        acc = torch.zeros((*lead, rows, v.shape[-1]), dtype=q.dtype)
        for j in range(0, k.shape[-2], block):
            s = qi @ k[..., j:j + block, :].transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mi is not None:
                s = s.masked_fill(~mi[..., j:j + block], float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
            p = torch.exp(s - safe)
            c = torch.exp(m - safe)
            l, acc, m = l * c + p.sum(-1, keepdim=True), acc * c + p @ v[..., j:j + block, :], m_new
        outs.append(acc / torch.where(l == 0, torch.ones_like(l), l))
    return torch.cat(outs, dim=-2)
'''),
    Alternative("GQA grouping the queries instead of repeating keys", "GroupedQueryAttention", gqa(forward='''
    def forward(self, query, key, value, mask=None):
        B, T_q, _ = query.shape
        T_k, g = key.shape[1], self.n_heads // self.n_kv_heads
        q = self.w_q(query).view(B, T_q, self.n_kv_heads, g, self.d_head).permute(0, 2, 3, 1, 4)
        k = self.w_k(key).view(B, T_k, self.n_kv_heads, 1, self.d_head).permute(0, 2, 3, 1, 4)
        v = self.w_v(value).view(B, T_k, self.n_kv_heads, 1, self.d_head).permute(0, 2, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)).flatten(1, 2) / math.sqrt(self.d_head)
        if mask is not None:
            scores = scores.masked_fill(~(mask.unsqueeze(1) if mask.dim() == 3 else mask), float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        out = (self.dropout(weights).unflatten(1, (self.n_kv_heads, g)) @ v).flatten(1, 2)
        return self.w_o(out.transpose(1, 2).reshape(B, T_q, -1)), weights
''')),
    Alternative("GQA with expand and reshape", "GroupedQueryAttention", gqa(replace=[
        ("split_heads(self.w_k(key), self.n_kv_heads).repeat_interleave(g, dim=1)",
         "split_heads(self.w_k(key), self.n_kv_heads)[:, :, None].expand(-1, -1, g, -1, -1).flatten(1, 2)"),
        ("split_heads(self.w_v(value), self.n_kv_heads).repeat_interleave(g, dim=1)",
         "split_heads(self.w_v(value), self.n_kv_heads)[:, :, None].expand(-1, -1, g, -1, -1).flatten(1, 2)")])),
]

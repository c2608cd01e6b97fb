"""GroupedQueryAttention(d_model, n_heads, n_kv_heads, dropout=0.0): w_q, w_o = nn.Linear(d, d), w_k, w_v =
nn.Linear(d, n_kv_heads · d_head), all with bias; query head j uses key/value head j // (n_heads // n_kv_heads);
forward(query, key, value, mask=None) -> (out (B, T_q, d), weights (B, n_heads, T_q, T_k)), weights before
dropout; ValueError unless d_model % n_heads == 0 and n_heads % n_kv_heads == 0. With n_kv_heads == n_heads it is
notebook 05's MultiHeadAttention.
"""
import math

import torch
import torch.nn.functional as F

from lib.testing import assert_close, assert_shape, is_close

from ..common import ALWAYS_CAUSAL, linear_problem, module, raises_value_error, seeded, unpack_pair
from ..kernel import StudentError
from ..multi_head.multi_head_attention import _mask_diagnosis, _random_mask, judge_dropout

NAME = "GroupedQueryAttention"
TILED = ("query head j uses key/value head j % n_kv_heads (the kv heads repeated as a whole, torch.repeat or "
         "expand then reshape): consecutive query heads share a kv head, j // (n_heads // n_kv_heads), so repeat "
         "each kv head in place, repeat_interleave(n_heads // n_kv_heads, dim=1)")
SHAPES_HINT = ("Check the shapes step by step: w_q gives (B, T_q, d), split into (B, n_heads, T_q, d_head); w_k and "
               "w_v give (B, T_k, n_kv_heads · d_head), split into (B, n_kv_heads, T_k, d_head), then repeated to "
               "n_heads heads; attention (B, n_heads, T_q, d_head), merged to (B, T_q, d), then w_o")


def build(k, d, h, kv, dropout=0.0):
    """The student's layer (seeded), with its four projections checked."""
    what = f"{NAME}({d}, {h}, {kv}" + (f", dropout={dropout})" if dropout else ")")
    try:
        layer = k.call(what, k.student(NAME), d, h, kv, dropout=dropout, seed=0)
    except StudentError as e:
        if not {"NotImplementedError", "ForbiddenCall"} & set(e.types) and "shape" in e.raw:
            raise AssertionError(f"{e}. d_head = d_model / n_heads, the size of every head, query or key") from None
        raise AssertionError(str(e)) from None
    info = module(k, layer, what)
    if info.isa("lib.grouped_query.GroupedQueryAttention"):
        raise AssertionError(f"{what}: using the course's reference '{NAME}' from lib is not allowed in this exercise: "
                             f"write it yourself")
    d_head = d // h
    for name, out in (("w_q", d), ("w_k", kv * d_head), ("w_v", kv * d_head), ("w_o", d)):
        problem = linear_problem(info, name, d, out, what, bias=True)
        if problem and name in ("w_k", "w_v"):
            lin = info.children.get(name)
            got = lin.attrs.get("out_features") if lin is not None else None
            if got == d and kv != h:
                problem += (f": that is a key for every one of the {h} query heads; the point of grouped-query "
                            f"attention is only n_kv_heads = {kv} of them, n_kv_heads · d_head = {kv} · {d_head}")
            elif got == d // kv != kv * d_head:
                problem += (f": d_head is d_model / n_heads = {d_head} (the query heads' size, which keys must match), "
                            f"not d_model / n_kv_heads")
        if problem:
            raise AssertionError(problem)
    return layer


def randomize(k, layer, d, h, kv, g, dtype=torch.float32):
    """Random weights and biases copied into the layer: {"w_q": (weight, bias), ...}."""
    params, values = {}, {}
    for name, out in (("w_q", d), ("w_k", kv * (d // h)), ("w_v", kv * (d // h)), ("w_o", d)):
        w = torch.randn(out, d, generator=g, dtype=dtype) / math.sqrt(d)
        b = torch.randn(out, generator=g, dtype=dtype) * 0.5
        params[name] = (w, b)
        values[f"{name}.weight"], values[f"{name}.bias"] = w, b
    problems = k.load(layer, values)
    if problems:
        raise AssertionError(f"copying weights into {NAME}: {problems[0]}")
    return params


def expected(params, h, kv, query, key, value, mask=None, group="interleave", scale_by=None, w_o=True,
             value_from_key=False, mask_heads=True):
    """(out, weights) of grouped-query attention written out, or with one thing changed (for the hints); None if
    that cannot run."""
    try:
        b, t_q, d = query.shape
        d_head = d // h

        def split(x, n):
            return x.reshape(b, -1, n, d_head).transpose(1, 2)

        def repeat(x):
            return x.repeat_interleave(h // kv, 1) if group == "interleave" else x.repeat(1, h // kv, 1, 1)

        q = split(F.linear(query, *params["w_q"]), h)
        k_ = repeat(split(F.linear(key, *params["w_k"]), kv))
        v = repeat(split(F.linear(key if value_from_key else value, *params["w_v"]), kv))
        scores = q @ k_.transpose(-2, -1) / math.sqrt(scale_by or d_head)
        if mask is not None:
            m = mask.unsqueeze(1) if (mask.dim() == 3 and mask_heads) else mask
            scores = scores.masked_fill(~m, float("-inf"))
        w = torch.softmax(scores, -1)
        out = (w @ v).transpose(1, 2).reshape(b, t_q, d)
        return (F.linear(out, *params["w_o"]) if w_o else out), w
    except RuntimeError:
        return None


def _hints(params, d, h, kv, query, key, value, mask):
    found = {}
    for message, kwargs in [
        (TILED, {"group": "tile"}),
        ("the scores are divided by sqrt(d_model); each head's scores must be divided by sqrt(d_head), "
         "d_head = d_model / n_heads", {"scale_by": d}),
        ("the scores are divided by sqrt(n_kv_heads · d_head), the width of all the key heads together; divide by "
         "sqrt(d_head), d_head = d_model / n_heads", {"scale_by": kv * (d // h)}),
        ("the scores are not scaled: divide each head's scores by sqrt(d_head), d_head = d_model / n_heads",
         {"scale_by": 1}),
        ("the output projection w_o is missing: apply self.w_o to the merged heads", {"w_o": False}),
        ("the values are projected from the `key` argument: project them from `value`, w_v(value)",
         {"value_from_key": True}),
        ("a 3-D mask was broadcast against the scores (B, h, T_q, T_k) without a head axis, so it lined up "
         "the batch with the heads: add one with mask.unsqueeze(1)", {"mask_heads": False}),
    ]:
        if mask is None and "mask" in message or message is TILED and kv in (1, h):
            continue
        got = expected(params, h, kv, query, key, value, mask, **kwargs)
        if got is not None:
            found[message] = got
    t_q, t_k = query.shape[-2], key.shape[-2]
    if mask is None and t_q == t_k:
        found[ALWAYS_CAUSAL] = expected(params, h, kv, query, key, value, torch.ones(t_q, t_k, dtype=torch.bool).tril())
    return found


def run(k, layer, what, query, key, value, mask=None, seed=None):
    try:
        result = k.call(what, layer, query, key, value, mask=mask, seed=seed)
    except StudentError as e:
        text = str(e)
        if not {"NotImplementedError", "ForbiddenCall"} & set(e.types):
            if mask is not None and any(w in e.raw for w in ("must match the size", "broadcast")):
                text += (". A 3-D mask (B, T_q, T_k) or (B, 1, T_k) needs a head axis before it meets the scores "
                         "(B, n_heads, T_q, T_k): mask.unsqueeze(1); a 2-D or 4-D one broadcasts as it is")
            elif any(w in e.raw for w in ("shape", "size", "dimension", "broadcast")):
                text += f". {SHAPES_HINT}"
        raise AssertionError(text) from None
    return unpack_pair(result, what)


def compare(out, w, params, h, kv, query, key, value, mask, what, atol=1e-5):
    b, t_q, d = query.shape
    t_k = key.shape[1]
    if torch.is_tensor(w) and w.dim() == 4 and w.shape[1] == kv != h:
        raise AssertionError(f"weights of {what} have shape {tuple(w.shape)}: one map per key/value head. Return "
                             f"one per query head, (B, n_heads, T_q, T_k) = {(b, h, t_q, t_k)}: each query head "
                             f"has its own queries, so its own weights, even where it shares keys")
    assert_shape(w, (b, h, t_q, t_k), f"weights of {what}")
    assert_shape(out, (b, t_q, d), f"output of {what}")
    if mask is not None:
        _mask_diagnosis(w, mask, what)
    out_ref, w_ref = expected(params, h, kv, query, key, value, mask)
    if all(a.dtype == e.dtype and is_close(a, e, atol) for a, e in ((w, w_ref), (out, out_ref))):
        return
    found = _hints(params, d, h, kv, query, key, value, mask)
    assert_close(w, w_ref, f"weights of {what}", atol=atol, hints={m: v[1] for m, v in found.items()})
    assert_close(out, out_ref, f"output of {what}", atol=atol, hints={m: v[0] for m, v in found.items()})


# --- graded cells ---------------------------------------------------------------------------------

def GroupedQueryAttention_module(k):
    """w_q and w_o map d -> d, w_k and w_v d -> n_kv_heads · d_head, all nn.Linear with bias, for n_kv_heads =
    n_heads, a divisor and 1; ValueError when n_heads % n_kv_heads != 0 or d_model % n_heads != 0."""
    for d, h, kv in [(16, 4, 2), (16, 4, 4), (12, 6, 3), (16, 4, 1)]:
        build(k, d, h, kv)
    for d, h, kv, why in [(16, 4, 3, "4 query heads cannot be shared evenly among 3 key/value heads"),
                          (10, 4, 2, "10 features cannot be split evenly into 4 heads"),
                          (16, 2, 4, "2 query heads cannot share 4 key/value heads")]:
        raises_value_error(k, f"{NAME}({d}, {h}, {kv})", k.student(NAME), d, h, kv, seed=0,
                           why=f"{why}. Check it in __init__ and raise ValueError")


def GroupedQueryAttention_groups(k):
    """Equals grouped-query attention written out with the same weights (query head j with kv head
    j // (n_heads // n_kv_heads)): n_kv_heads = 2 of 4 in self- and cross-attention (T_q != T_k, key != value),
    n_kv_heads = n_heads (multi-head attention), 2 of 6, 1 (multi-query attention), and float64."""
    g = seeded(1121)
    cases = [  # d, h, kv, b, t_q, t_k, self-attention, dtype
        (16, 4, 2, 2, 5, 5, True, torch.float32),
        (16, 4, 2, 2, 3, 6, False, torch.float32),
        (16, 4, 4, 2, 4, 4, True, torch.float32),
        (24, 6, 2, 1, 4, 4, True, torch.float32),
        (16, 4, 1, 2, 3, 5, False, torch.float32),
        (16, 4, 2, 2, 3, 5, False, torch.float64),
    ]
    for d, h, kv, b, t_q, t_k, self_attn, dtype in cases:
        layer = build(k, d, h, kv)
        if dtype != torch.float32:
            k.call(f"{NAME}({d}, {h}, {kv}).to({dtype})", layer.attr("to"), dtype)
        params = randomize(k, layer, d, h, kv, g, dtype)
        query = torch.randn(b, t_q, d, generator=g, dtype=dtype)
        key = value = query
        if not self_attn:
            key, value = (torch.randn(b, t_k, d, generator=g, dtype=dtype) for _ in range(2))
        kind = "self-attention" if self_attn else f"cross-attention, key != value, T_q={t_q}, T_k={t_k}"
        what = f"{NAME}({d}, {h}, {kv}) in {dtype}, {kind}"
        out, w = run(k, layer, what, query, key, value)
        compare(out, w, params, h, kv, query, key, value, None, what, atol=1e-9 if dtype == torch.float64 else 1e-5)


def GroupedQueryAttention_mask(k):
    """Every mask shape of the course broadcasts over the query heads: (T_q, T_k), (B, 1, T_k) with T_q != T_k,
    (B, T_q, T_k), (B, 1, T_q, T_k), (B, n_heads, T_q, T_k)."""
    g = seeded(1122)
    d, h, kv = 16, 4, 2
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    padding = (torch.arange(5)[None, :] < torch.tensor([5, 3])[:, None])[:, None, :]
    cases = [
        ("a causal mask (T, T)", 2, 5, 5, causal),
        ("a padding mask (B, 1, T_k) in cross-attention, T_q=3, T_k=5", 2, 3, 5, padding),
        ("a mask (B, T_q, T_k) with T_q=3, T_k=5", 2, 3, 5, _random_mask(g, (2, 3, 5))),
        ("a mask (B, T_q, T_k) with B == n_heads", 4, 5, 5, _random_mask(g, (4, 5, 5))),
        ("a mask (B, 1, T_q, T_k)", 2, 3, 5, _random_mask(g, (2, 1, 3, 5))),
        ("a different mask per query head (B, n_heads, T_q, T_k)", 2, 3, 5, _random_mask(g, (2, h, 3, 5))),
    ]
    layer = build(k, d, h, kv)
    params = randomize(k, layer, d, h, kv, g)
    for name, b, t_q, t_k, mask in cases:
        query = torch.randn(b, t_q, d, generator=g)
        key = value = query if t_q == t_k else torch.randn(b, t_k, d, generator=g)
        what = f"{NAME}({d}, {h}, {kv})(query, key, value, mask) with {name}"
        out, w = run(k, layer, what, query, key, value, mask)
        compare(out, w, params, h, kv, query, key, value, mask, what)


def GroupedQueryAttention_dropout(k):
    """Dropout acts on the attention weights in training mode only; eval mode is deterministic. Every token is
    the same vector, so any weights average the values to the same output unless dropout changes their sums."""
    d, h, kv, b, t = 16, 4, 2, 4, 16
    d_head = d // h
    what = f"{NAME}({d}, {h}, {kv}, dropout=0.5)"
    layer = build(k, d, h, kv, dropout=0.5)
    randomize(k, layer, d, h, kv, seeded(1123))
    eye = torch.eye(d)
    problems = k.load(layer, {"w_v.weight": eye[:d_head].repeat(kv, 1), "w_v.bias": torch.zeros(kv * d_head),
                              "w_o.weight": eye, "w_o.bias": torch.zeros(d)})
    if problems:
        raise AssertionError(f"copying weights into {what}: {problems[0]}")
    c = torch.arange(1.0, d + 1)
    x = c.expand(b, t, d).clone()
    y = c[:d_head].repeat(h).expand(b, t, d)  # every kv head's values are c[:d_head], whichever heads share them
    judge_dropout(k, layer, what, y, h, d_head,
                  lambda mode, seed: run(k, layer, f"{what} in {mode} mode", x, x, x, seed=seed)[0])

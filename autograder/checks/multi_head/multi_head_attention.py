"""MultiHeadAttention(d_model, n_heads, dropout=0.0, bias=True): w_q, w_k, w_v, w_o = nn.Linear(d, d);
forward(query, key, value, mask=None) -> (out (B, T_q, d), weights (B, h, T_q, T_k)), like nn.MultiheadAttention."""
import math

import torch
import torch.nn.functional as F
from torch import nn

from lib.testing import assert_close, assert_shape, is_close

from ..common import ALWAYS_CAUSAL, INVERTED_MASK, module, raises_value_error, seeded, unpack_pair
from ..kernel import StudentError

PROJECTIONS = ("w_q", "w_k", "w_v", "w_o")
SHAPES_HINT = ("Check the shapes step by step: the projections give (B, T, d), split_heads (B, h, T, d/h), "
               "attention (B, h, T_q, d/h), merge_heads (B, T_q, d), and only then w_o")


def earlier(k):
    """The trusted split_heads and merge_heads, so that this exercise is graded on its own."""
    return {name: k.reference(f"lib.multi_head.{name}") for name in ("split_heads", "merge_heads")}


def _builtin(info) -> bool:
    """Whether the module or one of its submodules is an nn.MultiheadAttention."""
    return info.isa("torch.nn.modules.activation.MultiheadAttention") or any(
        _builtin(child) for child in info.children.values())


def build(k, d, h, bias=True, dropout=0.0):
    """The student's layer (seeded), with its four projections checked."""
    what = f"MultiHeadAttention({d}, {h}, dropout={dropout}, bias={bias})"
    layer = k.call(what, k.student("MultiHeadAttention"), d, h, dropout=dropout, bias=bias, inject=earlier(k),
                   seed=0)
    info = module(k, layer, what)
    if info.isa("lib.multi_head.MultiHeadAttention"):
        raise AssertionError(f"{what}: using the course's reference 'MultiHeadAttention' from lib is not allowed "
                             f"in this exercise: write it yourself")
    for name in PROJECTIONS:
        lin = info.children.get(name)
        if lin is None or not lin.isa("torch.nn.modules.linear.Linear"):
            raise AssertionError(f"{what}.{name} should be an nn.Linear, got {'nothing' if lin is None else lin.name}")
        d_in, d_out = lin.attrs.get("in_features"), lin.attrs.get("out_features")
        if (d_in, d_out) != (d, d):
            raise AssertionError(f"{what}.{name} maps {d_in} -> {d_out} features, expected {d} -> {d} "
                                 f"(all heads together: h heads of d/h = d)")
        if bias and "bias" not in lin.params:
            raise AssertionError(f"{what}.{name} has no bias although bias=True: pass bias=bias to nn.Linear")
        if not bias and "bias" in lin.params:
            raise AssertionError(f"{what}.{name} has a bias although bias=False: pass bias=bias to nn.Linear")
    if _builtin(info):
        raise AssertionError(f"{what} contains an nn.MultiheadAttention: this exercise asks you to build "
                             f"it yourself, so PyTorch's built-in is not allowed here")
    return layer


def randomize(k, layer, d, g, bias, dtype=torch.float32):
    """Random weights (and biases) copied into the layer's projections: {"w_q": (weight, bias), ...}."""
    params, values = {}, {}
    for name in PROJECTIONS:
        w = torch.randn(d, d, generator=g, dtype=dtype) / math.sqrt(d)
        b = torch.randn(d, generator=g, dtype=dtype) * 0.5 if bias else None
        params[name] = (w, b)
        values[f"{name}.weight"] = w
        if b is not None:
            values[f"{name}.bias"] = b
    problems = k.load(layer, values)
    if problems:
        raise AssertionError(f"copying weights into MultiHeadAttention: {problems[0]}")
    return params


def _blocked(mask, b, h, t_q, t_k):
    """Our mask (True = may attend) as nn.MultiheadAttention's attn_mask (True = blocked)."""
    if mask is None:
        return None
    if mask.dim() == 2:
        return ~mask
    if mask.dim() == 3:
        return (~mask.expand(b, t_q, t_k)).repeat_interleave(h, 0)
    return (~mask.expand(b, h, t_q, t_k)).reshape(b * h, t_q, t_k)


def expected(params, d, h, query, key, value, mask=None):
    """(out, weights) of nn.MultiheadAttention(batch_first=True) with the same weights."""
    b, t_q, t_k = query.shape[0], query.shape[1], key.shape[1]
    bias = params["w_q"][1] is not None
    with torch.random.fork_rng(devices=[]):  # its own initialisation is overwritten: leave the global RNG alone
        theirs = nn.MultiheadAttention(d, h, bias=bias, batch_first=True, dtype=query.dtype)
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([params[n][0] for n in ("w_q", "w_k", "w_v")]))
        theirs.out_proj.weight.copy_(params["w_o"][0])
        if bias:
            theirs.in_proj_bias.copy_(torch.cat([params[n][1] for n in ("w_q", "w_k", "w_v")]))
            theirs.out_proj.bias.copy_(params["w_o"][1])
        return theirs(query, key, value, attn_mask=_blocked(mask, b, h, t_q, t_k),
                      need_weights=True, average_attn_weights=False)


def _variant(params, h, query, key, value, mask=None, scale_by=None, w_o=True, mask_heads=True,
             value_from_key=False, qk_norm=False):
    """Multi-head attention written out, with one thing changed (for the hints). None if it cannot run."""
    try:
        def lin(name, x):
            return F.linear(x, *params[name])

        b, t_q, d = query.shape
        dk = d // h

        def split(t):
            return t.reshape(b, -1, h, dk).transpose(1, 2)

        q, k = split(lin("w_q", query)), split(lin("w_k", key))
        if qk_norm:
            q, k = F.layer_norm(q, (dk,)), F.layer_norm(k, (dk,))
        v = split(lin("w_v", key if value_from_key else value))
        scores = q @ k.transpose(-2, -1) / math.sqrt(scale_by or dk)
        if mask is not None:
            m = mask.unsqueeze(1) if (mask.dim() == 3 and mask_heads) else mask
            scores = scores.masked_fill(~m, float("-inf"))
        w = torch.softmax(scores, -1)
        out = (w @ v).transpose(1, 2).reshape(b, t_q, d)
        return (lin("w_o", out) if w_o else out), w
    except RuntimeError:
        return None


def _hints(params, d, h, query, key, value, mask):
    hints = {}
    for message, kwargs in [
        ("the scores are divided by sqrt(d_model); each head's scores must be divided by sqrt(d_k), "
         "d_k = d_model / n_heads, the size of one head", {"scale_by": d}),
        ("the scores are not scaled (T5's attention leaves them unscaled): divide each head's scores by "
         "sqrt(d_k), d_k = d_model / n_heads", {"scale_by": 1}),
        ("the output projection w_o is missing: apply self.w_o to the merged heads", {"w_o": False}),
        ("each head's queries and keys are normalized (a LayerNorm over d_k, the qk-layernorm of Persimmon, OLMo "
         "and ViT-22B) before the scores: this exercise's attention uses the projected queries and keys as they are",
         {"qk_norm": True}),
        ("the values are projected from the `key` argument: project them from `value`, w_v(value)",
         {"value_from_key": True}),
        ("a 3-D mask was broadcast against the scores (B, h, T_q, T_k) without a head axis, so it lined up "
         "the batch with the heads: add one with mask.unsqueeze(1)", {"mask_heads": False}),
    ]:
        if mask is None and "mask" in message:
            continue
        got = _variant(params, h, query, key, value, mask, **kwargs)
        if got is not None:
            hints[message] = got
    plain = _variant(params, h, query, key, value, mask)
    if plain is not None:  # the encoder layer's residual (and LayerNorm) written into the attention
        out, w = plain
        hints["the query is added back to the output and the sum normalized (a residual connection and a "
              "LayerNorm inside the attention): return w_o(merged heads) alone; the residual and the LayerNorm "
              "belong to the encoder layer (notebook 06)"] = (F.layer_norm(query + out, (d,)), w)
        hints["the query is added back to the output (a residual connection inside the attention): return "
              "w_o(merged heads) alone; the residual belongs to the encoder layer (notebook 06)"] = (query + out, w)
    t_q, t_k = query.shape[-2], key.shape[-2]
    if mask is None and t_q == t_k:
        hints[ALWAYS_CAUSAL] = expected(params, d, h, query, key, value, torch.ones(t_q, t_k, dtype=torch.bool).tril())
    return hints


def run(k, layer, what, query, key, value, mask, mask_hint="", seed=None):
    """The student's layer on (query, key, value, mask). A crash gets a hint: ``mask_hint`` when a mask did
    not broadcast, the steps' shapes for another shape error, the dtype for a dtype error."""
    try:
        result = k.call(what, layer, query, key, value, mask=mask, inject=earlier(k), seed=seed)
    except StudentError as e:
        text = str(e)
        if not {"NotImplementedError", "ForbiddenCall"} & set(e.types):
            if mask_hint and any(w in e.raw for w in ("must match the size", "broadcast")):
                text = f"{text}. {mask_hint}"
            elif any(w in e.raw for w in ("shape", "size", "dimension", "broadcast")):
                text = f"{text}. {SHAPES_HINT}"
            elif "dtype" in e.raw:
                text = f"{text}. Keep the inputs' dtype: create no float32 tensors inside forward"
        raise AssertionError(text) from None
    return unpack_pair(result, what)


def _keys_from_the_query(w, what, b, h, t_q, t_k):
    """With T_q != T_k, weights with T_q columns mean the keys were projected from the query."""
    if torch.is_tensor(w) and w.dim() == 4 and w.shape[-1] == t_q != t_k:
        raise AssertionError(f"weights of {what} have shape {tuple(w.shape)}, expected {(b, h, t_q, t_k)}: "
                             f"the keys (and values) must be projected from the `key` (and `value`) arguments, "
                             f"not from `query`")


def compare(out, w, reference, hints, what, b, h, t_q, t_k, d, atol=1e-5):
    """Weights and output equal the reference's; ``hints()`` (the usual mistakes, computed only for a wrong
    answer) name the mistake."""
    out_ref, w_ref = reference
    if torch.is_tensor(w) and tuple(w.shape) == (b, t_q, t_k) and h > 1:
        raise AssertionError(f"weights of {what} have shape {tuple(w.shape)}: they are averaged over the heads. "
                             f"Return the weights of every head, shape (B, h, T_q, T_k) = {(b, h, t_q, t_k)}")
    _keys_from_the_query(w, what, b, h, t_q, t_k)
    assert_shape(w, (b, h, t_q, t_k), f"weights of {what}")
    assert_shape(out, (b, t_q, d), f"output of {what}")
    if all(a.dtype == e.dtype and is_close(a, e, atol) for a, e in ((w, w_ref), (out, out_ref))):
        return
    hints = hints()
    assert_close(w, w_ref, f"weights of {what}", atol=atol, hints={m: v[1] for m, v in hints.items()})
    assert_close(out, out_ref, f"output of {what}", atol=atol, hints={m: v[0] for m, v in hints.items()})


# --- graded cells ---------------------------------------------------------------------------------

def MultiHeadAttention_module(k):
    """Four nn.Linear(d, d) projections with or without bias; ValueError when d_model % n_heads != 0."""
    for d, h, bias in [(16, 4, True), (12, 3, False), (8, 1, True), (6, 6, False)]:
        build(k, d, h, bias=bias)
    for d, h in [(10, 3), (16, 5)]:
        raises_value_error(k, f"MultiHeadAttention({d}, {h})", k.student("MultiHeadAttention"), d, h,
                           inject=earlier(k), seed=0, why=f"{d} features cannot be split evenly into {h} heads. "
                           f"Check d_model % n_heads in __init__ and raise ValueError")


def MultiHeadAttention_pytorch(k):
    """Equals nn.MultiheadAttention(batch_first=True) with the same weights: self- and cross-attention
    (T_q != T_k, key != value), with and without bias, one head, d/h = 1, and float64."""
    g = seeded(55)
    cases = [  # d, h, bias, b, t_q, t_k, self-attention, dtype
        (16, 4, True, 2, 5, 5, True, torch.float32),
        (12, 3, False, 2, 3, 6, False, torch.float32),
        (8, 1, True, 1, 4, 3, False, torch.float32),
        (6, 6, True, 2, 4, 4, True, torch.float32),
        (16, 2, False, 3, 2, 5, False, torch.float32),
        (16, 4, True, 2, 3, 5, False, torch.float64),
    ]
    for d, h, bias, b, t_q, t_k, self_attn, dtype in cases:
        layer = build(k, d, h, bias=bias)
        if dtype != torch.float32:
            k.call(f"MultiHeadAttention({d}, {h}).to({dtype})", layer.attr("to"), dtype)
        params = randomize(k, layer, d, g, bias, dtype)
        query = torch.randn(b, t_q, d, generator=g, dtype=dtype)
        if self_attn:
            key = value = query
        else:
            key = torch.randn(b, t_k, d, generator=g, dtype=dtype)
            value = torch.randn(b, t_k, d, generator=g, dtype=dtype)
        kind = "self-attention" if self_attn else f"cross-attention, key != value, T_q={t_q}, T_k={t_k}"
        what = f"MultiHeadAttention({d}, {h}, bias={bias}) in {dtype}, {kind}"
        out, w = run(k, layer, what, query, key, value, None)
        compare(out, w, expected(params, d, h, query, key, value),
                lambda: _hints(params, d, h, query, key, value, None),
                what, b, h, t_q, t_k, d, atol=1e-9 if dtype == torch.float64 else 1e-5)


def _random_mask(g, shape):
    m = torch.rand(shape, generator=g) < 0.6
    m[..., 0] = True  # every query may attend at least one key
    return m[..., torch.randperm(shape[-1], generator=g)]


def _mask_diagnosis(w, mask, what):
    if not torch.is_tensor(w) or w.dim() != 4:
        return
    try:
        allowed = (mask.unsqueeze(1) if mask.dim() == 3 else mask).expand(w.shape)
    except RuntimeError:
        return
    leak = (w.nan_to_num(1.0).abs() * (~allowed)).amax().item()
    blocked_get_all = (w.nan_to_num(0.0).abs() * allowed).amax().item() < 1e-6
    if leak > 1e-6 and (blocked_get_all or (w.nan_to_num(0.0) * allowed).sum() < (w.nan_to_num(0.0) * ~allowed).sum()):
        raise AssertionError(
            f"{what}: the weights are non-zero where the mask is False: {INVERTED_MASK}. Set the scores where "
            f"the mask is False (~mask) to -inf")


def MultiHeadAttention_mask(k):
    """Every mask shape of the course broadcasts over the heads and matches nn.MultiheadAttention
    (given ~mask): (T_q, T_k), (B, 1, T_k) (also with T_q != T_k), (B, T_q, T_k), (B, 1, T_q, T_k),
    (B, h, T_q, T_k)."""
    g = seeded(56)
    d, h = 16, 4
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    padding = (torch.arange(5)[None, :] < torch.tensor([5, 3])[:, None])[:, None, :]  # (2, 1, 5)
    cases = [  # name, b, t_q, t_k, mask
        ("a causal mask (T, T)", 2, 5, 5, causal),
        ("a padding mask (B, 1, T_k)", 2, 5, 5, padding),
        ("a padding mask (B, 1, T_k) in cross-attention, T_q=3, T_k=5", 2, 3, 5, padding),
        ("causal & padding, (B, T, T)", 2, 5, 5, causal & padding),
        ("a cross-attention mask (B, T_q, T_k) with T_q=3, T_k=5", 2, 3, 5, _random_mask(g, (2, 3, 5))),
        ("a mask (B, T_q, T_k) with B == n_heads", 4, 5, 5, _random_mask(g, (4, 5, 5))),
        ("a mask (B, 1, T_q, T_k)", 2, 3, 5, _random_mask(g, (2, 1, 3, 5))),
        ("a different mask per head (B, h, T_q, T_k)", 2, 3, 5, _random_mask(g, (2, h, 3, 5))),
    ]
    layer = build(k, d, h)
    params = randomize(k, layer, d, g, True)
    for name, b, t_q, t_k, mask in cases:
        query = torch.randn(b, t_q, d, generator=g)
        key = value = query if t_q == t_k else torch.randn(b, t_k, d, generator=g)
        what = f"MultiHeadAttention({d}, {h})(query, key, value, mask) with {name}"
        if mask.dim() == 3:
            hint = ("A 3-D mask (B, T_q, T_k) or (B, 1, T_k) needs a head axis before it meets the scores "
                    "(B, h, T_q, T_k): mask.unsqueeze(1)")
        elif mask.dim() == 4:
            hint = ("A 4-D mask (B, h or 1, T_q, T_k) already has its head axis: add one (unsqueeze(1)) only to "
                    "3-D masks")
        else:
            hint = "A 2-D mask (T_q, T_k) broadcasts against (B, h, T_q, T_k) as it is"
        if t_q != t_k:  # first without the mask: keys taken from the query would pass for a mask that fails
            _, w = run(k, layer, what.replace(" mask) with ", ") without a mask, shapes as ", 1), query, key, value, None)
            _keys_from_the_query(w, what, b, h, t_q, t_k)
        out, w = run(k, layer, what, query, key, value, mask, mask_hint=hint)
        if torch.is_tensor(w) and tuple(w.shape) != (b, h, t_q, t_k) and tuple(w.shape) != (b, t_q, t_k):
            raise AssertionError(f"weights of {what} have shape {tuple(w.shape)}, expected {(b, h, t_q, t_k)}. {hint}")
        _mask_diagnosis(w, mask, what)
        compare(out, w, expected(params, d, h, query, key, value, mask),
                lambda: _hints(params, d, h, query, key, value, mask), what, b, h, t_q, t_k, d)


PRODUCTS = frozenset({"mm", "bmm", "addmm", "baddbmm", "addbmm", "matmul", "mv", "addmv", "dot", "vdot",
                      "_softmax", "_safe_softmax", "exp", "_log_softmax"})


def MultiHeadAttention_vectorized(k):
    """No Python loop over the heads: the number of matrix products and softmax/exp calls that reach PyTorch's
    dispatcher does not grow with n_heads."""
    g = seeded(57)
    d, b, t = 16, 2, 5
    x = torch.randn(b, t, d, generator=g)
    counts = {}
    for h in (2, 8):  # no mask, and only the count is compared: the other cells test the values
        layer = build(k, d, h)
        what = f"MultiHeadAttention({d}, {h})(x, x, x)"
        trace = k.trace(what, layer, x, x, x, inject=earlier(k), watch=True)
        out, _ = unpack_pair(trace.value, what)
        assert_shape(out, (b, t, d), f"output of {what}")
        counts[h] = sum(1 for op, _, _ in trace.ops if op in PRODUCTS)
    if counts[8] > counts[2]:
        raise AssertionError(
            f"MultiHeadAttention makes {counts[2]} matrix products and softmax/exp calls with 2 heads but "
            f"{counts[8]} with 8 heads (same d_model): it seems to loop over the heads in Python. Compute all "
            f"heads at once: split_heads gives (B, h, T, d/h), and one batched matmul handles every head")


def MultiHeadAttention_dropout(k):
    """Dropout acts on the attention weights in training mode only; eval mode is deterministic. (The weights the
    layer returns in training mode are not compared: before or after dropout, both are in use.)"""
    g = seeded(58)
    d, h, b, t = 16, 4, 4, 16
    dk = d // h
    what = f"MultiHeadAttention({d}, {h}, dropout=0.5)"
    layer = build(k, d, h, dropout=0.5)
    randomize(k, layer, d, g, True)
    identity = {f"{name}.{p}": torch.eye(d) if p == "weight" else torch.zeros(d)
                for name in ("w_v", "w_o") for p in ("weight", "bias")}
    problems = k.load(layer, identity)  # values copy the input, w_o copies the merged heads
    if problems:
        raise AssertionError(f"copying weights into {what}: {problems[0]}")
    c = torch.arange(1.0, d + 1)  # every token is the vector c, so every key has the value c and any weights
    x = c.expand(b, t, d).clone()  # average to c: the output is c, unless dropout changes the weights' sums
    judge_dropout(k, layer, what, x, h, dk,
                  lambda mode, seed: run(k, layer, f"{what} in {mode} mode", x, x, x, None, seed=seed)[0])


def judge_dropout(k, layer, what, expected, h, d_head, run_one):
    """Dropout on the attention weights, in training mode only, of a layer whose every token is one vector (so
    that any weights average the values to ``expected``, unless dropout changes their sums). ``run_one(mode,
    seed)`` gives the layer's output."""
    b, t, d = expected.shape
    k.call(f"{what}.eval()", layer.attr("eval"))
    outs = [run_one("eval", seed) for seed in (0, 1)]
    for out in outs:
        assert_shape(out, (b, t, d), f"output of {what} in eval mode")
    if not torch.equal(outs[0], outs[1]) or not is_close(outs[0], expected):
        raise AssertionError(
            f"{what} in eval mode (after .eval()) is not deterministic or changes the output: dropout must be "
            f"off in eval mode. Use an nn.Dropout submodule (which follows .train()/.eval()), or "
            f"F.dropout(..., training=self.training)")
    k.call(f"{what}.train()", layer.attr("train"))
    out = run_one("training", 0)
    assert_shape(out, (b, t, d), f"output of {what} in training mode")
    if is_close(out, expected):
        raise AssertionError(f"{what} in training mode gives the same output as without dropout: apply dropout "
                             f"(p={0.5}) to the attention weights while training")
    ratio = (out / expected).reshape(b, t, h, d_head)  # per head, dropout on the weights scales the whole value
    if not torch.allclose(ratio, ratio[..., :1].expand_as(ratio), atol=1e-4):
        raise AssertionError(
            f"{what} in training mode: dropout is not applied to the attention weights (features within one head "
            f"were dropped separately, so it acted on the values or the output). Apply it to the weights "
            f"(B, h, T_q, T_k), then multiply by the values")
    mean = ratio[..., 0].mean().item()
    if not 0.75 < mean < 1.25:
        raise AssertionError(f"{what} in training mode: the kept weights are not rescaled by 1/(1-p) "
                             f"(mean scale {mean:.2f} instead of about 1): use nn.Dropout or F.dropout")

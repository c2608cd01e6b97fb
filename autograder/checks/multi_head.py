"""Hidden checks of notebook 05 (multi-head attention).

Each function is one graded test cell. References come from PyTorch's
``nn.MultiheadAttention`` (computed outside the student's block, where
built-ins are allowed) or from plain tensor code here; each common mistake
has a hint that names it.

While a graded block runs, PyTorch's fused attention operators are banned at
the dispatcher ("scaled_dot_product", "multi_head"). ``nn.MultiheadAttention``
does not always reach one of them (in training mode it runs on bmm and
softmax), so its ``forward`` and ``F.multi_head_attention_forward`` are
switched off as well, and the checks look for it among the submodules.
"""
import contextlib
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from lib import multi_head as ref
from lib.guard import ForbiddenCall
from lib.testing import assert_close, assert_shape, is_close

from .common import call, seeded, student_code, unpack_pair

BANNED = ("scaled_dot_product", "multi_head")
REFERENCES = ("split_heads", "merge_heads", "MultiHeadAttention")
EARLIER = {"split_heads": ref.split_heads, "merge_heads": ref.merge_heads}
NOT_CONTIGUOUS_HINT = ("after a transpose the tensor is no longer contiguous in memory, so .view cannot "
                       "regroup its last dims: use .reshape(...), or .contiguous().view(...)")
LEADING_HINT = ("count dims from the end so that any leading dims work: x.shape[:-1], "
                "transpose(-3, -2), unflatten(-1, ...) / flatten(-2)")


def _builtin_refused(*args, **kwargs):
    raise ForbiddenCall("this exercise asks you to build it yourself: calling PyTorch's built-in "
                        "'nn.MultiheadAttention' is not allowed here")


@contextlib.contextmanager
def _no_builtin_mha():
    """Switch off nn.MultiheadAttention and F.multi_head_attention_forward for the block."""
    saved = nn.MultiheadAttention.forward, F.multi_head_attention_forward
    nn.MultiheadAttention.forward = _builtin_refused
    F.multi_head_attention_forward = _builtin_refused
    try:
        yield
    finally:
        nn.MultiheadAttention.forward, F.multi_head_attention_forward = saved


@contextlib.contextmanager
def _graded(namespace=None, inject=None):
    with student_code(namespace, inject, ops=BANNED, references=REFERENCES), _no_builtin_mha():
        yield


def _call_view(what, fn, *args, hint=""):
    """call(), adding the contiguity hint when .view failed on a transposed tensor."""
    try:
        return call(what, fn, *args, hint=hint)
    except AssertionError as e:
        text = str(e)
        if "view size is not compatible" in text or "contiguous" in text:
            raise AssertionError(f"{text.split('. Use .reshape')[0]}: {NOT_CONTIGUOUS_HINT}") from None
        raise


# --- split_heads -----------------------------------------------------------

def _split_expected(x, h):
    return x.reshape(*x.shape[:-1], h, x.shape[-1] // h).transpose(-3, -2)


def _split_hints(x, h):
    *lead, t, d = x.shape
    dk = d // h
    hints = {}
    if h > 1 and t > 1:
        hints["you cut x into (B, h, T, d/h) with a single view/reshape, without a transpose. That slices the "
              "flat memory of each sequence into h chunks, so one 'head' mixes features of different positions. "
              "Reshape to (B, T, h, d/h) first, then transpose(1, 2)"] = x.reshape(*lead, h, t, dk)
        hints["head i got every h-th feature (i, i+h, i+2h, ...) instead of the block i*d/h ... (i+1)*d/h - 1: "
              "reshape the last dim to (h, d/h), not to (d/h, h)"] = \
            x.reshape(*lead, t, dk, h).transpose(-1, -2).transpose(-3, -2)
        hints["the heads are not moved in front of the positions: after reshaping to (B, T, h, d/h), "
              "transpose(1, 2) to get (B, h, T, d/h)"] = x.reshape(*lead, t, h, dk)
    return hints


def _check_split(split_heads, x, h, namespace, hint=""):
    what = f"split_heads(x of shape {tuple(x.shape)}, n_heads={h})"
    with _graded(namespace):
        actual = call(what, split_heads, x, h, hint=hint)
    expected = _split_expected(x, h)
    try:
        assert_close(actual, expected, what, atol=0, rtol=0, hints=_split_hints(x, h))
    except AssertionError as e:
        if "differs from the expected" in str(e):
            raise AssertionError(f"{e}. Head i must hold features i*d/h ... (i+1)*d/h - 1 of every "
                                 f"position, unchanged") from None
        raise


def split_heads_layout(split_heads, namespace=None):
    """(B, T, d) -> (B, h, T, d/h) with head i holding features i*d/h ... (i+1)*d/h - 1, exactly."""
    g = seeded(51)
    for b, t, d, h in [(2, 5, 12, 3), (1, 4, 8, 2), (3, 2, 16, 4), (2, 3, 6, 1), (2, 3, 6, 6)]:
        _check_split(split_heads, torch.randn(b, t, d, generator=g), h, namespace)
    _check_split(split_heads, torch.randn(2, 3, 8, generator=g, dtype=torch.float64), 2, namespace)


def split_heads_leading(split_heads, namespace=None):
    """Works with any number of leading dims: (A, B, T, d) -> (A, B, h, T, d/h)."""
    g = seeded(52)
    for shape, h in [((2, 3, 4, 8), 2), ((2, 1, 2, 5, 12), 4)]:
        _check_split(split_heads, torch.randn(shape, generator=g), h, namespace, hint=LEADING_HINT)


# --- merge_heads -----------------------------------------------------------

def _merge_expected(y):
    return y.transpose(-3, -2).reshape(*y.shape[:-3], y.shape[-2], y.shape[-3] * y.shape[-1])


def _merge_hints(y):
    *lead, h, t, dk = y.shape
    if h == 1:
        return {}
    return {
        "merge_heads reshapes (B, h, T, d/h) straight to (B, T, d) and skips the transpose back: then position "
        "t gathers numbers of other positions. transpose(1, 2) to (B, T, h, d/h) first, then reshape":
            y.reshape(*lead, t, h * dk),
        "the heads are interleaved (feature j of head i landed at j*h + i): move the head axis next to the "
        "features as (B, T, h, d/h), so that head i fills the block i*d/h ... (i+1)*d/h - 1":
            y.permute(*range(len(lead)), -2, -1, -3).reshape(*lead, t, h * dk),
    }


def _check_merge(merge_heads, y, namespace, hint=""):
    what = f"merge_heads(x of shape {tuple(y.shape)})"
    with _graded(namespace):
        actual = _call_view(what, merge_heads, y, hint=hint)
    assert_close(actual, _merge_expected(y), what, atol=0, rtol=0, hints=_merge_hints(y))


def merge_heads_layout(merge_heads, namespace=None):
    """(B, h, T, d/h) -> (B, T, d): head i's features land at i*d/h ... (i+1)*d/h - 1 of each position."""
    g = seeded(53)
    for shape in [(2, 3, 5, 4), (1, 2, 4, 4), (3, 4, 2, 2), (2, 1, 3, 6), (2, 2, 3, 4)]:
        _check_merge(merge_heads, torch.randn(shape, generator=g), namespace)


def merge_heads_round_trip(merge_heads, namespace=None):
    """merge_heads(split_heads(x)) == x and split_heads(merge_heads(y)) == y, with any leading dims, float64."""
    g = seeded(54)
    for shape, h in [((2, 5, 12), 3), ((2, 3, 4, 8), 4), ((2, 1, 2, 3, 6), 2), ((3, 4, 10), 5)]:
        x = torch.randn(shape, generator=g, dtype=torch.float64)
        split = ref.split_heads(x, h)
        what = f"merge_heads(split_heads(x of shape {shape}, {h}))"
        with _graded(namespace):
            back = _call_view(what, merge_heads, split, hint=LEADING_HINT if len(shape) > 3 else "")
        assert_close(back, x, what + " (the round trip must give x back)", atol=0, rtol=0, hints=_merge_hints(split))
        y = torch.randn(*shape[:-2], h, shape[-2], shape[-1] // h, generator=g, dtype=torch.float64)
        what = f"split_heads(merge_heads(y of shape {tuple(y.shape)}), {h})"
        with _graded(namespace):
            merged = _call_view(what, merge_heads, y, hint=LEADING_HINT if len(shape) > 3 else "")
        assert_shape(merged, (*shape[:-2], shape[-2], shape[-1]), f"merge_heads(y of shape {tuple(y.shape)})")
        assert_close(ref.split_heads(merged, h), y, what + " (the round trip must give y back)", atol=0, rtol=0)


# --- MultiHeadAttention: helpers ------------------------------------------

PROJECTIONS = ("w_q", "w_k", "w_v", "w_o")


def _build(MultiHeadAttention, namespace, d, h, bias=True, dropout=0.0):
    what = f"MultiHeadAttention({d}, {h}, dropout={dropout}, bias={bias})"
    with _graded(namespace, EARLIER):
        layer = call(what, MultiHeadAttention, d, h, dropout=dropout, bias=bias)
    if isinstance(layer, ref.MultiHeadAttention):
        raise AssertionError(f"{what}: using the course's reference 'MultiHeadAttention' from lib is not allowed "
                             f"in this exercise: write it yourself")
    for name in PROJECTIONS:
        lin = getattr(layer, name, None)
        if not isinstance(lin, nn.Linear):
            raise AssertionError(f"{what}.{name} should be an nn.Linear, got "
                                 f"{'nothing' if lin is None else type(lin).__name__}")
        if (lin.in_features, lin.out_features) != (d, d):
            raise AssertionError(f"{what}.{name} maps {lin.in_features} -> {lin.out_features} features, "
                                 f"expected {d} -> {d} (all heads together: h heads of d/h = d)")
        if bias and lin.bias is None:
            raise AssertionError(f"{what}.{name} has no bias although bias=True: pass bias=bias to nn.Linear")
        if not bias and lin.bias is not None:
            raise AssertionError(f"{what}.{name} has a bias although bias=False: pass bias=bias to nn.Linear")
    for sub in layer.modules():
        if isinstance(sub, nn.MultiheadAttention):
            raise AssertionError(f"{what} contains an nn.MultiheadAttention: this exercise asks you to build "
                                 f"it yourself, so PyTorch's built-in is not allowed here")
    return layer


def _randomize(layer, d, g, dtype=torch.float32):
    with torch.no_grad():
        for name in PROJECTIONS:
            lin = getattr(layer, name)
            lin.weight.copy_(torch.randn(d, d, generator=g, dtype=dtype) / math.sqrt(d))
            if lin.bias is not None:
                lin.bias.copy_(torch.randn(d, generator=g, dtype=dtype) * 0.5)


def _params(layer):
    out = {}
    for name in PROJECTIONS:
        lin = getattr(layer, name)
        out[name] = (lin.weight.detach().clone(), None if lin.bias is None else lin.bias.detach().clone())
    return out


def _twin(params, d, h, dtype):
    """nn.MultiheadAttention with the same weights: in_proj = cat(w_q, w_k, w_v), out_proj = w_o."""
    bias = params["w_q"][1] is not None
    theirs = nn.MultiheadAttention(d, h, bias=bias, batch_first=True, dtype=dtype)
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([params[n][0] for n in ("w_q", "w_k", "w_v")]))
        theirs.out_proj.weight.copy_(params["w_o"][0])
        if bias:
            theirs.in_proj_bias.copy_(torch.cat([params[n][1] for n in ("w_q", "w_k", "w_v")]))
            theirs.out_proj.bias.copy_(params["w_o"][1])
    return theirs


def _blocked(mask, b, h, t_q, t_k):
    """Our mask (True = may attend) as nn.MultiheadAttention's attn_mask (True = blocked)."""
    if mask is None:
        return None
    if mask.dim() == 2:
        return ~mask
    if mask.dim() == 3:
        return (~mask.expand(b, t_q, t_k)).repeat_interleave(h, 0)
    return (~mask.expand(b, h, t_q, t_k)).reshape(b * h, t_q, t_k)


def _expected(params, d, h, query, key, value, mask=None):
    """(out, weights) of nn.MultiheadAttention(batch_first=True) with the same weights."""
    b, t_q, t_k = query.shape[0], query.shape[1], key.shape[1]
    theirs = _twin(params, d, h, query.dtype)
    with torch.no_grad():
        out, w = theirs(query, key, value, attn_mask=_blocked(mask, b, h, t_q, t_k),
                        need_weights=True, average_attn_weights=False)
    return out, w


def _variant(params, h, query, key, value, mask=None, scale_by=None, w_o=True, mask_heads=True):
    """Multi-head attention written out, with one thing changed (for the hints). None if it cannot run."""
    try:
        lin = {n: (lambda x, n=n: F.linear(x, *params[n])) for n in PROJECTIONS}
        b, t_q, d = query.shape
        dk = d // h

        def split(t):
            return t.reshape(b, -1, h, dk).transpose(1, 2)

        q, k, v = split(lin["w_q"](query)), split(lin["w_k"](key)), split(lin["w_v"](value))
        scores = q @ k.transpose(-2, -1) / math.sqrt(scale_by or dk)
        if mask is not None:
            m = mask.unsqueeze(1) if (mask.dim() == 3 and mask_heads) else mask
            scores = scores.masked_fill(~m, float("-inf"))
        w = torch.softmax(scores, -1)
        out = (w @ v).transpose(1, 2).reshape(b, t_q, d)
        return (lin["w_o"](out) if w_o else out), w
    except RuntimeError:
        return None


def _hints(params, d, h, query, key, value, mask):
    hints = {}
    for message, kwargs in [
        ("the scores are divided by sqrt(d_model); each head's scores must be divided by sqrt(d_k), "
         "d_k = d_model / n_heads, the size of one head", {"scale_by": d}),
        ("the output projection w_o is missing: apply self.w_o to the merged heads", {"w_o": False}),
        ("a 3-D mask was broadcast against the scores (B, h, T_q, T_k) without a head axis, so it lined up "
         "the batch with the heads: add one with mask.unsqueeze(1)", {"mask_heads": False}),
    ]:
        if mask is None and "mask" in message:
            continue
        got = _variant(params, h, query, key, value, mask, **kwargs)
        if got is not None:
            hints[message] = got
    return hints


def _run(layer, what, query, key, value, mask, namespace, hint=""):
    """Call the student's layer; a crash about shapes gets ``hint``, one about dtypes a dtype hint."""
    with _graded(namespace, EARLIER):
        try:
            result = call(what, layer, query, key, value, mask=mask)
        except AssertionError as e:
            text = str(e)
            if " raised " in text and hint and any(w in text for w in ("shape", "size", "dimension", "broadcast")):
                text = f"{text}. {hint}"
            elif " raised " in text and "dtype" in text:
                text = f"{text}. Keep the inputs' dtype: create no float32 tensors inside forward"
            raise AssertionError(text) from None
    return unpack_pair(result, what)


def _compare(out, w, expected, hints, what, b, h, t_q, t_k, d, atol=1e-5):
    out_ref, w_ref = expected
    if torch.is_tensor(w) and tuple(w.shape) == (b, t_q, t_k) and h > 1:
        raise AssertionError(f"weights of {what} have shape {tuple(w.shape)}: they are averaged over the heads. "
                             f"Return the weights of every head, shape (B, h, T_q, T_k) = {(b, h, t_q, t_k)}")
    if torch.is_tensor(w) and w.dim() == 4 and w.shape[-1] == t_q != t_k:
        raise AssertionError(f"weights of {what} have shape {tuple(w.shape)}, expected {(b, h, t_q, t_k)}: "
                             f"the keys (and values) must be projected from the `key` (and `value`) arguments, "
                             f"not from `query`")
    assert_shape(w, (b, h, t_q, t_k), f"weights of {what}")
    assert_shape(out, (b, t_q, d), f"output of {what}")
    assert_close(w, w_ref, f"weights of {what}", atol=atol, hints={m: v[1] for m, v in hints.items()})
    assert_close(out, out_ref, f"output of {what}", atol=atol, hints={m: v[0] for m, v in hints.items()})


# --- MultiHeadAttention: graded cells --------------------------------------

def multi_head_module(MultiHeadAttention, namespace):
    """Four nn.Linear(d, d) projections with or without bias; ValueError when d_model % n_heads != 0."""
    for d, h, bias in [(16, 4, True), (12, 3, False), (8, 1, True), (6, 6, False)]:
        _build(MultiHeadAttention, namespace, d, h, bias=bias)
    for d, h in [(10, 3), (16, 5)]:
        what = f"MultiHeadAttention({d}, {h})"
        try:
            with _graded(namespace, EARLIER):
                MultiHeadAttention(d, h)
        except ValueError:
            continue
        except ForbiddenCall as e:
            raise AssertionError(f"{what}: {e}") from None
        except AssertionError:
            raise AssertionError(f"{what} raised AssertionError: raise ValueError(...) instead of using assert "
                                 f"(asserts vanish under python -O, and callers catch ValueError)") from None
        except NotImplementedError:
            raise AssertionError(f"{what} is not implemented yet (it raises NotImplementedError)") from None
        except Exception as e:  # noqa: BLE001
            raise AssertionError(f"{what} raised {type(e).__name__}: {e}; it should raise ValueError") from None
        raise AssertionError(f"{what} did not raise ValueError: {d} features cannot be split evenly into {h} "
                             f"heads. Check d_model % n_heads in __init__ and raise ValueError")


def multi_head_pytorch(MultiHeadAttention, namespace):
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
        layer = _build(MultiHeadAttention, namespace, d, h, bias=bias)
        layer.to(dtype)
        _randomize(layer, d, g, dtype)
        params = _params(layer)
        query = torch.randn(b, t_q, d, generator=g, dtype=dtype)
        if self_attn:
            key = value = query
        else:
            key, value = torch.randn(b, t_k, d, generator=g, dtype=dtype), torch.randn(b, t_k, d, generator=g, dtype=dtype)
        kind = "self-attention" if self_attn else f"cross-attention, key != value, T_q={t_q}, T_k={t_k}"
        what = f"MultiHeadAttention({d}, {h}, bias={bias}) in {dtype}, {kind}"
        expected = _expected(params, d, h, query, key, value)
        hints = _hints(params, d, h, query, key, value, None)
        out, w = _run(layer, what, query, key, value, None, namespace,
                      hint="Check the shapes step by step: the projections give (B, T, d), split_heads "
                           "(B, h, T, d/h), attention (B, h, T_q, d/h), merge_heads (B, T_q, d), and only then w_o")
        _compare(out, w, expected, hints, what, b, h, t_q, t_k, d, atol=1e-9 if dtype == torch.float64 else 1e-5)


def _random_mask(g, shape):
    m = torch.rand(shape, generator=g) < 0.6
    m[..., 0] = True  # every query may attend at least one key
    return m[..., torch.randperm(shape[-1], generator=g)]


def _mask_diagnosis(w, mask, what):
    if not torch.is_tensor(w) or w.dim() != 4:
        return
    try:
        allowed = mask.unsqueeze(1) if mask.dim() == 3 else mask
        allowed = allowed.expand(w.shape)
    except RuntimeError:
        return
    leak = (w.nan_to_num(1.0).abs() * (~allowed)).amax().item()
    blocked_get_all = (w.nan_to_num(0.0).abs() * allowed).amax().item() < 1e-6
    if leak > 1e-6 and (blocked_get_all or (w.nan_to_num(0.0) * allowed).sum() < (w.nan_to_num(0.0) * ~allowed).sum()):
        raise AssertionError(
            f"{what}: the weights are non-zero where the mask is False. In this course True means 'may attend' "
            f"(the opposite of nn.MultiheadAttention's attn_mask): set the scores where the mask is False (~mask) "
            f"to -inf")


def multi_head_mask(MultiHeadAttention, namespace):
    """Every mask shape of the course broadcasts over the heads and matches nn.MultiheadAttention
    (given ~mask): (T_q, T_k), (B, 1, T_k), (B, T_q, T_k), (B, 1, T_q, T_k), (B, h, T_q, T_k)."""
    g = seeded(56)
    d, h = 16, 4
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    padding = (torch.arange(5)[None, :] < torch.tensor([5, 3])[:, None])[:, None, :]  # (2, 1, 5)
    cases = [  # name, b, t_q, t_k, mask
        ("a causal mask (T, T)", 2, 5, 5, causal),
        ("a padding mask (B, 1, T_k)", 2, 5, 5, padding),
        ("causal & padding, (B, T, T)", 2, 5, 5, causal & padding),
        ("a cross-attention mask (B, T_q, T_k) with T_q=3, T_k=5", 2, 3, 5, _random_mask(g, (2, 3, 5))),
        ("a mask (B, T_q, T_k) with B == n_heads", 4, 5, 5, _random_mask(g, (4, 5, 5))),
        ("a mask (B, 1, T_q, T_k)", 2, 3, 5, _random_mask(g, (2, 1, 3, 5))),
        ("a different mask per head (B, h, T_q, T_k)", 2, 3, 5, _random_mask(g, (2, h, 3, 5))),
    ]
    layer = _build(MultiHeadAttention, namespace, d, h)
    _randomize(layer, d, g)
    params = _params(layer)
    for name, b, t_q, t_k, mask in cases:
        query = torch.randn(b, t_q, d, generator=g)
        key = value = query if t_q == t_k else torch.randn(b, t_k, d, generator=g)
        what = f"MultiHeadAttention({d}, {h})(query, key, value, mask) with {name}"
        if mask.dim() == 3:
            hint = ("A 3-D mask (B, T_q, T_k) or (B, 1, T_k) needs a head axis before it meets the scores "
                    "(B, h, T_q, T_k): mask.unsqueeze(1)")
        elif mask.dim() == 4:
            hint = "A 4-D mask (B, h or 1, T_q, T_k) already has its head axis: add one (unsqueeze(1)) only to 3-D masks"
        else:
            hint = "A 2-D mask (T_q, T_k) broadcasts against (B, h, T_q, T_k) as it is"
        expected = _expected(params, d, h, query, key, value, mask)
        hints = _hints(params, d, h, query, key, value, mask)
        out, w = _run(layer, what, query, key, value, mask, namespace, hint=hint)
        if torch.is_tensor(w) and tuple(w.shape) != (b, h, t_q, t_k) and tuple(w.shape) != (b, t_q, t_k):
            raise AssertionError(f"weights of {what} have shape {tuple(w.shape)}, expected {(b, h, t_q, t_k)}. {hint}")
        _mask_diagnosis(w, mask, what)
        _compare(out, w, expected, hints, what, b, h, t_q, t_k, d)


class _CountProducts(TorchDispatchMode):
    """Counts the matrix products and softmax/exp calls that reach PyTorch's dispatcher."""
    NAMES = frozenset({"mm", "bmm", "addmm", "baddbmm", "addbmm", "matmul", "mv", "addmv", "dot", "vdot",
                       "_softmax", "_safe_softmax", "exp", "_log_softmax"})

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket.__name__ in self.NAMES:
            self.count += 1
        return func(*args, **(kwargs or {}))


def multi_head_vectorized(MultiHeadAttention, namespace):
    """No Python loop over the heads: the number of matrix products does not grow with n_heads."""
    g = seeded(57)
    d, b, t = 16, 2, 5
    x = torch.randn(b, t, d, generator=g)
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    counts = {}
    for h in (2, 8):
        layer = _build(MultiHeadAttention, namespace, d, h)
        what = f"MultiHeadAttention({d}, {h})(x, x, x, causal mask)"
        with _graded(namespace, EARLIER):
            with _CountProducts() as counter:
                out, w = unpack_pair(call(what, layer, x, x, x, mask=mask), what)
        assert_shape(out, (b, t, d), f"output of {what}")
        assert_shape(w, (b, h, t, t), f"weights of {what}")
        counts[h] = counter.count
    if counts[8] > counts[2]:
        raise AssertionError(
            f"MultiHeadAttention makes {counts[2]} matrix products and softmax/exp calls with 2 heads but "
            f"{counts[8]} with 8 heads (same d_model): it seems to loop over the heads in Python. Compute all "
            f"heads at once: split_heads gives (B, h, T, d/h), and one batched matmul handles every head")


def multi_head_dropout(MultiHeadAttention, namespace):
    """Dropout acts on the attention weights in training mode only; eval mode is deterministic."""
    g = seeded(58)
    d, h, b, t = 16, 4, 4, 16
    dk = d // h
    layer = _build(MultiHeadAttention, namespace, d, h, dropout=0.5)
    _randomize(layer, d, g)
    with torch.no_grad():  # values copy the input, w_o copies the merged heads
        for name in ("w_v", "w_o"):
            getattr(layer, name).weight.copy_(torch.eye(d))
            if getattr(layer, name).bias is not None:
                getattr(layer, name).bias.zero_()
    x = torch.randn(b, t, d, generator=g) * 0.5
    c = torch.arange(1.0, d + 1)  # every key has the same value vector c
    value = c.expand(b, t, d).clone()
    what = f"MultiHeadAttention({d}, {h}, dropout=0.5)"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        layer.eval()
        outs = [_run(layer, f"{what} in eval mode", x, x, value, None, namespace)[0] for _ in range(2)]
        for out in outs:
            assert_shape(out, (b, t, d), f"output of {what} in eval mode")
        if not torch.equal(outs[0], outs[1]) or not is_close(outs[0], value):
            raise AssertionError(
                f"{what} in eval mode (after .eval()) is not deterministic or changes the output: dropout must be "
                f"off in eval mode. Use an nn.Dropout submodule (which follows .train()/.eval()), or "
                f"F.dropout(..., training=self.training)")
        layer.train()
        out = _run(layer, f"{what} in training mode", x, x, value, None, namespace)[0]
    assert_shape(out, (b, t, d), f"output of {what} in training mode")
    if is_close(out, value):
        raise AssertionError(f"{what} in training mode gives the same output as without dropout: apply dropout "
                             f"(p={0.5}) to the attention weights while training")
    ratio = (out / c).reshape(b, t, h, dk)  # per head, dropout on the weights scales the whole value vector
    if not torch.allclose(ratio, ratio[..., :1].expand_as(ratio), atol=1e-4):
        raise AssertionError(
            f"{what} in training mode: dropout is not applied to the attention weights (features within one head "
            f"were dropped separately, so it acted on the values or the output). Apply it to the weights "
            f"(B, h, T_q, T_k), then multiply by the values")
    mean = ratio[..., 0].mean().item()
    if not 0.75 < mean < 1.25:
        raise AssertionError(f"{what} in training mode: the kept weights are not rescaled by 1/(1-p) "
                             f"(mean scale {mean:.2f} instead of about 1): use nn.Dropout or F.dropout")

"""tiled_attention(q, k, v, mask=None, block=64) -> out: FlashAttention's forward pass, the keys and values taken
``block`` at a time with a running maximum, sum and output, never more than (T_q, block) scores at once. It equals
softmax(q kᵀ / √d_k, masked) v for every shape and mask notebook 01 allows; a query whose keys are all masked
gets 0 (where 01's softmax gives NaN).

Four parts, one property each: the values without a mask (``matches``), with masks (``mask``), with scores in
the thousands either way (``stable``), and the largest tensor of scores any operator makes (``memory``, read off
the operators the student's code runs, on sizes where the shapes tell what they hold).
"""
import math

import torch

from lib.testing import assert_close, assert_shape, is_close

from ..common import ADDED_MASK, INVERTED_MASK, seeded
from ..kernel import StudentError
from .online_softmax_merge import finite

NAME = "tiled_attention"
NO_RESCALE = ("the output accumulated so far is not rescaled when the running maximum grows: the earlier blocks' "
              "exp(scores − m_old) must become exp(scores − m_new), so multiply the accumulator (and the running "
              "sum) by exp(m_old − m_new) before adding the new block")
NO_RESCALE_SUM = ("the running sum is not rescaled when the running maximum grows (the output is): multiply the "
                  "sum by exp(m_old − m_new) too, as online_softmax_merge does")
PER_BLOCK = ("each block's scores are normalized on their own (a softmax per block): a block's weights must be "
             "shares of the whole row's sum, so keep a running maximum and sum across the blocks and divide once, "
             "at the end")
NOT_SCALED = "the scores are not divided by sqrt(d_k), the size of a query"
DROPS_LAST = ("the last, shorter block of keys is left out when T_k is not a multiple of block: loop over "
              "range(0, T_k, block) and slice k[..., j:j + block, :], which is shorter at the end")
OVERLAP = ("the last block starts early so that it is a whole block long (a slice clamped to the end, as "
           "jax.lax.dynamic_slice does): when T_k is not a multiple of block it overlaps the block before, whose keys "
           "are then counted twice. Let the last block be shorter: k[..., j:j + block, :]")
NOT_DIVIDED = ("the output is not divided by the running sum at the end: the accumulator holds "
               "Σ exp(score − m) · v, and attention's weights are those exponentials over their sum")
ROW_NAN = ("a query whose keys are all masked gives NaN (its running sum is 0, so the output is 0/0): return 0 for "
           "it, as FlashAttention does (divide only where the sum is above 0)")
FINITE_FILL = ("a query whose keys are all masked gets the mean of all the values: the masked scores are filled "
               "with a large finite number (such as -1e9) instead of -inf, so a row with no allowed key weighs "
               "every key alike. Fill with -inf and return 0 for such a query")
NO_MAX = ("scores in the thousands give inf or NaN: exp(score) overflows float32 above about 88. Subtract the "
          "running maximum before exp, exp(scores − m_new), as the online softmax does")
FROM_ZERO = ("scores that are all far below 0 (about -1000) give NaN or 0: the running maximum seems to start at 0, "
             "so exp(score − 0) underflows to 0 and the sum is 0. Start it at -inf, so that the first block brings "
             "its own maximum")
ADDED_FILL = ("a query whose keys are all masked attends to every key as if there were no mask: a large finite "
              "number (such as -1e6) is added to the masked scores, which shifts a whole row alike and leaves its "
              "softmax unchanged. Fill the masked scores with -inf and return 0 for a query that may attend no key")
NOT_ZERO = ("a query that may attend no key gets a non-zero output (the other queries are right): its masked "
            "scores hold a finite number, -1e6 added or -1e9 filled, where -inf belongs, so it still weighs the "
            "keys it may not attend. Fill with -inf and return 0 for such a query")
RETURNS_PAIR = ("tiled_attention returns the output only, a tensor (..., T_q, d_v), not a pair (output, weights): "
                "the point of tiling is never to hold the weights")


def earlier(k):
    """The trusted online_softmax_merge, so that this exercise is graded on its own."""
    return {"online_softmax_merge": k.reference("lib.tiled_attention.online_softmax_merge")}


def full(q, k, v, mask=None):
    """softmax(q kᵀ / √d_k) v with the whole score matrix; 0 for a query with no allowed key."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = (scores - finite(scores.amax(-1, keepdim=True))).exp()
    total = e.sum(-1, keepdim=True)
    return torch.where(total > 0, (e @ v) / total.clamp_min(1e-30), torch.zeros(()).to(q.dtype))


def variant(q, k, v, mask, block, slip):
    """Tiled attention written out with one mistake put in (for the hints); None where it cannot run."""
    try:
        scale = 1.0 if slip == "unscaled" else math.sqrt(q.shape[-1])
        t_k = k.shape[-2]
        stops = range(0, t_k - block + 1, block) if slip == "drops_last" else range(0, t_k, block)
        m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=q.dtype)
        total = torch.zeros_like(m)
        acc = torch.zeros(*torch.broadcast_shapes(q.shape[:-1], v.shape[:-2] + (1,)), v.shape[-1], dtype=q.dtype)
        for j in stops:
            if slip == "overlap":
                j = max(0, min(j, t_k - block))
            s = q @ k[..., j:j + block, :].transpose(-2, -1) / scale
            if mask is not None:
                piece = mask[..., j:j + block]
                if slip == "inverted":
                    piece = ~piece
                s = s + piece.to(s.dtype) if slip == "added" else s.masked_fill(~piece, float("-inf"))
            if slip == "per_block":
                w = (s - finite(s.amax(-1, keepdim=True))).exp()
                acc = acc + w / w.sum(-1, keepdim=True) @ v[..., j:j + block, :]
                continue
            new = torch.maximum(m, s.amax(-1, keepdim=True))
            f = finite(new)
            factor = (m - f).exp()
            e = (s - f).exp()
            total = total * (1.0 if slip == "no_rescale_sum" else factor) + e.sum(-1, keepdim=True)
            acc = acc * (1.0 if slip == "no_rescale" else factor) + e @ v[..., j:j + block, :]
            m = new
        if slip in ("per_block", "not_divided"):
            return acc
        return acc / torch.where(total == 0, torch.ones_like(total), total)  # 0 for a query with no key
    except RuntimeError:
        return None


SLIPS = (("no_rescale", NO_RESCALE), ("no_rescale_sum", NO_RESCALE_SUM), ("per_block", PER_BLOCK),
         ("unscaled", NOT_SCALED), ("drops_last", DROPS_LAST), ("overlap", OVERLAP), ("not_divided", NOT_DIVIDED),
         ("inverted", INVERTED_MASK), ("added", ADDED_MASK))


def hints(q, k, v, mask, block):
    out = {}
    for slip, message in SLIPS:
        if mask is None and slip in ("inverted", "added"):
            continue
        got = variant(q, k, v, mask, block, slip)
        if got is not None:
            out[message] = got
    return out


def call(k, what, q, key, v, mask=None, block=None, watch=False):
    """The student's output for these inputs (and the operators it ran, with ``watch``)."""
    kwargs = {} if block is None else {"block": block}
    if mask is not None:
        kwargs["mask"] = mask
    try:
        trace = k.trace(what, k.student(NAME), q, key, v, inject=earlier(k), watch=watch, **kwargs)
    except StudentError as e:
        if {"NotImplementedError", "ForbiddenCall"} & set(e.types):
            raise AssertionError(str(e)) from None
        t_k, step = key.shape[-2], block or 64
        if "is invalid for input of size" in e.raw and t_k % step:
            raise AssertionError(f"{e}. T_k = {t_k} is not a multiple of block = {step}: the keys cannot be reshaped "
                                 f"into whole blocks. Slice them instead, k[..., j:j + block, :], the last block "
                                 f"shorter") from None
        if v.shape[-1] != q.shape[-1] and any(w in e.raw for w in ("must match the size", "size of tensor")):
            raise AssertionError(f"{e}. The output has the values' width, d_v = {v.shape[-1]}, which may differ from "
                                 f"the queries' d_k = {q.shape[-1]}: make the running output (..., T_q, d_v), "
                                 f"from v.shape[-1] (not zeros_like(q))") from None
        if mask is not None and any(w in e.raw for w in ("must match the size", "broadcast", "size of tensor")):
            raise AssertionError(f"{e}. Slice the mask along its last dim, the keys' (mask[..., j:j + block]): "
                                 f"its other dims broadcast against the scores as they are") from None
        raise AssertionError(str(e)) from None
    out = trace.value
    if isinstance(out, (tuple, list)):
        raise AssertionError(f"{what}: {RETURNS_PAIR}")
    if not torch.is_tensor(out):
        raise AssertionError(f"{what} should return a tensor, got {type(out).__name__}")
    shape = torch.broadcast_shapes(q.shape[:-1], v.shape[:-2] + (1,)) + (v.shape[-1],)
    assert_shape(out, shape, f"output of {what}")
    return (out, trace.ops) if watch else out


def compare(out, q, key, v, mask, block, what, atol=1e-5):
    expected = full(q, key, v, mask)
    if out.dtype == expected.dtype and is_close(out, expected, atol):
        return
    found = hints(q, key, v, mask, block or 64)
    nan = torch.isnan(out)
    for message, wrong in found.items():  # a slip that gives NaN somewhere (a softmax of a block with no key)
        if nan.any() and torch.equal(nan, torch.isnan(wrong)) and is_close(out.nan_to_num(0.0), wrong.nan_to_num(0.0)):
            raise AssertionError(f"output of {what} is wrong: {message}")
    assert_close(out, expected, f"output of {what}", atol=atol, hints=found)


def _inputs(g, lead, t_q, t_k, d_k, d_v=None, dtype=torch.float32, scale=1.0):
    q = torch.randn(*lead, t_q, d_k, generator=g, dtype=dtype) * scale
    key = torch.randn(*lead, t_k, d_k, generator=g, dtype=dtype) * scale
    v = torch.randn(*lead, t_k, d_v or d_k, generator=g, dtype=dtype)
    return q, key, v


# --- graded cells ---------------------------------------------------------------------------------

def tiled_attention_matches(k):
    """Without a mask, equals attention with the whole score matrix: T_k not a multiple of block, block 1, block
    larger than T, T_q != T_k with d_v != d_k, one or two leading dims or none, the default block (T_k = 130), and
    float64."""
    g = seeded(1111)
    cases = [  # leading dims, T_q, T_k, d_k, d_v, block, dtype
        ((2,), 5, 5, 8, 8, 2, torch.float32),
        ((1, 3), 3, 7, 4, 5, 3, torch.float32),
        ((2,), 4, 6, 6, 6, 1, torch.float32),
        ((2,), 10, 10, 8, 8, 64, torch.float32),
        ((), 7, 9, 4, 4, 3, torch.float32),
        ((1, 2), 6, 130, 8, 8, None, torch.float32),
        ((2,), 6, 11, 4, 4, 4, torch.float64),
    ]
    for lead, t_q, t_k, d_k, d_v, block, dtype in cases:
        q, key, v = _inputs(g, lead, t_q, t_k, d_k, d_v, dtype)
        blk = "the default block" if block is None else f"block={block}"
        what = (f"{NAME}(q, k, v, {blk}) with q {tuple(q.shape)}, k {tuple(key.shape)}, v {tuple(v.shape)}"
                + ("" if dtype == torch.float32 else f" in {dtype}"))
        out = call(k, what, q, key, v, block=block)
        compare(out, q, key, v, None, block, what, atol=1e-9 if dtype == torch.float64 else 1e-5)


def tiled_attention_mask(k):
    """Masks of every shape notebook 01 allows, as they are given (True = may attend): causal (T, T), padding
    (B, 1, T_k) with T_q != T_k, (B, T_q, T_k) with a query whose keys are all masked (it gets 0, and the other
    rows stay right), per head (B, h, T_q, T_k), and (T_q, T_k) against two leading dims."""
    g = seeded(1112)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    padding = (torch.arange(9)[None, :] < torch.tensor([9, 5])[:, None])[:, None, :]  # (2, 1, 9)
    rows = torch.rand(2, 5, 7, generator=g) < 0.6
    rows[..., 0] = True
    rows[1, 2] = False  # a query with no key
    heads = torch.rand(2, 2, 5, 8, generator=g) < 0.6
    heads[..., 3] = True
    cases = [  # name, leading dims, T_q, T_k, mask, block
        ("a causal mask (T, T)", (2,), 6, 6, causal, 2),
        ("a padding mask (B, 1, T_k), T_q=4, T_k=9", (2,), 4, 9, padding, 4),
        ("a mask (B, T_q, T_k) in which query 2 of the second sequence may attend no key", (2,), 5, 7, rows, 3),
        ("a mask per head (B, h, T_q, T_k)", (2, 2), 5, 8, heads, 3),
        ("a mask (T_q, T_k) against q (B, h, T_q, d)", (2, 2), 6, 6, causal, 4),
    ]
    for name, lead, t_q, t_k, mask, block in cases:
        q, key, v = _inputs(g, lead, t_q, t_k, 4)
        what = f"{NAME}(q, k, v, mask, block={block}) with q {tuple(q.shape)}, k {tuple(key.shape)} and {name}"
        out = call(k, what, q, key, v, mask=mask, block=block)
        empty = ~mask.expand(*lead, t_q, t_k).any(-1)  # queries with no key
        if empty.any():
            good = ~empty
            if torch.isnan(out[empty]).all() and is_close(out[good], full(q, key, v, mask)[good]):
                raise AssertionError(f"{what}: {ROW_NAN}")
            if torch.isfinite(out).all() and is_close(out[empty], v.mean(-2, keepdim=True).expand_as(out)[empty]):
                raise AssertionError(f"{what}: {FINITE_FILL}")
            if torch.isfinite(out).all() and is_close(out[empty], full(q, key, v)[empty]):
                raise AssertionError(f"{what}: {ADDED_FILL}")
            if (torch.isfinite(out).all() and not is_close(out[empty], torch.zeros_like(out[empty]))
                    and is_close(out[good], full(q, key, v, mask)[good])):
                raise AssertionError(f"{what}: {NOT_ZERO}")
            if torch.isnan(out[good]).any():
                raise AssertionError(f"{what} gives NaN for queries that may attend some keys, as well as for the one "
                                     f"that may attend none: {ROW_NAN}; keep its 0/0 out of the other rows")
        compare(out, q, key, v, mask, block, what)


def tiled_attention_stable(k):
    """Scores in the thousands give the right output, with no inf or NaN: large positive ones (exp must not
    overflow) and ones that are all far below 0 (the running maximum must start at -inf, not 0)."""
    g = seeded(1113)
    for sign, slip in ((1.0, NO_MAX), (-1.0, FROM_ZERO)):
        q, key, v = _inputs(g, (2,), 5, 9, 4)
        q = q.abs() * 20 + 10
        key = sign * (key.abs() * 20 + 10)  # every score about 1000 (or -1000) and more, with gaps of hundreds
        what = (f"{NAME}(q, k, v, block=4) with scores around {'' if sign > 0 else '-'}"
                f"{(q @ key.transpose(-2, -1)).abs().mean().item() / 2:.0f}")
        out = call(k, what, q, key, v, block=4)
        if not torch.isfinite(out).all() or sign < 0 and not is_close(out, full(q, key, v), 1e-4) and \
                is_close(out, torch.zeros_like(out)):
            raise AssertionError(f"{what}: {slip}")
        compare(out, q, key, v, None, 4, what, atol=1e-4)


VIEWS = frozenset({"view", "_unsafe_view", "expand", "transpose", "t", "permute", "slice", "select", "unsqueeze",
                   "squeeze", "as_strided", "alias", "detach", "unbind", "split", "split_with_sizes", "chunk",
                   "narrow", "_reshape_alias", "unfold", "diagonal", "lift_fresh", "view_as", "expand_as",
                   "clone", "contiguous", "_to_copy", "copy_", "lift_fresh_copy", "bitwise_not", "logical_not",
                   "_conj", "resolve_conj", "resolve_neg"})


def tiled_attention_memory(k):
    """No operator makes a tensor of more numbers than one block of scores, (B, T_q, block): with B = 2, T_q = 24,
    T_k = 200, d = 8 and block = 16, a (B, T_q, T_k) tensor, or (B, 16, T_k) when the queries are tiled instead
    of the keys, has a shape of its own. Copies of the inputs (a contiguous k, a negated mask) do not count. The
values are the other parts' to judge: here the code must only compute blocks of scores."""
    g = seeded(1114)
    b, t_q, t_k, d, block = 2, 24, 200, 8, 16
    q, key, v = _inputs(g, (b,), t_q, t_k, d)
    padding = (torch.arange(t_k)[None, :] < torch.tensor([t_k, 150])[:, None])[:, None, :]
    limit = b * t_q * block
    inputs = {t.numel() for t in (q, key, v, padding)}
    for mask in (None, padding):
        what = (f"{NAME}(q, k, v, {'mask, ' if mask is not None else ''}block={block}) with q {tuple(q.shape)}, "
                f"k and v {tuple(key.shape)}" + ("" if mask is None else f", a padding mask {tuple(mask.shape)}"))
        out, ops = call(k, what, q, key, v, mask=mask, block=block, watch=True)
        for op, _, shape in ops:
            if not shape or op in VIEWS:
                continue
            n = math.prod(shape)
            if n <= limit or n in inputs:
                continue
            head = f"{what}: an operator ({op}) made a tensor of shape {tuple(shape)}, {n} numbers"
            if t_q in shape and t_k in shape:
                raise AssertionError(f"{head}: as many as the whole score matrix (T_q, T_k) = ({t_q}, {t_k}), or a mask "
                                     f"made into one. Compute the scores of one block of keys at a time, "
                                     f"q @ k[..., j:j + block, :]ᵀ, inside the loop, and slice the mask the same way")
            if t_k in shape:
                raise AssertionError(f"{head}: all {t_k} keys for some of the queries. Tiled attention splits the "
                                     f"keys and values into blocks and keeps every query: q @ k[..., j:j + block, :]ᵀ")
            if 64 in shape and block != 64:
                raise AssertionError(f"{head}: blocks of 64 keys although block={block}: use the `block` argument")
            raise AssertionError(f"{head}, more than one block of scores (B, T_q, block) = ({b}, {t_q}, {block}) "
                                 f"holds: keep only the current block's scores")
        if not any(shape and len(shape) >= 2 and block in shape[-2:] and op not in VIEWS for op, _, shape in ops):
            raise AssertionError(f"{what} computed no block of scores of {block} keys: compute q @ k[..., j:j + block, "
                                 f":]ᵀ for each block of keys")

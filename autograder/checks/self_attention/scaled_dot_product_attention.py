"""scaled_dot_product_attention(q, k, v, mask=None) -> (output, weights)."""
import math

import torch

from lib.testing import assert_close, is_close

from ..common import ADDED_MASK, ALWAYS_CAUSAL, INVERTED_MASK, added_mask, seeded, unpack_pair
from . import BATCH_HINT, expected_attention


def _scaling_hints(q, k, v, mask=None):
    """The usual slips of scale, axis and orientation, each computed from the reference (on masked scores with
    ``mask``), named by what went wrong."""
    raw = q @ k.transpose(-2, -1)
    if mask is not None:
        raw = raw.masked_fill(~mask, float("-inf"))
    d_k, d_v = q.shape[-1], v.shape[-1]
    hints = {
        "scores are divided by d_k; divide by sqrt(d_k)": torch.softmax(raw / d_k, -1),
        "scores are not scaled; divide them by sqrt(d_k)": torch.softmax(raw, -1),
        "the softmax is over the queries (dim -2); the weights of each query must sum to 1 over the keys (dim -1)":
            torch.softmax(raw / math.sqrt(d_k), -2),
    }
    if d_v != d_k:
        hints["scores are divided by sqrt(d_v), the size of the values; use d_k, the size of queries and keys"] = \
            torch.softmax(raw / math.sqrt(d_v), -1)
    w = torch.softmax(raw / math.sqrt(d_k), -1)
    hints["the weights are transposed: rows are queries (T_q) and columns are keys (T_k)"] = w.transpose(-2, -1)
    return hints


def _divided_by(q, k):
    """For ``assert_close``'s diagnose: weights that are softmax(q k^T / s) for one s other than sqrt(d_k) (DeBERTa
    divides by sqrt(3 d_k), a temperature by more): s read off the log-weights, a line through the scores."""
    raw = (q @ k.transpose(-2, -1)).double()
    d_k = q.shape[-1]

    def why(w):
        if not (w > 0).all():
            return None
        log_w = w.double().log()
        a, b = log_w - log_w.mean(-1, keepdim=True), raw - raw.mean(-1, keepdim=True)
        slope = ((a * b).sum() / (b * b).sum()).item()  # 1 / s
        if slope <= 0 or abs(slope * math.sqrt(d_k) - 1) < 1e-3:
            return None
        s = 1 / slope
        if not torch.allclose(torch.softmax(raw / s, -1), w.double(), atol=1e-4, rtol=1e-3):
            return None
        return (f"the scores are divided by {s:.4g} = {s / math.sqrt(d_k):.3g} * sqrt(d_k), not by sqrt(d_k) = "
                f"{math.sqrt(d_k):.4g} (d_k = {d_k}): the scale is 1 / sqrt(d_k), with no other factor")
    return why


def _case(g, lead, t_q, t_k, d_k, d_v, dtype=torch.float32):
    q = torch.randn(*lead, t_q, d_k, generator=g, dtype=dtype)
    key = torch.randn(*lead, t_k, d_k, generator=g, dtype=dtype)
    v = torch.randn(*lead, t_k, d_v, generator=g, dtype=dtype)
    return q, key, v


def _attend(k, what, q, key, v, mask=None, hint=""):
    fn = k.student("scaled_dot_product_attention")
    trusted = {"softmax": k.reference("lib.self_attention.softmax")}
    kwargs = {} if mask is None else {"mask": mask}
    return unpack_pair(k.call(what, fn, q, key, v, hint=hint, inject=trusted, **kwargs), what)


def _causal_without_a_mask(k, what, error):
    """Attention that failed with T_q != T_k and no mask: if it is causal with T_q = T_k and no mask, it builds a
    (T_q, T_q) causal mask of its own (Informer's FullAttention does), which cannot fit (T_q, T_k) scores."""
    q, key, v = _case(seeded(5), (), 4, 4, 4, 4)
    try:
        _, w = _attend(k, "attention with T_q = T_k = 4 and no mask", q, key, v)
    except AssertionError:
        return
    causal = torch.ones(4, 4, dtype=torch.bool).tril()
    if torch.is_tensor(w) and w.shape == (4, 4) and is_close(w, expected_attention(q, key, v, causal)[1]):
        raise AssertionError(f"{what}: {ALWAYS_CAUSAL}; its causal mask is (T_q, T_q), so with T_q != T_k it does "
                             f"not fit the scores ({error})") from None


def scaled_dot_product_attention_reference(k):
    """Equals PyTorch's attention for any leading dims, T_q != T_k and d_v != d_k, for large scores,
    in float32 and float64."""
    g = seeded(3)
    cases = [((), 3, 5, 4, 6), ((2,), 4, 4, 8, 8), ((2, 3), 3, 6, 4, 5), ((2,), 5, 5, 16, 2)]
    for lead, t_q, t_k, d_k, d_v in cases:
        q, key, v = _case(g, lead, t_q, t_k, d_k, d_v)
        q = q * 2  # larger scores make a missing or wrong scale visible
        out_ref, w_ref = expected_attention(q, key, v)
        what = f"scaled_dot_product_attention(q {tuple(q.shape)}, k {tuple(key.shape)}, v {tuple(v.shape)})"
        try:
            out, w = _attend(k, what, q, key, v, hint=BATCH_HINT if lead else "")
        except AssertionError as e:
            if t_q != t_k:
                _causal_without_a_mask(k, what, e)
            raise
        assert_close(w, w_ref, f"weights of {what}", hints=_scaling_hints(q, key, v), diagnose=_divided_by(q, key))
        assert_close(out, out_ref, f"output of {what}")
    q, key, v = _case(g, (2,), 4, 6, 8, 3)
    q, key = q * 30, key * 30  # scores in the thousands: exp overflows unless the softmax is stable
    out_ref, _ = expected_attention(q, key, v)
    out, _ = _attend(k, "attention with large scores", q, key, v)
    if torch.is_tensor(out) and not torch.isfinite(out).all():
        raise AssertionError("attention gives NaN or inf when the scores are large (in the thousands): "
                             "compute the weights with your stable softmax, not with exp directly")
    assert_close(out, out_ref, "output of attention with large scores", atol=1e-4)
    q, key, v = _case(g, (2,), 3, 4, 4, 4, dtype=torch.float64)
    out_ref, _ = expected_attention(q, key, v)
    out, _ = _attend(k, "attention on float64 inputs", q, key, v)
    assert_close(out, out_ref, "output for float64 inputs (keep the inputs' dtype)", atol=1e-9)


def _mask_diagnosis(w, w_unmasked, mask, what, slips):
    """Name the usual masking mistakes before comparing values; first a slip that is no masking mistake
    (``slips``: _scaling_hints on the masked scores), which would otherwise read as one."""
    if not torch.is_tensor(w) or w.shape != w_unmasked.shape:
        return  # the shape check that follows explains this
    for hint, slipped in slips.items():  # a key no query may see gives NaN in a softmax over the queries: 0 here
        if slipped.shape == w.shape and w.is_floating_point() and is_close(w.nan_to_num(0.0), slipped.nan_to_num(0.0)):
            raise AssertionError(f"weights of {what} is wrong: {hint}")
    leak = (w.nan_to_num(1.0).abs() * (~mask)).amax().item()
    if leak > 1e-6:
        if is_close(w, w_unmasked):
            raise AssertionError(f"{what}: the mask is ignored; fill the masked scores with -inf before the softmax")
        raise AssertionError(
            f"{what}: weights are non-zero where the mask is False: {INVERTED_MASK}. Fill the scores where the "
            f"mask is False (~mask) with -inf, not where it is True")
    sums = w.sum(-1)
    if torch.isfinite(sums).all() and not torch.allclose(sums, torch.ones_like(sums), atol=1e-4):
        raise AssertionError(
            f"{what}: the rows of the weights do not sum to 1. Apply the mask to the scores before the "
            f"softmax (masked scores become -inf), not to the weights after it")


def _masks_its_own_attention(k, q, key, v, mask, w_unmasked, out, w) -> bool:
    """True when the attention without a mask is already wrong (the reference part names why: a scale, say) and
    the masked attention is that same attention restricted to the allowed keys: the mask itself is applied right,
    so this part keeps its points. Softmax over a subset of the keys is the full softmax renormalised over it."""
    out_u, w_u = _attend(k, "attention without a mask, on the same inputs", q, key, v)
    if not torch.is_tensor(w_u) or w_u.shape != w_unmasked.shape or is_close(w_u, w_unmasked):
        return False
    kept = w_u * mask.expand(w_u.shape)
    own = kept / kept.sum(-1, keepdim=True)
    return is_close(w, own) and is_close(out, own @ v)


def scaled_dot_product_attention_mask(k):
    """Boolean masks (True = may attend) broadcast like PyTorch's: causal, padding, and both with heads;
    with T_q != T_k, a masked key's value cannot change the output."""
    g = seeded(4)
    t = 5
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    lengths = torch.tensor([5, 3])
    padding = (torch.arange(t)[None, :] < lengths[:, None])[:, None, :]  # (B, 1, T_k)
    cross = (torch.arange(6)[None, :] < torch.tensor([6, 4])[:, None])[:, None, :]  # (B, 1, T_k) with T_k = 6
    cases = [
        ("a causal mask (T, T)", (2,), t, causal),
        ("a padding mask (B, 1, T_k)", (2,), t, padding),
        ("causal & padding with heads (B, 1, T, T)", (2, 3), t, (causal & padding)[:, None]),
        ("a padding mask (B, 1, T_k) with T_q = 3 queries and T_k = 6 keys", (2,), 6, cross),
    ]
    for name, lead, t_k, mask in cases:
        t_q = 3 if t_k != t else t
        q, key, v = _case(g, lead, t_q, t_k, 4, 3)
        out_ref, w_ref = expected_attention(q, key, v, mask)
        w_unmasked = torch.softmax(q @ key.transpose(-2, -1) / 2.0, -1)
        what = f"attention with {name}"
        out, w = _attend(k, what, q, key, v, mask)
        if not _masks_its_own_attention(k, q, key, v, mask, w_unmasked, out, w):
            slips = _scaling_hints(q, key, v, mask)
            slips[ADDED_MASK] = added_mask(q @ key.transpose(-2, -1) / 2.0, mask)
            _mask_diagnosis(w, w_unmasked, mask, what, slips)
            assert_close(w, w_ref, f"weights of {what}")
            assert_close(out, out_ref, f"output of {what}")
        v2 = v.clone()
        v2[..., -1, :] += 100.0  # change a value only some queries may see
        out2, _ = _attend(k, what, q, key, v2, mask)
        sees_last = mask.expand(w_ref.shape)[..., -1]
        assert_close(out2[~sees_last], out[~sees_last],
                     f"output of queries that may not see the last key, with {name}, after changing that key's value")

"""causal_mask(size, device=None) -> (size, size) bool, True where key j <= query i, made on `device`."""
import torch
import torch.nn.functional as F

from lib.testing import assert_close

from ..common import INVERTED_MASK, seeded
from . import DTYPE_HINT, additive_problem, as_tensor, device_check, form_problem, mismatch, qkv, sdpa


def tril(size, diagonal=0):
    return torch.ones(size, size, dtype=torch.bool).tril(diagonal)


def causal_problem(mask, size, what):
    """The message naming what is wrong with a causal mask, or None when it is right."""
    as_tensor(mask, what)
    expected = tril(size)
    if tuple(mask.shape) == (1, size, size) and size > 1:
        return (f"{what} has shape {tuple(mask.shape)}, expected ({size}, {size}): return the (size, size) matrix "
                f"without a leading batch dimension; broadcasting adds the batch and head dimensions when needed")
    problem = form_problem(mask, (size, size), what)
    if problem:
        return problem
    if torch.equal(mask, expected):
        return None
    if size > 1 and torch.equal(mask, tril(size, -1)):
        return (f"{what} is False on the diagonal: a token must attend to itself, so the mask is True where "
                f"j <= i (key j, query i), the diagonal included. Slides that write j < i are wrong (an erratum): "
                f"with j < i the first token has no key at all, its scores are all -inf and its weights "
                f"0/0 = NaN, and every token loses its own content. Use .tril() (diagonal=0), not tril(-1) or "
                f"the complement of triu(0)")
    if size > 1 and torch.equal(mask, expected.T):
        return (f"{what} is the upper triangle (True where j >= i): each token would see the future and not "
                f"the past. Keep the lower triangle, True where key j <= query i: .tril(), not .triu()")
    if size > 1 and torch.equal(mask, ~expected):
        return (f"{what} is True where attention is blocked: {INVERTED_MASK}: True where j <= i")
    if mask.all():
        return f"{what} is True everywhere: it masks nothing; keep only j <= i (the lower triangle)"
    return mismatch(mask, expected, what)


def causal_mask_values(k):
    """Bool (size, size), True exactly where j <= i, for several sizes; on the CPU by default and for 'cpu'."""
    fn = k.student("causal_mask")
    for size, kwargs in [(5, {}), (1, {}), (2, {}), (8, {}), (3, {"device": "cpu"})]:
        what = f"causal_mask({size}{', device=' + repr(kwargs['device']) if kwargs else ''})"
        problem = causal_problem(k.call(what, fn, size, **kwargs), size, what)
        if problem:
            raise AssertionError(problem)


def causal_mask_attention(k):
    """Used in attention, the mask lets no information in from the future, lets every token see itself and
    all earlier tokens, and broadcasts against (B, T, T) and (B, h, T, T) scores and with a padding mask."""
    g = seeded(40)
    t = 6
    what = f"causal_mask({t})"
    mask = as_tensor(k.call(what, k.student("causal_mask"), t), what)
    if mask.dtype != torch.bool:
        raise AssertionError(additive_problem(mask, what) or f"{what} has dtype {mask.dtype}: {DTYPE_HINT}")
    named = causal_problem(mask, t, what)
    suffix = f" ({named})" if named else ""
    empty = ~mask.any(-1) if mask.dim() >= 2 and mask.shape[-2:] == (t, t) else torch.zeros(1, dtype=torch.bool)
    if empty.any():
        first = int(empty.nonzero()[0][-1])
        base = (f"in attention with {what}, query {first} may attend to no key at all: its scores are all -inf "
                f"and its weights 0/0 = NaN")
        raise AssertionError(f"{base}. {named}" if named else f"{base}. Every token must at least see itself")
    for lead in ((2,), (2, 3)):  # scores (B, T, T), then with heads (B, h, T, T)
        q, key, v = qkv(g, lead, t)
        out = sdpa(q, key, v, mask, what)
        for i in range(t):
            k2, v2 = key.clone(), v.clone()
            k2[..., i + 1:, :] = torch.randn(k2[..., i + 1:, :].shape, generator=g) * 3
            v2[..., i + 1:, :] = torch.randn(v2[..., i + 1:, :].shape, generator=g) * 3
            out2 = sdpa(q, k2, v2, mask, what)
            if not torch.allclose(out2[..., : i + 1, :], out[..., : i + 1, :], atol=1e-6):
                raise AssertionError(
                    f"in attention with {what}, the output at position {i} changes when the tokens after it "
                    f"change: information leaks from the future. Query i may see key j only when j <= i{suffix}")
            for j in range(i + 1):  # key j <= i: itself and every earlier token must count
                v3 = v.clone()
                v3[..., j, :] += 5.0
                out3 = sdpa(q, key, v3, mask, what)
                if torch.allclose(out3[..., i, :], out[..., i, :], atol=1e-6):
                    who = "itself" if j == i else f"the earlier token {j}"
                    raise AssertionError(
                        f"in attention with {what}, the output at position {i} does not depend on {who}: "
                        f"a token must see itself and every token before it (True where j <= i){suffix}")
    pad = torch.tensor([[True] * (t - 1) + [False], [True] * (t - 3) + [False] * 3])[:, None, :]  # (B, 1, T)
    try:
        combined = (pad & mask).unsqueeze(1)
    except RuntimeError as e:
        raise AssertionError(f"{what} & a padding mask (B, 1, T) fails: {str(e).splitlines()[0]}") from None
    q, key, v = qkv(g, (2, 3), t)
    expected = F.scaled_dot_product_attention(q, key, v, attn_mask=(pad & tril(t)).unsqueeze(1))
    assert_close(sdpa(q, key, v, combined, f"({what} & padding).unsqueeze(1)"), expected,
                 f"attention with (padding & {what}).unsqueeze(1) and 3 heads")


def causal_mask_device(k):
    """causal_mask(size, device=d) makes the mask on d directly (checked with the data-free 'meta' device)."""
    fn = k.student("causal_mask")
    hint = ("create the mask directly on `device`, e.g. torch.ones(size, size, dtype=torch.bool, "
            "device=device).tril()")
    device_check(k, fn, (5,), {"device": "meta"}, "causal_mask(5, device='meta')", "meta", hint)
    device_check(k, fn, (4,), {"device": torch.device("meta")},
                 "causal_mask(4, device=torch.device('meta'))", "meta", hint)

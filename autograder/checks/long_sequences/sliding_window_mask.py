"""sliding_window_mask(T, window, causal=False, device=None) -> (T, T) bool, True where |i - j| <= window
(and j <= i when causal), made on `device`."""
import torch
import torch.nn.functional as F

from ..common import seeded
from ..masking import as_tensor, device_check, form_problem, mismatch

CASES = [  # T, window, causal; a window of 3 first, where `window // 2` and `< window` differ from each other
    (9, 3, False), (6, 1, False), (7, 2, False), (5, 0, False), (4, 6, False), (1, 2, False),
    (8, 3, True), (6, 2, True), (7, 0, True), (1, 3, True), (4, 9, True),
]


def window(T, w, causal=False, strict=False, device=None):
    """The mask computed here, or with one mistake put in on purpose."""
    i = torch.arange(T, device=device)
    offset = i[:, None] - i[None, :]           # i - j
    mask = offset.abs() < w if strict else offset.abs() <= w
    return mask & (offset >= 0) if causal else mask


def call_str(T, w, causal, device=None):
    extra = ", causal=True" if causal else ""
    extra += f", device={device!r}" if device is not None else ""
    return f"sliding_window_mask({T}, {w}{extra})"


def window_problem(mask, T, w, causal, what):
    """The message naming what is wrong with a sliding-window mask, or None when it is right."""
    as_tensor(mask, what)
    expected = window(T, w, causal)
    problem = form_problem(mask, (T, T), what)
    if problem:
        return problem
    if torch.equal(mask, expected):
        return None
    if w >= 3 and torch.equal(mask, window(T, w // 2, causal)):
        return (f"{what} reads the window as its total width (Longformer's attention_window): each side gets "
                f"window // 2. Here `window` is the reach on each side: True where |i - j| <= window")
    if torch.equal(mask, window(T, w, causal, strict=True)):
        return (f"{what} is off by one: it keeps |i - j| < window, so a token does not see the neighbours exactly "
                f"`window` positions away{' (and with window=0 not even itself)' if w == 0 else ''}. The window "
                f"includes its edge: True where |i - j| <= window")
    if torch.equal(mask, ~expected):
        return (f"{what} is inverted: it is True where attention is blocked. In this course True = may attend: "
                f"True where |i - j| <= window")
    if causal:
        if torch.equal(mask, window(T, w)):
            return (f"{what} ignores causal=True: it keeps the keys after the query too. With causal=True keep only "
                    f"the past part of the window, j <= i (and i - j <= window)")
        if torch.equal(mask, expected & ~torch.eye(T, dtype=torch.bool)):
            return (f"{what} is False on the diagonal: a token must see itself, so the causal window is "
                    f"0 <= i - j <= window, diagonal included (j <= i, not j < i)")
        if torch.equal(mask, expected.T):
            return (f"{what} keeps the wrong side of the window: the keys after the query (j >= i), the future. "
                    f"A causal window keeps the past: j <= i")
    elif T > 1 and torch.equal(mask, window(T, w, causal=True)):
        return (f"{what} keeps only the past side of the window although causal=False: without causal, a token "
                f"sees its neighbours on both sides, |i - j| <= window")
    elif T > 1 and torch.equal(mask, window(T, w, causal=True).T):
        return (f"{what} keeps only the side after the query although causal=False: a token sees its neighbours "
                f"on both sides, |i - j| <= window")
    if mask.all():
        return f"{what} is True everywhere: keep only the keys with |i - j| <= window"
    return mismatch(mask, expected, what)


def sliding_window_mask_values(k):
    """Bool (T, T), True exactly where |i - j| <= window, for windows 0 to wider than the sequence, T = 1 to 9."""
    fn = k.student("sliding_window_mask")
    for T, w, causal in CASES:
        if causal:
            continue
        what = call_str(T, w, causal)
        problem = window_problem(k.call(what, fn, T, w), T, w, causal, what)
        if problem:
            raise AssertionError(problem)
    what = call_str(5, 1, False, "cpu")
    problem = window_problem(k.call(what, fn, 5, 1, device="cpu"), 5, 1, False, what)
    if problem:
        raise AssertionError(problem)


def sliding_window_mask_causal(k):
    """With causal=True: True exactly where 0 <= i - j <= window; and used in attention, the output at position
    i depends on the inputs i - window ... i only."""
    fn = k.student("sliding_window_mask")
    for T, w, causal in CASES:
        if not causal:
            continue
        what = call_str(T, w, causal)
        problem = window_problem(k.call(what, fn, T, w, causal=True), T, w, causal, what)
        if problem:
            raise AssertionError(problem)
    T, w = 8, 2
    what = call_str(T, w, True)
    mask = as_tensor(k.call(what, fn, T, w, causal=True), what)
    g = seeded(90)
    q, key, v = (torch.randn(2, T, 4, generator=g) for _ in range(3))
    out = F.scaled_dot_product_attention(q, key, v, attn_mask=mask)
    expected = F.scaled_dot_product_attention(q, key, v, attn_mask=window(T, w, causal=True))
    if not torch.allclose(out, expected, atol=1e-6):
        raise AssertionError(f"attention with {what} differs from attention with the right mask: "
                             f"{window_problem(mask, T, w, True, what) or 'the masks differ'}")


def sliding_window_mask_device(k):
    """sliding_window_mask(T, window, device=d) makes the mask on d directly (checked with the data-free
    'meta' device), causal or not."""
    fn = k.student("sliding_window_mask")
    hint = ("create the mask directly on `device`, e.g. from i = torch.arange(T, device=device), then compare "
            "i[:, None] - i[None, :] with the window")
    device_check(k, fn, (6, 2), {"device": "meta"}, call_str(6, 2, False, "meta"), "meta", hint)
    device_check(k, fn, (5, 1), {"causal": True, "device": torch.device("meta")},
                 "sliding_window_mask(5, 1, causal=True, device=torch.device('meta'))", "meta", hint)

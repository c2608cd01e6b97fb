"""Hidden checks of notebook 04 (masking).

Each function is one graded test cell. A mask is checked three ways: its
values against the reference (with the usual mistakes named), its effect
inside attention (PyTorch's ``F.scaled_dot_product_attention``, run outside
the ban on the student's mask: nothing leaks from the future, padding changes
nothing for real tokens, the shapes broadcast with heads), and its device
(the 'meta' device: no data, but every tensor records where it was made).
"""
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from lib.testing import assert_close, first_difference

from .common import call, seeded, student_code

BANNED = ()  # no PyTorch operator builds these masks for you; the references are what must stay off
REFERENCES = ("causal_mask", "padding_mask")

DTYPE_HINT = ("a mask must be boolean (dtype=torch.bool), True = may attend. A float 0/1 mask is not a boolean "
              "mask: attention functions such as F.scaled_dot_product_attention add a float mask to the scores, "
              "so 0 and 1 block nothing, and masked_fill refuses anything but bool. Create it with "
              "dtype=torch.bool or end with .bool()")


def _graded(namespace=None):
    return student_code(namespace, ops=BANNED, references=REFERENCES)


def _as_tensor(result, what):
    if not torch.is_tensor(result):
        raise AssertionError(f"{what} should return a tensor, got {type(result).__name__}")
    return result


def _mismatch(actual, expected, what):
    diff = first_difference(actual, expected, 0, 0)
    idx, a, e = diff
    return f"{what} differs from the expected mask: first at index {idx}, got {bool(a)}, expected {bool(e)}"


# --- causal_mask -------------------------------------------------------------

def _tril(size, diagonal=0):
    return torch.ones(size, size, dtype=torch.bool).tril(diagonal)


def causal_problem(mask, size, what):
    """The message naming what is wrong with a causal mask, or None when it is right."""
    if not torch.is_tensor(mask):
        return f"{what} should return a tensor, got {type(mask).__name__}"
    expected = _tril(size)
    if tuple(mask.shape) == (1, size, size) and size > 1:
        return (f"{what} has shape {tuple(mask.shape)}, expected ({size}, {size}): return the (size, size) matrix "
                f"without a leading batch dimension; broadcasting adds the batch and head dimensions when needed")
    if tuple(mask.shape) != (size, size):
        return f"{what} has shape {tuple(mask.shape)}, expected ({size}, {size})"
    if mask.dtype != torch.bool:
        return f"{what} has dtype {mask.dtype}: {DTYPE_HINT}"
    m = mask.cpu()
    if torch.equal(m, expected):
        return None
    if size > 1 and torch.equal(m, _tril(size, -1)):
        return (f"{what} is False on the diagonal: a token must attend to itself, so the mask is True where "
                f"j <= i (key j, query i), the diagonal included. Slides that write j < i are wrong (an erratum): "
                f"with j < i the first token has no key at all, its scores are all -inf and its weights "
                f"0/0 = NaN, and every token loses its own content. Use .tril() (diagonal=0), not tril(-1) or "
                f"the complement of triu(0)")
    if size > 1 and torch.equal(m, expected.T):
        return (f"{what} is the upper triangle (True where j >= i): each token would see the future and not "
                f"the past. Keep the lower triangle, True where key j <= query i: .tril(), not .triu()")
    if size > 1 and torch.equal(m, ~expected):
        return (f"{what} is inverted: it is True where attention is blocked (the convention of "
                f"nn.MultiheadAttention's attn_mask). In this course True = may attend: True where j <= i")
    if m.all():
        return f"{what} is True everywhere: it masks nothing; keep only j <= i (the lower triangle)"
    return _mismatch(m, expected, what)


def causal_mask_values(causal_mask, namespace=None):
    """Bool (size, size), True exactly where j <= i, for several sizes; on the CPU by default."""
    for size in (5, 1, 2, 8):
        what = f"causal_mask({size})"
        with _graded(namespace):
            mask = call(what, causal_mask, size)
        problem = causal_problem(mask, size, what)
        if problem:
            raise AssertionError(problem)
    with _graded(namespace):
        mask = call("causal_mask(3, device='cpu')", causal_mask, 3, device="cpu")
    problem = causal_problem(mask, 3, "causal_mask(3, device='cpu')")
    if problem:
        raise AssertionError(problem)
    if mask.device.type != "cpu":
        raise AssertionError(f"causal_mask(3, device='cpu') is on {mask.device}, expected the CPU")


def _sdpa(q, k, v, mask, what, suffix=""):
    try:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    except RuntimeError as e:
        raise AssertionError(
            f"{what} of shape {tuple(mask.shape)} cannot be used against attention scores of shape "
            f"{tuple(q.shape[:-1]) + (k.shape[-2],)}: {str(e).splitlines()[0]}{suffix}") from None


def _qkv(g, lead, t, d=4):
    return tuple(torch.randn(*lead, t, d, generator=g) for _ in range(3))


def causal_mask_attention(causal_mask, namespace=None):
    """Used in attention, the mask lets no information in from the future, lets every token see itself and
    all earlier tokens, and broadcasts against (B, T, T) and (B, h, T, T) scores."""
    g = seeded(40)
    t = 6
    what = f"causal_mask({t})"
    with _graded(namespace):
        mask = _as_tensor(call(what, causal_mask, t), what)
    if mask.dtype != torch.bool:
        raise AssertionError(f"{what} has dtype {mask.dtype}: {DTYPE_HINT}")
    named = causal_problem(mask, t, what)
    suffix = f" ({named})" if named else ""
    empty = ~mask.any(-1) if mask.dim() >= 2 and mask.shape[-2:] == (t, t) else torch.zeros(1, dtype=torch.bool)
    if empty.any():
        first = int(empty.nonzero()[0][-1])
        base = (f"in attention with {what}, query {first} may attend to no key at all: its scores are all -inf "
                f"and its weights 0/0 = NaN")
        raise AssertionError(f"{base}. {named}" if named else f"{base}. Every token must at least see itself")
    for lead in ((2,), (2, 3)):  # scores (B, T, T), then with heads (B, h, T, T)
        q, k, v = _qkv(g, lead, t)
        out = _sdpa(q, k, v, mask, what)
        for i in range(t):
            k2, v2 = k.clone(), v.clone()
            k2[..., i + 1:, :] = torch.randn(k2[..., i + 1:, :].shape, generator=g) * 3
            v2[..., i + 1:, :] = torch.randn(v2[..., i + 1:, :].shape, generator=g) * 3
            out2 = _sdpa(q, k2, v2, mask, what)
            if not torch.allclose(out2[..., : i + 1, :], out[..., : i + 1, :], atol=1e-6):
                raise AssertionError(
                    f"in attention with {what}, the output at position {i} changes when the tokens after it "
                    f"change: information leaks from the future. Query i may see key j only when j <= i{suffix}")
            for j in range(i + 1):  # key j <= i: itself and every earlier token must count
                v3 = v.clone()
                v3[..., j, :] += 5.0
                out3 = _sdpa(q, k, v3, mask, what)
                if torch.allclose(out3[..., i, :], out[..., i, :], atol=1e-6):
                    who = "itself" if j == i else f"the earlier token {j}"
                    raise AssertionError(
                        f"in attention with {what}, the output at position {i} does not depend on {who}: "
                        f"a token must see itself and every token before it (True where j <= i){suffix}")
    pad = torch.tensor([[True] * t, [True] * (t - 2) + [False] * 2])[:, None, :]  # (B, 1, T)
    try:
        combined = (pad & mask).unsqueeze(1)
    except RuntimeError as e:
        raise AssertionError(f"{what} & a padding mask (B, 1, T) fails: {str(e).splitlines()[0]}") from None
    q, k, v = _qkv(g, (2, 3), t)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=(pad & _tril(t)).unsqueeze(1))
    assert_close(_sdpa(q, k, v, combined, f"({what} & padding).unsqueeze(1)"), expected,
                 f"attention with (padding & {what}).unsqueeze(1) and 3 heads")


class _Recorder(TorchDispatchMode):
    """Notes every tensor that an operator makes, with its device."""

    def __init__(self):
        super().__init__()
        self.made = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for o in out if isinstance(out, (tuple, list)) else (out,):
            if torch.is_tensor(o):
                self.made.append((func.overloadpacket.__name__, o.device.type, tuple(o.shape)))
        return out


def _device_check(fn, args, kwargs, what, target, hint):
    def run():
        try:
            return fn(*args, **kwargs)
        except NotImplementedError as e:
            if not str(e):
                raise  # the unfilled exercise
            raise RuntimeError(f"{str(e).splitlines()[0]} (a tensor made on the CPU cannot take values from one "
                               f"on another device)") from None

    recorder = _Recorder()
    with recorder:
        mask = _as_tensor(call(what, run, hint=hint), what)
    if mask.device.type != target:
        raise AssertionError(f"{what} returned a mask on the {mask.device} device, expected '{target}': {hint}")
    on_cpu = [(op, shape) for op, dev, shape in recorder.made if dev == "cpu" and len(shape) > 0]
    if on_cpu:
        op, shape = on_cpu[0]
        raise AssertionError(
            f"{what} made a tensor of shape {shape} on the CPU (operator '{op}') and moved it: {hint}. On a GPU, "
            f"building on the CPU and copying costs a transfer at every call")


def causal_mask_device(causal_mask, namespace=None):
    """causal_mask(size, device=d) makes the mask on d directly (checked with the data-free 'meta' device)."""
    hint = ("create the mask directly on `device`, e.g. torch.ones(size, size, dtype=torch.bool, "
            "device=device).tril()")
    with _graded(namespace):
        _device_check(causal_mask, (5,), {"device": "meta"}, "causal_mask(5, device='meta')", "meta", hint)
        _device_check(causal_mask, (4,), {"device": torch.device("meta")},
                      "causal_mask(4, device=torch.device('meta'))", "meta", hint)


# --- padding_mask ------------------------------------------------------------

def _padded_tokens(g, lengths, t, pad_id, vocab=9, left=False):
    """(B, T) random ids in [0, vocab) other than pad_id, padded with pad_id to length t."""
    rows = []
    for n in lengths:
        ids = torch.randint(0, vocab - 1, (n,), generator=g)
        ids = ids + (ids >= pad_id).long()  # skip pad_id; 0 stays a real token when pad_id != 0
        pads = torch.full((t - n,), pad_id)
        rows.append(torch.cat([pads, ids]) if left else torch.cat([ids, pads]))
    return torch.stack(rows)


def padding_problem(mask, tokens, pad_id, what):
    """The message naming what is wrong with a padding mask, or None when it is right."""
    if not torch.is_tensor(mask):
        return f"{what} should return a tensor, got {type(mask).__name__}"
    b, t = tokens.shape
    keys = tokens != pad_id                      # (B, T): True at real tokens
    expected = keys[:, None, :]
    shape = tuple(mask.shape)
    if shape == (b, t):
        return (f"{what} has shape (B, T) = {shape}; expected (B, 1, T) = {(b, 1, t)}. Without the middle 1, "
                f"broadcasting against the scores (B, T_q, T_k) lines the batch up with the queries. Add it "
                f"with .unsqueeze(1) or [:, None, :]")
    if shape == (b, t, 1):
        return (f"{what} has shape (B, T, 1) = {shape}: that masks the queries (rows of the scores), not the "
                f"keys (columns). Padding is hidden as a key: the shape is (B, 1, T) = {(b, 1, t)}")
    if shape == (b, t, t):
        return (f"{what} has shape (B, T, T) = {shape}; expected (B, 1, T) = {(b, 1, t)}: one row per sentence "
                f"that broadcasts over all the queries (combine it with a causal mask by & to get (B, T, T))")
    if shape != (b, 1, t):
        return f"{what} has shape {shape}, expected (B, 1, T) = {(b, 1, t)}"
    if mask.dtype != torch.bool:
        return f"{what} has dtype {mask.dtype}: {DTYPE_HINT}"
    m = mask.cpu()
    if torch.equal(m, expected):
        return None
    if torch.equal(m, ~expected):
        return (f"{what} is True at the padding: True means 'may attend', so the mask is True where the token "
                f"is NOT padding (tokens != pad_id)")
    if pad_id != 0 and torch.equal(m, (tokens != 0)[:, None, :]):
        return (f"{what} treats 0 as the padding id and ignores the pad_id argument ({pad_id}): "
                f"compare the tokens with pad_id")
    if m.all():
        return f"{what} is True everywhere: the padding tokens (== pad_id) must be False"
    return _mismatch(m, expected, what)


def padding_mask_values(padding_mask, namespace=None):
    """(B, 1, T) bool, True where the token is not pad_id: right and left padding, pad_id 0 and others."""
    g = seeded(41)
    cases = [  # lengths, T, pad_id, left padding?
        ((5, 3, 1), 5, 0, False),
        ((4, 6), 6, 3, False),
        ((2, 5, 7, 1), 7, 1, True),
        ((3,), 3, 0, False),
    ]
    for lengths, t, pad_id, left in cases:
        tokens = _padded_tokens(g, lengths, t, pad_id, left=left)
        what = f"padding_mask(tokens of shape {tuple(tokens.shape)}, pad_id={pad_id})"
        with _graded(namespace):
            mask = call(what, padding_mask, tokens, pad_id)
        problem = padding_problem(mask, tokens, pad_id, what)
        if problem:
            raise AssertionError(problem)


def padding_mask_attention(padding_mask, namespace=None):
    """Used in attention, alone and with a causal mask and heads: the outputs of real tokens do not depend on the
    padding, and equal those of the reference mask."""
    g = seeded(42)
    b, t, pad_id = 3, 6, 2
    tokens = _padded_tokens(g, (6, 4, 2), t, pad_id)
    what = f"padding_mask(tokens of shape {(b, t)}, pad_id={pad_id})"
    with _graded(namespace):
        mask = _as_tensor(call(what, padding_mask, tokens, pad_id), what)
    if mask.dtype != torch.bool:
        raise AssertionError(f"{what} has dtype {mask.dtype}: {DTYPE_HINT}")
    named = padding_problem(mask, tokens, pad_id, what)
    suffix = f" ({named})" if named else ""
    real = tokens != pad_id          # (B, T) real queries
    ref = real[:, None, :]
    causal = _tril(t)
    setups = [  # name, lead dims of q/k/v, the student's mask as used, the reference mask
        ("scores (B, T, T)", (b,), lambda m: m, ref),
        ("causal & padding, scores (B, T, T)", (b,), lambda m: causal & m, causal & ref),
        ("(causal & padding).unsqueeze(1) with 4 heads, scores (B, h, T, T)", (b, 4),
         lambda m: (causal & m).unsqueeze(1), (causal & ref).unsqueeze(1)),
    ]
    for name, lead, use, ref_mask in setups:
        try:
            used = use(mask)
        except RuntimeError as e:
            raise AssertionError(f"{what} does not combine with a causal mask ({name}): "
                                 f"{str(e).splitlines()[0]}{suffix}") from None
        q, k, v = _qkv(g, lead, t)
        out = _sdpa(q, k, v, used, what, suffix)
        if out.shape != q.shape:
            raise AssertionError(f"attention with {what} ({name}) gives outputs of shape {tuple(out.shape)}, "
                                 f"expected {tuple(q.shape)}: the mask broadcasts the wrong way{suffix}")
        pad_at = (~real).view(b, *([1] * (len(lead) - 1)), t, 1)
        k2 = torch.where(pad_at, torch.randn(k.shape, generator=g) * 5, k)
        v2 = torch.where(pad_at, torch.randn(v.shape, generator=g) * 5, v)
        out2 = _sdpa(q, k2, v2, used, what)
        sel = real.view(b, *([1] * (len(lead) - 1)), t).expand(out.shape[:-1])
        if not torch.allclose(out2[sel], out[sel], atol=1e-6):
            raise AssertionError(
                f"attention with {what} ({name}): the outputs of real tokens change when the padding tokens "
                f"change, so padding leaks into real tokens. The mask must be False at the padding keys{suffix}")
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=ref_mask)
        if not torch.allclose(out[sel], expected[sel], atol=1e-5):
            raise AssertionError(
                f"attention with {what} ({name}): the outputs of real tokens differ from those with the right "
                f"mask, so real tokens are hidden from each other{suffix or ': only padding may be masked'}")


def padding_mask_device(padding_mask, namespace=None):
    """The mask is made on the tokens' device (checked with the data-free 'meta' device)."""
    hint = "derive the mask from the tokens themselves (tokens != pad_id) so it lives on tokens.device"
    tokens = torch.randint(0, 5, (3, 7), device="meta")
    with _graded(namespace):
        _device_check(padding_mask, (tokens, 0), {}, "padding_mask(tokens on the 'meta' device, 0)", "meta", hint)

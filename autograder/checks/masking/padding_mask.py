"""padding_mask(tokens, pad_id) -> (B, 1, T) bool, True where the token is not pad_id, on tokens.device."""
import torch
import torch.nn.functional as F

from ..common import INVERTED_MASK, seeded
from . import DTYPE_HINT, additive_problem, as_tensor, device_check, mismatch, qkv, sdpa


def padded_tokens(g, lengths, t, pad_id, vocab=9, left=False):
    """(B, T) random ids in [0, vocab) other than pad_id, padded with pad_id to length t. When pad_id != 0, the
    first row starts with a real 0 (a mask that takes 0 for the padding id must show it)."""
    rows = []
    for n in lengths:
        ids = torch.randint(0, vocab - 1, (n,), generator=g)
        ids = ids + (ids >= pad_id).long()  # skip pad_id; 0 stays a real token when pad_id != 0
        pads = torch.full((t - n,), pad_id)
        rows.append(torch.cat([pads, ids]) if left else torch.cat([ids, pads]))
    tokens = torch.stack(rows)
    if pad_id != 0:
        tokens[0, t - lengths[0] if left else 0] = 0
    return tokens


def padding_problem(mask, tokens, pad_id, what):
    """The message naming what is wrong with a padding mask, or None when it is right."""
    mask = as_tensor(mask, what)
    additive = additive_problem(mask, what)
    if additive:
        return additive
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
    if mask.device.type != tokens.device.type:
        return f"{what} is on the {mask.device} device, expected the tokens' device ({tokens.device})"
    if torch.equal(mask, expected):
        return None
    if torch.equal(mask, ~expected):
        return (f"{what} is True at the padding: {INVERTED_MASK}, so the mask is True where the token is NOT "
                f"padding (tokens != pad_id)")
    if pad_id != 0 and torch.equal(mask, (tokens != 0)[:, None, :]):
        return (f"{what} treats 0 as the padding id and ignores the pad_id argument ({pad_id}): "
                f"compare the tokens with pad_id")
    lengths = keys.sum(-1, keepdim=True)
    if torch.equal(mask, (torch.arange(t) < lengths)[:, None, :]):
        return (f"{what} assumes that the padding sits at the end of each row (it keeps the first `length` "
                f"positions), but these tokens are padded on the left: compare every token with pad_id")
    if mask.all():
        return f"{what} is True everywhere: the padding tokens (== pad_id) must be False"
    return mismatch(mask, expected, what)


def padding_mask_values(k):
    """(B, 1, T) bool, True where the token is not pad_id: right and left padding, padding in every row or
    not, pad_id 0 and others (with 0 then a real token)."""
    fn = k.student("padding_mask")
    g = seeded(41)
    cases = [  # lengths, T, pad_id, left padding?
        ((5, 3, 1), 5, 0, False),
        ((4, 6), 6, 3, False),
        ((2, 5, 7, 1), 7, 1, True),
        ((3,), 3, 0, False),
        ((4, 2, 5), 7, 9, False),  # padding in the longest row too
    ]
    for lengths, t, pad_id, left in cases:
        tokens = padded_tokens(g, lengths, t, pad_id, left=left)
        what = f"padding_mask(tokens of shape {tuple(tokens.shape)}, pad_id={pad_id})"
        problem = padding_problem(k.call(what, fn, tokens, pad_id), tokens, pad_id, what)
        if problem:
            raise AssertionError(problem)


def padding_mask_attention(k):
    """Used in attention, alone and with a causal mask and heads, on right- and left-padded batches: the outputs
    of real tokens do not depend on the padding, and equal those of the right mask (outputs at padding
    positions are not compared: nobody uses them)."""
    fn = k.student("padding_mask")
    g = seeded(42)
    b, t, pad_id = 3, 7, 2
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    batches = [  # padding inside the batch and in the longest row; on the left, the causal mask cannot hide it
        ("right-padded", padded_tokens(g, (6, 4, 2), t, pad_id)),
        ("left-padded", padded_tokens(g, (5, 7, 3), t, pad_id, left=True)),
    ]
    for side, tokens in batches:
        what = f"padding_mask({side} tokens of shape {(b, t)}, pad_id={pad_id})"
        mask = as_tensor(k.call(what, fn, tokens, pad_id), what)
        if mask.dtype != torch.bool:
            raise AssertionError(additive_problem(mask, what) or f"{what} has dtype {mask.dtype}: {DTYPE_HINT}")
        named = padding_problem(mask, tokens, pad_id, what)
        suffix = f" ({named})" if named else ""
        real = tokens != pad_id          # (B, T) real queries
        ref = real[:, None, :]
        setups = [  # name, lead dims of q/k/v, the student's mask as used, the right mask
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
            q, key, v = qkv(g, lead, t)
            out = sdpa(q, key, v, used, what, suffix)
            if out.shape != q.shape:
                raise AssertionError(f"attention with {what} ({name}) gives outputs of shape {tuple(out.shape)}, "
                                     f"expected {tuple(q.shape)}: the mask broadcasts the wrong way{suffix}")
            pad_at = (~real).view(b, *([1] * (len(lead) - 1)), t, 1)
            k2 = torch.where(pad_at, torch.randn(key.shape, generator=g) * 5, key)
            v2 = torch.where(pad_at, torch.randn(v.shape, generator=g) * 5, v)
            out2 = sdpa(q, k2, v2, used, what)
            sel = real.view(b, *([1] * (len(lead) - 1)), t).expand(out.shape[:-1])
            if not torch.allclose(out2[sel], out[sel], atol=1e-6):
                raise AssertionError(
                    f"attention with {what} ({name}): the outputs of real tokens change when the padding tokens "
                    f"change, so padding leaks into real tokens. The mask must be False at the padding keys{suffix}")
            expected = F.scaled_dot_product_attention(q, key, v, attn_mask=ref_mask)
            if not torch.allclose(out[sel], expected[sel], atol=1e-5):
                raise AssertionError(
                    f"attention with {what} ({name}): the outputs of real tokens differ from those with the right "
                    f"mask, so real tokens are hidden from each other{suffix or ': only padding may be masked'}")


def padding_mask_device(k):
    """The mask is made on the tokens' device (checked with the data-free 'meta' device)."""
    hint = "derive the mask from the tokens themselves (tokens != pad_id) so it lives on tokens.device"
    tokens = torch.randint(0, 5, (3, 7), device="meta")
    device_check(k, k.student("padding_mask"), (tokens, 0), {}, "padding_mask(tokens on the 'meta' device, 0)",
                 "meta", hint)

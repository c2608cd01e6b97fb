"""apply_rotary(x, positions): rotate each feature pair (2i, 2i+1) of x (..., T, d) by positions * 10000^(-2i/d);
ValueError for odd d. Then rot(q, i) . rot(k, j) depends on i - j only."""
import torch

from lib.testing import assert_close

from ..common import seeded
from ..kernel import StudentError
from ..masking import device_check

PAIRS_HINT = ("x[..., 0::2] and x[..., 1::2] are the two halves of the pairs (2i, 2i+1); stack the rotated halves "
              "on a new last dimension and flatten it to interleave them again")


def rotary(x, positions, halves=False, freq="2i/d", sign=1.0, ignore_positions=False, swap=False, base=10000.0,
           freqs=None):
    """The rotation computed here (in float64), or with one mistake put in on purpose (``freqs``: the
    frequency of each pair, (d/2,), instead of base^(-2i/d))."""
    d = x.shape[-1]
    p = torch.arange(x.shape[-2]) if ignore_positions else positions
    i = torch.arange(d // 2, dtype=torch.float64)
    exponent = {"2i/d": -2 * i / d, "i/d": -i / d, "+2i/d": 2 * i / d}[freq]
    angle = p.to(torch.float64)[..., None] * (base ** exponent if freqs is None else freqs)   # (T, d/2)
    cos, sin = angle.cos(), sign * angle.sin()
    if swap:
        cos, sin = sin, cos
    xd = x.double()
    if halves:
        a, b = xd[..., : d // 2], xd[..., d // 2:]
        return torch.cat((a * cos - b * sin, a * sin + b * cos), -1).to(x.dtype)
    a, b = xd[..., 0::2], xd[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(-2).to(x.dtype)


def _hints(x, positions):
    d = x.shape[-1]
    out = {
        "the pairs are the two halves of the vector (i, i + d/2); this exercise rotates the interleaved pairs "
        "(2i, 2i+1): " + PAIRS_HINT: rotary(x, positions, halves=True),
        f"the angles use 10000^(-i/d) for pair i; pair i (features 2i and 2i+1) turns by p * 10000^(-2i/d), as in "
        f"notebook 02's table (here d = {d})": rotary(x, positions, freq="i/d"),
        "the frequencies are 10000^(+2i/d), which grow with i: divide by 10000^(2i/d), i.e. multiply by "
        "10000^(-2i/d)": rotary(x, positions, freq="+2i/d"),
        "the rotation goes the wrong way (a sign error): (a, b) -> (a cos t - b sin t, a sin t + b cos t)":
            rotary(x, positions, sign=-1.0),
        "cos and sin are swapped: (a, b) -> (a cos t - b sin t, a sin t + b cos t)": rotary(x, positions, swap=True),
    }
    if not torch.equal(positions, torch.arange(x.shape[-2])):
        out["the positions argument is ignored: the rotation uses 0, 1, ..., T-1 instead of the given positions"] = \
            rotary(x, positions, ignore_positions=True)
        start = positions[0] + torch.arange(x.shape[-2], dtype=positions.dtype)
        if not torch.equal(positions, start):  # LLaMA's freqs_cis[start_pos : start_pos + T]
            out["the rotation uses consecutive positions from the first one (p0, p0 + 1, ...), as LLaMA's "
                "freqs_cis[start_pos : start_pos + T] does; rotate each row by its own given position, positions[t], "
                "which need not be consecutive or in order"] = rotary(x, start)
    return out


CASES = [  # shape of x, positions, dtype
    ((2, 5, 8), torch.arange(5), torch.float32),
    ((3, 2, 6, 4), torch.arange(6) + 3, torch.float32),
    ((6, 4), torch.tensor([4, 0, 7, 2, 9, 1]), torch.float32),
    ((2, 3, 16), torch.tensor([0.5, 12.25, 100.0]), torch.float32),
    ((1, 1, 6), torch.tensor([37]), torch.float32),
    ((2, 4, 10), torch.arange(4) * 5, torch.float64),
]


def _what(shape, positions, dtype):
    dt = "" if dtype == torch.float32 else f", {str(dtype).replace('torch.', '')}"
    return f"apply_rotary(x of shape {shape}{dt}, positions={positions.tolist()})"


def apply_rotary_values(k):
    """Equals the rotation computed here on vectors with and without leading dims, integer and fractional
    positions not in order, T = 1, d from 4 to 16, float32 and float64 (the output keeps x's dtype)."""
    fn = k.student("apply_rotary")
    g = seeded(93)
    for shape, positions, dtype in CASES:
        x = torch.randn(*shape, generator=g, dtype=dtype)
        what = _what(shape, positions, dtype)
        out = k.call(what, fn, x, positions, hint=PAIRS_HINT, no_grad=True)
        expected = rotary(x, positions)
        if torch.is_tensor(out) and out.dtype != dtype and out.shape == expected.shape:
            raise AssertionError(f"{what} returns dtype {out.dtype}: keep the dtype of x ({dtype})")
        _partly_rotated(out, x, expected, what)
        hints = _hints(x, positions)
        _other_frequencies(out, x, positions, what, hints)
        assert_close(out, expected, what, atol=1e-5, rtol=1e-4, hints=hints)


def _other_frequencies(out, x, positions, what, hints):
    """A rotation by p * f_i with other frequencies f_i than 10000^(-2i/d): another base (LLaMA 3's 500000, Mistral's
    10^6, a base scaled for longer contexts), or some pairs' frequencies rescaled (LLaMA 3.1's long-context scaling
    of the slow pairs). Each pair's frequency is read off its angle at the first position p in (0, 1]. A slip that
    ``hints`` names is named so (10000^(-i/d) is 100^(-2i/d), but the exponent is what went wrong)."""
    d = x.shape[-1]
    if not torch.is_tensor(out) or out.shape != x.shape or d < 4 or positions.dim() != 1:
        return
    if any(torch.allclose(out.double(), h.double(), atol=1e-5, rtol=1e-4) for h in hints.values()):
        return
    rows = [t for t, p in enumerate(positions.tolist()) if 0 < p <= 1]
    if not rows:
        return
    t, p = rows[0], float(positions[rows[0]])
    a, b = x[..., t, 0::2].double(), x[..., t, 1::2].double()
    a2, b2 = out[..., t, 0::2].double(), out[..., t, 1::2].double()
    freqs = torch.atan2(a * b2 - b * a2, a * a2 + b * b2).reshape(-1, d // 2)[0] / p   # (d/2,)
    ours = 10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
    if not torch.allclose(out.double(), rotary(x, positions, freqs=freqs).double(), atol=1e-4, rtol=1e-3):
        return  # not a rotation of each pair by p * f_i
    off = [i for i in range(d // 2) if abs(freqs[i] / ours[i] - 1) > 1e-3]
    if not off:
        return
    if 0 < freqs[1] < 1:
        base = freqs[1].item() ** (-d / 2)
        if torch.allclose(out.double(), rotary(x, positions, base=base).double(), atol=1e-4, rtol=1e-3):
            raise AssertionError(
                f"{what}: the frequencies use the base {base:.4g} (pair i turns by p * {base:.4g}^(-2i/d)); this "
                f"exercise uses 10000, as notebook 02's table and the RoFormer paper do: p * 10000^(-2i/d)")
    shown = ", ".join(f"pair {i} turns by p * {freqs[i]:.4g}, not p * {ours[i]:.4g}" for i in off[:3])
    raise AssertionError(
        f"{what}: the frequencies of {len(off)} of the {d // 2} pairs are changed ({shown}): they are rescaled, as "
        f"LLaMA 3.1's long-context scaling does. This exercise turns every pair i by p * 10000^(-2i/d), as notebook "
        f"02's table does")


def _partly_rotated(out, x, expected, what):
    """Features at the end left as they are, where the rotation moves them: only part of each vector is rotated
    (GPT-NeoX's rotary_pct, GPT-J's rotary_dim)."""
    if not torch.is_tensor(out) or out.shape != x.shape or out.dtype != x.dtype:
        return
    d = x.shape[-1]
    kept = 0
    while kept < d and torch.equal(out[..., d - 1 - kept], x[..., d - 1 - kept]):
        kept += 1
    moved = not torch.allclose(expected[..., d - kept:], x[..., d - kept:]) if kept else False
    if 0 < kept < d and moved:
        raise AssertionError(f"{what}: the last {kept} of {d} features come back unrotated: only part of each vector "
                             f"is rotated (GPT-NeoX's rotary_pct, GPT-J's rotary_dim). Rotate every pair (2i, 2i+1), "
                             f"i = 0 ... d/2 - 1")


def apply_rotary_relative(k):
    """What the rotation is for: the score rot(q, i) . rot(k, j) depends on i - j only (shifting every position by
    the same amount leaves all scores unchanged), and the rotation keeps the length of every vector."""
    fn = k.student("apply_rotary")
    g = seeded(94)
    T, d = 6, 8
    q, key = torch.randn(2, T, d, generator=g), torch.randn(2, T, d, generator=g)
    pos = torch.arange(T)
    rq, rk = k.call(f"apply_rotary(q of shape {(2, T, d)}, positions 0..{T - 1})", fn, q, pos, no_grad=True), \
        k.call(f"apply_rotary(k of shape {(2, T, d)}, positions 0..{T - 1})", fn, key, pos, no_grad=True)
    for name, value in (("q", rq), ("k", rk)):
        if not torch.is_tensor(value) or value.shape != q.shape:
            raise AssertionError(f"apply_rotary({name} of shape {(2, T, d)}, positions) should return a tensor of "
                                 f"the same shape, got {getattr(value, 'shape', type(value).__name__)}")
    if not torch.allclose(rq.norm(dim=-1), q.norm(dim=-1), atol=1e-4):
        raise AssertionError("apply_rotary changes the length of the vectors: a rotation keeps it. Each pair (a, b) "
                             "becomes (a cos t - b sin t, a sin t + b cos t), with the same angle t for a and b")
    for shift in (5, 40):
        sq = k.call(f"apply_rotary(q, positions {shift}..{shift + T - 1})", fn, q, pos + shift, no_grad=True)
        sk = k.call(f"apply_rotary(k, positions {shift}..{shift + T - 1})", fn, key, pos + shift, no_grad=True)
        before, after = rq @ rk.transpose(-2, -1), sq @ sk.transpose(-2, -1)
        if not torch.allclose(before, after, atol=1e-3, rtol=1e-4):
            diff = (before - after).abs()
            where = tuple(int(i) for i in (diff == diff.max()).nonzero()[0])
            raise AssertionError(
                f"with apply_rotary, the score of query i and key j changes when every position is shifted by "
                f"{shift} (first at (batch, i, j) = {where}: {before[where]:.5g} -> {after[where]:.5g}): it should "
                f"depend on i - j only. Rotate every pair by an angle proportional to the position, "
                f"p * 10000^(-2i/d), with nothing else depending on p")


def apply_rotary_edge_cases(k):
    """A ValueError for an odd number of features; the rotation is made on the device of x (the data-free 'meta'
    device: no tensor made on the CPU)."""
    fn = k.student("apply_rotary")
    for shape in ((2, 3, 5), (4, 1)):
        what = f"apply_rotary(x of shape {shape}, positions)"
        x = torch.zeros(shape)
        try:
            k.call(what, fn, x, torch.arange(shape[-2]))
        except StudentError as e:
            if "ValueError" in e.types:
                continue
            raise AssertionError(f"{what} should raise a ValueError (features come in pairs, so d must be even), "
                                 f"but it raised {e.kind}: {e.raw.splitlines()[0] if e.raw else ''}") from None
        raise AssertionError(f"{what} should raise a ValueError: features come in pairs (2i, 2i+1), so d must be "
                             f"even; check x.shape[-1] % 2 first")
    hint = ("make the frequencies on the device of x, e.g. torch.arange(0, d, 2, device=x.device), and move "
            "positions there with positions.to(x.device)")
    x = torch.zeros(2, 5, 8, device="meta")
    device_check(k, fn, (x, torch.arange(5, device="meta")), {}, "apply_rotary(x on the 'meta' device, positions)",
                 "meta", hint)

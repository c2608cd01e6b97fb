"""merge_heads(x): (..., h, T, d_k) -> (..., T, h * d_k), the exact inverse of split_heads."""
import torch

from lib.testing import assert_close, assert_shape

from ..common import seeded
from ..kernel import StudentError
from . import LEADING_HINT, NOT_CONTIGUOUS_HINT, leading_dims_lost, merge_expected, split_expected


def _hints(y):
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


def merge(k, what, y, hint=""):
    """The student's merge_heads(y); a .view that fails on a transposed tensor gets the contiguity hint."""
    try:
        return k.call(what, k.student("merge_heads"), y, hint=hint)
    except StudentError as e:
        if "view size is not compatible" in e.raw or "contiguous" in e.raw:
            raise AssertionError(f"{what} raised {e.kind}: {e.raw.split('. Use .reshape')[0]}: "
                                 f"{NOT_CONTIGUOUS_HINT}") from None
        raise


def merge_heads_layout(k):
    """(B, h, T, d/h) -> (B, T, d): head i's features land at i*d/h ... (i+1)*d/h - 1 of each position."""
    g = seeded(53)
    for shape in [(2, 3, 5, 4), (1, 2, 4, 4), (3, 4, 2, 2), (2, 1, 3, 6), (2, 2, 3, 4)]:
        y = torch.randn(shape, generator=g)
        what = f"merge_heads(x of shape {shape})"
        assert_close(merge(k, what, y), merge_expected(y), what, atol=0, rtol=0, hints=_hints(y))


def merge_heads_round_trip(k):
    """merge_heads(split_heads(x)) == x and split_heads(merge_heads(y)) == y, with any leading dims, float64."""
    g = seeded(54)
    for shape, h in [((2, 5, 12), 3), ((2, 3, 4, 8), 4), ((2, 1, 2, 3, 6), 2), ((3, 4, 10), 5)]:
        hint = LEADING_HINT if len(shape) > 3 else ""
        x = torch.randn(shape, generator=g, dtype=torch.float64)
        split = split_expected(x, h)
        what = f"merge_heads(split_heads(x of shape {shape}, {h}))"
        back = merge(k, what, split, hint=hint)
        leading_dims_lost(back, x.shape, what, split.dim())
        assert_close(back, x, what + " (the round trip must give x back)", atol=0, rtol=0, hints=_hints(split))
        y = torch.randn(*shape[:-2], h, shape[-2], shape[-1] // h, generator=g, dtype=torch.float64)
        what = f"split_heads(merge_heads(y of shape {tuple(y.shape)}), {h})"
        merged = merge(k, what, y, hint=hint)
        assert_shape(merged, (*shape[:-2], shape[-2], shape[-1]), f"merge_heads(y of shape {tuple(y.shape)})")
        assert_close(split_expected(merged, h), y, what + " (the round trip must give y back)", atol=0, rtol=0)

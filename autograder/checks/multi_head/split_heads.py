"""split_heads(x, n_heads): (..., T, d) -> (..., n_heads, T, d / n_heads), head i = features i*d/h ... ."""
import math

import torch

from lib.testing import assert_close, is_close

from ..common import seeded
from . import LEADING_HINT, leading_dims_lost, split_expected


def _hints(x, h):
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


def check_split(k, x, h, hint=""):
    what = f"split_heads(x of shape {tuple(x.shape)}, n_heads={h})"
    actual = k.call(what, k.student("split_heads"), x, h, hint=hint)
    *lead, t, d = x.shape
    if torch.is_tensor(actual) and tuple(actual.shape) == (math.prod(lead) * h, t, d // h) and h > 1:
        raise AssertionError(f"{what} has shape {tuple(actual.shape)}: the heads are folded into the batch axis, "
                             f"(B*h, T, d/h), as d2l's transpose_qkv does. Keep them as an axis of their own, "
                             f"(B, h, T, d/h) = {(*lead, h, t, d // h)}")
    leading_dims_lost(actual, (*lead, h, t, d // h), what, x.dim())
    try:
        assert_close(actual, split_expected(x, h), what, atol=0, rtol=0, hints=_hints(x, h))
    except AssertionError as e:
        if "differs from the expected" in str(e):
            raise AssertionError(f"{e}. Head i must hold features i*d/h ... (i+1)*d/h - 1 of every "
                                 f"position, unchanged") from None
        raise


def split_heads_layout(k):
    """(B, T, d) -> (B, h, T, d/h) with head i holding features i*d/h ... (i+1)*d/h - 1, exactly."""
    g = seeded(51)
    for b, t, d, h in [(2, 5, 12, 3), (1, 4, 8, 2), (3, 2, 16, 4), (2, 3, 6, 1), (2, 3, 6, 6)]:
        check_split(k, torch.randn(b, t, d, generator=g), h)
    check_split(k, torch.randn(2, 3, 8, generator=g, dtype=torch.float64), 2)


def split_heads_leading(k):
    """Works with any number of leading dims: (A, B, T, d) -> (A, B, h, T, d/h). Where the split of (B, T, d) is
    already wrong (split_heads_layout names why), judged against the student's own split of the same rows with one
    leading dim: the same slip does not cost this part too."""
    g = seeded(52)
    for shape, h in [((2, 3, 4, 8), 2), ((2, 1, 2, 5, 12), 4)]:
        x = torch.randn(shape, generator=g)
        *lead, t, d = shape
        flat = x.reshape(-1, t, d)
        own = k.call(f"split_heads(x of shape {tuple(flat.shape)}, n_heads={h})", k.student("split_heads"), flat, h)
        if not torch.is_tensor(own) or own.shape != (flat.shape[0], h, t, d // h) or is_close(own, split_expected(flat, h)):
            check_split(k, x, h, hint=LEADING_HINT)
            continue
        what = f"split_heads(x of shape {tuple(shape)}, n_heads={h})"
        actual = k.call(what, k.student("split_heads"), x, h, hint=LEADING_HINT)
        assert_close(actual, own.reshape(*lead, h, t, d // h), f"{what}, compared with your split of the same rows "
                     f"as {tuple(flat.shape)} (the leading dims must be kept as they are)", atol=0, rtol=0)

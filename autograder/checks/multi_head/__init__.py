"""Hidden tests of notebook 05 (multi-head attention), one module per exercise.

References: PyTorch's ``nn.MultiheadAttention`` and plain tensor code,
computed here in the grader, and the course's ``lib.multi_head``, run trusted
in the kernel for the earlier exercises (``MultiHeadAttention`` is tested with
the trusted ``split_heads`` and ``merge_heads``). Graded code may not call
PyTorch's fused attention operators (banned at the dispatcher), nor
``nn.MultiheadAttention`` or ``F.multi_head_attention_forward`` (in training
mode they run on bmm and softmax, which the dispatcher cannot tell apart), nor
the course's references.
"""
import torch

from ..kernel import Bans

REFERENCES = {  # exercise -> its references in lib.multi_head, in the notebook's order
    "split_heads": ("split_heads",),
    "merge_heads": ("merge_heads",),
    "MultiHeadAttention": ("MultiHeadAttention",),
}
BANS = Bans(ops=("scaled_dot_product", "multi_head"), references=tuple(n for v in REFERENCES.values() for n in v),
            modules=("nn.MultiheadAttention", "F.multi_head_attention_forward"))

NOT_CONTIGUOUS_HINT = ("after a transpose the tensor is no longer contiguous in memory, so .view cannot "
                       "regroup its last dims: use .reshape(...), or .contiguous().view(...)")
LEADING_HINT = ("count dims from the end so that any leading dims work: x.shape[:-1], "
                "transpose(-3, -2), unflatten(-1, ...) / flatten(-2)")


def leading_dims_lost(actual, expected_shape, what, n_dims):
    """With more than one leading dim, a result of another shape means they were not kept (code written for
    exactly (B, T, d) or (B, h, T, d_k), as most projects' is): say so."""
    if torch.is_tensor(actual) and n_dims > 3 + what.startswith("merge") and tuple(actual.shape) != tuple(expected_shape):
        raise AssertionError(f"{what} has shape {tuple(actual.shape)}, expected {tuple(expected_shape)}: the leading "
                             f"dims are not kept (code for one batch dim only); {LEADING_HINT}")


def split_expected(x, h):
    """(..., T, d) -> (..., h, T, d/h): head i holds features i*d/h ... (i+1)*d/h - 1."""
    return x.reshape(*x.shape[:-1], h, x.shape[-1] // h).transpose(-3, -2)


def merge_expected(y):
    """(..., h, T, d_k) -> (..., T, h*d_k): the inverse of split_expected."""
    return y.transpose(-3, -2).reshape(*y.shape[:-3], y.shape[-2], y.shape[-3] * y.shape[-1])

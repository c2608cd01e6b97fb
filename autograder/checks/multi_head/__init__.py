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


def split_expected(x, h):
    """(..., T, d) -> (..., h, T, d/h): head i holds features i*d/h ... (i+1)*d/h - 1."""
    return x.reshape(*x.shape[:-1], h, x.shape[-1] // h).transpose(-3, -2)


def merge_expected(y):
    """(..., h, T, d_k) -> (..., T, h*d_k): the inverse of split_expected."""
    return y.transpose(-3, -2).reshape(*y.shape[:-3], y.shape[-2], y.shape[-3] * y.shape[-1])

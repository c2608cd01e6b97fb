"""Hidden tests of notebook 01 (self-attention), one module per exercise.

References: PyTorch's built-ins (``torch.softmax``,
``F.scaled_dot_product_attention``), computed here in the grader, and the
course's ``lib.self_attention``, run trusted in the kernel for the earlier
exercises. Graded code may not call PyTorch's softmax or attention operators,
nor the course's references.
"""
import math

import torch
import torch.nn.functional as F

from ..kernel import Bans

REFERENCES = {  # exercise -> its references in lib.self_attention, in the notebook's order
    "softmax": ("softmax",),
    "simple_self_attention": ("simple_self_attention",),
    "scaled_dot_product_attention": ("scaled_dot_product_attention",),
    "SelfAttention": ("SelfAttention",),
}
BANS = Bans(ops=("softmax", "scaled_dot_product"), references=tuple(n for v in REFERENCES.values() for n in v))
BATCH_HINT = "With leading batch dims, transpose only the last two: k.transpose(-2, -1), not k.T"


def expected_attention(q, k, v, mask=None):
    """(output, weights) of attention, from PyTorch: the contract of scaled_dot_product_attention."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, -1)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return out, weights
